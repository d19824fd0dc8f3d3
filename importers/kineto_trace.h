// Importing a torch.profiler (Kineto) Chrome trace into a capture run.
//
// The trace is the JSON `torch.profiler.profile.export_chrome_trace` writes (`.json`, or
// `.json.gz`: gzip is detected from the content): `traceEvents` plus `deviceProperties`,
// `distributedInfo`, `baseTimeNanoseconds`. It is streamed (SAX, one event in memory at a
// time, rows written in batches), so a multi-GB trace imports in bounded memory.
//
// What becomes what (docs/torch-engine.md has the hookscope:: range contract):
//   ph X, cat cpu_op / user_annotation / python_function / gpu_user_annotation
//                                  -> CPU_OPS (External id, Sequence number, categoryId, and the args
//                                     JSON without those ids and the file's per-event indexes
//                                     'Ev Idx', 'Python id', 'Python parent id')
//   ph X, name 'hookscope::pre_forward|post_forward|init_hook|detach_hook ...'
//                                  -> also HOOK_EVENTS; weight_onload / weight_offload -> WEIGHT_SWAPS;
//                                     send_to_device -> TRANSFERS; step -> GENERATION_STEPS; and the
//                                     kinds `hookscope export` writes: module_compute (also as a
//                                     gpu_user_annotation on a device lane) -> MODULE_COMPUTE,
//                                     disabled_scope -> DISABLED_SCOPES, region -> COMPILE_REGIONS;
//                                     a hookscope:: cpu_op (torch's _RecordFunctionFast) is filed
//                                     as a user_annotation
//   ph i, name 'hookscope::graph_break ...'  -> GRAPH_BREAKS (args: reason, module_stack)
//   ph C, name 'hookscope::memory device=D'  -> MEMORY_COUNTERS (args: bytes)
//   cat hookscope_transfer         -> skipped: export's per-device copies of TRANSFERS and their flows
//   ph X, name 'Torch-Compiled Region: F/C'
//                                  -> also COMPILE_REGIONS (compileId 'F/C', opCount = cpu_op events
//                                     inside it on its thread, regionIndex = order within the
//                                     outermost compiled region)
//   ph X, cat kernel / gpu_memcpy / gpu_memset / cuda_sync
//                                  -> CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET / _SYNCHRONIZATION
//   ph X, cat cuda_runtime / cuda_driver
//                                  -> CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER, and
//                                     CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION (External id -> correlation)
//   ph s / f, cat ac2g             -> the correlationId of the launch / GPU record they bind to,
//                                     when its args carry none
//   ph i, name '[memory]'          -> MEMORY_COUNTERS ('Total Allocated' bytes; device 'cpu', '0', ...)
//   deviceProperties               -> TARGET_INFO_GPU (Store::add_gpu)
//   ph M (process / thread names)  -> the summary
// Other categories (e.g. 'overhead', 'cuda_event', counters) are counted and reported as a
// diagnostic, never fatal.
//
// Times: the file's µs (relative to `baseTimeNanoseconds`) become integer ns on the trace's
// own clock — baseTimeNanoseconds + ts — converted from the number's decimal text (no double).
// The file's pid / tid are kept: CPU_OPS and CUDA API rows have globalTid = pid * 0x1000000 +
// tid, GPU rows globalPid = pid * 0x1000000 of the traced process, host event rows name the
// tid in THREADS.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "importers/import_error.h"
#include "storage/store.h"

namespace hs::importers {

/// `hookscope export` writes the LibTorch engine's compiled regions of host thread T on a track
/// of their own, tid kRegionTrackBase + T (they cross the thread's hook spans, so they cannot
/// nest on its track); the import files them under thread T again.
inline constexpr int64_t kRegionTrackBase = 0x1000000;

struct KinetoOptions {
  /// Called as the file is read: bytes of the file consumed so far (compressed bytes for a
  /// .gz file) and the file's size. Empty: no progress.
  std::function<void(uint64_t bytes_read, uint64_t total_bytes)> progress;
  /// Rows buffered before they are written (one Store transaction per batch and per kind
  /// group: activity records, host events). Must be > 0.
  size_t batch_rows = 16384;
  /// Added to every time of the trace (baseTimeNanoseconds + ts), ns: puts a trace recorded on
  /// CLOCK_REALTIME (Kineto's clock) on the capture's steady clock. 0 keeps the trace's clock.
  int64_t shift_ns = 0;
  /// A trace file larger than this (bytes on disk) is read on a thread of its own while the
  /// events are parsed and imported (kineto::kPipelineBytes, 4 MiB); full batches of rows are
  /// written to the Store by a thread of their own whatever the size.
  uint64_t pipeline_bytes = uint64_t{4} << 20;
};

/// What one import read and wrote.
struct KinetoSummary {
  int64_t events = 0;                              ///< traceEvents entries read
  std::map<std::string, int64_t> events_by_category;  ///< per `cat`; events without one as "(ph M)", ...
  std::map<std::string, int64_t> rows_by_table;    ///< rows written per table ("CPU_OPS", "HOOK_EVENTS", ...)
  std::map<std::string, int64_t> unknown_categories;  ///< events not imported, per `cat` ("(ph B)" without one)
  std::vector<std::string> diagnostics;            ///< warnings for the caller to store as DIAGNOSTICS rows
  std::optional<int64_t> first_ns, last_ns;        ///< earliest start / latest end of the imported rows, ns
  int64_t base_time_ns = 0;                        ///< baseTimeNanoseconds (0 when absent)
  std::vector<int64_t> pids;                       ///< the traced processes (host events' pids), sorted
  std::vector<storage::GpuInfo> gpus;              ///< deviceProperties, as written to TARGET_INFO_GPU
  int64_t gpu_count = 0;                           ///< deviceProperties entries, else GPU ids seen in GPU rows
  std::map<int64_t, std::string> process_names;    ///< pid -> 'process_name' metadata
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  ///< (pid, tid) -> 'thread_name'
  nlohmann::json distributed_info;                 ///< `distributedInfo` (null when absent)
  /// The "hookscope" object `hookscope export` writes (capture, run, engine, scenario, policy,
  /// mode, fullgraph, model, label, status); null when absent or not an object.
  nlohmann::json hookscope_run;
};

/// Imports `trace` into run `run_id` of `store`. The caller has begun the run
/// (Store::add_run) and ends it (Store::end_run): on an exception the rows already written
/// stay, and the caller should end the run `failed` (or leave it `incomplete`).
/// Throws ImportError naming the file and the byte offset (in the decompressed JSON text) for:
/// a file that cannot be read, a truncated or non-JSON file, a top level without
/// `traceEvents`, an event without `ph`, a timed event without `ts`, a complete ('X') event
/// without `dur` or with a negative one, an imported event whose pid / tid is not an integer,
/// and a hookscope:: range that breaks the contract (missing key, bad number).
/// Store errors (storage::CaptureError, std::invalid_argument for an unknown run) propagate.
KinetoSummary import_kineto_trace(const std::filesystem::path& trace, storage::Store& store, int64_t run_id,
                                  const KinetoOptions& opts = {});

}  // namespace hs::importers
