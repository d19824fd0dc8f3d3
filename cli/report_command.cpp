// `hookscope report`: the report JSON (schema 2) of a capture, with totals from SQL over the
// recorded events, and its Markdown (reports/report.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/report_command.h"
#include "reports/report.h"
#include "reports/report_json.h"
#include "storage/capture_settings.h"
#include "reports/report_diff.h"
#include "reports/report_html.h"
#include "reports/report_svg.h"
#include "reports/stats.h"
#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/verdicts.h"
#include "measurement/verdict.h"
#include "storage/bounded_json.h"
#include "storage/capture_reader.h"
#include "storage/run_results.h"
#include "output/paths.h"
#include "output/text.h"

namespace hs::cli {

using nlohmann::json;

namespace {


/// What `hookscope report A B` was asked for.
struct ReportDiffArgs {
  std::string file_a, file_b;
  std::vector<std::string> labels;  ///< empty: the file stems
  std::string markdown, json_out, html;  ///< outputs ("" = none)
};

/// Registers on `report` what a second file needs: the positional `other_file`, `--labels A,B`
/// (two different names; a usage error otherwise, or without a second file) and the help's
/// paragraph on them. The returned arguments are filled by the parse (`file_b` empty: one
/// file); the caller fills in `file_a` and the outputs.
std::shared_ptr<ReportDiffArgs> add_report_diff_options(CLI::App& report);

/// Reads both captures (a file that is missing or not a capture fails with the reader's error,
/// naming it), writes the outputs (each under a temporary name, then renamed; never over either
/// capture) and prints the Markdown. Returns 0.
int run_report_diff(const ReportDiffArgs& args);


std::string report_diff_help() {
  return "Two files: `hookscope report A.sqlite B.sqlite [--labels main,pr]` compares the captures cell by cell "
         "(engine, scenario, policy, mode, fullgraph); --markdown, --json and --html then write the comparison.\n"
         "Comparison JSON (schema 1): {\"schema\": 1, \"kind\": \"report-diff\",\n"
         "  \"a\", \"b\": {\"label\", \"file\", \"runs\" (count), \"model\"},\n"
         "  \"settings_differ\": [{\"setting\", \"a\", \"b\"}] (model, devices, tokens, repeats, versions, the "
         "capture's settings; null where a side lacks it),\n"
         "  \"eager_moved\": [{\"engine\", \"scenario\", \"policy\", \"mode\", \"fullgraph\", \"measurement\" (eager run|"
         "interleaved eager), \"factor\" (B/A), \"a_ms_per_token\", \"b_ms_per_token\"}] (per engine and scenario where an "
         "eager decode time moved beyond its spread, the one that moved furthest, an eager cell's before an interleaved "
         "eager: the machine changed),\n"
         "  \"counts\": {\"matched\", \"faster\", \"slower\", \"within noise\", \"machine drift\"} (the cells' verdicts),\n"
         "  \"cells\": [{\"engine\", \"scenario\", \"policy\", \"mode\", \"fullgraph\", [\"occurrence\"],\n"
         "     \"a\", \"b\": {\"run\", \"status\", \"outcome\" (ok|error|works|raises|incomplete), \"graph_break_count\", "
         "\"disabled_scope_entries\", [\"error\"]},\n"
         "     \"breaks_changed\", \"outcome_changed\",\n"
         "     \"latency\": {METRIC: {\"a\", \"b\" (the latency objects, ms), \"ratio\" (B/A), \"delta_pct\", "
         "\"spread\" (iqr|min-max), \"verdict\" (within noise|faster|slower|not judged|null: the absolute comparison)}}\n"
         "       with METRIC decode_ms_per_token, prefill_ms or eager_decode_ms_per_token (a compiled run's interleaved eager),\n"
         "     \"speedup_vs_eager\" (compiled cells): {\"a\", \"b\" (each run's speedup_vs_eager: eager ÷ compiled decode "
         "per measured round), \"ratio\" (B/A), \"delta_pct\", \"spread\", \"verdict\" (faster: B's compiled gained on "
         "its own eager)},\n"
         "     \"judged_by\" (absolute|speedup_vs_eager), \"verdict\" (within noise|faster|slower|not judged|machine "
         "drift|null: what the tables show), \"why\" (one sentence where eager moved, else null),\n"
         "     \"costs\": {FIGURE: {\"a\", \"b\", \"delta\" (B − A), \"delta_pct\"}} with FIGURE hook_busy_ns, hook_calls, "
         "disabled_busy_ns, disabled_entries, transfers, transfer_bytes (each run's stats.totals) and graph_break_count, "
         "disabled_scope_entries (the run's own)}],\n"
         "  \"only_in_a\", \"only_in_b\": [{\"engine\", \"scenario\", \"policy\", \"mode\", \"fullgraph\", \"run\", "
         "\"outcome\"}]}\n"
         "Verdict (the rule of compiled vs eager): \"within noise\" when the spreads overlap (q1–q3 where both "
         "record them, else min–max), else \"faster\"/\"slower\" for B; \"not judged\" when a side measured fewer "
         "than 3 generates. Eager is compared first, per engine and scenario: where an eager decode time (an eager "
         "cell's, or a compiled cell's interleaved eager) moved beyond its spread, the machine changed between the "
         "captures, its eager cells read \"machine drift\" instead of faster/slower and its compiled cells are judged by "
         "their speed-up over their own file's eager (judged_by speedup_vs_eager), a change standing only when it is "
         "larger than the factor eager moved by; elsewhere by absolute decode ms/token.";
}

int run_report_diff(const ReportDiffArgs& args) {
  // A file against itself would read "within noise" in every cell: evidence of nothing.
  if (output::same_file(args.file_a, args.file_b))
    throw std::invalid_argument(args.file_b + " is the same file as " + args.file_a +
                                ": a comparison needs two captures (before and after)");
  const auto [la, lb] = reports::diff_labels(args.file_a, args.file_b, args.labels);
  const reports::DiffSide a = reports::read_diff_side(args.file_a, la), b = reports::read_diff_side(args.file_b, lb);
  const json diff = reports::build_report_diff(a, b);
  const std::string md = reports::render_diff_markdown(diff);
  // The captures are inputs: never written over, whatever name or link points at them.
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"--markdown", args.markdown}, {"--json", args.json_out}, {"--html", args.html}};
  for (const auto& [flag, out] : outputs)
    for (const reports::DiffSide* side : {&a, &b})
      if (!out.empty()) output::refuse_overwriting_input(flag, out, side->file, "compared", side->models);
  output::refuse_shared_outputs(outputs);
  if (!args.markdown.empty()) output::write_output_file(args.markdown, md);
  if (!args.json_out.empty()) output::write_output_file(args.json_out, output::json_text(diff, 2) + "\n");
  if (!args.html.empty()) output::write_output_file(args.html, reports::render_diff_html(diff, md));
  std::cout << md;
  return 0;
}

std::shared_ptr<ReportDiffArgs> add_report_diff_options(CLI::App& report) {
  auto args = std::make_shared<ReportDiffArgs>();
  auto* other = report.add_option("other_file", args->file_b,
                                  "A second capture: before (the first file) / after (this one), matched cell by cell");
  report
      .add_option_function<std::string>(
          "--labels", [args](const std::string& s) { args->labels = output::split_list(s); },
          "With two files: their names in the tables, A,B (default: the file names)")
      ->check([](const std::string& s) {
        try {
          const auto v = output::split_list(s);
          reports::diff_labels("", "", v.empty() ? std::vector<std::string>{""} : v);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what()).substr(std::string("--labels: ").size());  // CLI11 names the option
        }
      })
      ->needs(other);
  report.footer([] { return report_diff_help(); });
  return args;
}

}  // namespace

namespace {

struct ReportArgs {
  std::string file, markdown, json_out, html, assets;
  std::vector<int64_t> timeline_runs;  ///< drawn in --html / --assets (empty: the default choice)
};

int run_report(const ReportArgs& a) {
  storage::CaptureReader rd(a.file);
  json report = reports::build_report(rd);
  if (report["runs"].empty()) throw std::invalid_argument(a.file + ": the capture holds no runs");
  std::string md = reports::render_markdown(report);
  // The capture and its model's files are inputs: never written over, whatever name or link points at them.
  const auto models = output::model_folders(rd);
  // The pictures (compare chart, timelines): inline in the HTML, files beside the Markdown.
  std::vector<reports::ReportPicture> pictures;
  if (!a.html.empty() || !a.assets.empty()) pictures = reports::report_pictures(rd, report, a.timeline_runs);
  output::refuse_files_around_folder("--assets", a.assets,
                                     {{"--markdown", a.markdown}, {"--json", a.json_out}, {"--html", a.html}});
  if (!a.assets.empty())  // each picture is an output too: none may be another flag's file
    for (const auto& p : pictures)
      output::refuse_shared_outputs({{"--markdown", a.markdown},
                                     {"--json", a.json_out},
                                     {"--html", a.html},
                                     {"--assets", (std::filesystem::path(a.assets) / p.file).string()}});
  for (const auto& [flag, out] : {std::pair{"--markdown", a.markdown}, std::pair{"--json", a.json_out},
                                   std::pair{"--html", a.html}}) {
    if (out.empty()) continue;
    const std::filesystem::path folder = std::filesystem::path(out).parent_path();  // --assets makes it
    const bool made = !a.assets.empty() && output::path_inside(folder.empty() ? "." : folder, a.assets);
    output::refuse_overwriting_input(flag, out, a.file, "reported", models, made);
  }
  output::refuse_shared_outputs({{"--markdown", a.markdown}, {"--json", a.json_out}, {"--html", a.html}});
  const auto write = output::write_output_file;
  const std::string tables_md = reports::render_tables_markdown(report);  // the HTML writes its own verdict
  if (!a.assets.empty()) md += reports::write_picture_assets(pictures, a.assets, a.markdown, a.file, models);
  if (!a.markdown.empty()) write(a.markdown, md);
  if (!a.json_out.empty()) write(a.json_out, output::json_text(report, 2) + "\n");
  if (!a.html.empty())
    write(a.html, reports::render_html(report, tables_md, pictures, std::filesystem::path(a.file).filename().string()));
  std::cout << md;
  return 0;
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ReportArgs>();
  auto* c = app.add_subcommand("report",
                               "The comparison from a capture: its Markdown is always printed to stdout, and "
                               "--markdown / --json / --html write it to files as well");
  c->add_option("file", a->file, kCaptureFileHelp)->required();
  auto diff = add_report_diff_options(*c);  // `report A B`: before/after (reports/report_diff.h)
  auto* markdown = c->add_option("--markdown", a->markdown, "Also write the Markdown here");
  c->add_option("--json", a->json_out, "Write the report JSON (schema 2) here");
  c->add_option("--html", a->html,
                "Write one self-contained HTML page here: the verdict first (its runs linked), the compare chart and "
                "timelines as inline SVG, the tables with each check explained, every run, the settings (no scripts, "
                "nothing fetched); with two files, the "
                "before/after comparison as one page");
  c->add_option("--assets", a->assets, "With --markdown: write the chart and timelines as SVG files in this folder, linked from the Markdown")
      ->needs(markdown);
  c->add_option("--timeline-runs", a->timeline_runs,
                "Runs drawn as timelines by --html / --assets (default: the first verdict's compiled runs, whole-hook "
                "above offload-only; without a verdict one compiled run per policy of the first scenario)")
      ->delimiter(',');
  c->footer("Examples:\n  hookscope report out/demo.sqlite --markdown out/report.md --json out/report.json\n"
            "  hookscope report out/demo.sqlite --html out/report.html --timeline-runs 2,6\n"
            "  hookscope report out/demo.sqlite --markdown out/report.md --assets out/report-assets\n"
            "  hookscope report main.sqlite pr.sqlite --labels main,pr --markdown diff.md --html diff.html");
  c->callback([a, diff, &run_selected] {
    run_selected = [a, diff] {
      if (diff->file_b.empty()) return run_report(*a);
      for (const auto& [flag, set] : {std::pair{"--assets", !a->assets.empty()},
                                      std::pair{"--timeline-runs", !a->timeline_runs.empty()}})
        if (set)
          throw std::invalid_argument(std::string(flag) +
                                      " draws the report of one capture; with two files (before/after) write "
                                      "--markdown, --json or --html, or run `report` on each file");
      diff->file_a = a->file;
      diff->markdown = a->markdown;
      diff->json_out = a->json_out;
      diff->html = a->html;
      return run_report_diff(*diff);
    };
  });
  return c;
}

}  // namespace hs::cli
