#include "hooks/hooks.h"

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <unordered_set>

#include "hooks/offload.h"
#include "hooks/runtime.h"
#include "tracer/events.h"

namespace hs::hooks {

using events::HookPhase;

// ------------------------------------------------------------------ logging

void log(const std::string& level, const std::string& message) {
  if (const Runtime* r = Runtime::current_or_null())
    r->log(level, message);
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
  models::walk_modules(m, [&](HookableModule& mod, const std::string& prefix) {
    for (const auto& s : mod.local_tensors()) {
      if (!s.value.defined()) continue;
      if (!seen.insert(s.value.unsafeGetTensorImpl()).second) continue;
      TensorRef r{prefix.empty() ? s.name : prefix + "." + s.name, &mod, s.name, s.is_parameter, s.persistent};
      (s.is_parameter ? params : buffers).push_back(std::move(r));
    }
    return recurse;
  });
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

// Runs `fn` inside a compiler-disabled scope named `function` when `guard` is true.
template <typename Fn>
auto maybe_disabled(bool guard, const char* function, const HookableModule& m, Fn&& fn) {
  if (!guard) return fn();
  CompilerDisabledScope scope(function, m.fqn());
  return fn();
}

bool whole_hook() { return Runtime::current().compile_policy() == CompilePolicy::WholeHook; }

// Tells the runtime a hook method ended; if the method throws first, says so on the way out.
class HookCallEnd {
 public:
  HookCallEnd(Runtime& rt, HookCall& call) : rt_(rt), call_(call) {}
  ~HookCallEnd() {
    if (!done_) rt_.hook_end(call_);  // completed == false: the method threw
  }
  void completed() {
    done_ = true;
    call_.completed = true;
    rt_.hook_end(call_);
  }

 private:
  Runtime& rt_;
  HookCall& call_;
  bool done_ = false;
};

// What wraps every hook method, as accelerate's decorators do in Python: the runtime hears the
// method begin and end (Runtime::hook_begin / hook_end: spans, execution devices, memory
// samples, compute spans), and under the whole-hook policy pre_forward and post_forward run
// inside a compiler-disabled scope named `method` (accelerate's `torch.compiler.disable`).
// `output` is post_forward's argument.
template <typename Hook, typename Body>
auto hook_method(const Hook& hook, const char* method, HookPhase phase, HookableModule& m, Body&& body,
                 const c10::IValue* output = nullptr) {
  Runtime& rt = Runtime::current();
  HookCall call{hook, method, phase, m, output};
  if constexpr (std::is_same_v<Hook, AlignDevicesHook>) call.align = &hook;
  rt.hook_begin(call);
  HookCallEnd end(rt, call);
  const bool guard = (phase == HookPhase::PreForward || phase == HookPhase::PostForward) &&
                     rt.compile_policy() == CompilePolicy::WholeHook;
  if constexpr (std::is_void_v<std::invoke_result_t<Body&>>) {
    maybe_disabled(guard, method, m, body);
    end.completed();
  } else {
    auto result = maybe_disabled(guard, method, m, body);
    end.completed();
    return result;
  }
}

}  // namespace

// ------------------------------------------------------------------ SequentialHook

void SequentialHook::init_hook(HookableModule& m) {
  for (auto& h : hooks) h->init_hook(m);
}

void SequentialHook::pre_forward(HookableModule& m, CallArgs& call) {
  hook_method(*this, "SequentialHook.pre_forward", HookPhase::PreForward, m, [&] {
    for (auto& h : hooks) h->pre_forward(m, call);
  });
}

c10::IValue SequentialHook::post_forward(HookableModule& m, c10::IValue output) {
  return hook_method(*this, "SequentialHook.post_forward", HookPhase::PostForward, m, [&] {
    for (auto& h : hooks) output = h->post_forward(m, std::move(output));
    return output;
  }, &output);
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
  hook_method(*this, "AlignDevicesHook.init_hook", HookPhase::InitHook, m, [&] {
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
    auto& dm = Runtime::current().devices();
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
  });
}

void AlignDevicesHook::onload_weights(HookableModule& m) {
  tied_pointers_to_remove_.clear();
  const DeviceId dev = *execution_device;
  for (const auto& name : offloaded_tensors(m)) {
    WeightSwapScope onload(WeightSwapScope::Kind::Onload, *this, m, name, dev);
    torch::Tensor value = weights_map->get(name);
    onload.set_tensor(value);
    if (tied_params_map) {
      const void* ptr = value.data_ptr();
      if (tied_params_names.count(name) && !tied_params_map->count(ptr)) {
        (*tied_params_map)[ptr];
        tied_entries_added_.push_back(ptr);
      }
      auto it = tied_params_map->find(ptr);
      if (it != tied_params_map->end() && !it->second.count(dev)) tied_pointers_to_remove_.emplace_back(ptr, dev);
    }
    set_module_tensor_to_device(m, name, dev, value, std::nullopt, tied_params_map.get());
  }
}

void AlignDevicesHook::offload_weights(HookableModule& m) {
  for (const auto& name : offloaded_tensors(m)) {
    WeightSwapScope offload(WeightSwapScope::Kind::Offload, *this, m, name, DeviceId::meta());
    auto [owner, local] = resolve_tensor(m, name);
    offload.set_tensor(owner->get_tensor(local));
    set_module_tensor_to_device(m, name, DeviceId::meta());
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

void AlignDevicesHook::pre_forward(HookableModule& m, CallArgs& call) {
  hook_method(*this, "AlignDevicesHook.pre_forward", HookPhase::PreForward, m, [&] {
    if (io_same_device) input_device = find_device(call);
    if (offload) maybe_disabled(!whole_hook(), "AlignDevicesHook._onload_weights", m, [&] { onload_weights(m); });
    if (execution_device) send_call_to_device(call, *execution_device, skip_keys);
  });
}

c10::IValue AlignDevicesHook::post_forward(HookableModule& m, c10::IValue output) {
  return hook_method(*this, "AlignDevicesHook.post_forward", HookPhase::PostForward, m, [&] {
    if (offload) maybe_disabled(!whole_hook(), "AlignDevicesHook._offload_weights", m, [&] { offload_weights(m); });
    if (io_same_device && input_device) output = send_to_device(output, *input_device, skip_keys);
    return output;
  }, &output);
}

void AlignDevicesHook::detach_hook(HookableModule& m) {
  hook_method(*this, "AlignDevicesHook.detach_hook", HookPhase::DetachHook, m, [&] {
    if (!offload) return;
    for (const auto& [name, dev] : original_devices) {
      if (dev.is_meta()) continue;
      torch::Tensor value = weights_map && weights_map->contains(name) ? weights_map->get(name) : torch::Tensor();
      set_module_tensor_to_device(m, name, dev, value, std::nullopt, tied_params_map.get());
    }
  });
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
                            : (Runtime::current().devices().num_accelerators() > 0 ? DeviceId::accelerator(0)
                                                                                   : DeviceId::cpu())),
      prev_module_hook(std::move(prev)) {}

void CpuOffload::init_hook(HookableModule& m) { module_to(m, DeviceId::cpu()); }

void CpuOffload::pre_forward(HookableModule& m, CallArgs& call) {
  hook_method(*this, "CpuOffload.pre_forward", HookPhase::PreForward, m, [&] {
    if (prev_module_hook) {
      auto prev_dev = first_param_device(*prev_module_hook->model);
      if (prev_dev && !prev_dev->is_cpu()) prev_module_hook->offload();
    }
    auto dev = first_param_device(m);
    if (dev && *dev == execution_device) return;  // quirk 10: inputs not moved either
    module_to(m, execution_device);
    send_call_to_device(call, execution_device, {});
  });
}

void UserCpuOffloadHook::offload() { hook->init_hook(*model); }
void UserCpuOffloadHook::remove() { remove_hook_from_module(*model); }

// ------------------------------------------------------------------ LayerwiseCastingHook

void LayerwiseCastingHook::init_hook(HookableModule& m) { module_to_dtype(m, storage_dtype); }

void LayerwiseCastingHook::pre_forward(HookableModule& m, CallArgs&) {
  hook_method(*this, "LayerwiseCastingHook.pre_forward", HookPhase::PreForward, m,
              [&] { module_to_dtype(m, compute_dtype); });
}

c10::IValue LayerwiseCastingHook::post_forward(HookableModule& m, c10::IValue output) {
  hook_method(*this, "LayerwiseCastingHook.post_forward", HookPhase::PostForward, m,
              [&] { module_to_dtype(m, storage_dtype); }, &output);
  return output;
}

// ------------------------------------------------------------------ attaching

std::shared_ptr<ModelHook> get_hook(const HookableModule& module) {
  return std::dynamic_pointer_cast<ModelHook>(module.hook());
}

void for_each_align_hook(const std::shared_ptr<ModelHook>& hook, const std::function<void(AlignDevicesHook&)>& fn) {
  if (!hook) return;
  if (auto* a = dynamic_cast<AlignDevicesHook*>(hook.get())) fn(*a);
  if (auto* s = dynamic_cast<SequentialHook*>(hook.get()))
    for (const auto& inner : s->hooks) for_each_align_hook(inner, fn);
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
  auto& dm = Runtime::current().devices();
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
  auto& dm = Runtime::current().devices();
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
  if (v.isTensor()) return Runtime::current().devices().device_of(v.toTensor());
  if (v.isTensorList()) {
    for (const auto& t : v.toTensorVector()) return Runtime::current().devices().device_of(t);
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
    if (r.is_param) return Runtime::current().devices().device_of(r.owner->get_tensor(r.local));
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
  // every slot that held it gets the result. A meta tensor has no data to move anywhere but
  // meta: nn.Module.to raises NotImplementedError with this text at the first one (after
  // converting those before it); here it is checked first, so nothing moves.
  auto& dm = Runtime::current().devices();
  const auto modules = models::named_modules(std::dynamic_pointer_cast<HookableModule>(module.shared_from_this()));
  if (!device.is_meta())
    for (const auto& [name, m] : modules)
      for (const auto& slot : m->local_tensors())
        if (slot.value.defined() && slot.value.is_meta())
          throw std::runtime_error(
              "Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of "
              "torch.nn.Module.to() when moving module from meta to a different device.");
  std::unordered_map<const void*, torch::Tensor> done;
  for (const auto& [name, m] : modules)
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
  models::walk_modules(module, [&](HookableModule& m, const std::string&) {
    for (const auto& slot : m.local_tensors()) {
      const auto& t = slot.value;
      if (!t.defined() || !c10::isFloatingType(t.scalar_type()) || t.scalar_type() == dtype) continue;
      const void* key = t.unsafeGetTensorImpl();
      auto it = done.find(key);
      if (it == done.end()) it = done.emplace(key, t.to(dtype)).first;
      m.set_tensor(slot.name, it->second);
    }
    return recurse;
  });
}

std::vector<std::pair<std::string, torch::Tensor>> state_dict(const HookableModule& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  models::walk_modules(module, [&](const HookableModule& m, const std::string& prefix) {
    for (const auto& s : m.local_tensors())
      if (s.value.defined() && s.is_parameter) out.emplace_back(prefix.empty() ? s.name : prefix + "." + s.name, s.value);
    for (const auto& s : m.local_tensors())
      if (s.value.defined() && !s.is_parameter && s.persistent)
        out.emplace_back(prefix.empty() ? s.name : prefix + "." + s.name, s.value);
  });
  return out;
}

void set_move_guard(HookableModule& module, bool on) { Runtime::current().set_move_guard(module, on); }

bool has_move_guard(const HookableModule& module) { return Runtime::current().has_move_guard(module); }

}  // namespace hs::hooks
