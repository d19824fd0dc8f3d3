// A run's iterations: what a torch.profiler user calls its steps (`ProfilerStep#N`, one per
// `prof.step()`), defined once for every kind of run. The Chrome export writes one
// `ProfilerStep#N` range per iteration (so Holistic Trace Analysis finds its iterations), and
// the report times a profiled program's iterations; both read them from here.
//
// In order of precedence:
//   1. the run's own `ProfilerStep#N` ranges (CPU_OPS: a trace recorded with
//      `torch.profiler.profile(schedule=...)` and `prof.step()`, or a run exported and imported
//      back): kept as they are, with their N;
//   2. its generation steps (GENERATION_STEPS: the LibTorch engine, the torch engine's
//      `hookscope::step` ranges): one iteration per step (each forward of every generate,
//      prefill included), on the step's thread;
//   3. otherwise (a program run by `hookscope profile`, an imported trace with hook ranges):
//      one iteration per top-level call of a model accelerate dispatched. On each host thread,
//      a range not nested in another (a `Torch-Compiled Region`, a `record_function` of the
//      program's) that holds hook work (`hookscope::` ranges) is one call; where the hooks run
//      at the top level themselves (an uncompiled model), a call spans from the root module's
//      `pre_forward` to its `post_forward`. Python stack frames (`python_function`) and GPU
//      annotations are not ranges of a thread here.
// N counts from 0 in time order, as torch.profiler numbers the steps it records from its start.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::facts {

enum class IterationSource { None, ProfilerStep, GenerationStep, ModelCall };

/// "ProfilerStep#N", "generation step", "model call", "none".
std::string_view iteration_source_name(IterationSource s);

struct Iteration {
  int64_t number = 0;  ///< N of ProfilerStep#N
  int64_t start_ns = 0, end_ns = 0;
  /// Where it is: a generation step's recording thread (GENERATION_STEPS.threadId, `pid` -1),
  /// else the process and Linux tid of the CPU ops it was found among.
  int64_t pid = -1, tid = 0;
};

struct Iterations {
  IterationSource source = IterationSource::None;
  std::vector<Iteration> steps;  ///< in time order
};

/// The iterations of a run from its rows: `cpu_op_pids` is the process of each CPU op, index for
/// index (CaptureReader::activity_pids(run, "CPU_OPS")).
Iterations iterations(const std::vector<storage::SharedCpuOpRow>& cpu_ops, const std::vector<int64_t>& cpu_op_pids,
                      const std::vector<storage::SharedGenerationStepRow>& generation_steps);

/// The same, read from the capture. Throws storage::CaptureError when it cannot be read.
Iterations iterations(const storage::CaptureReader& reader, int64_t run);

/// A run's iteration figures as the report writes them (facts/catalogue.h "iterations",
/// "iteration_ms"): {"source": iteration_source_name, "count", "ms": a measurement::Spread of
/// the durations in ms, or null without iterations}.
nlohmann::json iteration_figures(const Iterations& it);

}  // namespace hs::facts
