// The `libtorch` engine: hookscope's own port of accelerate's hooks on LibTorch, with
// emulated accelerators and the emulated compiler of compile/ (regions cut at compiler-disabled
// scopes). Every hook call, weight swap, transfer, region and graph break is recorded with the
// module that caused it.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "engines/engine.h"
#include "hooks/device_map.h"
#include "hooks/runtime.h"

namespace hs::engines {

struct LibTorchEngineOptions {
  std::string model;                        ///< HF folder or offline model id
  c10::ScalarType dtype = c10::kFloat;
  int accelerators = 4;                     ///< logical accelerators (real GPUs first, the rest emulated)
  std::optional<hooks::MaxMemory> max_memory;  ///< budgets for the sharded map (accelerators also get them as total memory)
  std::string prompt;                       ///< encoded with the checkpoint's tokenizer.json unless prompt_ids is set
  std::vector<int64_t> prompt_ids;
  int64_t max_new_tokens = 64;              ///< tokens per greedy decode (>= 1)
  int repeats = 5;                          ///< measured decodes per run (>= 1)
  int warmup = 2;                           ///< unmeasured decodes first (>= 0)
  std::filesystem::path offload_dir;        ///< where disk-offload folders go (one per scenario)
  hooks::LogFn log;                         ///< accelerate's messages (null: stderr)
  /// Called before every decode step of a measured or warm-up generate: the cell, whether the
  /// generate is the interleaved eager baseline, the repeat (warm-ups first) and the step
  /// (0 = prefill). A seam for tests that slow a cell to check what the report concludes.
  std::function<void(const Cell&, bool eager_baseline, int repeat, int64_t step)> on_step;
};

class LibTorchEngine final : public Engine {
 public:
  /// Builds its runtime (the logical devices, installed on the calling thread), loads the checkpoint once undispatched on the CPU and
  /// computes the reference prefill logits. Throws std::invalid_argument for a prompt that
  /// encodes to nothing or token ids outside the vocabulary (naming --prompt / --prompt-ids),
  /// and the loaders' errors (naming the file).
  explicit LibTorchEngine(LibTorchEngineOptions options);
  ~LibTorchEngine() override;

  std::string name() const override { return "libtorch"; }
  std::vector<hooks::AcceleratorInfo> accelerators() const override;
  void prepare(Scenario s) override;
  RunSetup setup(const Cell& cell) const override;
  RunResult run(const Cell& cell, RunContext& ctx) override;
  /// The runtime every run dispatches through (a test subscribes to what it publishes).
  hooks::Runtime& runtime() { return *runtime_; }


 private:
  void measure(const Cell& cell, RunResult& r, tracer::HostTracer& tracer, const CellProgressFn& progress);
  /// One forward of the decode: the logits for the ids given, against the engine's KV cache.
  using StepFn = std::function<torch::Tensor(const torch::Tensor&)>;
  struct Timed {
    double prefill_ms = 0;
    std::optional<double> decode_ms_per_token;  ///< (end of the last step − end of the prefill) / (steps − 1)
    int64_t tokens = 0;
  };
  /// One greedy decode of max_new_tokens through `step` on a fresh cache; with `tracer`, each
  /// step (prefill = 0) is recorded as a generation step and samples the memory ledger.
  Timed generate(const StepFn& step, tracer::HostTracer* tracer);
  /// Warm-ups then measured repeats of `compiled`; a compiled cell interleaves an eager decode of
  /// the same dispatched model (not recorded) before each of its own.
  /// `progress` (may be empty) is told the generate and step before each decode step.
  void decode_latency(const Cell& cell, const StepFn& compiled, const StepFn& eager, RunResult& r,
                      tracer::HostTracer& tracer, const CellProgressFn& progress);

  LibTorchEngineOptions opt_;
  // The engine's runtime (devices, ledger, sink, compile policy), installed on the thread that
  // constructs the engine for its lifetime: run the engine on that thread.
  std::unique_ptr<hooks::Runtime> runtime_;
  std::unique_ptr<hooks::RuntimeScope> installed_;
  torch::Tensor ids_;                     ///< [1, prompt length] int64
  torch::Tensor ref_logits_;              ///< [vocab] float32: the reference's last-position logits
  int64_t ref_argmax_ = -1;
  nlohmann::json model_json_;
  std::optional<PreparedScenario> prep_;
  c10::intrusive_ptr<models::KVCache> cache_;
};

}  // namespace hs::engines
