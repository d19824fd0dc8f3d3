// `hookscope explain` on a capture of a tiny transformers-written Llama through both engines:
// the listing of runs, and one run's breaks as torch._dynamo.explain counts them. For a torch
// run the counts are the torch engine's own torch._dynamo.explain of one forward (RUNS.results),
// never the compile log's totals over the whole generate (which also count recompiles for new
// shapes); a LibTorch run's identical reasons are grouped and their counts add up.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using hs::test::hookscope;

struct Capture {
  fs::path db;
  std::vector<hs::storage::RunRecord> runs;
};

// sharded × whole-hook, offload-only × default through one engine (the torch engine with
// Dynamo's eager backend: graph breaks do not depend on the backend).
Capture make_capture(const std::string& engine) {
  Capture k;
  k.db = hs::test::scratch_dir("explain-cli-" + engine) / "capture.sqlite";
  auto r = hookscope({"capture", "--engine", engine, "--backend", "eager", "--model",
                      hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "2", "--scenarios", "sharded",
                      "--policies", "whole-hook,offload-only", "--modes", "default", "--fullgraph", "off",
                      "--prompt-ids", "5,17,99,3", "--max-new-tokens", "3", "--repeats", "1", "--warmup", "0",
                      "--threads", "1", "-o", k.db.string()});
  if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
  k.runs = hs::storage::CaptureReader(k.db).runs();
  return k;
}

const Capture& libtorch_capture() {
  static const Capture c = make_capture("libtorch");
  return c;
}
const Capture& torch_capture() {
  static const Capture c = make_capture("torch");
  return c;
}

const hs::storage::RunRecord& run_of(const Capture& c, const std::string& policy) {
  for (const auto& r : c.runs)
    if (r.policy == policy) return r;
  throw std::runtime_error("no " + policy + " run");
}

json explain_json(const Capture& c, int64_t run) {
  auto r = hookscope({"explain", c.db.string(), "--run", std::to_string(run), "--json"});
  if (r.exit_code != 0) throw std::runtime_error("explain failed: " + r.err);
  return json::parse(r.out);
}

TEST(ExplainCli, ListsEveryRunAndGroupsALibTorchRunsIdenticalReasons) {
  const Capture& c = libtorch_capture();
  auto r = hookscope({"explain", c.db.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& run : c.runs)
    EXPECT_NE(r.out.find("  " + std::to_string(run.id) + "  libtorch sharded " + run.policy + " default  [complete]"),
              std::string::npos)
        << r.out;
  r = hookscope({"explain", c.db.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json list = json::parse(r.out);
  ASSERT_EQ(list.size(), c.runs.size());
  for (size_t i = 0; i < list.size(); ++i) EXPECT_EQ(list[i]["run"], c.runs[i].id);

  const auto& rec = run_of(c, "whole-hook");
  const json d = explain_json(c, rec.id);
  ASSERT_EQ(d["source"], "libtorch");
  int64_t grouped = 0;
  for (const auto& b : d["break_reasons"]) {
    grouped += b["count"].get<int64_t>();
    EXPECT_EQ(b["modules"].size(), b["count"].get<size_t>());
  }
  EXPECT_EQ(grouped, rec.results["break_reasons"].size());
  EXPECT_LT(d["break_reasons"].size(), rec.results["break_reasons"].size()) << "identical reasons grouped";
  EXPECT_EQ(d["disabled_scope_entries"], rec.results["disabled_scope_entries"]);
  const auto text = hookscope({"explain", c.db.string(), "--run", std::to_string(rec.id)});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Captured Regions: " + std::to_string(rec.results["captured_regions"].get<int64_t>())),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("Function: AlignDevicesHook.pre_forward"), std::string::npos) << text.out;

  for (const std::string bad : {"999", "-1", "0"}) {  // never the listing in disguise
    r = hookscope({"explain", c.db.string(), "--run", bad});
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_NE(r.err.find(c.db.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no run " + bad), std::string::npos) << r.err;
  }
  r = hookscope({"explain", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("hookscope explain out/demo.sqlite --run 2 --json"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hookscope generate"), std::string::npos) << "explain's own examples, not the top level's";
}

// A run imported from its `hookscope export` trace comes back with its engine and its one
// forward's reasons (the trace's hookscope.facts); a trace without them (written by an older
// hookscope, or edited) gives the recorded disabled-scope entries over the whole run instead,
// labelled so, their counts adding up to the original run's.
TEST(ExplainCli, AnImportedExportGivesTheRunsReasonsOrTheRecordedOnes) {
  const Capture& c = libtorch_capture();
  const auto& rec = run_of(c, "whole-hook");
  const fs::path dir = c.db.parent_path();
  auto r = hookscope({"export", c.db.string(), "--run", std::to_string(rec.id), "--format", "chrome", "-o",
                      (dir / "whole-hook.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t original = hs::storage::CaptureReader(c.db).graph_breaks(rec.id).size();
  ASSERT_GT(original, 0u);
  const json first = explain_json(c, rec.id);
  json trace = hs::test::read_json(dir / "whole-hook.json");
  trace["hookscope"].erase("facts");
  std::ofstream(dir / "no-facts.json") << trace.dump();
  for (const char* name : {"whole-hook", "no-facts"}) {
    SCOPED_TRACE(name);
    const fs::path back = dir / (std::string(name) + ".sqlite");
    fs::remove(back);
    r = hookscope({"import", (dir / (std::string(name) + ".json")).string(), "-o", back.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = hookscope({"explain", back.string(), "--run", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json d = json::parse(r.out);
    EXPECT_EQ(d["recorded_disabled_scope_entries"], original);
    const bool facts = std::string(name) == "whole-hook";
    EXPECT_EQ(d["engine"], facts ? "libtorch" : "import");
    if (facts) {
      EXPECT_EQ(d["break_reasons"], first["break_reasons"]) << "the one forward's reasons, as in the capture";
      EXPECT_EQ(d["disabled_scope_entries"], first["disabled_scope_entries"]);
      continue;
    }
    EXPECT_EQ(d["break_reasons_from"], "recorded");
    int64_t grouped = 0;
    for (const auto& b : d["break_reasons"]) grouped += b["count"].get<int64_t>();
    EXPECT_EQ(grouped, static_cast<int64_t>(original));
    const auto text = hookscope({"explain", back.string(), "--run", "1"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("Break Reasons (the run's recorded disabled-scope entries over the whole run"),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("Function: AlignDevicesHook.pre_forward"), std::string::npos) << text.out;
  }
}

TEST(ExplainCli, TorchRunsCountOneForwardLikeDynamoExplain) {
  for (const std::string policy : {"whole-hook", "offload-only"}) {
    SCOPED_TRACE(policy);
    const auto& rec = run_of(torch_capture(), policy);
    const json d = explain_json(torch_capture(), rec.id);
    ASSERT_EQ(d["source"], "dynamo");
    EXPECT_EQ(d["counts_from"], "torch._dynamo.explain");
    // The driver's torch._dynamo.explain of one forward, as the run recorded it.
    EXPECT_EQ(d["graph_count"], rec.results["graph_count"]);
    EXPECT_EQ(d["graph_break_count"], rec.results["graph_break_count"]);
    // The compiled run's counts are Dynamo's compilation metrics, as report shows them.
    for (const char* k : {"frames_skipped", "recompiles", "recompile_limit_hits"}) EXPECT_EQ(d[k], rec.results[k]) << k;
    // The log covers every forward of the profiled generate: at least one forward's graphs.
    EXPECT_GE(d["log_graphs"].get<int64_t>(), d["graph_count"].get<int64_t>());
    int64_t grouped = 0;
    for (const auto& b : d["log_break_reasons"]) grouped += b["count"].get<int64_t>();
    EXPECT_EQ(grouped, d["log_graph_break_records"].get<int64_t>()) << "every record of the log is in a group";
    // explain's reasons are those of the one forward the run recorded, as report shows them.
    EXPECT_EQ(d["break_reasons"], rec.results["break_reasons"]);
    const auto text = hookscope({"explain", torch_capture().db.string(), "--run", std::to_string(rec.id)});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("Graph Break Count: " + std::to_string(d["graph_break_count"].get<int64_t>()) +
                            "  (torch._dynamo.explain of one forward)"),
              std::string::npos)
        << text.out;
  }
  // Offload-only on a sharded model needs no disable: one graph, whatever the decode steps
  // recompile (their graphs are in the log's totals, not in the break count).
  const json o = explain_json(torch_capture(), run_of(torch_capture(), "offload-only").id);
  EXPECT_EQ(o["graph_count"], 1);
  EXPECT_EQ(o["graph_break_count"], 0);
  EXPECT_TRUE(o["break_reasons"].empty()) << o["break_reasons"].dump();
  EXPECT_GT(explain_json(torch_capture(), run_of(torch_capture(), "whole-hook").id)["graph_break_count"].get<int64_t>(), 0);
}

// What recording cost a torch engine run's timeline (facts/recording.h) under the catalogue's
// label: its profiled generate (130 ms) over the median of its unrecorded ones (90, 200, 100 ms:
// 100, where their mean would read 1.00× and the inverse 0.77×), with both times; report.json's
// number in --json. A LibTorch run says nothing of it, a torch run without measured generates
// "not measured".
TEST(ExplainCli, ATorchRunSaysWhatRecordingCostItsTimeline) {
  const fs::path db = hs::test::scratch_dir("explain-recording-overhead") / "capture.sqlite";
  std::vector<int64_t> ids;
  {
    hs::storage::Store store(db);
    hs::storage::add_synthetic_devices(store, 2);
    hs::storage::SyntheticRun s;
    s.devices = 2;
    s.layers = 2;
    s.tokens = 2;
    for (int i = 0; i < 3; ++i) ids.push_back(hs::storage::write_synthetic_run(store, s).run_id);
    hs::storage::set_torch_generate_times(store, ids[0], 130.0, {90.0, 200.0, 100.0});
    store.set_run_engine(ids[1], "libtorch");
    store.set_run_engine(ids[2], "torch");
    store.finalize();
    store.close();
  }
  const auto explain = [&](int64_t run, bool as_json) {
    std::vector<std::string> args{"explain", db.string(), "--run", std::to_string(run)};
    if (as_json) args.push_back("--json");
    auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_DOUBLE_EQ(json::parse(explain(ids[0], true))["recording_overhead"].get<double>(), 1.3);
  std::string text = explain(ids[0], false);
  EXPECT_NE(text.find("\nTimeline's generate vs unrecorded: 1.30×  (130.00 ms recorded ÷ 100.00 ms, the median of 3 "
                      "unrecorded generates; "),
            std::string::npos)
      << text;
  EXPECT_TRUE(json::parse(explain(ids[1], true))["recording_overhead"].is_null());
  text = explain(ids[1], false);
  EXPECT_EQ(text.find("generate vs unrecorded"), std::string::npos) << text;
  EXPECT_TRUE(json::parse(explain(ids[2], true))["recording_overhead"].is_null());
  text = explain(ids[2], false);
  EXPECT_NE(text.find("\nTimeline's generate vs unrecorded: not measured"), std::string::npos) << text;
}

}  // namespace
