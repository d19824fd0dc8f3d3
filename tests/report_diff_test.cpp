// `hookscope report A B`: the noise verdict on hand-made latency objects and report JSONs, the
// judging rules when eager moved between the captures, and the comparison of two real captures
// of the tiny Llama (LibTorch engine) matched cell by cell against each file's own report — one
// pair captured on a quiet and on a busied CPU — with the CLI's exit codes for bad second files.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "reports/report_diff.h"
#include "measurement/spread.h"
#include "storage/capture_reader.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using hs::test::hookscope;
using nlohmann::json;

json lat(double median, double min, double max, int n = 3) {
  return {{"median", median}, {"min", min}, {"max", max}, {"n", n}};
}

TEST(ReportDiffVerdict, OverlappingSpreadsAreWithinNoise) {
  const json v = hs::reports::compare_latency(lat(100, 90, 110), lat(105, 100, 130));
  EXPECT_EQ(v["verdict"], "within noise");
  EXPECT_EQ(v["spread"], "min-max");
  EXPECT_DOUBLE_EQ(v["ratio"].get<double>(), 1.05);
  EXPECT_NEAR(v["delta_pct"].get<double>(), 5.0, 1e-9);
  // Touching spreads overlap too.
  EXPECT_EQ(hs::reports::compare_latency(lat(100, 90, 110), lat(120, 110, 130))["verdict"], "within noise");
  // A capture against itself is never faster or slower.
  EXPECT_EQ(hs::reports::compare_latency(lat(100, 90, 110), lat(100, 90, 110))["verdict"], "within noise");
}

TEST(ReportDiffVerdict, DisjointSpreadsAreFasterOrSlower) {
  json v = hs::reports::compare_latency(lat(100, 95, 105), lat(50, 48, 52));
  EXPECT_EQ(v["verdict"], "faster");
  EXPECT_DOUBLE_EQ(v["ratio"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(v["delta_pct"].get<double>(), -50.0);
  v = hs::reports::compare_latency(lat(50, 48, 52), lat(100, 95, 105));
  EXPECT_EQ(v["verdict"], "slower");
  EXPECT_DOUBLE_EQ(v["ratio"].get<double>(), 2.0);
}

TEST(ReportDiffVerdict, QuartilesAreUsedWhenBothSidesHaveThem) {
  // min–max overlap (one slow outlier in A), the interquartile ranges do not.
  json a = lat(100, 95, 300), b = lat(80, 78, 99);
  a["q1"] = 98, a["q3"] = 102;
  b["q1"] = 79, b["q3"] = 82;
  json v = hs::reports::compare_latency(a, b);
  EXPECT_EQ(v["spread"], "iqr");
  EXPECT_EQ(v["verdict"], "faster");
  // Only one side has quartiles: min–max for both, which overlap.
  b.erase("q1");
  v = hs::reports::compare_latency(a, b);
  EXPECT_EQ(v["spread"], "min-max");
  EXPECT_EQ(v["verdict"], "within noise");
}

TEST(ReportDiffVerdict, NoVerdictWithoutTwoRepeatsOrALatency) {
  EXPECT_EQ(hs::reports::compare_latency(lat(100, 100, 100, 1), lat(50, 50, 50, 1))["verdict"], "not judged");
  json v = hs::reports::compare_latency(nullptr, lat(50, 48, 52));
  EXPECT_TRUE(v["verdict"].is_null());
  EXPECT_TRUE(v["ratio"].is_null());
  EXPECT_TRUE(v["a"].is_null());
  // --max-new-tokens 1: no decode step, a median of 0.
  EXPECT_TRUE(hs::reports::compare_latency(lat(0, 0, 0), lat(0, 0, 0))["ratio"].is_null());
}

json hand_run(int64_t id, const std::string& policy, const std::string& mode, bool fullgraph, const std::string& status,
              json breaks, json latency) {
  return {{"id", id},         {"engine", "torch"}, {"scenario", "sharded"},   {"policy", policy},
          {"mode", mode},     {"fullgraph", fullgraph}, {"status", status},    {"graph_break_count", breaks},
          {"decode_ms_per_token", latency}, {"error", status == "ok" ? json(nullptr) : json("Unsupported: graph break\nmore")}};
}

hs::reports::DiffSide hand_side(const std::string& label, json runs, json settings) {
  return {label, label + ".sqlite", {{"schema", 1}, {"model", {{"id", "tiny"}}}, {"runs", runs}}, settings, {}};
}

TEST(ReportDiff, HandMadeReportsMatchCellsAndListTheRest) {
  json a = json::array(), b = json::array();
  a.push_back(hand_run(1, "whole-hook", "eager", false, "ok", nullptr, lat(100, 95, 105)));
  a.push_back(hand_run(2, "whole-hook", "default", false, "ok", 9, lat(120, 110, 130)));
  a.push_back(hand_run(3, "whole-hook", "default", true, "error", 9, nullptr));
  a.push_back(hand_run(4, "offload-only", "default", false, "ok", 0, lat(60, 55, 65)));
  b.push_back(hand_run(1, "whole-hook", "eager", false, "ok", nullptr, lat(101, 96, 106)));
  b.push_back(hand_run(2, "whole-hook", "default", false, "ok", 0, lat(60, 58, 62)));
  b.push_back(hand_run(3, "whole-hook", "default", true, "ok", 0, lat(61, 59, 63)));
  b.push_back(hand_run(4, "whole-hook", "reduce-overhead", false, "ok", 0, lat(40, 39, 41)));
  const json diff = hs::reports::build_report_diff(
      hand_side("main", a, {{"model", "tiny"}, {"new tokens", "8"}, {"repeats", "3"}}),
      hand_side("pr", b, {{"model", "tiny"}, {"new tokens", "16"}, {"repeats", "3"}, {"settings.prompt", "Hi"}}));
  ASSERT_EQ(diff["cells"].size(), 3u) << diff.dump(1);
  std::map<std::string, json> cell;
  for (const auto& c : diff["cells"]) cell[c["mode"].get<std::string>() + (c["fullgraph"].get<bool>() ? "+fg" : "")] = c;
  EXPECT_EQ(cell["eager"]["latency"]["decode_ms_per_token"]["verdict"], "within noise");
  EXPECT_EQ(cell["default"]["latency"]["decode_ms_per_token"]["verdict"], "faster");
  EXPECT_EQ(cell["default"]["a"]["graph_break_count"], 9);
  EXPECT_EQ(cell["default"]["b"]["graph_break_count"], 0);
  EXPECT_TRUE(cell["default"]["breaks_changed"].get<bool>());
  EXPECT_FALSE(cell["eager"]["breaks_changed"].get<bool>());
  EXPECT_EQ(cell["default+fg"]["a"]["outcome"], "raises");
  EXPECT_EQ(cell["default+fg"]["a"]["error"], "Unsupported: graph break");
  EXPECT_EQ(cell["default+fg"]["b"]["outcome"], "works");
  EXPECT_TRUE(cell["default+fg"]["outcome_changed"].get<bool>());
  EXPECT_TRUE(cell["default+fg"]["latency"]["decode_ms_per_token"]["verdict"].is_null());
  ASSERT_EQ(diff["only_in_a"].size(), 1u);
  EXPECT_EQ(diff["only_in_a"][0]["policy"], "offload-only");
  EXPECT_EQ(diff["only_in_a"][0]["run"], 4);
  ASSERT_EQ(diff["only_in_b"].size(), 1u);
  EXPECT_EQ(diff["only_in_b"][0]["mode"], "reduce-overhead");
  EXPECT_EQ(diff["counts"]["matched"], 3);
  EXPECT_EQ(diff["counts"]["faster"], 1);
  EXPECT_EQ(diff["counts"]["within noise"], 1);
  // Settings: the token counts differ; the prompt only pr's capture records.
  EXPECT_EQ(diff["settings_differ"],
            json::parse(R"([{"setting": "new tokens", "a": "8", "b": "16"}, {"setting": "settings.prompt", "a": null, "b": "Hi"}])"));

  const std::string md = hs::reports::render_diff_markdown(diff);
  EXPECT_NE(md.find("**Settings differ between the two captures**"), std::string::npos) << md;
  EXPECT_NE(md.find("| new tokens | 8 | 16 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| settings.prompt | – | Hi |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sharded | whole-hook | default | 9 | **0** | ok | ok | 120.0 (110.0–130.0) | 60.0 (58.0–62.0) | "
                    "0.50× | -50.0% | **faster** |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sharded | whole-hook | eager | – | – | ok | ok | 100.0 (95.0–105.0) | 101.0 (96.0–106.0) | 1.01× | "
                    "+1.0% | within noise |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| default fullgraph | 9 | **0** | raises | **works** |"), std::string::npos) << md;
  EXPECT_NE(md.find("### only in `main` (1)"), std::string::npos) << md;
  EXPECT_NE(md.find("| torch | sharded | offload-only | default | 4 | ok |"), std::string::npos) << md;
  EXPECT_NE(md.find("### only in `pr` (1)"), std::string::npos) << md;
}

// Labels, policies and settings with pipes, backticks and newlines keep the tables' columns.
TEST(ReportDiff, HostileLabelsAndNamesStayInTheirCells) {
  json a = json::array(), b = json::array();
  a.push_back(hand_run(1, "P|q\n## injected", "default", false, "ok", 3, lat(100, 95, 105)));
  a.push_back(hand_run(2, "only|a", "default", false, "ok", 3, lat(100, 95, 105)));
  b.push_back(hand_run(1, "P|q\n## injected", "default", false, "ok", 0, lat(50, 45, 55)));
  const json diff = hs::reports::build_report_diff(hand_side("m`a|in", a, {{"prompt", "x|y\n# injected"}}),
                                               hand_side("pr", b, {{"prompt", json{{"k", "v|w"}}}}));
  const std::string md = hs::reports::render_diff_markdown(diff);
  EXPECT_EQ(hs::test::broken_markdown_line(md, "injected"), "") << md;
  EXPECT_NE(md.find("### only in ``m`a|in`` (1)"), std::string::npos) << md;
  EXPECT_NE(md.find("| prompt | x\\|y \\# injected | {\"k\":\"v\\|w\"} |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sharded | P\\|q \\#\\# injected | default | 3 | **0** |"), std::string::npos) << md;
  EXPECT_THROW(hs::reports::diff_labels("a", "b", {"x\ny", "z"}), std::invalid_argument);
}

TEST(ReportDiff, RepeatedCellsMatchInRunOrderAndLabelsDefaultToStems) {
  json a = json::array(), b = json::array();
  for (int64_t id : {1, 2}) a.push_back(hand_run(id, "whole-hook", "default", false, "ok", 1, lat(10, 9, 11)));
  b.push_back(hand_run(7, "whole-hook", "default", false, "ok", 1, lat(10, 9, 11)));
  const json diff = hs::reports::build_report_diff(hand_side("a", a, json::object()), hand_side("b", b, json::object()));
  ASSERT_EQ(diff["cells"].size(), 1u);
  EXPECT_EQ(diff["cells"][0]["a"]["run"], 1);
  EXPECT_EQ(diff["cells"][0]["b"]["run"], 7);
  ASSERT_EQ(diff["only_in_a"].size(), 1u);
  EXPECT_EQ(diff["only_in_a"][0]["run"], 2);
  EXPECT_EQ(diff["only_in_a"][0]["occurrence"], 1);

  EXPECT_EQ(hs::reports::diff_labels("x/main.sqlite", "y/pr.sqlite", {}), std::make_pair(std::string("main"), std::string("pr")));
  EXPECT_EQ(hs::reports::diff_labels("x/demo.sqlite", "y/demo.sqlite", {}),
            std::make_pair(std::string("x/demo"), std::string("y/demo")));
  EXPECT_EQ(hs::reports::diff_labels("x/demo.sqlite", "x/demo.sqlite", {}),
            std::make_pair(std::string("x/demo (A)"), std::string("x/demo (B)")));
  EXPECT_THROW(hs::reports::diff_labels("a", "b", {"same", "same"}), std::invalid_argument);
  EXPECT_THROW(hs::reports::diff_labels("a", "b", {"one"}), std::invalid_argument);
  EXPECT_THROW(hs::reports::build_report_diff(hand_side("a", a, {}), {"b", "b.sqlite", json::object(), {}, {}}),
               std::invalid_argument);
}

// ------------------------------------------------------------------ when eager moved

json spread_of(const std::vector<double>& samples) { return hs::measurement::Spread::of(samples).to_json(); }

std::vector<double> scaled(std::vector<double> v, double by) {
  for (double& x : v) x *= by;
  return v;
}

/// A run measured as the engines measure it: an eager cell's decode samples, or a compiled
/// cell's compiled generates interleaved with eager ones (`eager`), with the spreads, samples
/// and per-round speed-up its run result document holds.
json timed_run(int64_t id, const std::string& scenario, const std::string& policy, const std::string& mode,
               const std::vector<double>& decode, const std::vector<double>& eager = {}) {
  json r = hand_run(id, policy, mode, false, "ok", mode == "eager" ? json() : json(0), spread_of(decode));
  r["engine"] = "libtorch";
  r["scenario"] = scenario;
  r["samples"] = {{"decode_ms_per_token", decode}};
  if (!eager.empty()) {
    r["eager_decode_ms_per_token"] = spread_of(eager);
    r["samples"]["eager_decode_ms_per_token"] = eager;
    r["speedup_vs_eager"] = spread_of(hs::measurement::ratios(eager, decode));
  }
  return r;
}

const std::vector<double> kEager = {10.0, 10.1, 9.9, 10.2, 9.8};    // ms/token
const std::vector<double> kCompiled = {8.0, 8.1, 7.9, 8.2, 7.8};    // 1.25× faster than kEager
const std::vector<double> kSlowerCompiled = scaled(kEager, 0.95);  // 1.05×

std::map<std::string, json> cells_by_name(const json& diff) {
  std::map<std::string, json> out;
  for (const auto& c : diff["cells"])
    out[c["scenario"].get<std::string>() + " " + c["policy"].get<std::string>() + " " + c["mode"].get<std::string>()] = c;
  return out;
}

// B captured on a machine 1.6× slower in the sharded scenario: its eager cell reads machine
// drift, its compiled cells are judged by their speed-up over B's own eager — the same speed-up
// within noise, one that doubled faster, one that fell below 1 slower, and one that moved by less
// than eager moved (1.19× < 1.6×) within noise. The cpu-offload scenario's eager did not move:
// its compiled cell is judged by its time, as before.
TEST(ReportDiffEager, WhenEagerMovedCompiledCellsAreJudgedByTheirSpeedupOverTheirOwnEager) {
  const double slow = 1.6;
  const std::vector<double> eager_b = scaled(kEager, slow);
  json a = json::array(), b = json::array();
  for (auto [id, policy] : {std::pair{2, "whole-hook"}, {3, "offload-only"}, {4, "flat"}, {5, "small"}})
    a.push_back(timed_run(id, "sharded", policy, "default", kCompiled, kEager));
  a.push_back(timed_run(1, "sharded", "whole-hook", "eager", kEager));
  a.push_back(timed_run(6, "cpu-offload", "whole-hook", "eager", kEager));
  a.push_back(timed_run(7, "cpu-offload", "whole-hook", "default", kCompiled, kEager));
  b.push_back(timed_run(2, "sharded", "whole-hook", "default", scaled(kCompiled, slow), eager_b));
  b.push_back(timed_run(3, "sharded", "offload-only", "default", scaled(eager_b, 0.4), eager_b));  // 2.5×
  b.push_back(timed_run(4, "sharded", "flat", "default", scaled(eager_b, 1.5), eager_b));          // 0.67×
  b.push_back(timed_run(5, "sharded", "small", "default", scaled(eager_b, 0.95), eager_b));        // 1.05×
  b.push_back(timed_run(1, "sharded", "whole-hook", "eager", eager_b));
  b.push_back(timed_run(6, "cpu-offload", "whole-hook", "eager", kEager));
  b.push_back(timed_run(7, "cpu-offload", "whole-hook", "default", kSlowerCompiled, kEager));
  const json diff = hs::reports::build_report_diff(hand_side("main", a, {}), hand_side("pr", b, {}));

  ASSERT_EQ(diff["eager_moved"].size(), 1u) << diff["eager_moved"].dump(1);
  const json& moved = diff["eager_moved"][0];
  EXPECT_EQ(moved["engine"], "libtorch");
  EXPECT_EQ(moved["scenario"], "sharded");
  EXPECT_NEAR(moved["factor"].get<double>(), slow, 1e-9);
  EXPECT_NEAR(moved["a_ms_per_token"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(moved["b_ms_per_token"].get<double>(), 16.0, 1e-9);

  auto cell = cells_by_name(diff);
  // In absolute time the sharded cells are slower: the machine, not the change.
  for (const char* name : {"sharded whole-hook eager", "sharded whole-hook default", "sharded small default"})
    EXPECT_EQ(cell[name]["latency"]["decode_ms_per_token"]["verdict"], "slower") << name;
  EXPECT_EQ(cell["sharded whole-hook eager"]["verdict"], "machine drift");
  EXPECT_EQ(cell["sharded whole-hook eager"]["judged_by"], "absolute");
  EXPECT_EQ(cell["sharded whole-hook default"]["judged_by"], "speedup_vs_eager");
  EXPECT_EQ(cell["sharded whole-hook default"]["verdict"], "within noise");
  EXPECT_NEAR(cell["sharded whole-hook default"]["speedup_vs_eager"]["ratio"].get<double>(), 1.0, 1e-9);
  EXPECT_EQ(cell["sharded offload-only default"]["verdict"], "faster");  // 1.25× → 2.50× over its eager
  EXPECT_EQ(cell["sharded flat default"]["verdict"], "slower");          // 1.25× → 0.67×
  EXPECT_EQ(cell["sharded small default"]["speedup_vs_eager"]["verdict"], "slower");  // 1.25× → 1.05×, apart
  EXPECT_EQ(cell["sharded small default"]["verdict"], "within noise");               // but by less than 1.6×
  EXPECT_NE(cell["sharded small default"]["why"].get<std::string>().find(
                "eager decode moved 1.60× between the captures (10.00 → 16.00 ms/token, beyond its spread): the "
                "machine changed; the 1.19× effect is not larger than that"),
            std::string::npos)
      << cell["sharded small default"]["why"];
  EXPECT_NE(cell["sharded offload-only default"]["why"].get<std::string>().find(
                "the 2.00× effect is larger than the 1.60× eager move between the captures"),
            std::string::npos)
      << cell["sharded offload-only default"]["why"];
  EXPECT_EQ(cell["cpu-offload whole-hook eager"]["verdict"], "within noise");
  EXPECT_EQ(cell["cpu-offload whole-hook default"]["judged_by"], "absolute");
  EXPECT_EQ(cell["cpu-offload whole-hook default"]["verdict"], "slower");
  EXPECT_TRUE(cell["cpu-offload whole-hook default"]["why"].is_null());
  EXPECT_EQ(diff["counts"], json::parse(R"({"matched": 7, "faster": 1, "slower": 2, "within noise": 3, "machine drift": 1})"));

  const std::string md = hs::reports::render_diff_markdown(diff);
  EXPECT_NE(md.find("> **The machine changed between the captures.**"), std::string::npos) << md;
  EXPECT_NE(md.find("- libtorch sharded: eager decode moved 1.60× (whole-hook eager: `main` 10.00 → `pr` 16.00 ms/token, "
                    "beyond its spread): the machine changed between the captures; compiled cells are judged by their "
                    "ratio to their own file's eager."),
            std::string::npos)
      << md;
  EXPECT_LT(md.find("machine changed"), md.find("### libtorch engine")) << "the note comes first";
  EXPECT_NE(md.find("| vs eager main | vs eager pr | verdict |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sharded | whole-hook | eager | – | – | ok | ok | 10.0 (9.9–10.1) | 16.0 (15.8–16.2) | 1.60× | "
                    "+60.0% | – | – | machine drift |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sharded | whole-hook | default | 0 | 0 | ok | ok | 8.0 (7.9–8.1) | 12.8 (12.6–13.0) | 1.60× | "
                    "+60.0% | 1.25× (1.25–1.25) | 1.25× (1.25–1.25) | within noise (by speed-up vs eager) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 1.25× (1.25–1.25) | 2.50× (2.50–2.50) | **faster** (by speed-up vs eager) |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| cpu-offload | whole-hook | default | 0 | 0 | ok | ok | 8.0 (7.9–8.1) | 9.5 (9.4–9.6) | 1.19× | "
                    "+18.8% | 1.25× (1.25–1.25) | 1.05× (1.05–1.05) | **slower** |"),
            std::string::npos)
      << md;
}

// Eager steady (the same samples in both files): every cell is judged by its time, as before —
// a compiled cell that got slower is slower, and no note about the machine is written.
TEST(ReportDiffEager, WhenEagerIsSteadyCellsAreJudgedByTheirTime) {
  json a = json::array(), b = json::array();
  a.push_back(timed_run(1, "sharded", "whole-hook", "eager", kEager));
  a.push_back(timed_run(2, "sharded", "whole-hook", "default", kCompiled, kEager));
  b.push_back(timed_run(1, "sharded", "whole-hook", "eager", kEager));
  b.push_back(timed_run(2, "sharded", "whole-hook", "default", kSlowerCompiled, kEager));
  const json diff = hs::reports::build_report_diff(hand_side("main", a, {}), hand_side("pr", b, {}));
  EXPECT_TRUE(diff["eager_moved"].empty()) << diff["eager_moved"].dump(1);
  auto cell = cells_by_name(diff);
  EXPECT_EQ(cell["sharded whole-hook eager"]["verdict"], "within noise");
  EXPECT_EQ(cell["sharded whole-hook default"]["judged_by"], "absolute");
  EXPECT_EQ(cell["sharded whole-hook default"]["verdict"], "slower");
  EXPECT_EQ(cell["sharded whole-hook default"]["speedup_vs_eager"]["verdict"], "slower");  // computed, not used
  const std::string md = hs::reports::render_diff_markdown(diff);
  EXPECT_EQ(md.find("machine changed"), std::string::npos) << md;
  EXPECT_EQ(md.find("vs eager main"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.19× | +18.8% | **slower** |"), std::string::npos) << md;
}

// Without eager cells, a compiled cell's interleaved eager tells that the machine moved.
TEST(ReportDiffEager, InterleavedEagerAloneTellsThatTheMachineMoved) {
  json a = json::array(), b = json::array();
  a.push_back(timed_run(2, "sharded", "whole-hook", "default", kCompiled, kEager));
  b.push_back(timed_run(2, "sharded", "whole-hook", "default", scaled(kCompiled, 0.5), scaled(kEager, 0.5)));
  const json diff = hs::reports::build_report_diff(hand_side("main", a, {}), hand_side("pr", b, {}));
  ASSERT_EQ(diff["eager_moved"].size(), 1u);
  EXPECT_EQ(diff["eager_moved"][0]["measurement"], "interleaved eager");
  EXPECT_NEAR(diff["eager_moved"][0]["factor"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(diff["cells"][0]["latency"]["decode_ms_per_token"]["verdict"], "faster");
  EXPECT_EQ(diff["cells"][0]["verdict"], "within noise");
  EXPECT_NE(hs::reports::render_diff_markdown(diff).find("eager decode moved 0.50× (whole-hook default's interleaved eager: "
                                                     "`main` 10.00 → `pr` 5.00 ms/token"),
            std::string::npos);
}

// Hook time, compiler-disabled time and transfers (each run's stats.totals) and graph breaks (the
// run's own count), as the report JSON holds them: A, B and the delta.
TEST(ReportDiff, CostsAreComparedFromTheReportJson) {
  auto with_totals = [](json run, int64_t hook_ns, int64_t calls, int64_t breaks, int64_t transfers, int64_t bytes) {
    run["stats"] = {{"totals",
                     {{"hook_calls", calls}, {"hook_busy_ns", hook_ns}, {"disabled_entries", calls / 2},
                      {"disabled_busy_ns", hook_ns / 2}, {"transfers", transfers}, {"transfer_bytes", bytes},
                      {"onloads", 0}}}};
    run["graph_break_count"] = breaks;
    return run;
  };
  json a = json::array(), b = json::array();
  a.push_back(with_totals(timed_run(2, "sharded", "whole-hook", "default", kCompiled, kEager), 12'000'000, 40, 9, 30, 3 << 20));
  b.push_back(with_totals(timed_run(2, "sharded", "whole-hook", "default", kCompiled, kEager), 9'000'000, 20, 0, 30, 3 << 20));
  a.push_back(timed_run(3, "sharded", "whole-hook", "eager", kEager));  // no stats, no breaks: nothing to compare
  b.push_back(timed_run(3, "sharded", "whole-hook", "eager", kEager));
  json libtorch_a = timed_run(4, "sharded", "offload-only", "default", kCompiled, kEager);
  json libtorch_b = libtorch_a;
  libtorch_a["graph_break_count"] = nullptr, libtorch_a["disabled_scope_entries"] = 58;
  libtorch_b["graph_break_count"] = nullptr, libtorch_b["disabled_scope_entries"] = 40;
  a.push_back(libtorch_a);
  b.push_back(libtorch_b);
  const json diff = hs::reports::build_report_diff(hand_side("main", a, {}), hand_side("pr", b, {}));
  auto cell = cells_by_name(diff);
  const json& t = cell["sharded whole-hook default"]["costs"];
  EXPECT_EQ(t["hook_busy_ns"], json::parse(R"({"a": 12000000, "b": 9000000, "delta": -3000000, "delta_pct": -25.0})"));
  EXPECT_EQ(t["hook_calls"]["delta"], -20);
  EXPECT_EQ(t["disabled_busy_ns"]["delta"], -1500000);
  EXPECT_EQ(t["graph_break_count"]["a"], 9);
  EXPECT_EQ(t["graph_break_count"]["b"], 0);
  EXPECT_EQ(t["graph_break_count"]["delta"], -9);
  EXPECT_EQ(t["transfers"]["delta"], 0);
  EXPECT_EQ(t["transfer_bytes"]["b"], 3 << 20);
  EXPECT_EQ(cell["sharded offload-only default"]["costs"]["disabled_scope_entries"]["delta"], -18);
  EXPECT_TRUE(cell["sharded whole-hook eager"]["costs"]["hook_busy_ns"]["a"].is_null());
  EXPECT_TRUE(cell["sharded whole-hook eager"]["costs"]["hook_busy_ns"]["delta"].is_null());
  const std::string md = hs::reports::render_diff_markdown(diff);
  EXPECT_NE(md.find("| scenario | policy | mode | hook time, ms | hook calls | compiler-disabled, ms | disabled entries | "
                    "graph breaks | transfers | transfer bytes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sharded | whole-hook | default | 12.0 → 9.0 (-25.0%) | 40 → 20 (-20) | 6.0 → 4.5 (-25.0%) | "
                    "20 → 10 (-10) | 9 → 0 (-9) | 30 | 3.0 MiB |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sharded | offload-only | default | – | – | – | – | 58† → 40† (-18) | – | – |"), std::string::npos)
      << md;
  EXPECT_EQ(md.find("| sharded | whole-hook | eager | – | – | – |"), std::string::npos) << "a run without costs has no row\n"
                                                                                     << md;
}

TEST(ReportDiff, TheHtmlPageIsTheMarkdownsTablesInOneFile) {
  json a = json::array(), b = json::array();
  a.push_back(timed_run(1, "sharded", "whole-hook", "eager", kEager));
  b.push_back(timed_run(1, "sharded", "whole-hook", "eager", scaled(kEager, 2)));
  const json diff = hs::reports::build_report_diff(hand_side("<main>", a, {}), hand_side("pr", b, {}));
  const std::string html = hs::reports::render_diff_html(diff, hs::reports::render_diff_markdown(diff));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<title>hookscope: before/after, &lt;main&gt; → pr</title>"), std::string::npos) << html;
  EXPECT_NE(html.find("<blockquote><p><strong>The machine changed between the captures.</strong>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>machine drift</td>"), std::string::npos) << html;
  EXPECT_EQ(html.find("<main>"), std::string::npos) << "the label is escaped";
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos) << "nothing fetched";
}

// ------------------------------------------------------------------ two real captures

struct Captures {
  fs::path dir, main, pr;
};

/// main: sharded under both policies, eager and default (+ fullgraph), 3 new tokens;
/// pr: the offload-only half of that matrix with 4 new tokens.
const Captures& captures() {
  static Captures c = [] {
    Captures k;
    k.dir = hs::test::scratch_dir("report-diff-" + std::to_string(getpid()));
    k.main = k.dir / "main.sqlite";
    k.pr = k.dir / "pr.sqlite";
    const std::string model = hs::test::tiny_checkpoint("tiny-llama").string();
    for (const auto& [out, policies, tokens] : {std::tuple{k.main, "whole-hook,offload-only", "3"},
                                                std::tuple{k.pr, "offload-only", "4"}}) {
      auto r = hookscope({"capture", "--engine", "libtorch", "--model", model, "--devices", "2", "--scenarios", "sharded",
                          "--policies", policies, "--modes", "eager,default", "--prompt-ids", "5,17,99,3",
                          "--max-new-tokens", tokens, "--repeats", "3", "--warmup", "0", "--out", out.string()});
      if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    }
    return k;
  }();
  return c;
}

/// The single-file report JSON of a capture, by run id.
std::map<int64_t, json> runs_by_id(const fs::path& capture, const std::string& name) {
  const fs::path out = captures().dir / (name + ".json");
  auto r = hookscope({"report", capture.string(), "--json", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<int64_t, json> runs;
  const json report = hs::test::read_json(out);
  for (const auto& run : report["runs"]) runs[run["id"].get<int64_t>()] = run;
  return runs;
}

TEST(ReportDiffCli, TwoCapturesAreMatchedCellByCell) {
  const Captures& c = captures();
  const fs::path md = c.dir / "diff.md", js = c.dir / "diff.json";
  auto r = hookscope({"report", c.main.string(), c.pr.string(), "--labels", "before,after", "--markdown", md.string(),
                      "--json", js.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, hs::test::read_file(md));
  const json diff = hs::test::read_json(js);
  EXPECT_EQ(diff["kind"], "report-diff");
  EXPECT_EQ(diff["a"]["label"], "before");
  EXPECT_EQ(diff["b"]["label"], "after");
  EXPECT_EQ(diff["a"]["runs"], 6);  // 2 policies x (eager, default, default fullgraph)
  EXPECT_EQ(diff["b"]["runs"], 3);

  // The offload-only cells are matched, each side exactly as its own report says.
  const auto main_runs = runs_by_id(c.main, "main"), pr_runs = runs_by_id(c.pr, "pr");
  ASSERT_EQ(diff["cells"].size(), 3u) << diff.dump(1);
  std::set<std::string> modes;
  for (const auto& cell : diff["cells"]) {
    EXPECT_EQ(cell["engine"], "libtorch");
    EXPECT_EQ(cell["policy"], "offload-only");
    modes.insert(cell["mode"].get<std::string>() + (cell["fullgraph"].get<bool>() ? " fullgraph" : ""));
    const json& ra = main_runs.at(cell["a"]["run"].get<int64_t>());
    const json& rb = pr_runs.at(cell["b"]["run"].get<int64_t>());
    for (const auto& [side, run] : {std::pair{cell["a"], ra}, std::pair{cell["b"], rb}}) {
      EXPECT_EQ(run["mode"], cell["mode"]);
      EXPECT_EQ(run["fullgraph"], cell["fullgraph"]);
      EXPECT_EQ(side["disabled_scope_entries"], run["disabled_scope_entries"]);
      EXPECT_TRUE(side["graph_break_count"].is_null()) << "the LibTorch engine reports no Dynamo count";
      EXPECT_EQ(side["status"], run["status"]);
    }
    const json& l = cell["latency"]["decode_ms_per_token"];
    EXPECT_EQ(l["a"], ra["decode_ms_per_token"]);
    EXPECT_EQ(l["b"], rb["decode_ms_per_token"]);
    EXPECT_EQ(l["verdict"], hs::reports::compare_latency(ra["decode_ms_per_token"], rb["decode_ms_per_token"])["verdict"]);
    if (ra["status"] == "ok" && rb["status"] == "ok") {
      EXPECT_NEAR(l["ratio"].get<double>(),
                  rb["decode_ms_per_token"]["median"].get<double>() / ra["decode_ms_per_token"]["median"].get<double>(), 1e-12);
    }
  }
  EXPECT_EQ(modes, (std::set<std::string>{"eager", "default", "default fullgraph"}));
  ASSERT_EQ(diff["only_in_a"].size(), 3u);
  for (const auto& cell : diff["only_in_a"]) EXPECT_EQ(cell["policy"], "whole-hook");
  EXPECT_TRUE(diff["only_in_b"].empty());

  // The token counts differ and are warned about; the model and devices are the same.
  std::map<std::string, json> differ;
  for (const auto& d : diff["settings_differ"]) differ[d["setting"]] = d;
  ASSERT_TRUE(differ.count("new tokens")) << diff["settings_differ"].dump();
  EXPECT_EQ(differ["new tokens"]["a"], "3");
  EXPECT_EQ(differ["new tokens"]["b"], "4");
  EXPECT_FALSE(differ.count("model"));
  EXPECT_FALSE(differ.count("devices"));
  EXPECT_FALSE(differ.count("versions.torch [libtorch]"));

  const std::string text = hs::test::read_file(md);
  EXPECT_NE(text.find("## hookscope: before/after, `before` → `after`"), std::string::npos) << text;
  EXPECT_NE(text.find("| new tokens | 3 | 4 |"), std::string::npos) << text;
  EXPECT_NE(text.find("### libtorch engine"), std::string::npos) << text;
  EXPECT_NE(text.find("| sharded | offload-only | default fullgraph |"), std::string::npos) << text;
  EXPECT_NE(text.find("### only in `before` (3)"), std::string::npos) << text;
  EXPECT_NE(text.find("† LibTorch engine"), std::string::npos) << text;
}

TEST(ReportDiffCli, ACaptureAgainstACopyOfItselfIsAllWithinNoiseWithTheSameSettings) {
  const Captures& c = captures();
  const fs::path copy = c.dir / "copy" / "main.sqlite";
  fs::create_directories(copy.parent_path());
  fs::copy_file(c.main, copy, fs::copy_options::overwrite_existing);
  const fs::path js = c.dir / "self.json";
  auto r = hookscope({"report", c.main.string(), copy.string(), "--json", js.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json diff = hs::test::read_json(js);
  // Labels default to the stems, with their folders when the stems are the same.
  EXPECT_EQ(diff["a"]["label"], fs::path(c.dir.filename() / "main").string());
  EXPECT_EQ(diff["b"]["label"], "copy/main");
  EXPECT_TRUE(diff["settings_differ"].empty()) << diff["settings_differ"].dump();
  EXPECT_EQ(diff["cells"].size(), 6u);
  EXPECT_TRUE(diff["only_in_a"].empty());
  EXPECT_TRUE(diff["only_in_b"].empty());
  for (const auto& cell : diff["cells"]) {
    // A fullgraph run that raised has no latency on either side.
    const json v = cell["latency"].value("decode_ms_per_token", json::object()).value("verdict", json());
    EXPECT_TRUE(v.is_null() || v == "within noise") << cell.dump();
    EXPECT_FALSE(cell["breaks_changed"].get<bool>());
    EXPECT_FALSE(cell["outcome_changed"].get<bool>());
  }
  EXPECT_EQ(r.out.find("Settings differ"), std::string::npos) << r.out;
}

TEST(ReportDiffCli, ABadSecondFileOrLabelIsRefusedNamingIt) {
  const Captures& c = captures();
  const fs::path dir = hs::test::scratch_dir("report-diff-bad-" + std::to_string(getpid()));
  auto r = hookscope({"report", c.main.string(), (dir / "missing.sqlite").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.sqlite"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "missing.sqlite"));
  const fs::path notes = dir / "notes.txt";
  {
    std::ofstream f(notes);
    f << "not a capture";
  }
  r = hookscope({"report", c.main.string(), notes.string(), "--json", (dir / "d.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a hookscope capture"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("notes.txt"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(notes), "not a capture");
  EXPECT_FALSE(fs::exists(dir / "d.json"));

  // --labels: two different names, and only with two files (usage errors).
  for (const char* bad : {"one", "a,a", "a,b,c", ""}) {
    r = hookscope({"report", c.main.string(), c.pr.string(), "--labels", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--labels"), std::string::npos) << r.err;
  }
  r = hookscope({"report", c.main.string(), "--labels", "a,b"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--labels"), std::string::npos) << r.err;
  r = hookscope({"report", c.main.string(), c.pr.string(), c.main.string()});
  EXPECT_EQ(r.exit_code, 2) << "at most two files";
  // A file compared with itself (by the same name, another name or a link) is refused: every
  // cell would read "within noise".
  fs::create_symlink(c.main, dir / "link.sqlite");
  for (const fs::path& again : {c.main, dir / ".." / dir.filename() / "link.sqlite"}) {
    r = hookscope({"report", c.main.string(), again.string(), "--json", (dir / "self.json").string()});
    EXPECT_EQ(r.exit_code, 1) << again;
    EXPECT_NE(r.err.find("is the same file as " + c.main.string()), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "self.json"));
  }

  // An output that is one of the captures is refused: nothing written.
  const std::string before = hs::test::read_file(c.pr);
  r = hookscope({"report", c.main.string(), c.pr.string(), "--json", c.pr.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the capture being compared"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(c.pr), before);

  // The help documents the comparison's JSON.
  r = hookscope({"report", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("report-diff"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("within noise"), std::string::npos) << r.out;
}

// ------------------------------------------------------------------ a busier machine

/// Pins the calling thread, and the processes it starts from now on, to one CPU until destroyed.
class PinnedTo {
 public:
  explicit PinnedTo(int cpu) {
    sched_getaffinity(0, sizeof before_, &before_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
  }
  ~PinnedTo() { sched_setaffinity(0, sizeof before_, &before_); }
  PinnedTo(const PinnedTo&) = delete;
  PinnedTo& operator=(const PinnedTo&) = delete;

 private:
  cpu_set_t before_;
};

/// Threads spinning on one CPU: whatever runs beside them there gets a share of it.
class BusyCpu {
 public:
  BusyCpu(int cpu, int threads) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this, cpu] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        while (!stop_.load(std::memory_order_relaxed)) {
        }
      });
  }
  ~BusyCpu() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

int a_cpu_of_this_process() {
  cpu_set_t mine;
  sched_getaffinity(0, sizeof mine, &mine);
  for (int c = CPU_SETSIZE - 1; c >= 0; --c)
    if (CPU_ISSET(c, &mine)) return c;
  return 0;
}

// The same settings captured twice on one CPU, the second time with four threads spinning
// beside it (about a fifth of the CPU left to the capture): every cell is slower in time, and
// the diff must say that the machine changed, call no eager cell a regression, and judge the
// compiled cells by their speed-up over their own file's eager.
TEST(ReportDiffCli, ACaptureOnABusierMachineIsNamedMachineDriftNotARegression) {
  const fs::path dir = hs::test::scratch_dir("report-diff-busy-" + std::to_string(getpid()));
  const fs::path quiet = dir / "quiet.sqlite", busy = dir / "busy.sqlite";
  const std::string model = hs::test::tiny_checkpoint("tiny-llama").string();
  auto capture = [&](const fs::path& out) {
    auto r = hookscope({"capture", "--engine", "libtorch", "--model", model, "--devices", "2", "--scenarios", "sharded",
                        "--policies", "whole-hook", "--modes", "eager,default", "--fullgraph", "off", "--prompt-ids",
                        "5,17,99,3", "--max-new-tokens", "32", "--repeats", "5", "--warmup", "1", "--threads", "1",
                        "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  const int cpu = a_cpu_of_this_process();
  {
    PinnedTo pin(cpu);
    capture(quiet);
  }
  {
    PinnedTo pin(cpu);
    BusyCpu spinning(cpu, 4);
    capture(busy);
  }
  const fs::path md = dir / "diff.md", js = dir / "diff.json", html = dir / "diff.html";
  auto r = hookscope({"report", quiet.string(), busy.string(), "--markdown", md.string(), "--json", js.string(), "--html",
                      html.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json diff = hs::test::read_json(js);
  ASSERT_EQ(diff["eager_moved"].size(), 1u) << diff.dump(1);
  const json& moved = diff["eager_moved"][0];
  std::cout << "eager moved " << moved["factor"] << "x (" << moved["measurement"] << ", " << moved["a_ms_per_token"]
            << " -> " << moved["b_ms_per_token"] << " ms/token)\n";
  EXPECT_EQ(moved["scenario"], "sharded");
  EXPECT_GT(moved["factor"].get<double>(), 1.0) << "the busier capture is the slower one";
  ASSERT_EQ(diff["cells"].size(), 2u) << diff.dump(1);
  for (const auto& cell : diff["cells"]) {
    if (cell["mode"] == "eager") {
      EXPECT_NE(cell["verdict"], "slower") << cell.dump(1);
      EXPECT_NE(cell["verdict"], "faster") << cell.dump(1);
      if (cell["latency"]["decode_ms_per_token"]["verdict"] == "slower") {
        EXPECT_EQ(cell["verdict"], "machine drift");
      }
    } else {
      EXPECT_EQ(cell["judged_by"], "speedup_vs_eager") << cell.dump(1);
      EXPECT_TRUE(cell["speedup_vs_eager"]["a"].is_object()) << cell.dump(1);
    }
  }
  const std::string text = hs::test::read_file(md);
  EXPECT_EQ(r.out, text);
  EXPECT_NE(text.find("the machine changed between the captures; compiled cells are judged by their ratio to their own "
                      "file's eager"),
            std::string::npos)
      << text;
  const std::string page = hs::test::read_file(html);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("The machine changed between the captures."), std::string::npos);
  EXPECT_NE(page.find("<table"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
