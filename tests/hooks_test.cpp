// Parity suite: the same scenarios through Python accelerate (tests/oracles/accelerate_parity.py,
// run on CPU during the test) and through hookscope's port; the observable results must agree:
// tensor devices after attach / forward / remove, outputs (<= 1e-5), exception messages, files
// written to the offload folder. Test names carry the numbers of the accelerate behaviours they check (the same numbers as the oracle's scenarios).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "hooks/big_modeling.h"
#include "hooks/hooks.h"
#include "hooks/offload.h"
#include "models/safetensors.h"
#include "tests/test_modules.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace hs::hooks;
using hs::test::ModelForTest;
using nlohmann::json;

namespace {

/// HOOKSCOPE_PARITY_DEVICE=cuda:0 (tools/gpu_check.sh on a GPU machine): the upstream
/// scenarios execute on the real cuda:0, in accelerate and in the port (accelerator 0 backed by
/// it); otherwise on the cpu as accelerate's own tests do on a CPU machine.
bool parity_on_gpu() {
  const char* d = std::getenv("HOOKSCOPE_PARITY_DEVICE");
  if (!d || !*d || std::string(d) == "cpu") return false;
  if (std::string(d) != "cuda:0") throw std::runtime_error("HOOKSCOPE_PARITY_DEVICE: expected cpu or cuda:0, got " + std::string(d));
  if (!torch::cuda::is_available()) throw std::runtime_error("HOOKSCOPE_PARITY_DEVICE=cuda:0 but this process sees no CUDA device");
  return true;
}

struct Parity {
  fs::path dir;
  json result;
  torch::Tensor x;
  std::shared_ptr<hs::models::SafetensorsFile> weights;
};

const Parity& parity() {
  static Parity p = [] {
    Parity q;
    q.dir = parity_on_gpu() ? hs::test::cached_oracle("accelerate-parity-gpu", "accelerate_parity.py", {"--device", "cuda:0"})
                            : hs::test::cached_oracle("accelerate-parity", "accelerate_parity.py");
    q.result = hs::test::read_json(q.dir / "result.json");
    q.weights = hs::models::SafetensorsFile::open(q.dir / "weights.safetensors");
    q.x = q.weights->tensor("__input__").clone();
    return q;
  }();
  return p;
}

const json& scenario(const std::string& name) {
  const json& s = parity().result["scenarios"];
  if (!s.contains(name)) throw std::runtime_error("oracle has no scenario " + name);
  return s[name];
}

std::shared_ptr<ModelForTest> make_model() {
  auto m = std::make_shared<ModelForTest>();
  hs::models::assign_fqns(*m);
  for (const auto& [name, mod] : hs::models::named_modules(m))
    for (const auto& slot : mod->local_tensors()) {
      std::string full = name.empty() ? slot.name : name + "." + slot.name;
      mod->set_tensor(slot.name, parity().weights->tensor(full).clone());
    }
  return m;
}

json devices(const std::shared_ptr<ModelForTest>& m) {
  json out = json::object();
  const auto& dm = Runtime::current().devices();
  for (const auto& [n, t] : hs::models::named_parameters(*m)) out[n] = dm.device_of(t).str();
  for (const auto& [n, t] : hs::models::named_buffers(*m)) out[n] = dm.device_of(t).str();
  return out;
}

torch::Tensor forward(const std::shared_ptr<ModelForTest>& m, const torch::Tensor& x) {
  return m->call_tensor({{x}, {}});
}

torch::Tensor to_tensor(const json& j) { return torch::tensor(j.get<std::vector<float>>()); }

void expect_close(const torch::Tensor& got, const json& want, const std::string& what) {
  auto g = got.flatten().to(torch::kFloat);
  auto w = to_tensor(want);
  ASSERT_EQ(g.numel(), w.numel()) << what;
  EXPECT_TRUE(torch::allclose(g, w, 1e-5, 1e-5)) << what << "\n got " << g << "\n want " << w;
}

json folder(const fs::path& d) {
  json names = json::array();
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(d)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  for (auto& s : v) names.push_back(s);
  return {{"files", names}, {"index", hs::test::read_json(d / "index.json")}};
}

// Runs attach / forward / (remove + forward) and compares every step with the oracle.
void check_scenario(const std::string& name, const std::function<void(std::shared_ptr<ModelForTest>&)>& attach,
                    const std::function<void(std::shared_ptr<ModelForTest>&)>& remove,
                    const std::optional<fs::path>& offload_folder = std::nullopt) {
  SCOPED_TRACE(name);
  const json& want = scenario(name);
  auto m = make_model();
  attach(m);
  EXPECT_EQ(devices(m), want["after_attach"]) << "after attach";
  auto y = forward(m, parity().x);
  expect_close(y, want["out"], "output");
  EXPECT_EQ(Runtime::current().devices().device_of(y).str(), want["out_device"].get<std::string>());
  EXPECT_EQ(devices(m), want["after_forward"]) << "after forward";
  if (offload_folder) {
    EXPECT_EQ(folder(*offload_folder), want["folder"]) << "offload folder";
  }
  if (remove) {
    remove(m);
    EXPECT_EQ(devices(m), want["after_remove"]) << "after remove";
    expect_close(forward(m, parity().x), want["after_remove_out"], "output after remove");
  }
}

class HookParity : public ::testing::Test {
 protected:
  Runtime runtime_{parity_on_gpu() ? RuntimeOptions::cuda_devices() : RuntimeOptions{.accelerators = 0}};  // one per test
  RuntimeScope installed_{runtime_};
};

// The upstream tests' execution device: the cpu on a CPU machine, accelerator 0 on cuda:0.
const DeviceId E = parity_on_gpu() ? DeviceId::accelerator(0) : DeviceId::cpu();

void remove_all(std::shared_ptr<ModelForTest>& m) { remove_hook_from_submodules(*m); }

std::shared_ptr<AlignDevicesHook> align(std::optional<DeviceId> exec, bool offload, bool offload_buffers = false) {
  auto h = std::make_shared<AlignDevicesHook>();
  h->execution_device = exec;
  h->offload = offload;
  h->offload_buffers = offload_buffers;
  return h;
}

TEST_F(HookParity, Case07HookLevelCpuOffload) {
  for (bool ob : {false, true}) {
    check_scenario(
        std::string("case07_hook_level_offload") + (ob ? "_buffers" : ""),
        [&](auto& m) {
          add_hook_to_module(*m->linear1, align(E, true, ob));
          add_hook_to_module(*m->batchnorm, align(E, true, ob));
          add_hook_to_module(*m->linear2, align(E, true, ob));
        },
        [](auto& m) {
          remove_hook_from_module(*m->linear1);
          remove_hook_from_module(*m->batchnorm);
          remove_hook_from_module(*m->linear2);
        });
  }
}

TEST_F(HookParity, Case08AttachAlignDeviceHook) {
  for (bool ob : {false, true})
    check_scenario(std::string("case08_attach_align_device_hook") + (ob ? "_buffers" : ""),
                   [&](auto& m) { attach_align_device_hook(*m, E, true, nullptr, ob, "", {}, {}, nullptr); },
                   remove_all);
}

TEST_F(HookParity, Case09AttachWithWeightsMap) {
  for (bool ob : {false, true})
    check_scenario(std::string("case09_attach_with_weights_map") + (ob ? "_buffers" : ""),
                   [&](auto& m) {
                     attach_align_device_hook(*m, E, true, std::make_shared<StateDictMap>(state_dict(*m)), ob, "", {},
                                              {}, nullptr);
                   },
                   remove_all);
}

TEST_F(HookParity, Case17CpuOffload) {
  for (bool ob : {false, true})
    check_scenario(std::string("case17_cpu_offload") + (ob ? "_buffers" : ""),
                   [&](auto& m) { cpu_offload(m, E, ob); }, remove_all);
}

// The modules carrying a hook ("" = the root) and the hook's class, as accelerate's _hf_hook.
json hooked(const std::shared_ptr<ModelForTest>& m) {
  json out = json::object();
  for (const auto& [name, mod] : hs::models::named_modules(m))
    if (auto h = get_hook(*mod)) out[name] = h->name();
  return out;
}

/// Runs `fn`; on an exception stores its message's first sentence under `label` (accelerate's
/// and LibTorch's texts agree up to the "!" of "Cannot copy out of meta tensor; no data!").
bool step(json& obs, const std::string& label, const std::function<void()>& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    std::string what = e.what();
    obs[label] = what.substr(0, what.find('!') + 1);
    return false;
  }
}

/// The oracle's error text cut the same way (its exception class name dropped).
std::string first_sentence(const json& err) {
  std::string s = err.get<std::string>();
  s = s.substr(s.find(": ") + 2);
  return s.substr(0, s.find('!') + 1);
}

void expect_same(const json& got, const json& want, const std::string& what) {
  for (const auto& [k, v] : want.items()) {
    SCOPED_TRACE(what + "." + k);
    ASSERT_TRUE(got.contains(k)) << "the port has no '" << k << "'; got " << got.dump();
    if (k.find("error") != std::string::npos)
      EXPECT_EQ(got[k].get<std::string>(), first_sentence(v));
    else if (k == "out")
      EXPECT_TRUE(torch::allclose(to_tensor(got[k]), to_tensor(v), 1e-5, 1e-5)) << got[k] << " vs " << v;
    else
      EXPECT_EQ(got[k], v);
  }
  for (const auto& [k, v] : got.items()) EXPECT_TRUE(want.contains(k)) << what << ": accelerate has no '" << k << "'";
}

std::vector<float> values(const torch::Tensor& t) {
  auto f = t.flatten().to(torch::kFloat).contiguous();
  return {f.data_ptr<float>(), f.data_ptr<float>() + f.numel()};
}

// CpuOffload as a hook, cpu_offload_with_hook's handle (offload, remove) and its
// prev_module_hook chain, on the cpu and on meta (the CPU's second device: a move there drops
// the data, so a later offload fails as accelerate's does — which shows it was attempted).
// Mutations killed: CpuOffload::init_hook not moving to cpu (after_attach), pre_forward not
// moving the module (after_forward on meta), the chain never offloading prev_module_hook
// (b_forward_error missing), UserCpuOffloadHook::remove leaving the hook (hooked_after_remove).
TEST_F(HookParity, CpuOffloadHookAndCpuOffloadWithHook) {
  for (const auto& [label, dev] : {std::pair{std::string("cpu"), DeviceId::cpu()}, std::pair{std::string("meta"), DeviceId::meta()}}) {
    {
      auto m = make_model();
      json obs;
      add_hook_to_module(*m, std::make_shared<CpuOffload>(dev));
      obs["hooked"] = hooked(m);
      obs["after_attach"] = devices(m);
      auto y = forward(m, parity().x);
      obs["out_device"] = Runtime::current().devices().device_of(y).str();
      if (!dev.is_meta()) obs["out"] = values(y);
      obs["after_forward"] = devices(m);
      expect_same(obs, scenario("cpu_offload_hook_" + label), "cpu_offload_hook_" + label);
    }
    {
      auto m = make_model();
      json obs;
      auto handle = cpu_offload_with_hook(m, dev);
      obs["hooked"] = hooked(m);
      auto y = forward(m, parity().x);
      obs["out_device"] = Runtime::current().devices().device_of(y).str();
      obs["after_forward"] = devices(m);
      if (step(obs, "offload_error", [&] { handle->offload(); })) obs["after_offload"] = devices(m);
      handle->remove();
      obs["hooked_after_remove"] = hooked(m);
      expect_same(obs, scenario("cpu_offload_with_hook_" + label), "cpu_offload_with_hook_" + label);
    }
    {
      auto a = make_model(), b = make_model();
      json obs;
      auto ha = cpu_offload_with_hook(a, dev);
      auto hb = cpu_offload_with_hook(b, dev, ha);
      auto ya = forward(a, parity().x);
      obs["a_after_forward"] = devices(a);
      if (step(obs, "b_forward_error", [&] { forward(b, parity().x); })) {
        obs["a_after_b"] = devices(a);
        obs["b_after_forward"] = devices(b);
      }
      obs["a_out_device"] = Runtime::current().devices().device_of(ya).str();
      expect_same(obs, scenario("cpu_offload_chain_" + label), "cpu_offload_chain_" + label);
    }
  }
}

// attach_execution_device_hook: a hook on every module with a state dict unless a preload
// class stops the recursion; inputs move to the execution device. Mutations killed: the
// preload check dropped (hooked), inputs not sent to the execution device (a meta model fed a
// cpu input raises), the has-state check dropped (out of the oracle's hooked set).
TEST_F(HookParity, AttachExecutionDeviceHook) {
  for (const auto& [label, preload] : {std::pair{std::string("all"), std::vector<std::string>{}},
                                       std::pair{std::string("preload_root"), std::vector<std::string>{"ModelForTest"}}}) {
    auto m = make_model();
    module_to(*m, DeviceId::meta());
    json obs;
    attach_execution_device_hook(*m, DeviceId::meta(), {}, preload, nullptr);
    obs["hooked"] = hooked(m);
    json err;
    if (step(err, "error", [&] {
          auto y = forward(m, parity().x);
          obs["out_device"] = Runtime::current().devices().device_of(y).str();
        }))
      obs["after_forward"] = devices(m);
    else
      ADD_FAILURE() << label << ": forward raised " << err.dump();
    expect_same(obs, scenario("attach_execution_device_hook_" + label), "attach_execution_device_hook_" + label);
  }
  auto m = make_model();
  attach_execution_device_hook(*m, DeviceId::cpu(), {}, {}, nullptr);
  json obs;
  obs["hooked"] = hooked(m);
  auto y = forward(m, parity().x);
  obs["out"] = values(y);
  obs["out_shape"] = y.sizes().vec();
  obs["out_device"] = Runtime::current().devices().device_of(y).str();
  expect_same(obs, scenario("attach_execution_device_hook_cpu"), "attach_execution_device_hook_cpu");
}

TEST_F(HookParity, Case20DiskOffloadWritesAccelerateFolder) {
  for (bool ob : {false, true}) {
    const std::string name = std::string("case20_disk_offload") + (ob ? "_buffers" : "");
    fs::path d = hs::test::scratch_dir(name);
    fs::remove_all(d);
    check_scenario(name, [&](auto& m) { disk_offload(m, d, E, ob); }, remove_all, d);
    // The folder Python accelerate wrote loads in hookscope too.
    auto m = make_model();
    disk_offload(m, parity().dir / name, E, ob);
    expect_close(forward(m, parity().x), parity().result["reference"], "from accelerate's folder");
  }
}

struct PreForwardHook : ModelHook {
  void pre_forward(HookableModule&, CallArgs& call) override { call.args[0] = call.args[0].toTensor() + 1; }
};
struct PostForwardHook : ModelHook {
  c10::IValue post_forward(HookableModule&, c10::IValue out) override { return out.toTensor() + 1; }
};

TEST_F(HookParity, Case03PreForwardReplacesUnlessSequential) {
  check_scenario(
      "case03_pre_forward_replaced",
      [](auto& m) {
        add_hook_to_module(*m, std::make_shared<PreForwardHook>());
        add_hook_to_module(*m, std::make_shared<PreForwardHook>());
      },
      [](auto& m) { remove_hook_from_module(*m); });
  check_scenario(
      "case03_pre_forward_sequential",
      [](auto& m) {
        add_hook_to_module(*m, std::make_shared<SequentialHook>(std::vector<std::shared_ptr<ModelHook>>{
                                   std::make_shared<PreForwardHook>(), std::make_shared<PreForwardHook>()}));
      },
      [](auto& m) { remove_hook_from_module(*m); });
}

TEST_F(HookParity, Case04PostForwardSequential) {
  check_scenario(
      "case04_post_forward_sequential",
      [](auto& m) {
        add_hook_to_module(*m, std::make_shared<SequentialHook>(std::vector<std::shared_ptr<ModelHook>>{
                                   std::make_shared<PostForwardHook>(), std::make_shared<PostForwardHook>()}));
      },
      [](auto& m) { remove_hook_from_module(*m); });
}

struct CountingHook : ModelHook {
  CountingHook(std::string n, std::vector<std::string>* log) : n(std::move(n)), log(log) {}
  void init_hook(HookableModule&) override { log->push_back(n + ".init"); }
  void detach_hook(HookableModule&) override { log->push_back(n + ".detach"); }
  std::string n;
  std::vector<std::string>* log;
};

TEST_F(HookParity, Case02AppendChainsAndReinitialises) {
  std::vector<std::string> log;
  auto m = make_model();
  add_hook_to_module(*m, std::make_shared<CountingHook>("a", &log));
  add_hook_to_module(*m, std::make_shared<CountingHook>("b", &log), true);
  auto seq = std::dynamic_pointer_cast<SequentialHook>(get_hook(*m));
  ASSERT_TRUE(seq);
  EXPECT_EQ(seq->hooks.size(), 2u);
  remove_hook_from_module(*m);
  EXPECT_EQ(json(log), scenario("case02_append_init_detach_order")["log"]);
  EXPECT_FALSE(m->hook());
}

TEST_F(HookParity, Quirk06ReplacingDoesNotDetach) {
  auto m = make_model();
  add_hook_to_module(*m->linear1, align(E, true));
  add_hook_to_module(*m->linear1, std::make_shared<ModelHook>());
  EXPECT_EQ(devices(m), scenario("quirk06_replace_does_not_detach")["after"]);
}

TEST_F(HookParity, DispatchCpuCpuDiskWritesOnlyDiskModules) {
  fs::path d = hs::test::scratch_dir("dispatch_cpu_disk");
  fs::remove_all(d);
  check_scenario("dispatch_cpu_cpu_disk",
                 [&](auto& m) {
                   DispatchOptions o;
                   o.offload_dir = d;
                   dispatch_model(m, {{"linear1", DeviceId::cpu()}, {"batchnorm", DeviceId::cpu()}, {"linear2", DeviceId::disk()}}, o);
                 },
                 remove_all, d);
}

TEST_F(HookParity, Case37DiskOnlyMap) {
  fs::path d = hs::test::scratch_dir("case37_disk_only");
  fs::remove_all(d);
  check_scenario("case37_disk_only",
                 [&](auto& m) {
                   DispatchOptions o;
                   o.offload_dir = d;
                   dispatch_model(m, {{"linear1", DeviceId::disk()}, {"batchnorm", DeviceId::disk()}, {"linear2", DeviceId::disk()}}, o);
                 },
                 remove_all, d);
}

TEST_F(HookParity, DispatchDiskWithOffloadBuffers) {
  fs::path d = hs::test::scratch_dir("dispatch_disk_buffers");
  fs::remove_all(d);
  check_scenario("dispatch_disk_offload_buffers",
                 [&](auto& m) {
                   DispatchOptions o;
                   o.offload_dir = d;
                   o.offload_buffers = true;
                   dispatch_model(m, {{"linear1", DeviceId::cpu()}, {"batchnorm", DeviceId::disk()}, {"linear2", DeviceId::disk()}}, o);
                 },
                 remove_all, d);
}

TEST_F(HookParity, Case38ForceHooks) {
  check_scenario("case38_force_hooks",
                 [](auto& m) {
                   DispatchOptions o;
                   o.force_hooks = true;
                   auto r = dispatch_model(m, {{"", DeviceId::cpu()}}, o);
                   EXPECT_TRUE(r.hooks_attached);
                 },
                 remove_all);
}

TEST_F(HookParity, DispatchSingleDeviceAttachesNoHooks) {
  auto m = make_model();
  auto r = dispatch_model(m, {{"", DeviceId::cpu()}});
  EXPECT_FALSE(r.hooks_attached);
  EXPECT_FALSE(m->hook());
  expect_close(forward(m, parity().x), scenario("dispatch_single_device_no_hooks")["out"], "output");
}

TEST_F(HookParity, DispatchDiskWithoutOffloadDirFailsCleanly) {
  auto m = make_model();
  const json before = devices(m);
  std::string msg;
  try {
    dispatch_model(m, {{"linear1", DeviceId::cpu()}, {"batchnorm", DeviceId::cpu()}, {"linear2", DeviceId::disk()}});
  } catch (const std::exception& e) {
    msg = std::string("ValueError: ") + e.what();
  }
  EXPECT_EQ(msg, scenario("dispatch_disk_without_offload_dir")["error"].get<std::string>());
  EXPECT_EQ(devices(m), before);
  EXPECT_FALSE(m->linear2->hook());
}

TEST_F(HookParity, Case47To49SetModuleTensorToDevice) {
  const json& want = scenario("case47_49_set_module_tensor_to_device");
  auto m = make_model();
  set_module_tensor_to_device(*m, "linear1.weight", DeviceId::meta());
  EXPECT_EQ(Runtime::current().devices().device_of(m->linear1->get_tensor("weight")).str(), want["to_meta"]);
  auto err = [&](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      return std::string("ValueError: ") + e.what();
    }
    return std::string();
  };
  EXPECT_EQ(err([&] { set_module_tensor_to_device(*m, "linear1.weight", DeviceId::cpu()); }), want["meta_without_value"]);
  EXPECT_EQ(err([&] { set_module_tensor_to_device(*m, "linear1.weight", DeviceId::cpu(), torch::zeros({2, 2})); }),
            want["bad_shape"]);
  // accelerate prints the module's repr first; the rest of the message is the same.
  std::string unknown = err([&] { set_module_tensor_to_device(*m, "linear1.nope", DeviceId::cpu()); });
  const std::string tail = " does not have a parameter or a buffer named nope.";
  EXPECT_NE(unknown.find(tail), std::string::npos) << unknown;
  EXPECT_NE(want["unknown_name"].get<std::string>().find(tail), std::string::npos);
  set_module_tensor_to_device(*m, "linear1.weight", DeviceId::cpu(), torch::ones({4, 3}), torch::kHalf);
  EXPECT_EQ(m->linear1->get_tensor("weight").scalar_type(), torch::kHalf);
  EXPECT_EQ(want["with_dtype"], "torch.float16");
}

// attach_layerwise_casting_hooks against accelerate's: which tensors are stored in bfloat16
// after attach and after a forward (cast back), and the float32 output computed from them.
json dtypes(const std::shared_ptr<ModelForTest>& m) {
  auto name = [](c10::ScalarType t) {
    return t == torch::kFloat      ? "torch.float32"
           : t == torch::kBFloat16 ? "torch.bfloat16"
           : t == torch::kLong     ? "torch.int64"
                                   : c10::toString(t);
  };
  json out = json::object();
  for (const auto& [n, t] : hs::models::named_parameters(*m)) out[n] = name(t.scalar_type());
  for (const auto& [n, t] : hs::models::named_buffers(*m)) out[n] = name(t.scalar_type());
  return out;
}

TEST_F(HookParity, LayerwiseCastingLikeAccelerate) {
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::vector<std::string>>> cases{
      {"all", {}, {}}, {"skip_linear2", {"linear2"}, {}}, {"skip_linear_class", {}, {"Linear"}}};
  for (const auto& [label, patterns, classes] : cases) {
    SCOPED_TRACE(label);
    const json& want = scenario("layerwise_casting_" + label);
    auto m = make_model();
    hs::hooks::attach_layerwise_casting_hooks(*m, torch::kBFloat16, torch::kFloat, patterns, classes);
    EXPECT_EQ(dtypes(m), want["after_attach"]);
    torch::Tensor y = forward(m, parity().x);
    EXPECT_EQ(y.scalar_type(), torch::kFloat);
    expect_close(y, want["out"], "output");
    EXPECT_EQ(dtypes(m), want["after_forward"]);
  }
  EXPECT_EQ(scenario("layerwise_casting_all")["after_attach"]["linear1.weight"], "torch.bfloat16");
  EXPECT_EQ(scenario("layerwise_casting_skip_linear2")["after_attach"]["linear2.weight"], "torch.float32");
}

// skip_modules_pattern is searched as Python's re.search: Python's syntax (a named group),
// anywhere in the FQN; an invalid pattern is refused naming it.
TEST(LayerwiseCasting, SkipPatternsArePythonRegexesSearchedInTheFqn) {
  auto m = make_model();
  hs::hooks::attach_layerwise_casting_hooks(*m, torch::kBFloat16, torch::kFloat, {"(?P<layer>near)2"}, {});
  EXPECT_EQ(dtypes(m)["linear1.weight"], "torch.bfloat16");
  EXPECT_EQ(dtypes(m)["linear2.weight"], "torch.float32");
  auto bad = make_model();
  try {
    hs::hooks::attach_layerwise_casting_hooks(*bad, torch::kBFloat16, torch::kFloat, {"linear("}, {});
    FAIL() << "an unbalanced pattern was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("skip_modules_pattern 'linear(' is not a valid regex"), std::string::npos)
        << e.what();
  }
}

// send_to_device's skip_keys against accelerate's (both to meta): the keys skipped at every
// level of nested dicts, lists and tuples, the rest moved.
c10::IValue skip_keys_tree() {
  const torch::Tensor t = torch::ones({2});
  auto dict = [](std::vector<std::pair<std::string, c10::IValue>> kv) {
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    for (auto& [k, v] : kv) d.insert(k, v);
    return d;
  };
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(t);
  list.push_back(dict({{"a", t}, {"c", t}}));
  return dict({{"a", t},
               {"b", dict({{"a", t}, {"c", t}})},
               {"d", list},
               {"e", c10::ivalue::Tuple::create({t, c10::IValue(int64_t{3})})},
               {"c", t}});
}

void placed(const c10::IValue& v, const std::string& path, json& out) {
  auto at = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if (v.isTensor()) {
    out[path] = Runtime::current().devices().device_of(v.toTensor()).str();
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) placed(kv.value(), at(kv.key().toStringRef()), out);
  } else if (v.isList()) {
    const auto l = v.toList();
    for (size_t i = 0; i < l.size(); ++i) placed(l.get(i), at(std::to_string(i)), out);
  } else if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    for (size_t i = 0; i < e.size(); ++i) placed(e[i], at(std::to_string(i)), out);
  }
}

TEST_F(HookParity, SendToDeviceSkipKeysLikeAccelerate) {
  const json& want = scenario("send_to_device_skip_keys");
  const std::map<std::string, std::vector<std::string>> cases{
      {"none", {}}, {"a", {"a"}}, {"a_c", {"a", "c"}}, {"c_as_str", {"c"}}};
  for (const auto& [name, keys] : cases) {
    SCOPED_TRACE(name);
    json got = json::object();
    placed(hs::hooks::send_to_device(skip_keys_tree(), DeviceId::meta(), keys), "", got);
    EXPECT_EQ(got, want[name]);
  }
  EXPECT_EQ(want["a"]["b.a"], "cpu") << "the oracle skips nested keys";
  EXPECT_EQ(want["a"]["b.c"], "meta");
}

}  // namespace
