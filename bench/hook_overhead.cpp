// Hook overhead per hooked-module call in hookscope (Google Benchmark).
// bench/hook_overhead.py runs this next to the same measurement in Python accelerate and
// reports the ratios; run alone it prints Google Benchmark's table.
//
// Module: Linear(64, 64) with bias (small, so the hook dominates), input [1, 64] float32, execution device "cpu",
// under a runtime with no sink (recording off), as in an unprofiled process:
//   plain      — no hook
//   hooked     — AlignDevicesHook(execution_device=cpu)            (a sharded model's hook)
//   offloaded  — AlignDevicesHook(execution_device=cpu, offload=True, weights_map=state dict)
//   identity_plain / identity_hooked — the same without the Linear's work: a module that returns
//                its input, unhooked and hooked, so the hook's own cost stands out of the noise of
//                a 2 µs matrix product
#include <benchmark/benchmark.h>

#include "hooks/hooks.h"
#include "hooks/offload.h"
#include "hooks/runtime.h"
#include "models/causal_lm.h"

namespace {

using namespace hs::hooks;

std::shared_ptr<hs::models::Linear> make_linear() {
  torch::manual_seed(0);
  auto m = std::make_shared<hs::models::Linear>(64, 64, true, torch::TensorOptions());
  m->set_tensor("weight", torch::randn({64, 64}) * 0.02);
  m->set_tensor("bias", torch::zeros({64}));
  hs::models::assign_fqns(*m);
  return m;
}

// nn.Identity: returns its input (accelerate's hooks still move it and wrap the call).
class Identity : public hs::models::HookableModule {
 public:
  Identity() : HookableModule("Identity") {}
  c10::IValue forward_impl(hs::models::CallArgs& call) override { return call.args.at(0); }
};

void run(benchmark::State& state, const std::shared_ptr<hs::models::HookableModule>& m) {
  c10::InferenceMode guard;
  auto x = torch::randn({1, 64});
  for (auto _ : state) benchmark::DoNotOptimize(m->call_tensor({{x}, {}}));
}

void BM_plain(benchmark::State& state) {
  Runtime runtime;
  RuntimeScope installed(runtime);
  run(state, make_linear());
}

void BM_hooked(benchmark::State& state) {
  Runtime runtime;
  RuntimeScope installed(runtime);
  auto m = make_linear();
  auto h = std::make_shared<AlignDevicesHook>();
  h->execution_device = DeviceId::cpu();
  add_hook_to_module(*m, h);
  run(state, m);
}

void BM_offloaded(benchmark::State& state) {
  Runtime runtime;
  RuntimeScope installed(runtime);
  auto m = make_linear();
  auto h = std::make_shared<AlignDevicesHook>();
  h->execution_device = DeviceId::cpu();
  h->offload = true;
  h->weights_map = std::make_shared<StateDictMap>(state_dict(*m));
  add_hook_to_module(*m, h);
  run(state, m);
}

void BM_identity_plain(benchmark::State& state) {
  Runtime runtime;
  RuntimeScope installed(runtime);
  auto m = std::make_shared<Identity>();
  hs::models::assign_fqns(*m);
  run(state, m);
}

void BM_identity_hooked(benchmark::State& state) {
  Runtime runtime;
  RuntimeScope installed(runtime);
  auto m = std::make_shared<Identity>();
  hs::models::assign_fqns(*m);
  auto h = std::make_shared<AlignDevicesHook>();
  h->execution_device = DeviceId::cpu();
  add_hook_to_module(*m, h);
  run(state, m);
}

}  // namespace

BENCHMARK(BM_plain)->MinTime(0.5);
BENCHMARK(BM_hooked)->MinTime(0.5);
BENCHMARK(BM_offloaded)->MinTime(0.5);
BENCHMARK(BM_identity_plain)->MinTime(0.5);
BENCHMARK(BM_identity_hooked)->MinTime(0.5);
BENCHMARK_MAIN();
