// Device maps: see device_map.h. Behaviour follows accelerate 1.15 `utils/modeling.py`
// (accelerate's `utils/modeling.py`); written from its documented behaviour, not translated.
#include "hooks/device_map.h"

#include <ATen/DeviceAccelerator.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "hooks/device_map_detail.h"
#include "models/causal_lm.h"

namespace hs::hooks {

using detail::emit;
using detail::floor_div;
using detail::map_set;
using detail::mps_device;
using detail::py_repr;

namespace {

// ------------------------------------------------------------------ small helpers


bool starts_with(const std::string& s, const std::string& p) { return s.size() >= p.size() && s.compare(0, p.size(), p) == 0; }
std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }








// ------------------------------------------------------------------ module tree helpers

using Children = std::vector<std::pair<std::string, std::shared_ptr<HookableModule>>>;

/// Direct parameters of `m` (deduplicated, as named_parameters(recurse=False)), as entries.
void append_params(std::vector<ModuleEntry>& out, const HookableModule& m, const std::string& prefix) {
  for (const auto& [n, t] : models::named_parameters(m, /*recurse=*/false)) out.push_back({join_name(prefix, n), nullptr});
}
void append_buffers(std::vector<ModuleEntry>& out, const HookableModule& m, const std::string& prefix) {
  for (const auto& [n, t] : models::named_buffers(m, /*recurse=*/false)) out.push_back({join_name(prefix, n), nullptr});
}
void append_children(std::vector<ModuleEntry>& out, const HookableModule& m, const std::string& prefix) {
  for (const auto& [n, c] : m.hookable_children()) out.push_back({join_name(prefix, n), c.get()});
}

/// What a module is replaced by when it is split: its direct parameters, its direct buffers
/// (quirk 3 F; accelerate leaves them out), then its children.
std::vector<ModuleEntry> split_entries(const ModuleEntry& e) {
  std::vector<ModuleEntry> out;
  append_params(out, *e.module, e.name);
  append_buffers(out, *e.module, e.name);
  append_children(out, *e.module, e.name);
  return out;
}

bool has_children(const HookableModule& m) { return !m.named_children().is_empty(); }

bool splittable(const ModuleEntry& e, const std::vector<std::string>& no_split) {
  return !e.is_tensor() && has_children(*e.module) && !contains(no_split, e.module->class_name());
}

std::vector<ModuleEntry> modules_only(const std::vector<ModuleEntry>& v) {
  std::vector<ModuleEntry> out;
  for (const auto& e : v)
    if (!e.is_tensor()) out.push_back(e);
  return out;
}

/// "name." occurs in "member." — accelerate's (substring) test for "member is inside name".
bool inside(const std::string& name, const std::string& member) {
  return (member + ".").find(name + ".") != std::string::npos;
}

/// Tied groups with members both inside and outside `name`, and the outside members.
struct TieInfo {
  std::vector<std::vector<std::string>> groups;
  std::vector<std::string> outside;
};
TieInfo relevant_ties(const std::string& name, const std::vector<std::vector<std::string>>& tied) {
  TieInfo r;
  for (const auto& g : tied) {
    const bool any_in = std::any_of(g.begin(), g.end(), [&](const std::string& k) { return inside(name, k); });
    const bool all_in = std::all_of(g.begin(), g.end(), [&](const std::string& k) { return inside(name, k); });
    if (any_in && !all_in) r.groups.push_back(g);
  }
  for (const auto& g : r.groups)
    for (const auto& p : g)
      if (!inside(name, p)) r.outside.push_back(p);
  return r;
}

/// accelerate's `get_module_size_with_ties`.
struct SizeWithTies {
  int64_t size = 0;
  std::vector<std::string> names;
  std::vector<ModuleEntry> modules;
};
SizeWithTies size_with_ties(const std::vector<std::string>& tied_params, int64_t module_size, const ModuleSizes& sizes,
                            const std::vector<ModuleEntry>& pending) {
  SizeWithTies r;
  r.size = module_size;
  for (const auto& tp : tied_params) {
    auto it = std::find_if(pending.begin(), pending.end(), [&](const ModuleEntry& e) { return starts_with(tp, e.name + "."); });
    if (it == pending.end())
      throw std::runtime_error(
          "infer_auto_device_map: the tied parameter '" + tp +
          "' belongs to no module still to be placed (accelerate fails here too, with an IndexError in "
          "get_module_size_with_ties)");
    r.names.push_back(it->name);
    r.modules.push_back(*it);
  }
  for (size_t i = 0; i < tied_params.size(); ++i) r.size += sizes.get(r.names[i]) - sizes.get(tied_params[i]);
  return r;
}

/// Ordered device -> int64 (a small dict).
struct DeviceCounter {
  std::vector<std::pair<DeviceId, int64_t>> items;
  int64_t& operator[](const DeviceId& d) {
    for (auto& [k, v] : items)
      if (k == d) return v;
    items.emplace_back(d, 0);
    return items.back().second;
  }
  int64_t get(const DeviceId& d) const {
    for (const auto& [k, v] : items)
      if (k == d) return v;
    return 0;
  }
};


std::optional<int64_t> max_memory_of(const MaxMemory& mm, const DeviceId& d) {
  for (const auto& [k, v] : mm)
    if (k == d) return v;
  return std::nullopt;
}

/// Module name -> module, for every module of the tree (pre-order).
void collect_modules(const HookableModule& m, const std::string& prefix,
                     std::vector<std::pair<std::string, const HookableModule*>>& out) {
  out.emplace_back(prefix, &m);
  for (const auto& [n, c] : m.hookable_children()) collect_modules(*c, join_name(prefix, n), out);
}

}  // namespace

// ------------------------------------------------------------------ sizes

double dtype_byte_size(c10::ScalarType dtype) {
  using S = c10::ScalarType;
  switch (dtype) {
    case S::Bool: return 1.0 / 8;
    case S::Float8_e5m2:
    case S::Float8_e4m3fn:
    case S::Float8_e5m2fnuz:
    case S::Float8_e4m3fnuz:
    case S::Float8_e8m0fnu: return 1;
    // The trailing bit count of the Python name, // 8.
    case S::Byte: case S::Char: case S::QInt8: case S::QUInt8: case S::Bits8: case S::Bits1x8: return 1;
    case S::Short: case S::Half: case S::BFloat16: case S::UInt16: case S::Bits16: return 2;
    case S::Int: case S::Float: case S::QInt32: case S::UInt32: case S::ComplexHalf: return 4;
    case S::Long: case S::Double: case S::UInt64: case S::ComplexFloat: return 8;
    case S::ComplexDouble: return 16;
    case S::QUInt4x2: case S::QUInt2x4: case S::Bits2x4: case S::Bits4x2: case S::Float4_e2m1fn_x2:
    case S::UInt1: case S::UInt2: case S::UInt3: case S::UInt4: case S::UInt5: case S::UInt6: case S::UInt7:
    case S::Int1: case S::Int2: case S::Int3: case S::Int4: case S::Int5: case S::Int6: case S::Int7: return 0;
    default: break;
  }
  throw std::invalid_argument(std::string("`dtype` is not a valid dtype: ") + c10::toString(dtype) + ".");
}

int64_t ModuleSizes::get(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? 0 : items_[it->second].second;
}

void ModuleSizes::add(const std::string& name, int64_t bytes) {
  auto [it, inserted] = index_.emplace(name, items_.size());
  if (inserted)
    items_.emplace_back(name, bytes);
  else
    items_[it->second].second += bytes;
}

namespace {
bool is_int_or_bool(c10::ScalarType t) {
  using S = c10::ScalarType;
  switch (t) {
    case S::Bool: case S::Byte: case S::Char: case S::Short: case S::Int: case S::Long:
    case S::UInt16: case S::UInt32: case S::UInt64:
    case S::UInt1: case S::UInt2: case S::UInt3: case S::UInt4: case S::UInt5: case S::UInt6: case S::UInt7:
    case S::Int1: case S::Int2: case S::Int3: case S::Int4: case S::Int5: case S::Int6: case S::Int7: return true;
    default: return false;
  }
}

int64_t tensor_bytes(int64_t numel, double per_element) {
  if (per_element == 1.0 / 8) return (numel + 7) / 8;  // bool: whole bytes (accelerate: a float)
  return numel * static_cast<int64_t>(per_element);
}
}  // namespace

ModuleSizes compute_module_sizes(const HookableModule& model, std::optional<c10::ScalarType> dtype,
                                 const SpecialDtypes& special_dtypes, bool buffers_only) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  if (!buffers_only) tensors = models::named_parameters(model);
  for (auto& b : models::named_buffers(model)) tensors.push_back(std::move(b));
  const double dtype_size = dtype ? dtype_byte_size(*dtype) : 0.0;
  ModuleSizes sizes;
  for (const auto& [name, t] : tensors) {
    int64_t size;
    auto special = special_dtypes.find(name);
    if (special != special_dtypes.end()) {
      size = tensor_bytes(t.numel(), dtype_byte_size(special->second));
    } else if (!dtype || is_int_or_bool(t.scalar_type())) {
      size = tensor_bytes(t.numel(), dtype_byte_size(t.scalar_type()));
    } else {
      size = tensor_bytes(t.numel(), std::min(dtype_size, dtype_byte_size(t.scalar_type())));
    }
    sizes.add("", size);
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      sizes.add(name.substr(0, dot), size);
    sizes.add(name, size);
  }
  return sizes;
}

int64_t compute_module_total_buffer_size(const HookableModule& model, std::optional<c10::ScalarType> dtype,
                                         const SpecialDtypes& special_dtypes) {
  return compute_module_sizes(model, dtype, special_dtypes, /*buffers_only=*/true).get("");
}

std::pair<int64_t, std::vector<std::string>> get_max_layer_size(const std::vector<ModuleEntry>& modules,
                                                                const ModuleSizes& module_sizes,
                                                                const std::vector<std::string>& no_split) {
  int64_t max_size = 0;
  std::vector<std::string> names;
  std::vector<ModuleEntry> pending(modules);
  while (!pending.empty()) {
    ModuleEntry e = pending.front();
    pending.erase(pending.begin());
    if (e.is_tensor() || !has_children(*e.module) || contains(no_split, e.module->class_name())) {
      const int64_t size = module_sizes.get(e.name);
      if (size > max_size) {
        max_size = size;
        names = {e.name};
      } else if (size == max_size) {
        names.push_back(e.name);
      }
    } else {
      std::vector<ModuleEntry> children;
      append_children(children, *e.module, e.name);
      pending.insert(pending.begin(), children.begin(), children.end());
    }
  }
  return {max_size, names};
}

std::vector<std::vector<std::string>> find_tied_parameters(const HookableModule& model) {
  const auto all = models::named_parameters(model, true, /*remove_duplicate=*/false);
  const auto unique = models::named_parameters(model, true, /*remove_duplicate=*/true);
  std::unordered_set<std::string> unique_names;
  for (const auto& [n, t] : unique) unique_names.insert(n);
  // canonical (first) name -> the other names, in named_parameters() order of the canonical one.
  std::vector<std::vector<std::string>> groups(unique.size());
  for (const auto& [n, t] : all) {
    if (unique_names.count(n)) continue;
    for (size_t i = 0; i < unique.size(); ++i)
      if (unique[i].second.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        if (std::find(groups[i].begin(), groups[i].end(), n) == groups[i].end()) groups[i].push_back(n);
        break;
      }
  }
  std::vector<std::vector<std::string>> out;
  for (size_t i = 0; i < unique.size(); ++i) {
    if (groups[i].empty()) continue;
    std::vector<std::string> g = groups[i];
    g.push_back(unique[i].first);
    std::sort(g.begin(), g.end());
    out.push_back(std::move(g));
  }
  return out;
}

// ------------------------------------------------------------------ device maps

DeviceMap clean_device_map(DeviceMap device_map, const std::string& module_name) {
  const std::string prefix = module_name.empty() ? "" : module_name + ".";
  std::vector<DeviceId> values;
  for (const auto& [k, v] : device_map)
    if (starts_with(k, prefix)) values.push_back(v);
  const bool one_value =
      !values.empty() && std::all_of(values.begin(), values.end(), [&](const DeviceId& d) { return d == values[0]; });
  if (one_value && values.size() > 1) {
    std::erase_if(device_map, [&](const auto& kv) { return starts_with(kv.first, prefix); });
    map_set(device_map, module_name, values[0]);
  }
  // Children one level below, in order of first appearance (quirk a F: accelerate uses a set).
  // The name of the child = the first `parts` dot-separated parts of a key.
  const size_t parts =
      module_name.empty() ? 1 : static_cast<size_t>(std::count(module_name.begin(), module_name.end(), '.')) + 2;
  std::vector<std::string> children;
  for (const auto& [k, v] : device_map) {
    if (!starts_with(k, prefix) || k.size() <= module_name.size()) continue;
    size_t dots = 0, cut = std::string::npos;
    for (size_t i = 0; i < k.size(); ++i)
      if (k[i] == '.' && ++dots == parts) {
        cut = i;
        break;
      }
    std::string child = k.substr(0, cut);
    if (!contains(children, child)) children.push_back(child);
  }
  for (const auto& c : children) device_map = clean_device_map(std::move(device_map), c);
  return device_map;
}

void check_device_map(const HookableModule& model, const DeviceMap& device_map, const LogFn& log) {
  std::vector<std::pair<std::string, const HookableModule*>> modules;
  collect_modules(model, "", modules);
  std::unordered_set<std::string> module_names;
  for (const auto& [n, m] : modules) module_names.insert(n);
  std::vector<std::string> invalid;
  for (const auto& [k, v] : device_map)
    if (!k.empty() && !module_names.count(k)) invalid.push_back(k);
  if (!invalid.empty())
    emit(log, "WARNING",
         "The following device_map keys do not match any submodules in the model: " + py_repr(invalid));
  for (const auto& [k, v] : device_map)
    if (k.empty()) return;
  // state_dict order: per module, its parameters then its persistent buffers; tied
  // duplicates are listed under every name.
  std::vector<std::string> uncovered;
  for (const auto& [prefix, m] : modules) {
    std::vector<std::string> names;
    for (const auto& s : m->local_tensors())
      if (s.is_parameter && s.value.defined()) names.push_back(join_name(prefix, s.name));
    for (const auto& s : m->local_tensors())
      if (!s.is_parameter && s.persistent && s.value.defined()) names.push_back(join_name(prefix, s.name));
    for (const auto& n : names) {
      const bool covered = std::any_of(device_map.begin(), device_map.end(), [&](const auto& kv) {
        return n == kv.first || starts_with(n, kv.first + ".");
      });
      if (!covered) uncovered.push_back(n);
    }
  }
  if (!uncovered.empty()) {
    std::string list;
    for (size_t i = 0; i < uncovered.size(); ++i) list += (i ? ", " : "") + uncovered[i];
    throw std::invalid_argument("The device_map provided does not give any device for the following parameters: " + list);
  }
}

namespace {

// The devices infer_auto_device_map fills, in order (max_memory's, then "disk"), the
// accelerators among them, and the "main devices" on which room for the largest layer is kept.
struct PlacementDevices {
  std::vector<DeviceId> all, gpus, main;
  bool is_main(const DeviceId& d) const { return std::find(main.begin(), main.end(), d) != main.end(); }
};

PlacementDevices placement_devices(const MaxMemory& max_memory) {
  PlacementDevices p;
  for (const auto& [d, v] : max_memory) p.all.push_back(d);
  if (std::find(p.all.begin(), p.all.end(), DeviceId::disk()) == p.all.end()) p.all.push_back(DeviceId::disk());
  for (const auto& d : p.all)
    if (!d.is_cpu() && !d.is_disk()) p.gpus.push_back(d);
  if (std::find(p.gpus.begin(), p.gpus.end(), mps_device()) != p.gpus.end())
    p.main = {mps_device()};
  else if (!p.gpus.empty())
    p.main = {p.gpus[0], DeviceId::cpu()};
  else
    p.main = {DeviceId::cpu()};
  return p;
}

// The room for modules on `device`: no limit on disk (it takes everything); on a main device,
// its max_memory less the room kept for the largest layer (`reserved`).
struct Room {
  std::optional<int64_t> limit;
  int64_t reserved = 0;
};

Room room_on(const DeviceId& device, const MaxMemory& max_memory, const PlacementDevices& placement,
             int64_t max_layer_size) {
  Room r;
  if (device.is_disk()) return r;
  r.limit = *max_memory_of(max_memory, device);
  if (placement.is_main(device)) {
    *r.limit -= max_layer_size;
    r.reserved = max_layer_size;
  }
  return r;
}

// A CausalLM whose config ties the embeddings but whose weights are not tied.
void warn_if_not_tied(const HookableModule& model, const std::vector<std::vector<std::string>>& tied_parameters,
                      const LogFn& log) {
  if (auto* lm = dynamic_cast<const models::CausalLM*>(&model); lm && !lm->tied_weights().empty() && tied_parameters.empty())
    emit(log, "WARNING",
         "The model weights are not tied. Please use the `tie_weights` method before using the `infer_auto_device` "
         "function.");
}

// Puts `name` and the modules tied to it on `device`; the tied ones leave `pending`.
void place_with_ties(DeviceMap& device_map, std::vector<ModuleEntry>& pending, const std::string& name,
                     const SizeWithTies& with_ties, const DeviceId& device) {
  map_set(device_map, name, device);
  for (const auto& tied_name : with_ties.names) {
    auto it = std::find_if(pending.begin(), pending.end(), [&](const ModuleEntry& e) { return e.name == tied_name; });
    if (it != pending.end()) pending.erase(it);
    map_set(device_map, tied_name, device);
  }
}

// accelerate's verbose "Putting ... on D." line.
std::string putting_message(const std::string& name, int64_t module_size, const SizeWithTies& with_ties,
                            std::optional<int64_t> available, const DeviceId& device) {
  std::string out = "Putting " + name;
  out += with_ties.names.empty() ? " (size=" + std::to_string(module_size) + ")" : " and " + py_repr(with_ties.names);
  if (available) out += " (available=" + std::to_string(*available) + ")";
  return out + " on " + device.str() + ".";
}

// accelerate's "try to split one of the tied modules": the first splittable module tied to
// `entry` is replaced by its parts in `pending`, and `entry` goes back in front. False when none
// of them can be split.
bool split_a_tied_module(std::vector<ModuleEntry>& pending, const ModuleEntry& entry, const SizeWithTies& with_ties,
                         const std::vector<std::string>& no_split,
                         const std::function<void(const std::string&)>& verbose) {
  for (size_t i = 0; i < with_ties.names.size(); ++i) {
    const ModuleEntry& tied = with_ties.modules[i];
    if (!splittable(tied, no_split)) continue;
    verbose("Splitting " + with_ties.names[i] + ".");
    const std::vector<ModuleEntry> parts = split_entries(tied);
    auto it = std::find_if(pending.begin(), pending.end(), [&](const ModuleEntry& e) { return e.name == with_ties.names[i]; });
    const size_t idx = static_cast<size_t>(it - pending.begin());
    std::vector<ModuleEntry> next;
    next.push_back(entry);
    next.insert(next.end(), pending.begin(), pending.begin() + idx);
    next.insert(next.end(), parts.begin(), parts.end());
    next.insert(next.end(), pending.begin() + idx + 1, pending.end());
    pending = std::move(next);
    return true;
  }
  return false;
}

// The model's own parameters, then its children, then its own buffers: what placement starts from.
std::vector<ModuleEntry> top_level_entries(const HookableModule& model) {
  std::vector<ModuleEntry> entries;
  append_params(entries, model, "");
  append_children(entries, model, "");
  append_buffers(entries, model, "");
  return entries;
}

// A module too big for what `device` has left (`available` bytes): replaced by its parts in front
// of `pending` when it may be split (true); false sends it to the next device.
bool split_oversized(std::vector<ModuleEntry>& pending, const ModuleEntry& entry, const DeviceId& device,
                     int64_t available, int64_t module_size, const std::vector<std::string>& no_split,
                     const std::function<void(const std::string&)>& verbose) {
  verbose("Not enough space on " + device.str() + " to put " + entry.name + " (space available " +
          std::to_string(available) + ", module size " + std::to_string(module_size) + ").");
  if (!splittable(entry, no_split)) {
    verbose("This module cannot be split, going to the next device.");
    return false;
  }
  verbose("Splitting " + entry.name + ".");
  const std::vector<ModuleEntry> parts = split_entries(entry);
  pending.insert(pending.begin(), parts.begin(), parts.end());
  return true;
}

// accelerate's `fallback_allocate`: the first entry of `pending`, depth-first (splitting what may
// be split), whose size with its tied modules is at most `size_limit` (a negative limit finds
// nothing: accelerate's size conversion fails on it).
std::optional<ModuleEntry> fallback_allocate(const std::vector<ModuleEntry>& pending, int64_t size_limit,
                                             const ModuleSizes& module_sizes,
                                             const std::vector<std::vector<std::string>>& tied_parameters,
                                             const std::vector<std::string>& no_split) {
  if (size_limit < 0) return std::nullopt;
  std::vector<ModuleEntry> search(pending);
  while (!search.empty()) {
    ModuleEntry cand = search.front();
    search.erase(search.begin());
    const TieInfo cties = relevant_ties(cand.name, tied_parameters);
    const SizeWithTies csize = size_with_ties(cties.outside, module_sizes.get(cand.name), module_sizes, search);
    if (csize.size <= size_limit) return cand;
    if (!splittable(cand, no_split)) continue;
    const std::vector<ModuleEntry> parts = split_entries(cand);
    search.insert(search.begin(), parts.begin(), parts.end());
  }
  return std::nullopt;
}

// The list to continue with once a fallback found `found`: `found`, `entry`, then `pending` with
// `found`'s ancestors expanded into their parts and `found` itself taken out.
std::vector<ModuleEntry> after_fallback(const std::vector<ModuleEntry>& pending, const ModuleEntry& found,
                                        const ModuleEntry& entry) {
  std::vector<ModuleEntry> remaining(pending);
  for (size_t dot = found.name.find('.'); dot != std::string::npos; dot = found.name.find('.', dot + 1)) {
    const std::string parent = found.name.substr(0, dot);
    auto it = std::find_if(remaining.begin(), remaining.end(), [&](const ModuleEntry& e) { return e.name == parent; });
    if (it == remaining.end() || it->is_tensor()) continue;
    const std::vector<ModuleEntry> parts = split_entries(*it);
    const size_t idx = static_cast<size_t>(it - remaining.begin());
    remaining.erase(remaining.begin() + idx);
    remaining.insert(remaining.begin() + idx, parts.begin(), parts.end());
  }
  auto it = std::find_if(remaining.begin(), remaining.end(), [&](const ModuleEntry& e) { return e.name == found.name; });
  if (it == remaining.end())
    throw std::logic_error("infer_auto_device_map: fallback module '" + found.name + "' vanished from the list");
  remaining.erase(it);
  std::vector<ModuleEntry> next{found, entry};
  next.insert(next.end(), remaining.begin(), remaining.end());
  return next;
}

// What placement has given each device so far, and what the devices that got nothing needed.
struct Placed {
  DeviceCounter used, buffer_sizes, min_required;
  std::vector<DeviceId> min_required_devices;
  // Leaving `d` for the next device: if it got nothing, what it would have needed (the module
  // that did not fit and the room kept for the largest layer); the kept room counts as used.
  void leave(const DeviceId& d, int64_t needed, int64_t reserved) {
    if (used[d] == 0) {
      min_required[d] = needed + reserved;
      min_required_devices.push_back(d);
    }
    used[d] += reserved;
  }
};

// What infer_auto_device_map logs once everything is placed: the buffers of offloaded modules
// that fit no accelerator's remaining memory (WARNING), the devices that got nothing (INFO).
void log_placement_notes(const InferAutoDeviceMapOptions& opt, const MaxMemory& max_memory,
                         const PlacementDevices& devices, const Placed& placed) {
  const DeviceCounter &used = placed.used, &buffer_sizes = placed.buffer_sizes, &min_required = placed.min_required;
  const std::vector<DeviceId>& min_required_devices = placed.min_required_devices;
  const int64_t non_gpu_buffer = buffer_sizes.get(DeviceId::cpu()) + buffer_sizes.get(DeviceId::disk());
  if (non_gpu_buffer > 0 && !opt.offload_buffers) {
    bool fits_any = false;
    for (const auto& [d, mem] : max_memory) {
      if (d.is_cpu() || d.is_disk()) continue;
      if (mem >= non_gpu_buffer + used.get(d)) fits_any = true;
    }
    if (!devices.gpus.empty() && !fits_any)
      emit(opt.log, "WARNING",
           "Current model requires " + std::to_string(non_gpu_buffer) +
               " bytes of buffer for offloaded layers, which seems does not fit any GPU's remaining memory. If you "
               "are experiencing a OOM later, please consider using offload_buffers=True.");
  }
  if (!min_required_devices.empty()) {
    std::string lines;
    for (size_t i = 0; i < min_required_devices.size(); ++i) {
      if (i) lines += "\n";
      lines += "  - " + min_required_devices[i].str() + ": " +
               std::to_string(min_required.get(min_required_devices[i])) + " bytes required";
    }
    emit(opt.log, "INFO",
         "Based on the current allocation process, no modules could be assigned to the following devices due to "
         "insufficient memory:\n" +
             lines +
             "\nThese minimum requirements are specific to this allocation attempt and may vary. Consider increasing "
             "the available memory for these devices to at least the specified minimum, or adjusting the model "
             "config.");
  }
}

}  // namespace

DeviceMap infer_auto_device_map(const HookableModule& model, const InferAutoDeviceMapOptions& opt) {
  const LogFn& log = opt.log;
  auto verbose = [&](const std::string& msg) {
    if (opt.verbose) emit(log, "VERBOSE", msg);
  };
  const MaxMemory max_memory = get_max_memory(opt.max_memory, opt.num_accelerators, log, opt.probe);
  const std::vector<std::string>& no_split = opt.no_split_module_classes;
  const PlacementDevices placement = placement_devices(max_memory);
  const std::vector<DeviceId>& devices = placement.all;

  const ModuleSizes module_sizes = compute_module_sizes(model, opt.dtype, opt.special_dtypes);
  const auto tied_parameters = find_tied_parameters(model);
  warn_if_not_tied(model, tied_parameters, log);

  std::vector<ModuleEntry> pending = top_level_entries(model);

  DeviceMap device_map;
  size_t current = 0;
  Placed placed;
  DeviceCounter& used = placed.used;
  for (const auto& d : devices) used[d] = 0;

  // Plain variables, not a structured binding: the lambda captures them (clang < 16 cannot).
  std::pair<int64_t, std::vector<std::string>> max_layer = get_max_layer_size(pending, module_sizes, no_split);
  int64_t& max_layer_size = max_layer.first;
  std::vector<std::string>& max_layer_names = max_layer.second;
  auto recompute_max_layer = [&]() {
    std::tie(max_layer_size, max_layer_names) = get_max_layer_size(modules_only(pending), module_sizes, no_split);
  };

  while (!pending.empty()) {
    ModuleEntry entry = pending.front();
    pending.erase(pending.begin());
    const std::string& name = entry.name;
    verbose("\nTreating module " + name + ".");
    std::erase_if(max_layer_names, [&](const std::string& n) { return n == name || starts_with(n, name + "."); });
    if (max_layer_names.empty()) recompute_max_layer();
    const int64_t module_size = module_sizes.get(name);

    const TieInfo ties = relevant_ties(name, tied_parameters);
    if (!ties.groups.empty()) verbose("  Found the relevant tied param groups " + py_repr(ties.groups));
    if (!ties.outside.empty()) verbose("  So those parameters need to be taken into account " + py_repr(ties.outside));

    const DeviceId device = devices[current];
    const auto [limit, reserved] = room_on(device, max_memory, placement, max_layer_size);
    const SizeWithTies with_ties = size_with_ties(ties.outside, module_size, module_sizes, pending);

    // The module and its tied modules fit on this device.
    if (!limit || used[device] + with_ties.size <= *limit) {
      if (opt.verbose)
        verbose(putting_message(name, module_size, with_ties,
                                limit ? std::optional<int64_t>(*limit - used[device]) : std::nullopt, device));
      used[device] += with_ties.size;
      place_with_ties(device_map, pending, name, with_ties, device);
      if (!opt.offload_buffers && !entry.is_tensor())
        placed.buffer_sizes[device] += compute_module_total_buffer_size(*entry.module, opt.dtype, opt.special_dtypes);
      continue;
    }

    // The module fits alone: try to split one of its tied modules.
    if (!ties.outside.empty() && used[device] + module_size <= *limit) {
      verbose("Not enough space on " + device.str() + " to put " + name + " and " + py_repr(with_ties.names) +
              " (space available " + std::to_string(*limit - used[device]) + ", needed size " +
              std::to_string(with_ties.size) + ").");
      if (split_a_tied_module(pending, entry, with_ties, no_split, verbose)) {
        recompute_max_layer();
        continue;
      }
      verbose("None of the tied module can be split, going to the next device.");
    }

    // The module does not fit: split it, or go to the next device.
    if (used[device] + module_size >= *limit &&
        split_oversized(pending, entry, device, *limit - used[device], module_size, no_split, verbose)) {
      recompute_max_layer();
      continue;
    }

    // Nothing placed on this device yet: look for any later module that fits.
    if (used[device] == 0 && opt.fallback_allocation && !device.is_disk()) {
      const int64_t fallback_limit = *max_memory_of(max_memory, device) - std::max(max_layer_size, with_ties.size);
      if (auto found = fallback_allocate(pending, fallback_limit - used[device], module_sizes, tied_parameters, no_split)) {
        pending = after_fallback(pending, *found, entry);
        continue;
      }
    }

    placed.leave(device, with_ties.size, reserved);
    ++current;
    pending.insert(pending.begin(), entry);
    if (current >= devices.size())  // cannot happen: disk takes everything
      throw std::logic_error("infer_auto_device_map: ran out of devices placing '" + name + "'");
  }

  if (opt.clean_result) device_map = clean_device_map(std::move(device_map));

  log_placement_notes(opt, max_memory, placement, placed);
  return device_map;
}

MaxMemory get_balanced_memory(const HookableModule& model, const GetBalancedMemoryOptions& opt) {
  const bool user_not_set = !opt.max_memory.has_value();
  MaxMemory max_memory = get_max_memory(opt.max_memory, opt.num_accelerators, opt.log, opt.probe);
  auto value_of = [&](int idx) -> int64_t& {
    for (auto& [d, v] : max_memory)
      if (d.is_accelerator() && d.index == idx) return v;
    throw std::invalid_argument("get_balanced_memory(low_zero=true): accelerator " + std::to_string(idx) +
                                " is missing from max_memory (the ids must be contiguous from 0; accelerate raises "
                                "KeyError here)");
  };
  // Accelerators with memory ("disk" is ignored: quirk 4 F; "mps"/"cpu" are not counted).
  int num_devices = 0;
  for (const auto& [d, v] : max_memory)
    if (d.is_accelerator() && v > 0) ++num_devices;
  if (num_devices == 0) return max_memory;
  bool low_zero = opt.low_zero;
  if (num_devices == 1) {
    low_zero = false;
    if (user_not_set)
      for (auto& [d, v] : max_memory)
        if (d.is_accelerator()) {
          v = static_cast<int64_t>(static_cast<double>(v) * 0.9);
          emit(opt.log, "INFO",
               "We will use 90% of the memory on device " + d.str() +
                   " for storing the model, and 10% for the buffer to avoid OOM. You can set `max_memory` in to a "
                   "higher value to use more memory (at your own risk).");
          break;
        }
  }
  const ModuleSizes module_sizes = compute_module_sizes(model, opt.dtype, opt.special_dtypes);
  const int64_t total = module_sizes.get("");
  int64_t per_gpu = floor_div(total, low_zero ? num_devices - 1 : num_devices);

  // Size of the first instance (in module_sizes order) of each no-split class.
  int64_t buffer = 0;
  if (!opt.no_split_module_classes.empty()) {
    std::vector<std::pair<std::string, const HookableModule*>> modules;
    collect_modules(model, "", modules);
    std::unordered_map<std::string, const HookableModule*> by_name(modules.begin(), modules.end());
    std::map<std::string, int64_t> found;
    std::set<std::string> wanted(opt.no_split_module_classes.begin(), opt.no_split_module_classes.end());
    for (const auto& [name, size] : module_sizes.items()) {
      if (name.empty()) continue;
      auto it = by_name.find(name);
      if (it != by_name.end()) {
        const std::string& cls = it->second->class_name();
        if (wanted.count(cls) && !found.count(cls)) found[cls] = size;
      }
      if (found.size() == wanted.size()) break;
    }
    for (const auto& [cls, size] : found) buffer = std::max(buffer, size);
  }
  // Mean size of the final modules: leaves once the tensor leaves are removed.
  auto leaves_of = [](const std::vector<std::pair<std::string, int64_t>>& items) {
    std::unordered_map<std::string, int> children;
    for (const auto& [n, s] : items) {
      if (n.empty() || n.find('.') == std::string::npos) continue;
      children[n.substr(0, n.rfind('.'))]++;
    }
    std::vector<std::pair<std::string, int64_t>> leaves;
    for (const auto& [n, s] : items)
      if (!n.empty() && !children.count(n)) leaves.emplace_back(n, s);
    return leaves;
  };
  const auto tensor_leaves = leaves_of(module_sizes.items());
  std::unordered_set<std::string> tensor_leaf_names;
  for (const auto& [n, s] : tensor_leaves) tensor_leaf_names.insert(n);
  std::vector<std::pair<std::string, int64_t>> without_leaves;
  for (const auto& item : module_sizes.items())
    if (!tensor_leaf_names.count(item.first)) without_leaves.push_back(item);
  const auto final_modules = leaves_of(without_leaves);
  int64_t leaves_sum = 0;
  for (const auto& [n, s] : final_modules) leaves_sum += s;
  const int64_t mean_leaves = static_cast<int64_t>(static_cast<double>(leaves_sum) /
                                                   static_cast<double>(std::max<size_t>(final_modules.size(), 1)));
  buffer = static_cast<int64_t>(1.25 * static_cast<double>(std::max(buffer, mean_leaves)));
  per_gpu += buffer;

  std::vector<int> gpu_ids;
  for (const auto& [d, v] : max_memory)
    if (d.is_accelerator() && v > 0) gpu_ids.push_back(d.index);
  std::sort(gpu_ids.begin(), gpu_ids.end());
  // The last device keeps its max_memory in case the buffer is not enough.
  for (size_t i = 0; i + 1 < gpu_ids.size(); ++i) {
    const int idx = gpu_ids[i];
    const int64_t cap = (low_zero && idx == 0) ? value_of(0) : per_gpu;
    value_of(idx) = std::min(cap, value_of(idx));
  }
  if (low_zero) {
    int64_t others = 0;
    for (int i = 1; i < num_devices; ++i) others += value_of(i);
    const int64_t min_zero = std::max<int64_t>(0, total - others);
    value_of(0) = std::min(min_zero, value_of(0));
  }
  return max_memory;
}

}  // namespace hs::hooks
