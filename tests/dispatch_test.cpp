// Real decoder models dispatched through the accelerate port: sharded over 4 emulated
// accelerators by infer_auto_device_map, CPU-offloaded and disk-offloaded device maps, on a
// tiny transformers-written Llama and on the real SmolLM2 sample. Greedy tokens must equal
// transformers' own (the same checkpoint, undispatched, in fp32); offloaded parameters must be back on `meta` after every forward; and
// the compiler-disabled scopes must follow the policy.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "hooks/big_modeling.h"
#include "hooks/device_map.h"
#include "hooks/runtime.h"
#include "models/generate.h"
#include "models/loader.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace hs::hooks;
using namespace hs::models;

namespace {

constexpr int kDevices = 4;

void quiet(const std::string&, const std::string&) {}

// A fresh runtime per test, installed on the test's thread: `accelerators` emulated devices,
// accelerate's messages dropped.
struct WithRuntime {
  explicit WithRuntime(int accelerators)
      : runtime(RuntimeOptions{.accelerators = accelerators, .prefer_real = false, .log = quiet}) {}
  Runtime runtime;
  RuntimeScope installed{runtime};
};

// Calls `fn` for every move the runtime publishes.
struct MoveObserver : RuntimeSubscriber {
  std::function<void(const Move&)> fn;
  void on_move(const Move& m) override { fn(m); }
};

fs::path model_dir(const std::string& which) {
  return which == "smollm2" ? hs::test::sample_dir() : hs::test::tiny_checkpoint(which);
}

std::vector<int64_t> prompt_for(const LoadedModel& lm) {
  // Fixed ids well inside every vocabulary (no tokenizer needed).
  std::vector<int64_t> p{5, 17, 99, 3, 42, 7, 128, 64};
  for (auto& t : p) t %= lm.config.vocab_size;
  return p;
}

std::vector<int64_t> greedy(CausalLM& model, const std::vector<int64_t>& prompt, int64_t n,
                            const TokenCallback& cb = {}) {
  GenerateOptions go;
  go.max_new_tokens = n;
  return greedy_generate(model, prompt, go, cb).new_ids;
}

// infer_auto_device_map over 4 emulated accelerators with max_memory chosen so the weights
// must use every one of them.
DeviceMap sharded_map(const CausalLM& model) {
  auto sizes = compute_module_sizes(model);
  const int64_t total = sizes[""];
  // Room for a quarter of the weights plus the largest block (which the first accelerator
  // keeps in reserve), so every accelerator gets some and none gets everything.
  const int64_t largest = std::max({sizes["model.layers.0"], sizes["model.embed_tokens"], sizes["lm_head"]});
  InferAutoDeviceMapOptions o;
  MaxMemory mm;
  for (int i = 0; i < kDevices; ++i) mm.emplace_back(DeviceId::accelerator(i), largest + total / kDevices);
  mm.emplace_back(DeviceId::cpu(), total * 4);
  o.max_memory = mm;
  o.no_split_module_classes = model.no_split_modules();
  return infer_auto_device_map(model, o);
}

std::set<DeviceId> weight_devices(const std::shared_ptr<CausalLM>& m) {
  std::set<DeviceId> out;
  for (const auto& [n, t] : named_parameters(*m)) out.insert(Runtime::current().devices().device_of(t));
  return out;
}

// Names of parameters of modules mapped to an offloaded device.
std::vector<std::string> offloaded_params(const std::shared_ptr<CausalLM>& m, const DeviceMap& map) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named_parameters(*m, true, false))
    for (const auto& [mod, dev] : map)
      if ((dev.is_cpu() || dev.is_disk()) && (mod.empty() || n.rfind(mod + ".", 0) == 0)) out.push_back(n);
  return out;
}

torch::Tensor param(const std::shared_ptr<CausalLM>& m, const std::string& name) {
  auto dot = name.rfind('.');
  return get_submodule(m, name.substr(0, dot))->get_tensor(name.substr(dot + 1));
}

class Dispatch : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ref_ = load_model(model_dir(GetParam()).string());
    prompt_ = prompt_for(ref_);
    want_ = hs::test::transformers_greedy(model_dir(GetParam()), prompt_, 8);
  }
  WithRuntime rt_{kDevices};
  LoadedModel ref_;
  std::vector<int64_t> prompt_, want_;
};

TEST_P(Dispatch, ShardedOverFourEmulatedAcceleratorsKeepsGreedyTokens) {
  LoadedModel lm = load_model(model_dir(GetParam()).string());
  DeviceMap map = sharded_map(*lm.model);
  std::set<DeviceId> mapped;
  for (const auto& [n, d] : map) mapped.insert(d);
  EXPECT_GE(mapped.size(), 3u) << "max_memory should force the weights over the accelerators";
  for (const auto& d : mapped) EXPECT_TRUE(d.is_accelerator()) << d.str();

  int64_t cross = 0;
  MoveObserver moves;
  moves.fn = [&](const Move& m) { cross += m.src.is_accelerator() && m.dst.is_accelerator(); };
  auto subscription = rt_.runtime.subscribe(moves);
  dispatch_model(lm.model, map);
  auto devs = weight_devices(lm.model);
  EXPECT_GE(devs.size(), 3u) << "weights really span several devices";
  EXPECT_EQ(devs.count(DeviceId::meta()), 0u);
  EXPECT_EQ(greedy(*lm.model, prompt_, 8), want_);
  EXPECT_GT(cross, 0) << "activations moved between accelerators";
}

TEST_P(Dispatch, CpuOffloadedMapKeepsTokensAndReturnsParamsToMeta) {
  LoadedModel lm = load_model(model_dir(GetParam()).string());
  const int64_t n = lm.config.num_hidden_layers;
  DeviceMap map{{"model.embed_tokens", DeviceId::accelerator(0)}, {"model.rotary_emb", DeviceId::accelerator(0)}};
  for (int64_t i = 0; i < n; ++i)
    map.emplace_back("model.layers." + std::to_string(i), i < n / 2 ? DeviceId::accelerator(1) : DeviceId::cpu());
  map.emplace_back("model.norm", DeviceId::cpu());
  map.emplace_back("lm_head", DeviceId::accelerator(0));
  dispatch_model(lm.model, map);
  auto off = offloaded_params(lm.model, map);
  ASSERT_FALSE(off.empty());
  for (const auto& p : off) EXPECT_TRUE(param(lm.model, p).is_meta()) << p;
  int steps = 0;
  auto got = greedy(*lm.model, prompt_, 8, [&](int64_t, int64_t) {
    ++steps;
    for (const auto& p : off) ASSERT_TRUE(param(lm.model, p).is_meta()) << p << " after step " << steps;
  });
  EXPECT_EQ(got, want_);
  remove_hook_from_submodules(*lm.model);
  for (const auto& p : off) EXPECT_FALSE(param(lm.model, p).is_meta()) << p << " restored on remove";
}

TEST_P(Dispatch, DiskOffloadedMapKeepsTokens) {
  LoadedModel lm = load_model(model_dir(GetParam()).string());
  const int64_t n = lm.config.num_hidden_layers;
  DeviceMap map{{"model.embed_tokens", DeviceId::accelerator(0)}, {"model.rotary_emb", DeviceId::accelerator(0)}};
  for (int64_t i = 0; i < n; ++i)
    map.emplace_back("model.layers." + std::to_string(i),
                     i == 0 ? DeviceId::accelerator(0) : i % 2 ? DeviceId::disk() : DeviceId::cpu());
  map.emplace_back("model.norm", DeviceId::accelerator(1));
  map.emplace_back("lm_head", DeviceId::accelerator(1));
  DispatchOptions o;
  o.offload_dir = hs::test::scratch_dir("dispatch-disk-" + GetParam());
  dispatch_model(lm.model, map, o);
  EXPECT_TRUE(fs::exists(*o.offload_dir / "index.json"));
  auto off = offloaded_params(lm.model, map);
  auto got = greedy(*lm.model, prompt_, 6, [&](int64_t, int64_t) {
    for (const auto& p : off) ASSERT_TRUE(param(lm.model, p).is_meta()) << p;
  });
  EXPECT_EQ(got, std::vector<int64_t>(want_.begin(), want_.begin() + 6));
}

INSTANTIATE_TEST_SUITE_P(Models, Dispatch, ::testing::Values("tiny-llama", "tiny-qwen3", "smollm2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// ------------------------------------------------------------------ compiler-disable policies

struct ScopeLog : DisabledScopeObserver {
  std::map<std::string, int> outermost;
  int nested = 0;
  void on_enter(std::string_view f, std::string_view, int depth) override {
    if (depth == 1)
      ++outermost[std::string(f)];
    else
      ++nested;
  }
  void on_exit(std::string_view, std::string_view, int) override {}
};

class Policies : public ::testing::Test {
 protected:
  void SetUp() override { rt_.runtime.scopes().observer = &log_; }
  void set_compile_policy(CompilePolicy p) { rt_.runtime.set_compile_policy(p); }
  std::map<std::string, int> one_forward(CausalLM& m) {
    log_ = {};
    c10::InferenceMode g;
    m.forward(torch::tensor(std::vector<int64_t>{5, 6, 7}).unsqueeze(0), KVCache::dynamic_cache(m.config().num_hidden_layers), 1);
    return log_.outermost;
  }
  WithRuntime rt_{kDevices};
  ScopeLog log_;
};

TEST_F(Policies, WholeHookBreaksAtEveryHookedBoundaryOffloadOnlyNowhereWhenSharded) {
  LoadedModel lm = load_model(hs::test::tiny_checkpoint("tiny-llama").string());
  dispatch_model(lm.model, sharded_map(*lm.model));
  int hooked = 0;
  for (const auto& [n, m] : named_modules(lm.model)) hooked += m->hook() != nullptr;
  set_compile_policy(CompilePolicy::WholeHook);
  auto whole = one_forward(*lm.model);
  EXPECT_GE(whole["AlignDevicesHook.pre_forward"], hooked - 1);  // ModuleList/containers are never called
  EXPECT_EQ(whole["AlignDevicesHook.pre_forward"], whole["AlignDevicesHook.post_forward"]);
  EXPECT_EQ(whole.count("AlignDevicesHook._onload_weights"), 0u);
  set_compile_policy(CompilePolicy::OffloadOnly);
  auto only = one_forward(*lm.model);
  std::string seen;
  for (const auto& [f, n] : only) seen += f + " x" + std::to_string(n) + "; ";
  EXPECT_TRUE(only.empty()) << "a sharded model without offload captures as one graph, got: " << seen;
}

TEST_F(Policies, OffloadOnlyStillBreaksAtOnloadWeightsWhenOffloaded) {
  LoadedModel lm = load_model(hs::test::tiny_checkpoint("tiny-qwen3").string());
  cpu_offload(lm.model, DeviceId::accelerator(0));
  set_compile_policy(CompilePolicy::OffloadOnly);
  auto s = one_forward(*lm.model);
  EXPECT_GT(s["AlignDevicesHook._onload_weights"], 0);
  EXPECT_EQ(s["AlignDevicesHook._onload_weights"], s["AlignDevicesHook._offload_weights"]);
  EXPECT_EQ(s.count("AlignDevicesHook.pre_forward"), 0u);
  set_compile_policy(CompilePolicy::WholeHook);
  auto w = one_forward(*lm.model);
  EXPECT_GT(w["AlignDevicesHook.pre_forward"], 0);
  EXPECT_EQ(w.count("AlignDevicesHook._onload_weights"), 0u) << "whole-hook guards pre_forward as a whole";
}

TEST_F(Policies, NestedScopesCountOnce) {
  // SequentialHook(io hook, offload hook) under whole-hook: the inner AlignDevicesHook scopes
  // open inside SequentialHook's, so one call is one break.
  LoadedModel lm = load_model(hs::test::tiny_checkpoint("tiny-qwen3").string());
  auto& norm = *lm.model->model->norm;
  auto a = std::make_shared<AlignDevicesHook>();
  a->io_same_device = true;
  auto b = std::make_shared<AlignDevicesHook>();
  b->execution_device = DeviceId::accelerator(1);
  b->offload = true;
  add_hook_to_module(norm, a);
  add_hook_to_module(norm, b, /*append=*/true);
  set_compile_policy(CompilePolicy::WholeHook);
  log_ = {};
  norm.call_tensor({{torch::ones({1, 2, lm.config.hidden_size})}, {}});
  EXPECT_EQ(log_.outermost["SequentialHook.pre_forward"], 1);
  EXPECT_EQ(log_.outermost["SequentialHook.post_forward"], 1);
  EXPECT_EQ(log_.outermost.count("AlignDevicesHook.pre_forward"), 0u);
  EXPECT_EQ(log_.nested, 4);  // two hooks x (pre, post)
}

// ------------------------------------------------------------------ bad input leaves no state

class DispatchBadInput : public ::testing::Test {
 protected:
  void SetUp() override { lm_ = load_model(hs::test::tiny_checkpoint("tiny-qwen3").string()); }
  std::string error(const DeviceMap& map, const DispatchOptions& o = {}) {
    try {
      dispatch_model(lm_.model, map, o);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
  void expect_untouched() {
    for (const auto& [n, m] : named_modules(lm_.model)) EXPECT_FALSE(m->hook()) << n;
    for (const auto& [n, t] : named_parameters(*lm_.model)) EXPECT_FALSE(t.is_meta()) << n;
  }
  WithRuntime rt_{2};
  LoadedModel lm_;
};

TEST_F(DispatchBadInput, UnknownModuleKeyWarnsNamingIt) {
  // accelerate only warns about keys that are not modules (quirk 12, replicated).
  std::vector<std::string> warnings;
  rt_.runtime.set_logger([&](const std::string& level, const std::string& msg) {
    if (level == "WARNING") warnings.push_back(msg);
  });
  auto msg = error({{"model", DeviceId::accelerator(0)}, {"lm_head", DeviceId::accelerator(1)},
                    {"model.layers.9", DeviceId::cpu()}});
  EXPECT_EQ(msg, "");
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("do not match any submodules"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("model.layers.9"), std::string::npos) << warnings[0];
}

TEST_F(DispatchBadInput, UncoveredParametersAreListed) {
  auto msg = error({{"model.embed_tokens", DeviceId::accelerator(0)}, {"lm_head", DeviceId::accelerator(1)}});
  EXPECT_NE(msg.find("does not give any device for the following parameters"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(DispatchBadInput, AcceleratorThatDoesNotExist) {
  auto msg = error({{"model", DeviceId::accelerator(0)}, {"lm_head", DeviceId::accelerator(7)}});
  EXPECT_NE(msg.find("'lm_head' is mapped to accelerator 7"), std::string::npos) << msg;
  EXPECT_THROW(DeviceId::parse("cuda:x"), std::invalid_argument);
  EXPECT_THROW(DeviceId::parse("-1"), std::invalid_argument);
  expect_untouched();
}

TEST_F(DispatchBadInput, DiskWithoutOffloadDir) {
  auto msg = error({{"model", DeviceId::accelerator(0)}, {"lm_head", DeviceId::disk()}});
  EXPECT_NE(msg.find("We need an `offload_dir`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lm_head"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(DispatchBadInput, OffloadFolderWithMissingOrTruncatedDat) {
  // A folder written for this model, then damaged.
  fs::path dir = hs::test::scratch_dir("bad-offload-folder");
  {
    LoadedModel other = load_model(hs::test::tiny_checkpoint("tiny-qwen3").string());
    DispatchOptions o;
    o.offload_dir = dir;
    dispatch_model(other.model, {{"model", DeviceId::accelerator(0)}, {"lm_head", DeviceId::disk()}}, o);
  }
  DispatchOptions o;
  o.offload_dir = dir;
  const DeviceMap map{{"model", DeviceId::accelerator(0)}, {"lm_head", DeviceId::disk()}};
  fs::resize_file(dir / "lm_head.weight.dat", 100);
  auto msg = error(map, o);
  EXPECT_NE(msg.find("lm_head.weight"), std::string::npos) << msg;
  expect_untouched();
  fs::remove(dir / "lm_head.weight.dat");
  msg = error(map, o);
  EXPECT_NE(msg.find("lm_head.weight.dat"), std::string::npos) << msg;
  expect_untouched();
}

TEST_F(DispatchBadInput, OffloadIndexDisagreeingWithTheModule) {
  fs::path dir = hs::test::scratch_dir("bad-offload-index");
  {
    LoadedModel other = load_model(hs::test::tiny_checkpoint("tiny-qwen3").string());
    DispatchOptions o;
    o.offload_dir = dir;
    dispatch_model(other.model, {{"model", DeviceId::accelerator(0)}, {"lm_head", DeviceId::disk()}}, o);
  }
  auto idx = hs::test::read_json(dir / "index.json");
  idx["lm_head.weight"]["shape"] = {7, 7};
  std::ofstream(dir / "index.json") << idx.dump(2);
  DispatchOptions o;
  o.offload_dir = dir;
  auto msg = error({{"model", DeviceId::accelerator(0)}, {"lm_head", DeviceId::disk()}}, o);
  EXPECT_NE(msg.find("lm_head.weight"), std::string::npos) << msg;
  expect_untouched();
}

}  // namespace
