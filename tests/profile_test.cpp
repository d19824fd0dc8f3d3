// `hookscope profile -- python SCRIPT.py`: a script written here (a small non-Llama model
// dispatched with accelerate's cpu_offload, compiled with Dynamo's eager backend, called in a
// loop with hookscope_torch.start() / stop() around the measured calls), profiled under both
// policies. Its breaks per run are compared with torch._dynamo.explain of the same model under
// the same policy, and its compile log with the same script's run without hookscope, in this test.
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "importers/dynamo_summary.h"
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

// argv: POLICY. The profiled script (`script.py 3 7`) run without hookscope under POLICY (the
// compile log of the process is its), then torch._dynamo.explain of the model, kept out of the log.
const char* kUnrecordedNet = R"(import json, runpy, sys, torch
policy = sys.argv[1]
if policy == "offload-only":
    from hookscope_torch import offload_only
    offload_only.apply()
sys.argv = ["script.py", "3", "7"]
try:
    runpy.run_path("script.py", run_name="__main__")
except SystemExit:
    pass
from hookscope_torch.dynamo_facts import trace_log_paused
from tiny_net import offloaded
torch._dynamo.reset()
with torch.no_grad(), trace_log_paused():
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
  write(dir / "unrecorded_net.py", kUnrecordedNet);
  return dir;
}

// The last stdout line of `script ARG` (JSON), run in `dir` by the project's Python, in a process
// of its own (without hookscope).
json python_json(const fs::path& dir, const std::string& script, const std::string& arg) {
  const std::string cmd = "cd '" + dir.string() + "' && PYTHONPATH='" + (hs::test::source_dir() / "python").string() +
                          "' '" + hs::test::python() + "' " + script + " " + arg + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) out = buf;  // the last line
  if (p) ::pclose(p);
  return json::parse(out);
}

// The compile-log figures of `script ARGS` run without hookscope (TORCH_TRACE set by hand,
// imported by `hookscope import --compile-log`): what Dynamo does when nobody records.
// With `stdout`, the script's last stdout line is parsed into it. `name`: the log's folder and
// capture in `dir` (one per run of a test).
json unrecorded_compile_log(const fs::path& dir, const std::string& script, const std::string& args,
                            json* stdout_json = nullptr, const std::string& name = "unrecorded") {
  const fs::path log = dir / (name + "_trace"), cap = dir / (name + ".sqlite");
  const std::string cmd = "cd '" + dir.string() + "' && PYTHONPATH='" + (hs::test::source_dir() / "python").string() +
                          "' TORCH_TRACE='" + log.string() + "' '" + hs::test::python() + "' " + script + " " + args +
                          " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string last;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) last = buf;
  if (!p || ::pclose(p) != 0) return {{"error", "the script failed: " + cmd}};
  if (stdout_json) *stdout_json = json::parse(last);
  const auto r = hs::test::hookscope({"import", "--compile-log", log.string(), "-o", cap.string()});
  if (r.exit_code != 0) return {{"error", r.err}};
  hs::storage::CaptureReader rd(cap);
  return rd.runs().at(0).results["import"]["compile_log"];
}

// The figures of a compile log that say what Dynamo did: equal with and without hookscope.
void expect_same_dynamo(const json& recorded, const json& unrecorded) {
  for (const char* k : {"compiles", "graph_count", "graph_break_count", "graph_breaks", "recompiles", "frames_skipped",
                        "recompile_limit_hits"})
    EXPECT_EQ(recorded.value(k, json()), unrecorded.value(k, json())) << k << "\nrecorded: " << recorded.dump()
                                                                       << "\nwithout hookscope: " << unrecorded.dump();
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
    EXPECT_EQ(run.results.value("stderr_tail", "").find("Profiler clears events"), std::string::npos)
        << "hookscope's profiler says nothing into the program's stderr";
    EXPECT_EQ(run.results["command"].back(), "7");
    std::set<std::string> notes;  // each note once (the import's are not stored again by profile)
    for (const auto& d : rd.diagnostics(run.id)) {
      if (d.run_id) {
        EXPECT_TRUE(notes.insert(d.text).second) << d.text;
      }
    }
    EXPECT_EQ(run.results["versions"].value("policy", ""), run.policy);
    // Dynamo's own count for the compiled model, as explain gives it for the same model, in the
    // process that ran the script without hookscope under the same policy.
    json want;
    const json unrecorded = unrecorded_compile_log(dir, "unrecorded_net.py", run.policy, &want, "unrecorded-" + run.policy);
    ASSERT_TRUE(want.contains("graph_count")) << want.dump() << unrecorded.dump();
    const json log = run.results["profile"]["imports"][0]["compile_log"];
    EXPECT_EQ(log.value("graph_count", -1), want["graph_count"]) << log.dump();
    EXPECT_EQ(log.value("graph_break_count", -1), want["graph_break_count"]) << log.dump();
    // The recording changed nothing Dynamo did: instrument.py's wrappers, its helpers and the
    // weights_map proxy are frames Dynamo never compiles (the compiles, recompiles and skipped
    // frames are the script's without hookscope).
    expect_same_dynamo(log, unrecorded);
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
  EXPECT_EQ(runs[0].scenario, "-c") << "filed under what Python runs, not an argument's .py";
  EXPECT_NE(r.err.find("no capture range was recorded"), std::string::npos) << "said as it happens\n" << r.err;
  const auto report = hs::test::hookscope({"report", out.string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("no capture range was recorded"), std::string::npos) << report.out;
  EXPECT_EQ(report.out.find("no hook call recorded"), std::string::npos) << "not the wrong cause\n" << report.out;
  // The figures it defines are those a profiled program can have: no generate's, no explain's.
  EXPECT_NE(report.out.find("- **exit status** ("), std::string::npos) << report.out;
  for (const char* absent : {"- **compiled decode** (", "- **graph breaks (Dynamo, one forward)** (", "- **captured regions†** ("})
    EXPECT_EQ(report.out.find(absent), std::string::npos) << absent;
  const auto ex = hs::test::hookscope({"explain", out.string(), "--run", std::to_string(runs[0].id)});
  EXPECT_NE(ex.out.find("Command: " + hs::test::python() + " -c 'import sys; "), std::string::npos)
      << "the command as it would be typed\n" << ex.out;
  EXPECT_EQ(runs[0].versions.value("torch", ""), runs[0].results["versions"].value("torch", "-")) << runs[0].versions;
  EXPECT_TRUE(runs[0].versions.contains("hookscope"));
}

// A model dispatched over cpu and disk, compiled, under offload-only: the hooks Dynamo traces
// (pre_forward / post_forward) are not wrapped once the program compiles, so a graph break inside
// them lands where it does without hookscope and the compile log is the program's own (a wrapper
// Dynamo inlined made this log 16 graphs and 13 recompile_reasons against 15 and 12). The
// compiler-disabled offload helpers keep their ranges: the weight onloads are recorded.
TEST(Profile, DynamoCompilesTheSameWithTheRecordingWhenTheHooksItTracesBreak) {
  const fs::path dir = script_dir("profile-disk-offload");
  write(dir / "disk.py", R"(import sys, tempfile, torch
from accelerate import dispatch_model
if len(sys.argv) > 1:
    from hookscope_torch import offload_only
    offload_only.apply()
from tiny_net import Net
torch.manual_seed(0)
model = dispatch_model(Net().eval(), device_map={"blocks.0": "cpu", "blocks.1": "disk", "blocks.2": "disk", "head": "cpu"},
                       offload_dir=tempfile.mkdtemp())
compiled = torch.compile(model, backend="eager")
with torch.no_grad():
    for _ in range(4):
        y = compiled(torch.randn(2, 16))
print(float(y.sum()))
)");
  const fs::path out = dir / "cap.sqlite";
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--policies", "offload-only", "--",
                                      hs::test::python(), (dir / "disk.py").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  hs::storage::CaptureReader rd(out);
  const auto run = rd.runs().at(0);
  const json unrecorded = unrecorded_compile_log(dir, "disk.py", "offload-only");
  ASSERT_FALSE(unrecorded.contains("error")) << unrecorded.dump();
  expect_same_dynamo(run.results["profile"]["imports"][0]["compile_log"], unrecorded);
  EXPECT_FALSE(rd.weight_swaps(run.id).empty()) << "the disk-offloaded blocks' onloads";
}

// A program that SIGINT ends without hookscope forwarding it (a `kill -INT` to the program, or
// hookscope started with SIGINT ignored): its run is incomplete, no further policy runs, as a
// shell's loop stops; and its `-c` command reads as it would be typed.
TEST(Profile, AProgramEndedBySigintStopsThePoliciesAndItsCommandReadsAsTyped) {
  const fs::path dir = script_dir("profile-sigint");
  const fs::path out = dir / "cap.sqlite";
  const std::string code = "import os, signal; print(\"it's here\"); os.kill(os.getpid(), signal.SIGINT)";
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--policies", "whole-hook,offload-only", "--",
                                      hs::test::python(), "-c", code});
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("ended by SIGINT: no further policy runs"), std::string::npos) << r.err;
  hs::storage::CaptureReader rd(out);
  const auto runs = rd.runs();
  ASSERT_EQ(runs.size(), 1u) << r.err;
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Incomplete) << runs[0].error;
  const std::string typed =
      hs::test::python() + " -c 'import os, signal; print(\"it'\\''s here\"); os.kill(os.getpid(), signal.SIGINT)'";
  EXPECT_NE(r.err.find("policy whole-hook: " + typed), std::string::npos) << "the progress line names the command\n" << r.err;
  const auto report = hs::test::hookscope({"report", out.string()});
  EXPECT_NE(report.out.find(typed), std::string::npos) << report.out;
}

// ---- diffusers' hooks ------------------------------------------------------------------------
// A tiny UNet2DModel made from a config (no download), group-offloaded by diffusers at block
// level (onload and offload device: the CPU; streams need an accelerator), and one with
// layerwise casting. The expected bytes are torch's sizes of each group's tensors.
const char* kUnet = R"(import torch
from diffusers import UNet2DModel

def unet():
    torch.manual_seed(0)
    return UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(8,), norm_num_groups=4, add_attention=False,
                       down_block_types=("DownBlock2D",), up_block_types=("UpBlock2D",)).eval()

def offloaded():
    model = unet()
    model.enable_group_offload(onload_device=torch.device("cpu"), offload_device=torch.device("cpu"),
                               offload_type="block_level", num_blocks_per_group=1)
    return model

def group_bytes():
    """Bytes per block-level group (one block each): each block of the model's ModuleLists,
    keyed by its FQN, and everything else (the top-level module's group, '')."""
    model = unet()
    size = lambda m: sum(t.numel() * t.element_size() for t in [*m.parameters(), *m.buffers()])
    groups = {f"{name}.{i}": size(block) for name, child in model.named_children()
              if isinstance(child, torch.nn.ModuleList) for i, block in enumerate(child)}
    groups[""] = size(model) - sum(groups.values())
    return groups

def inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(1, 3, 8, 8, generator=g), torch.tensor([3])
)";

// argv: OUT.json. One compiled call (compiles), then between the markers two eager calls, two
// compiled calls and one eager call of the layerwise-cast model.
const char* kUnetScript = R"(import json, sys, torch
import hookscope_torch
from tiny_unet import group_bytes, inputs, offloaded, unet

model = offloaded()
cast = unet()
cast.enable_layerwise_casting(storage_dtype=torch.bfloat16, compute_dtype=torch.float32)
compiled = torch.compile(model, backend="eager")
x, t = inputs()
with torch.no_grad():
    compiled(x, t)
    hookscope_torch.start()
    for _ in range(2):
        model(x, t)
    for _ in range(2):
        compiled(x, t)
    cast(x, t)
    hookscope_torch.stop()
cast_hooked = [n for n, m in cast.named_modules()
               if hasattr(m, "_diffusers_hook") and m._diffusers_hook.get_hook("layerwise_casting") is not None]
json.dump({"groups": group_bytes(), "cast_hooked": cast_hooked}, open(sys.argv[1], "w"))
print("diffusers-script-done")
)";

// argv: OUT.json. The profiled script run without hookscope (the compile log of the process is
// its), then torch._dynamo.explain of the offloaded model under each policy, kept out of the log
// (offload-only's patch applied after the whole-hook explain).
const char* kUnetExplain = R"(import json, runpy, sys, torch
sys.argv = ["unet_script.py", sys.argv[1]]
runpy.run_path("unet_script.py", run_name="__main__")
from hookscope_torch import offload_only
from hookscope_torch.dynamo_facts import trace_log_paused
from tiny_unet import inputs, offloaded
out = {}
for policy in ("whole-hook", "offload-only"):
    if policy == "offload-only":
        offload_only.apply()
    torch._dynamo.reset()
    with torch.no_grad(), trace_log_paused():
        e = torch._dynamo.explain(offloaded())(*inputs())
    out[policy] = {"graph_count": e.graph_count, "graph_break_count": e.graph_break_count}
print(json.dumps(out))
)";

TEST(Profile, DiffusersGroupOffloadingUnderBothPoliciesRecordsItsHooksGroupSwapsWithTheirBytesAndDynamosBreaks) {
  const fs::path dir = script_dir("profile-diffusers");
  write(dir / "tiny_unet.py", kUnet);
  write(dir / "unet_script.py", kUnetScript);
  write(dir / "explain_unet.py", kUnetExplain);
  const fs::path out = dir / "cap.sqlite", facts = dir / "facts.json";
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--policies", "whole-hook,offload-only",
                                      "--capture-range", "markers", "--", hs::test::python(),
                                      (dir / "unet_script.py").string(), facts.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("diffusers-script-done"), std::string::npos) << r.out;
  const json expected = json::parse(hs::test::read_file(facts));
  const auto& groups = expected["groups"];
  ASSERT_EQ(groups.size(), 3u) << groups.dump();  // down_blocks.0, up_blocks.0, the top-level group
  json explained;
  const json unrecorded = unrecorded_compile_log(dir, "explain_unet.py", (dir / "unrecorded.json").string(), &explained);
  ASSERT_TRUE(explained.contains("offload-only")) << explained.dump() << unrecorded.dump();
  hs::storage::CaptureReader rd(out);
  const auto runs = rd.runs();
  ASSERT_EQ(runs.size(), 2u) << r.err;
  for (const auto& run : runs) {
    SCOPED_TRACE(run.policy);
    EXPECT_EQ(run.status, hs::tracer::RunStatus::Complete) << run.error;
    // Dynamo's own count for the compiled model, as explain gives it for the same model.
    const json want = explained[run.policy];
    const json log = run.results["profile"]["imports"][0]["compile_log"];
    EXPECT_EQ(log.value("graph_count", -1), want["graph_count"]) << log.dump();
    EXPECT_EQ(log.value("graph_break_count", -1), want["graph_break_count"]) << log.dump();
    EXPECT_GT(want.value("graph_break_count", 0), 0) << "onload_ / offload_ are compiler-disabled";
    // The recording changed nothing Dynamo did: compiles, recompiles, skipped frames as without it.
    expect_same_dynamo(log, unrecorded);

    // One onload and one offload per group per call (2 eager, 2 compiled: onload_ and offload_
    // are compiler-disabled, so they run eagerly in compiled calls too), each with the bytes of
    // every tensor of the group, from and to the CPU.
    std::map<std::string, int> onloads, offloads;
    const auto swaps = rd.weight_swaps(run.id);
    for (const auto& s : swaps) {
      SCOPED_TRACE(s.module + " " + s.tensor);
      ASSERT_TRUE(groups.contains(s.module)) << "a swap of no group";
      EXPECT_EQ(s.bytes, groups[s.module].get<int64_t>());
      EXPECT_EQ(s.dtype, "float32");
      EXPECT_EQ(s.device, "cpu");
      EXPECT_FALSE(s.pinned);
      if (s.onload) {
        EXPECT_EQ(s.source, hs::events::WeightSource::Cpu);
      }
      ++(s.onload ? onloads : offloads)[s.module];
      EXPECT_EQ(s.tensor, s.module.empty() ? "conv_in+time_proj+time_embedding+mid_block+conv_norm_out+conv_act+conv_out"
                                           : "*");  // a block: all its own tensors
    }
    for (const auto& [g, bytes] : groups.items()) {
      EXPECT_EQ(onloads[g], 4) << g << " (" << bytes << " B)";
      EXPECT_EQ(offloads[g], 4) << g;
    }

    // diffusers' hook phases: GroupOffloadingHook's on each hooked module, for every eager
    // call at least; each eager onload lies inside its module's pre_forward.
    const auto hooks = rd.hook_events(run.id);
    std::map<std::tuple<std::string, std::string, int>, int> phases;
    for (const auto& h : hooks) ++phases[{h.hook, h.module, static_cast<int>(h.phase)}];
    for (const auto& [g, _] : groups.items()) {
      EXPECT_GE((phases[{"GroupOffloadingHook", g, static_cast<int>(hs::events::HookPhase::PreForward)}]), 2) << g;
      EXPECT_GE((phases[{"GroupOffloadingHook", g, static_cast<int>(hs::events::HookPhase::PostForward)}]), 2) << g;
      int inside = 0;
      for (const auto& s : swaps)
        if (s.onload && s.module == g)
          for (const auto& h : hooks)
            inside += h.hook == "GroupOffloadingHook" && h.module == g && h.phase == hs::events::HookPhase::PreForward &&
                      h.start_ns <= s.start_ns && s.end_ns <= h.end_ns;
      EXPECT_GE(inside, 2) << g;
    }
    // Layerwise casting: one pre_forward and one post_forward per cast module (one eager call).
    ASSERT_FALSE(expected["cast_hooked"].empty());
    for (const std::string m : expected["cast_hooked"]) {
      EXPECT_EQ((phases[{"LayerwiseCastingHook", m, static_cast<int>(hs::events::HookPhase::PreForward)}]), 1) << m;
      EXPECT_EQ((phases[{"LayerwiseCastingHook", m, static_cast<int>(hs::events::HookPhase::PostForward)}]), 1) << m;
    }
    // The hook's send_to_device of its inputs: the CPU to itself, nothing moved.
    const auto transfers = rd.transfers(run.id);
    EXPECT_FALSE(transfers.empty());
    for (const auto& t : transfers) EXPECT_EQ(t.bytes, 0) << t.module;

    // Every break at diffusers' onload_ / offload_ is attributed to the hooked module call it
    // happened under: the UNet's loops over its down and up blocks, and the compiled call itself.
    const json summary = hs::importers::dynamo_summary(rd, run.id);
    std::set<std::string> callees;
    int hook_breaks = 0;
    for (const auto& g : summary["break_reasons"]) {
      const std::string reason = g.value("reason", "");
      if (reason.find("ModuleGroup.onload_") == std::string::npos && reason.find("ModuleGroup.offload_") == std::string::npos)
        continue;
      hook_breaks += g["count"].get<int>();
      int attributed = 0;
      for (const auto& c : g["module_calls"]) {
        callees.insert(c["callee"].get<std::string>());
        attributed += c["count"].get<int>();
      }
      EXPECT_EQ(attributed, g["count"].get<int>()) << g.dump();
    }
    EXPECT_GT(hook_breaks, 0);
    for (const char* c : {"downsample_block", "upsample_block", "compiled"}) EXPECT_TRUE(callees.count(c)) << c;
  }
}

// ---- plain module hooks -----------------------------------------------------------------------
const char* kHookedNet = R"(import functools, torch
from tiny_net import Net

def scale_input(module, args):
    return (args[0] * 1.0,)

@torch.compiler.disable
def count_output(module, args, output):
    count_output.calls += 1
count_output.calls = 0

class Tracker:
    def note(self, module, args):
        pass

def hooked():
    torch.manual_seed(0)
    net = Net().eval()
    net.blocks[1].register_forward_pre_hook(scale_input)
    net.blocks[2].register_forward_hook(count_output)
    net.head.register_forward_pre_hook(Tracker().note)
    return net
)";

// Two eager calls of the hooked model and of a module nobody gave hookscope (named by its class),
// then two compiled calls, between the markers.
const char* kHookedScript = R"(import torch
import hookscope_torch
from hooked_net import hooked, scale_input

net = hooked()
loose = torch.nn.Linear(16, 16)
loose.register_forward_pre_hook(scale_input)
compiled = torch.compile(net, backend="eager")
x = torch.randn(2, 16)
with torch.no_grad():
    compiled(x)
    hookscope_torch.start()
    for _ in range(2):
        net(x)
        loose(x)
    for _ in range(2):
        compiled(x)
    hookscope_torch.stop()
print("hooked-script-done")
)";

const char* kHookedExplain = R"(import json, torch
from hooked_net import hooked
with torch.no_grad():
    e = torch._dynamo.explain(hooked())(torch.randn(2, 16))
print(json.dumps({"graph_count": e.graph_count, "graph_break_count": e.graph_break_count}))
)";

TEST(Profile, PlainForwardHooksAreModuleRangesNamedByTheModulesFqnAndTheirBreaksByTheHookedCall) {
  const fs::path dir = script_dir("profile-plain-hooks");
  write(dir / "hooked_net.py", kHookedNet);
  write(dir / "hooked_script.py", kHookedScript);
  write(dir / "explain_hooked.py", kHookedExplain);
  const fs::path out = dir / "cap.sqlite";
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--capture-range", "markers", "--",
                                      hs::test::python(), (dir / "hooked_script.py").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hooked-script-done"), std::string::npos) << r.out;
  hs::storage::CaptureReader rd(out);
  const auto runs = rd.runs();
  ASSERT_EQ(runs.size(), 1u) << r.err;
  const auto& run = runs[0];
  EXPECT_EQ(run.status, hs::tracer::RunStatus::Complete) << run.error;
  std::map<std::tuple<std::string, std::string, int>, int> ranges;
  for (const auto& h : rd.hook_events(run.id)) ++ranges[{h.hook, h.module, static_cast<int>(h.phase)}];
  const int pre = static_cast<int>(hs::events::HookPhase::PreForward), post = static_cast<int>(hs::events::HookPhase::PostForward);
  // The model given to torch.compile names its modules; every eager call records (compiled calls
  // may add the hooks Dynamo did not trace).
  EXPECT_GE((ranges[{"scale_input", "blocks.1", pre}]), 2);
  EXPECT_GE((ranges[{"Tracker.note", "head", pre}]), 2);
  // A module of no model hookscope saw: its class.
  EXPECT_EQ((ranges[{"scale_input", "Linear", pre}]), 2);
  // The compiler-disabled forward hook runs eagerly in compiled calls too: 2 + 2.
  EXPECT_EQ((ranges[{"count_output", "blocks.2", post}]), 4);
  for (const auto& [key, n] : ranges)
    EXPECT_TRUE(std::get<0>(key) == "scale_input" || std::get<0>(key) == "Tracker.note" || std::get<0>(key) == "count_output")
        << std::get<0>(key) << " on " << std::get<1>(key);
  // Dynamo's count is explain's for the same hooked model, and the break at the disabled hook is
  // attributed to the hooked module's call (Net.forward's `x = b(x)`).
  const json want = python_json(dir, "explain_hooked.py", "");
  const json log = run.results["profile"]["imports"][0]["compile_log"];
  EXPECT_EQ(log.value("graph_count", -1), want["graph_count"]) << log.dump();
  EXPECT_EQ(log.value("graph_break_count", -1), want["graph_break_count"]) << log.dump();
  EXPECT_GT(want.value("graph_break_count", 0), 0);
  expect_same_dynamo(log, unrecorded_compile_log(dir, "hooked_script.py", ""));
  bool attributed = false;
  const json summary = hs::importers::dynamo_summary(rd, run.id);
  for (const auto& g : summary["break_reasons"])
    if (g.value("reason", "").find("count_output") != std::string::npos)
      for (const auto& c : g["module_calls"])
        attributed |= c["callee"] == "b" && c["site"].get<std::string>().rfind("tiny_net.py:", 0) == 0;
  EXPECT_TRUE(attributed);
}

// A program whose own torch.profiler.profile() stopped hookscope's (one Kineto profiler per
// process): the range's trace is never written and stopping it raises. A stand-in program writes
// the profile.json such a Python program leaves (no Python needed): the run is failed with the
// reason and what to do, hookscope exits 1 though the program exited 0, and the report says the
// run failed, not "no hook call recorded".
TEST(Profile, AProgramWhoseOwnProfilerTookOverFailsItsRunWithTheReason) {
  const fs::path dir = hs::test::scratch_dir("profile-own-profiler");
  const fs::path out = dir / "cap.sqlite", doc = dir / "profile.json";
  write(doc, json{{"capture_range", "all"},
                  {"ranges", {{{"trace", nullptr}, {"start_ns", 1}, {"end_ns", nullptr}}}},
                  {"errors", {"stopping the profiler: RuntimeError: Can't disable Kineto profiler when it's not running"}}}
                 .dump());
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--", "/bin/sh", "-c",
                                      "cp \"$0\" \"$HOOKSCOPE_PROFILE_DIR/profile.json\"", doc.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the program's own torch.profiler took over hookscope's"), std::string::npos) << r.err;
  hs::storage::CaptureReader rd(out);
  const auto runs = rd.runs();
  ASSERT_EQ(runs.size(), 1u) << r.err;
  EXPECT_EQ(runs[0].status, hs::tracer::RunStatus::Failed);
  EXPECT_NE(runs[0].error.find("--capture-range markers and hookscope_torch.start() / stop(), or remove its profiler"),
            std::string::npos)
      << runs[0].error;
  const auto report = hs::test::hookscope({"report", out.string()});
  EXPECT_NE(report.out.find("the run failed: a capture range's trace was never written"), std::string::npos) << report.out;
  EXPECT_EQ(report.out.find("no hook call recorded"), std::string::npos) << report.out;
}

// A program that leaves no recording (a shell: no Python, so nothing is injected): the run is
// failed with the reason either way. A program that failed keeps its exit status; one that
// exited 0 makes hookscope's own failure, 1 — as `profile --help` says.
TEST(Profile, ARecordingThatFailedKeepsAFailedProgramsStatusAndIsOneAfterASuccess) {
  const fs::path dir = hs::test::scratch_dir("profile-no-recording-status");
  for (const auto& [program_status, want] : std::vector<std::pair<int, int>>{{3, 3}, {0, 1}}) {
    SCOPED_TRACE("exit " + std::to_string(program_status));
    const fs::path out = dir / ("cap-" + std::to_string(program_status) + ".sqlite");
    const auto r = hs::test::hookscope(
        {"profile", "-o", out.string(), "--", "/bin/sh", "-c", "exit " + std::to_string(program_status)});
    EXPECT_EQ(r.exit_code, want) << r.err;
    EXPECT_NE(r.err.find("hookscope: error: policy whole-hook: the program ended without writing its recording"),
              std::string::npos)
        << r.err;
    hs::storage::CaptureReader rd(out);
    ASSERT_EQ(rd.runs().size(), 1u) << r.err;
    EXPECT_EQ(rd.runs()[0].status, hs::tracer::RunStatus::Failed);
    EXPECT_EQ(rd.runs()[0].results.value("exit_status", -1), program_status);
  }
  const auto help = hs::test::hookscope({"profile", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("Exit status: the program's (the first non-zero one over the policies), also where a "
                          "recording failed;\n1 where the program exited 0 but a policy's recording failed"),
            std::string::npos)
      << help.out;
  EXPECT_EQ(help.out.find("unless its recording failed"), std::string::npos) << help.out;
}

// Each run keeps its own --label: an appended run's shows in the report's table of the programs'
// runs beside the first's (a shell stands in for the program: no Python).
TEST(Profile, AnAppendedRunsOwnLabelShowsInTheReport) {
  const fs::path dir = hs::test::scratch_dir("profile-append-label");
  const fs::path out = dir / "cap.sqlite";
  auto r = hs::test::hookscope({"profile", "-o", out.string(), "--label", "first try", "--", "/bin/sh", "-c", "exit 0"});
  ASSERT_TRUE(fs::exists(out)) << r.err;
  r = hs::test::hookscope(
      {"profile", "-o", out.string(), "--append", "--label", "second | try", "--", "/bin/sh", "-c", "exit 0"});
  hs::storage::CaptureReader rd(out);
  ASSERT_EQ(rd.runs().size(), 2u) << r.err;
  const auto report = hs::test::hookscope({"report", out.string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("| run | label | program |"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("| 1 | first try · whole-hook | "), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("| 2 | second \\| try · whole-hook | "), std::string::npos) << report.out;
}

// A program SIGINT ended: hookscope's last lines say what the interruption left — the run it
// stopped and the policies it kept from running (a shell stands in for the program: no Python).
TEST(Profile, AnInterruptionSaysWhichRunItStoppedAndWhichPoliciesDidNotRun) {
  const fs::path dir = hs::test::scratch_dir("profile-interrupted-says");
  const fs::path out = dir / "cap.sqlite";
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--policies", "whole-hook,offload-only", "--",
                                      "/bin/sh", "-c", "kill -INT $$"});
  EXPECT_NE(r.err.find("[hookscope] profile: interrupted by SIGINT: run 1 incomplete; policies not run: offload-only"),
            std::string::npos)
      << r.err;
  hs::storage::CaptureReader rd(out);
  ASSERT_EQ(rd.runs().size(), 1u) << r.err;
  EXPECT_EQ(rd.runs()[0].status, hs::tracer::RunStatus::Incomplete);
}

// A run without a capture range (a stand-in program leaves the profile.json of one that never
// called start()): its note is said once ("profile: run 1: no capture range…", not "profile:"
// twice), the verdict table shows "–" for its weight onloads as for its hook time, and explain
// --json gives null for the LibTorch engine's figure a profiled run cannot have.
TEST(Profile, ARunWithoutACaptureRangeSaysSoOnceAndShowsNoFigures) {
  const fs::path dir = hs::test::scratch_dir("profile-no-range-figures");
  const fs::path out = dir / "cap.sqlite", doc = dir / "profile.json";
  write(doc, json{{"capture_range", "markers"}, {"ranges", json::array()}, {"errors", json::array()}}.dump());
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--capture-range", "markers", "--", "/bin/sh", "-c",
                                      "cp \"$0\" \"$HOOKSCOPE_PROFILE_DIR/profile.json\"", doc.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[hookscope] profile: run 1: no capture range was recorded"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("profile: profile:"), std::string::npos) << r.err;
  const auto report = hs::test::hookscope({"report", out.string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("| weight onloads (bytes) | – |"), std::string::npos) << report.out;
  EXPECT_EQ(report.out.find("profile: profile:"), std::string::npos) << report.out;
  const auto ex = hs::test::hookscope({"explain", out.string(), "--run", "1", "--json"});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  const json e = json::parse(ex.out);
  EXPECT_TRUE(e["recorded_disabled_scope_entries"].is_null()) << e.dump();
  EXPECT_TRUE(e["disabled_scope_entries"].is_null()) << e.dump();
}

// hookscope started with SIGINT ignored (a background job of a script) cannot pass Ctrl+C on:
// it says so once at startup.
TEST(Profile, StartedWithSigintIgnoredItSaysCtrlCWillNotStopTheProgram) {
  const fs::path dir = hs::test::scratch_dir("profile-sigint-ignored");
  const fs::path out = dir / "cap.sqlite";
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGINT, &ignore, &previous);  // inherited by the hookscope the test starts
  const auto r = hs::test::hookscope({"profile", "-o", out.string(), "--", "/bin/sh", "-c", "true"});
  ::sigaction(SIGINT, &previous, nullptr);
  const std::string note = "[hookscope] profile: SIGINT is ignored in this process (started in the background?): Ctrl+C "
                           "will not stop the program; SIGTERM does";
  EXPECT_NE(r.err.find(note), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note), r.err.rfind(note)) << "once\n" << r.err;
  fs::remove(out);
  EXPECT_EQ(hs::test::hookscope({"profile", "-o", out.string(), "--", "/bin/sh", "-c", "true"}).err.find("SIGINT is ignored"),
            std::string::npos)
      << "not when SIGINT is watched";
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
  r = hs::test::hookscope({"profile", "-o", out.string(), "--policies", "whole-hook,offload-only,whole-hook", "--",
                           hs::test::python(), "-c", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--policies: 'whole-hook' is given twice"), std::string::npos) << r.err;
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
  // Nor into a checkpoint's folder (one holding a config.json): the program may load it.
  const fs::path model = dir / "model";
  fs::create_directories(model);
  std::ofstream(model / "config.json") << "{}";
  r = hs::test::hookscope({"profile", "-o", (model / "p.sqlite").string(), "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--out: " + (model / "p.sqlite").string() + " is or lies inside the model's folder"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::distance(fs::directory_iterator(model), fs::directory_iterator()), 1) << "nothing written there";
  fs::remove_all(model);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().extension(), ".py") << "nothing written: " << e.path();
}

}  // namespace
