#include "hooks/hooks.h"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <unordered_set>

#include <c10/util/SmallVector.h>

#include "hooks/offload.h"
#include "hooks/runtime.h"
#include "tracer/events.h"

namespace hs::hooks {

using events::HookPhase;

namespace {

// Runs `fn` inside a compiler-disabled scope named `function` when `guard` is true.
template <typename Fn>
auto maybe_disabled(Runtime& rt, bool guard, const char* function, const HookableModule& m, Fn&& fn) {
  if (!guard) return fn();
  CompilerDisabledScope scope(rt, function, m);
  return fn();
}

bool whole_hook(const Runtime& rt) { return rt.compile_policy() == CompilePolicy::WholeHook; }

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
    maybe_disabled(rt, guard, method, m, body);
    end.completed();
  } else {
    auto result = maybe_disabled(rt, guard, method, m, body);
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
  for (const auto& r : named_module_tensors(m, place_submodules)) out.push_back(r.name);
  return out;
}

std::vector<std::string> AlignDevicesHook::offloaded_tensors(HookableModule& m) const {
  std::vector<std::string> out;
  for (const auto& r : named_module_tensors(m, place_submodules))
    if (r.is_param || (offload_buffers && r.persistent)) out.push_back(r.name);
  return out;
}

void AlignDevicesHook::init_hook(HookableModule& m) {
  hook_method(*this, "AlignDevicesHook.init_hook", HookPhase::InitHook, m, [&] {
    if (execution_device && execution_device->is_meta()) tied_params_map = nullptr;
    auto tensors = named_module_tensors(m, place_submodules);
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
    offload_slots_.clear();
    for (auto& name : offloaded_tensors(m)) {
      auto [owner, local] = resolve_tensor(m, name);
      const torch::Tensor& t = owner->get_tensor(local);
      offload_slots_.push_back({std::move(name), t.is_meta() ? t : torch::Tensor()});
    }
    offload_slots_ready_ = true;
  });
}

std::vector<AlignDevicesHook::OffloadSlot>& AlignDevicesHook::offload_slots(HookableModule& m) {
  if (!offload_slots_ready_) {  // a hook whose init_hook did not run: accelerate's walk, every call
    offload_slots_.clear();
    for (auto& name : offloaded_tensors(m)) offload_slots_.push_back({std::move(name), {}});
  }
  return offload_slots_;
}

void AlignDevicesHook::onload_weights(HookableModule& m) {
  tied_pointers_to_remove_.clear();
  const DeviceId dev = *execution_device;
  for (const auto& [name, meta] : offload_slots(m)) {
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
  c10::SmallVector<const void*, 16> sent;  // tensors already sent to meta in this pass
  for (auto& [name, meta] : offload_slots(m)) {
    auto [owner, local] = resolve_tensor(m, name);
    const torch::Tensor& cur = owner->get_tensor(local);
    // accelerate's walk lists a tensor once: two names of one tied tensor (onloaded through
    // the tied map) offload only the first, the other stays resident as upstream.
    const void* impl = cur.unsafeGetTensorImpl();
    if (std::find(sent.begin(), sent.end(), impl) != sent.end()) continue;
    sent.push_back(impl);
    WeightSwapScope offload(WeightSwapScope::Kind::Offload, *this, m, name, DeviceId::meta());
    offload.set_tensor(cur);
    // set_module_tensor_to_device(m, name, meta) without a new meta tensor per call: to meta it
    // only replaces the tensor by an empty one of its shape and options.
    if (!meta.defined() || meta.sizes() != cur.sizes() || meta.scalar_type() != cur.scalar_type() ||
        meta.layout() != cur.layout())
      meta = torch::empty(cur.sizes(), cur.options().device(torch::kMeta));
    owner->set_tensor(local, meta);
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
    if (offload) {
      Runtime& rt = Runtime::current();
      maybe_disabled(rt, !whole_hook(rt), "AlignDevicesHook._onload_weights", m, [&] { onload_weights(m); });
    }
    if (execution_device) send_call_to_device(call, *execution_device, skip_keys);
  });
}

c10::IValue AlignDevicesHook::post_forward(HookableModule& m, c10::IValue output) {
  return hook_method(*this, "AlignDevicesHook.post_forward", HookPhase::PostForward, m, [&] {
    if (offload) {
      Runtime& rt = Runtime::current();
      maybe_disabled(rt, !whole_hook(rt), "AlignDevicesHook._offload_weights", m, [&] { offload_weights(m); });
    }
    if (io_same_device && input_device) output = send_to_device(output, *input_device, skip_keys);
    return output;
  }, &output);
}

void AlignDevicesHook::detach_hook(HookableModule& m) {
  hook_method(*this, "AlignDevicesHook.detach_hook", HookPhase::DetachHook, m, [&] {
    offload_slots_ready_ = false;
    offload_slots_.clear();
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

}  // namespace hs::hooks
