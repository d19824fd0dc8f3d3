// Engines: what runs one cell of the comparison matrix.
//
// `hookscope capture` walks scenario × policy × mode (× fullgraph) for one model
// (engines/capture_runner.h). For each cell an Engine runs the model — dispatched for the
// scenario, under the policy, captured in the mode — records its events through the tracer and
// returns a RunResult; the runner stores the result with the run. `libtorch` (engines/libtorch_engine.h)
// is hookscope's own port of the hooks on LibTorch; a second engine (the real torch.compile in a
// child Python process) implements the same interface.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engines/scenarios.h"
#include "compile/compile.h"
#include "measurement/spread.h"
#include "hooks/device.h"
#include "hooks/compiler_disable.h"
#include "models/numerics.h"
#include "storage/store.h"
#include "tracer/cupti_tracer.h"
#include "tracer/host_tracer.h"

namespace hs::engines {

/// One cell of the matrix. `fullgraph` is only set for capturing modes (not eager).
struct Cell {
  Scenario scenario = Scenario::Sharded;
  hooks::CompilePolicy policy = hooks::CompilePolicy::WholeHook;
  compile::Mode mode = compile::Mode::Eager;
  bool fullgraph = false;
  /// The name of an accelerate source tree (`--accelerate NAME=PATH`, torch engine only) whose
  /// hooks the cell runs as they are; "" = `policy` over the installed accelerate.
  std::string accelerate_tree;
};

/// The policy as runs name it: "whole-hook", "offload-only", or the accelerate tree's name.
std::string policy_label(const Cell& c);
/// "sharded whole-hook default fullgraph".
std::string cell_label(const Cell& c);

/// A graph break as the results list it: Dynamo's reason text, the disabled function, the module.
struct BreakReason {
  std::string reason, function, module;
};

/// What one run produced. Every field an engine could not establish stays empty (null in JSON).
struct RunResult {
  enum class Outcome {
    Ok,           ///< the run completed
    Unsupported,  ///< fullgraph capture raised at a graph break: a result, not a failure
    Failed,       ///< anything else went wrong: `error` says what
  };
  Outcome outcome = Outcome::Ok;
  std::string error;                            ///< Unsupported / Failed: the message
  /// Dynamo's counts, as `torch._dynamo.explain` reports them: only an engine that runs Dynamo
  /// (the torch engine) fills them.
  std::optional<int64_t> graph_count, graph_break_count;
  /// The LibTorch engine's own measures of one compiled forward: captured regions that ran an
  /// op, and compiler-disabled scopes entered inside a region. Not Dynamo's counts (Dynamo
  /// skips frames with a break in a loop and stops at recompile_limit), hence their own names.
  std::optional<int64_t> captured_regions, disabled_scope_entries;
  /// Dynamo's recompiles over the compiled run (the torch engine); the LibTorch engine's
  /// emulated compiler counts its own as `guard_recompiles` (cache entries added after a guard
  /// failed), never under Dynamo's name.
  std::optional<int64_t> recompiles, guard_recompiles;
  std::vector<BreakReason> break_reasons;       ///< of the prefill (Unsupported: where it stopped)
  std::vector<std::string> diagnostics;         ///< the engine's notes on the capture (backend fallbacks, ...)
  std::vector<std::string> weight_devices;      ///< where the weights live: "0", "cpu", "disk"
  std::optional<bool> argmax_match;             ///< prefill argmax = the single-device reference's
  std::optional<models::LogitsDiff> logits;     ///< prefill logits vs the reference (offloaded scenarios)
  std::optional<bool> params_on_meta_after;     ///< offloaded parameters back on meta after a forward
  /// The measured generates (warm-ups excluded), one entry per repeat: prefill ms and decode
  /// ms/token (measurement/spread.h). Empty when the run measured nothing.
  measurement::LatencySamples latency;
  /// A compiled run's eager generates of the same dispatched model, interleaved with its own
  /// (eager, compiled, eager, compiled, ...): the baseline drift cannot favour. Empty otherwise.
  measurement::LatencySamples eager_latency;
  int64_t warmup = 0, repeats = 0;              ///< generates run before measuring, and measured
  int64_t new_tokens = 0;                       ///< tokens per measured decode
  /// The weights' dtype the run ran in, as the engine found it on the loaded model (not as
  /// requested): "f32", "bf16", "f16" (models::dtype_short_name's spelling, also `model.dtype`).
  /// Empty when unknown (null in JSON).
  std::string dtype;
  std::map<std::string, int64_t> peak_memory_bytes;  ///< per logical device (hooks/memory.h)
  nlohmann::json model;                         ///< {"id", "path", "dtype", "params", "bytes", "architecture"}
  /// Fields only one engine has (the torch engine: Dynamo's break reasons with gb codes,
  /// frames skipped, prefill and per-token latency, ...): merged into to_json's document last.
  nlohmann::json extra = nlohmann::json::object();

  /// The run result document stored with the run (RUNS.results) and read by `report`: the
  /// cell, then every field above under its report.json name (`logits_identical`,
  /// `logits_max_abs_diff`, `logits_max_ulp`, ...); latency as spreads (measurement::Spread:
  /// median, min, max, q1, q3, iqr, mad, n) `prefill_ms`, `decode_ms_per_token`,
  /// `tokens_per_s`, their `eager_*` twins and `speedup_vs_eager` (per-pair eager/compiled
  /// decode ratios) for interleaved runs, the raw values under `samples`, `warmup`, `repeats`.
  nlohmann::json to_json(const Cell& cell) const;
  /// One line for the progress output: "ok, 3 breaks, 120 ms", "fullgraph raises at F", "error: …".
  std::string summary() const;
};

/// Describes a run before it starts (written to RUNS when it begins).
struct RunSetup {
  std::string model;            ///< as the user named it (folder or model id); RUNS keeps a folder absolute
  nlohmann::json device_map;    ///< the map dispatched, accelerate's form
  nlohmann::json versions;      ///< {"hookscope": ..., "torch": ...}
};

/// Where a running cell is, for the capture's live progress line (engines/capture_runner.cpp).
struct CellProgress {
  std::string phase;  ///< which generate of the cell: "first generate", "warm-up 1/2", "measured 3/5 compiled"
  int64_t step = 0;   ///< the decode step about to run (0 = the prefill)
  int64_t steps = 0;  ///< decode steps per generate (max_new_tokens)
  std::string note;   ///< when set, a line to print as it is (the engine's own news) instead of a tick
};
using CellProgressFn = std::function<void(const CellProgress&)>;

/// Where a run records: the tracer (its run is active) and the capture file itself, for
/// engines that import what another process recorded; `progress` (may be empty) takes the
/// engine's ticks (cheap: called before decode steps, it only redraws a terminal line now and then).
struct RunContext {
  tracer::HostTracer& tracer;
  storage::Store& store;
  int64_t run_id = 0;
  CellProgressFn progress;
  /// The run's CUPTI tracer while it traces a GPU (the engine pushes its external
  /// correlation ids there: engines/cupti_correlation.h), else nullptr.
  tracer::CuptiTracer* cupti = nullptr;
};

class Engine {
 public:
  virtual ~Engine() = default;
  /// "libtorch", "torch".
  virtual std::string name() const = 0;
  /// The logical accelerators runs use (real or emulated), in index order.
  virtual std::vector<hooks::AcceleratorInfo> accelerators() const = 0;
  /// Gets `s` ready (load, dispatch, offload folders); called once per scenario before its
  /// cells, in matrix order — the first one before the capture file is opened, so settings that
  /// do not fit the model fail without touching an existing file. Throws with a message that
  /// names the scenario.
  virtual void prepare(Scenario s) = 0;
  /// What RUNS records for a cell of the prepared scenario.
  virtual RunSetup setup(const Cell& cell) const = 0;
  /// Runs one cell of the prepared scenario, recording its events into the context's tracer
  /// (whose run is active; the engine installs it as its sink for the run) or, for an engine
  /// that imports another process's recording, into the store under `ctx.run_id`.
  /// Never throws for a failure of the run itself: that is a RunResult with outcome Failed.
  virtual RunResult run(const Cell& cell, RunContext& ctx) = 0;
  /// Whether the engine can run `--accelerate` source trees (cells with `accelerate_tree`).
  virtual bool runs_accelerate_trees() const { return false; }
};

}  // namespace hs::engines
