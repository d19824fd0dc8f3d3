#include "ui/run_viewer.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "output/labels.h"
#include "output/text.h"
#include "storage/capture_reader.h"
#include "storage/capture_settings.h"
#include "storage/run_results.h"
#include "ui/view.h"
#include "ui/window.h"

namespace hs::ui {

std::pair<int, int> parse_size(const std::string& s) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(s.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X') || w < 200 || h < 200 ||
      w > 8192 || h > 8192)
    throw std::invalid_argument("--size: expected WIDTHxHEIGHT in pixels, each 200..8192 (e.g. 1600x900), got '" + s +
                                "'");
  return {w, h};
}

namespace {
/// An output must never be the capture itself (or its -wal/-shm), nor the other output.
void check_output(const char* flag, const std::filesystem::path& out, const std::filesystem::path& capture) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const fs::path p = capture.string() + suffix;
    // Same file by inode (hard or symbolic links), or by path (./x, a/../x) when none exists yet.
    const bool same = (fs::exists(out, ec) && fs::exists(p, ec) && fs::equivalent(out, p, ec)) ||
                      fs::weakly_canonical(out, ec) == fs::weakly_canonical(p, ec);
    if (same)
      throw std::invalid_argument(std::string(flag) + ": " + out.string() + " is the capture being viewed (" +
                                  p.string() + "); choose another output file");
  }
}

/// The View on the options' captures with the runs the flags ask for: loading in the
/// background for a window (usable at once), loaded before it returns for a screenshot.
std::unique_ptr<View> open_view(const ViewerOptions& o) {
  std::vector<std::shared_ptr<const storage::CaptureReader>> readers{
      std::make_shared<const storage::CaptureReader>(o.file)};
  std::vector<std::string> labels;
  if (o.other) {
    readers.push_back(std::make_shared<const storage::CaptureReader>(*o.other));
    auto [a, b] = output::capture_labels(o.file, *o.other);  // as `report A B` names them
    labels = {std::move(a), std::move(b)};
  }
  const Tab tab = parse_tab(o.view);
  // A run's results of another shape than hookscope writes fail here naming the run and field
  // (as report and explain do), not in the middle of a frame. So do rows no capture writes for
  // a screenshot; a window opens at once and says so for the run that has them when it loads
  // it (its load checks the rows it reads, storage::CaptureReader::read_shared).
  const bool window = !o.screenshot;
  for (const auto& rd : readers) {
    (void)storage::capture_settings(*rd);  // damaged settings: refused as by report, stats, explain, export
    for (const auto& run : rd->runs()) {
      storage::check_run_results(run.results, *rd, run.id);
      if (!window) rd->check_rows(run.id);
    }
  }
  ViewOptions options;
  options.background = window;
  auto view = std::make_unique<View>(std::move(readers), labels, options);
  const size_t compare_capture = o.other ? 1 : 0;
  // An unknown id names the flag that gave it.
  auto flagged = [](const char* flag, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const std::out_of_range& e) {
      throw std::out_of_range(std::string(flag) + ": " + e.what());
    }
  };
  if (o.run) flagged("--run", [&] { view->SelectRun(*o.run); });
  if (o.compare)
    flagged("--compare", [&] { view->SetCompareRun(*o.compare, compare_capture); });
  else if (o.run && o.other)
    view->SetCompareRun(view->MatchingRun(1), 1);  // the other capture's run of the same cell
  view->SetTab(tab);
  return view;
}

}  // namespace

int run_viewer(const ViewerOptions& o) {
  // Everything that can fail on the files or the flags fails before a window opens.
  for (const auto& capture : {std::optional(o.file), o.other}) {
    if (!capture) continue;
    if (o.screenshot) check_output("--screenshot", *o.screenshot, *capture);
    if (o.layout) check_output("--layout", *o.layout, *capture);
  }
  if (o.layout && o.screenshot &&
      std::filesystem::weakly_canonical(*o.layout) == std::filesystem::weakly_canonical(*o.screenshot))
    throw std::invalid_argument("--layout: the same file as --screenshot");
  if (o.run && o.compare && *o.run == *o.compare && !o.other)
    throw std::invalid_argument("--compare: run " + std::to_string(*o.compare) + " is the run opened by --run");
  const std::unique_ptr<View> view_ptr = open_view(o);
  View& view = *view_ptr;
  auto draw = [&](float w, float h) { view.Frame(w, h); };

  if (o.screenshot) {
    GlWindow win(o.width, o.height, /*visible=*/false, "hookscope");
    for (int i = 0; i < std::max(o.frames, 1); ++i) win.frame(draw);
    const auto write = o.write_file ? o.write_file : write_file;
    write(*o.screenshot, encode_png(win.width(), win.height(), win.read_rgba()));
    if (o.layout) {
      nlohmann::json j = view.layout().to_json();
      j["file"] = o.file.string();
      if (o.other) j["other_file"] = o.other->string();
      j["run_capture"] = view.run_capture() ? nlohmann::json(*view.run_capture()) : nlohmann::json(nullptr);
      j["compare_run"] = view.timeline(1) ? nlohmann::json(view.timeline(1)->run.id) : nlohmann::json(nullptr);
      j["compare_capture"] = view.run_capture(1) ? nlohmann::json(*view.run_capture(1)) : nlohmann::json(nullptr);
      j["run"] = view.run_id() ? nlohmann::json(*view.run_id()) : nlohmann::json(nullptr);
      j["size"] = {win.width(), win.height()};
      j["renderer"] = win.renderer();
      // A capture's names may hold any bytes; the layout is JSON (UTF-8): bad bytes become U+FFFD.
      write(*o.layout, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
    std::fprintf(stderr, "[hookscope] wrote %s (%s view, %dx%d)\n", output::terminal_text(o.screenshot->string()).c_str(),
                 tab_name(view.tab()), win.width(), win.height());
    return 0;
  }
  GlWindow win(o.width, o.height, /*visible=*/true,
               "hookscope - " + o.file.filename().string() + (o.other ? " vs " + o.other->filename().string() : ""));
  while (!win.should_close()) win.frame(draw);
  return 0;
}

}  // namespace hs::ui
