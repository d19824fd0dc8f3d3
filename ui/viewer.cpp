#include "ui/viewer.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "storage/capture_reader.h"
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
}  // namespace

int run_viewer(const ViewerOptions& o) {
  // Everything that can fail on the file or the flags fails before a window opens.
  if (o.screenshot) check_output("--screenshot", *o.screenshot, o.file);
  if (o.layout) {
    check_output("--layout", *o.layout, o.file);
    if (o.screenshot && std::filesystem::weakly_canonical(*o.layout) == std::filesystem::weakly_canonical(*o.screenshot))
      throw std::invalid_argument("--layout: the same file as --screenshot");
  }
  if (o.run && o.compare && *o.run == *o.compare)
    throw std::invalid_argument("--compare: run " + std::to_string(*o.compare) + " is the run opened by --run");
  auto reader = std::make_shared<const storage::CaptureReader>(o.file);
  const Tab tab = parse_tab(o.view);
  View view(reader);
  if (o.run) view.SelectRun(*o.run);
  if (o.compare) view.SetCompareRun(*o.compare);
  view.SetTab(tab);
  auto draw = [&](float w, float h) { view.Frame(w, h); };

  if (o.screenshot) {
    GlWindow win(o.width, o.height, /*visible=*/false, "hookscope");
    for (int i = 0; i < std::max(o.frames, 1); ++i) win.frame(draw);
    write_png(*o.screenshot, win.width(), win.height(), win.read_rgba());
    if (o.layout) {
      std::ofstream f(*o.layout);
      nlohmann::json j = view.layout().to_json();
      j["file"] = o.file.string();
      j["run"] = view.run_id() ? nlohmann::json(*view.run_id()) : nlohmann::json(nullptr);
      j["size"] = {win.width(), win.height()};
      j["renderer"] = win.renderer();
      f << j.dump(1) << "\n";
      f.close();
      if (!f) throw std::runtime_error("cannot write " + o.layout->string());
    }
    std::fprintf(stderr, "[hookscope] wrote %s (%s view, %dx%d)\n", o.screenshot->c_str(), tab_name(view.tab()),
                 win.width(), win.height());
    return 0;
  }
  GlWindow win(o.width, o.height, /*visible=*/true, "hookscope - " + o.file.filename().string());
  while (!win.should_close()) win.frame(draw);
  return 0;
}

}  // namespace hs::ui
