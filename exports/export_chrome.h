// `hookscope export --format chrome`: one run of a capture as a Chrome Trace Event Format file
// shaped like the traces torch.profiler (Kineto) writes, for Perfetto's UI, chrome://tracing,
// Holistic Trace Analysis and TraceLens-style tools — and for `hookscope import`, which reads
// it back into a run with the same rows per event kind.
//
// The document: `schemaVersion`, `deviceProperties` (TARGET_INFO_GPU), `distributedInfo`
// ({"rank": R, "world_size": W}), `baseTimeNanoseconds` (the run's earliest event, whole µs),
// a `hookscope` object naming the capture and the run (with its break facts and, for a torch
// engine run, `recording_overhead`: what recording cost this timeline, facts/recording.h; null
// for any other run), then `traceEvents`. Every `ts` / `dur`
// is µs since baseTimeNanoseconds with three decimals (ns precision, written from integers).
//
// Where each kind goes (the hookscope:: range names are the importer's, docs/torch-engine.md):
//   host process (the capture's pid), one thread per recording thread:
//     CPU_OPS                 ph X, their own cat (cpu_op, user_annotation, ...), args as recorded
//     HOOK_EVENTS             ph X user_annotation 'hookscope::pre_forward hook=H module=M' (post_forward,
//                             init_hook, detach_hook)
//     WEIGHT_SWAPS            'hookscope::weight_onload|weight_offload module= tensor= bytes= dtype= source= device='
//     TRANSFERS               'hookscope::send_to_device module= bytes= src= dst= [emulated=1]'
//     DISABLED_SCOPES         'hookscope::disabled_scope function= module= depth='
//     COMPILE_REGIONS         cpu_op 'Torch-Compiled Region: F/C' (imported runs), else user_annotation
//                             'hookscope::region index= backend= op_count='
//     GENERATION_STEPS        'hookscope::step step= token='
//     iterations              ph X user_annotation 'ProfilerStep#N' (torch.profiler's shape, what HTA reads):
//                             one per iteration of facts/iterations.h — a generation step, or a top-level
//                             call of a dispatched model in a profiled program; a run whose CPU_OPS hold
//                             torch.profiler's own ProfilerStep#N keeps those
//     GRAPH_BREAKS            ph i (thread scope), cat cpu_instant_event, 'hookscope::graph_break function=
//                             module=', args {reason, module_stack}
//     CUDA runtime / driver   ph X cuda_runtime / cuda_driver, args {correlation, External id}; an ac2g
//                             flow start (id = correlation) when a GPU record has that correlation
//   one process per logical device (accelerator N: pid N, as Kineto numbers GPUs; cpu, disk, ...:
//   pid 2^30 + k):
//     MODULE_COMPUTE          ph X gpu_user_annotation 'hookscope::module_compute module= device=' (lane "compute")
//     transfers               cat hookscope_transfer: a slice on the source's "transfers out" lane and one on
//                             the destination's "transfers in" lane, joined by an s/f flow (bytes > 0,
//                             src != dst only); the importer skips this category (the rows are TRANSFERS)
//     MEMORY_COUNTERS         ph C 'hookscope::memory device=D', args {bytes}
//     kernels, memcpys,       ph X kernel / gpu_memcpy / gpu_memset / cuda_sync on tid = stream, args as
//     memsets, syncs          Kineto writes them, ac2g flow end (bp e) after each launched record
//   ph M process_name / process_sort_index / thread_name / thread_sort_index for every track.
// A kind that the run's CPU_OPS already carries as ranges (an imported or torch-engine run, whose
// hook events were read from those ranges) is written once, through CPU_OPS. Range values
// never contain spaces: a space in a name is written as '_'; the root module is '<root>'.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "storage/capture_reader.h"

namespace hs::exports {

struct ChromeExportOptions {
  bool gzip = false;   ///< compress the file with zlib (gzip format)
  int rank = 0;        ///< distributedInfo.rank (HTA reads one file per rank)
  int world_size = 1;  ///< distributedInfo.world_size
};

struct ChromeExportSummary {
  int64_t events = 0;                           ///< traceEvents entries written
  std::map<std::string, int64_t> by_category;   ///< ph X / i slices per cat; "(ph C)", "(ph M)", flows per ph
  uint64_t bytes = 0;                           ///< uncompressed JSON bytes
};

/// Writes run `run` of `reader` to `out` (replaced when it exists; written under a temporary
/// name and renamed when complete). Throws std::out_of_range for an unknown run,
/// storage::CaptureError for a read failure, std::runtime_error for a write failure.
ChromeExportSummary export_chrome_trace(const storage::CaptureReader& reader, int64_t run,
                                        const std::filesystem::path& out, const ChromeExportOptions& options = {});

}  // namespace hs::exports
