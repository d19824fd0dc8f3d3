#include "hooks/memory.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "hooks/hooks.h"
#include "hooks/offload.h"
#include "tracer/events.h"

namespace hs::hooks {

namespace {

// The tensor a weights_map holds in memory for `key`, or nullopt when it would be loaded on
// demand (disk .dat files, safetensors index entries) — those are not resident.
std::optional<torch::Tensor> in_memory(const WeightsMap& map, const std::string& key) {
  if (auto* p = dynamic_cast<const PrefixedDataset*>(&map)) return in_memory(*p->dataset(), p->prefix() + key);
  if (auto* l = dynamic_cast<const OffloadedWeightsLoader*>(&map)) return in_memory(l->state_dict(), key);
  if (auto* s = dynamic_cast<const StateDictMap*>(&map))
    if (s->contains(key)) return s->get(key);
  return std::nullopt;
}

void for_each_align_hook(const std::shared_ptr<ModelHook>& h, const std::function<void(AlignDevicesHook&)>& fn) {
  if (!h) return;
  if (auto* a = dynamic_cast<AlignDevicesHook*>(h.get())) fn(*a);
  if (auto* s = dynamic_cast<SequentialHook*>(h.get()))
    for (const auto& inner : s->hooks) for_each_align_hook(inner, fn);
}

}  // namespace

MemoryLedger& MemoryLedger::instance() {
  static MemoryLedger ledger;
  return ledger;
}

int MemoryLedger::slot_of(const DeviceId& d) const {
  if (d.is_accelerator()) return d.index < accelerators_ ? d.index : -1;
  return d.is_cpu() ? accelerators_ : -1;
}

DeviceId MemoryLedger::device_at(int slot) const {
  return slot < accelerators_ ? DeviceId::accelerator(slot) : DeviceId::cpu();
}

void MemoryLedger::begin(models::HookableModule& model) {
  auto& dm = DeviceManager::instance();
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
  std::function<void(models::HookableModule&)> walk = [&](models::HookableModule& m) {
    for (const auto& slot : m.local_tensors())
      if (slot.value.defined() && !slot.value.is_meta()) track(slot.value, dm.device_of(slot.value));
    for_each_align_hook(get_hook(m), [&](AlignDevicesHook& h) {
      if (!h.offload || !h.weights_map) return;
      for (const auto& name : h.offloaded_tensors(m))
        if (auto t = in_memory(*h.weights_map, name); t && t->defined() && !t->is_meta()) track(*t, dm.device_of(*t));
    });
    for (auto& [name, child] : m.hookable_children()) walk(*child);
  };
  walk(model);
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
  auto* sink = events::sink();
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

}  // namespace hs::hooks
