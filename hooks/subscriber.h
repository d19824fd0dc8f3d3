// What a runtime publishes while the hooks run, and the interface that hears it.
//
// Each piece of work is published once, to every subscriber of the runtime (hooks/runtime.h):
//   - `Move`: one real copy made by `DeviceManager::to` (moves to `meta` copy nothing and are not
//     published);
//   - `HookCall`: a hook method (pre_forward, post_forward, init_hook, detach_hook) begins or ends;
//   - `WeightSwapRecord`: an AlignDevicesHook materialised one weight for a forward, or sent it
//     back to `meta`.
// The memory ledger (hooks/memory.h) and the event-sink adapter (hooks/event_adapter.h) are
// subscribers; tests add their own.
//
// Notifications are synchronous, on the thread doing the work, and only valid for the duration
// of the call (they hold references). Times are host steady-clock nanoseconds
// (`events::now_ns()`), sizes bytes. A subscriber must not throw.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <torch/torch.h>

#include "hooks/device.h"
#include "models/module.h"
#include "tracer/events.h"

namespace hs::hooks {

class ModelHook;
class AlignDevicesHook;

/// One real copy made by `DeviceManager::to`.
struct Move {
  DeviceId src, dst;
  int64_t bytes;                 ///< numel × element size of the tensor copied
  int64_t start_ns, end_ns;      ///< around the copy
  bool weight_onload;            ///< made inside an onload WeightSwapScope (a weight, not an activation)
  const torch::Tensor& tensor;   ///< the copy, on `dst`
};

/// A hook method running. `on_hook_begin` sees it before the method's own work, `on_hook_end`
/// after it (also when it threw).
struct HookCall {
  const ModelHook& hook;
  /// accelerate's qualified name, e.g. "AlignDevicesHook.pre_forward": a string literal (static
  /// storage; the event adapter keys its pinned hook classes by the address).
  std::string_view method;
  events::HookPhase phase;
  models::HookableModule& module;
  /// post_forward: the output the module's forward returned (before the hook moves it);
  /// nullptr for the other methods.
  const c10::IValue* output = nullptr;
  /// The hook itself when it is an AlignDevicesHook (whose execution device the module's
  /// forward runs on), else nullptr.
  const AlignDevicesHook* align = nullptr;
  /// The call's external correlation id (set by the runtime before on_hook_begin; unique
  /// within the runtime, from 1): HOOK_EVENTS.externalId, and what a GPU capture pushes to
  /// CUPTI around the call so the copies and kernels it launches name it.
  uint64_t id = 0;
  /// A completed AlignDevicesHook pre_forward (on_hook_end): the id of the module's forward
  /// that follows, up to its post_forward (MODULE_COMPUTE.externalId); 0 otherwise.
  uint64_t compute_id = 0;
  int64_t called_ns = 0;         ///< when the method was called (before on_hook_begin)
  int64_t start_ns = 0;          ///< when its own work began, after on_hook_begin (0 in on_hook_begin)
  int64_t end_ns = 0;            ///< when its own work ended, before on_hook_end (0 in on_hook_begin)
  bool completed = false;        ///< on_hook_end: false when the method threw

  /// "AlignDevicesHook", "SequentialHook", "CpuOffload", ...
  std::string_view hook_class() const { return method.substr(0, method.find('.')); }
};

/// One weight onload (weights_map -> execution device) or offload (-> meta) of one tensor by an
/// AlignDevicesHook.
struct WeightSwapRecord {
  bool onload;
  const AlignDevicesHook& hook;
  const models::HookableModule& module;
  const std::string& tensor;     ///< name relative to the module ("weight", "0.bias")
  /// Onload: the tensor as the weights_map gave it (its size, dtype and pinning are what was
  /// loaded); offload: the tensor sent back to meta.
  const torch::Tensor& value;
  DeviceId device;               ///< destination: the execution device, or meta
  int64_t start_ns, end_ns;      ///< onload: from before the weights_map lookup to after the copy
};

/// Hears what a runtime publishes. Every method has an empty default.
class RuntimeSubscriber {
 public:
  virtual ~RuntimeSubscriber() = default;
  /// Whether it reads the times of hook calls and weight swaps (HookCall's *_ns,
  /// WeightSwapRecord's start_ns / end_ns). The runtime reads the clock for them only while a
  /// subscriber wants them or a sink records; otherwise they are 0. Read once, at subscribe.
  virtual bool wants_times() const { return true; }
  virtual void on_move(const Move&) {}
  virtual void on_hook_begin(const HookCall&) {}
  virtual void on_hook_end(const HookCall&) {}
  virtual void on_weight_swap(const WeightSwapRecord&) {}
};

}  // namespace hs::hooks
