// Synthetic captures for tests and benchmarks of the readers and the viewer: runs shaped like a
// decoder dispatched over several devices (per layer: hook spans, compiler-disabled scopes,
// activation transfers at device boundaries, module compute nested layer > attn/mlp, weight
// onload/offload when offloaded, compiled regions and graph breaks, generation steps, memory
// counters), written through the real HostTracer → Store path. The clock is synthetic and
// deterministic: each event kind has a fixed duration, so tests can predict every time.
//
// Test and benchmark support (library hookscope_synthetic), not part of the product.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/store.h"

namespace hs::storage {

struct SyntheticRun {
  std::string scenario = "sharded", policy = "whole-hook", mode = "default";
  bool fullgraph = false;
  int devices = 4;       ///< emulated accelerators "0".."devices-1"
  int layers = 8;        ///< decoder layers, spread evenly over the devices
  bool offload = false;  ///< weights live in cpu (or disk when `disk`) and are onloaded per layer
  bool disk = false;
  /// Where offloads send the weights: "meta" (accelerate drops them), or the offload device of
  /// a diffusers group ("cpu").
  std::string offload_to = "meta";
  int64_t tokens = 4;    ///< generation steps (each a forward over every layer)
  /// When > 0: the step number restarts at 0 every this many steps (several generates).
  int64_t steps_per_generate = 0;
  /// Weight tensors onloaded (and offloaded) per layer when offloaded, one swap each, as
  /// accelerate moves a decoder layer's q/k/v/o, gate/up/down and norm weights one by one
  /// ("mlp.up_proj.weight" alone when 1).
  int tensors_per_layer = 1;
  /// One forward before step 0 that is no generation step, as the LibTorch engine's first
  /// call (capture, checked against the reference) is.
  bool check_forward = false;
  /// When > 0: repeat forwards until at least this many events were recorded (benchmarks).
  int64_t min_events = 0;
  int64_t start_ns = 1'000'000'000;  ///< synthetic clock origin (absolute ns)
};

/// Durations of the synthetic clock (ns).
struct SyntheticClock {
  static constexpr int64_t kHook = 2'000;
  static constexpr int64_t kTransfer = 5'000;
  static constexpr int64_t kOnload = 40'000;
  static constexpr int64_t kOffload = 1'000;
  static constexpr int64_t kSub = 20'000;  ///< self_attn / mlp compute
  static constexpr int64_t kGap = 500;
};

struct SyntheticResult {
  int64_t run_id = 0;
  int64_t events = 0;          ///< records written
  int64_t graph_breaks = 0;
  int64_t transfers = 0, transfer_bytes = 0;
  int64_t onloads = 0, onload_bytes = 0;
  int64_t end_ns = 0;          ///< synthetic time of the last event
};

/// Adds DEVICES rows for `devices` emulated accelerators (256 MiB max_memory each) and the
/// cpu, plus the capture's "emulated" diagnostic. Call once per file.
void add_synthetic_devices(Store& store, int devices);

/// Appends one run to `store` with results JSON like the capture's (decode_ms_per_token,
/// graph_break_count, status, ...). Throws what the Store or HostTracer throw.
SyntheticResult write_synthetic_run(Store& store, const SyntheticRun& spec);

/// A run shaped like an imported torch.profiler trace of a GPU (engine "import"), every row
/// written through the Store as the Kineto importer writes them, on the trace's clock
/// (Unix-epoch ns from `kTraceBase`). Times are ns after kTraceBase:
///   GPU 0 (TARGET_INFO_GPU "NVIDIA H200"), one weight onload to 'cuda:0' [3000, 4000];
///   thread tid 4243 (the tracer's thread 0: a hook span [1000, 9000] and a compiled region
///   '0/1' [50000, 80000]): CPU ops 'hookscope::generate' (user_annotation) [0, 100000] >
///   'aten::linear' [10000, 40000] > 'aten::mm' [15000, 35000], and 'Torch-Compiled Region:
///   0/1' [50000, 80000]; a python_function [5000, 90000]; CUDA runtime cudaLaunchKernel
///   (corr 101) [16000, 18000], cudaMemcpyAsync (102) [20000, 21000], cudaLaunchKernel (105)
///   [54000, 57000] with the driver's cuLaunchKernel (104) [55000, 56000] inside it;
///   thread tid 4300 (only activity): 'aten::add' [20000, 30000], cudaLaunchKernel (103)
///   [22000, 23000];
///   stream 7: memcpy HtoD 1 MiB (102) [25000, 26000], kernel 'gemm' (101) [60000, 70000],
///   kernel 'triton_poi_fused_add_0' (104) [71000, 72000]; a gpu_user_annotation 'my_range'
///   on stream 7 [59000, 75000];
///   stream 13: kernel 'add_kernel' (103) [30000, 31000], memset 4 KiB [40000, 40500], a
///   Stream Wait Event sync on event 9 [45000, 46000], kernel 'late_kernel' without a launch
///   [99000, 100500] (the run's last end).
struct SyntheticTrace {
  static constexpr int64_t kTraceBase = 1'700'000'000'000'000'000;  ///< Unix-epoch ns
  int64_t run_id = 0;
  int64_t rows = 0;  ///< rows written (every kind)
};
SyntheticTrace write_synthetic_trace_run(Store& store, const std::string& label = "gpu-trace.json");

/// Two Dynamo graph-break records in run `run`, as an import of its compile log writes them
/// (GB0098, `AlignDevicesHook.pre_forward`): the first logged kDynamoBreakBefore ns before
/// kTraceBase (while Dynamo compiled, before the trace), the second kDynamoBreakAt ns after it.
inline constexpr int64_t kDynamoBreakBefore = 5'000'000'000, kDynamoBreakAt = 45'000;
void write_dynamo_breaks(Store& store, int64_t run);

/// Makes run `run` a torch engine run (RUNS.engine "torch") whose results hold the times its
/// recording_overhead divides (facts/recording.h), as the torch engine stores them: the profiled
/// generate's wall time (profiled_run.generate_ms) and the measured, unrecorded generates'
/// (generate_ms).
void set_torch_generate_times(Store& store, int64_t run, double profiled_ms, const std::vector<double>& measured_ms);

/// A large imported trace run for LOD tests and benchmarks: `launches` times, every 2 us from
/// kTraceBase, an 'aten::mm' CPU op [0, 1500 ns] on tid 4243 holding a cudaLaunchKernel
/// [100, 600] whose kernel runs on GPU 0, stream 7 [800, 1700] (3 rows per launch).
SyntheticTrace write_large_trace_run(Store& store, int64_t launches);

}  // namespace hs::storage
