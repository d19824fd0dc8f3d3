// accelerate's hooks (`accelerate/hooks.py`) on hookscope's hookable modules.
//
// A hook attaches to one `HookableModule` (Python: `module._hf_hook`); every call of that
// module runs `pre_forward -> forward -> post_forward` (models/module.h). The classes and
// their fields mirror accelerate 1.15; where accelerate misbehaves, the choice made (a numbered
// quirk, replicated or fixed) is noted at the declaration.
//
// Devices are logical (`DeviceId`): accelerator indices may be emulated (hooks/device.h), and
// every move goes through the current runtime's `DeviceManager::to`, so a move between two
// emulated accelerators is a real copy that the tracer sees.
//
// Instrumentation stays out of the hook bodies: every hook method tells the runtime
// (hooks/runtime.h) when it begins and ends — which is where spans, the execution-device
// bookkeeping, memory samples and compute spans happen — and, under the whole-hook policy,
// runs inside a compiler-disabled scope, as accelerate's decorator does. The hooks need a
// runtime installed on the calling thread (`Runtime::current()`).
//
// Inference only: module calls always run under no_grad, so `ModelHook::no_grad` is kept for
// fidelity but has no further effect (accelerate reads it only from the top-level hook —
// quirk 14, replicated trivially).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hooks/compiler_disable.h"
#include "hooks/device.h"
#include "hooks/modeling.h"
#include "hooks/operations.h"
#include "hooks/runtime.h"
#include "models/module.h"

namespace hs::hooks {

using models::CallArgs;
using models::HookableModule;

class WeightsMap;  // hooks/offload.h

/// The base hook: identity callbacks.
class ModelHook : public models::ModuleHookInterface, public std::enable_shared_from_this<ModelHook> {
 public:
  bool no_grad = false;
  /// Class name as in accelerate ("ModelHook", "AlignDevicesHook", ...).
  virtual std::string name() const { return "ModelHook"; }
  /// Called once when attached (`add_hook_to_module`).
  virtual void init_hook(HookableModule&) {}
  void pre_forward(HookableModule&, CallArgs&) override {}
  c10::IValue post_forward(HookableModule&, c10::IValue output) override { return output; }
  /// Called when removed (`remove_hook_from_module`).
  virtual void detach_hook(HookableModule&) {}
  virtual std::string repr() const { return name() + "()"; }
};

/// Runs several hooks in insertion order — also in post_forward (not reversed).
/// pre_forward/post_forward are compiler-disabled under `whole-hook`.
class SequentialHook : public ModelHook {
 public:
  explicit SequentialHook(std::vector<std::shared_ptr<ModelHook>> hooks) : hooks(std::move(hooks)) {}
  std::string name() const override { return "SequentialHook"; }
  void init_hook(HookableModule& m) override;
  void pre_forward(HookableModule& m, CallArgs& call) override;
  c10::IValue post_forward(HookableModule& m, c10::IValue output) override;
  void detach_hook(HookableModule& m) override;
  std::string repr() const override;
  std::vector<std::shared_ptr<ModelHook>> hooks;
};

/// Moves inputs and weights to `execution_device` for a forward; with `offload`, keeps the
/// weights on `meta` between calls and materialises them from `weights_map` each time, as
/// accelerate's AlignDevicesHook does case by case.
///
/// Compiler-disabled scopes: `whole-hook` guards all of pre_forward and post_forward;
/// `offload-only` guards only `_onload_weights` (inside pre_forward) and `_offload_weights`
/// (inside post_forward).
///
/// Quirk 5 (fixed): with `offload_buffers` and `place_submodules`, non-persistent buffers of
/// nested modules are placed by their full names (accelerate drops the prefix and raises).
/// Quirk 7 (fixed): tied entries created for a forward are removed again after it, so the
/// shared `tied_params_map` does not grow by one entry per forward; outputs are unchanged.
/// Quirk 15 (replicated): in-place updates to offloaded buffers are lost when the
/// materialised copy is a different tensor from the weights_map entry.
/// AlignDevicesHook's constructor keywords, in accelerate's order
/// (`AlignDevicesHook(execution_device=None, offload=False, io_same_device=False, ...)`).
struct AlignDevicesHookOptions {
  std::optional<DeviceId> execution_device = std::nullopt;
  bool offload = false;
  bool io_same_device = false;
  std::shared_ptr<WeightsMap> weights_map = nullptr;
  bool offload_buffers = false;
  bool place_submodules = false;
  std::vector<std::string> skip_keys = {};
  bool skip_keys_given = false;  ///< false = Python `skip_keys=None` (for repr)
  std::shared_ptr<TiedParamsMap> tied_params_map = nullptr;
};

class AlignDevicesHook : public ModelHook {
 public:
  AlignDevicesHook() = default;
  explicit AlignDevicesHook(AlignDevicesHookOptions o)
      : execution_device(std::move(o.execution_device)),
        offload(o.offload),
        io_same_device(o.io_same_device),
        weights_map(std::move(o.weights_map)),
        offload_buffers(o.offload_buffers),
        place_submodules(o.place_submodules),
        skip_keys(std::move(o.skip_keys)),
        skip_keys_given(o.skip_keys_given),
        tied_params_map(std::move(o.tied_params_map)) {}

  std::optional<DeviceId> execution_device;
  bool offload = false;
  bool io_same_device = false;
  std::shared_ptr<WeightsMap> weights_map;
  bool offload_buffers = false;
  bool place_submodules = false;
  std::vector<std::string> skip_keys;
  bool skip_keys_given = false;  ///< false = Python `skip_keys=None` (for repr)
  std::shared_ptr<TiedParamsMap> tied_params_map;

  // runtime state
  std::optional<DeviceId> input_device;
  std::set<std::string> tied_params_names;
  std::vector<std::pair<std::string, DeviceId>> original_devices;

  std::string name() const override { return "AlignDevicesHook"; }
  void init_hook(HookableModule& m) override;
  void pre_forward(HookableModule& m, CallArgs& call) override;
  c10::IValue post_forward(HookableModule& m, c10::IValue output) override;
  void detach_hook(HookableModule& m) override;
  /// `AlignDevicesHook(execution_device=X, offload=B, io_same_device=B, offload_buffers=B,
  /// place_submodules=B, skip_keys=R)` as accelerate prints it.
  std::string repr() const override;

  /// Names (relative to the module) of the tensors this hook controls (T) and offloads (T_off).
  std::vector<std::string> controlled_tensors(HookableModule& m) const;
  std::vector<std::string> offloaded_tensors(HookableModule& m) const;

 private:
  void onload_weights(HookableModule& m);   // accelerate: part of pre_forward
  void offload_weights(HookableModule& m);  // accelerate: part of post_forward
  // The offloaded tensors' names, taken once when init_hook has put them on meta (accelerate
  // walks the module for them on every call; its tensors do not change while the hook is
  // attached), each with the meta placeholder its offload puts back (made at the first
  // offload, reused while the tensor's shape and dtype stay the same).
  struct OffloadSlot {
    std::string name;
    torch::Tensor meta;
  };
  std::vector<OffloadSlot>& offload_slots(HookableModule& m);
  std::vector<OffloadSlot> offload_slots_;
  bool offload_slots_ready_ = false;
  std::vector<std::pair<const void*, DeviceId>> tied_pointers_to_remove_;
  std::vector<const void*> tied_entries_added_;
};

class UserCpuOffloadHook;

/// `cpu_offload_with_hook`'s hook: keeps the whole model on the CPU and moves it to the
/// execution device for a forward; it stays there afterwards (no post_forward).
/// Quirk 10 (replicated): when the module's first parameter is already on the execution
/// device, the inputs are not moved either.
class CpuOffload : public ModelHook {
 public:
  CpuOffload(std::optional<DeviceId> execution_device, std::shared_ptr<UserCpuOffloadHook> prev_module_hook = nullptr);
  std::string name() const override { return "CpuOffload"; }
  void init_hook(HookableModule& m) override;
  void pre_forward(HookableModule& m, CallArgs& call) override;
  DeviceId execution_device;
  std::shared_ptr<UserCpuOffloadHook> prev_module_hook;
};

/// Handle returned by `cpu_offload_with_hook` (not itself a hook).
class UserCpuOffloadHook {
 public:
  UserCpuOffloadHook(std::shared_ptr<HookableModule> model, std::shared_ptr<CpuOffload> hook)
      : model(std::move(model)), hook(std::move(hook)) {}
  /// Moves the model back to the CPU (re-runs the hook's init_hook).
  void offload();
  /// `remove_hook_from_module(model)`.
  void remove();
  std::shared_ptr<HookableModule> model;
  std::shared_ptr<CpuOffload> hook;
};

/// Stores a module's floating-point tensors in `storage_dtype` and casts them to
/// `compute_dtype` for the forward only (diffusers-style layerwise casting).
class LayerwiseCastingHook : public ModelHook {
 public:
  LayerwiseCastingHook(c10::ScalarType storage_dtype, c10::ScalarType compute_dtype, bool non_blocking = false)
      : storage_dtype(storage_dtype), compute_dtype(compute_dtype), non_blocking(non_blocking) {}
  std::string name() const override { return "LayerwiseCastingHook"; }
  void init_hook(HookableModule& m) override;
  void pre_forward(HookableModule& m, CallArgs& call) override;
  c10::IValue post_forward(HookableModule& m, c10::IValue output) override;
  c10::ScalarType storage_dtype, compute_dtype;
  bool non_blocking;
};

// ------------------------------------------------------------------ attaching

/// `add_hook_to_module`: with `append` and an existing hook, the old hook is detached
/// (remove_hook_from_module) and the two are chained as SequentialHook(old, new) — nesting,
/// not flattening. Without `append`, the old hook is replaced WITHOUT its detach_hook
/// (quirk 6, replicated: weights it offloaded stay on meta). Then `hook.init_hook(module)`.
void add_hook_to_module(HookableModule& module, std::shared_ptr<ModelHook> hook, bool append = false);
/// `remove_hook_from_module`: detach_hook + removal + the dispatch move guard; recursive on
/// request.
void remove_hook_from_module(HookableModule& module, bool recurse = false);
inline void remove_hook_from_submodules(HookableModule& module) { remove_hook_from_module(module, true); }
/// The module's hook as a ModelHook (nullptr if none).
std::shared_ptr<ModelHook> get_hook(const HookableModule& module);
/// Calls `fn` for every AlignDevicesHook in `hook`: the hook itself, or the hooks of a
/// SequentialHook, recursively (insertion order). `hook` may be null.
void for_each_align_hook(const std::shared_ptr<ModelHook>& hook, const std::function<void(AlignDevicesHook&)>& fn);

}  // namespace hs::hooks
