#include "cli/view_command.h"

#include <memory>

#include "cli/cli_util.h"
#include "storage/capture_reader.h"
#include "ui/run_viewer.h"
#include "output/paths.h"

namespace hs::cli {

namespace {
// The viewer checks its outputs against the captures; the checkpoints their runs were made from
// are known here (model_folders): --screenshot / --layout naming a model's file are refused.
void refuse_model_outputs(const ui::ViewerOptions& v) {
  for (const auto& capture : {std::optional(v.file), v.other}) {
    if (!capture || (!v.screenshot && !v.layout)) continue;
    const auto models = output::model_folders(storage::CaptureReader(*capture));
    if (v.screenshot) output::refuse_overwriting_input("--screenshot", *v.screenshot, *capture, "viewed", models);
    if (v.layout) output::refuse_overwriting_input("--layout", *v.layout, *capture, "viewed", models);
  }
  // Two names of one file (`s.png` and `./s.png`, a link): the layout would replace the picture.
  output::refuse_shared_outputs({{"--screenshot", v.screenshot ? v.screenshot->string() : std::string()},
                                 {"--layout", v.layout ? v.layout->string() : std::string()}});
}
}  // namespace

CLI::App* add_view_command(CLI::App& app, std::function<int()>& run_selected) {
  auto o = std::make_shared<ui::ViewerOptions>();
  auto file = std::make_shared<std::string>();
  auto other = std::make_shared<std::string>();
  auto size = std::make_shared<std::string>("1600x900");
  auto shot = std::make_shared<std::string>();
  auto layout = std::make_shared<std::string>();
  auto run = std::make_shared<int64_t>(0);
  auto compare = std::make_shared<int64_t>(0);
  auto* cmd = app.add_subcommand(
      "view", "Open a capture in the desktop viewer: per-device timelines, the compile-mode comparison, graph "
              "breaks, transfers and weight swaps (read-only)");
  cmd->add_option("file", *file, kCaptureFileHelp)->required();
  cmd->add_option("other_file", *other,
                  "A second capture (before/after): its runs are listed beside the first's, and --compare names one "
                  "of its runs (default: its run of the opened run's cell)");
  cmd->add_option("--view", o->view, "View to open")
      ->check(CLI::IsMember({"timeline", "compare", "breaks", "transfers", "swaps"}))
      ->capture_default_str();
  auto* run_opt = cmd->add_option("--run", *run, "Run id to open (default: the first compiled run without fullgraph)");
  auto* cmp_opt = cmd->add_option("--compare", *compare,
                                  "A second run id (of other_file when given), drawn under the first on the same time "
                                  "scale");
  cmd->add_option("--size", *size, "Window or screenshot size, WIDTHxHEIGHT pixels")
      ->check([](const std::string& s) {
        try {
          ui::parse_size(s);
          return std::string();
        } catch (const std::exception& e) {
          std::string m = e.what();
          return m.rfind("--size: ", 0) == 0 ? m.substr(8) : m;  // CLI11 names the option itself
        }
      })
      ->capture_default_str();
  auto* shot_opt = cmd->add_option("--screenshot", *shot,
                  "Render without a person and write this PNG, then exit (needs an X display: use xvfb-run -a "
                  "on a headless machine)")
      ->check([](const std::string& s) {
        if (s.size() < 5 || s.compare(s.size() - 4, 4, ".png") != 0)
          return std::string("expected a .png file name, got '" + s + "'");
        return std::string();
      });
  cmd->add_option("--layout", *layout, "With --screenshot: also write what was drawn where as JSON")->needs(shot_opt);
  cmd->footer(
      "Keys and mouse (timeline): wheel zooms around the cursor (Ctrl finer, Shift faster), drag pans, W/S zoom, "
      "A/D pan, click selects, drag on the ruler selects a range for its statistics, right-click on the ruler "
      "clears it; Ctrl+click a run in Runs or Compare to align it under the open one.\n"
      "Examples:\n"
      "  hookscope view out/demo.sqlite\n"
      "  xvfb-run -a hookscope view out/demo.sqlite --screenshot out/compare.png --view compare --size 1600x900\n"
      "  hookscope view out/demo.sqlite --run 2 --compare 12\n"
      "  hookscope view main.sqlite pr.sqlite --run 2 --view compare   (before/after: run 2 above pr's run of its cell)");
  run_selected = [o, file, other, size, shot, layout, run, compare, run_opt, cmp_opt] {
    ui::ViewerOptions v = *o;
    v.file = *file;
    if (!other->empty()) v.other = *other;
    std::tie(v.width, v.height) = ui::parse_size(*size);
    if (!shot->empty()) v.screenshot = *shot;
    if (!layout->empty()) v.layout = *layout;
    if (run_opt->count()) v.run = *run;
    if (cmp_opt->count()) v.compare = *compare;
    // A file beside itself would compare a capture with itself: evidence of nothing.
    if (v.other && output::same_file(v.file, *v.other))
      throw std::invalid_argument(v.other->string() + " is the same file as " + v.file.string() +
                                  ": a before/after view needs two captures");
    refuse_model_outputs(v);
    v.write_file = output::write_output_file;
    return ui::run_viewer(v);
  };
  return cmd;
}

}  // namespace hs::cli
