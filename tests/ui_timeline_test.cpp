// The viewer's model without a window: time <-> pixel mapping, nesting levels, LOD culling and
// merging, hit testing, range statistics, and a run laid out from a synthetic capture whose
// every time and count is known in advance.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "storage/capture_reader.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"
#include "ui/run_timeline.h"
#include "ui/text_fit.h"
#include "ui/time_axis.h"

namespace {

using namespace hs;
using namespace hs::ui;

TEST(TimeView, PixelsAndTimesAreInverse) {
  TimeView v{1000, 50, 800};
  EXPECT_FLOAT_EQ(v.x_of(1000), 0);
  EXPECT_FLOAT_EQ(v.x_of(1000 + 50 * 800), 800);
  EXPECT_DOUBLE_EQ(v.t_of(400), 1000 + 50 * 400);
  EXPECT_DOUBLE_EQ(v.end_ns(), 41000);
}

TEST(TimeView, ZoomKeepsTheTimeUnderTheCursor) {
  TimeView v{0, 100, 1000};
  const double under = v.t_of(250);
  v.zoom_at(250, 4.0);
  EXPECT_DOUBLE_EQ(v.ns_per_px, 25);
  EXPECT_NEAR(v.t_of(250), under, 1e-6);
  v.zoom_at(900, 0.5);  // out
  EXPECT_DOUBLE_EQ(v.ns_per_px, 50);
  // Zoom is clamped at both ends.
  v.zoom_at(0, 1e30);
  EXPECT_DOUBLE_EQ(v.ns_per_px, TimeView::kMinNsPerPx);
  v.zoom_at(0, 1e-30);
  EXPECT_DOUBLE_EQ(v.ns_per_px, TimeView::kMaxNsPerPx);
}

TEST(TimeView, PanFitAndCenter) {
  TimeView v{0, 10, 1000};
  v.pan_px(100);  // content dragged right: earlier times come into view
  EXPECT_DOUBLE_EQ(v.start_ns, -1000);
  v.fit(2000, 12000, 0.0);
  EXPECT_DOUBLE_EQ(v.start_ns, 2000);
  EXPECT_DOUBLE_EQ(v.end_ns(), 12000);
  v.fit(0, 10000, 0.1);  // 10% margin each side
  EXPECT_DOUBLE_EQ(v.start_ns, -1000);
  EXPECT_DOUBLE_EQ(v.end_ns(), 11000);
  v.center_on(50000);
  EXPECT_DOUBLE_EQ(v.t_of(500), 50000);
}

TEST(Levels, NestedSlicesGoOneLevelDown) {
  // layer [0,100) > attn [10,40), mlp [50,90) > act [60,70); then a sibling layer [100,200).
  std::vector<Slice> in = {{50, 90, 0, 2, 0}, {0, 100, 0, 0, 0}, {100, 200, 0, 4, 0}, {10, 40, 0, 1, 0}, {60, 70, 0, 3, 0}};
  auto lv = build_levels(in);
  ASSERT_EQ(lv.size(), 3u);
  ASSERT_EQ(lv[0].size(), 2u);
  EXPECT_EQ(lv[0][0].row, 0u);
  EXPECT_EQ(lv[0][1].row, 4u);
  ASSERT_EQ(lv[1].size(), 2u);
  EXPECT_EQ(lv[1][0].row, 1u);
  EXPECT_EQ(lv[1][1].row, 2u);
  ASSERT_EQ(lv[2].size(), 1u);
  EXPECT_EQ(lv[2][0].row, 3u);
}

TEST(Levels, AnyInputGivesSortedNonOverlappingLevelsKeepingEverySlice) {
  std::mt19937_64 rng(7);
  std::vector<Slice> in;
  for (uint32_t i = 0; i < 5000; ++i) {
    const int64_t a = static_cast<int64_t>(rng() % 100000), d = static_cast<int64_t>(rng() % 3000);
    in.push_back({a, a + d, 0, i, 0});
  }
  auto lv = build_levels(in);
  size_t total = 0;
  std::vector<bool> seen(in.size());
  for (const auto& level : lv) {
    total += level.size();
    for (size_t i = 0; i < level.size(); ++i) {
      seen[level[i].row] = true;
      if (i) {
        EXPECT_LE(level[i - 1].end_ns, level[i].start_ns);
        EXPECT_LE(level[i - 1].start_ns, level[i].start_ns);
      }
    }
  }
  EXPECT_EQ(total, in.size());
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));
}

std::vector<Slice> evenly(int64_t n, int64_t start, int64_t period, int64_t width) {
  std::vector<Slice> v;
  v.reserve(n);
  for (int64_t i = 0; i < n; ++i)
    v.push_back({start + i * period, start + i * period + width, 0, static_cast<uint32_t>(i), 0});
  return v;
}

TEST(Lod, WideSlicesAreDrawnAsThemselvesAndCulled) {
  auto level = evenly(10, 0, 1000, 600);  // [0,600), [1000,1600), ...
  TimeView v{1500, 10, 200};              // 1500 .. 3500
  auto boxes = layout_level(level, v, 3);
  ASSERT_EQ(boxes.size(), 3u);  // slices 1 (clipped), 2, 3 (clipped)
  EXPECT_EQ(boxes[0].first, 1u);
  EXPECT_FLOAT_EQ(boxes[0].x0, 0);    // clipped at the left edge
  EXPECT_FLOAT_EQ(boxes[0].x1, 10);   // 1600 → (1600-1500)/10
  EXPECT_FLOAT_EQ(boxes[1].x0, 50);
  EXPECT_FLOAT_EQ(boxes[1].x1, 110);
  EXPECT_EQ(boxes[2].first, 3u);
  EXPECT_FLOAT_EQ(boxes[2].x0, 150);
  EXPECT_FLOAT_EQ(boxes[2].x1, 200);  // clipped at the right edge
  for (const auto& b : boxes) EXPECT_FALSE(b.merged());
}

TEST(Lod, MillionsOfTinySlicesMergeIntoAFewBoxesCoveringEachOnce) {
  const int64_t n = 2'000'000;
  auto level = evenly(n, 0, 100, 60);  // 2M slices over 200 ms
  TimeView v;
  v.width_px = 1000;
  v.fit(0, static_cast<double>(n * 100), 0);
  auto boxes = layout_level(level, v, 3);
  ASSERT_FALSE(boxes.empty());
  EXPECT_LE(boxes.size(), 1000u / 3 + 2);
  uint64_t covered = 0;
  uint32_t next = 0;
  for (const auto& b : boxes) {
    EXPECT_EQ(b.first, next);  // consecutive, no slice twice, none skipped
    next = b.first + b.count;
    covered += b.count;
    EXPECT_TRUE(b.merged());
    EXPECT_GE(b.x1 - b.x0, 3.0f - 1e-3f);
  }
  EXPECT_EQ(covered, static_cast<uint64_t>(n));
}

TEST(Lod, TinyRunBeforeAWideSliceKeepsTheWideOneSeparate) {
  std::vector<Slice> level = evenly(50, 0, 10, 5);                        // tiny, 0..500
  level.push_back({505, 5000, 0, 50, 0});                                 // wide
  for (auto s : evenly(10, 5001, 10, 5)) level.push_back({s.start_ns, s.end_ns, 0, 51 + s.row, 0});
  TimeView v;
  v.width_px = 600;
  v.fit(0, 6000, 0);  // 10 ns per px: tiny slices are 0.5 px
  auto boxes = layout_level(level, v, 3);
  ASSERT_GE(boxes.size(), 3u);
  EXPECT_TRUE(boxes[0].merged());
  EXPECT_EQ(boxes[0].first, 0u);
  EXPECT_EQ(boxes[0].count, 50u);
  EXPECT_FALSE(boxes[1].merged());
  EXPECT_EQ(boxes[1].first, 50u);
  EXPECT_TRUE(boxes[2].merged());
  EXPECT_EQ(boxes[2].first, 51u);
}

TEST(Lod, ALoneTinySliceIsWidenedAndZoomingInSeparatesMergedOnes) {
  std::vector<Slice> level = {{1000, 1001, 0, 0, 0}, {1003, 1004, 0, 1, 0}, {50000, 50001, 0, 2, 0}};
  TimeView v;
  v.width_px = 1000;
  v.fit(0, 100000, 0);  // 100 ns per px
  auto boxes = layout_level(level, v, 3);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0].count, 2u);
  EXPECT_EQ(boxes[1].count, 1u);
  EXPECT_NEAR(boxes[1].x1 - boxes[1].x0, 3.0f, 1e-3);
  v.fit(990, 1010, 0);  // 0.02 ns per px: both are 50 px wide now
  boxes = layout_level(level, v, 3);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_FALSE(boxes[0].merged());
  EXPECT_FALSE(boxes[1].merged());
  EXPECT_EQ(boxes[1].first, 1u);
}

TEST(HitTest, FindAtUsesTheSlop) {
  auto level = evenly(100, 0, 100, 10);
  EXPECT_EQ(find_at(level, 505, 0), 5);
  EXPECT_EQ(find_at(level, 550, 0), -1);
  EXPECT_EQ(find_at(level, 512, 3), 5);
  EXPECT_EQ(find_at(level, 597, 4), 6);
  EXPECT_EQ(find_at(level, -10, 5), -1);
}

TEST(Range, ClipSumCountsOnlyThePartsInside) {
  auto level = evenly(10, 0, 100, 50);
  auto c = clip_sum(level, 25, 225);  // [25,50) + [100,150) + [200,225)
  EXPECT_EQ(c.busy_ns, 25 + 50 + 25);
  EXPECT_EQ(c.count, 3);
  EXPECT_EQ(clip_sum(level, 60, 90).count, 0);
  EXPECT_EQ(clip_sum(level, 90, 60).busy_ns, 0);
}

TEST(Format, TicksDurationsBytes) {
  EXPECT_DOUBLE_EQ(tick_step_ns(1.0, 90), 100);
  EXPECT_DOUBLE_EQ(tick_step_ns(10.0, 90), 1000);
  EXPECT_DOUBLE_EQ(tick_step_ns(3.0, 90), 500);
  EXPECT_DOUBLE_EQ(tick_step_ns(2.0, 90), 200);
  EXPECT_EQ(format_duration(850), "850 ns");
  EXPECT_EQ(format_duration(12500), "12.5 us");
  EXPECT_EQ(format_duration(3.2e6), "3.20 ms");
  EXPECT_EQ(format_duration(1.5e9), "1.50 s");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(4096), "4.00 KiB");
  EXPECT_EQ(format_bytes(113246208), "108 MiB");
}

// A label that does not fit keeps its tail, whole components first; nothing when even the
// shortest tail does not fit. Widths from a callback: 7 px per character (the UI font's).
TEST(FitLabel, KeepsTheTailOfAModuleNameAndDropsWhatDoesNotFit) {
  const TextWidth mono = [](std::string_view s) { return 7.0f * static_cast<float>(s.size()); };
  const std::string fqn = "model.layers.3.mlp";  // 126 px
  EXPECT_EQ(fit_label(fqn, 126, mono), fqn);
  EXPECT_EQ(fit_label(fqn, 125, mono), "...layers.3.mlp");  // 105 px
  EXPECT_EQ(fit_label(fqn, 105, mono), "...layers.3.mlp");
  EXPECT_EQ(fit_label(fqn, 104, mono), "...3.mlp");
  EXPECT_EQ(fit_label(fqn, 55, mono), "...mlp");
  EXPECT_EQ(fit_label(fqn, 41, mono), "") << "not even the last component: the tooltip names it";
  // A short last component is still a whole one ("layer 3"), never a cut inside "layers".
  EXPECT_EQ(fit_label("model.layers.3", 76, mono), "...3");
  EXPECT_EQ(fit_label("model.layers.3", 77, mono), "...layers.3");
  // Spaces separate too: a hook span keeps its module.
  EXPECT_EQ(fit_label("AlignDevicesHook.pre_forward model.layers.12", 140, mono), "...model.layers.12");
  // No separator: characters go from the front, at least kMinTail stay.
  EXPECT_EQ(fit_label("abcdefghij", 49, mono), "...ghij");
  EXPECT_EQ(fit_label("abcdefghij", 42, mono), "...hij");
  EXPECT_EQ(fit_label("abcdefghij", 41, mono), "");
  EXPECT_EQ(fit_label("", 100, mono), "");
  EXPECT_EQ(fit_label(fqn, 0, mono), "");
}

// A step's label keeps its head, which names the generate: a warm-up stays told from a
// measured generate however narrow the step (widths per byte: "·" is two).
TEST(FitLabel, AStepKeepsTheGenerateItBelongsTo) {
  const TextWidth mono = [](std::string_view s) { return 7.0f * static_cast<float>(s.size()); };
  const std::string step = "warm-up 1 \u00b7 step 0";  // 19 bytes: 133 px
  EXPECT_EQ(fit_label(step, 133, mono, Keep::Head), step);
  EXPECT_EQ(fit_label(step, 132, mono, Keep::Head), "warm-up 1...") << "\"warm-up 1 \u00b7 step...\" is 133 px";
  EXPECT_EQ(fit_label(step, 84, mono, Keep::Head), "warm-up 1...");
  EXPECT_EQ(fit_label(step, 83, mono, Keep::Head), "warm-up...");
  EXPECT_EQ(fit_label(step, 69, mono, Keep::Head), "") << "not even the first word";
  EXPECT_EQ(fit_label("measured 2 \u00b7 step 5", 90, mono, Keep::Head), "measured...");
  EXPECT_EQ(fit_label(step, 110, mono).find("warm-up"), std::string::npos) << "the tail mode loses the generate";
}

// ------------------------------------------------------------------ a run from a capture

struct Capture {
  std::filesystem::path file;
  storage::SyntheticResult sharded, offload;
};

Capture make_capture(const std::string& name) {
  Capture c;
  c.file = test::scratch_dir(name) / "synthetic.sqlite";
  storage::Store store(c.file);
  storage::add_synthetic_devices(store, 4);
  storage::SyntheticRun s;
  s.layers = 8;
  s.tokens = 3;
  c.sharded = storage::write_synthetic_run(store, s);
  s.scenario = "cpu-offload";
  s.policy = "offload-only";
  s.mode = "eager";
  s.offload = true;
  c.offload = storage::write_synthetic_run(store, s);
  store.finalize();
  store.close();
  return c;
}

const LaneGroup& group(const RunTimeline& tl, const std::string& device) {
  const int g = tl.group_of(device);
  if (g < 0) throw std::runtime_error("no group " + device);
  return tl.groups[g];
}
const Track& track(const LaneGroup& g, const std::string& name) {
  for (const auto& t : g.tracks)
    if (t.name == name) return t;
  throw std::runtime_error("no track " + name + " in " + g.title);
}

TEST(RunTimeline, OneLaneGroupPerDeviceThenHostThreads) {
  auto c = make_capture("rt_groups");
  storage::CaptureReader rd(c.file);
  auto tl = load_run_timeline(rd, c.sharded.run_id);
  std::vector<std::string> devices;
  for (const auto& g : tl.groups) devices.push_back(g.host ? "host" : g.device);
  EXPECT_EQ(devices, (std::vector<std::string>{"0", "1", "2", "3", "cpu", "host"}));
  EXPECT_TRUE(tl.groups[0].emulated);
  EXPECT_NE(tl.groups[0].title.find("emulated"), std::string::npos);
  EXPECT_NE(tl.groups[0].title.find("max_memory 256 MiB"), std::string::npos);
  EXPECT_FALSE(group(tl, "cpu").emulated);
  EXPECT_EQ(tl.event_count(), static_cast<size_t>(c.sharded.events));
  EXPECT_EQ(tl.origin_ns, 1'000'000'000);
  EXPECT_EQ(tl.duration_ns, c.sharded.end_ns - tl.origin_ns);
}

// A name of megabytes (an edited capture's hook class, module and device) is cut in every label,
// lane name and group title, and labels equal as far as they are shown are one: a 10 MB hook
// name is part of one label per module and phase, and those labels had each been kept whole
// beside their cut copy (report --html and view took 7.5 GB and 33 s on the demo's capture).
TEST(RunTimeline, AHugeNameIsCutInEveryLabelAndTitleAndMadeOneLabel) {
  const auto c = make_capture("rt_huge");
  const std::string mib = "replace(hex(zeroblob(524288)), '0', ";  // 1 MiB of the letter given
  const auto file = test::edited_copy(
      c.file, test::scratch_dir("rt_huge_edited") / "huge.sqlite",
      "UPDATE StringIds SET value = " + mib + "'H') WHERE value = 'AlignDevicesHook';"
      "UPDATE StringIds SET value = " + mib + "'M') WHERE value = 'model.layers.3';"
      "UPDATE StringIds SET value = " + mib + "'D') WHERE value = '1';");
  storage::CaptureReader rd(file);
  for (const int64_t run : {c.sharded.run_id, c.offload.run_id}) {
    SCOPED_TRACE(run);
    const auto tl = load_run_timeline(rd, run);
    std::set<std::string> seen;
    size_t cut_hook_labels = 0, distinct = 0;
    for (const auto& l : tl.strings) {
      EXPECT_LE(l.size(), RunTimeline::kMaxLabelBytes);
      distinct += seen.insert(l).second;
      cut_hook_labels += l.starts_with("HHH") && l.ends_with("...");
    }
    EXPECT_EQ(distinct, tl.strings.size()) << "two labels read the same";
    EXPECT_EQ(cut_hook_labels, 1u) << "every hook call's label shows the same first bytes of the name";
    size_t hooks = 0, cut_titles = 0;
    for (const auto& g : tl.groups) {
      EXPECT_LE(g.title.size(), RunTimeline::kMaxLabelBytes) << g.title.substr(0, 40);
      cut_titles += g.title.find("DDD") != std::string::npos && g.title.ends_with("...");
      for (const auto& t : g.tracks) {
        EXPECT_LE(t.name.size(), RunTimeline::kMaxLabelBytes) << t.name.substr(0, 40);
        if (t.lane == Lane::Hooks)
          for (const auto& level : t.levels) hooks += level.size();
      }
    }
    EXPECT_EQ(cut_titles, 1u) << "the device named by 1 MiB has its group, its title cut";
    EXPECT_EQ(hooks, tl.hook_events.size()) << "every hook call is drawn";
    EXPECT_EQ(tl.hook_events.front().hook.size(), 1u << 20) << "the rows keep the name whole";
  }
}

// The steps lane says which generate a step belongs to, and which generates were warm-ups.
TEST(RunTimeline, StepsNameTheirGenerateAndTheWarmUps) {
  const auto file = test::scratch_dir("rt_warmup") / "synthetic.sqlite";
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 2);
    storage::SyntheticRun s;
    s.devices = 2;
    s.layers = 2;
    s.tokens = 6;
    s.steps_per_generate = 2;  // 3 generates of 2 steps
    const auto r = storage::write_synthetic_run(store, s);
    store.set_run_result(r.run_id, {{"warmup", 1}, {"repeats", 2}});
    store.finalize();
    store.close();
  }
  storage::CaptureReader rd(file);
  auto label_list = [&](const RunTimeline& tl) {
    std::vector<std::string> v;
    for (const auto& g : tl.groups)
      for (const auto& t : g.tracks)
        if (t.lane == Lane::Steps)
          for (const auto& level : t.levels)
            for (const auto& sl : level) v.push_back(tl.strings[sl.label]);
    return v;
  };
  EXPECT_EQ(label_list(load_run_timeline(rd, 1)),
            (std::vector<std::string>{"warm-up 1 · step 0", "warm-up 1 · step 1", "measured 1 · step 0",
                                      "measured 1 · step 1", "measured 2 · step 0", "measured 2 · step 1"}));
}

/// The steps lane of `tl`'s first host group.
const Track& steps_lane(const RunTimeline& tl) {
  for (const auto& g : tl.groups)
    for (const auto& t : g.tracks)
      if (t.lane == Lane::Steps) return t;
  throw std::runtime_error("no steps lane");
}

// What a run recorded before generation step 0 (the LibTorch engine's first call, checked
// against the reference) is labelled on the steps lane, and so is each eager generate an
// interleaved compiled run leaves unrecorded between its compiled ones.
TEST(RunTimeline, TheStepsLaneNamesWhatCameBeforeStepZeroAndTheEagerGenerates) {
  const auto file = test::scratch_dir("rt_phases") / "synthetic.sqlite";
  int64_t compiled = 0, eager = 0, plain = 0;
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 2);
    storage::SyntheticRun s;
    s.devices = 2;
    s.layers = 2;
    s.tokens = 4;
    s.steps_per_generate = 2;
    s.check_forward = true;
    compiled = storage::write_synthetic_run(store, s).run_id;
    store.set_run_result(compiled, {{"warmup", 1}, {"repeats", 1}, {"eager_decode_ms_per_token", {{"median", 1.0}}}});
    s.mode = "eager";
    eager = storage::write_synthetic_run(store, s).run_id;
    s.check_forward = false;
    plain = storage::write_synthetic_run(store, s).run_id;
    store.finalize();
    store.close();
  }
  storage::CaptureReader rd(file);
  const auto tl = load_run_timeline(rd, compiled);
  const Track& steps = steps_lane(tl);
  // Before step 0, then the eager generate before each of the two compiled generates.
  ASSERT_EQ(tl.phases.size(), 3u);
  const Slice& first = steps.levels.at(0).at(0);
  EXPECT_EQ(first.category, kPhase);
  EXPECT_EQ(slice_source(steps, first), Source::Phase);
  EXPECT_EQ(tl.strings[first.label], "before step 0: first compiled call (capture) + reference check");
  EXPECT_EQ(first.start_ns, 0);
  // It ends where the check forward's last event ends, before step 0 begins.
  const int64_t step0 = tl.generation_steps.at(0).start_ns - tl.origin_ns;
  EXPECT_GT(first.end_ns, 0);
  EXPECT_LE(first.end_ns, step0);
  EXPECT_GT(tl.phases[0].events, 0);
  EXPECT_NE(tl.phases[0].what.find("reference"), std::string::npos);
  EXPECT_NE(tl.phases[0].what.find("graph breaks"), std::string::npos) << tl.phases[0].what;
  EXPECT_EQ(describe(tl, Source::Phase, 0).at(0).second, tl.phases[0].name);
  EXPECT_EQ(tl.phases[1].start_ns, first.end_ns);
  EXPECT_EQ(tl.phases[1].end_ns, step0);
  const RunPhase& gap = tl.phases[2];
  for (const auto& p : {tl.phases[1], gap}) EXPECT_EQ(p.name, "eager generate (A B A B baseline, not recorded)");
  EXPECT_EQ(gap.start_ns, tl.generation_steps.at(1).end_ns - tl.origin_ns);
  EXPECT_EQ(gap.end_ns, tl.generation_steps.at(2).start_ns - tl.origin_ns);
  EXPECT_TRUE(categories_used(tl)[kPhase]);
  // An eager run's first forward is only checked; without it, nothing is before step 0.
  const auto te = load_run_timeline(rd, eager);
  ASSERT_EQ(te.phases.size(), 1u) << "no eager generates interleaved in an eager run";
  EXPECT_EQ(te.phases[0].name, "before step 0: first forward, checked against the reference");
  EXPECT_TRUE(load_run_timeline(rd, plain).phases.empty());
}

// A cpu-offload run's swaps, grouped per generation step on the device they onload to.
TEST(RunTimeline, WeightSwapsAreAggregatedPerGenerationStep) {
  const auto file = test::scratch_dir("rt_swap_groups") / "synthetic.sqlite";
  storage::SyntheticResult r;
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 1);
    storage::SyntheticRun s;
    s.scenario = "cpu-offload";
    s.devices = 1;
    s.layers = 4;
    s.tokens = 3;
    s.offload = true;
    s.tensors_per_layer = 9;
    s.check_forward = true;
    r = storage::write_synthetic_run(store, s);
    store.finalize();
    store.close();
  }
  storage::CaptureReader rd(file);
  const auto tl = load_run_timeline(rd, r.run_id);
  EXPECT_EQ(r.onloads, 4 * 9 * 4);  // 4 layers x 9 tensors x (check forward + 3 steps)
  const Track& swaps = track(group(tl, "0"), "weight onload/offload");
  ASSERT_EQ(swaps.aggregate.size(), 4u) << "the check forward's swaps, then one group per step";
  ASSERT_EQ(tl.swap_groups.size(), 4u);
  EXPECT_EQ(tl.swap_groups[0].step, -1);
  for (size_t i = 0; i < 4; ++i) {
    const SwapGroup& g = tl.swap_groups[swaps.aggregate[i].row];
    EXPECT_EQ(g.onloads, 36);
    EXPECT_EQ(g.offloads, 36);
    EXPECT_EQ(g.onload_bytes, 36 * (int64_t{4} << 20));
    EXPECT_EQ(g.modules, 4);
    EXPECT_EQ(tl.strings[swaps.aggregate[i].label], "36 onloads, 144 MiB");
    EXPECT_EQ(slice_source(swaps, swaps.aggregate[i]), Source::SwapGroup);
    if (i) {
      EXPECT_EQ(g.step, static_cast<int64_t>(i - 1));
      const auto& st = tl.generation_steps.at(i - 1);
      EXPECT_GE(g.start_ns, st.start_ns - tl.origin_ns);
      EXPECT_LE(g.end_ns, st.end_ns - tl.origin_ns);
      EXPECT_GE(swaps.aggregate[i].start_ns, swaps.aggregate[i - 1].end_ns) << "groups do not overlap";
    }
  }
  EXPECT_NE(describe(tl, Source::SwapGroup, 1).at(0).second.find("generation step 0 on 0"), std::string::npos);
  // Only swap lanes carry an aggregate.
  for (const auto& g : tl.groups)
    for (const auto& t : g.tracks) {
      if (t.lane != Lane::WeightSwaps) {
        EXPECT_TRUE(t.aggregate.empty()) << t.name;
      }
    }
}

// An offload is labelled with where it went: accelerate's to 'meta', a diffusers group's back
// to its offload device.
TEST(RunTimeline, AnOffloadSaysWhereTheWeightsWent) {
  for (const std::string to : {"meta", "cpu"}) {
    SCOPED_TRACE(to);
    const auto file = test::scratch_dir("rt_offload_to_" + to) / "synthetic.sqlite";
    storage::SyntheticResult r;
    {
      storage::Store store(file);
      storage::add_synthetic_devices(store, 1);
      storage::SyntheticRun s;
      s.scenario = "cpu-offload";
      s.devices = 1;
      s.layers = 2;
      s.tokens = 1;
      s.offload = true;
      s.offload_to = to;
      r = storage::write_synthetic_run(store, s);
      store.finalize();
      store.close();
    }
    storage::CaptureReader rd(file);
    const auto tl = load_run_timeline(rd, r.run_id);
    std::set<std::string> labels;
    for (const auto& level : track(group(tl, "0"), "weight onload/offload").levels)
      for (const auto& sl : level) labels.insert(tl.strings[sl.label]);
    EXPECT_TRUE(labels.count("model.layers.0 -> " + to)) << ::testing::PrintToString(labels);
    EXPECT_TRUE(labels.count("model.layers.0 <- cpu")) << ::testing::PrintToString(labels);
  }
}

// The search finds events by label or module, ignoring case, in time order.
TEST(RunTimeline, SearchFindsAModulesComputeSlicesInTimeOrder) {
  auto c = make_capture("rt_search");
  storage::CaptureReader rd(c.file);
  const auto tl = load_run_timeline(rd, c.sharded.run_id);
  const auto m = find_events(tl, "  MODEL.Layers.7.MLP ");
  ASSERT_EQ(m.size(), 3u) << "one per token";
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(m[i].source, Source::Compute);
    EXPECT_EQ(tl.module_compute.at(m[i].row).module, "model.layers.7.mlp");
    EXPECT_EQ(m[i].group, static_cast<uint32_t>(tl.group_of("3")));
    EXPECT_EQ(m[i].level, 1u) << "inside its layer";
    if (i) {
      EXPECT_LT(m[i - 1].start_ns, m[i].start_ns);
    }
  }
  // A layer's name finds its compute (and its sub-modules'), its hook spans, the transfer
  // into it (once) and its graph breaks (by module).
  std::map<Source, int> by_source;
  for (const auto& x : find_events(tl, "model.layers.4")) ++by_source[x.source];
  EXPECT_EQ(by_source[Source::Compute], 3 * 3);
  EXPECT_EQ(by_source[Source::Hook], 3 * 2);
  EXPECT_EQ(by_source[Source::Transfer], 3) << "on its source's lane only";
  EXPECT_EQ(by_source[Source::Break], 3);
  EXPECT_TRUE(find_events(tl, "   ").empty());
  EXPECT_TRUE(find_events(tl, "no such module").empty());
}

TEST(RunTimeline, ComputeNestsAndTransfersFlowBetweenGroups) {
  auto c = make_capture("rt_compute");
  storage::CaptureReader rd(c.file);
  auto tl = load_run_timeline(rd, c.sharded.run_id);
  // 8 layers over 4 devices: 2 layers per device, 3 tokens; layer > self_attn, mlp.
  const Track& compute = track(group(tl, "1"), "compute");
  ASSERT_EQ(compute.levels.size(), 2u);
  EXPECT_EQ(compute.levels[0].size(), 2u * 3);
  EXPECT_EQ(compute.levels[1].size(), 2u * 2 * 3);
  EXPECT_EQ(tl.strings[compute.levels[0][0].label], "model.layers.2");
  // Transfers: cpu→0, 0→1, 1→2, 2→3 at layer boundaries, 3→cpu after the last layer.
  EXPECT_EQ(tl.transfers.size(), static_cast<size_t>(c.sharded.transfers));
  EXPECT_EQ(track(group(tl, "1"), "transfers in").levels.at(0).size(), 3u);
  EXPECT_EQ(track(group(tl, "1"), "transfers out").levels.at(0).size(), 3u);
  ASSERT_EQ(tl.flows.size(), tl.transfers.size());
  const Flow& f = tl.flows[1];  // 0 → 1 in the first forward
  EXPECT_EQ(tl.groups[f.src_group].device, "0");
  EXPECT_EQ(tl.groups[f.dst_group].device, "1");
  // Graph breaks sit on the host thread's lane, sorted.
  const LaneGroup& host = tl.groups.back();
  ASSERT_TRUE(host.host);
  EXPECT_EQ(track(host, "graph breaks").instants.size(), static_cast<size_t>(c.sharded.graph_breaks));
  EXPECT_EQ(track(host, "hooks").levels.at(0).size(), 8u * 2 * 3);  // pre + post per layer per token
  // Sharded: weights resident on their device for the whole run, by device-map entry.
  ASSERT_EQ(group(tl, "2").residency.size(), 2u);
  EXPECT_EQ(group(tl, "2").residency[0].name, "model.layers.4");
  EXPECT_EQ(group(tl, "2").residency[0].levels.at(0).size(), 1u);
  EXPECT_EQ(group(tl, "2").residency[0].levels[0][0].end_ns, tl.duration_ns);
}

std::vector<Lane> lanes(const LaneGroup& g) {
  std::vector<Lane> v;
  for (const auto& t : g.tracks) v.push_back(t.lane);
  return v;
}

TEST(RunTimeline, LanesComeInTheirNamedOrder) {
  auto c = make_capture("rt_lanes");
  storage::CaptureReader rd(c.file);
  const auto sharded = load_run_timeline(rd, c.sharded.run_id);
  const auto offload = load_run_timeline(rd, c.offload.run_id);
  // Compute and transfers always; swaps only when the device onloads; memory only when used.
  EXPECT_EQ(lanes(group(sharded, "0")), (std::vector<Lane>{Lane::Compute, Lane::TransfersIn, Lane::TransfersOut}));
  EXPECT_EQ(lanes(group(offload, "0")), (std::vector<Lane>{Lane::Compute, Lane::TransfersIn, Lane::TransfersOut,
                                                           Lane::WeightSwaps, Lane::Memory}));
  EXPECT_EQ(lanes(sharded.groups.back()), (std::vector<Lane>{Lane::Hooks, Lane::CompilerDisabled, Lane::Regions,
                                                             Lane::GraphBreaks, Lane::Steps}));
  for (const RunTimeline* tl : {&sharded, &offload})
    for (const auto& g : tl->groups) {
      for (const auto& t : g.tracks) {
        EXPECT_EQ(t.name, lane_name(t.lane)) << g.title;
        EXPECT_EQ(t.source, lane_source(t.lane)) << g.title << " " << t.name;
      }
      for (const auto& t : g.residency) {
        EXPECT_EQ(t.lane, Lane::Residency) << t.name;
        EXPECT_EQ(t.source, Source::Residency) << t.name;
      }
      if (!g.host) {
        EXPECT_EQ(g.residency_summary.lane, Lane::ResidencySummary) << g.title;
      }
    }
}

TEST(RunTimeline, OffloadedWeightsAreOnTheDeviceOnlyBetweenOnloadAndOffload) {
  auto c = make_capture("rt_offload");
  storage::CaptureReader rd(c.file);
  auto tl = load_run_timeline(rd, c.offload.run_id);
  const LaneGroup& g0 = group(tl, "0");
  ASSERT_EQ(g0.residency.size(), 2u);  // layers 0 and 1 run on accelerator 0
  const Track& lane = g0.residency[0];
  EXPECT_EQ(lane.name, "model.layers.0");
  // home (meta, weights in cpu) / on 0 alternating: 3 forwards → 3 on-device segments.
  int on = 0, home = 0;
  for (const auto& s : lane.levels.at(0)) (s.category == kResidentOnDevice ? on : home) += 1;
  EXPECT_EQ(on, 3);
  EXPECT_EQ(home, 4);
  EXPECT_EQ(tl.residency_units[lane.levels[0][0].row].home, "cpu");
  const Track& swaps = track(g0, "weight onload/offload");
  EXPECT_EQ(swaps.levels.at(0).size(), 2u * 2 * 3);  // onload + offload, 2 layers, 3 tokens
  const Track& mem = track(g0, "memory");
  EXPECT_EQ(mem.counter_max, int64_t{4} << 20);
  auto d = describe(tl, Source::WeightSwap, swaps.levels[0][0].row);
  EXPECT_EQ(d[0].first, "weight onload");
  EXPECT_EQ(d[0].second, "model.layers.0.mlp.up_proj.weight");
}

TEST(RunTimeline, RangeStatisticsAddUpToTheCapture) {
  auto c = make_capture("rt_range");
  storage::CaptureReader rd(c.file);
  auto tl = load_run_timeline(rd, c.offload.run_id);
  auto all = range_stats(tl, 0, tl.duration_ns);
  int64_t in = 0, onload = 0;
  for (const auto& g : all.groups) {
    in += g.bytes_in;
    onload += g.onload_bytes;
  }
  EXPECT_EQ(in, c.offload.transfer_bytes);
  EXPECT_EQ(onload, c.offload.onload_bytes);
  EXPECT_EQ(all.graph_breaks, c.offload.graph_breaks);
  // The first onload alone: [its start, its end) on accelerator 0.
  const auto& first = tl.weight_swaps.at(0);
  ASSERT_TRUE(first.onload);
  auto one = range_stats(tl, first.start_ns - tl.origin_ns, first.end_ns - tl.origin_ns);
  const auto& g0 = one.groups[tl.group_of("0")];
  EXPECT_EQ(g0.onload_bytes, first.bytes);
  EXPECT_EQ(g0.busy_ns[kOnload], storage::SyntheticClock::kOnload);
  EXPECT_NEAR(g0.gbps_onload(), static_cast<double>(first.bytes) / storage::SyntheticClock::kOnload, 1e-9);
  EXPECT_EQ(g0.busy_ns[kCompute], 0);
  // A range inside one layer's compute: clipped busy time, nested slices not double counted.
  const auto& lay = track(group(tl, "0"), "compute").levels[0][0];
  auto mid = range_stats(tl, lay.start_ns + 100, lay.end_ns - 100);
  EXPECT_EQ(mid.groups[tl.group_of("0")].busy_ns[kCompute], lay.end_ns - lay.start_ns - 200);
}

// ------------------------------------------------------------------ a run from a trace

/// The synthetic trace run (tests/synthetic.h lists its rows and times) in a file of its own.
struct TraceCapture {
  std::filesystem::path file;
  storage::SyntheticTrace trace;
};
TraceCapture make_trace_capture(const std::string& name) {
  TraceCapture c;
  c.file = test::scratch_dir(name) / "trace.sqlite";
  storage::Store store(c.file);
  c.trace = storage::write_synthetic_trace_run(store);
  store.finalize();
  store.close();
  return c;
}

const Track& stream(const LaneGroup& g, int64_t id) {
  for (const auto& t : g.tracks)
    if (t.lane == Lane::Stream && t.stream == id) return t;
  throw std::runtime_error("no stream " + std::to_string(id) + " in " + g.title);
}

/// The labels of one level of a track, in time order.
std::vector<std::string> labels(const RunTimeline& tl, const std::vector<Slice>& level) {
  std::vector<std::string> v;
  for (const auto& s : level) v.push_back(tl.strings[s.label]);
  return v;
}

TEST(TraceTimeline, OriginIsTheEarliestCpuOpAndTheEndTheLatestGpuRecord) {
  auto c = make_trace_capture("trace_origin");
  storage::CaptureReader rd(c.file);
  const auto tl = load_run_timeline(rd, c.trace.run_id);
  EXPECT_EQ(tl.run.engine, "import");
  EXPECT_EQ(tl.run.label, "gpu-trace.json");
  // On the trace's own clock: the user annotation at +0 starts the run, the last kernel ends it.
  EXPECT_EQ(tl.origin_ns, storage::SyntheticTrace::kTraceBase);
  EXPECT_EQ(tl.duration_ns, 100500);
  EXPECT_EQ(tl.event_count(), static_cast<size_t>(c.trace.rows));
}

TEST(TraceTimeline, OneGroupPerGpuWithALanePerStream) {
  auto c = make_trace_capture("trace_gpu");
  storage::CaptureReader rd(c.file);
  const auto tl = load_run_timeline(rd, c.trace.run_id);
  std::vector<std::string> groups;
  for (const auto& g : tl.groups) groups.push_back(g.host ? "host" : g.device);
  EXPECT_EQ(groups, (std::vector<std::string>{"0", "host", "host"}));
  const LaneGroup& gpu = group(tl, "0");
  EXPECT_NE(gpu.title.find("NVIDIA H200"), std::string::npos) << gpu.title;
  // An imported run shows only the lanes its rows fill: the onload to 'cuda:0' is accelerator 0's.
  EXPECT_EQ(lanes(gpu), (std::vector<Lane>{Lane::WeightSwaps, Lane::GpuAnnotations, Lane::Stream, Lane::Stream}));
  EXPECT_EQ(gpu.residency.size(), 1u);
  EXPECT_EQ(gpu.tracks[2].name, "stream 7");
  EXPECT_EQ(gpu.tracks[3].name, "stream 13");
  const Track& s7 = stream(gpu, 7);
  ASSERT_EQ(s7.levels.size(), 1u);
  EXPECT_EQ(labels(tl, s7.levels[0]), (std::vector<std::string>{"HtoD 1.00 MiB", "gemm", "triton_poi_fused_add_0"}));
  EXPECT_EQ(s7.levels[0][0].category, kHtoD);
  EXPECT_EQ(slice_source(s7, s7.levels[0][0]), Source::Memcpy);
  EXPECT_EQ(slice_source(s7, s7.levels[0][1]), Source::Kernel);
  const Track& s13 = stream(gpu, 13);
  EXPECT_EQ(labels(tl, s13.levels.at(0)),
            (std::vector<std::string>{"add_kernel", "memset 4.00 KiB", "Stream Wait Event", "late_kernel"}));
  EXPECT_EQ(slice_source(s13, s13.levels[0][1]), Source::Memset);
  EXPECT_EQ(s13.levels[0][1].category, kMemset);
  // A CUDA sync is drawn on the stream that waits, as nsys draws it, and described.
  EXPECT_EQ(slice_source(s13, s13.levels[0][2]), Source::Sync);
  EXPECT_EQ(s13.levels[0][2].category, kSync);
  const auto sync = describe(tl, Source::Sync, s13.levels[0][2].row);
  EXPECT_EQ(sync.at(0), (std::pair<std::string, std::string>{"CUDA sync", "Stream Wait Event"}));
  EXPECT_EQ(extent(tl, Source::Sync, s13.levels[0][2].row), (std::pair<int64_t, int64_t>{45000, 46000}));
  // The gpu_user_annotation (pid = GPU, tid = stream 7) is on the GPU, not on a host thread.
  const Track& ann = track(gpu, "GPU annotations");
  EXPECT_EQ(labels(tl, ann.levels.at(0)), (std::vector<std::string>{"my_range"}));
  EXPECT_EQ(ann.levels[0][0].category, kGpuAnnotation);
  // Hover text: the copy kind, bytes and the call that launched it.
  const auto d = describe(tl, Source::Memcpy, s7.levels[0][0].row);
  auto field = [&](const std::string& k) {
    for (const auto& [name, value] : d)
      if (name == k) return value;
    return std::string("(none)");
  };
  EXPECT_EQ(field("memcpy"), "HtoD");
  EXPECT_EQ(field("bytes"), "1.00 MiB (1048576)");
  EXPECT_EQ(field("launched by"), "cudaMemcpyAsync (tid 4243)");
  EXPECT_EQ(field("duration"), "1.00 us");
  // Range statistics: kernel busy time on the GPU.
  const auto st = range_stats(tl, 0, tl.duration_ns);
  EXPECT_EQ(st.groups[tl.group_of("0")].busy_ns[kKernel], 10000 + 1000 + 1000 + 1500);
}

TEST(TraceTimeline, HostThreadsNestTheirCpuOpsByTime) {
  auto c = make_trace_capture("trace_host");
  storage::CaptureReader rd(c.file);
  const auto tl = load_run_timeline(rd, c.trace.run_id);
  ASSERT_EQ(tl.groups.size(), 3u);
  // The tracer's thread (hookscope rows) first, with the CPU ops of the same OS thread.
  const LaneGroup& main = tl.groups[1];
  ASSERT_TRUE(main.host);
  EXPECT_EQ(main.title, "host thread 0 (tid 4243)");
  EXPECT_EQ(lanes(main), (std::vector<Lane>{Lane::Hooks, Lane::Regions, Lane::CpuOps, Lane::PythonStack, Lane::CudaApi}));
  EXPECT_EQ(labels(tl, track(main, "compiled regions").levels.at(0)), (std::vector<std::string>{"region 0/1"}));
  const Track& ops = track(main, "CPU ops");
  ASSERT_EQ(ops.levels.size(), 3u);
  EXPECT_EQ(labels(tl, ops.levels[0]), (std::vector<std::string>{"hookscope::generate cell=c0 repeat=0"}));
  EXPECT_EQ(ops.levels[0][0].category, kUserAnnotation);
  EXPECT_EQ(labels(tl, ops.levels[1]), (std::vector<std::string>{"aten::linear", "Torch-Compiled Region: 0/1"}));
  EXPECT_EQ(labels(tl, ops.levels[2]), (std::vector<std::string>{"aten::mm"}));
  EXPECT_EQ(ops.levels[2][0].category, kCpuOp);
  EXPECT_EQ(ops.levels[2][0].start_ns, 15000);
  EXPECT_EQ(ops.levels[2][0].end_ns, 35000);
  EXPECT_EQ(track(main, "Python stack").levels.at(0).at(0).category, kPythonFunction);
  const Track& api = track(main, "CUDA API");
  ASSERT_EQ(api.levels.size(), 2u);  // cuLaunchKernel inside the cudaLaunchKernel that made it
  EXPECT_EQ(labels(tl, api.levels[0]), (std::vector<std::string>{"cudaLaunchKernel", "cudaMemcpyAsync", "cudaLaunchKernel"}));
  EXPECT_EQ(api.levels[1][0].category, kCudaDriver);
  EXPECT_EQ(slice_source(api, api.levels[1][0]), Source::Driver);
  // A CPU op's args show in its details.
  const auto d = describe(tl, Source::CpuOp, ops.levels[2][0].row);
  EXPECT_EQ(d.at(0), (std::pair<std::string, std::string>{"cpu_op", "aten::mm"}));
  EXPECT_NE(std::find(d.begin(), d.end(), std::pair<std::string, std::string>{"Input Dims", "[[1,6,64],[64,64]]"}),
            d.end());
  // A thread THREADS never named (only CPU ops and CUDA API calls) has only those lanes.
  const LaneGroup& other = tl.groups[2];
  EXPECT_EQ(other.title, "host thread (tid 4300)");
  EXPECT_EQ(other.os_tid, 4300);
  EXPECT_EQ(lanes(other), (std::vector<Lane>{Lane::CpuOps, Lane::CudaApi}));
}

// Dynamo's graph-break records (a compile log's, with the time Dynamo logged each) are instants
// on the thread that compiled, under the regions lane: one logged while compiling, before the
// trace, sits at a negative time — the run's origin stays its first recorded event — and the
// lane says how many lie there; they are described, searched and counted in a range.
TEST(TraceTimeline, DynamoGraphBreaksAreInstantsOnTheThreadThatCompiled) {
  TraceCapture c;
  c.file = test::scratch_dir("trace_dynamo_breaks") / "trace.sqlite";
  {
    storage::Store store(c.file);
    c.trace = storage::write_synthetic_trace_run(store);
    storage::write_dynamo_breaks(store, c.trace.run_id);
    store.finalize();
    store.close();
  }
  storage::CaptureReader rd(c.file);
  const auto tl = load_run_timeline(rd, c.trace.run_id);
  EXPECT_EQ(tl.origin_ns, storage::SyntheticTrace::kTraceBase);
  EXPECT_EQ(tl.duration_ns, 100500);
  const LaneGroup& main = tl.groups[1];
  EXPECT_EQ(main.os_tid, 4243);
  EXPECT_EQ(lanes(main), (std::vector<Lane>{Lane::Hooks, Lane::Regions, Lane::DynamoBreaks, Lane::CpuOps,
                                            Lane::PythonStack, Lane::CudaApi}));
  const Track& breaks = track(main, "Dynamo breaks (1 < 0 s)");
  ASSERT_EQ(breaks.instants.size(), 2u);
  EXPECT_EQ(breaks.instants[0].start_ns, -storage::kDynamoBreakBefore);
  EXPECT_EQ(breaks.instants[1].start_ns, storage::kDynamoBreakAt);
  EXPECT_EQ(tl.strings[breaks.instants[1].label], "GB0098 AlignDevicesHook.pre_forward");
  EXPECT_EQ(slice_source(breaks, breaks.instants[1]), Source::DynamoBreak);
  const auto d = describe(tl, Source::DynamoBreak, breaks.instants[1].row);
  EXPECT_EQ(d.at(0), (std::pair<std::string, std::string>{"Dynamo graph break",
                                                          "GB0098 Skip calling `torch.compiler.disable()`d function"}));
  EXPECT_NE(std::find(d.begin(), d.end(), std::pair<std::string, std::string>{"compile id", "2/1"}), d.end());
  EXPECT_NE(std::find(d.begin(), d.end(), std::pair<std::string, std::string>{"time", "45.0 us"}), d.end()) << d.back().second;
  const auto found = find_events(tl, "pre_forward");
  EXPECT_EQ(std::count_if(found.begin(), found.end(), [](const SearchMatch& m) { return m.source == Source::DynamoBreak; }), 2);
  EXPECT_EQ(range_stats(tl, 0, tl.duration_ns).dynamo_break_records, 1);
  EXPECT_EQ(range_stats(tl, 0, tl.duration_ns).graph_breaks, 0);
  // Without a compile log's times the lane is not there (an empty one would say "none").
  EXPECT_EQ(lanes(load_run_timeline(storage::CaptureReader(make_trace_capture("trace_no_dynamo").file), 1).groups[1]),
            (std::vector<Lane>{Lane::Hooks, Lane::Regions, Lane::CpuOps, Lane::PythonStack, Lane::CudaApi}));
}

TEST(TraceTimeline, LaunchesFlowFromTheirCudaApiCallToTheGpuRecord) {
  auto c = make_trace_capture("trace_flows");
  storage::CaptureReader rd(c.file);
  const auto tl = load_run_timeline(rd, c.trace.run_id);
  // gemm (101), memcpy (102), add_kernel (103, the other thread), triton (104, a driver call);
  // late_kernel and the memset have no launch.
  ASSERT_EQ(tl.flows.size(), 4u);
  struct Want {
    Source src, dst;
    std::string call, record;
    size_t host_group;
    int64_t stream;
    uint16_t src_level;
  };
  const Want want[] = {{Source::Runtime, Source::Kernel, "cudaLaunchKernel", "gemm", 1, 7, 0},
                       {Source::Runtime, Source::Memcpy, "cudaMemcpyAsync", "HtoD 1.00 MiB", 1, 7, 0},
                       {Source::Runtime, Source::Kernel, "cudaLaunchKernel", "add_kernel", 2, 13, 0},
                       {Source::Driver, Source::Kernel, "cuLaunchKernel", "triton_poi_fused_add_0", 1, 7, 1}};
  for (size_t i = 0; i < tl.flows.size(); ++i) {
    const Flow& f = tl.flows[i];
    SCOPED_TRACE(want[i].record);
    EXPECT_TRUE(f.launch());
    EXPECT_EQ(f.src, want[i].src);
    EXPECT_EQ(f.dst, want[i].dst);
    EXPECT_EQ(f.src_group, want[i].host_group);
    EXPECT_EQ(tl.groups[f.dst_group].device, "0");
    const Track& from = tl.groups[f.src_group].tracks.at(f.src_track);
    const Track& to = tl.groups[f.dst_group].tracks.at(f.dst_track);
    EXPECT_EQ(from.lane, Lane::CudaApi);
    EXPECT_EQ(to.lane, Lane::Stream);
    EXPECT_EQ(to.stream, want[i].stream);
    EXPECT_EQ(f.src_level, want[i].src_level);
    EXPECT_EQ(f.dst_level, 0);
    // The flow's ends are the slices' starts, on the slices themselves.
    const Slice* a = nullptr;
    for (const auto& s : from.levels.at(f.src_level))
      if (s.row == f.src_row && slice_source(from, s) == f.src) a = &s;
    const Slice* b = nullptr;
    for (const auto& s : to.levels.at(f.dst_level))
      if (s.row == f.row && slice_source(to, s) == f.dst) b = &s;
    ASSERT_TRUE(a && b);
    EXPECT_EQ(tl.strings[a->label], want[i].call);
    EXPECT_EQ(tl.strings[b->label], want[i].record);
    EXPECT_EQ(f.start_ns, a->start_ns);
    EXPECT_EQ(f.end_ns, b->start_ns);
  }
  EXPECT_EQ(describe(tl, Source::Kernel, tl.flows[3].row).back().first, "duration");
  const auto k = describe(tl, Source::Kernel, tl.flows[0].row);
  EXPECT_NE(std::find(k.begin(), k.end(), std::pair<std::string, std::string>{"launched by", "cudaLaunchKernel (tid 4243)"}),
            k.end());
}

TEST(TraceTimeline, ACaptureKeepsItsEmptyLanesAndTransferFlowsLandOnTheirLanes) {
  auto c = make_capture("rt_keep_lanes");
  storage::CaptureReader rd(c.file);
  const auto tl = load_run_timeline(rd, c.sharded.run_id);
  EXPECT_EQ(tl.run.engine, "");  // written through the HostTracer without an engine
  EXPECT_EQ(lanes(group(tl, "3")), (std::vector<Lane>{Lane::Compute, Lane::TransfersIn, Lane::TransfersOut}));
  for (const Flow& f : tl.flows) {
    EXPECT_FALSE(f.launch());
    EXPECT_EQ(tl.groups[f.src_group].tracks.at(f.src_track).lane, Lane::TransfersOut);
    EXPECT_EQ(tl.groups[f.dst_group].tracks.at(f.dst_track).lane, Lane::TransfersIn);
    EXPECT_EQ(f.row, f.src_row);
  }
}

TEST(TraceTimeline, AnImportAppendedToACaptureShowsItsOwnDevicesOnly) {
  const auto file = test::scratch_dir("trace_appended") / "mixed.sqlite";
  storage::SyntheticResult captured;
  storage::SyntheticTrace imported;
  {
    storage::Store store(file);
    storage::add_synthetic_devices(store, 4);  // capture-wide: the LibTorch engine's devices
    captured = storage::write_synthetic_run(store, storage::SyntheticRun{});
    imported = storage::write_synthetic_trace_run(store);
    store.finalize();
    store.close();
  }
  storage::CaptureReader rd(file);
  const auto trace = load_run_timeline(rd, imported.run_id);
  std::vector<std::string> groups;
  for (const auto& g : trace.groups) groups.push_back(g.host ? "host" : g.device);
  EXPECT_EQ(groups, (std::vector<std::string>{"0", "host", "host"}));
  EXPECT_FALSE(trace.groups[0].emulated) << "the trace's GPU 0 is not the capture's emulated accelerator 0";
  const auto own = load_run_timeline(rd, captured.run_id);
  groups.clear();
  for (const auto& g : own.groups) groups.push_back(g.host ? "host" : g.device);
  EXPECT_EQ(groups, (std::vector<std::string>{"0", "1", "2", "3", "cpu", "host"}));
  EXPECT_TRUE(own.groups[0].emulated);
}

TEST(TraceTimeline, TraceDeviceNamesAreTheAcceleratorsIndex) {
  EXPECT_EQ(canonical_device("cuda:0"), "0");
  EXPECT_EQ(canonical_device("cuda:12"), "12");
  EXPECT_EQ(canonical_device("0"), "0");
  EXPECT_EQ(canonical_device("cpu"), "cpu");
  EXPECT_EQ(canonical_device("cuda"), "cuda");
  EXPECT_EQ(canonical_device("cuda:x"), "cuda:x");
}

}  // namespace
