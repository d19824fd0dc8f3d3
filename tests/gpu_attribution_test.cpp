// GPU work named after the hook call or module forward that launched it, without a GPU: the
// LibTorch engine runs a real dispatched tiny Llama with a fake CUPTI tracer that keeps the
// external-id stack the way CUPTI does (per thread, innermost on top). Every ATen op the run
// dispatches stands for a kernel and every real copy for a memcpy, each stamped with the id on
// top of the stack when it was launched, as CUPTI's EXTERNAL_CORRELATION records are; they go
// through the Store, and `stats --report gpu_by_caller` must name the hook or forward that
// was running: the module of each copy is the one TRANSFERS names for it.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include "engines/cupti_correlation.h"
#include "engines/libtorch_engine.h"
#include "reports/stats.h"
#include "storage/capture_reader.h"
#include "storage/store.h"
#include "hooks/hooks.h"
#include "tests/test_modules.h"
#include "tests/test_util.h"
#include "tracer/host_tracer.h"

namespace {

namespace fs = std::filesystem;
using namespace hs;

// CUPTI's external-id stack, and the GPU records a real run would have made.
class FakeCupti final : public tracer::CuptiTracer {
 public:
  bool available() const noexcept override { return true; }
  std::string status() const override { return "fake CUPTI"; }
  void start(int64_t, const tracer::CuptiOptions&, tracer::ActivityWriter&) override {}
  void flush() override {}
  void stop() override {}
  void push_external_id(tracer::ExternalKind kind, uint64_t id) noexcept override {
    if (kind != tracer::ExternalKind::Custom1) ++wrong_kind;
    if (id == 0 || !ever_pushed.insert(id).second) ++bad_ids;  // ids are fresh and non-zero
    stack.push_back(id);
    ++pushes;
  }
  void pop_external_id(tracer::ExternalKind) noexcept override {
    if (stack.empty()) {
      ++pops_on_empty;
      return;
    }
    stack.pop_back();
    ++pops;
  }
  std::vector<tracer::ClockSample> calibrate(int) override { return {}; }
  uint64_t dropped_records() const noexcept override { return 0; }

  // A record launched now: its correlation id, and the external id CUPTI would tie it to.
  uint32_t launch() {
    const uint32_t corr = ++last_correlation;
    if (!stack.empty()) externals.push_back({tracer::ExternalKind::Custom1, stack.back(), corr});
    return corr;
  }

  std::vector<uint64_t> stack;
  std::set<uint64_t> ever_pushed;
  int64_t pushes = 0, pops = 0, pops_on_empty = 0, wrong_kind = 0, bad_ids = 0;
  uint32_t last_correlation = 0;
  std::vector<tracer::ExternalCorrelation> externals;
};

// Every real copy a memcpy (with the module the transfer is recorded under), every ATen op a
// kernel, each launched through the fake.
class GpuWork final : public hooks::RuntimeSubscriber {
 public:
  explicit GpuWork(FakeCupti& cupti) : cupti_(cupti) {}
  void on_move(const hooks::Move& m) override {
    tracer::MemcpyActivity c{};
    c.bytes = m.bytes;
    c.copy_kind = tracer::MemcpyKind::DtoD;
    c.correlation_id = cupti_.launch();
    c.start_ns = m.start_ns, c.end_ns = m.end_ns;
    memcpys.push_back(c);
  }
  void op() {
    tracer::KernelActivity k{};
    k.correlation_id = cupti_.launch();
    k.demangled_name = "kernel", k.short_name = "kernel";
    k.start_ns = 0, k.end_ns = 1;
    kernels.push_back(k);
  }
  std::vector<tracer::MemcpyActivity> memcpys;
  std::vector<tracer::KernelActivity> kernels;

 private:
  FakeCupti& cupti_;
};

struct Captured {
  fs::path file;
  int64_t run = 0;
  FakeCupti cupti;
  int64_t memcpys = 0, kernels = 0;
};

void capture(Captured& c, engines::Scenario scenario, compile::Mode mode, const std::string& name) {
  engines::LibTorchEngineOptions o;
  o.model = test::tiny_checkpoint("tiny-llama").string();
  o.accelerators = 2;
  o.prompt_ids = {5, 17, 99, 3};
  o.max_new_tokens = 3;
  o.repeats = 1;
  o.warmup = 0;
  o.offload_dir = test::scratch_dir(name + "-offload");
  o.log = [](const std::string&, const std::string&) {};
  engines::LibTorchEngine engine(o);
  engine.prepare(scenario);
  c.file = test::scratch_dir(name) / "capture.sqlite";
  storage::Store store(c.file, {.overwrite = true});
  tracer::HostTracer tracer(store);
  engines::Cell cell{scenario, hooks::CompilePolicy::WholeHook, mode, false, ""};
  tracer::RunInfo info;
  info.scenario = engines::scenario_name(scenario);
  info.policy = "whole-hook";
  info.mode = compile::mode_name(mode);
  info.engine = "libtorch";
  c.run = tracer.begin_run(info);
  GpuWork work(c.cupti);
  engines::RunResult r;
  {
    auto sub = engine.runtime().subscribe(work);
    thread_local GpuWork* current = nullptr;
    current = &work;
    auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
          if (current) current->op();
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION}));
    engines::RunContext ctx{tracer, store, c.run, {}, &c.cupti};
    r = engine.run(cell, ctx);
    at::removeCallback(handle);
    current = nullptr;
  }
  ASSERT_EQ(r.outcome, engines::RunResult::Outcome::Ok) << r.error;
  tracer.end_run(tracer::RunStatus::Complete);
  tracer::ActivityBatch b;
  b.run_id = c.run;
  b.memcpys = work.memcpys;
  b.kernels = work.kernels;
  b.external_correlations = c.cupti.externals;
  store.write_activity(b);
  store.finalize();
  c.memcpys = static_cast<int64_t>(work.memcpys.size());
  c.kernels = static_cast<int64_t>(work.kernels.size());
}

std::map<std::string, int64_t> count_by(const std::vector<reports::GpuCallerRow>& rows, const std::string& kind_prefix,
                                        bool by_module) {
  std::map<std::string, int64_t> out;
  for (const auto& r : rows)
    if (r.kind.rfind(kind_prefix, 0) == 0) out[by_module ? r.caller + " " + r.module : r.caller] += r.count;
  return out;
}

// A SequentialHook runs an AlignDevicesHook's pre_forward inside its own call: the forward's id
// must go on once the SequentialHook's call is off, or that call's id would stay under it.
TEST(GpuAttribution, ASequentialHooksCallComesOffBeforeTheForwardGoesOn) {
  hooks::Runtime runtime{hooks::RuntimeOptions{.accelerators = 0}};
  hooks::RuntimeScope installed{runtime};
  events::EventSink sink;  // records nothing, but the runtime is recording
  runtime.set_sink(&sink);
  auto m = std::make_shared<test::ModelForTest>();
  auto align = std::make_shared<hooks::AlignDevicesHook>();
  align->execution_device = hooks::DeviceId::cpu();
  hooks::add_hook_to_module(*m->linear1, align);
  hooks::add_hook_to_module(*m->linear1, std::make_shared<hooks::ModelHook>(), /*append=*/true);  // SequentialHook
  FakeCupti cupti;
  size_t depth_in_forward = 0;
  struct Probe final : hooks::RuntimeSubscriber {
    FakeCupti* cupti;
    size_t* depth;
    void on_hook_begin(const hooks::HookCall& c) override {  // the outermost post_forward: the SequentialHook's
      if (c.phase == events::HookPhase::PostForward && c.hook_class() == "SequentialHook") *depth = cupti->stack.size();
    }
  } probe;
  probe.cupti = &cupti;
  probe.depth = &depth_in_forward;
  auto sub = runtime.subscribe(probe);  // before corr: sees the stack as the forward left it
  {
    engines::CuptiCorrelation corr(runtime, cupti);
    m->call_tensor({{torch::randn({2, 3})}, {}});
    EXPECT_TRUE(corr.pushed().empty()) << "left on the stack: " << testing::PrintToString(corr.pushed());
    EXPECT_EQ(cupti.pushes, cupti.pops);
  }
  EXPECT_EQ(depth_in_forward, 1u) << "during linear1's forward only its own id is on the stack";
  EXPECT_EQ(cupti.pops_on_empty, 0);
  runtime.set_sink(nullptr);
}

TEST(GpuAttribution, EveryCallPushesItsOwnIdAndTheStackUnwinds) {
  Captured c;
  capture(c, engines::Scenario::Sharded, compile::Mode::Default, "gpu-attr-sharded");
  EXPECT_GT(c.cupti.pushes, 0);
  EXPECT_EQ(c.cupti.pushes, c.cupti.pops) << "every id pushed is popped by the end of the run";
  EXPECT_TRUE(c.cupti.stack.empty());
  EXPECT_EQ(c.cupti.pops_on_empty, 0);
  EXPECT_EQ(c.cupti.wrong_kind, 0) << "hookscope pushes CUSTOM1, as Kineto does for annotations";
  EXPECT_EQ(c.cupti.bad_ids, 0) << "every id is fresh and non-zero";
  // The ids pushed are exactly the recorded hook calls' and forwards' ids.
  storage::CaptureReader rd(c.file);
  std::set<uint64_t> recorded;
  for (const auto& h : rd.hook_events(c.run)) recorded.insert(static_cast<uint64_t>(h.external_id));
  size_t forwards = 0;
  for (const auto& m : rd.module_compute(c.run)) {
    recorded.insert(static_cast<uint64_t>(m.external_id));
    ++forwards;
  }
  EXPECT_GT(forwards, 0u);
  EXPECT_EQ(recorded.count(0), 0u) << "every recorded call has an id";
  EXPECT_EQ(recorded, c.cupti.ever_pushed);
}

TEST(GpuAttribution, CopiesAndKernelsNameTheHookOrForwardThatLaunchedThem) {
  Captured c;
  capture(c, engines::Scenario::CpuOffload, compile::Mode::Eager, "gpu-attr-offload");
  storage::CaptureReader rd(c.file);
  const auto stats = reports::compute_stats(rd, {.reports = {"gpu_by_caller"}, .run = c.run});
  ASSERT_EQ(stats.size(), 1u);
  const auto& rows = stats[0].gpu_by_caller;
  int64_t memcpys = 0, kernels = 0;
  for (const auto& r : rows) (r.kind == "kernel" ? kernels : memcpys) += r.count;
  EXPECT_EQ(memcpys, c.memcpys);
  EXPECT_EQ(kernels, c.kernels);
  // Copies: activations moved by pre_/post_forward (send_to_device) and weights onloaded by
  // pre_forward; none from a module's own forward, none unattributed.
  const auto copies = count_by(rows, "memcpy", false);
  EXPECT_GT(copies.count("AlignDevicesHook.pre_forward") ? copies.at("AlignDevicesHook.pre_forward") : 0, 0)
      << testing::PrintToString(copies);
  EXPECT_EQ(copies.count("(unattributed)"), 0u) << testing::PrintToString(copies);
  EXPECT_EQ(copies.count("forward"), 0u) << testing::PrintToString(copies);
  // Each activation transfer's module is the one TRANSFERS records for it.
  std::map<std::string, int64_t> want;
  for (const auto& t : rd.transfers(c.run)) ++want[t.module.empty() ? "<root>" : t.module];
  std::map<std::string, int64_t> got;
  for (const auto& r : rows)
    if (r.kind.rfind("memcpy", 0) == 0) got[r.module] += r.count;
  for (const auto& [module, n] : want) EXPECT_GE(got[module], n) << module;
  // Kernels: most run inside the modules' forwards, each decoder layer's among them.
  const auto by_module = count_by(rows, "kernel", true);
  for (const std::string layer : {"forward model.layers.0", "forward model.layers.1"}) {
    int64_t n = 0;
    for (const auto& [k, v] : by_module) n += k.rfind(layer, 0) == 0 ? v : 0;
    EXPECT_GT(n, 0) << layer << ": " << testing::PrintToString(by_module);
  }
  const auto by_caller = count_by(rows, "kernel", false);
  const int64_t unattributed = by_caller.count("(unattributed)") ? by_caller.at("(unattributed)") : 0;
  EXPECT_LT(unattributed, c.kernels / 4) << "only the decode loop's own ops run outside every hook";
}

}  // namespace
