// Loading a run in the background (ui/timeline_loader.h): the View draws every frame while a
// run loads, says what it loads with its progress, shows a preview of the run's small kinds,
// and ends with the same RunTimeline as a synchronous load; switching runs supersedes a load,
// destroying the View mid-load stops its threads; a run with rows no capture writes says so
// while the rest of the viewer works. Loads are held midway by a test hook (LoadHook). The
// rows the loader reads (SharedText into StringIds, table scans by rowid) are the reader's
// Stored rows in every file layout: one run, several, runs written interleaved, no indexes.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <optional>
#include <mutex>
#include <set>
#include <thread>

#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"
#include "ui/run_timeline.h"
#include "ui/timeline_loader.h"
#include "ui/view.h"
#include "ui/window.h"

namespace {

using namespace hs;
using namespace hs::ui;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// Four runs: a large one (sharded, whole-hook, default: the View's default run) of at least
/// `min_events` events, then three small ones.
struct Capture {
  fs::path file;
  std::vector<storage::SyntheticResult> runs;
};
Capture make_capture(const std::string& name, int64_t min_events) {
  Capture c;
  c.file = test::scratch_dir(name) / "synthetic.sqlite";
  storage::Store store(c.file);
  storage::add_synthetic_devices(store, 4);
  storage::SyntheticRun s;
  s.min_events = min_events;
  c.runs.push_back(storage::write_synthetic_run(store, s));
  s.min_events = 0;
  s.policy = "offload-only";
  c.runs.push_back(storage::write_synthetic_run(store, s));
  s.scenario = "cpu-offload";
  s.offload = true;
  c.runs.push_back(storage::write_synthetic_run(store, s));
  s.mode = "eager";
  c.runs.push_back(storage::write_synthetic_run(store, s));
  store.finalize();
  store.close();
  return c;
}

/// Holds a load at step `hold` (a kind's reader name, "preview", "layout") until released or
/// until the load is cancelled (60 s at most: a cancel that never comes fails the test, it does
/// not hang it); records the steps it saw and the cancels it was woken by.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  std::string hold;
  bool open = false;
  int held = 0, woken_by_cancel = 0;
  std::set<std::string> steps;

  LoadHook hook() {
    return [this](std::string_view step, const std::atomic<bool>& cancel) {
      std::unique_lock<std::mutex> lock(mu);
      steps.insert(std::string(step));
      if (step != hold || open) return;
      ++held;
      cv.notify_all();
      const auto until = Clock::now() + std::chrono::seconds(60);
      while (!open && !cancel.load() && Clock::now() < until) cv.wait_for(lock, std::chrono::milliseconds(2));
      if (cancel.load()) ++woken_by_cancel;
    };
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  int held_count() {
    std::lock_guard<std::mutex> lock(mu);
    return held;
  }
  int cancels() {
    std::lock_guard<std::mutex> lock(mu);
    return woken_by_cancel;
  }
};

// ------------------------------------------------------------------ comparing timelines

template <class A, class B>
bool same_value(const A& a, const B& b) {
  if constexpr (std::is_same_v<A, storage::SharedText>)
    return a.str() == std::string_view(b);
  else
    return a == b;
}

/// Every member of two rows of one kind, in any two forms (Shared, Stored), equal.
template <class RowA, class RowB>
bool same_row(const RowA& a, const RowB& b) {
  bool same = true;
  RowA::columns([&](auto, std::string_view, std::string_view, auto field) {
    using M = std::remove_cvref_t<decltype(field(a))>;
    if constexpr (!std::is_empty_v<M>) same = same && same_value(field(a), field(b));
  });
  return same;
}

template <class VA, class VB>
void expect_same_rows(const VA& a, const VB& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_row(a[i], b[i])) {
      ADD_FAILURE() << what << ": row " << i << " differs";
      return;
    }
}

/// Every kind's rows of `a` (Shared) are `b`'s (Stored, as CaptureReader::run_rows reads them).
void expect_rows_as_stored(const storage::SharedRunRows& a, const storage::RunRows& b, bool timeline) {
#define HS_EXPECT_ROWS_(Type, Row, rows, ...) \
  if (!timeline || (std::string_view(#rows) != "memory_counters" && std::string_view(#rows) != "dynamo_graph_breaks")) \
    expect_same_rows(a.rows, b.rows, #rows);
  HS_HOST_EVENT_KINDS(HS_EXPECT_ROWS_)
  HS_ACTIVITY_KINDS(HS_EXPECT_ROWS_)
#undef HS_EXPECT_ROWS_
}

void expect_same_slices(const std::vector<Slice>& a, const std::vector<Slice>& b, const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].start_ns != b[i].start_ns || a[i].end_ns != b[i].end_ns || a[i].label != b[i].label ||
        a[i].row != b[i].row || a[i].category != b[i].category) {
      ADD_FAILURE() << where << ": slice " << i << " differs";
      return;
    }
}

void expect_same_track(const Track& a, const Track& b, const std::string& where) {
  EXPECT_EQ(a.name, b.name) << where;
  EXPECT_EQ(a.lane, b.lane) << where;
  EXPECT_EQ(a.source, b.source) << where;
  EXPECT_EQ(a.stream, b.stream) << where;
  EXPECT_EQ(a.counter, b.counter) << where;
  EXPECT_EQ(a.counter_max, b.counter_max) << where;
  ASSERT_EQ(a.levels.size(), b.levels.size()) << where;
  for (size_t l = 0; l < a.levels.size(); ++l) expect_same_slices(a.levels[l], b.levels[l], where + " level " + std::to_string(l));
  expect_same_slices(a.instants, b.instants, where + " instants");
  expect_same_slices(a.aggregate, b.aggregate, where + " aggregate");
}

/// Two timelines of one run laid out alike: lanes, slices, labels, flows, phases, rows.
void expect_same_timeline(const RunTimeline& a, const RunTimeline& b) {
  EXPECT_EQ(a.run.id, b.run.id);
  EXPECT_EQ(a.partial, b.partial);
  EXPECT_EQ(a.origin_ns, b.origin_ns);
  EXPECT_EQ(a.duration_ns, b.duration_ns);
  EXPECT_EQ(a.strings, b.strings);
  EXPECT_EQ(a.event_count(), b.event_count());
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (size_t g = 0; g < a.groups.size(); ++g) {
    const LaneGroup &x = a.groups[g], &y = b.groups[g];
    const std::string where = "group " + std::to_string(g) + " " + x.title;
    EXPECT_EQ(x.device, y.device) << where;
    EXPECT_EQ(x.title, y.title) << where;
    EXPECT_EQ(x.host, y.host) << where;
    EXPECT_EQ(x.thread, y.thread) << where;
    EXPECT_EQ(x.os_tid, y.os_tid) << where;
    ASSERT_EQ(x.tracks.size(), y.tracks.size()) << where;
    for (size_t t = 0; t < x.tracks.size(); ++t) expect_same_track(x.tracks[t], y.tracks[t], where + " / " + x.tracks[t].name);
    ASSERT_EQ(x.residency.size(), y.residency.size()) << where;
    for (size_t t = 0; t < x.residency.size(); ++t) expect_same_track(x.residency[t], y.residency[t], where + " residency");
    expect_same_track(x.residency_summary, y.residency_summary, where + " residency summary");
  }
  ASSERT_EQ(a.flows.size(), b.flows.size());
  for (size_t i = 0; i < a.flows.size(); ++i) {
    const Flow &x = a.flows[i], &y = b.flows[i];
    EXPECT_TRUE(x.start_ns == y.start_ns && x.end_ns == y.end_ns && x.src_group == y.src_group &&
                x.dst_group == y.dst_group && x.row == y.row && x.src_row == y.src_row && x.src == y.src &&
                x.dst == y.dst && x.src_track == y.src_track && x.dst_track == y.dst_track &&
                x.src_level == y.src_level && x.dst_level == y.dst_level)
        << "flow " << i;
  }
  ASSERT_EQ(a.phases.size(), b.phases.size());
  for (size_t i = 0; i < a.phases.size(); ++i)
    EXPECT_TRUE(a.phases[i].start_ns == b.phases[i].start_ns && a.phases[i].end_ns == b.phases[i].end_ns &&
                a.phases[i].name == b.phases[i].name && a.phases[i].events == b.phases[i].events);
  ASSERT_EQ(a.swap_groups.size(), b.swap_groups.size());
  for (size_t i = 0; i < a.swap_groups.size(); ++i)
    EXPECT_TRUE(a.swap_groups[i].start_ns == b.swap_groups[i].start_ns &&
                a.swap_groups[i].end_ns == b.swap_groups[i].end_ns && a.swap_groups[i].onloads == b.swap_groups[i].onloads);
  ASSERT_EQ(a.residency_units.size(), b.residency_units.size());
#define HS_EXPECT_SAME_ROWS_(Type, Row, rows, ...) expect_same_rows(a.rows, b.rows, #rows);
  HS_HOST_EVENT_KINDS(HS_EXPECT_SAME_ROWS_)
  HS_ACTIVITY_KINDS(HS_EXPECT_SAME_ROWS_)
#undef HS_EXPECT_SAME_ROWS_
}

/// The sum of a run's rows over every kind, as the reader's Stored rows count them.
int64_t rows_of(const storage::CaptureReader& rd, int64_t run) {
  const storage::RunRows r = rd.run_rows(run);
  int64_t n = 0;
#define HS_COUNT_(Type, Row, rows, ...) n += static_cast<int64_t>(r.rows.size());
  HS_HOST_EVENT_KINDS(HS_COUNT_)
  HS_ACTIVITY_KINDS(HS_COUNT_)
#undef HS_COUNT_
  return n;
}

/// 10000049 → "10,000,049", as the views write counts.
std::string grouped(int64_t n) {
  std::string d = std::to_string(n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

// ------------------------------------------------------------------ a window and its frames

struct Window {
  GlWindow win{1300, 900, false, "load"};
  View* view = nullptr;
  int frames = 0;
  void frame(const ScriptedInput* in = nullptr) {
    win.frame([&](float w, float h) { view->Frame(w, h); }, in);
    ++frames;
  }
  /// Frames until `done()` or `seconds` pass; returns done().
  template <class F>
  bool frames_until(F&& done, double seconds = 120) {
    const auto t0 = Clock::now();
    while (!done()) {
      if (std::chrono::duration<double>(Clock::now() - t0).count() > seconds) return false;
      frame();
    }
    return true;
  }
  void click(float x, float y, bool ctrl = false) {
    ScriptedInput in;
    in.x = x;
    in.y = y;
    in.ctrl = ctrl;
    frame(&in);
    in.down[0] = true;
    frame(&in);
    in.down[0] = false;
    frame(&in);
  }
  /// Clicks the runs list's row of run `id` (of capture 0).
  void click_run(int64_t id, bool ctrl = false) {
    for (const auto& r : view->layout().run_rows)
      if (r.run_id == id && r.capture == 0) return click(view->layout().run_filter[0] + 30, 0.5f * (r.y0 + r.y1), ctrl);
    ADD_FAILURE() << "run " << id << " not in the runs list";
  }
};

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

/// SQLite's integrity_check of `file` says "ok".
bool whole(const fs::path& file) {
  sqlite3* db = nullptr;
  bool ok = false;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, nullptr) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
      ok = std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))) == "ok";
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return ok;
}

}  // namespace

// A run of 300k events held at its module compute (the largest kind, read after the preview's):
// frames go on, the timeline area says which run loads and how many of its rows are read, the
// preview's lanes (steps, transfers) are drawn and its transfers table works, the compare matrix
// draws; released, the run ends as the synchronous load lays it out, its rows the reader's.
TEST(ViewLoad, FramesAreDrawnWhileARunLoadsAndItEndsAsTheSynchronousLoad) {
  const Capture c = make_capture("load_frames", 300'000);
  const int64_t run = c.runs[0].run_id;
  auto rd = std::make_shared<const storage::CaptureReader>(c.file);
  Gate gate;
  gate.hold = "module_compute";
  ViewOptions o;
  o.background = true;
  o.load.hook = gate.hook();
  Window w;
  View view(rd, o);
  w.view = &view;
  ASSERT_TRUE(view.loading(0)) << "the constructor returned with the run loaded";
  ASSERT_EQ(view.run_id(), run);
  ASSERT_TRUE(w.frames_until([&] { return gate.held_count() > 0 && view.timeline(0); }, 120))
      << "no preview while the load is held";
  w.frame();
  const RunTimeline* preview = view.timeline(0);
  ASSERT_NE(preview, nullptr);
  EXPECT_TRUE(preview->partial);
  EXPECT_TRUE(view.loading(0));
  EXPECT_NE(std::find(preview->pending.begin(), preview->pending.end(), "module_compute"), preview->pending.end());
  EXPECT_TRUE(preview->module_compute.empty());
  EXPECT_FALSE(preview->generation_steps.empty());
  EXPECT_FALSE(preview->transfers.empty());

  // What the timeline area says.
  const auto& l = view.layout();
  ASSERT_EQ(l.loads.size(), 1u);
  const int64_t total = rows_of(*rd, run);
  EXPECT_EQ(l.loads[0].run_id, run);
  EXPECT_EQ(l.loads[0].rows_total, total);
  EXPECT_GT(l.loads[0].rows_read, 0);
  EXPECT_LT(l.loads[0].rows_read, total);
  EXPECT_TRUE(l.loads[0].preview);
  EXPECT_FALSE(l.loads[0].failed);
  EXPECT_TRUE(contains(l.loads[0].text, "loading run " + std::to_string(run) + ": ")) << l.loads[0].text;
  EXPECT_TRUE(contains(l.loads[0].text, " of " + grouped(total) + " rows read")) << l.loads[0].text;
  EXPECT_TRUE(contains(l.loads[0].text, "module compute")) << l.loads[0].text;
  EXPECT_FALSE(l.groups.empty()) << "the preview's lanes are not drawn";

  // The rest of the viewer works meanwhile.
  view.SetTab(Tab::Compare);
  w.frame(), w.frame();
  EXPECT_EQ(view.layout().compare_rows.size(), c.runs.size());
  view.SetTab(Tab::Transfers);  // the preview holds every transfer
  w.frame(), w.frame();
  EXPECT_FALSE(view.layout().table_rows.empty());
  EXPECT_TRUE(view.layout().empty_message.empty());
  view.SetTab(Tab::Breaks);  // graph breaks are still to come: the tab says it loads
  w.frame(), w.frame();
  EXPECT_TRUE(view.layout().table_rows.empty());
  ASSERT_EQ(view.layout().loads.size(), 1u);
  // Every frame above was drawn while the gate held the load: a frame that waited for the load
  // would never have returned. (No time limit on a frame: under the sanitizers on a loaded
  // 2-core machine one llvmpipe frame has taken 2.3 s.)
  EXPECT_TRUE(view.loading(0));
  view.SetTab(Tab::Timeline);

  gate.release();
  ASSERT_TRUE(w.frames_until([&] { return !view.loading(0); }, 300));
  w.frame();
  EXPECT_TRUE(view.layout().loads.empty());
  EXPECT_TRUE(view.load_error(0).empty());
  const RunTimeline* tl = view.timeline(0);
  ASSERT_NE(tl, nullptr);
  EXPECT_FALSE(tl->partial);
  EXPECT_TRUE(tl->pending.empty());
  expect_same_timeline(*tl, load_run_timeline(*rd, run));
  expect_rows_as_stored(*tl, rd->run_rows(run), true);
  EXPECT_EQ(gate.cancels(), 0);
  for (const char* step : {"plan", "preview", "layout", "hook_events", "module_compute"})
    EXPECT_TRUE(gate.steps.count(step)) << step;
}

// Clicking another run while the first is held midway: the first load is cancelled (its hook
// woken by the cancel) and never shown; the second loads and is drawn; a compared run (Ctrl+
// click) loads in its own slot meanwhile.
TEST(ViewLoad, SwitchingRunsMidLoadSupersedesTheLoad) {
  const Capture c = make_capture("load_switch", 300'000);
  auto rd = std::make_shared<const storage::CaptureReader>(c.file);
  Gate gate;
  gate.hold = "module_compute";
  ViewOptions o;
  o.background = true;
  o.load.hook = gate.hook();
  Window w;
  View view(rd, o);
  w.view = &view;
  ASSERT_TRUE(w.frames_until([&] { return gate.held_count() > 0; }, 120));
  w.frame();
  const int64_t second = c.runs[1].run_id, third = c.runs[2].run_id;
  w.click_run(second);
  EXPECT_EQ(view.run_id(), second);
  ASSERT_TRUE(w.frames_until([&] { return gate.cancels() > 0; }, 30)) << "the first load was not cancelled";
  gate.release();
  bool first_shown = false;
  ASSERT_TRUE(w.frames_until([&] {
    if (view.timeline(0) && view.timeline(0)->run.id != second) first_shown = true;
    return !view.loading(0);
  }));
  EXPECT_FALSE(first_shown) << "the superseded load's timeline was shown";
  ASSERT_NE(view.timeline(0), nullptr);
  expect_same_timeline(*view.timeline(0), load_run_timeline(*rd, second));

  w.click_run(third, /*ctrl=*/true);  // aligned under the second
  EXPECT_EQ(view.run_capture(1), 0u);
  ASSERT_TRUE(w.frames_until([&] { return !view.loading(1); }));
  ASSERT_NE(view.timeline(1), nullptr);
  EXPECT_EQ(view.timeline(1)->run.id, third);
  w.frame();
  EXPECT_EQ(view.layout().panes.size(), 2u);

  // Switching back to the large run, then away again before it is read: no timeline of it.
  w.click_run(c.runs[0].run_id);
  w.click_run(c.runs[3].run_id);
  ASSERT_TRUE(w.frames_until([&] { return !view.loading(0) && !view.loading(1); }));
  EXPECT_EQ(view.timeline(0)->run.id, c.runs[3].run_id);
}

// Destroying the View while a load is held (the window closed mid-load) cancels it and waits
// for its threads: the hook is woken by the cancel, no thread keeps the reader. A View
// destroyed as soon as it started loading (no hook) stops as cleanly. Run under `./run test
// --sanitize` for use-after-free and leaks.
TEST(ViewLoad, DestroyingTheViewMidLoadStopsItsThreads) {
  const Capture c = make_capture("load_destroy", 300'000);
  auto rd = std::make_shared<const storage::CaptureReader>(c.file);
  Gate gate;
  gate.hold = "module_compute";
  {
    ViewOptions o;
    o.background = true;
    o.load.hook = gate.hook();
    Window w;
    View view(rd, o);
    w.view = &view;
    ASSERT_TRUE(w.frames_until([&] { return gate.held_count() > 0; }, 120));
    w.frame();
    EXPECT_TRUE(view.loading(0));
  }
  EXPECT_EQ(gate.cancels(), 1);
  EXPECT_EQ(rd.use_count(), 1) << "a load's thread still holds the reader";
  for (int i = 0; i < 3; ++i) {
    ViewOptions o;
    o.background = true;
    View view(rd, o);
    if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // mid-read
    view.SetCompareRun(c.runs[1].run_id);
  }
  EXPECT_EQ(rd.use_count(), 1);
}

// A run with rows no capture writes (an end before its start): its load fails naming them as
// check_rows does, the timeline and its tables say so, the compare matrix and the other runs
// work. A View that waits for its loads throws the same error.
TEST(ViewLoad, ARunWithRowsNoCaptureWritesSaysSoWhileTheRestWorks) {
  const Capture c = make_capture("load_damaged", 0);
  const fs::path bad = test::edited_copy(c.file, c.file.parent_path() / "backwards.sqlite",
                                         "UPDATE HOOK_EVENTS SET end = start - 1 WHERE runId = 1 AND rowid % 7 = 3");
  auto rd = std::make_shared<const storage::CaptureReader>(bad);
  ViewOptions o;
  o.background = true;
  Window w;
  View view(rd, o);
  w.view = &view;
  ASSERT_TRUE(w.frames_until([&] { return !view.loading(0); }));
  w.frame();
  EXPECT_EQ(view.timeline(0), nullptr);
  EXPECT_TRUE(contains(view.load_error(0), "run 1: ")) << view.load_error(0);
  EXPECT_TRUE(contains(view.load_error(0), "of HOOK_EVENTS that no capture writes; the first (rowid ")) << view.load_error(0);
  EXPECT_TRUE(contains(view.load_error(0), ") it ends before it starts")) << view.load_error(0);
  ASSERT_EQ(view.layout().loads.size(), 1u);
  EXPECT_TRUE(view.layout().loads[0].failed);
  EXPECT_TRUE(contains(view.layout().loads[0].text, "cannot show run 1: ")) << view.layout().loads[0].text;
  view.SetTab(Tab::Compare);
  w.frame(), w.frame();
  EXPECT_EQ(view.layout().compare_rows.size(), c.runs.size());
  view.SetTab(Tab::Timeline);
  w.frame();
  w.click_run(c.runs[1].run_id);
  ASSERT_TRUE(w.frames_until([&] { return !view.loading(0); }));
  ASSERT_NE(view.timeline(0), nullptr);
  EXPECT_TRUE(view.load_error(0).empty());
  EXPECT_THROW(View{rd}, storage::CaptureError);
}

// The rows a load reads are the reader's Stored rows: runs of one capture each read by a
// bounded table scan; two runs written interleaved (the scan of the run's rowids finds fewer
// rows than the index counts: read again through the index); a capture without indexes (not
// finalized: every row scanned). Progress counts every row once.
TEST(TimelineLoad, SharedRowsAreTheStoredRowsInEveryLayoutOfTheFile) {
  const Capture c = make_capture("load_rows", 0);
  const storage::CaptureReader rd(c.file);
  for (const auto& r : c.runs) {
    storage::ReadProgress progress;
    const storage::SharedRunRows shared = rd.shared_run_rows(r.run_id, &progress);
    expect_rows_as_stored(shared, rd.run_rows(r.run_id), false);
    EXPECT_EQ(progress.rows.load(), rows_of(rd, r.run_id));
    EXPECT_EQ(rd.plan_shared<storage::SharedHookEventRow>(r.run_id).rows,
              static_cast<int64_t>(shared.hook_events.size()));
  }

  for (const bool finalized : {true, false}) {
    const fs::path file = test::scratch_dir(finalized ? "load_interleaved" : "load_unindexed") / "ops.sqlite";
    {
      storage::Store store(file);
      tracer::RunInfo info;
      info.engine = "import";
      const int64_t a = store.add_run(info), b = store.add_run(info);
      for (int batch = 0; batch < 6; ++batch)
        for (const int64_t run : {a, b}) {
          std::vector<tracer::CpuOpActivity> ops(50);
          for (size_t i = 0; i < ops.size(); ++i) {
            ops[i].os_tid = 7 + run;
            ops[i].name = (i % 3 ? "aten::mm" : "aten::add");
            ops[i].category = "cpu_op";
            ops[i].start_ns = 1000 * (batch * 50 + static_cast<int64_t>(ops.size() - i));  // not in start order
            ops[i].end_ns = ops[i].start_ns + 500;
          }
          tracer::ActivityBatch batch_ops;
          batch_ops.run_id = run;
          batch_ops.pid = 1;
          batch_ops.cpu_ops = ops;
          store.write_activity(batch_ops);
        }
      store.end_run(a, tracer::RunStatus::Complete);
      store.end_run(b, tracer::RunStatus::Complete);
      if (finalized) store.finalize();
      store.close();
    }
    const storage::CaptureReader ops(file);
    for (const int64_t run : {int64_t{1}, int64_t{2}}) {
      storage::ReadProgress progress;
      const storage::SharedRunRows shared = ops.shared_run_rows(run, &progress);
      EXPECT_EQ(shared.cpu_ops.size(), 300u);
      expect_rows_as_stored(shared, ops.run_rows(run), false);
      EXPECT_EQ(progress.rows.load(), 300) << (finalized ? "interleaved" : "unindexed");
      const storage::ReadPlan plan = ops.plan_shared<storage::SharedCpuOpRow>(run);
      EXPECT_EQ(plan.rows, finalized ? 300 : -1);
      EXPECT_EQ(plan.bounded, finalized);
      // Laid out through the loader as through load_run_timeline, with one reading thread or two.
      LoadControl one;
      one.threads = 1;
      expect_same_timeline(load_timeline(ops, run, one), load_run_timeline(ops, run));
    }
  }
}

// report, stats and export read a closed capture's big runs from its pages (CaptureReader::
// read_rows_from_pages): every kind's rows are those SQLite's ordered query reads (the same
// file in WAL mode, which is read through SQLite only), in a synthetic capture of several runs
// of thousands of events and in runs of 300 CPU ops written out of start order, with ties.
TEST(TimelineLoad, StoredRowsFromPagesAreTheRowsSQLiteReads) {
  const Capture c = make_capture("pages_as_sqlite", 20000);
  const fs::path ops_file = test::scratch_dir("pages_as_sqlite_ops") / "ops.sqlite";
  {
    storage::Store store(ops_file);
    tracer::RunInfo info;
    info.engine = "import";
    for (int r = 0; r < 3; ++r) {
      const int64_t run = store.add_run(info);
      std::vector<tracer::CpuOpActivity> ops(300 + 100 * r);
      for (size_t i = 0; i < ops.size(); ++i) {
        ops[i].os_tid = 7;
        ops[i].name = i % 3 ? "aten::mm" : "aten::add";
        ops[i].category = "cpu_op";
        ops[i].start_ns = 1000 * static_cast<int64_t>((ops.size() - i) / 2);  // descending, in pairs
        ops[i].end_ns = ops[i].start_ns + 500 + static_cast<int64_t>(i);
      }
      tracer::ActivityBatch batch;
      batch.run_id = run;
      batch.pid = 1;
      batch.cpu_ops = ops;
      store.write_activity(batch);
      store.end_run(run, tracer::RunStatus::Complete);
    }
    store.finalize();
    store.close();
  }
  int big_runs = 0;
  for (const fs::path& file : {c.file, ops_file}) {
    const fs::path wal = test::edited_copy(file, file.parent_path() / "wal.sqlite", "PRAGMA journal_mode=WAL");
    storage::ReaderOptions every_run;  // small runs too, not only those of 256 rows or more
    every_run.page_read_min_rows = 0;
    const storage::CaptureReader pages(file), pages_all(file, every_run), sqlite(wal);
    for (const auto& run : pages.runs()) {
      SCOPED_TRACE(file.filename().string() + " run " + std::to_string(run.id));
      const storage::RunRows a = pages.run_rows(run.id), all = pages_all.run_rows(run.id), b = sqlite.run_rows(run.id);
#define HS_EXPECT_ROWS_(Type, Row, rows, ...) \
  expect_same_rows(a.rows, b.rows, #rows);    \
  expect_same_rows(all.rows, b.rows, #rows);
      HS_HOST_EVENT_KINDS(HS_EXPECT_ROWS_)
      HS_ACTIVITY_KINDS(HS_EXPECT_ROWS_)
#undef HS_EXPECT_ROWS_
      big_runs += a.hook_events.size() >= 256 || a.cpu_ops.size() >= 256;
    }
  }
  EXPECT_EQ(big_runs, 4) << "runs big enough to be read from the pages: the first synthetic one and the three of CPU ops";
}

// A capture renamed over the path after the reader opened it: SQLite reads the file it opened,
// and so must the page reader (it mapped the new file by its path, mixing two files' rows).
TEST(TimelineLoad, AFileRenamedOverTheCaptureIsNotReadFromItsPages) {
  const Capture c = make_capture("pages_moved", 2000);
  const fs::path dir = c.file.parent_path();
  const fs::path other = test::edited_copy(c.file, dir / "other.sqlite", "UPDATE HOOK_EVENTS SET start = start + 7, end = end + 7");
  const fs::path file = dir / "read.sqlite";
  fs::copy_file(c.file, file, fs::copy_options::overwrite_existing);
  storage::ReaderOptions every_run;
  every_run.page_read_min_rows = 0;
  const storage::CaptureReader rd(file, every_run), original(c.file);
  fs::rename(other, file);
  for (const auto& r : c.runs) {
    SCOPED_TRACE(r.run_id);
    EXPECT_NO_THROW(rd.check_rows(r.run_id));
    const storage::RunRows a = rd.run_rows(r.run_id), b = original.run_rows(r.run_id);
    expect_same_rows(a.hook_events, b.hook_events, "hook_events");
    expect_rows_as_stored(rd.shared_run_rows(r.run_id), b, false);
  }
}

// A table whose rowids span the whole int64 range (a hand-edited file: the first row at -2^63,
// the last at 2^63 - 1): each run's rows are still found by the binary search over rowids, and
// the last row is read.
TEST(TimelineLoad, RowidsAtTheEndsOfInt64AreReadLikeAnyOthers) {
  const Capture c = make_capture("load_extreme_rowids", 0);
  ASSERT_GT(c.runs.size(), 1u);
  const fs::path file = test::edited_copy(
      c.file, c.file.parent_path() / "extreme.sqlite",
      "UPDATE HOOK_EVENTS SET rowid = -9223372036854775808 WHERE rowid = (SELECT min(rowid) FROM HOOK_EVENTS);"
      "UPDATE HOOK_EVENTS SET rowid = 9223372036854775807 WHERE rowid = (SELECT max(rowid) FROM HOOK_EVENTS);");
  const storage::CaptureReader rd(file);
  for (const auto& r : c.runs) {
    SCOPED_TRACE(r.run_id);
    const storage::SharedRunRows shared = rd.shared_run_rows(r.run_id);
    EXPECT_EQ(shared.hook_events.size(), rd.hook_events(r.run_id).size());
    expect_rows_as_stored(shared, rd.run_rows(r.run_id), false);
  }
}

// The page reader (storage/btree_pages.h) on damaged files: bytes of a capture's pages changed
// at random, each copy read both ways. Never a crash or a read past the file (the sanitizer
// build checks); where SQLite's integrity_check finds the copy whole, the rows are SQLite's (a
// damaged index and its table disagree on what a run holds: no reader is right there). A
// capture still being written (WAL: pages in the -wal) is read through SQLite, as written.
TEST(TimelineLoad, DamagedPagesAreReadAsSQLiteReadsThemOrRefused) {
  const Capture c = make_capture("load_damaged_pages", 0);
  const auto size = static_cast<int64_t>(fs::file_size(c.file));
  const std::string original = test::read_file(c.file);
  const fs::path copy = c.file.parent_path() / "damaged.sqlite";
  uint64_t seed = 12345;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull; };
  int read_both = 0, refused = 0;
  for (int i = 0; i < 200; ++i) {
    std::string bytes = original;
    for (int k = 0; k < 1 + i % 4; ++k) {  // past the first page: its header says what the file is
      const int64_t at = 4096 + static_cast<int64_t>(next() % static_cast<uint64_t>(size - 4096));
      bytes[static_cast<size_t>(at)] = static_cast<char>(next() >> 56);
    }
    {
      std::ofstream out(copy, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::optional<storage::SharedRunRows> shared;
    std::optional<storage::RunRows> stored;
    try {
      const storage::CaptureReader rd(copy);
      try {
        shared = rd.shared_run_rows(1);
      } catch (const storage::CaptureError&) {
      }
      try {
        stored = rd.run_rows(1);
      } catch (const storage::CaptureError&) {
      }
    } catch (const storage::CaptureError&) {  // not a capture any more
    } catch (const std::out_of_range&) {      // RUNS lost its run
    }
    if (shared && stored && whole(copy)) {
      ++read_both;
      expect_rows_as_stored(*shared, *stored, false);
    } else {
      ++refused;
    }
  }
  EXPECT_GT(read_both, 10);
  EXPECT_GT(refused, 10);
  RecordProperty("read_both", read_both);
  RecordProperty("refused", refused);

  // A capture being written: WAL mode, what came after the last checkpoint only in the -wal
  // (the file's own pages hold an older table).
  const fs::path wal = test::scratch_dir("load_wal") / "open.sqlite";
  storage::Store store(wal);
  tracer::RunInfo info;
  info.engine = "import";
  const int64_t run = store.add_run(info);
  auto batch = [&](int64_t from) {
    std::vector<tracer::CpuOpActivity> ops(100);
    for (size_t i = 0; i < ops.size(); ++i) {
      ops[i].os_tid = 7;
      ops[i].name = "aten::mm";
      ops[i].category = "cpu_op";
      ops[i].start_ns = 1000 * (from + static_cast<int64_t>(i));
      ops[i].end_ns = ops[i].start_ns + 500;
    }
    tracer::ActivityBatch b;
    b.run_id = run;
    b.pid = 1;
    b.cpu_ops = ops;
    store.write_activity(b);
  };
  batch(0);
  store.finalize();  // checkpointed: in the file
  batch(100);        // in the -wal
  const storage::CaptureReader rd(wal);
  const storage::SharedRunRows shared = rd.shared_run_rows(run);
  EXPECT_EQ(shared.cpu_ops.size(), 200u);
  expect_rows_as_stored(shared, rd.run_rows(run), false);
}
