// The PR report's Markdown, rendered from report JSON (schema 1).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "cli/cli_util.h"
#include "facts/profile_verdicts.h"
#include "facts/recording.h"
#include "measurement/spread.h"
#include "output/text.h"
#include "reports/markdown_text.h"
#include "reports/report.h"
#include "reports/report_html.h"
#include "tests/test_util.h"

using nlohmann::json;

namespace {

json run(const std::string& sc, const std::string& pol, const std::string& mode, bool fg, const std::string& status,
         json breaks, double ms) {
  json r{{"scenario", sc}, {"policy", pol}, {"mode", mode}, {"fullgraph", fg}, {"status", status},
         {"error", status == "error" ? json("Unsupported: Skip calling `torch.compiler.disable()`d function "
                                            "AlignDevicesHook.pre_forward (module model.layers.0)")
                                     : json(nullptr)},
         {"graph_count", breaks.is_null() ? json(nullptr) : json(breaks.get<int>() + 1)},
         {"graph_break_count", breaks},
         {"break_reasons", json::array()},
         {"weight_devices", {"0", "1"}},
         {"argmax_match", status == "ok" ? json(true) : json(nullptr)},
         {"logits_identical", nullptr},
         {"params_on_meta_after", nullptr},
         {"decode_ms_per_token", status == "ok" ? json{{"median", ms}, {"min", ms - 1}, {"max", ms + 1}, {"q1", ms - 0.5},
                                                       {"q3", ms + 0.5}, {"n", 3}}
                                                : json(nullptr)},
         {"new_tokens", 8}};
  if (status == "error" || (!breaks.is_null() && breaks.get<int>() > 0))
    r["break_reasons"].push_back({{"reason", "Skip calling `torch.compiler.disable()`d function"},
                                  {"function", "AlignDevicesHook.pre_forward"},
                                  {"module", "model.layers.0"}});
  return r;
}

json sample_report() {
  json runs = json::array();
  runs.push_back(run("sharded", "whole-hook", "eager", false, "ok", 0, 100));
  runs.push_back(run("sharded", "whole-hook", "default", false, "ok", 9, 120));
  runs.push_back(run("sharded", "whole-hook", "default", true, "error", nullptr, 0));
  runs.push_back(run("sharded", "offload-only", "eager", false, "ok", 0, 100));
  runs.push_back(run("sharded", "offload-only", "default", false, "ok", 0, 50));
  runs.push_back(run("sharded", "offload-only", "default", true, "ok", 0, 50));
  for (size_t i = 0; i < runs.size(); ++i) runs[i]["id"] = i + 1;
  // build_report's verdicts (measurement/verdict.h), as it would write them.
  runs[1]["speedup"] = {{"vs_eager", 100.0 / 120}, {"verdict", "slower"}, {"why", "apart"}};
  runs[4]["speedup"] = {{"vs_eager", 2.0}, {"verdict", "faster"}, {"why", "apart"}};
  return {{"schema", 2},
          {"model", {{"id", "tiny"}, {"path", "/x"}, {"dtype", "f32"}, {"params", 1000000}, {"bytes", 4000000}}},
          {"devices", json::array({{{"id", 0}, {"kind", "emulated"}, {"backing", "cpu"}, {"max_memory", nullptr}},
                                   {{"id", 1}, {"kind", "emulated"}, {"backing", "cpu"}, {"max_memory", nullptr}}})},
          {"runs", runs}};
}

TEST(Report, MarkdownHasTheReferenceTables) {
  const std::string md = hs::reports::render_markdown(sample_report());
  EXPECT_NE(md.find("| tiny | f32 | 1.0M | 3.8 MiB | 0 (emulated), 1 (emulated) |"), std::string::npos) << md;
  EXPECT_NE(md.find("Emulated accelerators are backed by host memory"), std::string::npos);
  // fullgraph before raises naming the hook, after works.
  EXPECT_NE(md.find("| sharded | raises at `AlignDevicesHook.pre_forward` (module `model.layers.0`) |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("AlignDevicesHook.pre_forward"), std::string::npos);
  EXPECT_NE(md.find("| works | yes |"), std::string::npos) << md;
  // latency: decode ms/token median (IQR), speed-up vs eager with its verdict.
  EXPECT_NE(md.find("| sharded | default | whole-hook | 3 | – | 120.00 (119.50–120.50) | – | – | 0.83× slower |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sharded | default | offload-only | 3 | – | 50.00 (49.50–50.50) | – | – | 2.00× faster |"),
            std::string::npos)
      << md;
  // graph breaks before/after.
  EXPECT_NE(md.find("| sharded | default | 9 | 0 |"), std::string::npos) << md;
  // The default run breaks there once, and the fullgraph run stops there: two.
  EXPECT_NE(md.find("| `AlignDevicesHook.pre_forward` | 2 | 2 | 1 | `model.layers.0` |"), std::string::npos) << md;
}

// The timeline's generate against the measured ones (facts/recording.h): the median of the
// measured wall times, the numbers only, beside the latency.
TEST(Report, TheRecordingOverheadIsTheProfiledGenerateOverTheMeasuredMedian) {
  json r = sample_report();
  r["runs"][4]["profiled_run"] = {{"generate_ms", 130.0}, {"recompiles", 0}};
  r["runs"][4]["generate_ms"] = {110.0, 90.0, 1000.0, 100.0, "x", -5.0};  // median of 90, 100, 110, 1000: 105
  const auto o = hs::facts::recording_overhead(r["runs"][4]);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->unrecorded_n, 4);
  EXPECT_DOUBLE_EQ(o->unrecorded_median_ms, 105.0);
  EXPECT_EQ(hs::facts::recording_overhead_text(*o), "1.24×");
  const std::string md = hs::reports::render_markdown(r);
  EXPECT_NE(md.find("| 2.00× faster | 1.24× |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.83× slower | – |"), std::string::npos) << "no profiled generate, no figure: " << md;
  for (const json& bad : {json(nullptr), json{{"generate_ms", "130"}}, json{{"generate_ms", 0}}})
    EXPECT_FALSE(hs::facts::recording_overhead({{"profiled_run", bad}, {"generate_ms", {100.0}}})) << bad;
  EXPECT_FALSE(hs::facts::recording_overhead({{"profiled_run", {{"generate_ms", 130.0}}}, {"generate_ms", json::array()}}));
}

// A profiled program's block: its iterations are judged only with enough of them per policy
// (the two runs were made one after the other); the hook time leaves out Dynamo's compiling
// inside the hooks and says how much that was; the command reads as it would be typed.
TEST(Report, AProfiledProgramsVerdictJudgesEnoughIterationsAndKeepsCompilesOutOfHookTime) {
  auto run = [](int64_t id, const char* policy, std::vector<double> ms) {
    json r{{"id", id},         {"engine", "profile"},
           {"scenario", "-c"}, {"policy", policy},
           {"status", "complete"}, {"exit_status", 0},
           {"command", {"python", "-c", "print('hi')"}},
           {"stats", {{"totals", {{"hook_busy_ns", 2'500'000}, {"hook_calls", 10}, {"hook_compile_ns", 800'000'000}}}}}};
    r["iterations"] = {{"source", "model call"}, {"count", ms.size()}, {"ms", hs::measurement::Spread::of(ms).to_json()}};
    return r;
  };
  const hs::facts::Markup plain{[](const std::string& s) { return "`" + s + "`"; }, [](const std::string& s) { return s; }};
  // Three each, far apart: not judged (it would read "faster" from the spreads alone).
  json report{{"runs", {run(1, "whole-hook", {10, 10.1, 10.2}), run(2, "offload-only", {5, 5.1, 5.2})}}};
  json v = hs::facts::profile_verdicts(report).at(0);
  EXPECT_EQ(v["iteration_speedup"]["verdict"], "not judged") << v.dump();
  EXPECT_EQ(v["iteration_speedup"]["why"],
            "3 iterations under each policy: at least 5 per policy are needed to judge two runs made one after the other");
  EXPECT_EQ(hs::facts::program_command(report["runs"][0]), "python -c 'print('\\''hi'\\'')'");
  std::string text;
  for (const auto& c : hs::facts::profile_diagnosis(v, plain)) text += c.text + "\n";
  EXPECT_NE(text.find("hook time 2.5 ms over 10 calls (besides 800.0 ms of Dynamo compiling inside them)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("`python -c 'print('\\''hi'\\'')'` exited with status 0"), std::string::npos) << text;
  // Five each: judged.
  report = {{"runs", {run(1, "whole-hook", {10, 10.1, 10.2, 10.1, 10}), run(2, "offload-only", {5, 5.1, 5.2, 5.1, 5})}}};
  v = hs::facts::profile_verdicts(report).at(0);
  EXPECT_EQ(v["iteration_speedup"]["verdict"], "faster") << v.dump();
}

// A profiled run's recompile-limit failures (a frame Dynamo gave up on runs eagerly) are in its
// block: the diagnosis says them, and the table has their row where a policy hit the limit.
TEST(Report, AProfiledProgramsRecompileLimitHitsAreInItsBlock) {
  auto run = [](int64_t id, const char* policy, int64_t hits) {
    return json{{"id", id}, {"engine", "profile"}, {"scenario", "loop.py"}, {"policy", policy}, {"status", "complete"},
                {"exit_status", 0}, {"command", {"python", "loop.py"}}, {"log_graphs", 9}, {"log_graph_break_count", 8},
                {"log_graph_break_records", 8}, {"log_compiles", 9}, {"log_recompiles", 8}, {"log_frames_skipped", hits},
                {"log_recompile_limit_hits", hits}};
  };
  const hs::facts::Markup plain{[](const std::string& s) { return "`" + s + "`"; }, [](const std::string& s) { return s; }};
  json report{{"schema", 2},
              {"model", {{"id", "?"}, {"path", ""}, {"dtype", "?"}, {"params", nullptr}, {"bytes", nullptr}}},
              {"devices", json::array()},
              {"runs", {run(1, "whole-hook", 1), run(2, "offload-only", 0)}}};
  const json v = hs::facts::profile_verdicts(report).at(0);
  std::string text;
  for (const auto& c : hs::facts::profile_diagnosis(v, plain)) text += c.text + "\n";
  EXPECT_NE(text.find("1 compile skipped or failed (1 recompile-limit failure: Dynamo stopped compiling the frame"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("0 recompile-limit failures"), std::string::npos) << text;
  report["verdicts"] = hs::facts::profile_verdicts(report);
  const std::string md = hs::reports::render_markdown(report);
  EXPECT_NE(md.find("| recompile-limit failures in the log | 1 | 0 |"), std::string::npos) << md;
  report["runs"][0]["log_recompile_limit_hits"] = 0;
  report["verdicts"] = hs::facts::profile_verdicts(report);
  EXPECT_EQ(hs::reports::render_markdown(report).find("| recompile-limit failures in the log |"), std::string::npos)
      << "no row where no policy hit the limit";
}

// A profiled run as the report reads it: `calls` hook calls over 44.9 ms, `iterations` of 10 ms.
json profiled_run(int64_t id, const char* policy, int64_t calls, int64_t iterations) {
  json r{{"id", id}, {"engine", "profile"}, {"scenario", "mlp.py"}, {"policy", policy}, {"status", "complete"},
         {"exit_status", 0}, {"command", {"python", "mlp.py"}},
         {"profile", {{"capture_range", "all"}, {"ranges", {{{"trace", "trace-1.json"}}}}}},
         {"stats", {{"totals", {{"hook_busy_ns", 44'900'000}, {"hook_calls", calls}, {"hook_compile_ns", 0}}}}}};
  r["iterations"] = {{"source", iterations ? "model call" : "none"}, {"count", iterations}};
  if (iterations) r["iterations"]["ms"] = hs::measurement::Spread::of(std::vector<double>(iterations, 10.0)).to_json();
  return r;
}

std::string profiled_diagnosis(const json& runs) {
  const hs::facts::Markup plain{[](const std::string& s) { return "`" + s + "`"; }, [](const std::string& s) { return s; }};
  std::string text;
  for (const auto& c : hs::facts::profile_diagnosis(hs::facts::profile_verdicts({{"runs", runs}}).at(0), plain))
    text += c.text + "\n";
  return text;
}

// Under offload-only a hook Dynamo traces into the graph gets no range: where the policies
// recorded different hook calls, the diagnosis says so beside their hook times.
TEST(Report, AProfiledProgramsHookTimesOverDifferentCallsSaySo) {
  std::string text = profiled_diagnosis({profiled_run(1, "whole-hook", 180, 5), profiled_run(2, "offload-only", 160, 5)});
  EXPECT_NE(text.find("the policies recorded different hook calls, 180 under `whole-hook` and 160 under `offload-only`: "
                      "a hook Dynamo traces has no range of its own"),
            std::string::npos)
      << text;
  text = profiled_diagnosis({profiled_run(1, "whole-hook", 180, 5), profiled_run(2, "offload-only", 180, 5)});
  EXPECT_EQ(text.find("different hook calls"), std::string::npos) << text;
}

// A compiled model with plain hooks only gets no iterations (no top-level call holds hook work):
// the diagnosis says why and how to get them; a run without a capture range says its own cause.
TEST(Report, AProfiledRunWithoutIterationsSaysHowToGetThem) {
  std::string text = profiled_diagnosis({profiled_run(1, "whole-hook", 180, 0), profiled_run(2, "offload-only", 180, 5)});
  EXPECT_NE(text.find("no iterations under `whole-hook`: no call of a model hookscope saw held hook work at the top level"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("wrap each iteration in `torch.profiler.record_function(f\"ProfilerStep#{i}\")`, which hookscope "
                      "takes as an iteration"),
            std::string::npos)
      << text;
  text = profiled_diagnosis({profiled_run(1, "whole-hook", 180, 0), profiled_run(2, "offload-only", 180, 0)});
  EXPECT_NE(text.find("no iterations under `whole-hook` and `offload-only`:"), std::string::npos) << text;
  text = profiled_diagnosis({profiled_run(1, "whole-hook", 180, 5), profiled_run(2, "offload-only", 180, 5)});
  EXPECT_EQ(text.find("no iterations"), std::string::npos) << text;
  json bare = profiled_run(1, "whole-hook", 0, 0);
  bare["profile"]["ranges"] = json::array();
  text = profiled_diagnosis(json::array({bare}));
  EXPECT_EQ(text.find("no iterations"), std::string::npos) << "no capture range is said instead\n" << text;
}

// A profile-only report speaks of what its runs are: the "where the time goes" heading names no
// generate, and the HTML explains no decode column beside it; the log's break records are
// defined without a generate's prefill and decode steps.
TEST(Report, AProfileOnlyReportSpeaksOfNoGenerate) {
  json report{{"schema", 2},
              {"model", {{"id", "?"}, {"path", ""}, {"dtype", "?"}, {"params", nullptr}, {"bytes", nullptr}}},
              {"devices", json::array()},
              {"runs", {profiled_run(1, "whole-hook", 180, 5), profiled_run(2, "offload-only", 160, 5)}}};
  report["verdicts"] = hs::facts::profile_verdicts(report);
  const std::string md = hs::reports::render_markdown(report);
  const size_t at = md.find("### where the time goes");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string heading = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(heading.find("a profiled program its capture ranges"), std::string::npos) << heading;
  for (const char* absent : {"generate", "decode", "libtorch"})
    EXPECT_EQ(heading.find(absent), std::string::npos) << absent << ": " << heading;
  EXPECT_EQ(md.find("prefill, every decode step"), std::string::npos) << md;
  EXPECT_NE(md.find("every frame Dynamo compiled over the run: for a generate, prefill and every decode step"),
            std::string::npos)
      << md;
  const std::string html = hs::reports::markdown_to_html(md);
  EXPECT_EQ(html.find("Decode time per token"), std::string::npos) << html;
  // A capture with a libtorch run still says what its generates sum.
  json mixed = sample_report();
  for (auto& r : mixed["runs"]) r["stats"] = {{"totals", {{"hook_busy_ns", 1000}, {"hook_calls", 1}}}};
  const std::string mixed_md = hs::reports::render_markdown(mixed);
  EXPECT_NE(mixed_md.find("summed over what it recorded: a libtorch run every recorded generate"), std::string::npos)
      << mixed_md;
}

// Runs appended to a capture (a policy run again) are not compared, and the block says which; a
// --label names the block.
TEST(Report, AProfiledProgramsBlockNamesTheRunsItLeavesOutAndItsLabel) {
  json runs = {profiled_run(1, "whole-hook", 180, 5), profiled_run(2, "offload-only", 180, 5),
               profiled_run(4, "whole-hook", 180, 5)};
  std::string text = profiled_diagnosis(runs);
  EXPECT_NE(text.find("run 4 (`whole-hook`) is not compared: the block compares the first run of each policy"),
            std::string::npos)
      << text;
  runs.push_back(profiled_run(5, "offload-only", 180, 5));
  text = profiled_diagnosis(runs);
  EXPECT_NE(text.find("runs 4 (`whole-hook`), 5 (`offload-only`) are not compared"), std::string::npos) << text;
  EXPECT_EQ(profiled_diagnosis({runs[0], runs[1]}).find("not compared"), std::string::npos);
  json report{{"schema", 2},
              {"model", {{"id", "?"}, {"path", ""}, {"dtype", "?"}, {"params", nullptr}, {"bytes", nullptr}}},
              {"devices", json::array()},
              {"runs", {runs[0], runs[1]}}};
  report["runs"][0]["label"] = "baseline · whole-hook";
  report["runs"][1]["label"] = "baseline · offload-only";
  report["verdicts"] = hs::facts::profile_verdicts(report);
  EXPECT_NE(hs::reports::render_markdown(report).find(", baseline (mlp.py)**"), std::string::npos);
  report["runs"][0]["label"] = "mlp.py · whole-hook";  // no --label: the script's name
  report["verdicts"] = hs::facts::profile_verdicts(report);
  EXPECT_EQ(report["verdicts"][0]["label"], nullptr);
  EXPECT_EQ(hs::reports::render_markdown(report).find("(mlp.py)**"), std::string::npos);
}

// A run stopped by Ctrl+C: the verdict table gives its exit status as the runs table does (130),
// and says the run is incomplete beside it.
TEST(Report, AnIncompleteProfiledRunsExitStatusReadsAsInTheRunsTable) {
  json report{{"schema", 2},
              {"model", {{"id", "?"}, {"path", ""}, {"dtype", "?"}, {"params", nullptr}, {"bytes", nullptr}}},
              {"devices", json::array()},
              {"runs", json::array({profiled_run(1, "whole-hook", 180, 5)})}};
  report["runs"][0]["status"] = "incomplete";
  report["runs"][0]["exit_status"] = 130;
  report["verdicts"] = hs::facts::profile_verdicts(report);
  const std::string md = hs::reports::render_markdown(report);
  EXPECT_NE(md.find("| exit status | 130 (incomplete) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | `python mlp.py` | whole-hook | incomplete | 130 |"), std::string::npos) << md;
}

// The figures at the end define what the report's runs can show: a LibTorch engine capture (a
// file from before engines were named reads as one) no explain figure, a torch one no region
// figure, neither a profiled program's.
TEST(Report, TheFiguresListedAreThoseItsEnginesCanShow) {
  json r = sample_report();
  auto listed = [](const std::string& md, const char* label) {
    return md.find("- **" + std::string(label) + "** (") != std::string::npos;
  };
  std::string md = hs::reports::render_markdown(r);
  EXPECT_TRUE(listed(md, "compiled decode"));
  EXPECT_TRUE(listed(md, "captured regions†"));
  EXPECT_TRUE(listed(md, "graph-break records in the log"));
  EXPECT_FALSE(listed(md, "graph breaks (Dynamo, one forward)"));
  EXPECT_FALSE(listed(md, "exit status"));
  for (auto& run : r["runs"]) run["engine"] = "torch";
  md = hs::reports::render_markdown(r);
  EXPECT_TRUE(listed(md, "graph breaks (Dynamo, one forward)"));
  EXPECT_TRUE(listed(md, "compiled decode"));
  EXPECT_FALSE(listed(md, "captured regions†"));
  EXPECT_FALSE(listed(md, "exit status"));
}

TEST(Report, NoiseIsNotColouredAsAWinAndSaysWhy) {
  json r = sample_report();
  r["runs"][4]["speedup"] = {{"vs_eager", 1.04}, {"verdict", "within noise"},
                             {"why", "interquartile ranges overlap (eager 9.90–10.30, compiled 9.80–10.10 ms/token)"}};
  r["runs"][1]["speedup"] = {{"vs_eager", 0.83}, {"verdict", "not judged"}, {"why", "n=1"}};
  const std::string md = hs::reports::render_markdown(r);
  EXPECT_NE(md.find("| 1.04× within noise [1] |"), std::string::npos) << md;
  EXPECT_NE(md.find("[1] interquartile ranges overlap (eager 9.90–10.30"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.83× (n=3, not judged) |"), std::string::npos) << md;
  EXPECT_EQ(md.find("× faster"), std::string::npos) << "no run is called faster: " << md;
}

TEST(Report, ADecisionThatOutweighsAnEagerDriftSaysSo) {
  json r = sample_report();
  r["runs"][4]["speedup"] = {{"vs_eager", 2.0}, {"verdict", "faster"},
                             {"why", "interquartile ranges apart (eager 99–101, compiled 49–51 ms/token); the 2.00× effect "
                                     "is larger than the 1.07× eager drift between policies (...)"}};
  const std::string md = hs::reports::render_markdown(r);
  EXPECT_NE(md.find("| 2.00× faster [1] |"), std::string::npos) << md;
  EXPECT_NE(md.find("[1] interquartile ranges apart (eager 99–101, compiled 49–51 ms/token); the 2.00× effect is larger "
                    "than the 1.07× eager drift"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 0.83× slower |"), std::string::npos) << "no drift, no note: " << md;
}

// `capture` is not the only command that writes a capture: the help of every command reading one
// names `profile` and `import` too.
TEST(Report, TheHelpNamesEveryCommandThatWritesACapture) {
  for (const std::string command : {"report", "explain", "stats", "view", "export"}) {
    SCOPED_TRACE(command);
    const auto r = hs::test::hookscope({command, "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Capture written by `hookscope capture`, `hookscope profile` or `hookscope import`"),
              std::string::npos)
        << r.out;
  }
}

TEST(Report, SettingsArePrinted) {
  json r = sample_report();
  r["settings"] = {{"command", "hookscope capture --model x"}, {"date", "2026-12-01T08:00:00Z"},
                   {"prompt", "The capital of France is"}, {"max_new_tokens", 8}, {"warmup", 1}, {"repeats", 3},
                   {"versions", {{"torch", "2.11.0"}, {"accelerate", "1.15.0"}}},
                   {"machine", {{"cpu", "AMD EPYC"}, {"logical_cpus", 2}, {"memory_bytes", 1 << 30}, {"os", "Linux"}}}};
  const std::string md = hs::reports::render_markdown(r);
  for (const char* k : {"- prompt: `The capital of France is`; 8 new tokens per greedy generate; 1 warm-up(s) and 3 "
                        "measured generate(s) per run",
                        "- versions: accelerate 1.15.0, torch 2.11.0", "- machine: AMD EPYC, 2 logical CPUs, 1.0 GiB, Linux",
                        "- date: 2026-12-01T08:00:00Z", "- command: `hookscope capture --model x`"})
    EXPECT_NE(md.find(k), std::string::npos) << k << "\n" << md;
}

TEST(Report, PeakMemoryTableTakesEachScenariosLargestPeakPerDevice) {
  json r = sample_report();
  for (auto& run : r["runs"]) run["peak_memory_bytes"] = {{"0", 1 << 20}, {"1", 2 << 20}, {"cpu", 512}};
  r["runs"][4]["peak_memory_bytes"]["1"] = 3 << 20;  // one run peaks higher on accelerator 1
  const std::string md = hs::reports::render_markdown(r);
  EXPECT_NE(md.find("### peak resident memory per device"), std::string::npos) << md;
  // Columns: the capture's devices, then any other device a run reports.
  EXPECT_NE(md.find("| scenario | 0 | 1 | cpu |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sharded | 1.0 MiB | 3.0 MiB | 512 B |"), std::string::npos) << md;
  // Without peaks (captures from before they were recorded) there is no table.
  EXPECT_EQ(hs::reports::render_markdown(sample_report()).find("peak resident memory"), std::string::npos);
}

TEST(Report, LogitsThatDifferSayHowFar) {
  json r = sample_report();
  for (auto& run : r["runs"]) {
    run["scenario"] = "cpu-offload";
    if (run["status"] != "ok") continue;
    run["logits_identical"] = true;
    run["logits_max_abs_diff"] = 0.0;
    run["logits_max_ulp"] = 0;
  }
  EXPECT_NE(hs::reports::render_markdown(r).find("| yes | yes |"), std::string::npos) << hs::reports::render_markdown(r);
  // Two runs differ; the cell shows the worst of them.
  r["runs"][1]["logits_identical"] = false;
  r["runs"][1]["logits_max_abs_diff"] = 3.1e-6;
  r["runs"][1]["logits_max_ulp"] = 2;
  r["runs"][4]["logits_identical"] = false;
  r["runs"][4]["logits_max_abs_diff"] = 1.0e-6;
  r["runs"][4]["logits_max_ulp"] = 5;
  std::string md = hs::reports::render_markdown(r);
  EXPECT_NE(md.find("| yes | **no** (max \\|Δ\\| 3.1e-06, 5 ulp) |"), std::string::npos) << md;
  r["runs"][4]["logits_max_ulp"] = -1;
  md = hs::reports::render_markdown(r);
  EXPECT_NE(md.find("**no** (NaN where the reference has a number)"), std::string::npos) << md;
}

// Every row of every HTML table has as many cells as its header.
void expect_rows_have_their_headers_cells(const std::string& html) {
  for (size_t t = html.find("<table"); t != std::string::npos; t = html.find("<table", t + 1)) {
    const std::string table = html.substr(t, html.find("</table>", t) - t);
    size_t headers = 0;
    for (size_t p = table.find("<th"); p != std::string::npos; p = table.find("<th", p + 1)) headers += table.compare(p, 5, "<thea") != 0;
    for (size_t row = table.find("<tr>", table.find("<tbody>")); row != std::string::npos; row = table.find("<tr>", row + 1)) {
      const std::string tr = table.substr(row, table.find("</tr>", row) - row);
      size_t cells = 0;
      for (size_t p = tr.find("<td"); p != std::string::npos; p = tr.find("<td", p + 1)) ++cells;
      EXPECT_EQ(cells, headers) << tr;
    }
  }
}

TEST(Report, IncompleteRunsAreNamed) {
  json r = sample_report();
  r["runs"][1]["status"] = "incomplete";
  const std::string md = hs::reports::render_markdown(r);
  EXPECT_NE(md.find("**Incomplete runs**"), std::string::npos) << md;
  EXPECT_NE(md.find("sharded/whole-hook/default"), std::string::npos) << md;
}

TEST(Report, MissingFieldIsNamed) {
  json r = sample_report();
  r.erase("devices");
  try {
    hs::reports::render_markdown(r);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'devices'"), std::string::npos) << e.what();
  }
}

}  // namespace

// Names from a capture (import's --policy, a hand-edited file) keep every table's columns and
// the page's headings: pipes escaped, newlines flattened, code spans fenced past backticks.
TEST(Report, HostileNamesStayInTheirCells) {
  json r = sample_report();
  for (auto& run : r["runs"]) {
    if (run["policy"] == "whole-hook") run["policy"] = "P|q\n## injected heading";
    run["scenario"] = "S|s`x";
  }
  r["runs"][0]["policy"] = r["runs"][3]["policy"] = "C:\\dir\\|x";  // backslashes before a pipe
  r["devices"][0]["id"] = "0<b>|";
  r["runs"][1]["peak_memory_bytes"] = {{"0<b>|", 1024}};
  r["runs"][1]["break_reasons"][0]["module"] = "a`b|c";
  r["runs"][2]["error"] = "first | line\nsecond line <function evil|fn at 0x1>";
  r["runs"][2]["break_reasons"] = json::array();
  r["settings"] = {{"command", "hookscope `x` | y\n# injected"}, {"scenarios", {"S|s`x"}}};
  const std::string md = hs::reports::render_markdown(r);
  EXPECT_EQ(hs::test::broken_markdown_line(md, "injected"), "") << md;
  EXPECT_NE(md.find("P\\|q \\#\\# injected heading"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0\\<b>\\| |"), std::string::npos) << md;
  EXPECT_NE(md.find("``a`b\\|c``"), std::string::npos) << md;
  // A multi-line error shows its first line and the function Dynamo named.
  EXPECT_NE(md.find("raises at `evil\\|fn`: `first \\| line`"), std::string::npos) << md;
  const std::string html = hs::reports::markdown_to_html(md);
  EXPECT_NE(html.find("<code>a`b|c</code>"), std::string::npos) << html;
  EXPECT_EQ(html.find("<h2>injected"), std::string::npos) << html;
  EXPECT_NE(html.find("0&lt;b&gt;| (emulated)"), std::string::npos) << html;
  EXPECT_NE(md.find("C:\\\\dir\\\\\\|x"), std::string::npos) << md;
  EXPECT_NE(html.find("C:\\dir\\|x"), std::string::npos) << html;
  // A lone backtick in a cell ("S|s`x") does not open a code span that swallows the next cells.
  expect_rows_have_their_headers_cells(html);
}

// Names GFM would read as markup — a link, an image, HTML, emphasis, strikethrough, math, an
// entity, an unclosed code span — read as their own text: on GitHub (checked with cmark-gfm,
// GitHub's Markdown implementation, from Debian) and in report --html alike.
TEST(Report, GitHubReadsHostileNamesAsTheirText) {
  if (hs::test::run({"sh", "-c", "command -v cmark-gfm"}).exit_code != 0)
    GTEST_SKIP() << "no cmark-gfm on PATH (Debian: apt-get install cmark-gfm; ./run test installs it)";
  const std::string evil = "[click](https://evil.example) ![p](https://evil.example/t.png) <script>x</script> *em* "
                           "__init__ ~~del~~ &amp; $x$ `tick \\| C:\\dir";
  json r = sample_report();
  r["model"]["id"] = evil;
  for (auto& run : r["runs"]) run["scenario"] = evil;
  r["runs"][1]["break_reasons"] = {{{"gb_code", "GB0001"}, {"reason", evil}, {"user_frame", evil}}};
  r["settings"] = {{"command", evil}, {"scenarios", {evil}}};
  const std::string md = hs::reports::render_markdown(r);
  const std::filesystem::path file = hs::test::scratch_dir("report_gfm") / "report.md";
  std::ofstream(file) << md;
  const auto gfm = hs::test::run({"cmark-gfm", "-e", "table", "-e", "autolink", "-e", "strikethrough", file.string()});
  ASSERT_EQ(gfm.exit_code, 0) << gfm.err;
  for (const auto& [who, html] : {std::pair{"cmark-gfm", gfm.out}, std::pair{"report --html", hs::reports::markdown_to_html(md)}}) {
    SCOPED_TRACE(who);
    for (const char* markup : {"<img", "<script", "<em>em</em>", "<del>del</del>", ">click</a>", "<strong>init"})
      EXPECT_EQ(html.find(markup), std::string::npos) << markup << "\n" << html;
    for (const char* text : {"[click](", "![p](", "&lt;script&gt;x&lt;/script&gt;", "*em*", "__init__", "~~del~~",
                             "&amp;amp;", "$x$", "`tick \\| C:\\dir"})
      EXPECT_NE(html.find(text), std::string::npos) << text << "\n" << html;
    EXPECT_NE(html.find("<code>" + hs::reports::xml_escape(evil) + "</code>"), std::string::npos) << "the command, verbatim";
    expect_rows_have_their_headers_cells(html);
  }
}

// The pictures' titles name runs: in the --assets Markdown they stay one heading line and one
// alt text; the folder is a percent-encoded link destination whatever its name holds; the
// caption is hookscope's own Markdown. In SVG and HTML, control characters (no XML 1.0 text has
// ESC) become spaces.
TEST(Report, PictureTitlesAndSvgTextStayWellFormed) {
  EXPECT_EQ(hs::reports::xml_escape("a\x1b\rb\x7f<'"), "a  b &lt;&#39;");
  const std::filesystem::path dir = hs::test::scratch_dir("report_hostile_assets");
  const std::string md = hs::reports::write_picture_assets(
      {{"timeline-run-2.svg", "run 2: s whole\n# INJECTED](javascript:x) [a]", "open `hookscope view --run 2`", "<svg/>"}},
      (dir / "a <x>|\\ (b)").string(), (dir / "r.md").string(), (dir / "capture.sqlite").string());
  EXPECT_EQ(hs::test::broken_markdown_line(md, "INJECTED"), "") << md;
  EXPECT_NE(md.find("\n### run 2: s whole \\# INJECTED\\](javascript:x) \\[a\\]\n"), std::string::npos) << md;
  EXPECT_NE(md.find("![run 2: s whole \\# INJECTED\\](javascript:x) \\[a\\]](a%20%3Cx%3E%7C%5C%20%28b%29/timeline-run-2.svg)"),
            std::string::npos)
      << md;
  EXPECT_TRUE(std::filesystem::exists(dir / "a <x>|\\ (b)" / "timeline-run-2.svg"));
  EXPECT_NE(md.find("\nopen `hookscope view --run 2`\n"), std::string::npos) << md;
}

// md_text keeps identifiers as they are, escapes what GFM reads as markup, and md_unescape gives
// the text back; md_code shows the text verbatim where GFM can, md_shortened cuts between
// characters.
// What reaches a terminal is text: control characters, bidi controls and bytes that are not
// UTF-8 are shown by value; UTF-8 (accents, CJK, emoji) passes as it is. utf8_length_at follows
// RFC 3629 (no overlong form, no surrogate, nothing past U+10FFFF).
TEST(TerminalText, ShowsWhatIsNotPrintableUtf8ByValue) {
  using hs::output::terminal_text;
  using hs::output::utf8_length_at;
  EXPECT_EQ(terminal_text("a\x1b[31mb\x7f"), "a\\x1b[31mb\\x7f");
  EXPECT_EQ(terminal_text("line\nnext\tcol"), "line\nnext\tcol");
  EXPECT_EQ(terminal_text("line\nnext", false), "line\\x0anext");
  EXPECT_EQ(terminal_text("\xc3\xa9t\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"), "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
  EXPECT_EQ(terminal_text("x\xffy"), "x\\xffy");
  EXPECT_EQ(terminal_text("cut \xe2\x82"), "cut \\xe2\\x82");
  EXPECT_EQ(terminal_text("\xe2\x80\xae"), "\\u202e");
  EXPECT_EQ(utf8_length_at("a", 0), 1u);
  EXPECT_EQ(utf8_length_at("\xc3\xa9", 0), 2u);
  EXPECT_EQ(utf8_length_at("\xf0\x9f\x98\x80", 0), 4u);
  for (const char* bad : {"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                          "\xf5\x80\x80\x80", "\x80", "\xe2\x82", "\xf0\x9f\x98"})
    EXPECT_EQ(utf8_length_at(bad, 0), 0u) << bad;
  EXPECT_EQ(utf8_length_at("a", 1), 0u) << "past the end";
  // The reports are UTF-8 text too: md_text writes a byte that is not UTF-8 as U+FFFD.
  EXPECT_EQ(hs::reports::md_text("shar\xfe" "ded \xc3\xa9"), "shar\xef\xbf\xbd" "ded \xc3\xa9");
}

// JSON the commands print holds the same strings with DEL, C1 controls and bidi controls as \u
// escapes (raw, they acted on a terminal `stats --format json` printed to); other UTF-8 and
// invalid bytes as before.
TEST(TerminalText, JsonWritesInvisibleCharactersAsEscapes) {
  const std::string nasty = "a\x7f b\xc2\x9b" "31m c\xe2\x80\xae" "d \xef\xbb\xbf" "e \xc3\xa9 \xe6\x97\xa5";
  const std::string want = R"("a\u007f b\u009b31m c\u202ed \ufeffe )" + std::string("\xc3\xa9 \xe6\x97\xa5") + "\"";
  std::string appended;
  hs::output::append_json_string(appended, nasty);
  EXPECT_EQ(appended, want);
  EXPECT_EQ(hs::output::json_text(nlohmann::json(nasty), -1), want);
  EXPECT_EQ(nlohmann::json::parse(want).get<std::string>(), nasty) << "the same text, read back";
  appended.clear();
  hs::output::append_json_string(appended, "x\xffy");
  EXPECT_EQ(appended, R"("x\ufffdy")");
  EXPECT_EQ(hs::output::json_text(nlohmann::json{{"k", "plain"}}, -1), R"({"k":"plain"})");
}

TEST(MarkdownText, EscapesMarkupKeepsIdentifiersAndRoundTrips) {
  using hs::reports::MdPlace;
  for (const char* id : {"snake_case_name", "whole-hook", "offload-only", "cuda:0", "model.layers.0", "2.5.1+cpu", "-3.2%"})
    EXPECT_EQ(hs::reports::md_text(id), id);
  EXPECT_EQ(hs::reports::md_text("__init__"), "\\_\\_init\\_\\_");
  EXPECT_EQ(hs::reports::md_text("[a](b) <i> *c* ~d~ $e$ #1 &amp; `f`"),
            "\\[a\\](b) \\<i> \\*c\\* \\~d\\~ \\$e\\$ \\#1 \\&amp; \\`f\\`");
  EXPECT_EQ(hs::reports::md_text("- item"), "\\- item");
  EXPECT_EQ(hs::reports::md_text("12. x"), "12\\. x");
  EXPECT_EQ(hs::reports::md_text("> q"), "\\> q");
  EXPECT_EQ(hs::reports::md_text("a\x1b[31mb\xc2\x85" "c\xe2\x80\xa8" "d\ne"), "a \\[31mb c d e");
  for (const char* s : {"a|b", "x\\|y", "C:\\dir\\", "`", "__x__", "- a", "9) b", "\\\\|", "é|ü"})
    EXPECT_EQ(hs::reports::md_unescape(hs::reports::md_text(s)), s) << s;
  EXPECT_EQ(hs::reports::md_code(hs::reports::md_text("a|b"), MdPlace::cell), "`a\\|b`");
  EXPECT_EQ(hs::reports::md_code(hs::reports::md_text("a|b"), MdPlace::line), "`a|b`");
  EXPECT_EQ(hs::reports::md_code(hs::reports::md_text("x\\|y"), MdPlace::cell), hs::reports::md_text("x\\|y"));
  EXPECT_EQ(hs::reports::md_code(hs::reports::md_text("`a`"), MdPlace::line), "`` `a` ``");
  EXPECT_EQ(hs::reports::md_code(hs::reports::md_text(" a "), MdPlace::line), "`  a  `");
  EXPECT_EQ(hs::reports::md_code("", MdPlace::line), "");
  EXPECT_EQ(hs::reports::md_shortened(hs::reports::md_text("a|bcdef"), 5), "a...");
  EXPECT_EQ(hs::reports::md_shortened("\xc3\xa9\xc3\xa9\xc3\xa9", 5), "\xc3\xa9...");
  EXPECT_EQ(hs::reports::md_shortened("abc", 3), "abc");
}

namespace {

// A program of the user's, profiled under both policies (`hookscope profile`): a small model
// dispatched with accelerate's cpu_offload, compiled with Dynamo's eager backend, one warm-up call,
// then `kProfiledCalls` calls between hookscope_torch.start() and stop(); it exits with status 3.
constexpr int kProfiledCalls = 3;
const char* kProgram = R"(import sys, torch
import hookscope_torch
from accelerate import cpu_offload

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(2))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        for b in self.blocks:
            x = torch.relu(b(x))
        return self.head(x)

torch.manual_seed(0)
model = Net().eval()
cpu_offload(model, execution_device=torch.device("cpu"))
compiled = torch.compile(model, backend="eager")
x = torch.randn(2, 16)
with torch.no_grad():
    compiled(x)
    hookscope_torch.start()
    for _ in range(int(sys.argv[1])):
        compiled(x)
    hookscope_torch.stop()
sys.exit(3)
)";

struct ProfiledCapture {
  std::filesystem::path dir, db;
  json report;
  std::string markdown, html;
};

const ProfiledCapture& profiled_capture() {
  static const ProfiledCapture c = [] {
    ProfiledCapture k;
    k.dir = hs::test::scratch_dir("report-profiled");
    k.db = k.dir / "cap.sqlite";
    std::ofstream(k.dir / "prog.py") << kProgram;
    auto r = hs::test::hookscope({"profile", "-o", k.db.string(), "--policies", "whole-hook,offload-only", "--capture-range",
                                  "markers", "--", hs::test::python(), (k.dir / "prog.py").string(),
                                  std::to_string(kProfiledCalls)});
    if (r.exit_code != 3) throw std::runtime_error("profile: exit " + std::to_string(r.exit_code) + "\n" + r.err);
    r = hs::test::hookscope({"report", k.db.string(), "--json", (k.dir / "r.json").string(), "--markdown",
                             (k.dir / "r.md").string(), "--html", (k.dir / "r.html").string()});
    if (r.exit_code != 0) throw std::runtime_error("report failed: " + r.err);
    k.report = hs::test::read_json(k.dir / "r.json");
    k.markdown = hs::test::read_file(k.dir / "r.md");
    k.html = hs::test::read_file(k.dir / "r.html");
    return k;
  }();
  return c;
}

json cli_json(const std::vector<std::string>& args) {
  const auto r = hs::test::hookscope(args);
  if (r.exit_code != 0) throw std::runtime_error(args[0] + " failed: " + r.err);
  return json::parse(r.out);
}

// "| LABEL | A | B |": a verdict row as the Markdown writes it.
std::string verdict_row(const std::string& label, const std::string& a, const std::string& b) {
  return "| " + label + " | " + a + " | " + b + " |";
}

}  // namespace

// A profiled program's report: its own verdict block (no generate to time, so no latency,
// correctness or peak-memory table of a generate), every figure the one explain, stats and the
// export show for the same run.
TEST(Report, AProfiledProgramGetsItsOwnVerdictFromItsRunsFigures) {
  const ProfiledCapture& c = profiled_capture();
  const json& verdicts = c.report["verdicts"];
  ASSERT_EQ(verdicts.size(), 1u) << verdicts.dump();
  const json& v = verdicts[0];
  EXPECT_EQ(v["engine"], "profile");
  EXPECT_EQ(v["scenario"], "prog.py");
  ASSERT_TRUE(v["after"].is_object());
  std::map<std::string, std::string> md_cells;  // verdict row label -> "| label | before | after |"
  for (const char* side : {"before", "after"}) {
    const json& s = v[side];
    SCOPED_TRACE(std::string(side) + " " + s.dump());
    EXPECT_EQ(s["policy"], std::string(side) == "before" ? "whole-hook" : "offload-only");
    const std::string id = std::to_string(s["run"].get<int64_t>());
    // explain: the program, its exit status, the log's figures and the iterations.
    const json e = cli_json({"explain", c.db.string(), "--run", id, "--json"});
    std::string command;
    for (const auto& w : e["command"]) command += (command.empty() ? "" : " ") + w.get<std::string>();
    EXPECT_EQ(s["command"], command);
    EXPECT_EQ(s["exit_status"], 3);
    EXPECT_EQ(e["exit_status"], 3);
    for (const char* k : {"log_graphs", "log_graph_break_count", "log_graph_break_records", "log_compiles", "log_recompiles",
                          "log_frames_skipped", "log_recompile_limit_hits"})
      EXPECT_EQ(s[k], e[k]) << k;
    EXPECT_TRUE(s["log_graph_break_count"].is_number());
    EXPECT_TRUE(e["recompiles"].is_null()) << "a log's count never under Dynamo's name";
    EXPECT_EQ(s["iterations"], kProfiledCalls) << "one per call between the markers";
    EXPECT_EQ(e["iterations"]["count"], s["iterations"]);
    EXPECT_EQ(e["iterations"]["ms"]["median"], s["iteration_ms"]);
    // stats: the hook time and the weight onloads.
    const json st = cli_json({"stats", c.db.string(), "--run", id, "--format", "json"});
    const json& t = st["runs"].at(0)["totals"];
    EXPECT_EQ(s["hook_busy_ns"], t["hook_busy_ns"]);
    EXPECT_EQ(s["hook_calls"], t["hook_calls"]);
    EXPECT_EQ(s["weight_onloads"], t["onloads"]);
    EXPECT_EQ(s["weight_onload_bytes"], t["onload_bytes"]);
    EXPECT_GT(s["weight_onloads"].get<int64_t>(), 0);
    // The export: one ProfilerStep#N per iteration.
    const auto trace = c.dir / ("run-" + id + ".json");
    const auto x = hs::test::hookscope({"export", c.db.string(), "--run", id, "-o", trace.string()});
    ASSERT_EQ(x.exit_code, 0) << x.err;
    int steps = 0;
    const json doc = hs::test::read_json(trace);
    for (const json& ev : doc["traceEvents"])
      steps += ev.value("name", "").rfind("ProfilerStep#", 0) == 0 && ev["cat"] == "user_annotation";
    EXPECT_EQ(steps, s["iterations"]);
  }
  const json &b = v["before"], &a = v["after"];
  auto n = [](const json& j) { return std::to_string(j.get<int64_t>()); };
  auto ms = [](const json& j) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", j.get<double>());
    return std::string(buf);
  };
  const std::vector<std::string> rows = {
      verdict_row("exit status", "3", "3"),
      verdict_row("graphs in the log", n(b["log_graphs"]), n(a["log_graphs"])),
      verdict_row("graphs − 1 in the log", n(b["log_graph_break_count"]), n(a["log_graph_break_count"])),
      verdict_row("graph-break records in the log", n(b["log_graph_break_records"]), n(a["log_graph_break_records"])),
      verdict_row("recompile_reasons in the log", n(b["log_recompiles"]), n(a["log_recompiles"])),
      verdict_row("iteration time, ms (iterations)", ms(b["iteration_ms"]) + " (3)", ms(a["iteration_ms"]) + " (3)")};
  for (const auto& row : rows) {
    EXPECT_NE(c.markdown.find(row), std::string::npos) << row << "\n" << c.markdown;
    // The HTML verdict is the same table.
    std::string tr = "<tr>";
    for (size_t at = 1, next; (next = row.find(" |", at)) != std::string::npos; at = next + 2)
      tr += "<td>" + row.substr(at + 1, next - at - 1) + "</td>";
    EXPECT_NE(c.html.find(tr + "</tr>"), std::string::npos) << tr;
  }
  EXPECT_NE(c.markdown.find("exited with status 3 under `whole-hook` and 3 under `offload-only`"), std::string::npos)
      << c.markdown;
  EXPECT_NE(c.markdown.find("graphs − 1 in the log: " + n(b["log_graph_break_count"]) + " under `whole-hook` → " +
                            n(a["log_graph_break_count"]) + " under `offload-only`"),
            std::string::npos)
      << c.markdown;
  // The generate's tables are left out, not dashed.
  for (const char* gone : {"latency: median", "fullgraph and correctness", "peak resident memory", "prefill argmax"}) {
    EXPECT_EQ(c.markdown.find(gone), std::string::npos) << gone;
    EXPECT_EQ(c.html.find(gone), std::string::npos) << gone;
  }
  EXPECT_NE(c.markdown.find("### the programs' runs"), std::string::npos);
  EXPECT_LT(c.markdown.find("### Verdict"), c.markdown.find("### setup"));
}
