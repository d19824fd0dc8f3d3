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
//   linear_paired / identity_paired — the overhead itself, paired: blocks of 256 plain calls and
//                256 hooked calls in turn (the two modules share one weight), 400 pairs; counters
//                overhead_ns = the median of the blocks' (hooked - plain) per call, ci95_lo_ns /
//                ci95_hi_ns = the order statistics that bound that median with 95 % confidence
//                (distribution-free). Timing the two in separate runs of 0.5 s each, as plain and
//                hooked do, lets the matrix product's drift between the runs (±100 ns and more)
//                swamp a hook of a few tens of ns.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

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

// Median of the per-call differences of `pairs` blocks of (plain, hooked) calls, with its 95 %
// confidence bounds from the order statistics n/2 ∓ 0.98·√n.
void paired(benchmark::State& state, const std::shared_ptr<hs::models::HookableModule>& plain,
            const std::shared_ptr<hs::models::HookableModule>& hooked) {
  constexpr int kBlock = 256, kPairs = 400;
  c10::InferenceMode guard;
  auto x = torch::randn({1, 64});
  auto block = [&](hs::models::HookableModule& m) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBlock; ++i) benchmark::DoNotOptimize(m.call_tensor({{x}, {}}));
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kBlock;
  };
  std::vector<double> diff, plain_ns, hooked_ns;
  for (auto _ : state) {
    for (int i = 0; i < 20; ++i) block(*plain), block(*hooked);  // warm both
    for (int i = 0; i < kPairs; ++i) {
      const double p = block(*plain), h = block(*hooked);
      diff.push_back(h - p);
      plain_ns.push_back(p);
      hooked_ns.push_back(h);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::sort(diff.begin(), diff.end());
  const double n = static_cast<double>(diff.size()), half = 0.98 * std::sqrt(n);
  const auto at = [&](double rank) {
    return diff[static_cast<size_t>(std::clamp(rank, 0.0, n - 1))];
  };
  state.counters["overhead_ns"] = diff[diff.size() / 2];
  state.counters["ci95_lo_ns"] = at(std::floor(n / 2 - half));
  state.counters["ci95_hi_ns"] = at(std::ceil(n / 2 + half));
  state.counters["plain_ns"] = median(plain_ns);
  state.counters["hooked_ns"] = median(hooked_ns);
}

std::shared_ptr<hs::models::HookableModule> hook_cpu(std::shared_ptr<hs::models::HookableModule> m) {
  auto h = std::make_shared<AlignDevicesHook>();
  h->execution_device = DeviceId::cpu();
  add_hook_to_module(*m, h);
  return m;
}

void BM_linear_paired(benchmark::State& state) {
  Runtime runtime;
  RuntimeScope installed(runtime);
  auto plain = make_linear();
  auto hooked = make_linear();
  hooked->set_tensor("weight", plain->get_tensor("weight"));  // one weight: the same cache lines
  hooked->set_tensor("bias", plain->get_tensor("bias"));
  paired(state, plain, hook_cpu(hooked));
}

void BM_identity_paired(benchmark::State& state) {
  Runtime runtime;
  RuntimeScope installed(runtime);
  auto plain = std::make_shared<Identity>();
  auto hooked = std::make_shared<Identity>();
  hs::models::assign_fqns(*plain);
  hs::models::assign_fqns(*hooked);
  paired(state, plain, hook_cpu(hooked));
}

}  // namespace

BENCHMARK(BM_linear_paired)->Iterations(1);
BENCHMARK(BM_identity_paired)->Iterations(1);
BENCHMARK(BM_plain)->MinTime(0.5);
BENCHMARK(BM_hooked)->MinTime(0.5);
BENCHMARK(BM_offloaded)->MinTime(0.5);
BENCHMARK(BM_identity_plain)->MinTime(0.5);
BENCHMARK(BM_identity_hooked)->MinTime(0.5);
BENCHMARK_MAIN();
