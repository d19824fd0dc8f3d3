// Device ids as accelerate spells them, and the emulated accelerators behind them.
//
// accelerate names a device with an int accelerator index (`0`, `1`), the strings "cpu",
// "disk", "meta" (also "mps"), or a torch device string ("cuda:1"). `DeviceId` holds the
// same set. "disk" is never a torch device: it only appears in device maps and max_memory.
//
// Emulated accelerators (DESIGN.md §4): without enough GPUs, logical accelerators 0..N-1 are
// backed by CPU memory (or all by one real GPU). Each has its own `max_memory` budget and a
// move between two of them is a real copy, so its cost shows. Because several logical
// devices share one torch device, `DeviceManager` tracks which logical device a tensor's
// storage belongs to (a registry keyed by storage, with weak references so a freed storage
// can never be mistaken for a new one).
#pragma once

#include <cstdint>
#include <functional>
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
  std::string name;             ///< e.g. "emulated accelerator 1 (CPU memory)" or "NVIDIA H200"
  int64_t total_memory = 0;     ///< bytes; for emulated ones the budget given by the user
};

/// Logical devices of one process. Use `DeviceManager::instance()`; `configure` once before
/// dispatching.
class DeviceManager {
 public:
  static DeviceManager& instance();

  /// `n` logical accelerators. Real CUDA devices are used for as many as exist (when
  /// `prefer_real` and CUDA is available); the rest are emulated in CPU memory, or all on
  /// cuda:0 when `emulate_on_gpu`. `budget_bytes[i]` (optional) is recorded as the emulated
  /// device's total memory.
  void configure(int n, bool prefer_real = true, bool emulate_on_gpu = false,
                 const std::vector<int64_t>& budget_bytes = {});
  int num_accelerators() const { return static_cast<int>(accelerators_.size()); }
  const std::vector<AcceleratorInfo>& accelerators() const { return accelerators_; }
  bool any_emulated() const;

  /// The torch device that holds a logical device's memory ("disk" → throws
  /// std::invalid_argument: it is not a torch device; an unknown accelerator index →
  /// std::out_of_range naming it).
  torch::Device backing(const DeviceId& d) const;
  /// The logical device a tensor lives on: meta → meta; otherwise the registry entry for its
  /// storage, else the current execution context (see ExecutionContext) for untagged tensors
  /// on an emulated accelerator's backing device, else its torch device (cpu, or cuda:i → i).
  DeviceId device_of(const torch::Tensor& t) const;
  /// Records that `t`'s storage belongs to logical device `d` (no-op for real devices), and
  /// counts it as resident on `d` while a MemoryLedger is active (hooks/memory.h; any device).
  void tag(const torch::Tensor& t, const DeviceId& d);

  /// Moves `t` to logical device `d`. A no-op when it is already there; otherwise a real
  /// copy (also between two emulated devices on the same backing), tagged with `d`, and
  /// reported to the transfer observer. `non_blocking` is passed to torch.
  torch::Tensor to(const torch::Tensor& t, const DeviceId& d, bool non_blocking = false);

  /// Observer for every real copy `to` makes: (src, dst, bytes, start_ns, end_ns).
  using TransferObserver =
      std::function<void(const DeviceId& src, const DeviceId& dst, int64_t bytes, int64_t start_ns, int64_t end_ns)>;
  void set_transfer_observer(TransferObserver obs) { observer_ = std::move(obs); }

  /// Thread-local stack of execution devices (pushed by hooks around a forward); computed
  /// tensors that are not tagged are attributed to the innermost entry.
  static void push_execution(const DeviceId& d);
  static void pop_execution();
  static std::optional<DeviceId> current_execution();

  /// While > 0 on this thread, copies made by `to` are weight onloads, which the hooks record
  /// as `events::WeightSwap`: they are not reported again as `events::Transfer` (the transfer
  /// observer and the memory ledger still see them). See WeightCopyScope.
  static int& weight_copy_depth();

 private:
  DeviceManager();
  std::vector<AcceleratorInfo> accelerators_;
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    DeviceId device;
  };
  mutable std::mutex mu_;
  std::unordered_map<const c10::StorageImpl*, Entry> registry_;
  size_t sweep_at_ = 1024;
  TransferObserver observer_;
};

/// RAII: the copies made in this scope are weight onloads (recorded as WeightSwap events by
/// AlignDevicesHook), not activation transfers.
class WeightCopyScope {
 public:
  WeightCopyScope() { ++DeviceManager::weight_copy_depth(); }
  ~WeightCopyScope() { --DeviceManager::weight_copy_depth(); }
  WeightCopyScope(const WeightCopyScope&) = delete;
  WeightCopyScope& operator=(const WeightCopyScope&) = delete;
};

/// RAII: `DeviceManager::push_execution(d)` for a scope.
class ExecutionScope {
 public:
  explicit ExecutionScope(std::optional<DeviceId> d) : active_(d.has_value()) {
    if (active_) DeviceManager::push_execution(*d);
  }
  ~ExecutionScope() {
    if (active_) DeviceManager::pop_execution();
  }
  ExecutionScope(const ExecutionScope&) = delete;
  ExecutionScope& operator=(const ExecutionScope&) = delete;

 private:
  bool active_;
};

}  // namespace hs::hooks
