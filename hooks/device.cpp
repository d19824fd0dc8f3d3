#include "hooks/device.h"

#include <algorithm>
#include <stdexcept>

#include "hooks/runtime.h"
#include "tracer/events.h"

namespace hs::hooks {

namespace {
bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace

DeviceId DeviceId::parse(const std::string& s, const std::string& what) {
  if (all_digits(s)) {
    if (s.size() > 6) throw std::invalid_argument(what + ": device index '" + s + "' is out of range");
    return accelerator(std::stoi(s));
  }
  if (s == "cpu") return cpu();
  if (s == "disk") return disk();
  if (s == "meta") return meta();
  if (s == "mps") return {Kind::Mps, 0};
  if (s == "cuda") return accelerator(0);
  if (s.rfind("cuda:", 0) == 0 && all_digits(s.substr(5)) && s.size() <= 11) return accelerator(std::stoi(s.substr(5)));
  throw std::invalid_argument(what + ": '" + s +
                              "' is not a device (expected an accelerator index such as 0, \"cuda:1\", \"cpu\", "
                              "\"disk\" or \"meta\")");
}

DeviceId DeviceId::from_json(const nlohmann::json& j, const std::string& what) {
  if (j.is_number_integer()) {
    auto v = j.get<int64_t>();
    if (v < 0 || v > 1000000) throw std::invalid_argument(what + ": device index " + std::to_string(v) + " is out of range");
    return accelerator(static_cast<int>(v));
  }
  if (j.is_string()) return parse(j.get<std::string>(), what);
  throw std::invalid_argument(what + ": " + j.dump() + " is not a device");
}

std::string DeviceId::str() const {
  switch (kind) {
    case Kind::Accelerator: return std::to_string(index);
    case Kind::Cpu: return "cpu";
    case Kind::Disk: return "disk";
    case Kind::Meta: return "meta";
    case Kind::Mps: return "mps";
  }
  return "?";
}

nlohmann::json DeviceId::to_json() const {
  if (kind == Kind::Accelerator) return index;
  return str();
}

bool DeviceId::operator<(const DeviceId& o) const {
  // accelerate's max_memory order: ints ascending, then "mps", "cpu", "disk".
  auto rank = [](Kind k) {
    switch (k) {
      case Kind::Accelerator: return 0;
      case Kind::Mps: return 1;
      case Kind::Cpu: return 2;
      case Kind::Disk: return 3;
      case Kind::Meta: return 4;
    }
    return 5;
  };
  if (rank(kind) != rank(o.kind)) return rank(kind) < rank(o.kind);
  return index < o.index;
}

DeviceManager::DeviceManager(Runtime& runtime, const RuntimeOptions& options) : runtime_(runtime) {
  const int n = options.accelerators;
  if (n < 0) throw std::invalid_argument("number of accelerators must be >= 0, got " + std::to_string(n));
  const int real = (options.prefer_real && torch::cuda::is_available()) ? static_cast<int>(torch::cuda::device_count()) : 0;
  const auto& budget = options.budget_bytes;
  for (int i = 0; i < n; ++i) {
    AcceleratorInfo a;
    a.index = i;
    a.total_memory = i < static_cast<int>(budget.size()) ? budget[i] : 0;
    if (i < real && !options.emulate_on_gpu) {
      a.emulated = false;
      a.backing = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
      a.name = "cuda:" + std::to_string(i);
    } else if (options.emulate_on_gpu && real > 0) {
      a.backing = torch::Device(torch::kCUDA, 0);
      a.name = "emulated accelerator " + std::to_string(i) + " (on cuda:0)";
    } else {
      a.backing = torch::Device(torch::kCPU);
      a.name = "emulated accelerator " + std::to_string(i) + " (CPU memory)";
    }
    any_emulated_ |= a.emulated;
    accelerators_.push_back(a);
  }
}

bool DeviceManager::is_emulated(const DeviceId& d) const {
  return d.is_accelerator() && d.index < num_accelerators() && accelerators_[d.index].emulated;
}

torch::Device DeviceManager::backing(const DeviceId& d) const {
  switch (d.kind) {
    case DeviceId::Kind::Cpu: return torch::kCPU;
    case DeviceId::Kind::Meta: return torch::kMeta;
    case DeviceId::Kind::Disk:
      throw std::invalid_argument("\"disk\" is not a torch device; disk-offloaded weights are loaded for each forward");
    case DeviceId::Kind::Mps: return torch::Device(torch::kMPS);
    case DeviceId::Kind::Accelerator:
      if (d.index < 0 || d.index >= static_cast<int>(accelerators_.size()))
        throw std::out_of_range("accelerator " + std::to_string(d.index) + " does not exist (" +
                                std::to_string(accelerators_.size()) + " configured" +
                                (accelerators_.empty() ? "; use --devices N to emulate accelerators" : "") + ")");
      return accelerators_[d.index].backing;
  }
  return torch::kCPU;
}

DeviceId DeviceManager::device_of(const torch::Tensor& t) const {
  if (!t.defined()) return DeviceId::cpu();
  if (t.is_meta()) return DeviceId::meta();
  if (any_emulated_) {
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = registry_.find(key);
      if (it != registry_.end() && !it->second.storage.expired()) return it->second.device;
    }
    // Untagged: computed inside a forward on an emulated device → that device.
    if (!exec_stack_.empty() && is_emulated(exec_stack_.back()) &&
        accelerators_[exec_stack_.back().index].backing == t.device())
      return exec_stack_.back();
  }
  if (t.is_cuda()) {
    for (const auto& a : accelerators_)
      if (!a.emulated && a.backing == t.device()) return DeviceId::accelerator(a.index);
    return DeviceId::accelerator(t.device().index());
  }
  return DeviceId::cpu();
}

void DeviceManager::tag(const torch::Tensor& t, const DeviceId& d) {
  if (!t.defined() || t.is_meta() || !is_emulated(d)) return;
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  std::lock_guard<std::mutex> lock(mu_);
  if (registry_.size() >= sweep_at_) {
    for (auto it = registry_.begin(); it != registry_.end();)
      it = it->second.storage.expired() ? registry_.erase(it) : std::next(it);
    sweep_at_ = std::max<size_t>(1024, registry_.size() * 2);
  }
  Entry e{c10::weak_intrusive_ptr<c10::StorageImpl>(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl)), d};
  auto it = registry_.find(impl);
  if (it != registry_.end())
    it->second = std::move(e);
  else
    registry_.emplace(impl, std::move(e));
}

torch::Tensor DeviceManager::to(const torch::Tensor& t, const DeviceId& d, bool non_blocking) {
  if (!t.defined()) return t;
  const DeviceId src = device_of(t);
  if (src == d) return t;
  const torch::Device dst_dev = backing(d);
  if (d.is_meta()) return t.to(dst_dev);
  const int64_t start = events::now_ns();
  // copy=true: a move between two emulated devices on the same backing is still a copy.
  torch::Tensor out = t.to(dst_dev, t.scalar_type(), non_blocking, /*copy=*/true);
  const int64_t end = events::now_ns();
  tag(out, d);
  const int64_t bytes = static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
  runtime_.publish(Move{src, d, bytes, start, end, weight_onload_depth_ > 0, out});
  return out;
}

void DeviceManager::pop_execution() {
  if (!exec_stack_.empty()) exec_stack_.pop_back();
}

std::optional<DeviceId> DeviceManager::current_execution() const {
  if (exec_stack_.empty()) return std::nullopt;
  return exec_stack_.back();
}

}  // namespace hs::hooks
