// The torch engine's C++ side: the child-process channel and the mapping of the driver's
// replies (docs/torch-engine.md) to run results. The end-to-end runs through real
// transformers/accelerate/Dynamo are in torch_capture_test.cpp.
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "engines/child_process.h"
#include "engines/torch_engine.h"
#include "test_util.h"

namespace hs::engines {
namespace {

using nlohmann::json;

TEST(ChildProcess, RepliesArriveOnTheirOwnPipeWhileStdoutGoesToTheLog) {
  const auto dir = test::scratch_dir("child_process_reply");
  ChildProcess p({"/bin/sh", "-c", "echo noise; while read l; do echo \"got $l\" >&3; done"}, {}, dir / "log.txt");
  p.send_line("one");
  EXPECT_EQ(p.read_line(), "got one");
  p.send_line("two");
  EXPECT_EQ(p.read_line(), "got two");
  EXPECT_NE(test::read_file(dir / "log.txt").find("noise"), std::string::npos);
}

TEST(ChildProcess, ADeadChildEndsTheChannelAndSaysHow) {
  const auto dir = test::scratch_dir("child_process_dead");
  ChildProcess p({"/bin/sh", "-c", "echo 'Traceback: boom' >&2; exit 3"}, {{"HS_X", "1"}}, dir / "log.txt");
  EXPECT_EQ(p.read_line(), std::nullopt);
  EXPECT_EQ(p.wait(), 3);
  EXPECT_EQ(p.exit_description(), "exit status 3");
  EXPECT_NE(p.log_tail().find("Traceback: boom"), std::string::npos);
}

// A child that closed its reply pipe and lives on (its own child too) is killed after the grace,
// and reaped; one that exits within it says how it ended.
TEST(ChildProcess, AChildThatHangsUpIsEndedAfterAGrace) {
  const auto dir = test::scratch_dir("child_process_hang_up");
  ChildProcess p({"/bin/sh", "-c", "echo bye >&3; exec 3>&-; sleep 600 & echo $! >'" + (dir / "pid").string() +
                                       "'; wait"},
                 {}, dir / "log.txt");
  EXPECT_EQ(p.read_line(), "bye");
  EXPECT_EQ(p.read_line(), std::nullopt);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.end_within(std::chrono::milliseconds(300)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(p.exit_description(), "killed by signal 9");
  EXPECT_EQ(p.wait(), 128 + 9);
  EXPECT_EQ(test::process_still_running(dir / "pid"), "") << "its child lives on";

  // Closing its stdin is its signal to finish: a child reading it exits within the grace.
  ChildProcess q({"/bin/sh", "-c", "exec 3>&-; cat >/dev/null; exit 4"}, {}, dir / "log2.txt");
  EXPECT_EQ(q.read_line(), std::nullopt);
  EXPECT_TRUE(q.end_within(std::chrono::seconds(10)));
  EXPECT_EQ(q.exit_description(), "exit status 4");
}

TEST(ChildProcess, EnvironmentIsAddedToTheParents) {
  const auto dir = test::scratch_dir("child_process_env");
  ChildProcess p({"/bin/sh", "-c", "echo \"$HS_TEST_VALUE:${PATH:+path}\" >&3"}, {{"HS_TEST_VALUE", "x y"}}, dir / "log.txt");
  EXPECT_EQ(p.read_line(), "x y:path");
}

TEST(ChildProcess, AMissingProgramIsAClearError) {
  const auto dir = test::scratch_dir("child_process_missing");
  try {
    ChildProcess p({"/nonexistent/python3", "-m", "x"}, {}, dir / "log.txt");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/python3"), std::string::npos) << e.what();
  }
}

TEST(TorchEngineReply, OkRunKeepsDynamosCountsAndLatency) {
  const json reply = json::parse(R"({"type": "result", "id": "c1", "status": "ok",
    "graph_count": 12, "graph_break_count": 11, "recompiles": 3, "recompile_limit_hits": 1, "frames_skipped": 2,
    "break_reasons": [{"reason": "Skip calling torch.compiler.disable()d function", "gb_code": "GB0098", "count": 7}],
    "argmax_match": true, "logits_identical": true, "logits_max_abs_diff": 0.0, "params_on_meta_after": true,
    "weight_devices": ["cpu"], "new_tokens": 5,
    "latency": {"prefill_ms": [10.0, 12.0, 11.0], "decode_ms_per_token": [2.0, 3.0, 4.0]},
    "cache_implementation": "static", "scenario_note": "every block on cpu"})");
  const RunResult r = TorchEngine::result_of(reply);
  EXPECT_EQ(r.outcome, RunResult::Outcome::Ok);
  EXPECT_EQ(r.graph_break_count, 11);
  EXPECT_EQ(r.graph_count, 12);
  EXPECT_FALSE(r.disabled_scope_entries.has_value()) << "a Dynamo run has no LibTorch measure";
  EXPECT_EQ(r.recompiles, 3);
  EXPECT_EQ(r.latency.decode_ms_per_token, (std::vector<double>{2.0, 3.0, 4.0}));
  EXPECT_EQ(r.latency.prefill_ms, (std::vector<double>{10.0, 12.0, 11.0}));
  EXPECT_TRUE(r.eager_latency.empty()) << "an eager cell has no interleaved baseline";
  const json doc = r.to_json(Cell{});
  EXPECT_EQ(doc["break_reasons"][0]["gb_code"], "GB0098") << "Dynamo's reasons replace the generic list";
  EXPECT_EQ(doc["prefill_ms"]["median"], 11.0);
  EXPECT_EQ(doc["decode_ms_per_token"]["max"], 4.0);
  EXPECT_EQ(doc["decode_ms_per_token"]["q1"], 2.5);
  EXPECT_EQ(doc["tokens_per_s"]["median"], 1000.0 / 3.0);
  EXPECT_EQ(doc["samples"]["prefill_ms"], json({10.0, 12.0, 11.0}));
  EXPECT_EQ(doc["cache_implementation"], "static");
  EXPECT_EQ(doc["frames_skipped"], 2);
  EXPECT_EQ(doc["logits_identical"], true);
}

TEST(TorchEngineReply, UnsupportedAndFailedRunsKeepDynamosMessage) {
  RunResult u = TorchEngine::result_of(json{{"status", "unsupported"}, {"error", "Skip calling `torch.compiler.disable()`d function"}});
  EXPECT_EQ(u.outcome, RunResult::Outcome::Unsupported);
  EXPECT_NE(u.error.find("torch.compiler.disable"), std::string::npos);
  RunResult f = TorchEngine::result_of(json{{"status", "failed"}});
  EXPECT_EQ(f.outcome, RunResult::Outcome::Failed);
  EXPECT_FALSE(f.error.empty());
  RunResult unknown = TorchEngine::result_of(json{{"status", "ok"}, {"logits_identical", false}});
  EXPECT_FALSE(unknown.logits.has_value()) << "no ulp figure given: none invented";
  const json doc = unknown.to_json(Cell{});
  EXPECT_EQ(doc["logits_identical"], false);
  EXPECT_TRUE(doc["logits_max_ulp"].is_null());
}

TEST(TorchEngineReply, TheDtypeTheDriverFoundIsTheRunResultsDtype) {
  const RunResult r = TorchEngine::result_of(
      json{{"status", "ok"}, {"dtype", "bf16"}, {"prefill_argmax", 98}, {"argmax_match", true}});
  EXPECT_EQ(r.dtype, "bf16");
  const json doc = r.to_json(Cell{});
  EXPECT_EQ(doc["dtype"], "bf16") << "the LibTorch engine's spelling (models::dtype_short_name)";
  EXPECT_EQ(doc["prefill_argmax"], 98);
  EXPECT_EQ(doc["argmax_match"], true);
  // A scenario that could not be loaded has no dtype: null, not the one asked for.
  const json failed = TorchEngine::result_of(json{{"status", "failed"}, {"error", "sharded: dispatch failed"},
                                                  {"dtype", nullptr}})
                          .to_json(Cell{});
  EXPECT_TRUE(failed.contains("dtype"));
  EXPECT_TRUE(failed["dtype"].is_null());
}

}  // namespace
}  // namespace hs::engines
