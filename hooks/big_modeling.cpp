#include "hooks/big_modeling.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>
#include <set>
#include <stdexcept>

#include "hooks/device_map.h"
#include "hooks/offload.h"

namespace hs::hooks {

namespace fs = std::filesystem;

namespace {

// A skip_modules_pattern, searched in a module's FQN as Python's `re.search` (PCRE2: Python's
// regex syntax, not ECMAScript's). Throws std::invalid_argument naming an invalid pattern.
class SearchPattern {
 public:
  explicit SearchPattern(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF, &error,
                              &offset, nullptr));
    if (!code_) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw std::invalid_argument("skip_modules_pattern '" + pattern + "' is not a valid regex: " +
                                  reinterpret_cast<const char*>(message) + " at offset " + std::to_string(offset));
    }
    data_.reset(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    if (!data_) throw std::bad_alloc();
  }
  bool search(const std::string& text) const {
    return pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, data_.get(),
                       nullptr) >= 0;
  }

 private:
  struct FreeCode {
    void operator()(pcre2_code* c) const { pcre2_code_free(c); }
  };
  struct FreeData {
    void operator()(pcre2_match_data* d) const { pcre2_match_data_free(d); }
  };
  std::unique_ptr<pcre2_code, FreeCode> code_;
  std::unique_ptr<pcre2_match_data, FreeData> data_;
};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool has_direct_tensors(const HookableModule& m) {
  for (const auto& s : m.local_tensors())
    if (s.value.defined()) return true;
  return false;
}

// `len(module.state_dict()) > 0`: a parameter or persistent buffer in the module or below it.
bool has_state(const HookableModule& m) {
  bool found = false;
  models::walk_modules(m, [&](const HookableModule& sub, const std::string&) {
    for (const auto& s : sub.local_tensors())
      if (s.value.defined() && (s.is_parameter || s.persistent)) found = true;
    return !found;
  });
  return found;
}

std::string child_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Keys equal to a module name or under it ("a.1" does not capture "a.10"); "" selects all.
bool under(const std::string& key, const std::string& module) {
  return module.empty() || key == module || key.rfind(module + ".", 0) == 0;
}

}  // namespace

// ------------------------------------------------------------------ attach helpers

void attach_align_device_hook(HookableModule& module, std::optional<DeviceId> exec, bool offload,
                              std::shared_ptr<WeightsMap> weights_map, bool offload_buffers,
                              const std::string& module_name, const std::vector<std::string>& skip_keys,
                              const std::vector<std::string>& preload, std::shared_ptr<TiedParamsMap> tied,
                              bool skip_keys_given) {
  const bool full_offload = offload && contains(preload, module.class_name());
  if (has_direct_tensors(module) || full_offload) {
    std::shared_ptr<WeightsMap> prefixed;
    if (weights_map)
      prefixed = module_name.empty() ? weights_map : std::make_shared<PrefixedDataset>(weights_map, module_name + ".");
    add_hook_to_module(module,
                       std::make_shared<AlignDevicesHook>(AlignDevicesHookOptions{.execution_device = exec,
                                                                                  .offload = offload,
                                                                                  .weights_map = prefixed,
                                                                                  .offload_buffers = offload_buffers,
                                                                                  .place_submodules = full_offload,
                                                                                  .skip_keys = skip_keys,
                                                                                  .skip_keys_given = skip_keys_given,
                                                                                  .tied_params_map = tied}),
                       /*append=*/true);
  }
  if (full_offload) return;
  for (auto& [n, child] : module.hookable_children())
    attach_align_device_hook(*child, exec, offload, weights_map, offload_buffers, child_name(module_name, n),
                             skip_keys, preload, tied, skip_keys_given);
}

void attach_execution_device_hook(HookableModule& module, const DeviceId& exec,
                                  const std::vector<std::string>& skip_keys, const std::vector<std::string>& preload,
                                  std::shared_ptr<TiedParamsMap> tied, bool skip_keys_given) {
  if (!module.hook() && has_state(module))
    add_hook_to_module(module, std::make_shared<AlignDevicesHook>(AlignDevicesHookOptions{
                                   .execution_device = exec,
                                   .skip_keys = skip_keys,
                                   .skip_keys_given = skip_keys_given,
                                   .tied_params_map = tied}));
  if (contains(preload, module.class_name())) return;
  for (auto& [n, child] : module.hookable_children())
    attach_execution_device_hook(*child, exec, skip_keys, preload, tied, skip_keys_given);
}

void attach_align_device_hook_on_blocks(HookableModule& module, const std::map<std::string, DeviceId>& exec,
                                        const std::map<std::string, bool>& offload,
                                        std::shared_ptr<WeightsMap> weights_map, bool offload_buffers,
                                        const std::string& module_name, const std::vector<std::string>& skip_keys,
                                        const std::vector<std::string>& preload, std::shared_ptr<TiedParamsMap> tied,
                                        bool skip_keys_given) {
  auto e = exec.find(module_name);
  auto o = offload.find(module_name);
  if (e != exec.end() && o != offload.end() && !o->second) {
    // (a) a resident block: one hook for its subtree, then execution-device hooks below.
    add_hook_to_module(module, std::make_shared<AlignDevicesHook>(AlignDevicesHookOptions{
                                   .execution_device = e->second,
                                   .io_same_device = module_name.empty(),
                                   .offload_buffers = offload_buffers,
                                   .place_submodules = true,
                                   .skip_keys = skip_keys,
                                   .skip_keys_given = skip_keys_given,
                                   .tied_params_map = tied}));
    attach_execution_device_hook(module, e->second, skip_keys, {}, tied, skip_keys_given);
  } else if (e != exec.end() && o != offload.end() && o->second) {
    // (b) an offloaded block.
    attach_align_device_hook(module, e->second, true, weights_map, offload_buffers, module_name, skip_keys, preload,
                             tied, skip_keys_given);
    if (!module.hook())
      add_hook_to_module(module, std::make_shared<AlignDevicesHook>(AlignDevicesHookOptions{
                                     .execution_device = e->second,
                                     .io_same_device = module_name.empty(),
                                     .skip_keys = skip_keys,
                                     .skip_keys_given = skip_keys_given,
                                     .tied_params_map = tied}));
    attach_execution_device_hook(module, e->second, skip_keys, preload, tied, skip_keys_given);
  } else if (module_name.empty()) {
    // (c) the root, not in the maps.
    std::optional<DeviceId> root_exec;
    if (e != exec.end()) root_exec = e->second;
    add_hook_to_module(module, std::make_shared<AlignDevicesHook>(AlignDevicesHookOptions{
                                   .execution_device = root_exec,
                                   .io_same_device = true,
                                   .skip_keys = skip_keys,
                                   .skip_keys_given = skip_keys_given,
                                   .tied_params_map = tied}));
  }
  for (auto& [n, child] : module.hookable_children())
    attach_align_device_hook_on_blocks(*child, exec, offload, weights_map, offload_buffers, child_name(module_name, n),
                                       skip_keys, preload, tied, skip_keys_given);
}

void attach_layerwise_casting_hooks(HookableModule& module, c10::ScalarType storage, c10::ScalarType compute,
                                    const std::vector<std::string>& patterns, const std::vector<std::string>& classes,
                                    bool non_blocking) {
  std::vector<SearchPattern> res;
  for (const auto& p : patterns) res.emplace_back(p);
  // A skipped module's subtree is skipped too; a Linear gets the hook and is not descended.
  models::walk_modules(module, [&](HookableModule& m, const std::string&) {
    if (contains(classes, m.class_name())) return false;
    for (const auto& r : res)
      if (r.search(m.fqn())) return false;
    if (m.class_name() == "Linear") {
      add_hook_to_module(m, std::make_shared<LayerwiseCastingHook>(storage, compute, non_blocking), true);
      return false;
    }
    return true;
  });
}

// ------------------------------------------------------------------ ties

void retie_parameters(HookableModule& model, const std::vector<std::vector<std::string>>& groups) {
  auto root = std::dynamic_pointer_cast<HookableModule>(model.shared_from_this());
  auto slot_of = [&](const std::string& name) -> std::pair<std::shared_ptr<HookableModule>, std::string> {
    auto dot = name.rfind('.');
    auto m = models::get_submodule(root, dot == std::string::npos ? "" : name.substr(0, dot));
    return {m, dot == std::string::npos ? name : name.substr(dot + 1)};
  };
  for (auto group : groups) {
    std::sort(group.begin(), group.end());
    torch::Tensor shared;
    for (const auto& n : group) {
      auto [m, local] = slot_of(n);
      if (m && !m->get_tensor(local).is_meta()) {
        shared = m->get_tensor(local);
        break;
      }
    }
    if (!shared.defined()) continue;
    for (const auto& n : group) {
      auto [m, local] = slot_of(n);
      if (m) m->set_tensor(local, shared);
    }
  }
}

// ------------------------------------------------------------------ dispatch_model

namespace {

// The devices of a device map in insertion order (quirk 1 fixed); throws for "meta" and for
// accelerators the runtime does not have.
std::vector<DeviceId> mapped_devices(const DeviceMapEntries& device_map, const DeviceManager& dm) {
  std::vector<DeviceId> devices;
  for (const auto& [name, dev] : device_map) {
    if (dev.is_meta())
      throw std::invalid_argument("device_map: module '" + name + "' is mapped to \"meta\", which holds no data");
    if (dev.is_accelerator() && dev.index >= dm.num_accelerators())
      throw std::invalid_argument("device_map: module '" + name + "' is mapped to accelerator " +
                                  std::to_string(dev.index) + ", but only " + std::to_string(dm.num_accelerators()) +
                                  " accelerator(s) are configured (real or emulated)");
    if (std::find(devices.begin(), devices.end(), dev) == devices.end()) devices.push_back(dev);
  }
  return devices;
}

// Where the disk-mapped weights will come from: an index to read, or a folder to write first.
struct DiskOffloadPlan {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  // the disk-mapped state-dict entries
  std::optional<OffloadIndex> index;
  bool write = false;  // offload_dir has no index.json yet: write `tensors` there
};

// Validates the disk part of a dispatch without touching anything: an offload_dir or index is
// given, and an existing index holds every disk-mapped tensor with its dtype and shape.
DiskOffloadPlan plan_disk_offload(const HookableModule& model, const std::vector<std::string>& disk_modules,
                                  const DispatchOptions& opt) {
  DiskOffloadPlan plan;
  plan.index = opt.offload_index;
  if (disk_modules.empty()) return plan;
  if (!opt.offload_dir && !opt.offload_index) {
    std::string names;
    for (size_t i = 0; i < disk_modules.size(); ++i) names += (i ? ", " : "") + disk_modules[i];
    throw std::invalid_argument(
        "We need an `offload_dir` to dispatch this model according to this `device_map`, the following submodules "
        "need to be offloaded: " + names + ".");
  }
  // Quirk 2 fixed: "" selects every tensor (under() treats it so).
  for (const auto& [k, t] : state_dict(model))
    for (const auto& dmod : disk_modules)
      if (under(k, dmod)) {
        plan.tensors.emplace_back(k, t);
        break;
      }
  if (!opt.offload_index && opt.offload_dir && !fs::exists(*opt.offload_dir / "index.json")) {
    for (const auto& [k, t] : plan.tensors)
      if (t.is_meta())
        throw std::invalid_argument("dispatch_model: disk-mapped tensor '" + k +
                                    "' is on the meta device and no offload folder holds it: Cannot copy out of "
                                    "meta tensor");
    plan.write = true;
    return plan;
  }
  if (!opt.offload_index) plan.index = read_offload_index(*opt.offload_dir);
  for (const auto& [k, t] : plan.tensors) {
    const OffloadIndexEntry* e = plan.index->find(k);
    if (!e)
      throw std::invalid_argument("offload folder " + (opt.offload_dir ? opt.offload_dir->string() : std::string("<index>")) +
                                  ": index.json has no entry for '" + k + "' (module mapped to \"disk\")");
    check_entry_matches(k, *e, t, opt.offload_dir.value_or(fs::path()));
  }
  return plan;
}

// accelerate's `tied_params_map`: an empty entry for the data pointer of every tied parameter
// that is not on meta. The map is keyed by addresses, so it also keeps those parameters'
// storages alive: once init_hook sends an offloaded one to meta its memory would be freed, and a
// later onload allocated at the same address would find the stale entry and be swapped for
// another tensor (in accelerate the same can happen; it is rare there only because the
// addresses are seldom reused).
std::shared_ptr<TiedParamsMap> tied_params_map_of(const std::shared_ptr<HookableModule>& model,
                                                  const std::vector<std::vector<std::string>>& tied_groups) {
  struct MapWithStorages {
    TiedParamsMap map;
    std::vector<torch::Tensor> keys_alive;
  };
  auto holder = std::make_shared<MapWithStorages>();
  for (const auto& group : tied_groups)
    for (const auto& name : group) {
      auto dot = name.rfind('.');
      auto m = models::get_submodule(model, dot == std::string::npos ? "" : name.substr(0, dot));
      const auto& t = m->get_tensor(dot == std::string::npos ? name : name.substr(dot + 1));
      if (t.is_meta()) continue;
      holder->map[t.data_ptr()];
      holder->keys_alive.push_back(t);
    }
  return std::shared_ptr<TiedParamsMap>(holder, &holder->map);  // shares ownership of the storages
}

}  // namespace

DispatchResult dispatch_model(const std::shared_ptr<HookableModule>& model, const DeviceMapEntries& device_map,
                              const DispatchOptions& opt) {
  if (device_map.empty()) throw std::invalid_argument("dispatch_model: the device_map is empty");
  // ---- validation, before anything is touched
  check_device_map(*model, device_map);
  const DeviceManager& dm = Runtime::current().devices();
  const std::vector<DeviceId> devices = mapped_devices(device_map, dm);
  const bool has_disk = std::find(devices.begin(), devices.end(), DeviceId::disk()) != devices.end();
  const bool has_cpu = std::find(devices.begin(), devices.end(), DeviceId::cpu()) != devices.end();

  DispatchResult result;
  result.hf_device_map = device_map;
  if (!(devices.size() > 1 || has_disk || opt.force_hooks)) {
    module_to(*model, devices[0]);  // quirk 11 fixed: always moves
    result.main_device = devices[0];
    return result;
  }

  DeviceId main = DeviceId::cpu();
  if (opt.main_device) {
    main = *opt.main_device;
  } else {
    for (const auto& d : devices)
      if (!d.is_cpu() && !d.is_disk()) {
        main = d;
        break;
      }
  }
  result.main_device = main;
  const bool cpu_offloaded = !(main.is_cpu() || main.kind == DeviceId::Kind::Mps);  // disk always is

  std::vector<std::string> cpu_modules, disk_modules;
  for (const auto& [name, dev] : device_map) {
    if (dev.is_cpu()) cpu_modules.push_back(name);
    if (dev.is_disk()) disk_modules.push_back(name);
  }

  std::vector<std::pair<std::string, torch::Tensor>> sd = opt.state_dict;
  bool have_sd = opt.state_dict_given;
  if (!main.is_cpu() && !cpu_modules.empty() && !have_sd) {
    sd = extract_submodules_state_dict(state_dict(*model), cpu_modules);
    have_sd = true;
  }
  DiskOffloadPlan disk = plan_disk_offload(*model, disk_modules, opt);

  // ---- from here on the model is changed
  if (disk.write) {
    offload_state_dict(*opt.offload_dir, disk.tensors);
    disk.index = read_offload_index(*opt.offload_dir);
  }

  std::map<std::string, DeviceId> exec;
  std::map<std::string, bool> offload;
  for (const auto& [name, dev] : device_map) {
    exec[name] = (dev.is_cpu() || dev.is_disk()) ? main : dev;
    offload[name] = dev.is_disk() || (dev.is_cpu() && cpu_offloaded);
  }
  exec[""] = main;

  std::shared_ptr<WeightsMap> weights_map;
  const bool folder = !disk_modules.empty() && opt.offload_dir.has_value();
  if (have_sd || folder || opt.offload_index) {
    std::optional<torch::Device> load_dev;
    if (opt.offload_index) load_dev = dm.backing(main);
    weights_map = std::make_shared<OffloadedWeightsLoader>(
        have_sd ? std::optional<std::vector<std::pair<std::string, torch::Tensor>>>(sd) : std::nullopt,
        folder ? opt.offload_dir : std::nullopt, disk.index, load_dev);
  }

  const auto tied_groups = find_tied_parameters(*model);
  result.tied_params_map = tied_params_map_of(model, tied_groups);
  attach_align_device_hook_on_blocks(*model, exec, offload, weights_map, opt.offload_buffers, "", opt.skip_keys,
                                     opt.preload_module_classes, result.tied_params_map, !opt.skip_keys.empty());

  if (has_cpu || has_disk)
    log("WARNING", std::string("Some parameters are on the meta device because they were offloaded to the ") +
                       (has_cpu && has_disk ? "cpu and disk" : has_cpu ? "cpu" : "disk") + ".");
  retie_parameters(*model, tied_groups);
  set_move_guard(*model, true);
  result.hooks_attached = true;
  return result;
}

// ------------------------------------------------------------------ offload entry points

void cpu_offload(const std::shared_ptr<HookableModule>& model, std::optional<DeviceId> exec, bool offload_buffers,
                 std::optional<std::vector<std::pair<std::string, torch::Tensor>>> sd,
                 const std::vector<std::string>& preload) {
  if (!exec) {
    exec = first_param_device(*model);
    if (!exec) throw std::invalid_argument("cpu_offload: the model has no parameters (StopIteration)");
  }
  auto& dm = Runtime::current().devices();
  if (!sd) {
    sd.emplace();
    for (auto& [k, t] : state_dict(*model)) sd->emplace_back(k, dm.to(t, DeviceId::cpu()));
  }
  add_hook_to_module(*model, std::make_shared<AlignDevicesHook>(AlignDevicesHookOptions{.io_same_device = true}), true);
  attach_align_device_hook(*model, exec, true, std::make_shared<StateDictMap>(std::move(*sd)), offload_buffers, "", {},
                           preload, nullptr);
}

void disk_offload(const std::shared_ptr<HookableModule>& model, const fs::path& offload_dir,
                  std::optional<DeviceId> exec, bool offload_buffers, const std::vector<std::string>& preload) {
  if (!exec) {
    exec = first_param_device(*model);
    if (!exec) throw std::invalid_argument("disk_offload: the model has no parameters (StopIteration)");
  }
  if (!fs::is_directory(offload_dir) || !fs::exists(offload_dir / "index.json")) {
    auto sd = state_dict(*model);
    for (const auto& [k, t] : sd)
      if (t.is_meta()) throw std::invalid_argument("disk_offload: tensor '" + k + "' is on meta: Cannot copy out of meta tensor");
    offload_state_dict(offload_dir, sd);
  } else {
    auto index = read_offload_index(offload_dir);
    for (const auto& [k, t] : state_dict(*model)) {
      const OffloadIndexEntry* e = index.find(k);
      if (!e)
        throw std::invalid_argument("offload folder " + offload_dir.string() + ": index.json has no entry for '" + k + "'");
      check_entry_matches(k, *e, t, offload_dir);
    }
  }
  auto loader = std::make_shared<OffloadedWeightsLoader>(std::nullopt, offload_dir, std::nullopt, std::nullopt);
  add_hook_to_module(*model, std::make_shared<AlignDevicesHook>(AlignDevicesHookOptions{.io_same_device = true}), true);
  attach_align_device_hook(*model, exec, true, loader, offload_buffers, "", {}, preload, nullptr);
}

std::shared_ptr<UserCpuOffloadHook> cpu_offload_with_hook(const std::shared_ptr<HookableModule>& model,
                                                          std::optional<DeviceId> exec,
                                                          std::shared_ptr<UserCpuOffloadHook> prev) {
  auto hook = std::make_shared<CpuOffload>(exec, std::move(prev));
  add_hook_to_module(*model, hook, true);
  return std::make_shared<UserCpuOffloadHook>(model, hook);
}

}  // namespace hs::hooks
