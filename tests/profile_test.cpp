// `hookscope profile -- python SCRIPT.py`: a script written here (a small non-Llama model
// dispatched with accelerate's cpu_offload, compiled with Dynamo's eager backend, called in a
// loop with hookscope_torch.start() / stop() around the measured calls), profiled under both
// policies. Its breaks per run are compared with torch._dynamo.explain of the same model under
// the same policy, in this test.
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The model, shared by the profiled script and the explain oracle.
const char* kNet = R"(import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)

def offloaded():
    from accelerate import cpu_offload
    torch.manual_seed(0)
    model = Net().eval()
    cpu_offload(model, execution_device=torch.device("cpu"))
    return model
)";

// argv: CALLS EXIT_STATUS [READY_FILE]: one compiled warm-up call, then CALLS calls between the
// markers (with READY_FILE: written after start(), then calls until interrupted).
const char* kScript = R"(import os, sys, time, torch
import hookscope_torch
from tiny_net import offloaded

calls, status = int(sys.argv[1]), int(sys.argv[2])
ready = sys.argv[3] if len(sys.argv) > 3 else None
model = offloaded()
compiled = torch.compile(model, backend="eager")
x = torch.randn(2, 16)
with torch.no_grad():
    compiled(x)
    hookscope_torch.start()
    for _ in range(calls):
        y = compiled(x)
    if ready:
        open(ready, "w").close()
        while True:
            compiled(x)
            time.sleep(0.05)
    hookscope_torch.stop()
    compiled(x)  # after stop(): not recorded
print("profiled-script-done", float(y.sum()))
sys.exit(status)
)";

const char* kExplain = R"(import json, sys, torch
if sys.argv[1] == "offload-only":
    from hookscope_torch import offload_only
    offload_only.apply()
from tiny_net import offloaded
with torch.no_grad():
    e = torch._dynamo.explain(offloaded())(torch.randn(2, 16))
print(json.dumps({"graph_count": e.graph_count, "graph_break_count": e.graph_break_count}))
)";

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

fs::path script_dir(const std::string& name) {
  const fs::path dir = hs::test::scratch_dir(name);
  write(dir / "tiny_net.py", kNet);
  write(dir / "script.py", kScript);
  write(dir / "explain_net.py", kExplain);
  return dir;
}

// torch._dynamo.explain of the model under `policy`, in a process of its own.
json explain(const fs::path& dir, const std::string& policy) {
  const std::string cmd = "cd '" + dir.string() + "' && PYTHONPATH='" + (hs::test::source_dir() / "python").string() +
                          "' '" + hs::test::python() + "' explain_net.py " + policy + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) out = buf;  // the last line
  if (p) ::pclose(p);
  return json::parse(out);
}

TEST(Profile, BothPoliciesRecordDynamosOwnBreaksHookRangesAndSwapsBetweenTheMarkers) {
  const fs::path dir = script_dir("profile-policies");
  const fs::path out = dir / "cap.sqlite";
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--policies", "whole-hook,offload-only",
                                      "--capture-range", "markers", "--", hs::test::python(),
                                      (dir / "script.py").string(), "3", "7"});
  EXPECT_EQ(r.exit_code, 7) << "the script's own exit status\n" << r.err;
  EXPECT_NE(r.out.find("profiled-script-done"), std::string::npos) << "its stdout passes through\n" << r.out;
  hs::storage::CaptureReader rd(out);
  const auto runs = rd.runs();
  ASSERT_EQ(runs.size(), 2u) << r.err;
  for (const auto& run : runs) {
    SCOPED_TRACE(run.policy);
    EXPECT_EQ(run.engine, "profile");
    EXPECT_EQ(run.status, hs::tracer::RunStatus::Complete) << run.error;
    EXPECT_EQ(run.results.value("exit_status", -1), 7);
    EXPECT_NE(run.results.value("stdout_tail", "").find("profiled-script-done"), std::string::npos);
    EXPECT_EQ(run.results["command"].back(), "7");
    EXPECT_EQ(run.results["versions"].value("policy", ""), run.policy);
    // Dynamo's own count for the compiled model, as explain gives it for the same model.
    const json want = explain(dir, run.policy);
    const json log = run.results["profile"]["imports"][0]["compile_log"];
    EXPECT_EQ(log.value("graph_count", -1), want["graph_count"]) << log.dump();
    EXPECT_EQ(log.value("graph_break_count", -1), want["graph_break_count"]) << log.dump();
    // The offloaded weights swapped in and out, with their bytes: 16x16 float32 = 1024 B.
    const auto swaps = rd.weight_swaps(run.id);
    ASSERT_FALSE(swaps.empty());
    bool fc_weight = false;
    for (const auto& s : swaps) fc_weight |= s.tensor == "weight" && s.module == "blocks.0.fc" && s.bytes == 1024;
    EXPECT_TRUE(fc_weight);
  }
  // whole-hook: each hooked module's pre_forward runs eagerly, once per call between the
  // markers (3), not for the warm-up call before start() nor the call after stop().
  int blocks0 = 0;
  for (const auto& h : rd.hook_events(runs[0].id))
    blocks0 += h.module == "blocks.0.fc" && h.phase == hs::events::HookPhase::PreForward;
  EXPECT_EQ(blocks0, 3);
  // explain names the program and its exit status; report says what kind of runs these are.
  const auto ex = hs::test::hookscope({"explain", out.string(), "--run", std::to_string(runs[0].id)});
  EXPECT_NE(ex.out.find("script.py 3 7  (exit status 7)"), std::string::npos) << ex.out;
  const auto rep = hs::test::hookscope({"report", out.string()});
  EXPECT_NE(rep.out.find("A profiled program (`hookscope profile`)"), std::string::npos) << rep.out;
}

TEST(Profile, CtrlCReachesTheScriptAndLeavesItsRunIncompleteWithWhatItRecorded) {
  const fs::path dir = script_dir("profile-ctrl-c");
  const fs::path out = dir / "cap.sqlite", ready = dir / "ready";
  const pid_t pid = hs::test::start({hs::test::cli(), "profile", "-o", out.string(), "--capture-range", "markers", "--",
                                     hs::test::python(), (dir / "script.py").string(), "2", "0", ready.string()},
                                    dir / "log.txt", true);
  const bool started = hs::test::wait_while_running(pid, [&] { return fs::exists(ready); }, 300);
  ::kill(-pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string log = hs::test::read_file(dir / "log.txt");
  ASSERT_TRUE(started) << log;
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  hs::storage::CaptureReader rd(out);
  const auto runs = rd.runs();
  ASSERT_EQ(runs.size(), 1u) << log;
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Incomplete);
  EXPECT_NE(runs[0].results.value("stderr_tail", "").find("KeyboardInterrupt"), std::string::npos)
      << runs[0].results.dump();
  EXPECT_FALSE(rd.hook_events(runs[0].id).empty()) << "the range open at Ctrl+C is written at exit";
}

// Output that is not UTF-8 (binary bytes, a tail cut inside a character) is kept as text, and a
// program that never calls start() under --capture-range markers still gets its run.
TEST(Profile, BinaryOutputAndNoCaptureRangeStillMakeARun) {
  const fs::path dir = script_dir("profile-binary");
  const fs::path out = dir / "cap.sqlite";
  const auto r = hs::test::hookscope(
      {"profile", "-o", out.string(), "--capture-range", "markers", "--", hs::test::python(), "-c",
       "import sys; sys.stdout.buffer.write(b'\\xff\\xfe' + '\\u2588'.encode() * 9000); sys.stderr.write('e' * 5)"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  hs::storage::CaptureReader rd(out);
  const auto runs = rd.runs();
  ASSERT_EQ(runs.size(), 1u) << r.err;
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Complete) << runs[0].error;
  EXPECT_EQ(runs[0].results.value("stderr_tail", ""), "eeeee");
  EXPECT_NE(runs[0].results.value("stdout_tail", "").find("\u2588"), std::string::npos);
}

TEST(Profile, BadCommandLinesAreRefusedAndLeaveNothing) {
  const fs::path dir = script_dir("profile-bad");
  const fs::path out = dir / "cap.sqlite";
  auto r = hs::test::hookscope({"profile", "-o", out.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = hs::test::hookscope({"profile", "-o", out.string(), "--", (dir / "no-such-program").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot run"), std::string::npos) << r.err;
  r = hs::test::hookscope({"profile", "-o", out.string(), "--policies", "tree", "--", hs::test::python(), "-c", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--policies: 'tree'"), std::string::npos) << r.err;
  r = hs::test::hookscope({"profile", "-o", out.string(), "--capture-range", "markers", "--delay", "1", "--",
                           hs::test::python(), "-c", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // A folder, or a file that is no capture, is never written over (--force-overwrite included).
  r = hs::test::hookscope({"profile", "-o", dir.string(), "--force-overwrite", "--", hs::test::python(), "-c", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
  r = hs::test::hookscope({"profile", "-o", (dir / "tiny_net.py").string(), "--force-overwrite", "--", hs::test::python(),
                           "-c", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("not a hookscope capture"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(dir / "tiny_net.py"), kNet);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().extension(), ".py") << "nothing written: " << e.path();
}

}  // namespace
