// `hookscope capture` + `report` end to end on a tiny transformers-written Llama: the
// results the comparison must show, cross-checked against SQL over the capture file, and a
// capture killed part-way.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <sqlite3.h>

#include "storage/capture_reader.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using hs::test::hookscope;

struct Capture {
  fs::path dir, db;
  json report;
  std::string markdown;
};

// One capture of the full matrix, shared by the tests of this process.
const Capture& capture() {
  static Capture c = [] {
    Capture k;
    // ctest runs each case in its own process, in parallel: one folder per process.
    k.dir = hs::test::scratch_dir("capture-tiny-llama-" + std::to_string(getpid()));
    k.db = k.dir / "capture.sqlite";
    auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "4",
                        "--prompt-ids", "5,17,99,3,42,7", "--max-new-tokens", "4", "--repeats", "2", "--warmup", "1", "--out", k.db.string()});
    if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    auto rep = hookscope({"report", k.db.string(), "--json", (k.dir / "report.json").string(), "--markdown",
                          (k.dir / "report.md").string()});
    if (rep.exit_code != 0) throw std::runtime_error("report failed: " + rep.err);
    k.report = hs::test::read_json(k.dir / "report.json");
    k.markdown = rep.out;
    return k;
  }();
  return c;
}

std::vector<json> runs_where(const std::string& scenario, const std::string& policy, int fullgraph = -1) {
  std::vector<json> out;
  for (const auto& r : capture().report["runs"])
    if (r["scenario"] == scenario && r["policy"] == policy &&
        (fullgraph < 0 || r["fullgraph"].get<bool>() == static_cast<bool>(fullgraph)))
      out.push_back(r);
  return out;
}

// Whether `r` is a fullgraph run that raised (a result: Dynamo's fullgraph refusal); every
// other run must have succeeded, and a test that meets one that did not fails naming it.
bool fullgraph_refusal(const json& r) { return r["fullgraph"].get<bool>() && r["status"] == "error"; }

::testing::AssertionResult succeeded(const json& r) {
  if (r["status"] == "ok") return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "run " << r["id"] << " (" << r["scenario"].get<std::string>() << " "
                                       << r["policy"].get<std::string>() << " " << r["mode"].get<std::string>()
                                       << (r["fullgraph"].get<bool>() ? " fullgraph" : "") << ") is "
                                       << r["status"] << ": " << r["error"];
}

TEST(Capture, MatrixIsCompleteAndSchemaShaped) {
  const json& rep = capture().report;
  EXPECT_EQ(rep["schema"], 2);
  // The settings the capture ran with are in the file, and in the report.
  const json& set = rep["settings"];
  EXPECT_NE(set["command"].get<std::string>().find("capture --engine libtorch --model"), std::string::npos) << set;
  EXPECT_EQ(set["prompt_ids"], json({5, 17, 99, 3, 42, 7}));
  EXPECT_EQ(set["max_new_tokens"], 4);
  EXPECT_EQ(set["repeats"], 2);
  EXPECT_EQ(set["warmup"], 1);
  EXPECT_EQ(set["versions"]["hookscope"], "0.1.0");
  EXPECT_FALSE(set["date"].get<std::string>().empty());
  EXPECT_TRUE(set["machine"].contains("cpu"));
  EXPECT_EQ(rep["model"]["id"], "tiny-llama") << "a folder is named by its name, not its path";
  for (const char* k : {"prompt ids: `[5,17,99,3,42,7]`", "1 warm-up(s) and 2 measured generate(s) per run", "- command: `",
                        "- machine: ", "versions: "})
    EXPECT_NE(capture().markdown.find(k), std::string::npos) << k << "\n" << capture().markdown;
  for (const char* k : {"id", "path", "dtype", "params", "bytes"}) EXPECT_TRUE(rep["model"].contains(k)) << k;
  EXPECT_EQ(rep["devices"].size(), 5u);  // 4 emulated accelerators + cpu
  EXPECT_EQ(rep["devices"][0]["kind"], "emulated");
  // 4 scenarios x 2 policies x (eager + 2 modes x fullgraph both) = 40 runs.
  EXPECT_EQ(rep["runs"].size(), 40u);
  for (const auto& r : rep["runs"]) {
    for (const char* k : {"scenario", "policy", "mode", "fullgraph", "status", "error", "graph_count", "graph_break_count",
                          "captured_regions", "disabled_scope_entries", "engine",
                          "break_reasons", "weight_devices", "argmax_match", "logits_identical", "params_on_meta_after",
                          "prefill_ms", "decode_ms_per_token", "tokens_per_s", "new_tokens", "peak_memory_bytes"})
      EXPECT_TRUE(r.contains(k)) << k << " in " << r.dump();
    if (!fullgraph_refusal(r)) {
      EXPECT_TRUE(succeeded(r));
    } else {
      // Dynamo's fullgraph refusal: the first break, named where the error says it is.
      ASSERT_FALSE(r["break_reasons"].empty()) << r.dump();
      EXPECT_NE(r["error"].get<std::string>().find(r["break_reasons"][0]["function"].get<std::string>()),
                std::string::npos)
          << r.dump();
    }
    // The LibTorch engine does not run Dynamo: Dynamo's counts stay empty, its own have names.
    EXPECT_EQ(r["engine"], "libtorch");
    EXPECT_TRUE(r["graph_break_count"].is_null()) << r.dump();
    EXPECT_TRUE(r["graph_count"].is_null()) << r.dump();
  }
}

TEST(Capture, ShardedWholeHookBreaksAtEveryHookedBoundary) {
  for (const auto& r : runs_where("sharded", "whole-hook")) {
    SCOPED_TRACE(r.dump());
    if (r["mode"] == "eager") continue;
    if (r["fullgraph"].get<bool>()) {
      EXPECT_EQ(r["status"], "error");
      EXPECT_NE(r["error"].get<std::string>().find("AlignDevicesHook.pre_forward"), std::string::npos);
    } else {
      EXPECT_EQ(r["status"], "ok");
      EXPECT_GT(r["disabled_scope_entries"].get<int>(), 0);
      // One break site per hooked module boundary: each hooked module breaks once on the way
      // in (pre_forward) and once on the way out (post_forward) of the prefill forward.
      std::set<std::pair<std::string, std::string>> sites;
      std::map<std::string, int> per_module;
      for (const auto& b : r["break_reasons"]) {
        const bool fresh = sites.insert({b["function"].get<std::string>(), b["module"].get<std::string>()}).second;
        EXPECT_TRUE(fresh) << b.dump();
        ++per_module[b["module"].get<std::string>()];
      }
      for (const auto& [m, n] : per_module) EXPECT_EQ(n, 2) << m;
    }
  }
}

TEST(Capture, ShardedOffloadOnlyIsOneGraph) {
  for (const auto& r : runs_where("sharded", "offload-only")) {
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(r["status"], "ok");
    if (r["mode"] != "eager") {
      EXPECT_EQ(r["disabled_scope_entries"], 0);
      EXPECT_EQ(r["captured_regions"], 1);
    }
  }
}

TEST(Capture, OffloadScenariosStillBreakAtOnloadWeights) {
  for (const std::string sc : {"cpu-offload", "disk-offload", "mixed"})
    for (const auto& r : runs_where(sc, "offload-only")) {
      SCOPED_TRACE(r.dump());
      if (r["mode"] == "eager") continue;
      if (r["fullgraph"].get<bool>()) {
        EXPECT_EQ(r["status"], "error");
        EXPECT_NE(r["error"].get<std::string>().find("AlignDevicesHook._onload_weights"), std::string::npos);
      } else {
        EXPECT_TRUE(succeeded(r));
        EXPECT_GT(r["disabled_scope_entries"].get<int>(), 0);
      }
    }
}

TEST(Capture, CorrectnessChecksHoldForEverySuccessfulRun) {
  int checked = 0;
  for (const auto& r : capture().report["runs"]) {
    if (fullgraph_refusal(r)) continue;
    SCOPED_TRACE(r.dump());
    ASSERT_TRUE(succeeded(r));
    ++checked;
    EXPECT_EQ(r["argmax_match"], true);
    if (r["scenario"] == "sharded") {
      std::set<std::string> accels;
      for (const auto& d : r["weight_devices"])
        if (d.get<std::string>() != "cpu" && d.get<std::string>() != "disk") accels.insert(d);
      EXPECT_GE(accels.size(), 2u);
    } else {
      EXPECT_EQ(r["logits_identical"], true);
      EXPECT_EQ(r["params_on_meta_after"], true);
    }
    EXPECT_EQ(r["new_tokens"], 4);
    EXPECT_EQ(r["decode_ms_per_token"]["n"], 2);
    EXPECT_EQ(r["prefill_ms"]["n"], 2);
    if (r["mode"] != "eager") {
      EXPECT_EQ(r["eager_decode_ms_per_token"]["n"], 2) << "interleaved eager generates";
    }
  }
  EXPECT_EQ(checked, 26) << "8 eager and 16 compiled runs without fullgraph, and sharded offload-only's 2 fullgraph runs";
}

// The same check through the real accelerate, on the same model and prompt, in the same test
// run: where accelerate's offloaded logits are bit-identical to the undispatched model, so
// must hookscope's. Each failure prints both sides.
void expect_offloaded_logits_identical_like_accelerate(const std::vector<json>& runs, const std::string& prompt_ids,
                                                       const std::string& scratch) {
  const fs::path dir = hs::test::scratch_dir(scratch + "-" + std::to_string(getpid()));
  const json py = json::parse(hs::test::run_oracle(
      "offload_logits.py",
      {"--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--prompt-ids", prompt_ids, "--out", dir.string()}));
  int compared = 0;
  for (const auto& r : runs) {
    const std::string sc = r["scenario"];
    if (sc == "sharded") continue;
    ASSERT_EQ(r["status"], "ok") << r.dump();
    ASSERT_TRUE(py["scenarios"].contains(sc)) << py.dump();
    const json& twin = py["scenarios"][sc];
    const std::string both = "hookscope " + sc + " " + r["policy"].get<std::string>() + " " +
                             r["mode"].get<std::string>() + (r["fullgraph"].get<bool>() ? " fullgraph" : "") +
                             ": logits_identical " + r["logits_identical"].dump() + ", max |diff| " +
                             r["logits_max_abs_diff"].dump() + ", " + r["logits_max_ulp"].dump() +
                             " ulp; accelerate " + py["accelerate"].get<std::string>() + " (torch " +
                             py["torch"].get<std::string>() + "): identical " + twin["identical"].dump() +
                             ", max |diff| " + twin["max_abs_diff"].dump();
    EXPECT_EQ(r["logits_identical"], true) << both;
    if (r["logits_identical"] == true) {
      EXPECT_EQ(r["logits_max_abs_diff"], 0.0) << both;
      EXPECT_EQ(r["logits_max_ulp"], 0) << both;
    }
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(Capture, OffloadedLogitsAreBitIdenticalWhereAccelerateIs) {
  std::vector<json> runs;
  for (const auto& r : capture().report["runs"])
    if (r["status"] == "ok") runs.push_back(r);
  expect_offloaded_logits_identical_like_accelerate(runs, "5,17,99,3,42,7", "offload-logits-prefill");
}

// A one-token prompt makes every linear a matrix-vector product, the BLAS path whose kernel
// depends most on the operands' alignment (weights read in place from a safetensors file are
// only 4-byte aligned; hook-copied ones 64-byte): the reference and the offloaded runs must
// still be the same computation.
TEST(Capture, OneTokenPromptOffloadedLogitsAreBitIdenticalWhereAccelerateIs) {
  const fs::path dir = hs::test::scratch_dir("capture-one-token-" + std::to_string(getpid()));
  const fs::path db = dir / "one.sqlite";
  auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "2",
                      "--scenarios", "cpu-offload,disk-offload,mixed", "--modes", "eager", "--prompt-ids", "5",
                      "--max-new-tokens", "1", "--repeats", "1", "--warmup", "0", "--out", db.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rep = hookscope({"report", db.string(), "--json", (dir / "report.json").string()});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json report = hs::test::read_json(dir / "report.json");
  const std::vector<json> runs(report["runs"].begin(), report["runs"].end());
  ASSERT_EQ(runs.size(), 6u);
  expect_offloaded_logits_identical_like_accelerate(runs, "5", "offload-logits-one-token");
}

TEST(Capture, ReportNumbersAddUpToTheSqlInTheFile) {
  hs::storage::CaptureReader rd(capture().db);
  for (const auto& r : capture().report["runs"]) {
    const int64_t id = r["id"];
    int64_t bytes = 0, n = 0;
    for (const auto& t : rd.transfers(id)) {
      bytes += t.bytes;
      n += t.bytes > 0;  // a call that moved nothing is not a transfer
    }
    EXPECT_EQ(r["recorded"]["transfers"], n);
    EXPECT_EQ(r["recorded"]["transfer_bytes"], bytes);
    int64_t on = 0;
    for (const auto& w : rd.weight_swaps(id)) on += w.onload;
    EXPECT_EQ(r["recorded"]["weight_onloads"], on);
    EXPECT_EQ(r["recorded_disabled_scope_entries"], rd.graph_breaks(id).size());
    if (fullgraph_refusal(r)) continue;
    ASSERT_TRUE(succeeded(r));
    if (r["scenario"] != "sharded") {
      EXPECT_GT(on, 0) << "offloaded runs swap weights";
    } else {
      EXPECT_GT(n, 0) << "sharded runs move activations";
    }
    if (r["mode"] != "eager") {
      EXPECT_GE(rd.graph_breaks(id).size(), r["disabled_scope_entries"].get<size_t>())
          << "every compiled call records its breaks; the report counts the prefill's";
    }
  }
  EXPECT_NE(capture().markdown.find("### disabled-scope entries† per compiled forward"), std::string::npos);
}

// Bytes (as float32, the capture's dtype) of every tensor in the checkpoint, read straight from
// the safetensors headers: 8-byte little-endian length, then the JSON header.
std::map<std::string, int64_t> checkpoint_tensor_bytes(const fs::path& dir) {
  std::map<std::string, int64_t> out;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".safetensors") continue;
    std::ifstream in(f.path(), std::ios::binary);
    unsigned char len[8] = {};
    in.read(reinterpret_cast<char*>(len), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    std::string header(n, '\0');
    in.read(header.data(), static_cast<std::streamsize>(n));
    const json entries = json::parse(header);
    for (const auto& [name, e] : entries.items()) {
      if (name == "__metadata__") continue;
      int64_t numel = 1;
      for (const auto& d : e["shape"]) numel *= d.get<int64_t>();
      out[name] = numel * 4;
    }
  }
  return out;
}

// The device a device map gives a tensor: its longest module-prefix entry.
std::string placed_on(const json& device_map, const std::string& tensor) {
  std::string best_key, best;
  bool found = false;
  for (const auto& [k, d] : device_map.items())
    if ((k.empty() || tensor.rfind(k + ".", 0) == 0) && (!found || k.size() > best_key.size())) {
      best_key = k;
      best = d.is_number() ? std::to_string(d.get<int64_t>()) : d.get<std::string>();
      found = true;
    }
  return found ? best : "?";
}

TEST(Capture, PeakMemoryPerDeviceMatchesTheWeightsPlacedAndTheSql) {
  const auto tensors = checkpoint_tensor_bytes(hs::test::tiny_checkpoint("tiny-llama"));
  ASSERT_FALSE(tensors.empty());
  int64_t total = 0, largest = 0;
  for (const auto& [n, b] : tensors) {
    total += b;
    largest = std::max(largest, b);
  }
  EXPECT_EQ(total, capture().report["model"]["bytes"].get<int64_t>());
  hs::storage::CaptureReader rd(capture().db);
  const std::vector<std::string> devices = {"0", "1", "2", "3", "cpu"};
  // Activations of a 6-token prompt through a 64-wide, 256-token-vocab model: a few KiB.
  const int64_t activations = 16 << 10;
  for (const auto& r : capture().report["runs"]) {
    SCOPED_TRACE(r["scenario"].get<std::string>() + " " + r["policy"].get<std::string>() + " " +
                 r["mode"].get<std::string>() + " " + r["peak_memory_bytes"].dump());
    const json& peak = r["peak_memory_bytes"];
    ASSERT_TRUE(peak.is_object());
    for (const auto& d : devices) ASSERT_TRUE(peak.contains(d)) << d;
    // The report's peak is the largest sample the file holds for that device.
    std::map<std::string, int64_t> sql_max;
    for (const auto& c : rd.memory_counters(r["id"].get<int64_t>()))
      sql_max[c.device] = std::max(sql_max[c.device], c.bytes);
    EXPECT_EQ(sql_max.size(), devices.size());
    for (const auto& [d, v] : sql_max) EXPECT_EQ(peak[d].get<int64_t>(), v) << d;
    if (fullgraph_refusal(r)) continue;
    ASSERT_TRUE(succeeded(r));
    const std::string sc = r["scenario"];
    if (sc == "sharded") {
      // Each accelerator holds at least the weights the device map put there, and not much more.
      const json device_map = rd.run(r["id"].get<int64_t>()).device_map;
      std::map<std::string, int64_t> placed;
      for (const auto& [n, b] : tensors) placed[placed_on(device_map, n)] += b;
      int64_t on_accelerators = 0;
      for (const auto& d : {"0", "1", "2", "3"}) {
        EXPECT_GE(peak[d].get<int64_t>(), placed[d]) << d;
        EXPECT_LE(peak[d].get<int64_t>(), placed[d] + activations) << d;
        on_accelerators += placed[d];
      }
      EXPECT_EQ(on_accelerators, total) << "sharded keeps every weight on an accelerator";
      EXPECT_LT(peak["cpu"].get<int64_t>(), activations);
    } else if (sc == "mixed") {
      // Accelerator entries hold their weights; "cpu" entries keep theirs in host memory.
      const json device_map = rd.run(r["id"].get<int64_t>()).device_map;
      std::map<std::string, int64_t> placed;
      for (const auto& [n, b] : tensors) placed[placed_on(device_map, n)] += b;
      EXPECT_GT(placed["cpu"], 0);
      for (const auto& d : devices) EXPECT_GE(peak[d].get<int64_t>(), placed[d]) << d;
    } else if (sc == "cpu-offload" || sc == "disk-offload") {
      // One module's weights at a time on the execution device, never the whole model.
      EXPECT_GE(peak["0"].get<int64_t>(), largest);
      EXPECT_LT(peak["0"].get<int64_t>(), total / 2);
      for (const auto& d : {"1", "2", "3"}) EXPECT_EQ(peak[d].get<int64_t>(), 0) << d;
      if (sc == "cpu-offload") {
        EXPECT_GE(peak["cpu"].get<int64_t>(), total) << "the offloaded state dict lives in host memory";
      } else {
        EXPECT_LT(peak["cpu"].get<int64_t>(), activations) << "disk-offloaded weights are not resident";
      }
    }
  }
  EXPECT_NE(capture().markdown.find("### peak resident memory per device"), std::string::npos);
  EXPECT_NE(capture().markdown.find("| cpu-offload | "), std::string::npos);
}

TEST(Capture, StepsStartWithPrefillAndTransfersNameTheModuleThatMovedThem) {
  hs::storage::CaptureReader rd(capture().db);
  int checked = 0;
  for (const auto& run : rd.runs()) {
    if (run.fullgraph) continue;
    ASSERT_EQ(run.results.value("status", ""), "ok") << "run " << run.id << ": " << run.results.dump();
    // warmup 1 + repeats 2 decodes of 4 new tokens: steps 0 (prefill) .. 3 each.
    const auto steps = rd.generation_steps(run.id);
    ASSERT_EQ(steps.size(), 3u * 4) << run.scenario << " " << run.policy << " " << run.mode;
    int prefills = 0;
    for (const auto& st : steps) prefills += st.step == 0;
    EXPECT_EQ(prefills, 3);
    if (run.scenario == "sharded") {
      std::set<std::string> modules;
      for (const auto& t : rd.transfers(run.id)) modules.insert(t.module);
      // Activations cross devices in the pre_forward of the first module on the next device.
      EXPECT_TRUE(std::any_of(modules.begin(), modules.end(),
                              [](const std::string& m) { return m.rfind("model.layers.", 0) == 0; }))
          << run.id;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 24) << "every run without fullgraph";
}

TEST(Capture, WeightOnloadsAreWeightSwapsNotAlsoTransfers) {
  hs::storage::CaptureReader rd(capture().db);
  int checked = 0;
  for (const auto& run : rd.runs()) {
    if (run.scenario != "cpu-offload" || run.fullgraph) continue;
    const auto swaps = rd.weight_swaps(run.id);
    std::vector<std::pair<int64_t, int64_t>> onloads;
    for (const auto& w : swaps)
      if (w.onload) onloads.emplace_back(w.start_ns, w.end_ns);
    ASSERT_FALSE(onloads.empty());
    for (const auto& t : rd.transfers(run.id))
      for (const auto& [a, b] : onloads)
        EXPECT_FALSE(t.start_ns >= a && t.end_ns <= b) << "transfer inside a weight onload: " << t.src << "->" << t.dst
                                                       << " " << t.bytes << " B, module " << t.module;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// Starts `hookscope capture ARGS` in the background (output to `log`); returns its pid.
pid_t start_capture(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv{hs::test::cli(), "capture"};
  argv.insert(argv.end(), args.begin(), args.end());
  return hs::test::start(argv, log);
}

// A slow capture of the tiny model: one scenario, many repeats. One intra-op thread: ctest runs
// two of these side by side on two cores, and LibTorch's default (a thread per core, spinning at
// each parallel region's barrier) makes both crawl when they share the cores.
std::vector<std::string> slow_capture_args(const fs::path& out, const std::string& scenarios = "cpu-offload") {
  return {"--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "2",
          "--scenarios", scenarios, "--prompt-ids", "5,17,99", "--max-new-tokens", "32", "--repeats", "100", "--warmup",
          "0", "--threads", "1", "--out", out.string()};
}

// Waits (up to 5 minutes) until the capture writing `file` has completed a run and is recording
// the next one. When it does not, says what the file held last and what the capture's threads
// were doing, through `why`.
bool wait_for_second_run(pid_t pid, const fs::path& file, std::string* why = nullptr) {
  std::string last = "never read";
  const bool ready = hs::test::wait_while_running(
      pid,
      [&] {
        try {
          auto runs = hs::storage::CaptureReader(file).runs();
          last = std::to_string(runs.size()) + " runs";
          for (const auto& r : runs) (last += " ") += hs::tracer::to_string(r.status);
          return runs.size() >= 2 && runs[0].status == hs::tracer::RunStatus::Complete;
        } catch (const std::exception& e) {
          last = e.what();
          return false;
        }
      },
      300);
  if (!ready && why) {
    *why = "the file read last: " + last + "; the capture's threads:";
    std::error_code ec;
    for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) try {
        *why += " " + t.path().filename().string() + "=" + hs::test::read_file(t.path() / "wchan") + "/" +
                hs::test::read_file(t.path() / "stat").substr(0, 60);
      } catch (const std::exception&) {  // the thread has ended
      }
  }
  return ready;
}

// The folder a capture's "[hookscope] disk offload folder: DIR (...)" line names.
fs::path offload_folder_named_in(const std::string& log) {
  const std::string tag = "disk offload folder: ";
  const size_t at = log.find(tag);
  if (at == std::string::npos) return {};
  const size_t from = at + tag.size();
  return log.substr(from, log.find(" (", from) - from);
}

fs::path partial_of(const fs::path& out, pid_t pid) { return out.string() + "." + std::to_string(pid) + ".partial"; }

// SIGKILL leaves the runs in the temporary file beside --out (complete ones complete, the one
// in progress incomplete), and the earlier capture at --out untouched.
TEST(Capture, KilledCaptureLeavesIncompleteRunAndReportSaysSo) {
  fs::path dir = hs::test::scratch_dir("capture-killed");
  fs::path db = dir / "killed.sqlite";
  { std::ofstream(db) << ""; }  // an (empty) earlier file at --out: replaced only when the capture finishes
  auto args = slow_capture_args(db);
  args.push_back("--force-overwrite");
  const pid_t pid = start_capture(args, dir / "log.txt");
  const fs::path partial = partial_of(db, pid);
  std::string why;
  const bool ready = wait_for_second_run(pid, partial, &why);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(ready) << "the capture never got past its first run (" << why << "): " << hs::test::read_file(dir / "log.txt");
  EXPECT_EQ(fs::file_size(db), 0u) << "the earlier file at --out is untouched";
  hs::storage::CaptureReader rd(partial);
  auto runs = rd.runs();
  ASSERT_GE(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Complete);
  EXPECT_EQ(runs.back().status, hs::tracer::RunStatus::Incomplete);
  auto rep = hookscope({"report", partial.string()});
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.out.find("Incomplete runs"), std::string::npos) << rep.out;
  // The next capture into the same --out is not blocked by the dead one's lock, and names its
  // leftover file.
  auto again = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                          "--devices", "2", "--scenarios", "cpu-offload", "--modes", "eager", "--prompt-ids", "5",
                          "--max-new-tokens", "1", "--repeats", "1", "--warmup", "0", "--out", db.string(),
                          "--force-overwrite"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find(partial.string()), std::string::npos) << again.err;
  EXPECT_EQ(hs::storage::CaptureReader(db).runs().size(), 2u);  // whole-hook, offload-only
}

// A second capture on the same --out fails at once naming the first one's pid; SIGINT then ends
// the first: its finished runs are finalized onto --out, the run in progress stays incomplete,
// its offload folders are removed, it says where the file is and exits 130.
TEST(Capture, SecondWriterFailsAndInterruptedCaptureIsFinalized) {
  fs::path dir = hs::test::scratch_dir("capture-interrupted");
  fs::path db = dir / "int.sqlite";
  const pid_t pid = start_capture(slow_capture_args(db, "disk-offload"), dir / "log.txt");
  std::string why;
  const bool ready = wait_for_second_run(pid, partial_of(db, pid), &why);
  if (!ready) kill(pid, SIGKILL);
  ASSERT_TRUE(ready) << why << "\n" << hs::test::read_file(dir / "log.txt");
  const fs::path offload = offload_folder_named_in(hs::test::read_file(dir / "log.txt"));
  EXPECT_TRUE(fs::exists(offload / "offload-disk" / "index.json")) << offload;
  auto second = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                           "--devices", "2", "--scenarios", "cpu-offload", "--out", db.string(), "--force-overwrite"});
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_NE(second.err.find("pid " + std::to_string(pid)), std::string::npos) << second.err;
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = hs::test::read_file(dir / "log.txt");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  EXPECT_NE(log.find("SIGINT"), std::string::npos) << log;
  EXPECT_NE(log.find("wrote " + db.string()), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(partial_of(db, pid)));
  EXPECT_FALSE(fs::exists(offload)) << "the offload folder is removed";
  EXPECT_FALSE(fs::exists(db.string() + ".lock"));
  hs::storage::CaptureReader rd(db);
  auto runs = rd.runs();
  ASSERT_GE(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Complete);
  EXPECT_EQ(runs.back().status, hs::tracer::RunStatus::Incomplete);
  auto rep = hookscope({"report", db.string()});
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.out.find("Incomplete runs"), std::string::npos) << rep.out;
  EXPECT_EQ(rep.out.find("| ? |"), std::string::npos) << "the model is named: " << rep.out;
}

// Interrupted before any run ended, a capture has nothing to replace an earlier one with: even
// with --force-overwrite the earlier --out stays, and the run in progress is kept beside it.
TEST(Capture, InterruptedBeforeAnyRunEndedKeepsTheEarlierCapture) {
  fs::path dir = hs::test::scratch_dir("capture-interrupted-first-run");
  fs::path db = dir / "earlier.sqlite";
  fs::copy_file(capture().db, db);
  const std::string before = hs::test::read_file(db);
  auto args = slow_capture_args(db);
  args.push_back("--force-overwrite");
  const pid_t pid = start_capture(args, dir / "log.txt");
  const fs::path partial = partial_of(db, pid);
  const bool ready = hs::test::wait_while_running(pid, [&partial] {
    try {
      return hs::storage::CaptureReader(partial).runs().size() == 1;
    } catch (const std::exception&) {
      return false;
    }
  });
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = hs::test::read_file(dir / "log.txt");
  ASSERT_TRUE(ready) << log;
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  EXPECT_EQ(hs::test::read_file(db), before) << "the earlier capture is intact";
  EXPECT_NE(log.find("no run had ended; " + db.string() + " is as it was"), std::string::npos) << log;
  EXPECT_NE(log.find(partial.string()), std::string::npos) << log;
  auto runs = hs::storage::CaptureReader(partial).runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Incomplete);
  EXPECT_FALSE(fs::exists(db.string() + ".lock"));
}

// What --out may not be: empty, a folder, an existing file without --force-overwrite, the
// model's own file (even with it). Each is refused before anything is written.
TEST(Capture, OutThatWouldLoseAFileIsRefused) {
  const fs::path dir = hs::test::scratch_dir("capture-out-refused");
  const fs::path model = dir / "model";
  fs::copy(hs::test::tiny_checkpoint("tiny-llama"), model, fs::copy_options::recursive);
  const fs::path index = model / "model.safetensors.index.json";  // the tiny model is sharded
  const std::string weights = hs::test::read_file(index);
  fs::create_symlink(index, dir / "link.sqlite");
  { std::ofstream(dir / "old.sqlite") << "an earlier capture"; }
  auto capture_to = [&](const std::string& out, bool force) {
    std::vector<std::string> args{"capture", "--engine", "libtorch", "--model", model.string(), "--devices", "2",
                                  "--scenarios", "cpu-offload", "--modes", "eager", "--prompt-ids", "5",
                                  "--max-new-tokens", "1", "--repeats", "1", "--warmup", "0", "--out", out};
    if (force) args.push_back("--force-overwrite");
    return hookscope(args);
  };
  struct Case {
    std::string out;
    bool force;
    std::string says;
    int exit_code = 1;  // 2: a usage error, refused before anything is read
  };
  {
    std::vector<std::string> args{"capture", "--engine", "libtorch", "--model", model.string(), "--devices", "2",
                                  "--scenarios", "disk-offload", "--modes", "eager", "--prompt-ids", "5",
                                  "--max-new-tokens", "1", "--repeats", "1", "--warmup", "0", "--out",
                                  (dir / "inside.sqlite").string(), "--keep-offload-dir", (model / "sub").string()};
    auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("inside the model's folder"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(model / "sub")) << "the model's folder is not written";
    // --keep-driver-files: not the model's folder, and not one holding an earlier capture's logs
    // (they would be read back with this capture's, every compile counted twice).
    fs::create_directories(dir / "used-driver-files");
    std::ofstream(dir / "used-driver-files" / "results.jsonl") << "{}\n";
    for (const auto& [folder, says] : std::vector<std::pair<fs::path, std::string>>{
             {model, "inside the model's folder"}, {dir / "used-driver-files", "is not empty"}}) {
      args.back() = (dir / "offload-x").string();
      std::vector<std::string> with = args;
      with.insert(with.end(), {"--keep-driver-files", folder.string()});
      r = hookscope(with);
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_NE(r.err.find("--keep-driver-files: " + folder.string()), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    }
    EXPECT_FALSE(fs::exists(model / "whole-hook"));
  }
  for (const Case& c : std::vector<Case>{{"", false, "--out: an empty value names nothing", 2},
                                         {dir.string(), true, "is a folder"},
                                         {(dir / "old.sqlite").string(), false, "--force-overwrite"},
                                         {(dir / "old.sqlite").string(), true, "not a hookscope capture"},
                                         {index.string(), true, "the model's file"},
                                         {(model / "new.sqlite").string(), false,
                                          "--out: " + (model / "new.sqlite").string() + " is or lies inside the model's folder"},
                                         {(dir / "link.sqlite").string(), true, "the model's file"},
                                         {(dir / (std::string(240, 'n') + ".sqlite")).string(), false,
                                          "its file name is 247 bytes; the temporary files written beside it"}}) {
    SCOPED_TRACE(c.out);
    auto r = capture_to(c.out, c.force);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  EXPECT_EQ(hs::test::read_file(dir / "old.sqlite"), "an earlier capture");
  EXPECT_FALSE(fs::exists(dir / (std::string(240, 'n') + ".sqlite.lock"))) << "refused before the lock";
  EXPECT_EQ(hs::test::read_file(index), weights);
  EXPECT_TRUE(fs::is_symlink(dir / "link.sqlite"));
  // A capture that fails part-way (its offload folder replaced by a file once its first run is
  // recorded, so the disk-offload scenario cannot write it) leaves the earlier capture whole
  // and keeps what it recorded beside it.
  const fs::path good = dir / "good.sqlite";
  ASSERT_EQ(capture_to(good.string(), false).exit_code, 0);
  const fs::path keep = dir / "good-offload";
  auto args = slow_capture_args(good, "cpu-offload,disk-offload");
  args[3] = model.string();  // --model: the copy
  for (const std::string& a : {std::string("--modes"), std::string("eager"), std::string("--force-overwrite"),
                               std::string("--keep-offload-dir"), keep.string()})
    args.push_back(a);
  const pid_t pid = start_capture(args, dir / "log.txt");
  std::string why;
  const bool ready = wait_for_second_run(pid, partial_of(good, pid), &why);
  if (!ready) kill(pid, SIGKILL);
  fs::remove_all(keep);
  { std::ofstream(keep) << "in the way"; }
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = hs::test::read_file(dir / "log.txt");
  ASSERT_TRUE(ready) << why << "\n" << log;
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("disk-offload"), std::string::npos) << log;
  EXPECT_NE(log.find(".partial"), std::string::npos) << "names where the recorded runs are: " << log;
  EXPECT_EQ(hs::storage::CaptureReader(good).runs().size(), 2u) << "the earlier capture is whole";
}

// The disk-offload folder is the capture's own, under hookscope's cache, named in the output
// and gone when the capture ends; --keep-offload-dir DIR writes it there and keeps it.
TEST(Capture, OffloadFolderIsTheCapturesOwnAndRemovedUnlessKept) {
  const fs::path dir = hs::test::scratch_dir("capture-offload-folder");
  const std::vector<std::string> args{"capture", "--engine", "libtorch", "--model",
                                      hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "2",
                                      "--scenarios", "disk-offload", "--policies", "whole-hook", "--modes",
                                      "eager", "--prompt-ids", "5", "--max-new-tokens", "2", "--repeats", "1",
                                      "--warmup", "0"};
  std::vector<std::string> plain{"/usr/bin/env", "HOOKSCOPE_CACHE=" + (dir / "cache").string(), hs::test::cli()};
  plain.insert(plain.end(), args.begin(), args.end());
  for (const std::string& a : {std::string("--out"), (dir / "a.sqlite").string()}) plain.push_back(a);
  auto r = hs::test::run(plain);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path offload = offload_folder_named_in(r.err);
  ASSERT_FALSE(offload.empty()) << "the output names the offload folder: " << r.err;
  EXPECT_EQ(offload.parent_path(), dir / "cache" / "offload") << r.err;
  EXPECT_FALSE(fs::exists(offload)) << "removed at the end";
  EXPECT_FALSE(fs::exists(dir / "a-offload")) << "nothing beside --out";
  // stderr is not a terminal: one line per run, no live status line.
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("ETA"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[1/1] libtorch"), std::string::npos) << r.err;

  std::vector<std::string> kept = args;
  for (const std::string& a : {std::string("--out"), (dir / "b.sqlite").string(), std::string("--keep-offload-dir"),
                               (dir / "kept").string()})
    kept.push_back(a);
  r = hookscope(kept);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "kept" / "offload-disk" / "index.json")) << r.err;
  EXPECT_NE(r.err.find("kept"), std::string::npos) << r.err;
  // Kept again: an offload folder (index.json, .dat) is rewritten; anything else there is not
  // the capture's to delete, and a file is not a folder.
  kept.insert(kept.end() - 2, "--force-overwrite");
  r = hookscope(kept);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  { std::ofstream(dir / "kept" / "offload-disk" / "mine.txt") << "a user's file"; }
  r = hookscope(kept);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--keep-offload-dir: " + (dir / "kept" / "offload-disk").string() + " holds"), std::string::npos)
      << r.err;
  EXPECT_EQ(hs::test::read_file(dir / "kept" / "offload-disk" / "mine.txt"), "a user's file");
  fs::remove(dir / "kept" / "offload-disk" / "mine.txt");
  // A capture is never written into the kept folder (a later capture would rewrite it) nor
  // taken for an offload file when one sits there as NAME.dat.
  std::vector<std::string> inside = kept;
  inside.end()[-4] = (dir / "kept" / "offload-disk" / "x.dat").string();  // --out
  r = hookscope(inside);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("lies inside --keep-offload-dir"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "kept" / "offload-disk" / "x.dat"));
  fs::copy_file(dir / "b.sqlite", dir / "kept" / "offload-disk" / "x.dat");
  r = hookscope(kept);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("holds " + (dir / "kept" / "offload-disk" / "x.dat").string()), std::string::npos) << r.err;
  EXPECT_EQ(hs::storage::CaptureReader(dir / "kept" / "offload-disk" / "x.dat").runs().size(), 1u);
  { std::ofstream(dir / "afile") << "x"; }
  kept.back() = (dir / "afile").string();
  r = hookscope(kept);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("exists and is not a folder"), std::string::npos) << r.err;
}

// On a terminal (script(1) gives the capture one) the status line shows the run, which
// generate and decode step it is in, the time so far and an estimate of what is left.
TEST(Capture, ProgressOnATerminalShowsTheGenerateTheStepAndAnEta) {
  if (hs::test::run({"/bin/sh", "-c", "command -v script"}).exit_code != 0) GTEST_SKIP() << "no script(1)";
  const fs::path dir = hs::test::scratch_dir("capture-progress-tty");
  std::ostringstream cmd;  // one shell command for script(1); the paths quoted
  cmd << "'" << hs::test::cli() << "' capture --engine libtorch --model '"
      << hs::test::tiny_checkpoint("tiny-llama").string()
      << "' --devices 2 --scenarios sharded --policies whole-hook --modes eager,default --fullgraph off "
         "--prompt-ids 5,17 --max-new-tokens 24 --repeats 2 --warmup 1 --out '"
      << (dir / "p.sqlite").string() << "'";
  auto r = hs::test::run({"script", "-qefc", cmd.str(), "/dev/null"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string tty = r.out;  // what the terminal showed
  EXPECT_NE(tty.find("\r\033[K[1/2] libtorch"), std::string::npos) << tty;
  EXPECT_NE(tty.find("ETA after the first run"), std::string::npos) << tty;
  EXPECT_NE(tty.find("ETA ~"), std::string::npos) << "the second run has an estimate: " << tty;
  EXPECT_NE(tty.find("measured 2/2 compiled, step "), std::string::npos) << tty;
  EXPECT_NE(tty.find("warm-up 1/1 eager, step "), std::string::npos) << tty;
  EXPECT_NE(tty.find("elapsed"), std::string::npos) << tty;
  EXPECT_NE(tty.find("[2/2] libtorch"), std::string::npos) << tty;
}

// A damaged RUNS.results (not JSON, not an object, a field of another type than hookscope
// writes) is named with its file and run by report and explain, and the file is not modified.
TEST(Capture, DamagedRunResultsAreNamedWithTheirRun) {
  const fs::path dir = hs::test::scratch_dir("capture-damaged-results");
  const fs::path db = dir / "damaged.sqlite";
  // One level down too (a spread's member, a model size, a device's peak), which only report reads.
  const std::vector<std::string> nested = {"{\"status\": \"ok\", \"decode_ms_per_token\": {\"median\": \"x\"}}",
                                           "{\"status\": \"ok\", \"model\": {\"params\": \"many\"}}",
                                           "{\"status\": \"ok\", \"peak_memory_bytes\": {\"0\": [1]}}"};
  for (const std::string& bad : {std::string("{\"status\": \"ok\", "), std::string("[1, 2]"),
                                 std::string("{\"status\": 7, \"graph_break_count\": \"many\", "
                                             "\"break_reasons\": {\"reason\": 1}}"),
                                 nested[0], nested[1], nested[2]}) {
    SCOPED_TRACE(bad);
    const bool explain_reads_it = std::find(nested.begin(), nested.end(), bad) == nested.end();
    fs::copy_file(capture().db, db, fs::copy_options::overwrite_existing);
    {
      sqlite3* h = nullptr;
      ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
      sqlite3_stmt* st = nullptr;
      ASSERT_EQ(sqlite3_prepare_v2(h, "UPDATE RUNS SET results = ? WHERE id = 2", -1, &st, nullptr), SQLITE_OK);
      sqlite3_bind_text(st, 1, bad.c_str(), -1, SQLITE_TRANSIENT);
      ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
      sqlite3_finalize(st);
      sqlite3_close(h);
    }
    const std::string before = hs::test::read_file(db);
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {"report", db.string()}, {"report", db.string(), "--json", (dir / "r.json").string()},
             {"explain", db.string(), "--run", "2"}}) {
      SCOPED_TRACE(cmd.front());
      if (cmd.front() == "explain" && !explain_reads_it) continue;
      auto r = hookscope(cmd);
      EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
      EXPECT_NE(r.err.find(db.string()), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("run 2"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("RUNS.results"), std::string::npos) << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / "r.json"));
    EXPECT_EQ(hs::test::read_file(db), before) << "the capture is not modified";
  }
}

// report's outputs never replace the capture it reads, whatever name or link points at it.
TEST(Capture, ReportNeverWritesOverItsCapture) {
  const fs::path dir = hs::test::scratch_dir("capture-report-self-" + std::to_string(getpid()));
  const fs::path db = dir / "a.sqlite";
  fs::copy_file(capture().db, db);
  const std::string before = hs::test::read_file(db);
  fs::create_symlink(db, dir / "link.md");
  fs::create_hard_link(db, dir / "hard.json");
  for (const auto& [flag, out] : std::vector<std::pair<std::string, fs::path>>{{"--markdown", db},
                                                                              {"--json", db},
                                                                              {"--markdown", dir / "link.md"},
                                                                              {"--json", dir / "hard.json"},
                                                                              {"--json", dir / "." / "a.sqlite"}}) {
    SCOPED_TRACE(flag + " " + out.string());
    auto r = hookscope({"report", db.string(), flag, out.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_EQ(hs::test::read_file(db), before);
  }
  EXPECT_TRUE(fs::is_symlink(dir / "link.md"));
  // Nor two of its outputs one file, however named (and not yet there).
  auto r = hookscope({"report", db.string(), "--markdown", (dir / "r.md").string(), "--json", (dir / "r.md").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--json: " + (dir / "r.md").string() + " is also --markdown's output"), std::string::npos) << r.err;
  r = hookscope({"report", db.string(), "--json", (dir / "x.json").string(), "--markdown",
                 (dir / "sub" / ".." / "x.json").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  fs::create_symlink(dir / "z.md", dir / "dangling.html");
  r = hookscope({"report", db.string(), "--markdown", (dir / "z.md").string(), "--html", (dir / "dangling.html").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.html"));
  // Nor a picture --assets writes another flag's file (the Markdown linked to itself, the chart
  // was report JSON).
  for (const auto& [flag, name] : std::vector<std::pair<std::string, std::string>>{{"--json", "compare.svg"},
                                                                                  {"--markdown", "compare.svg"}}) {
    SCOPED_TRACE(flag);
    const fs::path pics = dir / ("pics" + flag);
    const std::vector<std::string> args =
        flag == "--json" ? std::vector<std::string>{"report", db.string(), "--markdown", (dir / "p.md").string(),
                                                    "--assets", pics.string(), "--json", (pics / name).string()}
                         : std::vector<std::string>{"report", db.string(), "--markdown", (pics / name).string(),
                                                    "--assets", pics.string()};
    r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("--assets: " + (pics / name).string() + " is also " + flag + "'s output; name two files"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(pics)) << "nothing written";
  }
  // Nor another flag's file the --assets folder itself or one above it: the folder was made, with
  // its pictures, before the file was refused as a folder.
  for (const auto& [flag, file, assets] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--markdown", "same.md", "same.md"}, {"--json", "q1", "q1"}, {"--markdown", "up", "up/pics"}}) {
    SCOPED_TRACE(flag + " " + file + " --assets " + assets);
    std::vector<std::string> args{"report", db.string(), flag, (dir / file).string(), "--assets", (dir / assets).string()};
    if (flag != "--markdown") args.insert(args.end(), {"--markdown", (dir / "m.md").string()});
    r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(flag + ": " + (dir / file).string() + " is also --assets's folder"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / file)) << "nothing written";
    EXPECT_FALSE(fs::exists(dir / "m.md")) << "nothing written";
  }
  EXPECT_FALSE(fs::exists(dir / "r.md"));
  EXPECT_FALSE(fs::exists(dir / "x.json"));
  // A bare --markdown name puts the pictures' links relative to the current folder.
  r = hs::test::run({"/bin/sh", "-c", "cd '" + dir.string() + "' && '" + hs::test::cli() + "' report a.sqlite --markdown "
                                      "bare.md --assets pics"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(hs::test::read_file(dir / "bare.md").find("](pics/"), std::string::npos);
}

// A model without tokenizer.json cannot encode --prompt (the default one included): the error
// says so and how to give the prompt instead, before anything is written.
TEST(Capture, APromptWithoutATokenizerSaysToGiveTokenIds) {
  const fs::path dir = hs::test::scratch_dir("capture-no-tokenizer");
  auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                      "--devices", "2", "--scenarios", "sharded", "--modes", "eager", "--max-new-tokens", "1",
                      "--repeats", "1", "--warmup", "0", "--out", (dir / "x.sqlite").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.sqlite"));
}

TEST(Capture, ReportRefusesAFileThatIsNotACapture) {
  fs::path dir = hs::test::scratch_dir("capture-bad-file");
  std::ofstream(dir / "x.sqlite") << "definitely not sqlite";
  auto r = hookscope({"report", (dir / "x.sqlite").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("x.sqlite"), std::string::npos) << r.err;
}

}  // namespace
