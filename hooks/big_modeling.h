// accelerate's big-model entry points (`accelerate/big_modeling.py` and the attach helpers of
// `hooks.py`): dispatch a model over devices by a device map, CPU and disk offload.
//
// Decisions on accelerate's quirks, documented where they apply:
//  1 (fixed)  the default main device is the first accelerator in device-map insertion order
//             (accelerate takes it from an unordered set).
//  2 (fixed)  an all-disk map that is not expanded to submodules (`{"": "disk"}`) offloads the
//             whole model (accelerate writes nothing and fails on a missing index.json).
//  7 (fixed)  see AlignDevicesHook.
// 11 (fixed)  single-device dispatch always moves the model.
// 13 (fixed)  nothing here mutates a caller's max_memory.
// The "Some parameters are on the meta device because they were offloaded to the cpu and
// disk." warning lists cpu before disk (accelerate's order varies between runs).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hooks/hooks.h"
#include "hooks/offload.h"

namespace hs::hooks {

/// An ordered device map: module name ("" = whole model) -> device, as accelerate's dict.
using DeviceMapEntries = std::vector<std::pair<std::string, DeviceId>>;

struct DispatchOptions {
  std::optional<DeviceId> main_device;
  /// Weights for "cpu"-mapped modules (default: extracted from the model itself).
  std::vector<std::pair<std::string, torch::Tensor>> state_dict;
  bool state_dict_given = false;
  std::optional<std::filesystem::path> offload_dir;
  /// An existing offload index (e.g. safetensors-backed entries); when given, nothing is
  /// written.
  std::optional<OffloadIndex> offload_index;
  bool offload_buffers = false;
  std::vector<std::string> skip_keys;
  std::vector<std::string> preload_module_classes;
  bool force_hooks = false;
};

/// What dispatch did (accelerate sets `model.hf_device_map`).
struct DispatchResult {
  DeviceMapEntries hf_device_map;
  DeviceId main_device = DeviceId::cpu();
  bool hooks_attached = false;
  std::shared_ptr<TiedParamsMap> tied_params_map;
};

/// `dispatch_model`. Validates everything first — unknown modules, accelerator ids that do
/// not exist, a "disk" map without offload_dir, an offload folder whose index.json or .dat
/// files are missing, truncated or disagree with the module (dtype/shape) — and throws
/// (std::invalid_argument / std::runtime_error naming the module or file) before the model is
/// touched, so a failed dispatch leaves no partial state.
DispatchResult dispatch_model(const std::shared_ptr<HookableModule>& model, const DeviceMapEntries& device_map,
                              const DispatchOptions& options = {});

/// `cpu_offload`: every module's weights live in a CPU state dict and are onloaded to
/// `execution_device` (default: the first parameter's device) for each forward.
void cpu_offload(const std::shared_ptr<HookableModule>& model, std::optional<DeviceId> execution_device = std::nullopt,
                 bool offload_buffers = false,
                 std::optional<std::vector<std::pair<std::string, torch::Tensor>>> state_dict = std::nullopt,
                 const std::vector<std::string>& preload_module_classes = {});

/// `disk_offload`: like cpu_offload, but the weights are written once to `offload_dir`
/// (accelerate's index.json + .dat format) unless it already holds an index.json, and are
/// read from there for each forward.
void disk_offload(const std::shared_ptr<HookableModule>& model, const std::filesystem::path& offload_dir,
                  std::optional<DeviceId> execution_device = std::nullopt, bool offload_buffers = false,
                  const std::vector<std::string>& preload_module_classes = {});

/// `cpu_offload_with_hook`: returns the handle whose `offload()` moves the model back to the
/// CPU; `prev_module_hook` is offloaded when this model runs.
std::shared_ptr<UserCpuOffloadHook> cpu_offload_with_hook(const std::shared_ptr<HookableModule>& model,
                                                          std::optional<DeviceId> execution_device = std::nullopt,
                                                          std::shared_ptr<UserCpuOffloadHook> prev_module_hook = nullptr);

/// `attach_align_device_hook` (pre-order; a preload class gets one hook for its subtree).
void attach_align_device_hook(HookableModule& module, std::optional<DeviceId> execution_device, bool offload,
                              std::shared_ptr<WeightsMap> weights_map, bool offload_buffers,
                              const std::string& module_name, const std::vector<std::string>& skip_keys,
                              const std::vector<std::string>& preload_module_classes,
                              std::shared_ptr<TiedParamsMap> tied_params_map, bool skip_keys_given = false);

/// `attach_execution_device_hook`.
void attach_execution_device_hook(HookableModule& module, const DeviceId& execution_device,
                                  const std::vector<std::string>& skip_keys,
                                  const std::vector<std::string>& preload_module_classes,
                                  std::shared_ptr<TiedParamsMap> tied_params_map, bool skip_keys_given = false);

/// `attach_align_device_hook_on_blocks`, mapping form (as dispatch_model uses it).
void attach_align_device_hook_on_blocks(HookableModule& module, const std::map<std::string, DeviceId>& execution_device,
                                        const std::map<std::string, bool>& offload,
                                        std::shared_ptr<WeightsMap> weights_map, bool offload_buffers,
                                        const std::string& module_name, const std::vector<std::string>& skip_keys,
                                        const std::vector<std::string>& preload_module_classes,
                                        std::shared_ptr<TiedParamsMap> tied_params_map, bool skip_keys_given = false);

/// `attach_layerwise_casting_hooks`: appends a LayerwiseCastingHook to every Linear not
/// skipped by class name or by a regex searched in its FQN (the subtree of a skipped module
/// is skipped too).
void attach_layerwise_casting_hooks(HookableModule& module, c10::ScalarType storage_dtype,
                                    c10::ScalarType compute_dtype,
                                    const std::vector<std::string>& skip_modules_pattern = {},
                                    const std::vector<std::string>& skip_modules_classes = {},
                                    bool non_blocking = false);

/// `find_tied_parameters`-style groups are re-tied: for each group the first member (sorted
/// by name) that is not on meta becomes the tensor of every name in the group.
void retie_parameters(HookableModule& model, const std::vector<std::vector<std::string>>& tied_groups);

}  // namespace hs::hooks
