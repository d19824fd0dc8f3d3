#include "hooks/hooks.h"

#include <algorithm>
#include <iostream>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "hooks/memory.h"
#include "hooks/offload.h"
#include "tracer/events.h"

namespace hs::hooks {

using events::now_ns;

// ------------------------------------------------------------------ logging

namespace {
std::mutex g_log_mu;
LogFn g_log;
}  // namespace

void set_logger(LogFn fn) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log = std::move(fn);
}

void log(const std::string& level, const std::string& message) {
  LogFn fn;
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    fn = g_log;
  }
  if (fn)
    fn(level, message);
  else
    std::cerr << "[accelerate " << level << "] " << message << "\n";
}

// ------------------------------------------------------------------ tensors of a module

namespace {

struct TensorRef {
  std::string name;  // relative to the hooked module
  HookableModule* owner;
  std::string local;
  bool is_param;
  bool persistent;
};

// named_module_tensors(module, include_buffers=True, recurse): parameters first, then
// buffers; shared tensors once (named_parameters' remove_duplicate).
std::vector<TensorRef> module_tensors(HookableModule& m, bool recurse) {
  std::vector<TensorRef> params, buffers;
  std::unordered_set<const void*> seen;
  std::function<void(HookableModule&, const std::string&)> rec = [&](HookableModule& mod, const std::string& prefix) {
    for (const auto& s : mod.local_tensors()) {
      if (!s.value.defined()) continue;
      if (!seen.insert(s.value.unsafeGetTensorImpl()).second) continue;
      TensorRef r{prefix.empty() ? s.name : prefix + "." + s.name, &mod, s.name, s.is_parameter, s.persistent};
      (s.is_parameter ? params : buffers).push_back(std::move(r));
    }
    if (!recurse) return;
    for (auto& [n, child] : mod.hookable_children()) rec(*child, prefix.empty() ? n : prefix + "." + n);
  };
  rec(m, "");
  params.insert(params.end(), buffers.begin(), buffers.end());
  return params;
}

std::string module_label(const HookableModule& m) {
  return m.class_name() + " '" + (m.fqn().empty() ? std::string("<root>") : m.fqn()) + "'";
}

std::pair<HookableModule*, std::string> resolve_tensor(HookableModule& module, const std::string& name) {
  HookableModule* cur = &module;
  std::string rest = name;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos;) {
    std::string part = rest.substr(0, dot);
    HookableModule* next = nullptr;
    for (auto& [n, child] : cur->hookable_children())
      if (n == part) next = child.get();
    if (!next) throw std::invalid_argument(module_label(*cur) + " has no attribute " + part + ".");
    cur = next;
    rest = rest.substr(dot + 1);
  }
  if (!cur->has_parameter(rest) && !cur->has_buffer(rest))
    throw std::invalid_argument(module_label(*cur) + " does not have a parameter or a buffer named " + rest + ".");
  return {cur, rest};
}

std::string torch_size(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "torch.Size([";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "])";
  return o.str();
}

bool is_integral_or_bool(c10::ScalarType t) { return c10::isIntegralType(t, /*includeBool=*/true); }

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kBFloat16: return "bfloat16";
    case c10::kHalf: return "float16";
    case c10::kDouble: return "float64";
    case c10::kLong: return "int64";
    case c10::kInt: return "int32";
    default: return c10::toString(t);
  }
}

void tag_outputs(const c10::IValue& v, const DeviceId& d) {
  auto& dm = DeviceManager::instance();
  if (v.isTensor()) {
    dm.tag(v.toTensor(), d);
  } else if (v.isTensorList()) {
    for (const auto& t : v.toTensorVector()) dm.tag(t, d);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) tag_outputs(e, d);
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) tag_outputs(e, d);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) tag_outputs(kv.value(), d);
  }
}

// Times one hook callback and reports it to the event sink.
class HookSpanTimer {
 public:
  HookSpanTimer(const char* hook, events::HookPhase phase, const HookableModule& m)
      : hook_(hook), phase_(phase), m_(m), start_(events::sink() ? now_ns() : 0) {}
  ~HookSpanTimer() {
    if (auto* s = events::sink()) s->hook_span({hook_, phase_, m_.fqn(), m_.class_name(), start_, now_ns()});
  }

 private:
  const char* hook_;
  events::HookPhase phase_;
  const HookableModule& m_;
  int64_t start_;
};

// Runs `fn` inside a compiler-disabled scope named `function` when `guard` is true.
template <typename Fn>
auto maybe_disabled(bool guard, const char* function, const HookableModule& m, Fn&& fn) {
  if (!guard) return fn();
  CompilerDisabledScope scope(function, m.fqn());
  return fn();
}

bool whole_hook() { return compile_policy() == CompilePolicy::WholeHook; }

// Dispatch move guards (accelerate's `.to`/`.cuda` wrappers).
std::mutex g_guard_mu;
std::unordered_set<const HookableModule*> g_guarded;

}  // namespace

// ------------------------------------------------------------------ SequentialHook

void SequentialHook::init_hook(HookableModule& m) {
  for (auto& h : hooks) h->init_hook(m);
}

void SequentialHook::pre_forward(HookableModule& m, CallArgs& call) {
  HookSpanTimer t("SequentialHook", events::HookPhase::PreForward, m);
  maybe_disabled(whole_hook(), "SequentialHook.pre_forward", m, [&] {
    for (auto& h : hooks) h->pre_forward(m, call);
  });
}

c10::IValue SequentialHook::post_forward(HookableModule& m, c10::IValue output) {
  HookSpanTimer t("SequentialHook", events::HookPhase::PostForward, m);
  return maybe_disabled(whole_hook(), "SequentialHook.post_forward", m, [&] {
    for (auto& h : hooks) output = h->post_forward(m, std::move(output));
    return output;
  });
}

void SequentialHook::detach_hook(HookableModule& m) {
  for (auto& h : hooks) h->detach_hook(m);
}

std::string SequentialHook::repr() const {
  std::string s = "SequentialHook(";
  for (size_t i = 0; i < hooks.size(); ++i) s += (i ? ", " : "") + hooks[i]->repr();
  return s + ")";
}

// ------------------------------------------------------------------ AlignDevicesHook

std::vector<std::string> AlignDevicesHook::controlled_tensors(HookableModule& m) const {
  std::vector<std::string> out;
  for (const auto& r : module_tensors(m, place_submodules)) out.push_back(r.name);
  return out;
}

std::vector<std::string> AlignDevicesHook::offloaded_tensors(HookableModule& m) const {
  std::vector<std::string> out;
  for (const auto& r : module_tensors(m, place_submodules))
    if (r.is_param || (offload_buffers && r.persistent)) out.push_back(r.name);
  return out;
}

void AlignDevicesHook::init_hook(HookableModule& m) {
  HookSpanTimer t("AlignDevicesHook", events::HookPhase::InitHook, m);
  if (execution_device && execution_device->is_meta()) tied_params_map = nullptr;
  auto tensors = module_tensors(m, place_submodules);
  if (!offload) {
    if (execution_device)
      for (const auto& r : tensors)
        set_module_tensor_to_device(m, r.name, *execution_device, {}, std::nullopt, tied_params_map.get());
    return;
  }
  if (!execution_device)
    throw std::invalid_argument("AlignDevicesHook on " + module_label(m) + ": offload=True needs an execution_device");
  auto& dm = DeviceManager::instance();
  original_devices.clear();
  for (const auto& r : tensors) original_devices.emplace_back(r.name, dm.device_of(r.owner->get_tensor(r.local)));
  if (!weights_map) {
    // name -> tensor.to("cpu") (an alias when already on the CPU, as upstream).
    std::vector<std::pair<std::string, torch::Tensor>> sd;
    for (const auto& r : tensors)
      if (r.is_param || offload_buffers) sd.emplace_back(r.name, dm.to(r.owner->get_tensor(r.local), DeviceId::cpu()));
    weights_map = std::make_shared<StateDictMap>(std::move(sd));
  }
  for (const auto& r : tensors) {
    if (!(r.is_param || (offload_buffers && r.persistent))) continue;
    const auto& cur = r.owner->get_tensor(r.local);
    if (tied_params_map && !cur.is_meta() && tied_params_map->count(cur.data_ptr())) tied_params_names.insert(r.name);
    set_module_tensor_to_device(m, r.name, DeviceId::meta());
  }
  for (const auto& r : tensors) {
    if (r.is_param) continue;
    // Buffers stay resident: all of them without offload_buffers, else the non-persistent
    // ones (by full name: quirk 5 fixed).
    if (!offload_buffers || !r.persistent)
      set_module_tensor_to_device(m, r.name, *execution_device, {}, std::nullopt, tied_params_map.get());
  }
}

void AlignDevicesHook::onload_weights(HookableModule& m) {
  tied_pointers_to_remove_.clear();
  const DeviceId dev = *execution_device;
  const std::string dev_s = dev.str();
  const auto source = weights_source == "disk" ? events::WeightSource::Disk : events::WeightSource::Cpu;
  for (const auto& name : offloaded_tensors(m)) {
    const int64_t t0 = now_ns();
    torch::Tensor value = weights_map->get(name);
    if (tied_params_map) {
      const void* ptr = value.data_ptr();
      if (tied_params_names.count(name) && !tied_params_map->count(ptr)) {
        (*tied_params_map)[ptr];
        tied_entries_added_.push_back(ptr);
      }
      auto it = tied_params_map->find(ptr);
      if (it != tied_params_map->end() && !it->second.count(dev)) tied_pointers_to_remove_.emplace_back(ptr, dev);
    }
    {
      WeightCopyScope weights;  // recorded below as a WeightSwap, not as an activation Transfer
      set_module_tensor_to_device(m, name, dev, value, std::nullopt, tied_params_map.get());
    }
    if (auto* s = events::sink()) {
      const std::string dt = dtype_name(value.scalar_type());
      s->weight_swap({true, m.fqn(), name, static_cast<int64_t>(value.nbytes()), dt, source, dev_s,
                      value.is_pinned(), t0, now_ns()});
    }
  }
}

void AlignDevicesHook::offload_weights(HookableModule& m) {
  for (const auto& name : offloaded_tensors(m)) {
    const int64_t t0 = now_ns();
    auto [owner, local] = resolve_tensor(m, name);
    const torch::Tensor cur = owner->get_tensor(local);
    set_module_tensor_to_device(m, name, DeviceId::meta());
    if (auto* s = events::sink()) {
      const std::string dt = dtype_name(cur.scalar_type());
      s->weight_swap({false, m.fqn(), name, static_cast<int64_t>(cur.nbytes()), dt, events::WeightSource::Device,
                      "meta", false, t0, now_ns()});
    }
  }
  if (tied_params_map) {
    for (const auto& [ptr, dev] : tied_pointers_to_remove_) {
      auto it = tied_params_map->find(ptr);
      if (it != tied_params_map->end()) it->second.erase(dev);
    }
    // Quirk 7 fixed: drop the empty entries this forward created.
    for (const void* ptr : tied_entries_added_) {
      auto it = tied_params_map->find(ptr);
      if (it != tied_params_map->end() && it->second.empty()) tied_params_map->erase(it);
    }
  }
  tied_entries_added_.clear();
  tied_pointers_to_remove_.clear();
}

void AlignDevicesHook::pre_forward_body(HookableModule& m, CallArgs& call) {
  if (io_same_device) input_device = find_device(call);
  if (offload) maybe_disabled(!whole_hook(), "AlignDevicesHook._onload_weights", m, [&] { onload_weights(m); });
  if (execution_device) send_call_to_device(call, *execution_device, skip_keys);
}

void AlignDevicesHook::pre_forward(HookableModule& m, CallArgs& call) {
  HookSpanTimer t("AlignDevicesHook", events::HookPhase::PreForward, m);
  maybe_disabled(whole_hook(), "AlignDevicesHook.pre_forward", m, [&] { pre_forward_body(m, call); });
  MemoryLedger::instance().sample_recent();  // weights onloaded, inputs moved
  if (execution_device) DeviceManager::push_execution(*execution_device);
  compute_start_ns_ = events::sink() ? now_ns() : 0;
}

c10::IValue AlignDevicesHook::post_forward_body(HookableModule& m, c10::IValue output) {
  if (offload) maybe_disabled(!whole_hook(), "AlignDevicesHook._offload_weights", m, [&] { offload_weights(m); });
  if (io_same_device && input_device) output = send_to_device(output, *input_device, skip_keys);
  return output;
}

c10::IValue AlignDevicesHook::post_forward(HookableModule& m, c10::IValue output) {
  if (auto* s = events::sink(); s && compute_start_ns_) {
    const std::string dev = execution_device ? execution_device->str() : std::string("cpu");
    s->module_compute({m.fqn(), m.class_name(), dev, compute_start_ns_, now_ns()});
  }
  if (execution_device) {
    // Everything this module computed lives on its execution device.
    if (execution_device->is_accelerator()) tag_outputs(output, *execution_device);
    DeviceManager::pop_execution();
  }
  auto& ledger = MemoryLedger::instance();
  ledger.sample_recent();  // the module's high-water mark: its weights and its outputs
  HookSpanTimer t("AlignDevicesHook", events::HookPhase::PostForward, m);
  output = maybe_disabled(whole_hook(), "AlignDevicesHook.post_forward", m,
                          [&] { return post_forward_body(m, std::move(output)); });
  ledger.sample_recent();  // weights back on meta (their storages freed), outputs moved
  return output;
}

void AlignDevicesHook::detach_hook(HookableModule& m) {
  HookSpanTimer t("AlignDevicesHook", events::HookPhase::DetachHook, m);
  if (!offload) return;
  for (const auto& [name, dev] : original_devices) {
    if (dev.is_meta()) continue;
    torch::Tensor value = weights_map && weights_map->contains(name) ? weights_map->get(name) : torch::Tensor();
    set_module_tensor_to_device(m, name, dev, value, std::nullopt, tied_params_map.get());
  }
}

std::string AlignDevicesHook::repr() const {
  auto b = [](bool v) { return v ? "True" : "False"; };
  std::string sk = "None";
  if (skip_keys_given) {
    if (skip_keys.size() == 1) {
      sk = "'" + skip_keys[0] + "'";
    } else {
      sk = "[";
      for (size_t i = 0; i < skip_keys.size(); ++i) sk += (i ? ", '" : "'") + skip_keys[i] + "'";
      sk += "]";
    }
  }
  std::string ed = "None";
  if (execution_device) ed = execution_device->is_accelerator() ? std::to_string(execution_device->index) : execution_device->str();
  return std::string("AlignDevicesHook(execution_device=") + ed + ", offload=" + b(offload) +
         ", io_same_device=" + b(io_same_device) + ", offload_buffers=" + b(offload_buffers) +
         ", place_submodules=" + b(place_submodules) + ", skip_keys=" + sk + ")";
}

// ------------------------------------------------------------------ CpuOffload

CpuOffload::CpuOffload(std::optional<DeviceId> exec, std::shared_ptr<UserCpuOffloadHook> prev)
    : execution_device(exec ? *exec
                            : (DeviceManager::instance().num_accelerators() > 0 ? DeviceId::accelerator(0)
                                                                                 : DeviceId::cpu())),
      prev_module_hook(std::move(prev)) {}

void CpuOffload::init_hook(HookableModule& m) { module_to(m, DeviceId::cpu()); }

void CpuOffload::pre_forward(HookableModule& m, CallArgs& call) {
  HookSpanTimer t("CpuOffload", events::HookPhase::PreForward, m);
  maybe_disabled(whole_hook(), "CpuOffload.pre_forward", m, [&] {
    if (prev_module_hook) {
      auto prev_dev = first_param_device(*prev_module_hook->model);
      if (prev_dev && !prev_dev->is_cpu()) prev_module_hook->offload();
    }
    auto dev = first_param_device(m);
    if (dev && *dev == execution_device) return;  // quirk 10: inputs not moved either
    module_to(m, execution_device);
    send_call_to_device(call, execution_device, {});
  });
  MemoryLedger::instance().sample_recent();
}

void UserCpuOffloadHook::offload() { hook->init_hook(*model); }
void UserCpuOffloadHook::remove() { remove_hook_from_module(*model); }

// ------------------------------------------------------------------ LayerwiseCastingHook

void LayerwiseCastingHook::init_hook(HookableModule& m) { module_to_dtype(m, storage_dtype); }

void LayerwiseCastingHook::pre_forward(HookableModule& m, CallArgs&) {
  HookSpanTimer t("LayerwiseCastingHook", events::HookPhase::PreForward, m);
  maybe_disabled(whole_hook(), "LayerwiseCastingHook.pre_forward", m, [&] { module_to_dtype(m, compute_dtype); });
}

c10::IValue LayerwiseCastingHook::post_forward(HookableModule& m, c10::IValue output) {
  HookSpanTimer t("LayerwiseCastingHook", events::HookPhase::PostForward, m);
  maybe_disabled(whole_hook(), "LayerwiseCastingHook.post_forward", m, [&] { module_to_dtype(m, storage_dtype); });
  return output;
}

// ------------------------------------------------------------------ attaching

std::shared_ptr<ModelHook> get_hook(const HookableModule& module) {
  return std::dynamic_pointer_cast<ModelHook>(module.hook());
}

void add_hook_to_module(HookableModule& module, std::shared_ptr<ModelHook> hook, bool append) {
  if (!hook) throw std::invalid_argument("add_hook_to_module: null hook for " + module_label(module));
  if (append) {
    if (auto old = get_hook(module)) {
      remove_hook_from_module(module);
      hook = std::make_shared<SequentialHook>(std::vector<std::shared_ptr<ModelHook>>{old, hook});
    }
  }
  hook->init_hook(module);
  module.set_hook(hook);
}

void remove_hook_from_module(HookableModule& module, bool recurse) {
  if (auto h = get_hook(module)) {
    h->detach_hook(module);
    module.set_hook(nullptr);
  }
  set_move_guard(module, false);
  if (recurse)
    for (auto& [n, child] : module.hookable_children()) remove_hook_from_module(*child, true);
}

// ------------------------------------------------------------------ tensors and devices

void set_module_tensor_to_device(HookableModule& module, const std::string& tensor_name, const DeviceId& device,
                                 const torch::Tensor& value_in, std::optional<c10::ScalarType> dtype,
                                 TiedParamsMap* tied) {
  auto [owner, local] = resolve_tensor(module, tensor_name);
  const torch::Tensor old = owner->get_tensor(local);
  auto& dm = DeviceManager::instance();
  // Tied shortcut: a tensor already materialised on this device for the same pointer.
  if (tied) {
    for (const torch::Tensor* t : {&value_in, &old}) {
      if (!t->defined() || t->is_meta()) continue;
      auto it = tied->find(t->data_ptr());
      if (it == tied->end()) continue;
      auto jt = it->second.find(device);
      if (jt != it->second.end()) {
        owner->set_tensor(local, jt->second);
        return;
      }
    }
  }
  if (old.is_meta() && !device.is_meta() && !value_in.defined())
    throw std::invalid_argument(local + " is on the meta device, we need a `value` to put in on " + device.str() +
                                ".");
  torch::Tensor src = value_in.defined() ? value_in : old;
  if (value_in.defined() && value_in.sizes() != old.sizes())
    throw std::invalid_argument("Trying to set a tensor of shape " + torch_size(value_in.sizes()) + " in \"" + local +
                                "\" (which has shape " + torch_size(old.sizes()) + "), this looks incorrect.");
  if (dtype) {
    if (!is_integral_or_bool(src.scalar_type())) src = src.to(*dtype);
  } else if (value_in.defined() && !is_integral_or_bool(src.scalar_type()) && src.scalar_type() != old.scalar_type()) {
    src = src.to(old.scalar_type());
  }
  torch::Tensor moved =
      device.is_meta() ? torch::empty(src.sizes(), src.options().device(torch::kMeta)) : dm.to(src, device);
  owner->set_tensor(local, moved);
  if (tied && !device.is_meta()) {
    const void* ptr = nullptr;
    if (!old.is_meta() && tied->count(old.data_ptr()))
      ptr = old.data_ptr();
    else if (value_in.defined() && tied->count(value_in.data_ptr()))
      ptr = value_in.data_ptr();
    if (ptr && !(*tied)[ptr].count(device)) (*tied)[ptr][device] = moved;
  }
}

c10::IValue send_to_device(const c10::IValue& v, const DeviceId& device, const std::vector<std::string>& skip_keys) {
  auto& dm = DeviceManager::instance();
  if (v.isTensor()) return dm.to(v.toTensor(), device);
  if (v.isTensorList()) {
    std::vector<torch::Tensor> out;
    for (const auto& t : v.toTensorVector()) out.push_back(dm.to(t, device));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> out;
    for (const auto& e : v.toTupleRef().elements()) out.push_back(send_to_device(e, device, skip_keys));
    return c10::ivalue::Tuple::create(std::move(out));
  }
  if (v.isList()) {
    auto in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const auto& e : in) out.push_back(send_to_device(e, device, skip_keys));
    return out;
  }
  if (v.isGenericDict()) {
    auto in = v.toGenericDict();
    c10::impl::GenericDict out(in.keyType(), in.valueType());
    for (const auto& kv : in) {
      const bool skip = kv.key().isString() && std::find(skip_keys.begin(), skip_keys.end(),
                                                         kv.key().toStringRef()) != skip_keys.end();
      out.insert(kv.key(), skip ? kv.value() : send_to_device(kv.value(), device, skip_keys));
    }
    return out;
  }
  return v;  // ints, None, strings, custom objects
}

void send_call_to_device(CallArgs& call, const DeviceId& device, const std::vector<std::string>& skip_keys) {
  for (auto& a : call.args) a = send_to_device(a, device, {});
  for (auto& [k, v] : call.kwargs)
    if (std::find(skip_keys.begin(), skip_keys.end(), k) == skip_keys.end()) v = send_to_device(v, device, skip_keys);
}

std::optional<DeviceId> find_device(const c10::IValue& v) {
  if (v.isTensor()) return DeviceManager::instance().device_of(v.toTensor());
  if (v.isTensorList()) {
    for (const auto& t : v.toTensorVector()) return DeviceManager::instance().device_of(t);
    return std::nullopt;
  }
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      if (auto d = find_device(e)) return d;
  } else if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (auto d = find_device(e)) return d;
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict())
      if (auto d = find_device(kv.value())) return d;
  }
  return std::nullopt;
}

std::optional<DeviceId> find_device(const CallArgs& call) {
  for (const auto& a : call.args)
    if (auto d = find_device(a)) return d;
  for (const auto& [k, v] : call.kwargs)
    if (auto d = find_device(v)) return d;
  return std::nullopt;
}

std::optional<DeviceId> first_param_device(HookableModule& module) {
  for (const auto& r : module_tensors(module, true))
    if (r.is_param) return DeviceManager::instance().device_of(r.owner->get_tensor(r.local));
  return std::nullopt;
}

void module_to(HookableModule& module, const DeviceId& device) {
  if (has_move_guard(module)) {
    log("WARNING", "You shouldn't move a model that is dispatched using accelerate hooks.");
    for (const auto& r : module_tensors(module, true))
      if (r.is_param && r.owner->get_tensor(r.local).is_meta())
        throw std::runtime_error("You can't move a model that has some modules offloaded to cpu or disk.");
  }
  // Like nn.Module.to: a tensor shared by several slots (tied weights) is converted once and
  // every slot that held it gets the result.
  auto& dm = DeviceManager::instance();
  std::unordered_map<const void*, torch::Tensor> done;
  for (const auto& [name, m] : models::named_modules(std::dynamic_pointer_cast<HookableModule>(module.shared_from_this())))
    for (const auto& slot : m->local_tensors()) {
      if (!slot.value.defined() || slot.value.is_meta()) continue;
      const void* key = slot.value.unsafeGetTensorImpl();
      auto it = done.find(key);
      if (it == done.end()) it = done.emplace(key, dm.to(slot.value, device)).first;
      m->set_tensor(slot.name, it->second);
    }
}

void module_to_dtype(HookableModule& module, c10::ScalarType dtype, bool recurse) {
  std::unordered_map<const void*, torch::Tensor> done;
  std::function<void(HookableModule&)> rec = [&](HookableModule& m) {
    for (const auto& slot : m.local_tensors()) {
      const auto& t = slot.value;
      if (!t.defined() || !c10::isFloatingType(t.scalar_type()) || t.scalar_type() == dtype) continue;
      const void* key = t.unsafeGetTensorImpl();
      auto it = done.find(key);
      if (it == done.end()) it = done.emplace(key, t.to(dtype)).first;
      m.set_tensor(slot.name, it->second);
    }
    if (recurse)
      for (auto& [n, child] : m.hookable_children()) rec(*child);
  };
  rec(module);
}

std::vector<std::pair<std::string, torch::Tensor>> state_dict(const HookableModule& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::function<void(const HookableModule&, const std::string&)> rec = [&](const HookableModule& m,
                                                                           const std::string& prefix) {
    for (const auto& s : m.local_tensors())
      if (s.value.defined() && s.is_parameter) out.emplace_back(prefix.empty() ? s.name : prefix + "." + s.name, s.value);
    for (const auto& s : m.local_tensors())
      if (s.value.defined() && !s.is_parameter && s.persistent)
        out.emplace_back(prefix.empty() ? s.name : prefix + "." + s.name, s.value);
    for (auto& [n, child] : m.hookable_children()) rec(*child, prefix.empty() ? n : prefix + "." + n);
  };
  rec(module, "");
  return out;
}

void set_move_guard(HookableModule& module, bool on) {
  std::lock_guard<std::mutex> lock(g_guard_mu);
  if (on)
    g_guarded.insert(&module);
  else
    g_guarded.erase(&module);
}

bool has_move_guard(const HookableModule& module) {
  std::lock_guard<std::mutex> lock(g_guard_mu);
  return g_guarded.count(&module) > 0;
}

}  // namespace hs::hooks
