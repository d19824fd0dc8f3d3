// The viewer's model without a window: time <-> pixel mapping, nesting levels, LOD culling and
// merging, hit testing, range statistics, and a run laid out from a synthetic capture whose
// every time and count is known in advance.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "storage/capture_reader.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"
#include "ui/run_timeline.h"
#include "ui/timeline.h"

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
  const auto& first = tl.swaps.at(0);
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

}  // namespace
