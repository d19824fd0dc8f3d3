// The torch engine end to end: `hookscope capture --engine torch` on tiny checkpoints written
// by transformers, through real accelerate and Dynamo (the eager backend: graph breaks and
// fullgraph outcomes do not depend on the backend, and it compiles in seconds). Its counts must
// be the ones torch._dynamo.explain gives for the same model and map, run separately by an
// oracle; its recordings must land in the capture (CPU ops, hook ranges, Dynamo's compile log).
#include <gtest/gtest.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <fstream>
#include <set>

#include "storage/capture_reader.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using hs::test::hookscope;

const std::string kPrompt = "5,17,99,3,42,7";

struct TorchCapture {
  fs::path dir, db;
  json report;
  std::string markdown;
};

TorchCapture capture(const std::string& model, const std::vector<std::string>& extra) {
  TorchCapture k;
  k.dir = hs::test::scratch_dir("torch-capture-" + model);
  k.db = k.dir / "capture.sqlite";
  std::vector<std::string> args{"capture", "--model", hs::test::tiny_checkpoint(model).string(), "--devices", "2",
                                "--scenarios", "sharded,cpu-offload", "--modes", "eager,default", "--fullgraph", "both",
                                "--backend", "eager", "--prompt-ids", kPrompt, "--max-new-tokens", "3", "--repeats",
                                "1", "--warmup", "0", "--threads", "1", "--out", k.db.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = hookscope(args);
  if (r.exit_code != 0) throw std::runtime_error("capture failed (" + std::to_string(r.exit_code) + "): " + r.err);
  auto rep = hookscope({"report", k.db.string(), "--json", (k.dir / "report.json").string()});
  if (rep.exit_code != 0) throw std::runtime_error("report failed: " + rep.err);
  k.report = hs::test::read_json(k.dir / "report.json");
  k.markdown = rep.out;
  return k;
}

// torch._dynamo.explain and fullgraph=True on the same model and map, in a separate process.
json explain_oracle(const std::string& model, const std::string& scenario, const std::string& policy) {
  const std::string out = hs::test::run_oracle(
      "dynamo_explain.py", {"--model", hs::test::tiny_checkpoint(model).string(), "--scenario", scenario, "--policy",
                            policy, "--prompt-ids", kPrompt, "--offload-dir",
                            (hs::test::scratch_dir("explain-offload-" + model + scenario + policy)).string()});
  return json::parse(out);
}

// One integer from SQL over the capture file (read-only).
int64_t count(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) throw std::runtime_error("open " + db.string());
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    const std::string e = sqlite3_errmsg(h);
    sqlite3_close(h);
    throw std::runtime_error(sql + ": " + e);
  }
  const int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

void check_model(const std::string& model, bool both_engines) {
  const TorchCapture c = capture(model, {"--engine", both_engines ? "both" : "torch"});
  std::map<std::pair<std::string, std::string>, json> oracle;
  for (const std::string sc : {"sharded", "cpu-offload"})
    for (const std::string pol : {"whole-hook", "offload-only"}) oracle[{sc, pol}] = explain_oracle(model, sc, pol);
  int torch_runs = 0;
  for (const auto& r : c.report["runs"]) {
    SCOPED_TRACE(r.dump().substr(0, 600));
    EXPECT_NE(r["status"], "incomplete");
    if (r["engine"] != "torch") {
      EXPECT_TRUE(both_engines);
      EXPECT_EQ(r["engine"], "libtorch");
      EXPECT_TRUE(r["graph_break_count"].is_null()) << "the LibTorch engine never fills Dynamo's count";
      continue;
    }
    ++torch_runs;
    const json& o = oracle.at({r["scenario"], r["policy"]});
    if (r["mode"] == "eager") {
      EXPECT_EQ(r["status"], "ok");
      continue;
    }
    if (r["fullgraph"].get<bool>()) {
      // fullgraph=True: works exactly when Dynamo's own compile works, and says why not.
      EXPECT_EQ(r["status"] == "ok", o["fullgraph_ok"].get<bool>());
      if (!o["fullgraph_ok"].get<bool>()) {
        EXPECT_NE(r["error"].get<std::string>().find(o["fullgraph_error"].get<std::string>().substr(0, 40)),
                  std::string::npos);
      }
    } else {
      EXPECT_EQ(r["status"], "ok");
      EXPECT_EQ(r["graph_break_count"], o["graph_break_count"]);
      EXPECT_EQ(r["graph_count"], o["graph_count"]);
    }
    if (r["scenario"] == "cpu-offload" && r["status"] == "ok") {
      EXPECT_EQ(r["logits_identical"], true);
      EXPECT_EQ(r["params_on_meta_after"], true);
    }
  }
  // 2 scenarios x 2 policies x (eager, default, default fullgraph).
  EXPECT_EQ(torch_runs, 12);
  // The seed's pattern, from Dynamo itself: whole-hook breaks on the dispatched model,
  // offload-only does not.
  EXPECT_GT(oracle.at({"sharded", "whole-hook"})["graph_break_count"].get<int>(), 0);
  EXPECT_EQ(oracle.at({"sharded", "offload-only"})["graph_break_count"], 0);
  EXPECT_TRUE(oracle.at({"sharded", "offload-only"})["fullgraph_ok"].get<bool>());
  EXPECT_FALSE(oracle.at({"cpu-offload", "offload-only"})["fullgraph_ok"].get<bool>());
  // What the driver recorded was imported into the runs: ops and hook ranges from the
  // torch.profiler trace, Dynamo's compiles from the TORCH_TRACE log.
  const std::string torch_runs_sql = "(SELECT id FROM RUNS WHERE engine = 'torch')";
  EXPECT_GT(count(c.db, "SELECT count(*) FROM CPU_OPS WHERE runId IN " + torch_runs_sql), 0);
  EXPECT_GT(count(c.db, "SELECT count(*) FROM HOOK_EVENTS WHERE runId IN (SELECT id FROM RUNS WHERE engine = 'torch' "
                        "AND policy = 'whole-hook')"),
            0);
  EXPECT_GT(count(c.db, "SELECT count(*) FROM WEIGHT_SWAPS WHERE runId IN (SELECT id FROM RUNS WHERE engine = "
                        "'torch' AND scenario = 'cpu-offload')"),
            0);
  EXPECT_GT(count(c.db, "SELECT count(*) FROM DYNAMO_COMPILES WHERE runId IN (SELECT id FROM RUNS WHERE engine = "
                        "'torch' AND mode = 'default')"),
            0);
  // The driver's trace (Kineto's CLOCK_REALTIME) lands on the capture's steady clock: every op
  // and hook range of a torch run lies within the run, as the LibTorch engine's events do.
  for (const std::string table : {"CPU_OPS", "HOOK_EVENTS"})
    EXPECT_EQ(count(c.db, "SELECT count(*) FROM " + table + " e JOIN RUNS r ON e.runId = r.id WHERE r.engine = 'torch' "
                          "AND (e.start < r.start OR e.\"end\" > r.\"end\")"),
              0)
        << table;
  EXPECT_NE(c.markdown.find("what Dynamo did"), std::string::npos);
  if (both_engines) {
    EXPECT_NE(c.markdown.find("engines side by side"), std::string::npos) << c.markdown;
  }
}

TEST(TorchCapture, TinyLlamaCountsAreDynamosOwnAndBothEnginesSitSideBySide) { check_model("tiny-llama", true); }

TEST(TorchCapture, TinyQwen3CountsAreDynamosOwn) { check_model("tiny-qwen3", false); }

}  // namespace

namespace {

// `--accelerate NAME=PATH`: two copies of the installed accelerate, one with the seed's change
// applied to its source, run as two policies of one capture, each in its own process.
TEST(TorchCapture, TwoAccelerateTreesAreTwoPolicies) {
  const fs::path dir = hs::test::scratch_dir("torch-capture-trees");
  const std::string installed = hs::test::run_oracle("print_module_dir.py", {"accelerate"});
  const fs::path src = fs::path(installed.substr(0, installed.find_last_not_of("\n") + 1));
  ASSERT_TRUE(fs::is_regular_file(src / "hooks.py")) << src;
  for (const char* tree : {"main", "pr"}) {
    fs::create_directories(dir / tree / "accelerate");
    fs::copy(src, dir / tree / "accelerate", fs::copy_options::recursive);
  }
  hs::test::run_oracle("print_module_dir.py", {"--source-patch", (dir / "pr").string()});
  const fs::path db = dir / "trees.sqlite";
  auto r = hookscope({"capture", "--engine", "torch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                      "--policies", "whole-hook", "--accelerate", "main=" + (dir / "main").string(), "--accelerate",
                      "pr=" + (dir / "pr").string(), "--scenarios", "sharded", "--modes", "default", "--fullgraph",
                      "on", "--backend", "eager", "--prompt-ids", kPrompt, "--max-new-tokens", "2", "--repeats", "1",
                      "--warmup", "0", "--threads", "1", "--out", db.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rep = hookscope({"report", db.string(), "--json", (dir / "report.json").string()});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  std::map<std::string, json> by_policy;
  const json report = hs::test::read_json(dir / "report.json");
  for (const auto& run : report["runs"]) by_policy[run["policy"].get<std::string>()] = run;
  ASSERT_EQ(by_policy.size(), 3u) << "whole-hook, main, pr";
  // The unpatched tree behaves as accelerate as installed; the patched one as offload-only.
  EXPECT_EQ(by_policy["whole-hook"]["status"], "error");
  EXPECT_EQ(by_policy["main"]["status"], "error");
  EXPECT_EQ(by_policy["pr"]["status"], "ok") << by_policy["pr"].dump();
  for (const char* tree : {"main", "pr"}) {
    const std::string file = by_policy[tree]["versions"].value("accelerate_file", "");
    EXPECT_EQ(file.rfind((dir / tree).string(), 0), 0u) << tree << " imported " << file;
  }
}

// Ctrl+C at a terminal signals the whole foreground process group: hookscope and its Python
// driver at once. The driver must not die of it first and turn the run in progress into a failed
// one: hookscope ends the capture itself (the run in progress incomplete, the ones before it
// kept), removes the driver's working folder and exits 130.
TEST(TorchCapture, CtrlCAtATerminalLeavesTheRunInProgressIncomplete) {
  const fs::path dir = hs::test::scratch_dir("torch-capture-ctrl-c");
  const fs::path db = dir / "int.sqlite";
  const pid_t pid = hs::test::start(
      {hs::test::cli(), "capture", "--engine", "torch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
       "--devices", "2", "--scenarios", "sharded", "--modes", "eager", "--prompt-ids", kPrompt, "--max-new-tokens",
       "16", "--repeats", "200", "--warmup", "0", "--threads", "1", "--out", db.string()},
      dir / "log.txt", true);
  const fs::path partial = db.string() + "." + std::to_string(pid) + ".partial";
  const bool ready = hs::test::wait_while_running(
      pid,
      [&partial] {
        try {
          auto runs = hs::storage::CaptureReader(partial).runs();
          return runs.size() >= 2 && runs[0].status == hs::tracer::RunStatus::Complete;
        } catch (const std::exception&) {
          return false;
        }
      },
      300);
  ::kill(-pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string log = hs::test::read_file(dir / "log.txt");
  ASSERT_TRUE(ready) << log;
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  EXPECT_NE(log.find("wrote " + db.string()), std::string::npos) << log;
  const std::string tag = "driver (pid ", at = ", log ";  // "... driver (pid N, log WORK/POLICY/driver.log, ..."
  const size_t from = log.find(at, log.find(tag));
  ASSERT_NE(from, std::string::npos) << log;
  const fs::path driver_log = log.substr(from + at.size(), log.find_first_of(",)", from + at.size()) - from - at.size());
  EXPECT_EQ(driver_log.filename(), "driver.log") << log;
  EXPECT_FALSE(fs::exists(driver_log.parent_path().parent_path())) << "the drivers' working folder is removed";
  auto runs = hs::storage::CaptureReader(db).runs();
  ASSERT_EQ(runs.size(), 2u) << "whole-hook, offload-only";
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Complete);
  EXPECT_EQ(runs[1].status, hs::tracer::RunStatus::Incomplete) << runs[1].error;
}

// `--dtype` reaches the torch engine: the driver loads the checkpoint through transformers'
// from_pretrained(dtype=...) and each run records the dtype its model's parameters had. The
// prompt is one where the tiny Llama's prefill argmax depends on the dtype (transformers: bf16
// 98, f32 and f16 218, top-two margins above 0.1), so a run in another dtype than asked cannot
// match transformers' own argmax, computed by an oracle that imports no hookscope code.
const std::string kDtypePrompt = "177,26,232,211,247,204";

json prefill_argmax_oracle(const std::string& dtype) {
  const fs::path dir = hs::test::cached_oracle(
      "hf-prefill-argmax-tiny-llama-" + dtype, "hf_prefill_argmax.py",
      {"--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--prompt-ids", kDtypePrompt, "--dtype", dtype});
  return hs::test::read_json(dir / "result.json");
}

// The torch runs of `capture --engine torch --dtype DTYPE` on the tiny Llama, sharded, whole-hook.
std::vector<hs::storage::RunRecord> torch_runs_in(const std::string& dtype, const std::string& modes) {
  const fs::path dir = hs::test::scratch_dir("torch-capture-dtype-" + dtype);
  const fs::path db = dir / "capture.sqlite";
  auto r = hookscope({"capture", "--engine", "torch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                      "--dtype", dtype, "--devices", "2", "--scenarios", "sharded", "--policies", "whole-hook",
                      "--modes", modes, "--fullgraph", "off", "--backend", "eager", "--prompt-ids", kDtypePrompt,
                      "--max-new-tokens", "2", "--repeats", "1", "--warmup", "0", "--threads", "1", "--out",
                      db.string()});
  if (r.exit_code != 0)
    throw std::runtime_error("capture --dtype " + dtype + " failed (" + std::to_string(r.exit_code) + "): " + r.err);
  return hs::storage::CaptureReader(db).runs();
}

TEST(TorchCapture, DtypeIsTheOneTheRunRanAndItsArgmaxTransformersOwn) {
  const json bf16 = prefill_argmax_oracle("bf16"), f32 = prefill_argmax_oracle("f32");
  const json f16 = prefill_argmax_oracle("f16");
  ASSERT_EQ(bf16["dtype"], json("bf16"));
  ASSERT_EQ(f16["dtype"], json("f16"));
  // The prompt tells the dtypes apart, away from a near-tie (else pick another prompt).
  ASSERT_NE(bf16["argmax"], f32["argmax"]) << bf16.dump() << " " << f32.dump();
  ASSERT_NE(f16["argmax"], bf16["argmax"]) << f16.dump() << " " << bf16.dump();
  for (const json* o : {&bf16, &f16}) EXPECT_GT((*o)["margin"].get<double>(), 0.05) << o->dump();

  const auto bf16_runs = torch_runs_in("bf16", "eager,default");
  ASSERT_EQ(bf16_runs.size(), 2u) << "eager, default";
  for (const auto& run : bf16_runs) {
    SCOPED_TRACE(run.mode + ": " + run.results.dump().substr(0, 600));
    EXPECT_EQ(run.status, hs::tracer::RunStatus::Complete) << run.error;
    EXPECT_EQ(run.results.value("status", ""), "ok");
    EXPECT_EQ(run.results["dtype"], json("bf16")) << "the dtype found on the loaded model";
    EXPECT_EQ(run.results["prefill_argmax"], bf16["argmax"]) << "transformers' own bf16 argmax";
    // The reference the driver compares with is transformers' undispatched model in bf16 too.
    EXPECT_EQ(run.results["argmax_match"], true);
  }
  const auto f16_runs = torch_runs_in("f16", "eager");
  ASSERT_EQ(f16_runs.size(), 1u);
  EXPECT_EQ(f16_runs[0].results["dtype"], json("f16")) << f16_runs[0].results.dump().substr(0, 600);
  EXPECT_EQ(f16_runs[0].results["prefill_argmax"], f16["argmax"]);
  EXPECT_EQ(f16_runs[0].results["argmax_match"], true);
}

// A --python that is no Python, or one without the stack, fails each run with what to change,
// not with an empty log tail or a traceback.
TEST(TorchCapture, APythonWithoutTheStackIsNamedWithWhatItLacks) {
  const fs::path dir = hs::test::scratch_dir("torch-capture-no-stack");
  const fs::path bare = dir / "python-without-site";  // the real interpreter, its site-packages unseen
  std::ofstream(bare) << "#!/bin/sh\nexec " << hs::test::python() << " -S \"$@\"\n";
  fs::permissions(bare, fs::perms::owner_all);
  for (const auto& [python, expected] :
       std::vector<std::pair<std::string, std::string>>{{"/bin/false", "before printing anything: is /bin/false a Python?"},
                                                        {bare.string(), bare.string() + " cannot import 'torch'"}}) {
    SCOPED_TRACE(python);
    const fs::path db = dir / (fs::path(python).filename().string() + ".sqlite");
    auto r = hookscope({"capture", "--engine", "torch", "--python", python, "--model",
                        hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "2", "--scenarios", "sharded",
                        "--policies", "whole-hook", "--modes", "eager", "--prompt-ids", kPrompt, "--max-new-tokens", "1",
                        "--repeats", "1", "--warmup", "0", "--out", db.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("removed with the capture's other temporary files"), std::string::npos) << r.err;
    auto runs = hs::storage::CaptureReader(db).runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Failed);
    EXPECT_NE(runs[0].error.find(expected), std::string::npos) << runs[0].error;
    EXPECT_NE(runs[0].error.find("--python"), std::string::npos) << runs[0].error;
    EXPECT_EQ(runs[0].error.find("Traceback"), std::string::npos) << runs[0].error;
  }
}

}  // namespace

namespace {

// Any causal LM (#37): tiny GPT-2, Mistral, Phi-3 and Gemma checkpoints, written by transformers
// from their own config classes with a byte-level BPE tokenizer (tests/oracles/tiny_causal_lm.py),
// captured by the torch engine: sharded, both policies, eager and compiled (Dynamo's eager backend),
// 3 tokens. Their tokens must be transformers' own greedy ones for the ids the tokenizer gives.

constexpr int64_t kCausalLMTokens = 3;

struct TinyCausalLM {
  fs::path model;
  json info;  ///< the oracle's {"architecture", "prompt_ids" (its tokenizer's "The capital of France is"), ...}
};

TinyCausalLM tiny_causal_lm(const std::string& arch) {
  const fs::path dir = hs::test::cached_oracle("tiny-causal-lm-" + arch, "tiny_causal_lm.py", {"--arch", arch});
  return {dir / ("tiny-" + arch), hs::test::read_json(dir / "result.json")};
}

std::string joined(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

struct CausalLMCapture {
  fs::path db;
  std::string err;  ///< the capture's stderr
  std::vector<hs::storage::RunRecord> runs;
};

// `capture` of `lm`, sharded, both policies, eager and default, with `extra` flags (--engine, the prompt).
CausalLMCapture capture_causal_lm(const TinyCausalLM& lm, const std::vector<std::string>& extra) {
  CausalLMCapture c;
  c.db = hs::test::scratch_dir("torch-capture-" + lm.model.filename().string()) / "capture.sqlite";
  std::vector<std::string> args{"capture", "--model", lm.model.string(), "--devices", "2", "--scenarios", "sharded",
                                "--modes", "eager,default", "--backend", "eager", "--max-new-tokens",
                                std::to_string(kCausalLMTokens), "--repeats", "1", "--warmup", "0", "--threads", "1",
                                "--out", c.db.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = hookscope(args);
  if (r.exit_code != 0) throw std::runtime_error("capture failed (" + std::to_string(r.exit_code) + "): " + r.err);
  c.err = r.err;
  c.runs = hs::storage::CaptureReader(c.db).runs();
  return c;
}

int64_t rows_of(const fs::path& db, const std::string& table, int64_t run) {
  return count(db, "SELECT count(*) FROM " + table + " WHERE runId = " + std::to_string(run));
}

// Every run recorded what the driver saw: transformers' tokens, one generation step per token,
// hook ranges in eager runs, Dynamo's compiles in compiled ones, and the policies' pattern in
// Dynamo's own count (whole-hook breaks at the hooks, offload-only traces them). Fullgraph runs
// are the caller's.
void check_causal_lm_runs(const TinyCausalLM& lm, const CausalLMCapture& c) {
  const auto want = hs::test::transformers_greedy(lm.model, lm.info["prompt_ids"].get<std::vector<int64_t>>(),
                                                  kCausalLMTokens);
  ASSERT_FALSE(c.runs.empty());
  for (const auto& run : c.runs) {
    SCOPED_TRACE(run.policy + " " + run.mode + (run.fullgraph ? " fullgraph: " : ": ") +
                 run.results.dump().substr(0, 600));
    EXPECT_EQ(run.engine, "torch");
    EXPECT_EQ(run.status, hs::tracer::RunStatus::Complete) << run.error;
    EXPECT_EQ(run.results["model"]["architecture"], lm.info["architecture"]);
    if (run.fullgraph) continue;
    EXPECT_EQ(run.results.value("status", ""), "ok");
    EXPECT_EQ(run.results["tokens"], json(want)) << "transformers' greedy tokens for the tokenizer's ids";
    EXPECT_EQ(run.results["argmax_match"], true);
    EXPECT_EQ(rows_of(c.db, "GENERATION_STEPS", run.id), kCausalLMTokens);
    if (run.mode == "eager") {
      EXPECT_GT(rows_of(c.db, "HOOK_EVENTS", run.id), 0);
      continue;
    }
    EXPECT_GT(rows_of(c.db, "DYNAMO_COMPILES", run.id), 0);
    if (run.policy == "whole-hook") {
      EXPECT_GT(run.results["graph_break_count"].get<int64_t>(), 0);
      EXPECT_GT(rows_of(c.db, "DYNAMO_GRAPH_BREAKS", run.id), 0);
    } else {
      EXPECT_EQ(run.results["graph_break_count"], 0);
    }
  }
}

// GPT-2 (transformer.h, Conv1D, learned positions, tied lm_head), from --prompt-ids: Dynamo's
// counts and fullgraph outcomes are torch._dynamo.explain's on the same map, run by the oracle.
TEST(TorchCapture, Gpt2CountsAreDynamosOwn) {
  const TinyCausalLM lm = tiny_causal_lm("gpt2");
  const std::string ids = joined(lm.info["prompt_ids"].get<std::vector<int64_t>>());
  const CausalLMCapture c = capture_causal_lm(lm, {"--engine", "torch", "--fullgraph", "both", "--prompt-ids", ids});
  ASSERT_EQ(c.runs.size(), 6u) << "2 policies x (eager, default, default fullgraph)";
  check_causal_lm_runs(lm, c);
  std::map<std::string, json> oracle;
  for (const std::string policy : {"whole-hook", "offload-only"})
    oracle[policy] = json::parse(hs::test::run_oracle(
        "dynamo_explain.py", {"--model", lm.model.string(), "--scenario", "sharded", "--policy", policy,
                              "--prompt-ids", ids}));
  for (const auto& run : c.runs) {
    if (run.mode == "eager") continue;
    SCOPED_TRACE(run.policy + (run.fullgraph ? " fullgraph: " : ": ") + run.results.dump().substr(0, 600));
    const json& o = oracle.at(run.policy);
    if (!run.fullgraph) {
      EXPECT_EQ(run.results["graph_break_count"], o["graph_break_count"]);
      EXPECT_EQ(run.results["graph_count"], o["graph_count"]);
      continue;
    }
    EXPECT_EQ(run.results.value("status", "") == "ok", o["fullgraph_ok"].get<bool>());
    if (!o["fullgraph_ok"].get<bool>()) {
      EXPECT_NE(run.results.value("error", "").find(o["fullgraph_error"].get<std::string>().substr(0, 40)),
                std::string::npos);
    }
  }
  EXPECT_GT(oracle.at("whole-hook")["graph_break_count"].get<int>(), 0);
  EXPECT_EQ(oracle.at("offload-only")["graph_break_count"], 0);
}

// Mistral, from the text prompt its tokenizer encodes, with no --engine: the LibTorch engine does
// not port it, so the capture runs the torch engine alone and says so.
TEST(TorchCapture, MistralRunsInTheTorchEngineAloneByDefault) {
  const TinyCausalLM lm = tiny_causal_lm("mistral");
  const CausalLMCapture c = capture_causal_lm(lm, {"--fullgraph", "off", "--prompt", "The capital of France is"});
  EXPECT_NE(c.err.find("MistralForCausalLM is not ported to the libtorch engine: running the torch engine only"),
            std::string::npos)
      << c.err;
  EXPECT_EQ(c.runs.size(), 4u) << "2 policies x (eager, default), torch engine only";
  check_causal_lm_runs(lm, c);
}

TEST(TorchCapture, Phi3RunsInTheTorchEngine) {
  const TinyCausalLM lm = tiny_causal_lm("phi3");
  const CausalLMCapture c = capture_causal_lm(lm, {"--engine", "torch", "--fullgraph", "off"});  // the default prompt
  EXPECT_EQ(c.runs.size(), 4u);
  check_causal_lm_runs(lm, c);
}

TEST(TorchCapture, GemmaRunsInTheTorchEngine) {
  const TinyCausalLM lm = tiny_causal_lm("gemma");
  const CausalLMCapture c = capture_causal_lm(lm, {"--engine", "torch", "--fullgraph", "off"});
  EXPECT_EQ(c.runs.size(), 4u);
  check_causal_lm_runs(lm, c);
}

// The LibTorch engine ports Llama, Qwen2 and Qwen3: asked for another architecture (--engine
// libtorch or both) the capture is refused before anything is written, naming the architecture
// and the engine that runs it. --prompt-ids are still checked against its vocab_size.
TEST(TorchCapture, TheLibTorchEngineRefusesGpt2PointingAtTheTorchEngine) {
  const TinyCausalLM lm = tiny_causal_lm("gpt2");
  const fs::path dir = hs::test::scratch_dir("libtorch-refuses-gpt2");
  const std::vector<std::string> base{"capture", "--model", lm.model.string(), "--devices", "2", "--scenarios",
                                      "sharded", "--modes", "eager", "--max-new-tokens", "1", "--repeats", "1",
                                      "--warmup", "0", "--out", (dir / "x.sqlite").string()};
  auto with = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return hookscope(args);
  };
  for (const std::string engine : {"libtorch", "both"}) {
    SCOPED_TRACE(engine);
    const auto r = with({"--engine", engine});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("--engine " + engine + ": " + (lm.model / "config.json").string() +
                         " names GPT2LMHeadModel, which the LibTorch engine does not port"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("capture it with --engine torch"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::is_empty(dir)) << "no capture, partial file or lock left";
  }
  const auto r = with({"--engine", "torch", "--prompt-ids", "5,320"});  // vocab_size 320
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--prompt-ids: prompt token id 320"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir));
  const auto g = hookscope({"generate", "--model", lm.model.string(), "--prompt", "hi"});
  EXPECT_EQ(g.exit_code, 1) << g.err;
  EXPECT_NE(g.err.find("unknown architecture 'GPT2LMHeadModel'"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("--engine torch"), std::string::npos) << g.err;
}

}  // namespace
