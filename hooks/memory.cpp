#include "hooks/memory.h"

#include <algorithm>
#include <optional>
#include <string>

#include "hooks/hooks.h"
#include "hooks/offload.h"
#include "hooks/runtime.h"
#include "tracer/events.h"

namespace hs::hooks {

int MemoryLedger::slot_of(const DeviceId& d) const {
  if (d.is_accelerator()) return d.index < accelerators_ ? d.index : -1;
  return d.is_cpu() ? accelerators_ : -1;
}

DeviceId MemoryLedger::device_at(int slot) const {
  return slot < accelerators_ ? DeviceId::accelerator(slot) : DeviceId::cpu();
}

void MemoryLedger::begin(models::HookableModule& model) {
  const DeviceManager& dm = runtime_.devices();
  {
    std::lock_guard<std::mutex> lock(mu_);
    accelerators_ = dm.num_accelerators();
    entries_.clear();
    index_.clear();
    old_end_ = 0;
    young_.store(0, std::memory_order_relaxed);
    const size_t slots = static_cast<size_t>(accelerators_) + 1;
    resident_.assign(slots, 0);
    reported_.assign(slots, -1);  // the first sample reports every device
    peak_.assign(slots, 0);
  }
  active_.store(true, std::memory_order_relaxed);
  models::walk_modules(model, [&](models::HookableModule& m, const std::string&) {
    for (const auto& slot : m.local_tensors())
      if (slot.value.defined() && !slot.value.is_meta()) track(slot.value, dm.device_of(slot.value));
    for_each_align_hook(get_hook(m), [&](AlignDevicesHook& h) {
      if (!h.offload || !h.weights_map) return;
      for (const auto& name : h.offloaded_tensors(m))
        if (auto t = h.weights_map->in_memory(name); t && t->defined() && !t->is_meta()) track(*t, dm.device_of(*t));
    });
  });
  sample();
}

std::map<DeviceId, int64_t> MemoryLedger::end() {
  sample();
  active_.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  index_.clear();
  old_end_ = 0;
  young_.store(0, std::memory_order_relaxed);
  std::map<DeviceId, int64_t> out;
  for (size_t i = 0; i < peak_.size(); ++i) out[device_at(static_cast<int>(i))] = peak_[i];
  return out;
}

void MemoryLedger::track(const torch::Tensor& t, const DeviceId& d) {
  if (!active_.load(std::memory_order_relaxed) || !t.defined() || t.is_meta()) return;
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (!impl) return;
  std::lock_guard<std::mutex> lock(mu_);
  const int slot = slot_of(d);
  if (slot < 0) return;
  const int64_t bytes = static_cast<int64_t>(impl->nbytes());
  // A weak reference keeps the StorageImpl object (not its data) alive, so a tracked address
  // is never reused by a new storage until the sweep drops it.
  auto it = index_.find(impl);
  if (it != index_.end()) {
    Entry& e = entries_[it->second];
    if (e.slot == slot) return;
    resident_[e.slot] -= e.bytes;
    e.slot = slot;
    e.bytes = bytes;
    dirty_.store(true, std::memory_order_relaxed);
  } else {
    index_.emplace(impl, entries_.size());
    entries_.push_back(
        {c10::weak_intrusive_ptr<c10::StorageImpl>(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl)), bytes, slot});
    young_.store(entries_.size() - old_end_, std::memory_order_relaxed);
  }
  resident_[slot] += bytes;
}

void MemoryLedger::sample() {
  if (!active_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  sample_locked(true);
}

void MemoryLedger::sample_recent() {
  if (!active_.load(std::memory_order_relaxed) ||
      (young_.load(std::memory_order_relaxed) == 0 && !dirty_.load(std::memory_order_relaxed)))
    return;
  std::lock_guard<std::mutex> lock(mu_);
  sample_locked(false);
}

void MemoryLedger::sample_locked(bool all) {
  dirty_.store(false, std::memory_order_relaxed);
  // Sweep: drop freed storages (swap-remove, keeping index_ in step). Young entries sit at the
  // back, so removing one of them never moves an old one; after a full sweep all are old.
  for (size_t i = all ? 0 : old_end_; i < entries_.size();) {
    Entry& e = entries_[i];
    if (!e.storage.expired()) {
      ++i;
      continue;
    }
    resident_[e.slot] -= e.bytes;
    index_.erase(e.storage._unsafe_get_target());
    if (i + 1 != entries_.size()) {
      e = std::move(entries_.back());
      index_[e.storage._unsafe_get_target()] = i;
    }
    entries_.pop_back();
  }
  if (all) old_end_ = entries_.size();
  young_.store(entries_.size() - old_end_, std::memory_order_relaxed);
  const int64_t now = events::now_ns();
  events::EventSink* sink = runtime_.sink();
  for (size_t s = 0; s < resident_.size(); ++s) {
    peak_[s] = std::max(peak_[s], resident_[s]);
    if (resident_[s] == reported_[s]) continue;
    reported_[s] = resident_[s];
    if (sink) {
      const std::string dev = device_at(static_cast<int>(s)).str();
      sink->memory_counter({dev, resident_[s], now});
    }
  }
}

std::map<DeviceId, int64_t> MemoryLedger::resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<DeviceId, int64_t> out;
  for (size_t i = 0; i < reported_.size(); ++i)
    if (reported_[i] >= 0) out[device_at(static_cast<int>(i))] = reported_[i];
  return out;
}

std::map<DeviceId, int64_t> MemoryLedger::peaks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<DeviceId, int64_t> out;
  for (size_t i = 0; i < peak_.size(); ++i) out[device_at(static_cast<int>(i))] = peak_[i];
  return out;
}

void MemoryLedger::on_move(const Move& m) { track(m.tensor, m.dst); }

void MemoryLedger::on_hook_begin(const HookCall& call) {
  if (call.phase != events::HookPhase::PostForward || !call.align) return;
  // The module's outputs live on its execution accelerator; then its high-water mark: its
  // weights and its outputs.
  const std::optional<DeviceId>& exec = call.align->execution_device;
  if (exec && exec->is_accelerator() && call.output && active())
    for_each_tensor(*call.output, [&](const torch::Tensor& t) { track(t, *exec); });
  sample_recent();
}

void MemoryLedger::on_hook_end(const HookCall& call) {
  if (!call.completed) return;
  // pre_forward: weights onloaded, inputs moved. post_forward: weights back on meta (their
  // storages freed), outputs moved.
  const bool pre = call.phase == events::HookPhase::PreForward, post = call.phase == events::HookPhase::PostForward;
  if ((call.align && (pre || post)) || (pre && call.hook_class() == "CpuOffload")) sample_recent();
}

}  // namespace hs::hooks
