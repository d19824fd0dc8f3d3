// The `torch` engine: each cell through the real stack — transformers, accelerate and
// torch.compile (Dynamo + Inductor) — in a child process of the project's Python running the
// driver package python/hookscope_torch (docs/torch-engine.md is the contract). One process per
// policy (whole-hook, offload-only, each --accelerate tree), so two hook implementations never
// share a process; cells are sent one at a time, so only one process works at any moment. Each
// run's torch.profiler trace and its share of the TORCH_TRACE compile log are imported into the
// run with the importers `hookscope import` uses.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engines/engine.h"

namespace hs::engines {

class ChildProcess;

struct TorchEngineOptions {
  std::filesystem::path python;             ///< interpreter with torch, transformers, accelerate
  std::filesystem::path package_dir;        ///< the folder holding hookscope_torch/
  std::string model;                        ///< HF folder
  std::string dtype = "f32";                ///< f32 | bf16 | f16
  int devices = 4;                          ///< accelerators to shard over (real ones; none on a CPU machine)
  std::string prompt;
  std::vector<int64_t> prompt_ids;          ///< replaces prompt when not empty
  int64_t max_new_tokens = 64;
  int repeats = 5;
  int warmup = 2;
  std::string cache_implementation = "dynamic";  ///< transformers' cache: dynamic | static
  std::string backend;                      ///< torch.compile backend for the capturing modes ("" = inductor)
  std::map<std::string, std::filesystem::path> accelerate_trees;  ///< --accelerate NAME=PATH
  std::filesystem::path work_dir;           ///< the driver's files (traces, logs, offload folders)
  bool keep_work_dir = false;               ///< work_dir stays after the capture (--keep-driver-files)
  /// Where the drivers' disk-offload folders go (`DIR/torch-POLICY`); empty: `work_dir/POLICY/offload`.
  std::filesystem::path offload_dir;
  bool profile = true;                      ///< record a torch.profiler trace per run
  int threads = 0;                          ///< torch's intra-op threads in the driver (0 = torch's default)
};

class TorchEngine final : public Engine {
 public:
  /// Checks the options (python runs, the package and the model folder exist, each tree holds
  /// accelerate/); throws std::invalid_argument naming the flag otherwise. Starts nothing yet.
  explicit TorchEngine(TorchEngineOptions options);
  ~TorchEngine() override;

  std::string name() const override { return "torch"; }
  std::vector<hooks::AcceleratorInfo> accelerators() const override { return {}; }
  void prepare(Scenario s) override;
  RunSetup setup(const Cell& cell) const override;
  RunResult run(const Cell& cell, RunContext& ctx) override;
  bool runs_accelerate_trees() const override { return true; }

  /// The run result of the driver's reply `reply` (docs/torch-engine.md); the fields only the
  /// torch engine has go to `RunResult::extra`.
  static RunResult result_of(const nlohmann::json& reply);

 private:
  ChildProcess& process_for(const Cell& cell);
  nlohmann::json spec_for(const std::string& policy, const std::optional<std::filesystem::path>& tree) const;
  /// The run's `trace` and its part of the `compile_log` (both checked by the caller to lie in the
  /// driver's out_dir) into the run.
  void import_recordings(const nlohmann::json& reply, const std::optional<std::filesystem::path>& trace,
                         const std::optional<std::filesystem::path>& compile_log, const std::string& cell_id,
                         RunContext& ctx, RunResult& r);

  TorchEngineOptions opt_;
  std::map<std::string, std::unique_ptr<ChildProcess>> processes_;  ///< by policy label
  int next_cell_ = 0;
  nlohmann::json versions_;  ///< from the first reply
};

}  // namespace hs::engines
