#include "engines/scenarios.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "hooks/runtime.h"

namespace hs::engines {

namespace fs = std::filesystem;
using hooks::DeviceId;

std::string scenario_name(Scenario s) {
  switch (s) {
    case Scenario::Sharded: return "sharded";
    case Scenario::CpuOffload: return "cpu-offload";
    case Scenario::DiskOffload: return "disk-offload";
    case Scenario::Mixed: return "mixed";
  }
  return "?";
}

Scenario parse_scenario(const std::string& s) {
  if (s == "sharded") return Scenario::Sharded;
  if (s == "cpu-offload") return Scenario::CpuOffload;
  if (s == "disk-offload") return Scenario::DiskOffload;
  if (s == "mixed") return Scenario::Mixed;
  throw std::invalid_argument("unknown scenario '" + s + "' (expected sharded, cpu-offload, disk-offload or mixed)");
}

namespace {

hooks::MaxMemory default_max_memory(const models::CausalLM& model, int n) {
  auto sizes = hooks::compute_module_sizes(model);
  const int64_t total = sizes[""];
  const int64_t largest = std::max({sizes["model.layers.0"], sizes["model.embed_tokens"], sizes["lm_head"]});
  hooks::MaxMemory mm;
  for (int i = 0; i < n; ++i) mm.emplace_back(DeviceId::accelerator(i), largest + total / n);
  mm.emplace_back(DeviceId::cpu(), total * 4);
  return mm;
}

std::vector<std::string> params_under(const models::CausalLM& model, const hooks::DeviceMap& map,
                                      const std::function<bool(const DeviceId&)>& pred) {
  std::vector<std::string> out;
  for (const auto& [n, t] : models::named_parameters(model, true, false))
    for (const auto& [mod, dev] : map)
      if (pred(dev) && (mod.empty() || n == mod || n.rfind(mod + ".", 0) == 0)) {
        out.push_back(n);
        break;
      }
  return out;
}

torch::Tensor param(const std::shared_ptr<models::CausalLM>& m, const std::string& name) {
  auto dot = name.rfind('.');
  return models::get_submodule(m, name.substr(0, dot))->get_tensor(name.substr(dot + 1));
}

// The offload folder of a scenario (disk, mixed): WORK_DIR/offload-WHAT, emptied and written
// afresh each time the scenario is prepared.
fs::path offload_folder(const ScenarioOptions& o, const std::string& what) {
  return o.work_dir / ("offload-" + what);
}

}  // namespace

PreparedScenario prepare_scenario(Scenario s, const ScenarioOptions& o) {
  const int n = hooks::Runtime::current().devices().num_accelerators();
  if (n < 1) throw std::invalid_argument("scenario " + scenario_name(s) + " needs at least one accelerator (--devices)");
  if ((s == Scenario::Sharded || s == Scenario::Mixed) && n < 2)
    throw std::invalid_argument("scenario " + scenario_name(s) + " needs at least 2 accelerators (--devices 2 or more)");
  models::LoadOptions lo;
  lo.dtype = o.dtype;
  PreparedScenario p{s, models::load_model(o.model, lo), {}, {}, {}};
  auto& model = p.lm.model;
  const DeviceId main = DeviceId::accelerator(0);
  switch (s) {
    case Scenario::Sharded: {
      hooks::InferAutoDeviceMapOptions io;
      io.max_memory = o.max_memory ? *o.max_memory : default_max_memory(*model, n);
      io.no_split_module_classes = model->no_split_modules();
      io.dtype = o.dtype;
      p.device_map = hooks::infer_auto_device_map(*model, io);
      for (const auto& [mod, dev] : p.device_map)
        if (dev.is_cpu() || dev.is_disk())
          throw std::invalid_argument("sharded: --max-memory leaves module '" + mod + "' on " + dev.str() +
                                      "; give the accelerators enough memory for the whole model");
      hooks::dispatch_model(model, p.device_map);
      break;
    }
    case Scenario::CpuOffload:
      p.device_map = {{"", DeviceId::cpu()}};
      hooks::cpu_offload(model, main);
      break;
    case Scenario::DiskOffload: {
      p.device_map = {{"", DeviceId::disk()}};
      fs::path dir = offload_folder(o, "disk");
      fs::remove_all(dir);
      hooks::disk_offload(model, dir, main);
      break;
    }
    case Scenario::Mixed: {
      const int64_t L = p.lm.config.num_hidden_layers;
      p.device_map = {{"model.embed_tokens", main}, {"model.rotary_emb", main}};
      // First half of the layers over the accelerators, then a quarter on the cpu, the rest on disk.
      const int64_t acc_end = std::max<int64_t>(1, L / 2), cpu_end = std::max<int64_t>(acc_end + 1, (3 * L) / 4);
      for (int64_t i = 0; i < L; ++i) {
        DeviceId d = i < acc_end ? DeviceId::accelerator(static_cast<int>((i * n) / acc_end)) : i < cpu_end ? DeviceId::cpu()
                                                                                                     : DeviceId::disk();
        p.device_map.emplace_back("model.layers." + std::to_string(i), d);
      }
      p.device_map.emplace_back("model.norm", DeviceId::accelerator(n - 1));
      p.device_map.emplace_back("lm_head", DeviceId::accelerator(n - 1));
      hooks::DispatchOptions dopt;
      dopt.offload_dir = offload_folder(o, "mixed");
      fs::remove_all(*dopt.offload_dir);
      hooks::dispatch_model(model, p.device_map, dopt);
      break;
    }
  }
  if (s == Scenario::CpuOffload || s == Scenario::DiskOffload) {
    for (const auto& [name, t] : models::named_parameters(*model, true, false)) p.offloaded_params.push_back(name);
  } else {
    p.offloaded_params = params_under(*model, p.device_map, [](const DeviceId& d) { return d.is_cpu() || d.is_disk(); });
  }
  std::set<std::string> devs;
  for (const auto& [mod, dev] : p.device_map) devs.insert(dev.str());
  p.weight_devices.assign(devs.begin(), devs.end());
  return p;
}

bool offloaded_params_on_meta(const PreparedScenario& p) {
  for (const auto& name : p.offloaded_params)
    if (!param(p.lm.model, name).is_meta()) return false;
  return true;
}

}  // namespace hs::engines
