// Viewer frame-time benchmark: the same timeline frame drawn over a large synthetic capture
// (10M events by default) and over a small one (10k), side by side in one process, at three
// zoom levels (whole run, 1/1000 of it, a few events). Prints one JSON object with median and
// max frame times (ms) per capture and zoom, the large/small ratio, load times, and the GL
// renderer (llvmpipe under Xvfb). Issue target (reported, not asserted): <= 16 ms a frame at
// 10M events.
//
//   bench_view_frame [--events N] [--small N] [--frames N] [--size WxH] [--dir DIR] [--shape hooks|trace]
//
// --shape trace draws an imported torch.profiler trace instead (tests/synthetic.h's large
// trace run: CPU ops, CUDA launches, kernels on a stream and a launch flow each).
//
// Needs an X display: `./run bench` runs it under tools/with_display.sh (a private Xvfb).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"
#include "tests/synthetic.h"
#include "ui/view.h"
#include "ui/run_viewer.h"
#include "ui/window.h"

namespace {

namespace fs = std::filesystem;
using namespace hs;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

/// A synthetic capture with at least `events` events in its first run (made once, reused):
/// hookscope's own events (`trace` false) or an imported trace's rows.
fs::path capture(const fs::path& dir, int64_t events, bool trace) {
  const fs::path f = dir / ("view-bench-" + std::string(trace ? "trace-" : "") + std::to_string(events) + ".sqlite");
  if (fs::exists(f)) {
    try {
      storage::CaptureReader rd(f);
      if (rd.count(trace ? "CPU_OPS" : "HOOK_EVENTS") > 0) return f;
    } catch (const std::exception&) {
    }
  }
  fs::remove(f);
  storage::Store store(f);
  if (trace) {
    storage::write_large_trace_run(store, (events + 2) / 3);
  } else {
    storage::add_synthetic_devices(store, 4);
    storage::SyntheticRun s;
    s.layers = 32;
    s.min_events = events;
    storage::write_synthetic_run(store, s);
  }
  store.finalize();
  store.close();
  return f;
}

struct Zoom {
  const char* name;
  double fraction;  ///< of the run shown across the width
};

}  // namespace

int main(int argc, char** argv) {
  int64_t big = 10'000'000, small = 10'000;
  int frames = 60;
  std::string size = "1600x900";
  bool trace = false;
  fs::path dir = fs::temp_directory_path() / "hookscope-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--events") big = std::atoll(argv[i + 1]);
    else if (a == "--small") small = std::atoll(argv[i + 1]);
    else if (a == "--frames") frames = std::atoi(argv[i + 1]);
    else if (a == "--size") size = argv[i + 1];
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--shape" && (std::string(argv[i + 1]) == "hooks" || std::string(argv[i + 1]) == "trace"))
      trace = std::string(argv[i + 1]) == "trace";
    else {
      std::fprintf(stderr,
                   "usage: bench_view_frame [--events N] [--small N] [--frames N] [--size WxH] [--dir DIR] "
                   "[--shape hooks|trace]\n");
      return 2;
    }
  }
  fs::create_directories(dir);
  const auto [w, h] = ui::parse_size(size);
  const Zoom zooms[] = {{"whole_run", 1.0}, {"one_thousandth", 1e-3}, {"few_events", 1e-6}};

  nlohmann::json out{{"bench", "view_frame"}, {"shape", trace ? "trace" : "hooks"}, {"frames", frames}, {"size", size}};
  ui::GlWindow win(w, h, /*visible=*/false, "bench");
  out["renderer"] = win.renderer();
  std::map<std::string, double> median_of;
  for (int64_t n : {small, big}) {
    const auto t0 = Clock::now();
    const fs::path f = capture(dir, n, trace);
    const double make_ms = ms_since(t0);
    const auto t1 = Clock::now();
    auto rd = std::make_shared<const storage::CaptureReader>(f);
    ui::View view(rd);
    const double load_ms = ms_since(t1);
    const ui::RunTimeline* tl = view.timeline();
    nlohmann::json r{{"events", tl ? tl->event_count() : 0}, {"capture_ms", make_ms}, {"load_ms", load_ms}};
    double build_ms = 0;  // CPU time building the frame (View::Frame), the rest is ImGui + GL
    auto draw = [&](float fw, float fh) {
      const auto b0 = Clock::now();
      view.Frame(fw, fh);
      build_ms = ms_since(b0);
    };
    for (int i = 0; i < 3; ++i) win.frame(draw);  // layout settles
    for (const Zoom& z : zooms) {
      const double span = static_cast<double>(tl->duration_ns) * z.fraction;
      const double mid = static_cast<double>(tl->duration_ns) * 0.37;
      view.time_view().fit(mid - span / 2, mid + span / 2, 0);
      win.frame(draw);
      std::vector<double> t, build;
      for (int i = 0; i < frames; ++i) {
        // Pan a little every frame so nothing can be cached between frames.
        view.time_view().pan_px(i % 2 ? 3.0f : -3.0f);
        const auto f0 = Clock::now();
        win.frame(draw);
        t.push_back(ms_since(f0));
        build.push_back(build_ms);
      }
      std::sort(build.begin(), build.end());
      std::sort(t.begin(), t.end());
      const double med = t[t.size() / 2];
      median_of[std::to_string(n) + z.name] = med;
      r[z.name] = {{"median_ms", med},
                   {"max_ms", t.back()},
                   {"view_build_median_ms", build[build.size() / 2]},
                   {"boxes", view.layout().drawn_boxes},
                   {"merged_boxes", view.layout().merged_boxes}};
    }
    out[n == big ? "large" : "small"] = r;
  }
  for (const Zoom& z : zooms) {
    const double a = median_of[std::to_string(big) + z.name], b = median_of[std::to_string(small) + z.name];
    out["ratio_large_over_small"][z.name] = b > 0 ? a / b : 0;
    out["meets_16ms"][z.name] = a <= 16.0;
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
