// Resident memory per logical device: the `MEMORY_COUNTERS` of a capture and each run's peak.
//
// Emulated accelerators share host memory, so no allocator can say how much of it "belongs" to
// accelerator 2. The ledger answers from what hookscope itself knows: which tensor storage sits
// on which logical device (the DeviceManager registry's view, hooks/device.h). Each runtime owns
// one (`Runtime::ledger()`, hooks/runtime.h) and it subscribes to the runtime's notifications
// (hooks/subscriber.h): every move, and the hook calls it samples at.
//
// What "resident on device D" counts — the bytes (`StorageImpl::nbytes`, so a view counts its
// whole storage, and a storage shared by several tensors, e.g. tied weights, counts once) of
// every live storage that is
//   - a parameter or buffer of the model on D when accounting begins (weights dispatched
//     there, non-persistent buffers, weights already materialised);
//   - an in-memory source of offloaded weights (`weights_map` entries held as tensors: the
//     state dict `cpu_offload` keeps, the "cpu" entries of a mixed device map) on "cpu";
//   - produced by `DeviceManager::to` on D (every `Move`): weights onloaded by
//     `AlignDevicesHook`, inputs and outputs moved by the hooks (`send_to_device`,
//     `io_same_device`), `module.to(D)`;
//   - the output of a module whose `AlignDevicesHook` runs it on accelerator D (as its
//     post_forward begins: hidden states, logits).
// A storage stops counting when it is freed (weights offloaded back to `meta`, activations
// dropped). It is NOT counted: the KV cache and other tensors a forward creates without handing
// them through a hook (attention scores, MLP intermediates, ...), weights on disk (`.dat` and
// safetensors files are memory-mapped per load and freed after the copy), tensors the caller
// created outside hooks (the prompt ids), allocator overhead (CUDA caching allocator reserve,
// fragmentation, pinned staging buffers) and anything outside the dispatched model.
//
// Samples are taken where residency changes — at the end of each `AlignDevicesHook.pre_forward`
// (weights onloaded, inputs moved), in post_forward once the outputs exist (the module's own
// high-water mark) and after its weights went back to `meta` (`sample_recent()`), and wherever
// the app calls `sample()` (each generation step). A peak is the largest sampled value;
// transient memory between two samples is not seen. The hooks' samples recheck only the
// storages tracked since the last `sample()` (onloaded weights, activations); the older ones —
// dispatched weights, weights_map entries, whatever outlived a step — are rechecked by the next
// `sample()`, so one of those freed in the middle of a step still counts until then.
//
// Cost: nothing while inactive (one relaxed atomic load per tracked tensor or hook sample).
// While active, a mutex and a hash-map insert per tracked storage, a sweep over the storages
// tracked since the last `sample()` per hook sample, and a sweep over all of them (a few
// hundred for a 30-layer model) per `sample()`.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <torch/torch.h>

#include "hooks/device.h"
#include "hooks/subscriber.h"
#include "models/module.h"

namespace hs::hooks {

class Runtime;

class MemoryLedger final : public RuntimeSubscriber {
 public:
  /// An inactive ledger over `runtime`'s devices, reporting to its sink.
  explicit MemoryLedger(Runtime& runtime) : runtime_(runtime) {}
  bool wants_times() const override { return false; }  // it samples the clock itself
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  /// Starts accounting: forgets every tracked storage and peak, tracks what `model` holds now
  /// (see above: its non-meta parameters and buffers on `DeviceManager::device_of`, the
  /// in-memory weights_map entries of its offloading AlignDevicesHooks) and takes a first
  /// sample, which reports every configured accelerator and "cpu", 0 bytes included.
  void begin(models::HookableModule& model);
  /// Takes a last sample, stops accounting and returns the peak bytes per device since begin
  /// (every configured accelerator and "cpu").
  std::map<DeviceId, int64_t> end();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  /// Counts `t`'s storage as resident on `d` until it is freed; a storage tracked before moves
  /// to `d`. No-op while inactive, for undefined or meta tensors and for devices other than the
  /// configured accelerators and "cpu". Every `Move` is tracked this way.
  void track(const torch::Tensor& t, const DeviceId& d);
  /// Forgets every freed storage, updates the peaks and reports every device whose resident
  /// bytes changed since the last report to the runtime's sink (one `MemoryCounter` each, at
  /// the time of the call). No-op while inactive. For coarse boundaries (generation steps).
  void sample();
  /// The same, rechecking only the storages tracked since the last `sample()` — cheap enough
  /// for every hook call. No-op when there are none and nothing moved.
  void sample_recent();

  /// Bytes per device at the last sample, and the peaks since begin (empty maps before any
  /// begin).
  std::map<DeviceId, int64_t> resident() const;
  std::map<DeviceId, int64_t> peaks() const;

  /// Subscriber side: a move tracks the copy on its destination; an AlignDevicesHook's outputs
  /// are tracked on its execution accelerator as its post_forward begins; samples
  /// (`sample_recent`) are taken when an AlignDevicesHook or CpuOffload pre_forward ends and
  /// when an AlignDevicesHook post_forward begins and ends.
  void on_move(const Move& m) override;
  void on_hook_begin(const HookCall& call) override;
  void on_hook_end(const HookCall& call) override;

 private:
  int slot_of(const DeviceId& d) const;  // -1: not accounted
  DeviceId device_at(int slot) const;
  void sample_locked(bool all);

  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    int64_t bytes;
    int slot;
  };
  Runtime& runtime_;
  std::atomic<bool> active_{false};
  std::atomic<bool> dirty_{false};            // an old storage changed device since the last report
  std::atomic<size_t> young_{0};              // entries_ tracked since the last sample()
  mutable std::mutex mu_;
  int accelerators_ = 0;                      // slots 0..n-1: accelerators; slot n: cpu
  std::vector<Entry> entries_;  // tracked storages (freed ones until swept): [0, old_end_) old, then young
  size_t old_end_ = 0;
  std::unordered_map<const c10::StorageImpl*, size_t> index_;  // storage -> position in entries_
  std::vector<int64_t> resident_, reported_, peak_;  // per slot
};

}  // namespace hs::hooks
