// Device ids as accelerate spells them, and the emulated accelerators behind them.
//
// accelerate names a device with an int accelerator index (`0`, `1`), the strings "cpu",
// "disk", "meta" (also "mps"), or a torch device string ("cuda:1"). `DeviceId` holds the
// same set. "disk" is never a torch device: it only appears in device maps and max_memory.
//
// Emulated accelerators: without enough GPUs, logical accelerators 0..N-1 are backed by CPU
// memory (or all by one real GPU). Each has its own `max_memory` budget and a move between two
// of them is a real copy, so its cost shows. Because several logical devices share one torch
// device, `DeviceManager` tracks which logical device a tensor's storage belongs to (a registry
// keyed by storage, with weak references so a freed storage can never be mistaken for a new
// one). A `DeviceManager` belongs to a runtime (hooks/runtime.h: `Runtime::devices()`).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace hs::hooks {

struct DeviceId {
  enum class Kind { Accelerator, Cpu, Disk, Meta, Mps };
  Kind kind = Kind::Cpu;
  int index = 0;  ///< accelerator index; 0 for the others

  static DeviceId accelerator(int i) { return {Kind::Accelerator, i}; }
  static DeviceId cpu() { return {Kind::Cpu, 0}; }
  static DeviceId disk() { return {Kind::Disk, 0}; }
  static DeviceId meta() { return {Kind::Meta, 0}; }

  /// Parses "0", "cpu", "disk", "meta", "mps", "cuda", "cuda:1" (and JSON ints / strings).
  /// Throws std::invalid_argument naming `what` and the value for anything else (or a
  /// negative index).
  static DeviceId parse(const std::string& s, const std::string& what = "device");
  static DeviceId from_json(const nlohmann::json& j, const std::string& what = "device");

  bool is_accelerator() const { return kind == Kind::Accelerator; }
  bool is_disk() const { return kind == Kind::Disk; }
  bool is_meta() const { return kind == Kind::Meta; }
  bool is_cpu() const { return kind == Kind::Cpu; }
  /// "0", "cpu", "disk", "meta", "mps".
  std::string str() const;
  /// An int for accelerators, else the string (the form accelerate's dicts use).
  nlohmann::json to_json() const;
  bool operator==(const DeviceId& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const DeviceId& o) const { return !(*this == o); }
  /// Accelerators by index, then cpu, disk, meta, mps (accelerate's max_memory key order).
  bool operator<(const DeviceId& o) const;
};

struct DeviceIdHash {
  size_t operator()(const DeviceId& d) const { return std::hash<int>()(static_cast<int>(d.kind) * 1024 + d.index); }
};

/// What stands behind one logical accelerator.
struct AcceleratorInfo {
  int index = 0;
  bool emulated = true;         ///< backed by memory of `backing`, not a device of its own
  torch::Device backing{torch::kCPU};
  std::string name;             ///< e.g. "emulated accelerator 1 (CPU memory)" or "cuda:0"
  int64_t total_memory = 0;     ///< bytes; for emulated ones the budget given by the user
};

class Runtime;
struct RuntimeOptions;

/// The logical devices of one runtime, and the moves between them.
class DeviceManager {
 public:
  /// `options.accelerators` logical accelerators (hooks/runtime.h): real CUDA devices for as
  /// many as exist when `options.prefer_real` (and CUDA is available); the rest emulated in CPU
  /// memory, or all on cuda:0 when `options.emulate_on_gpu`. `options.budget_bytes[i]`
  /// (optional) is recorded as accelerator i's total memory. Every real copy `to` makes is
  /// published to `runtime`. Throws std::invalid_argument for a negative count.
  DeviceManager(Runtime& runtime, const RuntimeOptions& options);
  DeviceManager(const DeviceManager&) = delete;
  DeviceManager& operator=(const DeviceManager&) = delete;

  int num_accelerators() const { return static_cast<int>(accelerators_.size()); }
  const std::vector<AcceleratorInfo>& accelerators() const { return accelerators_; }
  bool any_emulated() const { return any_emulated_; }
  /// True for a configured accelerator that is emulated.
  bool is_emulated(const DeviceId& d) const;

  /// The torch device that holds a logical device's memory ("disk" → throws
  /// std::invalid_argument: it is not a torch device; an unknown accelerator index →
  /// std::out_of_range naming it).
  torch::Device backing(const DeviceId& d) const;
  /// The logical device a tensor lives on: meta → meta; otherwise the registry entry for its
  /// storage, else the current execution device (below) for untagged tensors on an emulated
  /// accelerator's backing device, else its torch device (cpu, or cuda:i → i).
  DeviceId device_of(const torch::Tensor& t) const;
  /// Records that `t`'s storage belongs to logical device `d` (no-op unless `d` is an emulated
  /// accelerator).
  void tag(const torch::Tensor& t, const DeviceId& d);

  /// Moves `t` to logical device `d`. A no-op when it is already there; to `meta`, an empty
  /// meta tensor; otherwise a real copy (also between two emulated devices on the same
  /// backing), tagged with `d` and published once to the runtime's subscribers as a `Move`
  /// (hooks/subscriber.h). `non_blocking` is passed to torch.
  torch::Tensor to(const torch::Tensor& t, const DeviceId& d, bool non_blocking = false);

  /// The stack of execution devices, innermost last: the runtime pushes an AlignDevicesHook's
  /// execution device when its pre_forward ends and pops it when its post_forward begins;
  /// computed tensors that are not tagged are attributed to the innermost entry.
  void push_execution(const DeviceId& d) { exec_stack_.push_back(d); }
  void pop_execution();
  std::optional<DeviceId> current_execution() const;
  /// The whole stack, outermost first, and its replacement (the emulated compiler puts it back
  /// after a call that stopped between a pre_forward and its post_forward).
  const std::vector<DeviceId>& execution_stack() const { return exec_stack_; }
  void restore_execution_stack(std::vector<DeviceId> stack) { exec_stack_ = std::move(stack); }

 private:
  friend class WeightSwapScope;  // opens and closes weight onloads
  Runtime& runtime_;
  std::vector<AcceleratorInfo> accelerators_;
  bool any_emulated_ = false;
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    DeviceId device;
  };
  mutable std::mutex mu_;
  std::unordered_map<const c10::StorageImpl*, Entry> registry_;
  size_t sweep_at_ = 1024;
  std::vector<DeviceId> exec_stack_;
  int weight_onload_depth_ = 0;  // > 0: copies made now are weight onloads (Move::weight_onload)
};

/// Calls `fn(tensor)` for every tensor in `v`: a tensor, the tensors of a tensor list, and
/// recursively the elements of lists and tuples and the values of dicts (depth-first).
template <typename Fn>
void for_each_tensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const auto& t : v.toTensorVector()) fn(t);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) for_each_tensor(e, fn);
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) for_each_tensor(e, fn);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) for_each_tensor(kv.value(), fn);
  }
}

}  // namespace hs::hooks
