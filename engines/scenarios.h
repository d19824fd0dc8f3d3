// The four capture scenarios of the compile-mode comparison (issue "main job"):
//   sharded      infer_auto_device_map under a max_memory that forces the weights over every
//                accelerator, then dispatch_model (no offload);
//   cpu-offload  cpu_offload of the whole model onto accelerator 0;
//   disk-offload disk_offload of the whole model (accelerate's folder format) onto accelerator 0;
//   mixed        a device map with accelerator entries, "cpu" entries and "disk" entries.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hooks/big_modeling.h"
#include "hooks/device_map.h"
#include "models/loader.h"

namespace hs::engines {

enum class Scenario { Sharded, CpuOffload, DiskOffload, Mixed };

/// "sharded", "cpu-offload", "disk-offload", "mixed".
std::string scenario_name(Scenario s);
/// Throws std::invalid_argument naming the value and the accepted ones.
Scenario parse_scenario(const std::string& s);

struct ScenarioOptions {
  std::string model;                       ///< folder or offline HF id
  c10::ScalarType dtype = c10::kFloat;
  /// Budgets for infer_auto_device_map (sharded). Default: per accelerator the largest block
  /// plus 1/N of the weights, so every accelerator gets some and none gets all.
  std::optional<hooks::MaxMemory> max_memory;
  /// Where offload folders are written: WORK_DIR/offload-disk and WORK_DIR/offload-mixed, each
  /// removed and written afresh when its scenario is prepared.
  std::filesystem::path work_dir;
};

struct PreparedScenario {
  Scenario scenario;
  models::LoadedModel lm;
  hooks::DeviceMap device_map;                 ///< the map dispatched ("" -> device for offload entry points)
  std::vector<std::string> offloaded_params;   ///< parameters that must be on meta between forwards
  std::vector<std::string> weight_devices;     ///< where the weights live: "0", "1", "cpu", "disk"
};

/// Loads a fresh copy of the model and dispatches it for `s` over the accelerators of the
/// current runtime (hooks/runtime.h; at least 2 are needed for sharded and mixed).
/// Throws std::invalid_argument / std::runtime_error with a message naming the scenario.
PreparedScenario prepare_scenario(Scenario s, const ScenarioOptions& options);

/// True when every parameter in `offloaded_params` is on meta right now.
bool offloaded_params_on_meta(const PreparedScenario& p);

}  // namespace hs::engines
