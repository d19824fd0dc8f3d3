// accelerate's `utils/modeling.py` on hookscope's modules: a module's tensors
// (`named_module_tensors`), setting one on a device (`set_module_tensor_to_device`), moving or
// casting a subtree, `state_dict`, and the move guard `dispatch_model` sets. Device maps
// (`infer_auto_device_map`, `get_balanced_memory`, ...) are hooks/device_map.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hooks/device.h"
#include "models/module.h"

namespace hs::hooks {

using models::HookableModule;

/// `tied_params_map`: data pointer of a tied parameter -> {device -> tensor already
/// materialised there}. Shared by all hooks of one dispatch.
using TiedParamsMap = std::unordered_map<const void*, std::map<DeviceId, torch::Tensor>>;

/// One tensor of a module's subtree, as accelerate's `named_module_tensors` walks them.
struct TensorRef {
  std::string name;  ///< dotted, relative to the module walked
  HookableModule* owner;  ///< the module that holds it
  std::string local;  ///< its name in `owner`
  bool is_param;
  bool persistent;  ///< buffers: in the state dict
};

/// `named_module_tensors(module, include_buffers=True, recurse)`: parameters first, then
/// buffers; a tensor shared by several slots once (named_parameters' remove_duplicate).
std::vector<TensorRef> named_module_tensors(HookableModule& m, bool recurse);

/// How errors name a module: "LlamaDecoderLayer 'model.layers.0'" ("<root>" for the root).
std::string module_label(const HookableModule& m);

/// The module of `module`'s subtree that holds the tensor `name` (dotted path allowed) and its
/// name there. Throws std::invalid_argument with accelerate's texts: "{module} has no attribute
/// {part}." for a missing submodule, "{module} does not have a parameter or a buffer named
/// {name}." for a missing tensor.
std::pair<HookableModule*, std::string> resolve_tensor(HookableModule& module, const std::string& name);

/// accelerate's `set_module_tensor_to_device`: replaces `module`'s tensor `tensor_name`
/// (dotted path allowed) with `value` (or the current tensor) on `device`, cast to `dtype`
/// if given, else to the current dtype; integer/bool values are never cast.
/// Throws std::invalid_argument with accelerate's ValueError texts: unknown name ("{module}
/// does not have a parameter or a buffer named {name}."), meta without value ("{name} is on
/// the meta device, we need a `value` to put in on {device}."), shape mismatch ("Trying to set
/// a tensor of shape torch.Size([2, 2]) in "weight" (which has shape torch.Size([4, 3])),
/// this looks incorrect.").
void set_module_tensor_to_device(HookableModule& module, const std::string& tensor_name, const DeviceId& device,
                                 const torch::Tensor& value = {}, std::optional<c10::ScalarType> dtype = std::nullopt,
                                 TiedParamsMap* tied_params_map = nullptr);

/// `module.to(device)` over all tensors of the subtree (dispatch's move guard applies:
/// throws std::runtime_error "You can't move a model that has some modules offloaded to cpu
/// or disk." when dispatched with offloaded parameters; warns otherwise).
void module_to(HookableModule& module, const DeviceId& device);
/// Casts the floating-point tensors of the subtree (or only direct ones) to `dtype`.
void module_to_dtype(HookableModule& module, c10::ScalarType dtype, bool recurse = true);
/// Logical device of the module's first parameter (nullopt when it has none).
std::optional<DeviceId> first_param_device(HookableModule& module);

/// `model.state_dict()`: parameters (tied ones under every name) and persistent buffers,
/// in module order.
std::vector<std::pair<std::string, torch::Tensor>> state_dict(const HookableModule& module);

/// Marks `module` as dispatched (accelerate's `.to`/`.cuda` guard wrappers) in the current
/// runtime; cleared by remove_hook_from_module.
void set_move_guard(HookableModule& module, bool on);
bool has_move_guard(const HookableModule& module);

}  // namespace hs::hooks
