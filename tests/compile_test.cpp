// The emulated compiler (compile/): regions cut at compiler-disabled scopes, graph breaks with
// Dynamo's wording, fullgraph errors that leave the process clean, top-level op counts,
// guards and recompiles, the cudagraphs fallback on CPU — first on synthetic functions with
// exact expected numbers, then on the tiny Llama dispatched over 4 emulated accelerators,
// where whole-hook breaks at every hooked module and offload-only captures one graph unless
// weights are offloaded. Logits must be identical to eager in every mode.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "compile/compile.h"
#include "hooks/big_modeling.h"
#include "hooks/device_map.h"
#include "hooks/runtime.h"
#include "models/generate.h"
#include "models/loader.h"
#include "tests/test_util.h"
#include "tracer/events.h"

using namespace hs::compile;
using hs::hooks::CompilerDisabledScope;
using hs::hooks::DeviceId;
namespace events = hs::events;
namespace hooks = hs::hooks;
namespace models = hs::models;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

torch::Tensor t23() { return torch::arange(6, torch::kFloat).reshape({2, 3}); }

// Records scope entries (to prove whether the engine's observer was installed).
struct CountingObserver : hooks::DisabledScopeObserver {
  int entries = 0;
  void on_enter(std::string_view, std::string_view, int) override { ++entries; }
  void on_exit(std::string_view, std::string_view, int) override {}
};

// Collects what the engine and the hooks report.
struct Sink : events::EventSink {
  std::vector<events::Region> regions;
  struct Break {
    std::string reason, function, module, stack;
  };
  std::vector<Break> breaks;
  std::vector<std::pair<std::string, std::string>> pre_forwards;  // (hook, module)
  void region(const events::Region& r) override { regions.push_back(r); }
  void graph_break(const events::GraphBreak& b) override {
    breaks.push_back({std::string(b.reason), std::string(b.function), std::string(b.module), std::string(b.module_stack)});
  }
  void hook_span(const events::HookSpan& h) override {
    if (h.phase == events::HookPhase::PreForward) pre_forwards.emplace_back(std::string(h.hook), std::string(h.module));
  }
};

// A fresh runtime per test, installed on the test's thread: 4 emulated accelerators,
// accelerate's messages dropped.
class WithRuntime : public ::testing::Test {
 protected:
  hooks::Runtime runtime_{hooks::RuntimeOptions{
      .accelerators = 4, .prefer_real = false, .log = [](const std::string&, const std::string&) {}}};
  hooks::RuntimeScope installed_{runtime_};
};
class CompileCapture : public WithRuntime {};
class CompileFullgraph : public WithRuntime {};
class CompileGuards : public WithRuntime {};
class CompileBackends : public WithRuntime {};

// Records to `sink` for a scope.
struct SinkScope {
  SinkScope(hooks::Runtime& rt, events::EventSink* s) : rt(rt) { rt.set_sink(s); }
  ~SinkScope() { rt.set_sink(nullptr); }
  hooks::Runtime& rt;
};

// add, scope F1 (one op inside), relu, scope F2 with a nested scope (two ops inside), neg.
c10::IValue three_regions(const std::vector<c10::IValue>& in) {
  torch::Tensor x = in.at(0).toTensor();
  torch::Tensor y = at::add(x, x);
  {
    CompilerDisabledScope s("Hook.f1", "m1");
    y = at::mul(y, y);
  }
  y = at::relu(y);
  {
    CompilerDisabledScope s("Hook.f2", "m2");
    CompilerDisabledScope inner("Hook.inner", "m2.sub");
    y = at::sub(y, x);
    y = at::abs(y);
  }
  return at::neg(y);
}

}  // namespace

// ------------------------------------------------------------------ modes and options

TEST(CompileOptions, ModesParseAndPrint) {
  for (Mode m : {Mode::Eager, Mode::Default, Mode::ReduceOverhead}) EXPECT_EQ(parse_mode(mode_name(m)), m);
  EXPECT_EQ(mode_name(Mode::ReduceOverhead), "reduce-overhead");
  try {
    parse_mode("max-autotune");
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "max-autotune"));
  }
  EXPECT_THROW(compile(three_regions, {.backend = "inductor"}), std::invalid_argument);
  EXPECT_THROW(compile(three_regions, {.cache_size_limit = 0}), std::invalid_argument);
}

// ------------------------------------------------------------------ regions and breaks

TEST_F(CompileCapture, OutermostScopesBreakTheGraphNestedOnesCountOnce) {
  auto cf = compile(three_regions);
  torch::Tensor out = cf.call_tensor({t23()});
  const CompileResult& r = cf.last_result();
  EXPECT_TRUE(torch::equal(out, three_regions({t23()}).toTensor()));
  ASSERT_EQ(r.region_count(), 3);
  EXPECT_EQ(r.graph_break_count(), 2);
  EXPECT_EQ(r.graph_count(), 3);
  EXPECT_TRUE(r.captured);
  EXPECT_TRUE(r.compiled);
  EXPECT_EQ(r.backend, "eager");
  ASSERT_EQ(r.breaks.size(), 2u);
  EXPECT_EQ(r.breaks[0].function, "Hook.f1");
  EXPECT_EQ(r.breaks[0].module, "m1");
  EXPECT_EQ(r.breaks[0].region_index, 0);
  EXPECT_EQ(r.breaks[1].function, "Hook.f2");
  EXPECT_EQ(r.breaks[1].module, "m2");
  EXPECT_EQ(r.breaks[1].region_index, 1);
  for (const auto& b : r.breaks) {
    EXPECT_EQ(b.reason, "Skip calling `torch.compiler.disable()`d function");
    EXPECT_EQ(b.explanation, "Skip calling function `" + b.function +
                                 "` since it was wrapped with `torch.compiler.disable` (reason: None)");
    EXPECT_TRUE(b.module_stack.empty()) << "no module was running";
  }
  // One top-level op per region; the disabled scopes ran mul, sub, abs eagerly.
  EXPECT_EQ(r.regions[0].op_count, 1);
  EXPECT_EQ(r.regions[1].op_count, 1);
  EXPECT_EQ(r.regions[2].op_count, 1);
  EXPECT_EQ(r.op_count(), 3);
  EXPECT_EQ(r.ops_outside_regions, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.regions[i].index, i);
    EXPECT_LE(r.regions[i].start_ns, r.regions[i].end_ns);
    if (i > 0) {
      EXPECT_LE(r.regions[i - 1].end_ns, r.regions[i].start_ns);
    }
  }
  EXPECT_LE(r.start_ns, r.regions.front().start_ns);
  EXPECT_GE(r.end_ns, r.regions.back().end_ns);

  ExplainOutput e = cf.explain();
  EXPECT_EQ(e.graph_count, 3);
  EXPECT_EQ(e.graph_break_count, 2);
  EXPECT_EQ(e.op_count, 3);
  EXPECT_EQ(e.ops_per_graph, (std::vector<int64_t>{1, 1, 1}));
  const std::string s = e.str();
  EXPECT_EQ(s.rfind("Graph Count: 3\nGraph Break Count: 2\nOp Count: 3\nBreak Reasons:\n  Break Reason 1:\n"
                    "    Reason: Skip calling `torch.compiler.disable()`d function\n    User Stack:\n",
                    0),
            0u)
      << s;
  EXPECT_TRUE(contains(s, "Hook.f2")) << s;
  EXPECT_TRUE(contains(s, "nothing is fused or sped up")) << s;
}

// Only the outermost scope's exit resumes capture: an op after a nested scope has exited, but
// still inside the outer one, runs eagerly.
TEST_F(CompileCapture, OnlyTheOutermostScopesExitResumesCapture) {
  auto fn = [](const std::vector<c10::IValue>& in) -> c10::IValue {
    torch::Tensor x = in.at(0).toTensor();
    torch::Tensor y = at::add(x, x);
    {
      CompilerDisabledScope outer("Hook.outer", "m");
      {
        CompilerDisabledScope inner("Hook.inner", "m.sub");
        y = at::mul(y, y);
      }
      y = at::sub(y, x);  // still inside Hook.outer: eager
    }
    return at::neg(y);
  };
  auto cf = compile(fn);
  cf.call_tensor({t23()});
  const CompileResult& r = cf.last_result();
  ASSERT_EQ(r.region_count(), 2);
  EXPECT_EQ(r.graph_break_count(), 1);
  EXPECT_EQ(r.regions[0].op_count, 1) << "add";
  EXPECT_EQ(r.regions[1].op_count, 1) << "neg";
  EXPECT_EQ(r.ops_outside_regions, 2) << "mul and sub ran eagerly";
}

TEST_F(CompileCapture, EmptyRegionsAreNotGraphs) {
  // A break at entry and a break right after a break leave empty regions: Dynamo never
  // compiles an empty graph, but both breaks count.
  auto cf = compile([](const std::vector<c10::IValue>& in) -> c10::IValue {
    { CompilerDisabledScope a("Hook.a", ""); }
    { CompilerDisabledScope b("Hook.b", ""); }
    return at::relu(in.at(0).toTensor());
  });
  cf({t23()});
  const CompileResult& r = cf.last_result();
  EXPECT_EQ(r.region_count(), 3);
  EXPECT_EQ(r.graph_break_count(), 2);
  EXPECT_EQ(r.graph_count(), 1);
  EXPECT_EQ(cf.explain().ops_per_graph, std::vector<int64_t>{1});
}

TEST_F(CompileCapture, CountsTopLevelAtenOpsOnly) {
  auto three = compile([](const std::vector<c10::IValue>& in) -> c10::IValue {
    const torch::Tensor& x = in.at(0).toTensor();
    return at::relu(at::mul(at::add(x, x), x));
  });
  three({t23()});
  EXPECT_EQ(three.last_result().op_count(), 3);
  EXPECT_EQ(three.last_result().graph_count(), 1);
  EXPECT_EQ(three.last_result().graph_break_count(), 0);

  // at::linear is composite (it calls transpose and addmm); it counts once.
  auto linear = compile([](const std::vector<c10::IValue>& in) -> c10::IValue {
    return at::linear(in.at(0).toTensor(), torch::ones({4, 3}));
  });
  linear({t23()});
  EXPECT_EQ(linear.last_result().op_count(), 2) << "ones + linear";
}

TEST_F(CompileCapture, EventsReachTheSink) {
  Sink sink;
  {
    SinkScope on(runtime_, &sink);
    compile(three_regions)({t23()});
  }
  ASSERT_EQ(sink.regions.size(), 3u);
  ASSERT_EQ(sink.breaks.size(), 2u);
  EXPECT_EQ(sink.breaks[0].function, "Hook.f1");
  EXPECT_EQ(sink.breaks[0].reason, "Skip calling `torch.compiler.disable()`d function");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sink.regions[i].index, static_cast<int>(i));
    EXPECT_EQ(sink.regions[i].op_count, 1);
    EXPECT_EQ(sink.regions[i].backend, "eager");
  }
}

TEST_F(CompileCapture, EagerModeRecordsNothingButTime) {
  CountingObserver obs;
  runtime_.scopes().observer = &obs;
  auto cf = compile(three_regions, {.mode = Mode::Eager});
  cf({t23()});
  runtime_.scopes().observer = nullptr;
  EXPECT_EQ(obs.entries, 3) << "the engine installed no observer of its own";
  const CompileResult& r = cf.last_result();
  EXPECT_FALSE(r.captured);
  EXPECT_TRUE(r.regions.empty());
  EXPECT_TRUE(r.breaks.empty());
  EXPECT_EQ(r.ops_outside_regions, 0);
  EXPECT_EQ(r.backend, "");
  EXPECT_GT(r.wall_ns(), 0);
  EXPECT_EQ(cf.cache_entries(), 0);
  EXPECT_EQ(cf.explain().graph_count, 0);
  EXPECT_TRUE(contains(cf.explain().str(), "nothing was captured"));
}

TEST_F(CompileCapture, PreviousObserverIsChainedAndRestored) {
  CountingObserver obs;
  runtime_.scopes().observer = &obs;
  auto cf = compile(three_regions);
  cf({t23()});
  EXPECT_EQ(runtime_.scopes().observer, &obs);
  EXPECT_EQ(obs.entries, 3) << "the engine's observer forwards every scope entry to the one it replaced";
  EXPECT_EQ(cf.last_result().graph_break_count(), 2);
  runtime_.scopes().observer = nullptr;
}

TEST_F(CompileCapture, CallInsideADisabledScopeRunsEagerly) {
  auto cf = compile(three_regions);
  {
    CompilerDisabledScope outer("Caller.disabled", "");
    cf({t23()});
  }
  EXPECT_FALSE(cf.last_result().captured);
  ASSERT_EQ(cf.last_result().diagnostics.size(), 1u);
  EXPECT_TRUE(contains(cf.last_result().diagnostics[0], "compiler-disabled scope"));
}

TEST_F(CompileCapture, NestedCompiledCallIsInlined) {
  auto inner = compile(three_regions, {.name = "inner"});
  auto outer = compile([&](const std::vector<c10::IValue>& in) -> c10::IValue {
    return at::neg(inner.call_tensor(in));
  });
  outer({t23()});
  EXPECT_EQ(outer.last_result().graph_break_count(), 2);
  EXPECT_EQ(outer.last_result().op_count(), 4);
  EXPECT_FALSE(inner.last_result().captured);
  ASSERT_FALSE(inner.last_result().diagnostics.empty());
  EXPECT_TRUE(contains(inner.last_result().diagnostics[0], "inlined"));
}

// ------------------------------------------------------------------ fullgraph

TEST_F(CompileFullgraph, FirstBreakThrowsUnsupportedNamingFunctionAndModule) {
  CountingObserver obs;
  runtime_.scopes().observer = &obs;
  bool ran_after_break = false;
  auto cf = compile(
      [&](const std::vector<c10::IValue>& in) -> c10::IValue {
        torch::Tensor y = at::add(in.at(0).toTensor(), 1);
        CompilerDisabledScope s("AlignDevicesHook.pre_forward", "model.layers.0");
        ran_after_break = true;
        return y;
      },
      {.fullgraph = true});
  try {
    cf({t23()});
    FAIL() << "expected Unsupported";
  } catch (const Unsupported& e) {
    const std::string w = e.what();
    EXPECT_EQ(w.rfind("Skip calling `torch.compiler.disable()`d function\n  Explanation: Skip calling function "
                      "`AlignDevicesHook.pre_forward` since it was wrapped with `torch.compiler.disable` "
                      "(reason: None)\n  Hint: Remove the `torch.compiler.disable` call\n\n  Developer debug "
                      "context: AlignDevicesHook.pre_forward (module model.layers.0)",
                      0),
              0u)
        << w;
    EXPECT_TRUE(contains(w, "gb0098.html")) << w;
    EXPECT_EQ(e.record().function, "AlignDevicesHook.pre_forward");
    EXPECT_EQ(e.record().module, "model.layers.0");
  }
  EXPECT_FALSE(ran_after_break);
  EXPECT_EQ(runtime_.scopes().observer, &obs) << "previous observer restored";
  EXPECT_EQ(CompilerDisabledScope::depth(), 0);
  EXPECT_TRUE(cf.last_result().failed);
  EXPECT_EQ(cf.last_result().graph_break_count(), 1);
  EXPECT_EQ(cf.cache_entries(), 0) << "a failed compile caches nothing";
  runtime_.scopes().observer = nullptr;

  // No stale RecordFunction callback or capture: a later call counts exactly.
  auto again = compile(three_regions);
  again({t23()});
  EXPECT_EQ(again.last_result().op_count(), 3);
  EXPECT_EQ(again.last_result().ops_outside_regions, 3);
}

TEST_F(CompileFullgraph, OneGraphPasses) {
  auto cf = compile(
      [](const std::vector<c10::IValue>& in) -> c10::IValue { return at::relu(in.at(0).toTensor()); },
      {.fullgraph = true});
  EXPECT_NO_THROW(cf({t23()}));
  EXPECT_EQ(cf.last_result().graph_count(), 1);
}

TEST_F(CompileFullgraph, ExecutionStackIsRestoredWhenAHookNeverReachesPostForward) {
  hooks::DeviceManager& dm = runtime_.devices();
  dm.push_execution(DeviceId::cpu());  // the caller's own entry survives
  auto cf = compile(
      [&](const std::vector<c10::IValue>&) -> c10::IValue {
        // What AlignDevicesHook.pre_forward does for an outer module; its post_forward (the
        // pop) never runs because a nested hook breaks the graph.
        dm.push_execution(DeviceId::accelerator(2));
        dm.push_execution(DeviceId::accelerator(3));
        CompilerDisabledScope s("AlignDevicesHook.pre_forward", "model.layers.1");
        return c10::IValue();
      },
      {.fullgraph = true});
  EXPECT_THROW(cf({}), Unsupported);
  ASSERT_TRUE(dm.current_execution().has_value());
  EXPECT_EQ(*dm.current_execution(), DeviceId::cpu());
  dm.pop_execution();
  EXPECT_FALSE(dm.current_execution().has_value());
}

TEST_F(CompileFullgraph, UserExceptionsPropagateAndLeaveNoCapture) {
  auto cf = compile([](const std::vector<c10::IValue>&) -> c10::IValue {
    CompilerDisabledScope s("Hook.throws", "m");
    throw std::runtime_error("boom in a disabled function");
  });
  EXPECT_THROW(cf({}), std::runtime_error);
  EXPECT_TRUE(cf.last_result().failed);
  EXPECT_TRUE(contains(cf.last_result().error, "boom"));
  EXPECT_EQ(runtime_.scopes().observer, nullptr);
  EXPECT_EQ(CompilerDisabledScope::depth(), 0);
  auto again = compile(three_regions);
  again({t23()});
  EXPECT_EQ(again.last_result().graph_break_count(), 2);
  EXPECT_EQ(again.last_result().op_count(), 3);
}

// ------------------------------------------------------------------ guards and recompiles

TEST_F(CompileGuards, NewShapeRecompilesWithDynamoReason) {
  int calls = 0;
  auto cf = compile(
      [&](const std::vector<c10::IValue>& in) -> c10::IValue {
        ++calls;
        return at::add(in.at(0).toTensor(), 1);
      },
      {.name = "forward"});
  cf({torch::ones({2, 5})});
  EXPECT_TRUE(cf.last_result().compiled);
  EXPECT_EQ(cf.last_result().frame.substr(cf.last_result().frame.find('/')), "/0");
  cf({torch::zeros({2, 5})});
  EXPECT_FALSE(cf.last_result().compiled) << "same signature: cache hit";
  EXPECT_EQ(cf.recompiles(), 0);
  cf({torch::ones({2, 1})});
  EXPECT_TRUE(cf.last_result().compiled);
  EXPECT_EQ(cf.last_result().cache_entry, 1);
  ASSERT_EQ(cf.recompiles(), 1);
  EXPECT_EQ(cf.recompile_log()[0].reason, "tensor 'args[0]' size mismatch at index 1. expected 5, actual 1");
  const std::string log = cf.recompile_log()[0].log("forward");
  EXPECT_TRUE(contains(log, "Recompiling function forward\n    triggered by the following guard failure(s):\n    - "))
      << log;
  EXPECT_TRUE(contains(log, "/0: tensor 'args[0]' size mismatch at index 1. expected 5, actual 1")) << log;
  EXPECT_EQ(cf.explain().recompiles, 1);
  EXPECT_EQ(cf.explain().recompile_reasons.at(0), "tensor 'args[0]' size mismatch at index 1. expected 5, actual 1");
  cf({torch::ones({2, 5})});
  EXPECT_EQ(cf.cache_entries(), 2) << "the first entry still matches";
  EXPECT_EQ(calls, 4);
}

TEST_F(CompileGuards, DtypeRankValueAndLogicalDeviceFailures) {
  hooks::DeviceManager& dm = runtime_.devices();
  InputSignature a = signature_of({torch::ones({2, 3}), c10::IValue(int64_t{3})});
  EXPECT_FALSE(guard_failure(a, signature_of({torch::zeros({2, 3}), c10::IValue(int64_t{3})})));
  EXPECT_EQ(*guard_failure(a, signature_of({torch::ones({2, 3}, torch::kDouble), c10::IValue(int64_t{3})})),
            "tensor 'args[0]' dtype mismatch. expected Float, actual Double");
  EXPECT_EQ(*guard_failure(a, signature_of({torch::ones({2, 3, 1}), c10::IValue(int64_t{3})})),
            "tensor 'args[0]' rank mismatch. expected 2, actual 3");
  EXPECT_EQ(*guard_failure(a, signature_of({torch::ones({2, 3}), c10::IValue(int64_t{4})})), "args[1] == 3");
  EXPECT_EQ(*guard_failure(a, signature_of({torch::ones({2, 3})})), "len(args) == 2");
  EXPECT_EQ(*guard_failure(a, signature_of({torch::ones({2, 3}), c10::IValue(2.5)})), "___check_type_id(args[1], int)");

  torch::Tensor on0 = dm.to(torch::ones({2, 3}), DeviceId::accelerator(0));
  torch::Tensor on1 = dm.to(torch::ones({2, 3}), DeviceId::accelerator(1));
  InputSignature s0 = signature_of({on0});
  EXPECT_EQ(*guard_failure(s0, signature_of({on1})),
            "tensor 'args[0]' Tensor device index mismatch. Expected device index to be 0, actual 1");
  EXPECT_EQ(*guard_failure(s0, signature_of({torch::ones({2, 3})})), "tensor 'args[0]' device mismatch. expected 0, actual cpu");
}

TEST_F(CompileGuards, CacheSizeLimitFallsBackToEagerOrFailsUnderFullgraph) {
  auto body = [](const std::vector<c10::IValue>& in) -> c10::IValue { return at::neg(in.at(0).toTensor()); };
  auto cf = compile(body, {.cache_size_limit = 2, .name = "f"});
  cf({torch::ones({1})});
  cf({torch::ones({2})});
  torch::Tensor out = cf.call_tensor({torch::ones({3})});
  EXPECT_TRUE(torch::equal(out, -torch::ones({3})));
  const CompileResult& r = cf.last_result();
  EXPECT_FALSE(r.captured);
  EXPECT_EQ(cf.cache_entries(), 2);
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_TRUE(contains(r.diagnostics[0], "hit config.recompile_limit (2)")) << r.diagnostics[0];
  EXPECT_TRUE(contains(r.diagnostics[0], "function: 'f'")) << r.diagnostics[0];
  EXPECT_TRUE(contains(r.diagnostics[0], "last reason: ")) << r.diagnostics[0];
  EXPECT_TRUE(contains(r.diagnostics[0], "/1: tensor 'args[0]' size mismatch at index 0. expected 2, actual 3"))
      << r.diagnostics[0];
  cf({torch::ones({2})});
  EXPECT_TRUE(cf.last_result().captured) << "cached signatures still run captured";

  auto strict = compile(body, {.fullgraph = true, .cache_size_limit = 1});
  strict({torch::ones({1})});
  try {
    strict({torch::ones({2})});
    FAIL() << "expected FailOnRecompileLimitHit";
  } catch (const FailOnRecompileLimitHit& e) {
    EXPECT_TRUE(contains(e.what(), "recompile_limit reached with fullgraph=True")) << e.what();
  }
}

TEST_F(CompileGuards, FrameIdsNumberFunctionsInTheOrderTheyFirstCompileInTheRuntime) {
  auto body = [](const std::vector<c10::IValue>& in) -> c10::IValue { return at::neg(in.at(0).toTensor()); };
  auto made_first = compile(body);
  auto made_second = compile(body);
  made_second({torch::ones({1})});
  made_first({torch::ones({1})});
  EXPECT_EQ(made_second.last_result().frame, "0/0");
  EXPECT_EQ(made_first.last_result().frame, "1/0");
  made_first({torch::ones({2})});
  EXPECT_EQ(made_first.last_result().frame, "1/1");
  made_first.reset();
  made_first({torch::ones({2})});
  EXPECT_EQ(made_first.last_result().frame, "1/0") << "reset drops the entries, not the frame id";
  auto eager = compile(body, {.mode = Mode::Eager});
  eager({torch::ones({1})});
  EXPECT_EQ(eager.last_result().frame, "") << "eager mode compiles nothing and takes no frame id";
  {
    hooks::Runtime other{hooks::RuntimeOptions{.log = [](const std::string&, const std::string&) {}}};
    hooks::RuntimeScope in_other{other};
    auto f = compile(body);
    f({torch::ones({1})});
    EXPECT_EQ(f.last_result().frame, "0/0") << "each runtime counts its own frames";
  }
  auto third = compile(body);
  third({torch::ones({1})});
  EXPECT_EQ(third.last_result().frame, "2/0");
}

// ------------------------------------------------------------------ threads

namespace {
hooks::RuntimeOptions quiet_runtime() {
  return {.accelerators = 2, .prefer_real = false, .log = [](const std::string&, const std::string&) {}};
}
}  // namespace

// Two threads, each driving its own runtime and compiled function, have their captures open at
// the same time (each function waits inside its capture until the other has begun): nothing
// process-wide serialises them, and neither counts the other's ops, scopes or events.
TEST(CompileThreads, CapturesInTheirOwnRuntimesOverlapAndStaySeparate) {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  std::vector<int> met(2, 0);
  std::vector<CompileResult> results(2);
  std::vector<std::string> errors(2);
  std::vector<Sink> sinks(2);
  auto work = [&](int t) {
    try {
      hooks::Runtime rt{quiet_runtime()};
      hooks::RuntimeScope installed{rt};
      SinkScope recording(rt, &sinks[t]);
      auto cf = compile(
          [&](const std::vector<c10::IValue>& in) -> c10::IValue {
            {
              std::unique_lock<std::mutex> lock(mu);
              ++inside;
              cv.notify_all();
              met[t] = cv.wait_for(lock, std::chrono::seconds(30), [&] { return inside == 2; });
            }
            return three_regions(in);
          },
          {.name = "f" + std::to_string(t)});
      cf({t23()});
      results[t] = cf.last_result();
    } catch (const std::exception& e) {
      errors[t] = e.what();
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  for (int t = 0; t < 2; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    ASSERT_EQ(errors[t], "");
    EXPECT_TRUE(met[t]) << "the other capture never began while this one was open";
    const CompileResult& r = results[t];
    EXPECT_TRUE(r.captured);
    EXPECT_EQ(r.frame, "0/0") << "each runtime numbers its own frames";
    EXPECT_EQ(r.region_count(), 3);
    EXPECT_EQ(r.graph_break_count(), 2);
    EXPECT_EQ(r.op_count(), 3);
    EXPECT_EQ(r.ops_outside_regions, 3);
    EXPECT_EQ(sinks[t].regions.size(), 3u);
    EXPECT_EQ(sinks[t].breaks.size(), 2u);
  }
}

// One compiled function called from several threads (each with its own runtime): its captured
// calls are serialised by its own lock, so its cache stays one consistent cache.
TEST(CompileThreads, OneFunctionSharedByThreadsKeepsOneCache) {
  auto cf = compile(three_regions, {.name = "shared"});
  const torch::Tensor x33 = torch::arange(9, torch::kFloat).reshape({3, 3});
  torch::Tensor want23, want33;
  {
    hooks::Runtime eager_rt{quiet_runtime()};
    hooks::RuntimeScope installed{eager_rt};
    want23 = three_regions({t23()}).toTensor();
    want33 = three_regions({x33}).toTensor();
  }
  constexpr int kThreads = 4, kCalls = 10;
  std::vector<std::string> errors(kThreads);
  std::vector<Sink> sinks(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        hooks::Runtime rt{quiet_runtime()};
        hooks::RuntimeScope installed{rt};
        SinkScope recording(rt, &sinks[t]);
        for (int i = 0; i < kCalls; ++i) {
          const bool small = (i + t) % 2 == 0;
          torch::Tensor out = cf.call_tensor({small ? t23() : x33});
          if (!torch::equal(out, small ? want23 : want33)) throw std::runtime_error("wrong output");
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(sinks[t].regions.size(), 3u * kCalls) << "thread " << t;
    EXPECT_EQ(sinks[t].breaks.size(), 2u * kCalls) << "thread " << t;
  }
  EXPECT_EQ(cf.cache_entries(), 2);
  EXPECT_EQ(cf.recompiles(), 1);
  EXPECT_EQ(cf.last_result().frame.substr(0, 2), "0/");
}

// ------------------------------------------------------------------ backends

TEST_F(CompileBackends, ReduceOverheadOnCpuSkipsCudagraphs) {
  auto cf = compile(three_regions, {.mode = Mode::ReduceOverhead});
  torch::Tensor out = cf.call_tensor({t23()});
  EXPECT_TRUE(torch::equal(out, three_regions({t23()}).toTensor()));
  const CompileResult first = cf.last_result();
  EXPECT_TRUE(first.captured);
  EXPECT_EQ(first.backend, "eager");
  ASSERT_EQ(first.diagnostics.size(), 1u);
  EXPECT_EQ(first.diagnostics[0], "skipping cudagraphs due to cpu device (args[0])");
  EXPECT_EQ(cf.diagnostics(), first.diagnostics);
  cf({t23()});
  EXPECT_FALSE(cf.last_result().compiled);
  EXPECT_EQ(cf.last_result().diagnostics, first.diagnostics) << "the fallback applies to every call of the entry";
  EXPECT_EQ(cf.diagnostics().size(), 1u) << "but is emitted once, when the entry compiles";
  const std::string s = cf.explain().str();
  EXPECT_TRUE(contains(s, "skipping cudagraphs due to cpu device (args[0])")) << s;
  EXPECT_TRUE(contains(s, "nothing is fused or sped up")) << s;

  auto def = compile(three_regions);
  def({t23()});
  EXPECT_TRUE(def.last_result().diagnostics.empty());
  auto cg = compile(three_regions, {.backend = "cudagraphs"});
  cg({t23()});
  EXPECT_EQ(cg.last_result().diagnostics, first.diagnostics);
}

TEST_F(CompileBackends, SelectBackendValidatesAndTheEagerSeamIsDriven) {
  EXPECT_THROW(select_backend("inductor", {}), std::invalid_argument);
  BackendChoice c = select_backend("eager", {});
  ASSERT_TRUE(c.backend);
  EXPECT_EQ(c.backend->name(), "eager");
  EXPECT_TRUE(c.diagnostics.empty());
  auto* eager = dynamic_cast<EagerRegionBackend*>(c.backend.get());
  ASSERT_NE(eager, nullptr);
  eager->begin_region(0);
  eager->end_region(RegionRecord{});
  EXPECT_EQ(eager->regions_begun(), 1);
  EXPECT_EQ(eager->regions_ended(), 1);
}

namespace {
// A stand-in for the GPU implementation, to check how the seam is consulted.
struct FakeGraphs final : RegionBackend {
  int* begun;
  explicit FakeGraphs(int* b) : begun(b) {}
  std::string_view name() const override { return "cudagraphs"; }
  void begin_region(int) override { ++*begun; }
  void end_region(const RegionRecord&) noexcept override {}
};
}  // namespace

TEST_F(CompileBackends, CpuInputsNeverReachAGivenCudaGraphsBackend) {
  int made = 0, begun = 0;
  CudaGraphsBackendFactory f = [&](const std::vector<c10::IValue>&) {
    ++made;
    return std::make_unique<FakeGraphs>(&begun);
  };
  auto cf = compile(three_regions, {.mode = Mode::ReduceOverhead, .cudagraphs_backend = f});
  cf({t23()});
  EXPECT_EQ(made, 0);
  EXPECT_EQ(begun, 0);
  EXPECT_EQ(cf.last_result().backend, "eager");
  EXPECT_EQ(cf.last_result().diagnostics, std::vector<std::string>{"skipping cudagraphs due to cpu device (args[0])"});
}

TEST_F(CompileBackends, CudaInputsUseTheGivenBackendOrSayThereIsNone) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  const torch::Tensor x = t23().to(torch::kCUDA);
  auto none = compile(three_regions, {.mode = Mode::ReduceOverhead});
  none({x});
  EXPECT_EQ(none.last_result().backend, "eager");
  ASSERT_EQ(none.last_result().diagnostics.size(), 1u);
  EXPECT_TRUE(contains(none.last_result().diagnostics[0], "no CUDA-graph region backend was given"));

  int made = 0, begun = 0;
  CudaGraphsBackendFactory f = [&](const std::vector<c10::IValue>&) {
    ++made;
    return std::make_unique<FakeGraphs>(&begun);
  };
  auto cf = compile(three_regions, {.mode = Mode::ReduceOverhead, .cudagraphs_backend = f});
  cf({x});
  EXPECT_EQ(made, 1);
  EXPECT_EQ(begun, 3) << "one begin_region per region";
  EXPECT_EQ(cf.last_result().backend, "cudagraphs");
  EXPECT_TRUE(cf.last_result().diagnostics.empty());
  for (const auto& r : cf.last_result().regions) EXPECT_EQ(r.backend, "cudagraphs");
}

TEST_F(CompileBackends, ExplainRunsOnceAndIgnoresFullgraph) {
  ExplainOutput e = explain(three_regions, {t23()}, {.mode = Mode::Eager, .fullgraph = true});
  EXPECT_EQ(e.graph_count, 3);
  EXPECT_EQ(e.graph_break_count, 2);
  EXPECT_EQ(e.break_reasons.size(), 2u);
  EXPECT_EQ(e.recompiles, 0);
}

// ------------------------------------------------------------------ the tiny Llama, dispatched

namespace {

constexpr int kDevices = 4;

hooks::DeviceMapEntries sharded_map(const models::CausalLM& model) {
  auto sizes = hooks::compute_module_sizes(model);
  const int64_t total = sizes[""];
  const int64_t largest = std::max({sizes["model.layers.0"], sizes["model.embed_tokens"], sizes["lm_head"]});
  hooks::InferAutoDeviceMapOptions o;
  hooks::MaxMemory mm;
  for (int i = 0; i < kDevices; ++i) mm.emplace_back(DeviceId::accelerator(i), largest + total / kDevices);
  mm.emplace_back(DeviceId::cpu(), total * 4);
  o.max_memory = mm;
  o.no_split_module_classes = model.no_split_modules();
  return hooks::infer_auto_device_map(model, o);
}

class CompiledLlama : public WithRuntime {
 protected:
  void SetUp() override {
    lm_ = models::load_model(hs::test::tiny_checkpoint("tiny-llama").string());
    ids_ = torch::tensor(std::vector<int64_t>{5, 17, 99, 3, 42, 7, 12, 64}).remainder(lm_.config.vocab_size).unsqueeze(0);
  }
  // One full forward with a fresh cache; all positions' logits.
  Function forward() {
    auto model = lm_.model;
    return [model](const std::vector<c10::IValue>& in) -> c10::IValue {
      auto cache = models::KVCache::dynamic_cache(model->config().num_hidden_layers);
      return model->forward(in.at(0).toTensor(), cache, 0);
    };
  }
  torch::Tensor eager_logits() { return forward()({ids_}).toTensor(); }
  // FQNs of the modules that carry a hook and were called (their hook's pre_forward ran).
  std::set<std::string> hooked_and_called(const Sink& s) {
    std::set<std::string> out;
    for (const auto& [hook, module] : s.pre_forwards) out.insert(module);
    return out;
  }
  models::LoadedModel lm_;
  torch::Tensor ids_;
};

}  // namespace

TEST_F(CompiledLlama, WholeHookBreaksAtEveryHookedModuleBoundary) {
  hooks::dispatch_model(lm_.model, sharded_map(*lm_.model));
  const torch::Tensor want = eager_logits();

  Sink sink;
  auto cf = compile(forward());
  torch::Tensor got;
  {
    SinkScope on(runtime_, &sink);
    got = cf.call_tensor({ids_});
  }
  EXPECT_TRUE(torch::equal(got, want)) << "default mode changes no numerics";
  const CompileResult& r = cf.last_result();
  ASSERT_GT(r.graph_break_count(), 0);
  EXPECT_EQ(r.region_count(), r.graph_break_count() + 1);
  EXPECT_GT(r.op_count(), 0);
  EXPECT_GT(r.ops_outside_regions, 0) << "the hooks' device moves run eagerly";

  // One break per hooked module boundary: a pre_forward and a post_forward break per call of
  // every module that carries a hook, and nowhere else.
  std::map<std::string, int> pre, post;
  std::set<std::string> break_modules;
  for (const auto& b : r.breaks) {
    break_modules.insert(b.module);
    if (b.function == "AlignDevicesHook.pre_forward")
      ++pre[b.module];
    else if (b.function == "AlignDevicesHook.post_forward")
      ++post[b.module];
    else
      ADD_FAILURE() << "unexpected break function " << b.function;
    ASSERT_FALSE(b.module_stack.empty());
    EXPECT_EQ(b.module_stack.back(), b.module) << "the innermost running module is the hooked one";
    EXPECT_EQ(b.module_stack.front(), "") << "the root is outermost";
    EXPECT_EQ(b.module_stack.size(), b.module_classes.size());
  }
  const std::set<std::string> hooked = hooked_and_called(sink);
  EXPECT_GE(hooked.size(), 10u);
  EXPECT_EQ(break_modules, hooked);
  EXPECT_EQ(pre, post);
  std::map<std::string, int> calls;
  for (const auto& [hook, module] : sink.pre_forwards)
    if (hook == "AlignDevicesHook") ++calls[module];
  EXPECT_EQ(pre, calls) << "every hooked call breaks once on entry";
  EXPECT_EQ(sink.breaks.size(), r.breaks.size());
  EXPECT_EQ(sink.regions.size(), r.regions.size());

  const std::string s = cf.explain().str();
  EXPECT_TRUE(contains(s, "Graph Break Count: " + std::to_string(r.graph_break_count()) + "\n")) << s;
}

TEST_F(CompiledLlama, WholeHookFullgraphRaisesNamingAlignDevicesHookPreForward) {
  hooks::dispatch_model(lm_.model, sharded_map(*lm_.model));
  const torch::Tensor want = eager_logits();
  auto cf = compile(forward(), {.fullgraph = true});
  try {
    cf({ids_});
    FAIL() << "expected Unsupported";
  } catch (const Unsupported& e) {
    const std::string w = e.what();
    EXPECT_TRUE(contains(w, "Skip calling `torch.compiler.disable()`d function")) << w;
    EXPECT_TRUE(contains(w, "AlignDevicesHook.pre_forward")) << w;
    const std::string& m = e.record().module;
    EXPECT_TRUE(contains(w, "(module " + (m.empty() ? std::string("<root>") : m) + ")")) << w;
    EXPECT_NE(models::get_submodule(lm_.model, m)->hook(), nullptr) << "the named module carries the hook";
  }
  EXPECT_EQ(runtime_.scopes().observer, nullptr);
  EXPECT_FALSE(runtime_.devices().current_execution().has_value());
  EXPECT_EQ(CompilerDisabledScope::depth(), 0);
  EXPECT_TRUE(torch::equal(eager_logits(), want)) << "a later run is not corrupted";
  auto plain = compile(forward());
  EXPECT_TRUE(torch::equal(plain.call_tensor({ids_}), want));
}

TEST_F(CompiledLlama, OffloadOnlyShardedCapturesOneGraphAndFullgraphWorks) {
  hooks::dispatch_model(lm_.model, sharded_map(*lm_.model));
  runtime_.set_compile_policy(hooks::CompilePolicy::OffloadOnly);
  const torch::Tensor want = eager_logits();

  auto cf = compile(forward());
  EXPECT_TRUE(torch::equal(cf.call_tensor({ids_}), want));
  EXPECT_EQ(cf.last_result().graph_break_count(), 0);
  EXPECT_EQ(cf.last_result().graph_count(), 1);
  EXPECT_EQ(cf.last_result().ops_outside_regions, 0);
  EXPECT_GT(cf.last_result().op_count(), 0);

  auto full = compile(forward(), {.fullgraph = true});
  torch::Tensor got;
  EXPECT_NO_THROW(got = full.call_tensor({ids_}));
  EXPECT_TRUE(torch::equal(got, want));
  EXPECT_EQ(full.last_result().graph_count(), 1);
  EXPECT_EQ(full.last_result().op_count(), cf.last_result().op_count());

  auto ro = compile(forward(), {.mode = Mode::ReduceOverhead});
  EXPECT_TRUE(torch::equal(ro.call_tensor({ids_}), want));
  ASSERT_EQ(ro.last_result().diagnostics.size(), 1u);
  EXPECT_EQ(ro.last_result().diagnostics[0], "skipping cudagraphs due to cpu device (args[0])");

  // Decode-shaped input: a recompile, in Dynamo's words.
  torch::Tensor step = ids_.index({torch::indexing::Slice(), torch::indexing::Slice(0, 1)});
  cf({step});
  ASSERT_EQ(cf.recompiles(), 1);
  EXPECT_EQ(cf.recompile_log()[0].reason, "tensor 'args[0]' size mismatch at index 1. expected 8, actual 1");
}

TEST_F(CompiledLlama, CpuOffloadUnderOffloadOnlyBreaksAtOnloadWeights) {
  hooks::cpu_offload(lm_.model, DeviceId::accelerator(0));
  runtime_.set_compile_policy(hooks::CompilePolicy::OffloadOnly);
  const torch::Tensor want = eager_logits();
  auto all_meta = [&] {
    for (const auto& [n, t] : models::named_parameters(*lm_.model))
      if (!t.is_meta()) return false;
    return true;
  };
  ASSERT_TRUE(all_meta());

  auto cf = compile(forward());
  EXPECT_TRUE(torch::equal(cf.call_tensor({ids_}), want));
  const CompileResult& r = cf.last_result();
  EXPECT_GT(r.graph_break_count(), 0);
  std::map<std::string, int> by_function;
  for (const auto& b : r.breaks) ++by_function[b.function];
  EXPECT_GT(by_function["AlignDevicesHook._onload_weights"], 0);
  EXPECT_EQ(by_function["AlignDevicesHook._onload_weights"], by_function["AlignDevicesHook._offload_weights"]);
  EXPECT_EQ(by_function.size(), 2u) << "no other break sites under offload-only";
  EXPECT_TRUE(all_meta());

  auto full = compile(forward(), {.fullgraph = true});
  try {
    full({ids_});
    FAIL() << "expected Unsupported";
  } catch (const Unsupported& e) {
    EXPECT_TRUE(contains(e.what(), "AlignDevicesHook._onload_weights")) << e.what();
    EXPECT_EQ(e.record().function, "AlignDevicesHook._onload_weights");
    EXPECT_TRUE(contains(e.what(), "(module " + e.record().module + ")")) << e.what();
  }
  EXPECT_TRUE(all_meta()) << "the break came before any weight was onloaded";
  EXPECT_FALSE(runtime_.devices().current_execution().has_value());
  EXPECT_TRUE(torch::equal(eager_logits(), want));

  runtime_.set_compile_policy(hooks::CompilePolicy::WholeHook);
  auto whole = compile(forward());
  EXPECT_TRUE(torch::equal(whole.call_tensor({ids_}), want));
  for (const auto& b : whole.last_result().breaks)
    EXPECT_NE(b.function, "AlignDevicesHook._onload_weights") << "whole-hook guards pre_forward as a whole";
}

TEST_F(CompiledLlama, GreedyDecodeThroughACompiledForwardRecompilesOnceForDecodeShapes) {
  hooks::dispatch_model(lm_.model, sharded_map(*lm_.model));
  runtime_.set_compile_policy(hooks::CompilePolicy::OffloadOnly);
  const int64_t n = 5;
  models::GenerateOptions go;
  go.max_new_tokens = n;
  std::vector<int64_t> prompt(ids_.data_ptr<int64_t>(), ids_.data_ptr<int64_t>() + ids_.numel());
  // transformers' tokens for the same checkpoint (not the port's own eager decode, which the
  // eager backend could not tell apart from the compiled one).
  const std::vector<int64_t> want = hs::test::transformers_greedy(hs::test::tiny_checkpoint("tiny-llama"), prompt, n);

  auto model = lm_.model;
  auto cf = compile(
      [model](const std::vector<c10::IValue>& in) -> c10::IValue {
        return model->forward(in.at(0).toTensor(), models::cache_from_ivalue(&in.at(1)), 1);
      },
      {.name = "forward"});
  auto cache = models::KVCache::dynamic_cache(lm_.config.num_hidden_layers);
  std::vector<int64_t> got;
  torch::Tensor input = ids_;
  for (int64_t i = 0; i < n; ++i) {
    torch::Tensor logits = cf.call_tensor({input, models::cache_ivalue(cache)});
    EXPECT_EQ(cf.last_result().graph_break_count(), 0);
    const int64_t next = logits.index({0, -1}).argmax().item<int64_t>();
    got.push_back(next);
    input = torch::tensor(std::vector<int64_t>{next}).unsqueeze(0);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(cf.cache_entries(), 2) << "prefill [1, 8] and decode [1, 1]; the cache object guards by type only";
  ASSERT_EQ(cf.recompiles(), 1);
  EXPECT_EQ(cf.recompile_log()[0].reason, "tensor 'args[0]' size mismatch at index 1. expected 8, actual 1");
}
