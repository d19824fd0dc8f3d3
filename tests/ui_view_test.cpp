// The viewer with a window (a private Xvfb when headless, see with_display.sh): screenshots of
// every view, input driven through ImGuiIO exactly as a mouse and keyboard drive it, the LOD
// on a large capture, and files that are not captures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include <sqlite3.h>
#include <stb_image.h>

#include "storage/capture_reader.h"
#include "storage/schema.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"
#include "ui/run_timeline.h"
#include "ui/view.h"
#include "ui/run_viewer.h"
#include "ui/typography.h"
#include "ui/window.h"

namespace {

using namespace hs;
using namespace hs::ui;
namespace fs = std::filesystem;

struct Capture {
  fs::path file;
  std::vector<storage::SyntheticResult> runs;
};

/// Four runs like a small demo: sharded under both policies, a fullgraph run that raises, an
/// offloaded run.
Capture make_capture(const std::string& name, int64_t min_events = 0, int64_t tokens = 4) {
  Capture c;
  c.file = test::scratch_dir(name) / "synthetic.sqlite";
  storage::Store store(c.file);
  storage::add_synthetic_devices(store, 4);
  storage::SyntheticRun s;
  s.min_events = min_events;
  s.tokens = tokens;
  c.runs.push_back(storage::write_synthetic_run(store, s));
  s.min_events = 0;
  s.policy = "offload-only";
  c.runs.push_back(storage::write_synthetic_run(store, s));
  s.policy = "whole-hook";
  s.fullgraph = true;
  c.runs.push_back(storage::write_synthetic_run(store, s));
  s.fullgraph = false;
  s.scenario = "cpu-offload";
  s.policy = "offload-only";
  s.offload = true;
  s.mode = "eager";
  c.runs.push_back(storage::write_synthetic_run(store, s));
  store.finalize();
  store.close();
  return c;
}

struct Png {
  int w = 0, h = 0;
  std::vector<uint8_t> px;
  size_t distinct_colors(int x0, int y0, int x1, int y1) const {
    std::set<uint32_t> c;
    for (int y = std::max(y0, 0); y < std::min(y1, h); ++y)
      for (int x = std::max(x0, 0); x < std::min(x1, w); ++x) {
        const uint8_t* p = &px[(static_cast<size_t>(y) * w + x) * 4];
        c.insert(p[0] << 16 | p[1] << 8 | p[2]);
      }
    return c.size();
  }
};
Png load_png(const fs::path& p) {
  Png png;
  int n = 0;
  unsigned char* d = stbi_load(p.c_str(), &png.w, &png.h, &n, 4);
  if (!d) throw std::runtime_error("cannot read " + p.string());
  png.px.assign(d, d + static_cast<size_t>(png.w) * png.h * 4);
  stbi_image_free(d);
  return png;
}

TEST(ViewScreenshot, EveryViewRendersWithOneLaneGroupPerDevice) {
  auto c = make_capture("shot_views");
  const fs::path dir = c.file.parent_path();
  for (const char* v : {"timeline", "compare", "breaks", "transfers", "swaps"}) {
    ViewerOptions o;
    o.file = c.file;
    o.view = v;
    o.width = 1400;
    o.height = 1200;
    o.screenshot = dir / (std::string(v) + ".png");
    o.layout = dir / (std::string(v) + ".json");
    if (std::string(v) == "swaps") o.run = c.runs[3].run_id;
    ASSERT_EQ(run_viewer(o), 0) << v;
    Png png = load_png(*o.screenshot);
    EXPECT_EQ(png.w, 1400);
    EXPECT_EQ(png.h, 1200);
    EXPECT_GT(png.distinct_colors(0, 0, png.w, png.h), 12u) << v << ": blank screenshot";
    auto j = test::read_json(*o.layout);
    EXPECT_EQ(j["tab"], v);
    if (std::string(v) == "timeline") {
      std::vector<std::string> groups;
      for (const auto& g : j["groups"]) groups.push_back(g["host"].get<bool>() ? "host" : g["device"].get<std::string>());
      EXPECT_EQ(groups, (std::vector<std::string>{"0", "1", "2", "3", "cpu", "host"}));
      // Each lane group has something drawn in it (the screenshot is tall enough for all).
      ASSERT_LE(j["groups"].back()["rect"][3].get<double>(), j["lanes"][1].get<double>()) << "not all groups visible";
      const int x0 = static_cast<int>(j["canvas"][0].get<double>()), x1 = static_cast<int>(j["canvas"][1].get<double>());
      for (const auto& g : j["groups"]) {
        EXPECT_TRUE(g["visible"].get<bool>()) << g["title"];
        auto r = g["rect"];
        EXPECT_GT(png.distinct_colors(x0, static_cast<int>(r[1].get<double>()) + 20, x1,
                                      static_cast<int>(r[3].get<double>())),
                  4u)
            << "empty lane group " << g["title"];
      }
    }
    if (std::string(v) == "compare") {
      std::set<int64_t> shown;
      for (const auto& r : j["compare_rows"]) shown.insert(r["run"].get<int64_t>());
      EXPECT_EQ(shown.size(), c.runs.size()) << j.dump();
    }
  }
}

/// A run imported from a torch.profiler trace of a GPU (tests/synthetic.h), appended to a
/// capture the LibTorch engine wrote, is drawn like any other: its GPU with a lane per stream,
/// its host threads with their CPU ops and CUDA API calls, the launch flows between them.
TEST(ViewScreenshot, AnImportedTraceRunShowsItsGpuStreamsAndHostThreads) {
  const fs::path dir = test::scratch_dir("shot_trace");
  const fs::path file = dir / "mixed.sqlite";
  storage::SyntheticTrace trace;
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 4);
    storage::SyntheticRun s;
    s.layers = 4;
    s.tokens = 2;
    storage::write_synthetic_run(store, s);
    trace = storage::write_synthetic_trace_run(store);
    store.finalize();
    store.close();
  }
  ViewerOptions o;
  o.file = file;
  o.run = trace.run_id;
  o.width = 1400;
  o.height = 800;
  o.screenshot = dir / "trace.png";
  o.layout = dir / "trace.json";
  ASSERT_EQ(run_viewer(o), 0);
  Png png = load_png(*o.screenshot);
  auto j = test::read_json(*o.layout);
  std::vector<std::string> groups;
  for (const auto& g : j["groups"]) groups.push_back(g["host"].get<bool>() ? "host" : g["device"].get<std::string>());
  EXPECT_EQ(groups, (std::vector<std::string>{"0", "host", "host"}));
  EXPECT_NE(j["groups"][0]["title"].get<std::string>().find("NVIDIA H200"), std::string::npos);
  EXPECT_EQ(j["groups"][2]["title"], "host thread (tid 4300)");
  const int x0 = static_cast<int>(j["canvas"][0].get<double>()), x1 = static_cast<int>(j["canvas"][1].get<double>());
  for (const auto& g : j["groups"]) {
    EXPECT_TRUE(g["visible"].get<bool>()) << g["title"];
    auto r = g["rect"];
    EXPECT_GT(png.distinct_colors(x0, static_cast<int>(r[1].get<double>()) + 20, x1, static_cast<int>(r[3].get<double>())),
              4u)
        << "empty lane group " << g["title"];
  }
}

// Drives the View through ImGuiIO: the same path as a person (and --screenshot) takes.
struct Driver {
  GlWindow win{1200, 700, false, "test"};
  std::shared_ptr<const storage::CaptureReader> rd;
  View view;
  explicit Driver(const fs::path& f) : rd(std::make_shared<const storage::CaptureReader>(f)), view(rd) {}
  /// Two captures side by side (before/after).
  Driver(const fs::path& f, const fs::path& g)
      : rd(std::make_shared<const storage::CaptureReader>(f)),
        view(std::vector<std::shared_ptr<const storage::CaptureReader>>{
            rd, std::make_shared<const storage::CaptureReader>(g)}) {}
  void frame(const ScriptedInput& in) {
    win.frame([&](float w, float h) { view.Frame(w, h); }, &in);
  }
  /// Moves the mouse to (x, y), presses and releases the left button: one frame each (Shift
  /// held throughout when `shift`).
  void click(float x, float y, bool shift = false) {
    ScriptedInput in;
    in.x = x;
    in.y = y;
    in.shift = shift;
    frame(in);
    in.down[0] = true;
    frame(in);
    in.down[0] = false;
    frame(in);
  }
  void idle(int n = 1, float x = -1, float y = -1) {
    for (int i = 0; i < n; ++i) {
      ScriptedInput in;
      in.x = x;
      in.y = y;
      frame(in);
    }
  }
  /// Holds `key` for one frame (with Shift when `shift`), then releases it.
  void press(int key, bool shift = false) {
    ScriptedInput in;
    in.keys = {key};
    in.shift = shift;
    frame(in);
    in.keys.clear();
    frame(in);
  }
  /// Types `text`, a character a frame, as ImGui receives typing (io.AddInputCharacter).
  void type(const std::string& text) {
    for (char c : text) {
      ScriptedInput in;
      in.text = std::string(1, c);
      frame(in);
    }
  }
  void screenshot(const fs::path& png) { write_png(png, win.width(), win.height(), win.read_rgba()); }
};

using keys::kEnter, keys::kEscape, keys::kF1, keys::kF3;
constexpr int kHome = 268;  // GLFW_KEY_HOME

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(ViewInput, WheelZoomsAroundTheCursorDragPansKeysMove) {
  auto c = make_capture("input_nav");
  Driver d(c.file);
  d.idle(3);
  const auto& l = d.view.layout();
  ASSERT_GT(l.canvas_x1, l.canvas_x0);
  const TimeView before = d.view.time_view();
  // ImGui floors the mouse position: use whole pixels.
  const float mx = std::floor(l.canvas_x0 + 0.3f * (l.canvas_x1 - l.canvas_x0)), my = std::floor(l.groups.at(1).y0 + 30);
  const double t_under = before.t_of(mx - l.canvas_x0);
  d.idle(1, mx, my);  // hover first so the lanes own the mouse
  ScriptedInput wheel;
  wheel.x = mx;
  wheel.y = my;
  wheel.wheel = 2;  // two clicks in
  d.frame(wheel);
  d.idle(1, mx, my);
  const TimeView z = d.view.time_view();
  EXPECT_NEAR(z.ns_per_px, before.ns_per_px / (1.25 * 1.25), before.ns_per_px * 1e-9);
  EXPECT_NEAR(z.t_of(mx - l.canvas_x0), t_under, z.ns_per_px * 0.01);  // the time under the cursor stayed

  // Drag left by 200 px: later times come into view.
  ScriptedInput in;
  in.x = mx;
  in.y = my;
  in.down[0] = true;
  d.frame(in);
  for (int i = 1; i <= 10; ++i) {
    in.x = mx - 20.0f * i;
    d.frame(in);
  }
  in.down[0] = false;
  d.frame(in);
  const TimeView p = d.view.time_view();
  EXPECT_NEAR(p.start_ns - z.start_ns, 200 * z.ns_per_px, z.ns_per_px * 1.01);
  EXPECT_DOUBLE_EQ(p.ns_per_px, z.ns_per_px);

  // D pans right by a tenth of the view, W zooms in around the centre.
  ScriptedInput key;
  key.keys = {'D'};
  d.frame(key);
  d.idle();
  EXPECT_NEAR(d.view.time_view().start_ns - p.start_ns, 0.1 * p.width_px * p.ns_per_px, p.ns_per_px);
  const TimeView before_w = d.view.time_view();
  key.keys = {'W'};
  d.frame(key);
  d.idle();
  EXPECT_NEAR(d.view.time_view().ns_per_px, before_w.ns_per_px / 1.25, before_w.ns_per_px * 1e-9);
  EXPECT_NEAR(d.view.time_view().t_of(0.5f * before_w.width_px), before_w.t_of(0.5f * before_w.width_px),
              before_w.ns_per_px);
}

TEST(ViewInput, CtrlWheelIsFinerShiftWheelFasterSZoomsOutAPansLeft) {
  auto c = make_capture("input_nav_mods");
  Driver d(c.file);
  d.idle(3);
  const auto& l = d.view.layout();
  const float mx = std::floor(l.canvas_x0 + 0.6f * (l.canvas_x1 - l.canvas_x0)), my = std::floor(l.groups.at(1).y0 + 30);
  d.idle(1, mx, my);
  auto wheel = [&](bool ctrl, bool shift) {
    const TimeView before = d.view.time_view();
    ScriptedInput in;
    in.x = mx;
    in.y = my;
    in.wheel = 1;
    in.ctrl = ctrl;
    in.shift = shift;
    d.frame(in);
    d.idle(1, mx, my);
    const TimeView after = d.view.time_view();
    EXPECT_NEAR(after.t_of(mx - l.canvas_x0), before.t_of(mx - l.canvas_x0), after.ns_per_px * 0.01)
        << "the time under the cursor stays";
    return before.ns_per_px / after.ns_per_px;
  };
  EXPECT_NEAR(wheel(true, false), 1.05, 1e-9) << "Ctrl: finer";
  EXPECT_NEAR(wheel(false, true), 2.0, 1e-9) << "Shift: faster";
  EXPECT_NEAR(wheel(false, false), 1.25, 1e-9) << "plain";
  // S zooms out around the centre, A pans left by a tenth of the view (Tracy's keys).
  const TimeView before_s = d.view.time_view();
  d.press('S');
  d.idle();
  EXPECT_NEAR(d.view.time_view().ns_per_px, before_s.ns_per_px * 1.25, before_s.ns_per_px * 1e-9);
  EXPECT_NEAR(d.view.time_view().t_of(0.5f * before_s.width_px), before_s.t_of(0.5f * before_s.width_px),
              before_s.ns_per_px * 1.25);
  const TimeView before_a = d.view.time_view();
  d.press('A');
  d.idle();
  EXPECT_NEAR(before_a.start_ns - d.view.time_view().start_ns, 0.1 * before_a.width_px * before_a.ns_per_px,
              before_a.ns_per_px);
}

TEST(ViewInput, ClickingABreakRowCentresAndSelectsItOnTheTimeline) {
  auto c = make_capture("input_break");
  Driver d(c.file);
  d.view.SetTab(Tab::Breaks);
  d.idle(4);
  ASSERT_EQ(d.view.tab(), Tab::Breaks);
  const RunTimeline* tl = d.view.timeline();
  ASSERT_NE(tl, nullptr);
  ASSERT_GE(tl->graph_breaks.size(), 3u);
  // Zoom in first so centring is visible: the view shows 1/50 of the run.
  d.view.time_view().fit(0, static_cast<double>(tl->duration_ns) / 50, 0);
  // Rows are sorted by time: the third row is the third break. Click where it was drawn.
  const auto& rows = d.view.layout().table_rows;
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[2].row, 2u);
  d.click(600, 0.5f * (rows[2].y0 + rows[2].y1));
  d.idle(2);
  ASSERT_TRUE(d.view.selection().has_value());
  EXPECT_EQ(d.view.selection()->source, Source::Break);
  const uint32_t row = d.view.selection()->row;
  EXPECT_EQ(d.view.tab(), Tab::Timeline);
  const double t = static_cast<double>(tl->graph_breaks.at(row).time_ns - tl->origin_ns);
  const TimeView& v = d.view.time_view();
  EXPECT_NEAR(v.t_of(0.5f * v.width_px), t, v.ns_per_px * 1.01) << "the break is not centred";
  EXPECT_NEAR(v.end_ns() - v.start_ns, static_cast<double>(tl->duration_ns) / 50, 1.0) << "zoom changed";
}

TEST(ViewInput, HoverPicksTheSliceUnderTheCursorAndClickSelectsIt) {
  auto c = make_capture("input_hover");
  Driver d(c.file);
  d.idle(3);
  const RunTimeline* tl = d.view.timeline();
  const auto& l = d.view.layout();
  // The second compute slice of accelerator 1, level 0 (a decoder layer): the first lane of
  // the group, right under its header.
  const Slice& s = tl->groups.at(1).tracks.at(0).levels.at(0).at(1);
  const TimeView& v = d.view.time_view();
  const float x = std::floor(l.canvas_x0 + v.x_of(0.5 * static_cast<double>(s.start_ns + s.end_ns)));
  const float y = std::floor(l.groups.at(1).y0 + 20 + 8);
  d.idle(2, x, y);
  ASSERT_TRUE(d.view.hovered().has_value()) << "nothing hovered at " << x << "," << y;
  EXPECT_EQ(d.view.hovered()->source, Source::Compute);
  EXPECT_EQ(d.view.hovered()->row, s.row);
  EXPECT_FALSE(d.view.selection().has_value());
  d.click(x, y);
  ASSERT_TRUE(d.view.selection().has_value());
  EXPECT_EQ(d.view.selection()->row, s.row);
  EXPECT_EQ(describe(*tl, Source::Compute, s.row).at(0).second, "model.layers.3");  // layers 2, 3 run on 1
  // A click on empty lane space clears the selection.
  d.click(l.canvas_x1 - 2, y);
  EXPECT_FALSE(d.view.selection().has_value());
}

/// A capture of one imported run holding `ops` (CPU ops of host thread tid 77, pid 1).
void write_host_ops(const fs::path& file, const std::vector<tracer::CpuOpActivity>& ops) {
  storage::Store store(file);
  tracer::RunInfo info;
  info.engine = "import";
  info.start_ns = storage::SyntheticTrace::kTraceBase;
  const int64_t run = store.add_run(info);
  tracer::ActivityBatch b;
  b.run_id = run;
  b.pid = 1;
  b.cpu_ops = ops;
  store.write_activity(b);
  store.end_run(run, tracer::RunStatus::Complete);
  store.close();
}

TEST(ViewInput, ClickingADeepLaneLabelUnfoldsAllItsLevels) {
  // A Python stack 6 frames deep on one thread: folded to its top 2 frames until clicked.
  const fs::path file = test::scratch_dir("input_unfold") / "trace.sqlite";
  std::vector<tracer::CpuOpActivity> frames;
  for (int64_t i = 0; i < 6; ++i) {
    tracer::CpuOpActivity f;
    f.os_tid = 77;
    f.name = "f.py(1): frame";
    f.category = "python_function";
    f.start_ns = storage::SyntheticTrace::kTraceBase + i * 100;
    f.end_ns = storage::SyntheticTrace::kTraceBase + 10000 - i * 100;
    frames.push_back(f);
  }
  write_host_ops(file, frames);
  Driver d(file);
  d.idle(3);
  const auto group_h = [&] { return d.view.layout().groups.at(0).y1 - d.view.layout().groups.at(0).y0; };
  const float folded = group_h();
  const float label_x = d.view.layout().canvas_x0 - 100, lane_y = d.view.layout().groups.at(0).y0 + 20 + 5;
  d.click(label_x, lane_y);
  d.idle(1);
  EXPECT_FLOAT_EQ(group_h() - folded, 4 * 17.0f) << "all 6 levels instead of 2";
  d.click(label_x, lane_y);
  d.idle(1);
  EXPECT_FLOAT_EQ(group_h(), folded);
}

TEST(ViewInput, RulerDragSelectsARangeWithStatistics) {
  auto c = make_capture("input_range");
  Driver d(c.file);
  d.idle(3);
  const auto& l = d.view.layout();
  const float ruler_y = 0.5f * (l.ruler_y0 + l.ruler_y1);
  const float xa = l.canvas_x0 + 100, xb = l.canvas_x0 + 400;
  ScriptedInput in;
  in.x = xa;
  in.y = ruler_y;
  d.frame(in);
  in.down[0] = true;
  d.frame(in);
  for (int i = 1; i <= 6; ++i) {
    in.x = xa + 50.0f * i;
    d.frame(in);
  }
  in.down[0] = false;
  d.frame(in);
  d.idle();
  ASSERT_TRUE(d.view.range().has_value());
  const TimeView& v = d.view.time_view();
  EXPECT_NEAR(static_cast<double>(d.view.range()->first), v.t_of(xa - l.canvas_x0), v.ns_per_px * 1.5);
  EXPECT_NEAR(static_cast<double>(d.view.range()->second), v.t_of(xb - l.canvas_x0), v.ns_per_px * 1.5);
}

TEST(ViewLod, ALargeCaptureIsDrawnAsMergedBlocks) {
  auto c = make_capture("lod_large", 300'000);
  Driver d(c.file);
  d.idle(3);
  const auto& l = d.view.layout();
  EXPECT_GT(l.merged_boxes, 0);
  EXPECT_LT(l.drawn_boxes, 20000) << "LOD did not bound the boxes drawn";
  // Zooming all the way into the start leaves only whole events.
  d.view.time_view().fit(0, 20000, 0);
  d.idle(2);
  EXPECT_EQ(d.view.layout().merged_boxes, 0);
  EXPECT_GT(d.view.layout().drawn_boxes, 0);
}

TEST(ViewLod, ALargeTraceIsDrawnAsMergedBlocksAndItsFlowsOnlyWhenFew) {
  const fs::path file = test::scratch_dir("lod_trace") / "trace.sqlite";
  {
    storage::Store store(file);
    storage::write_large_trace_run(store, 100'000);  // 300k rows, 100k launch flows
    store.finalize();
    store.close();
  }
  Driver d(file);
  d.idle(3);
  const RunTimeline* tl = d.view.timeline();
  ASSERT_NE(tl, nullptr);
  EXPECT_EQ(tl->flows.size(), 100'000u);
  const auto& l = d.view.layout();
  EXPECT_GT(l.merged_boxes, 0);
  EXPECT_LT(l.drawn_boxes, 20000) << "LOD did not bound the boxes drawn";
  EXPECT_EQ(l.drawn_flows, 0) << "100k flows in view would be noise";
  // Zoomed into the first few launches: whole events, each kernel with its launch.
  d.view.time_view().fit(0, 10000, 0);
  d.idle(2);
  EXPECT_EQ(d.view.layout().merged_boxes, 0);
  EXPECT_GE(d.view.layout().drawn_boxes, 5 * 3);
  EXPECT_GE(d.view.layout().drawn_flows, 5);
}

// Clicking a merged "zoom in" block: a block of events covering a small part of the view is
// fitted (5% margin); a block running across most of the view (a dense lane) zooms in 4×
// around the cursor instead, since fitting it would change nothing.
TEST(ViewLod, ClickingAMergedBlockZoomsToTheEventsItHolds) {
  // Two clusters of 1000 one-ns ops on a host thread, far apart, and one op that ends the run.
  const fs::path file = test::scratch_dir("lod_click") / "clusters.sqlite";
  const int64_t base = storage::SyntheticTrace::kTraceBase, second = 1'000'000'000;
  std::vector<tracer::CpuOpActivity> ops;
  auto op = [&](int64_t t) {
    tracer::CpuOpActivity f;
    f.os_tid = 77;
    f.name = "aten::add";
    f.category = "cpu_op";
    f.start_ns = base + t;
    f.end_ns = base + t + 1;
    ops.push_back(f);
  };
  for (int64_t i = 0; i < 1000; ++i) op(2 * i), op(second + 2 * i);
  op(2 * second);
  write_host_ops(file, ops);
  {
    Driver d(file);
    d.idle(3);
    const TimeView& v = d.view.time_view();
    std::optional<FrameLayout::MergedBox> later;
    for (const auto& b : d.view.layout().merged_samples)
      if (b.count == 1000 && b.start_ns >= second - 10) later = b;
    ASSERT_TRUE(later.has_value()) << "the second cluster is not one merged block";
    d.click(std::floor(0.5f * (later->x0 + later->x1)), std::floor(0.5f * (later->y0 + later->y1)));
    d.idle(1);
    EXPECT_FALSE(d.view.selection().has_value()) << "a merged block is not an event to select";
    const double span = later->end_ns - later->start_ns, pad = 0.05 * span;
    EXPECT_NEAR(v.start_ns, later->start_ns - pad, v.ns_per_px * 1.01);
    EXPECT_NEAR(v.end_ns(), later->end_ns + pad, v.ns_per_px * 2.01);
  }  // one window at a time

  // The large capture's lanes are dense: its merged blocks run across the view.
  auto c = make_capture("lod_click_dense", 300'000);
  Driver dense(c.file);
  dense.idle(3);
  const TimeView& w = dense.view.time_view();
  ASSERT_FALSE(dense.view.layout().merged_samples.empty());
  const auto m = dense.view.layout().merged_samples.front();
  const float x = std::floor(0.5f * (std::max(m.x0, dense.view.layout().canvas_x0) + m.x1));
  const double before = w.end_ns() - w.start_ns;
  const double t_at = w.t_of(x - dense.view.layout().canvas_x0);
  ASSERT_GT(std::min(m.end_ns, w.end_ns()) - std::max(m.start_ns, w.start_ns), 0.5 * before) << "not a view-wide block";
  dense.click(x, std::floor(0.5f * (m.y0 + m.y1)));
  dense.idle(1);
  EXPECT_NEAR(w.end_ns() - w.start_ns, before / 4, before * 1e-3) << "a view-wide block zooms in 4x";
  EXPECT_NEAR(w.t_of(x - dense.view.layout().canvas_x0), t_at, w.ns_per_px * 1.01) << "around the cursor";
}

// The breaks table sorts by a clicked header; Shift+click adds a column to the sort (ImGui's
// multi-sort), a second Shift+click on it reverses it.
TEST(ViewTables, ClickSortsByAColumnShiftClickAddsASecondOne) {
  auto c = make_capture("tables_sort");
  Driver d(c.file);
  d.view.SetTab(Tab::Breaks);
  d.idle(4);
  const RunTimeline* tl = d.view.timeline();
  ASSERT_NE(tl, nullptr);
  auto header = [&](const std::string& name) {
    for (const auto& h : d.view.layout().table_headers)
      if (h.name == name) return std::pair{std::floor(0.5f * (h.x0 + h.x1)), std::floor(0.5f * (h.y0 + h.y1))};
    ADD_FAILURE() << "no header " << name;
    return std::pair{0.0f, 0.0f};
  };
  const auto [mx, my] = header("module");
  d.click(mx, my);
  d.idle(2);
  auto drawn = [&] {
    std::vector<uint32_t> r;
    for (const auto& t : d.view.layout().table_rows) r.push_back(t.row);
    return r;
  };
  std::vector<uint32_t> rows = drawn();
  ASSERT_GE(rows.size(), 6u);
  for (size_t i = 1; i < rows.size(); ++i)
    ASSERT_LE(tl->graph_breaks.at(rows[i - 1]).module, tl->graph_breaks.at(rows[i]).module) << "not sorted by module at " << i;
  // Shift+click time twice: module ascending, then time descending.
  const auto [tx, ty] = header("time");
  d.click(tx, ty, true);
  d.idle(1);
  d.click(tx, ty, true);
  d.idle(2);
  rows = drawn();
  ASSERT_GE(rows.size(), 6u);
  int ties = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto &a = tl->graph_breaks.at(rows[i - 1]), &b = tl->graph_breaks.at(rows[i]);
    ASSERT_LE(a.module, b.module) << "the first sort key was dropped at row " << i;
    if (a.module == b.module) {
      ++ties;
      EXPECT_GE(a.time_ns, b.time_ns) << "rows of one module not by time, latest first, at " << i;
    }
  }
  EXPECT_GT(ties, 0) << "no two rows of one module in view: the second key is untested";
}

// The runs list's filter keeps the rows whose text matches (ImGuiTextFilter: "-" excludes).
TEST(ViewInput, TheRunFilterKeepsOnlyTheMatchingRuns) {
  auto c = make_capture("input_filter");
  Driver d(c.file);
  d.idle(2);
  ASSERT_EQ(d.view.layout().run_rows.size(), 4u);
  const float* box = d.view.layout().run_filter;
  ASSERT_GT(box[2], box[0]) << "no filter box drawn";
  d.click(std::floor(0.5f * (box[0] + box[2])), std::floor(0.5f * (box[1] + box[3])));
  auto shown = [&] {
    std::set<int64_t> s;
    for (const auto& r : d.view.layout().run_rows) s.insert(r.run_id);
    return s;
  };
  d.type("offload-only");
  d.idle(2);
  EXPECT_EQ(shown(), (std::set<int64_t>{c.runs[1].run_id, c.runs[3].run_id})) << "filter 'offload-only'";
  // Home, then "-": the query becomes "-offload-only", which excludes those rows.
  d.press(kHome);
  d.type("-");
  d.idle(2);
  EXPECT_EQ(shown(), (std::set<int64_t>{c.runs[0].run_id, c.runs[2].run_id})) << "filter '-offload-only'";
}

// The diagnostics strip says, per run, what went wrong: an interrupted run, a failed one,
// records the tracer dropped, and every DIAGNOSTICS row with its severity.
TEST(ViewDiagnostics, TheStripListsEveryRunProblemAndEveryDiagnostic) {
  const fs::path file = test::scratch_dir("diag_strip") / "diag.sqlite";
  int64_t ok = 0, failed = 0, cut = 0;
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 2);
    storage::SyntheticRun s;
    s.devices = 2;
    ok = storage::write_synthetic_run(store, s).run_id;
    store.add_diagnostic(ok, storage::Severity::Warning, "compile", "torch._dynamo hit config.recompile_limit (8)");
    store.add_diagnostic(std::nullopt, storage::Severity::Info, "capture", "settings recorded");
    tracer::ActivityBatch b;
    b.run_id = ok;
    b.dropped_records = 7;
    store.write_activity(b);
    tracer::RunInfo info;
    info.scenario = "cpu-offload";
    info.policy = "offload-only";
    info.mode = "eager";
    failed = store.add_run(info);
    store.end_run(failed, tracer::RunStatus::Failed, "offload folder is a file");
    info.scenario = "disk-offload";
    cut = store.add_run(info);  // never ended
    store.close();
  }
  Driver d(file);
  d.idle(3);
  const auto& lines = d.view.layout().diagnostic_lines;
  auto has_line = [&](const std::string& want) {
    return std::find(lines.begin(), lines.end(), want) != lines.end();
  };
  const std::string r = "run ";
  EXPECT_TRUE(has_line("[warning] " + r + std::to_string(ok) + ": compile: torch._dynamo hit config.recompile_limit (8)"))
      << testing::PrintToString(lines);
  EXPECT_TRUE(has_line("[info] capture: settings recorded")) << testing::PrintToString(lines);
  EXPECT_TRUE(has_line("[dropped] " + r + std::to_string(ok) + " (sharded whole-hook default): 7 records dropped by the tracer"))
      << testing::PrintToString(lines);
  EXPECT_TRUE(has_line("[failed] " + r + std::to_string(failed) + " (cpu-offload offload-only eager): offload folder is a file"))
      << testing::PrintToString(lines);
  EXPECT_TRUE(has_line("[incomplete] " + r + std::to_string(cut) +
                       " (disk-offload offload-only eager): the capture stopped before this run ended"))
      << testing::PrintToString(lines);
}

TEST(ViewCompare, TwoRunsAreAlignedOneAboveTheOtherOnOneTimeScale) {
  auto c = make_capture("compare_aligned");
  ViewerOptions o;
  o.file = c.file;
  o.view = "timeline";
  o.run = c.runs[0].run_id;
  o.compare = c.runs[1].run_id;
  o.width = 1400;
  o.height = 900;
  o.screenshot = c.file.parent_path() / "aligned.png";
  o.layout = c.file.parent_path() / "aligned.json";
  ASSERT_EQ(run_viewer(o), 0);
  auto j = test::read_json(*o.layout);
  float second_start = 1e9;
  std::set<std::string> first, second;
  for (const auto& g : j["groups"]) {
    if (g["run"] == c.runs[0].run_id) {
      first.insert(g["title"]);
    } else {
      EXPECT_EQ(g["run"], c.runs[1].run_id);
      second_start = std::min(second_start, g["rect"][1].get<float>());
      second.insert(g["title"]);
    }
  }
  EXPECT_EQ(first, second);  // the same lane groups, so lanes line up
  // Each run has its own pane, the compared one below, both in view at the default size.
  ASSERT_EQ(j["panes"].size(), 2u);
  const float pane1 = j["panes"][1][0].get<float>();
  EXPECT_LT(j["groups"][0]["rect"][1].get<float>(), pane1);
  EXPECT_GE(second_start, pane1);
  EXPECT_LT(second_start, j["lanes"][1].get<float>());
  // One time scale: the view spans the longer of the two runs (both start at 0).
  const double longest = static_cast<double>(std::max(c.runs[0].end_ns, c.runs[1].end_ns) - 1'000'000'000);
  EXPECT_NEAR(j["view_ns"][1].get<double>() - j["view_ns"][0].get<double>(), longest * 1.04, longest * 0.001);
}

// What recording cost a torch engine run's timeline (facts/recording.h) ends its header, under
// the catalogue's label: its profiled generate (130 ms) over the median of its unrecorded ones
// (90, 100, 200: 100 ms, where their mean would read 1.00×). A LibTorch run beside it shows
// none; a torch run without the measured generates says "not measured".
TEST(ViewScreenshot, ATorchRunsHeaderShowsWhatRecordingCostItsTimeline) {
  const fs::path file = test::scratch_dir("shot_recording_overhead") / "synthetic.sqlite";
  int64_t measured = 0, libtorch = 0, unmeasured = 0;
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 4);
    storage::SyntheticRun s;
    s.layers = 4;
    s.tokens = 2;
    measured = storage::write_synthetic_run(store, s).run_id;
    s.policy = "offload-only";
    libtorch = storage::write_synthetic_run(store, s).run_id;
    unmeasured = storage::write_synthetic_run(store, s).run_id;
    storage::set_torch_generate_times(store, measured, 130.0, {90.0, 200.0, 100.0});
    store.set_run_engine(libtorch, "libtorch");
    store.set_run_engine(unmeasured, "torch");
    store.finalize();
    store.close();
  }
  const std::string label = "timeline's generate vs unrecorded";
  const auto headers = [&](int64_t run, std::optional<int64_t> compare) {
    ViewerOptions o;
    o.file = file;
    o.run = run;
    o.compare = compare;
    o.width = 1400;
    o.height = 700;
    o.screenshot = file.parent_path() / ("run" + std::to_string(run) + ".png");
    o.layout = file.parent_path() / ("run" + std::to_string(run) + ".json");
    EXPECT_EQ(run_viewer(o), 0);
    return test::read_json(*o.layout)["run_headers"].get<std::vector<std::string>>();
  };
  auto h = headers(measured, libtorch);
  ASSERT_EQ(h.size(), 2u);
  const std::string want = display_text("    " + label + " 1.30×", fs::is_regular_file(kTypographyFont));
  EXPECT_EQ(h[0].rfind("run " + std::to_string(measured) + ": sharded, whole-hook, default [torch] (complete, ", 0), 0u)
      << h[0];
  EXPECT_EQ(h[0].substr(h[0].size() - std::min(h[0].size(), want.size())), want) << h[0];
  EXPECT_EQ(h[1].find(label), std::string::npos) << "a LibTorch run times nothing unrecorded: " << h[1];
  h = headers(unmeasured, std::nullopt);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_NE(h[0].find("[torch]"), std::string::npos) << h[0];
  EXPECT_EQ(h[0].substr(h[0].size() - std::min(h[0].size(), label.size() + 13)), label + " not measured") << h[0];
}

/// Two captures of the same matrix, "before" (main) and "after" (pr, whose runs decode more
/// tokens, so they are longer): in main.sqlite and pr.sqlite of one folder.
std::pair<Capture, Capture> before_after(const std::string& name) {
  auto a = make_capture(name + "_main");
  auto b = make_capture(name + "_pr", 0, /*tokens=*/7);
  const fs::path dir = test::scratch_dir(name);
  fs::rename(a.file, dir / "main.sqlite");
  fs::rename(b.file, dir / "pr.sqlite");
  a.file = dir / "main.sqlite";
  b.file = dir / "pr.sqlite";
  return {a, b};
}

TEST(ViewCompare, TwoCapturesAreListedTogetherAndARunOfEachIsAligned) {
  auto [a, b] = before_after("two_files");
  ViewerOptions o;
  o.file = a.file;
  o.other = b.file;
  o.view = "compare";
  o.run = a.runs[0].run_id;  // sharded whole-hook default; no --compare: pr's run of that cell
  o.width = 1600;
  o.height = 1100;
  o.screenshot = a.file.parent_path() / "two_files.png";
  o.layout = a.file.parent_path() / "two_files.json";
  ASSERT_EQ(run_viewer(o), 0);
  auto j = test::read_json(*o.layout);
  EXPECT_EQ(j["other_file"], b.file.string());
  EXPECT_EQ(j["run"], a.runs[0].run_id);
  EXPECT_EQ(j["run_capture"], 0);
  EXPECT_EQ(j["compare_run"], b.runs[0].run_id);
  EXPECT_EQ(j["compare_capture"], 1);
  // The runs list holds every run of both files, main's first.
  std::vector<std::pair<int, int64_t>> listed, expected;
  for (const auto& r : j["run_rows"]) listed.emplace_back(r["capture"].get<int>(), r["run"].get<int64_t>());
  for (const auto& r : a.runs) expected.emplace_back(0, r.run_id);
  for (const auto& r : b.runs) expected.emplace_back(1, r.run_id);
  EXPECT_EQ(listed, expected);
  // A matrix per file: every run of each in it.
  std::set<std::pair<int, int64_t>> in_matrix;
  for (const auto& r : j["compare_rows"]) in_matrix.emplace(r["capture"].get<int>(), r["run"].get<int64_t>());
  const std::set<std::pair<int, int64_t>> every_run(expected.begin(), expected.end());
  EXPECT_EQ(in_matrix, every_run);
  // The aligned panes: main's run above, pr's below, the same lane groups.
  ASSERT_EQ(j["panes"].size(), 2u);
  std::set<std::string> first, second;
  for (const auto& g : j["groups"]) {
    (g["capture"] == 0 ? first : second).insert(g["title"]);
    if (g["capture"] == 1) {
      EXPECT_GE(g["rect"][1].get<float>(), j["panes"][1][0].get<float>()) << g.dump();
    }
  }
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, second);
  Png png = load_png(*o.screenshot);
  EXPECT_GT(png.distinct_colors(0, 0, png.w, png.h), 12u);

  // Without --run: the first file's default run above the second's run of the same cell.
  o.run.reset();
  o.view = "timeline";
  o.screenshot = a.file.parent_path() / "two_files_timeline.png";
  ASSERT_EQ(run_viewer(o), 0);
  j = test::read_json(*o.layout);
  EXPECT_EQ(j["run_capture"], 0);
  EXPECT_EQ(j["compare_capture"], 1);
  EXPECT_EQ(j["compare_run"], b.runs[0].run_id);
  // One time scale spanning the longer (pr's) run.
  const double longest = static_cast<double>(b.runs[0].end_ns - 1'000'000'000);
  ASSERT_GT(b.runs[0].end_ns, a.runs[0].end_ns);
  EXPECT_NEAR(j["view_ns"][1].get<double>() - j["view_ns"][0].get<double>(), longest * 1.04, longest * 0.001);
  // --compare names a run of the second file; a run it lacks is refused, naming it.
  o.run = a.runs[0].run_id;
  o.compare = b.runs[3].run_id;
  ASSERT_EQ(run_viewer(o), 0);
  EXPECT_EQ(test::read_json(*o.layout)["compare_run"], b.runs[3].run_id);
  o.compare = 999;
  try {
    run_viewer(o);
    FAIL() << "no error";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("999"), std::string::npos) << e.what();
  }
  // A second file that is not a capture is refused, named, and left as it was.
  const fs::path notes = a.file.parent_path() / "notes.sqlite";
  {
    std::ofstream f(notes);
    f << "not a capture\n";
  }
  o.compare.reset();
  o.other = notes;
  try {
    run_viewer(o);
    FAIL() << "no error";
  } catch (const storage::CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("notes.sqlite"), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::read_file(notes), "not a capture\n");
}

TEST(ViewInput, RunsOfTwoCapturesAreOpenedAndComparedByClickAndCtrlClick) {
  auto [a, b] = before_after("two_files_input");
  Driver d(a.file, b.file);
  d.idle(3);
  ASSERT_EQ(d.view.capture_count(), 2u);
  EXPECT_EQ(d.view.capture_label(0), "main");
  EXPECT_EQ(d.view.capture_label(1), "pr");
  auto row_of = [&](int capture, int64_t run) {
    for (const auto& r : d.view.layout().run_rows)
      if (r.capture == capture && r.run_id == run) return r;
    throw std::runtime_error("run row not drawn");
  };
  const float x = 40;
  // Ctrl+click pr's offloaded run: aligned under main's open run.
  auto r = row_of(1, b.runs[3].run_id);
  ScriptedInput in;
  in.x = x;
  in.y = std::floor(0.5f * (r.y0 + r.y1));
  in.ctrl = true;
  d.frame(in);
  in.down[0] = true;
  d.frame(in);
  in.down[0] = false;
  d.frame(in);
  d.idle();
  ASSERT_NE(d.view.timeline(1), nullptr);
  EXPECT_EQ(d.view.timeline(1)->run.id, b.runs[3].run_id);
  EXPECT_EQ(d.view.run_capture(1), 1u);
  EXPECT_EQ(d.view.run_capture(0), 0u);
  // A plain click on pr's run with main's id opens pr's run, not main's.
  r = row_of(1, a.runs[0].run_id);
  d.click(x, std::floor(0.5f * (r.y0 + r.y1)));
  d.idle();
  EXPECT_EQ(d.view.run_capture(0), 1u);
  EXPECT_EQ(d.view.run_id(), a.runs[0].run_id);
  EXPECT_EQ(d.view.timeline()->run.id, b.runs[0].run_id);
}

TEST(ViewOverlays, TheLegendAndTheHelpOpenFromKeysAndButtonsAndCloseWithEscape) {
  auto c = make_capture("overlays");
  Driver d(c.file);
  d.view.SelectRun(c.runs[3].run_id);  // offloaded: swaps, residency, memory
  d.idle(3);
  const auto& l = d.view.layout();
  EXPECT_FALSE(l.legend.shown);
  EXPECT_FALSE(l.help.shown);
  d.press('L');
  d.idle(2);
  ASSERT_TRUE(l.legend.shown);
  for (const char* entry : {"compute", "weight onload", "weight offload", "pre_forward", "generation step",
                            "weights on device", "meta (weights in cpu)", "weight swaps of a step (aggregated)",
                            "N events merged (zoom in)", "graph break (and its line through the run)", "search match"})
    EXPECT_TRUE(has(l.legend.lines, entry)) << entry;
  EXPECT_FALSE(has(l.legend.lines, "kernel")) << "only the kinds this run has";
  EXPECT_GT(l.legend.rect[2] - l.legend.rect[0], 150);
  EXPECT_LE(l.legend.rect[2], 1200);
  const fs::path dir = c.file.parent_path();
  d.screenshot(dir / "legend.png");
  EXPECT_GT(load_png(dir / "legend.png").distinct_colors(static_cast<int>(l.legend.rect[0]), static_cast<int>(l.legend.rect[1]),
                                                         static_cast<int>(l.legend.rect[2]), static_cast<int>(l.legend.rect[3])),
            12u);
  // '?' typed (not a key code: the character) opens the help, centred, listing the bindings.
  ScriptedInput q;
  q.text = "?";
  d.frame(q);
  d.idle(2);
  ASSERT_TRUE(l.help.shown);
  for (const char* line : {"wheel: zoom around the cursor (Ctrl: finer, Shift: faster)",
                           "W / S: zoom in / out around the centre", "A / D: pan left / right by a tenth of the view",
                           "Ctrl+F: find events by name or module",
                           "Enter or F3 / Shift+Enter or Shift+F3: next / previous match (also the < > buttons)",
                           "tables: click / Shift+click a header: sort by that column / by several columns"})
    EXPECT_TRUE(has(l.help.lines, line)) << line;
  EXPECT_NEAR(0.5f * (l.help.rect[0] + l.help.rect[2]), 600, 2);
  d.screenshot(dir / "help.png");
  // Esc closes the help first, then the legend.
  const int esc = kEscape;
  d.press(esc);
  d.idle();
  EXPECT_FALSE(l.help.shown);
  EXPECT_TRUE(l.legend.shown);
  d.press(esc);
  d.idle();
  EXPECT_FALSE(l.legend.shown);
  // F1 opens the help; its button closes it; the legend's button opens the legend.
  d.press(kF1);
  d.idle();
  EXPECT_TRUE(d.view.help_shown());
  const auto button = [&](const float (&r)[4]) { d.click(std::floor(0.5f * (r[0] + r[2])), std::floor(0.5f * (r[1] + r[3]))); };
  button(l.help_button);
  d.idle();
  EXPECT_FALSE(d.view.help_shown());
  button(l.legend_button);
  d.idle();
  EXPECT_TRUE(d.view.legend_shown());
}

TEST(ViewSearch, TypingAModuleNameFindsItsComputeAndEnterStepsToTheThirdMatchCentred) {
  auto c = make_capture("search", 0, /*tokens=*/6);
  Driver d(c.file);
  d.idle(3);
  const RunTimeline* tl = d.view.timeline();
  const auto& l = d.view.layout();
  const auto& s = l.search;
  d.click(std::floor(0.5f * (s.box[0] + s.box[2])), std::floor(0.5f * (s.box[1] + s.box[3])));
  d.type("model.layers.7.mlp");
  d.idle();
  EXPECT_EQ(s.query, "model.layers.7.mlp");
  ASSERT_EQ(s.matches, 6) << "its compute slice in each of the 6 steps";
  EXPECT_EQ(s.current, 0);
  const int enter = kEnter;
  for (int i = 0; i < 3; ++i) {
    d.press(enter);
    d.idle(2);
  }
  ASSERT_EQ(s.current, 3);
  const SearchMatch& m = d.view.search_matches().at(2);
  EXPECT_EQ(m.source, Source::Compute);
  EXPECT_EQ(tl->module_compute.at(m.row).module, "model.layers.7.mlp");
  EXPECT_EQ(s.start_ns, static_cast<double>(m.start_ns));
  const TimeView& v = d.view.time_view();
  const double mid = 0.5 * static_cast<double>(m.start_ns + m.end_ns);
  EXPECT_NEAR(v.t_of(0.5f * v.width_px), mid, v.ns_per_px) << "the match is not centred";
  EXPECT_GE(static_cast<double>(m.end_ns - m.start_ns) / v.ns_per_px, 12) << "zoomed in far enough to see it";
  ASSERT_TRUE(s.highlighted);
  EXPECT_NEAR(0.5f * (s.rect[0] + s.rect[2]), l.canvas_x0 + 0.5f * v.width_px, 2);
  d.screenshot(c.file.parent_path() / "search.png");
  // Shift+Enter steps back, F3 / Shift+F3 step on and back, the buttons too.
  d.press(enter, /*shift=*/true);
  d.idle(2);
  EXPECT_EQ(s.current, 2);
  d.press(kF3);
  d.idle();
  EXPECT_EQ(s.current, 3);
  d.press(kF3, /*shift=*/true);
  d.idle();
  EXPECT_EQ(s.current, 2);
  EXPECT_NEAR(d.view.time_view().t_of(0.5f * v.width_px),
              0.5 * static_cast<double>(d.view.search_matches()[1].start_ns + d.view.search_matches()[1].end_ns),
              v.ns_per_px);
}

TEST(ViewLabels, ASliceTooNarrowForItsModuleNameShowsTheNamesTail) {
  auto c = make_capture("labels");
  Driver d(c.file);
  d.idle(3);
  const RunTimeline* tl = d.view.timeline();
  uint32_t row = 0;
  while (tl->module_compute.at(row).module != "model.layers.3.mlp") ++row;
  const auto [a, b] = extent(*tl, Source::Compute, row);
  // The box a few pixels narrower than the whole name needs (a label gets the box less 5 px).
  const float full = d.win.text_width("model.layers.3.mlp");
  TimeView& v = d.view.time_view();
  v.ns_per_px = static_cast<double>(b - a) / (full + 5 - 3);
  v.center_on(0.5 * static_cast<double>(a + b));
  d.idle(2);
  const auto& l = d.view.layout();
  EXPECT_TRUE(has(l.elided_samples, "...layers.3.mlp")) << ::testing::PrintToString(l.elided_samples);
  d.screenshot(c.file.parent_path() / "labels.png");
  // Its tooltip names it in full: hover it (accelerator 1's compute, level 1).
  const float x = std::floor(l.canvas_x0 + 0.5f * v.width_px), y = std::floor(l.groups.at(1).y0 + 20 + 17 + 8);
  d.idle(2, x, y);
  ASSERT_TRUE(d.view.hovered().has_value());
  EXPECT_EQ(describe(*tl, d.view.hovered()->source, d.view.hovered()->row).at(0).second, "model.layers.3.mlp");
  // Narrower still: its last components; at last no label at all.
  v.ns_per_px = static_cast<double>(b - a) / (d.win.text_width("...3.mlp") + 5);
  v.center_on(0.5 * static_cast<double>(a + b));
  d.idle(2);
  EXPECT_TRUE(has(l.elided_samples, "...3.mlp")) << ::testing::PrintToString(l.elided_samples);
}

TEST(ViewTables, AnEmptyTabSaysWhy) {
  auto c = make_capture("empty_tabs");
  ViewerOptions o;
  o.file = c.file;
  o.view = "swaps";
  o.run = c.runs[0].run_id;  // sharded
  o.width = 1200;
  o.height = 700;
  o.screenshot = c.file.parent_path() / "swaps_empty.png";
  o.layout = c.file.parent_path() / "swaps_empty.json";
  ASSERT_EQ(run_viewer(o), 0);
  EXPECT_EQ(test::read_json(*o.layout)["empty_message"],
            "this run offloads nothing (scenario sharded: every weight stays on its execution device)");
  o.run = c.runs[3].run_id;  // cpu-offload: rows, no message
  ASSERT_EQ(run_viewer(o), 0);
  EXPECT_EQ(test::read_json(*o.layout)["empty_message"], "");
  o.view = "breaks";  // offload-only on a sharded run breaks nowhere
  o.run = c.runs[1].run_id;
  ASSERT_EQ(run_viewer(o), 0);
  EXPECT_EQ(test::read_json(*o.layout)["empty_message"],
            "no disabled-scope entries recorded in this run: each compiled forward ran as one region");
}

TEST(ViewLod, ACpuOffloadRunShowsItsSwapsAsOneGroupPerStepAtTheDefaultZoom) {
  const fs::path file = test::scratch_dir("swap_groups") / "cpu_offload.sqlite";
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 1);
    storage::SyntheticRun s;
    s.scenario = "cpu-offload";
    s.policy = "offload-only";
    s.mode = "eager";
    s.devices = 1;
    s.layers = 16;
    s.tensors_per_layer = 9;  // 144 onloads and 144 offloads per step
    s.tokens = 6;
    s.offload = true;
    storage::write_synthetic_run(store, s);
    store.finalize();
    store.close();
  }
  Driver d(file);
  d.idle(3);
  const auto& l = d.view.layout();
  EXPECT_EQ(l.aggregated_boxes, 6) << "one block per generation step";
  d.screenshot(file.parent_path() / "swap_groups.png");
  // The memory lane's scale: the peak (a layer's 9 tensors of 4 MiB) at its top, 0 at its bottom.
  ASSERT_EQ(l.memory_axes.size(), 1u);
  EXPECT_EQ(l.memory_axes[0].top_bytes, 9 * (int64_t{4} << 20));
  EXPECT_EQ(l.memory_axes[0].labels, (std::vector<std::string>{"36.0 MiB", "18.0 MiB", "0"}));
  // Hover the third step's block (accelerator 0: compute 2 levels, transfers in, out, swaps).
  const RunTimeline* tl = d.view.timeline();
  const Track& swaps = tl->groups.at(0).tracks.at(3);
  ASSERT_EQ(swaps.lane, Lane::WeightSwaps);
  ASSERT_EQ(swaps.aggregate.size(), 6u);
  const Slice& g = swaps.aggregate[2];
  EXPECT_EQ(tl->strings[g.label], "144 onloads, 576 MiB");
  const TimeView& v = d.view.time_view();
  const float x = std::floor(l.canvas_x0 + v.x_of(0.5 * static_cast<double>(g.start_ns + g.end_ns)));
  const float y = std::floor(l.groups.at(0).y0 + 20 + 2 * 17 + 17 + 17 + 8);
  d.idle(2, x, y);
  ASSERT_TRUE(d.view.hovered().has_value());
  EXPECT_EQ(d.view.hovered()->source, Source::SwapGroup);
  EXPECT_EQ(d.view.hovered()->row, g.row);
  // A click zooms to it: its swaps are drawn one by one.
  d.click(x, y);
  d.idle(2);
  EXPECT_NEAR(d.view.time_view().start_ns, static_cast<double>(g.start_ns) - 0.05 * (g.end_ns - g.start_ns),
              d.view.time_view().ns_per_px);
  EXPECT_EQ(l.aggregated_boxes, 0);
  d.screenshot(file.parent_path() / "swap_group_zoomed.png");
}

TEST(ViewerErrors, NewerSchemaIsRefused) {
  auto c = make_capture("view_newer");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(c.file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE META_DATA_EXPORT SET value='99' WHERE name='HOOKSCOPE_SCHEMA_VERSION'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const auto before = test::read_file(c.file);
  ViewerOptions o;
  o.file = c.file;
  o.screenshot = c.file.parent_path() / "x.png";
  try {
    run_viewer(o);
    FAIL() << "no error";
  } catch (const storage::CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::read_file(c.file), before);
}

TEST(ViewerErrors, NotACaptureIsRefusedAndLeftUntouched) {
  const fs::path dir = test::scratch_dir("view_errors");
  const fs::path txt = dir / "notes.sqlite";
  {
    std::ofstream f(txt);
    f << "this is not a database\n";
  }
  ViewerOptions o;
  o.file = txt;
  o.screenshot = dir / "x.png";
  try {
    run_viewer(o);
    FAIL() << "no error";
  } catch (const storage::CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("notes.sqlite"), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::read_file(txt), "this is not a database\n");
  EXPECT_FALSE(fs::exists(dir / "x.png"));
  o.file = dir / "missing.sqlite";
  EXPECT_THROW(run_viewer(o), storage::CaptureError);
  EXPECT_FALSE(fs::exists(o.file));

  auto c = make_capture("view_errors_run");
  o.file = c.file;
  o.run = 999;
  EXPECT_THROW(run_viewer(o), std::out_of_range);
  o.run.reset();
  o.view = "flamegraph";
  EXPECT_THROW(run_viewer(o), std::invalid_argument);
  EXPECT_THROW(parse_size("100x100"), std::invalid_argument);
  EXPECT_THROW(parse_size("1600x"), std::invalid_argument);
  EXPECT_EQ(parse_size("1600x900"), std::make_pair(1600, 900));
}

}  // namespace
