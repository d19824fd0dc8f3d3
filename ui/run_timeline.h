// One run of a capture laid out for the timeline, the way trace viewers (Perfetto, Nsight
// Systems) show tracks of slices, instants, counters and flows: a lane group per device — real
// or emulated — with module compute, incoming and outgoing activation transfers, weight
// onloads/offloads, weight residency per module, a memory counter and, on a GPU, its
// annotations and one lane per CUDA stream (kernels, memcpys, memsets); one host group per
// thread with the model's forward, hook spans, compiler-disabled scopes, compiled regions,
// graph breaks, generation steps, CPU ops, the Python stack and CUDA API calls; and the flows:
// transfers between device groups, launches from a CUDA API call to its GPU record.
//
// Built from a storage::CaptureReader (never from the model). Slice times are ns relative to
// `origin_ns` (the run's earliest event); the source rows keep the absolute times the capture
// stored (host steady clock for the LibTorch engine, the trace's own clock — Unix-epoch ns —
// for an imported trace). No window or ImGui here: unit-tested headless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/capture_reader.h"
#include "ui/time_axis.h"

namespace hs::ui {

/// Which row vector of RunTimeline a track's `Slice::row` indexes.
enum class Source : uint8_t {
  Compute, Transfer, WeightSwap, Residency, Hook, Disabled, Region, Step, Break,
  CpuOp,    ///< cpu_ops (torch.profiler's cpu_op, user_annotation, python_function, gpu_user_annotation)
  Kernel,   ///< kernels
  Memcpy,   ///< memcpys
  Memset,   ///< memsets
  Sync,     ///< syncs (CUDA synchronization: stream / event / context waits)
  Runtime,  ///< runtime_calls (CUDA runtime API)
  Driver,   ///< driver_calls (CUDA driver API)
  DynamoBreak,  ///< dynamo_graph_breaks: Dynamo's graph-break records of the run's compile log
  Phase,      ///< phases: parts of the run that are not a generation step (before step 0)
  SwapGroup,  ///< swap_groups: a generation step's weight swaps on one device, as one block
};

/// Colour/legend classes of slices.
enum Category : uint8_t {
  kCompute,
  kHtoD,
  kDtoH,
  kDtoD,
  kPtoP,
  kOtherCopy,
  kOnload,
  kOffload,
  kPreForward,
  kPostForward,
  kOtherHook,
  kDisabled,
  kRegion,
  kStep,
  kResidentOnDevice,  ///< weights materialised on the device
  kHomeCpu,           ///< module on meta, weights held in CPU memory (weights_map)
  kHomeDisk,          ///< module on meta, weights in the offload folder
  kBreak,
  kCpuOp,            ///< torch.profiler 'cpu_op' (ATen ops, Torch-Compiled Region)
  kUserAnnotation,   ///< 'user_annotation' (record_function ranges)
  kPythonFunction,   ///< 'python_function' (with_stack)
  kGpuAnnotation,    ///< 'gpu_user_annotation': a record_function range's span on a GPU stream
  kKernel,
  kMemset,
  kCudaRuntime,      ///< a CUDA runtime API call
  kCudaDriver,       ///< a CUDA driver API call
  kPhase,            ///< a part of the run outside the generation steps (before step 0)
  kSwapGroup,        ///< a step's weight onloads/offloads on one device, aggregated
  kSync,             ///< a CUDA synchronization on a stream (cudaStreamWaitEvent, ...)
  kCategoryCount
};
const char* category_name(uint8_t c);

/// What a track shows. A device group's tracks come in this order: compute, transfers in,
/// transfers out, weight onload/offload (only when the device onloads or offloads), memory
/// (only when something was ever resident), GPU annotations (only when any), then one lane per
/// CUDA stream by stream id; its residency lanes are kept apart (LaneGroup::residency_summary
/// and LaneGroup::residency). A host group's: model forward (only on the thread that ran the
/// root module), hooks, compiler-disabled, compiled regions, graph breaks, Dynamo graph breaks
/// (only when any), generation steps, then CPU ops, Python stack and CUDA API (each only when any).
///
/// Empty lanes: in a run the LibTorch engine recorded (RunRecord::engine "libtorch", or "" in
/// an older file) the compute and transfer lanes of a device, and the hooks, compiler-disabled,
/// regions, graph-breaks and steps lanes of a thread with hookscope events, are kept even when
/// empty (an empty graph-breaks lane says there were none). A run from a trace ("torch",
/// "import") shows only the lanes its rows fill: its Dynamo graph breaks are where Dynamo logged
/// them (most while compiling, before the profiled generate), so an empty lane would say
/// something false. A thread with only CPU ops or CUDA API
/// calls has only those lanes.
enum class Lane : uint8_t {
  // device groups
  Compute,           ///< module compute, nested by module (layer > self_attn / mlp)
  TransfersIn,       ///< activation transfers arriving on the device (flows end here)
  TransfersOut,      ///< activation transfers leaving it (flows start here)
  WeightSwaps,       ///< weight onloads ("<- cpu", "<- disk") and offloads ("-> meta")
  Memory,            ///< counter: bytes resident on the device
  ResidencySummary,  ///< the union of every module's on-device intervals, in one lane
  Residency,         ///< one module's weights: on the device, or on meta with the weights at home
  // host groups
  ModelForward,      ///< the root module's forward: spans every device's work
  Hooks,             ///< pre_forward / post_forward spans
  CompilerDisabled,  ///< torch.compiler.disable scopes
  Regions,           ///< compiled regions
  GraphBreaks,       ///< instants where one region ends and the next begins
  DynamoBreaks,      ///< Dynamo's graph-break records (a compile log's), when Dynamo logged each
  Steps,             ///< generation steps
  CpuOps,            ///< torch.profiler's cpu_op and user_annotation slices, nested by time
  PythonStack,       ///< python_function slices (torch.profiler with_stack), nested by time
  CudaApi,           ///< CUDA runtime and driver API calls (launch flows start here)
  // device groups of GPUs
  GpuAnnotations,    ///< gpu_user_annotation slices of every stream of the GPU, nested by time
  Stream,            ///< one CUDA stream: kernels, memcpys (by copy kind), memsets (flows end here)
};
/// The lane's title: "compute", "transfers in", ...; a Residency lane is titled by its module
/// and a Stream lane as "stream N" instead (Track::name).
const char* lane_name(Lane lane);
/// Which row vector of RunTimeline the lane's slices index (Memory: none, it has no slices).
/// Two lanes mix sources, told apart by the slice's category (slice_source): a Stream lane
/// (Kernel; memcpys and memsets) and the CUDA API lane (Runtime; driver calls).
Source lane_source(Lane lane);

struct Track {
  std::string name;
  Lane lane = Lane::Compute;
  Source source = Source::Compute;                 ///< lane_source(lane)
  std::vector<std::vector<Slice>> levels;          ///< see build_levels
  std::vector<Slice> instants;                     ///< graph breaks: start == end, sorted
  std::vector<std::pair<int64_t, int64_t>> counter;  ///< (relative ns, bytes), sorted; memory
  int64_t counter_max = 0;
  int64_t stream = -1;                             ///< Stream lanes: the CUDA stream id
  /// Weight-swap lanes: the same swaps as one slice per generation step (and per stretch
  /// between steps), Source::SwapGroup rows; the view draws these instead of `levels` when
  /// the swaps themselves would merge into "zoom in" blocks. Sorted, non-overlapping.
  std::vector<Slice> aggregate;
  size_t slice_count() const;
};
/// The source row vector slice `s` of track `t` indexes: lane_source(t.lane), except in the
/// lanes that mix kinds (a stream's memcpys and memsets, the CUDA API lane's driver calls).
Source slice_source(const Track& t, const Slice& s);

struct LaneGroup {
  std::string device;  ///< "0", "1", "cpu", "disk" — or "host" for a thread group. A trace's
                       ///< "cuda:N" is shown as accelerator "N" (one group per GPU).
  std::string title;   ///< e.g. "accelerator 1 (emulated, CPU memory)"
  bool emulated = false;
  bool host = false;   ///< a recording thread rather than a device
  uint32_t thread = 0; ///< host groups: the tracer's thread index (threads with only CPU ops /
                       ///< CUDA API calls have none: THREADS never named them)
  std::optional<int64_t> os_tid;  ///< host groups: the OS thread id, when known
  std::vector<Track> tracks;     ///< in the order Lane lists them
  std::vector<Track> residency;  ///< one lane per module whose weights live on / visit this device
  /// The union of `residency`'s on-device intervals in one lane (shown while the per-module
  /// lanes are collapsed); labelled with the module when one, else "N modules".
  Track residency_summary;
};

/// An arrow between two slices: an activation transfer from the source group's "transfers
/// out" lane to the destination's "transfers in" (`src` and `dst` both Source::Transfer, the
/// same row), or a launch from a CUDA API call (Runtime / Driver) on a host thread's CUDA API
/// lane to the kernel, memcpy or memset with its correlationId on a GPU's stream lane.
struct Flow {
  int64_t start_ns = 0, end_ns = 0;  ///< relative: the source slice's start, the destination's start
  uint32_t src_group = 0, dst_group = 0;
  uint32_t row = 0;      ///< the destination's row (for transfers: into RunTimeline::transfers)
  uint32_t src_row = 0;  ///< the source's row
  Source dst = Source::Transfer, src = Source::Transfer;
  uint16_t src_track = 0, dst_track = 0;  ///< indexes into the groups' `tracks`
  uint16_t src_level = 0, dst_level = 0;  ///< the nesting level of either slice in its track
  bool launch() const { return src != Source::Transfer; }
};

/// Where a module's weights live: `device` while materialised, `home` otherwise.
struct ResidencyUnit {
  std::string module;
  std::string device;  ///< execution device ("0", ...)
  std::string home;    ///< "cpu" / "disk" for offloaded modules, else == device
  int64_t bytes = 0;   ///< bytes materialised per onload (0 when unknown)
};

/// A part of a run that is no generation step, on the steps lane: what the run recorded
/// before generation step 0 began (for a LibTorch run, the first call of the compiled
/// forward — Dynamo-style capture of its regions in a compiled mode — checked against the
/// reference; model load, dispatch and the reference forward happen before recording starts).
struct RunPhase {
  int64_t start_ns = 0, end_ns = 0;  ///< relative
  std::string name;                  ///< its label, e.g. "before step 0: first compiled call, ..."
  std::string what;                  ///< the longer explanation (tooltip, details)
  int64_t events = 0;                ///< events of the run inside it
};

/// A generation step's weight swaps on one device (or those between two steps), as one block.
struct SwapGroup {
  std::string device;
  int64_t start_ns = 0, end_ns = 0;  ///< relative: first swap's start, last swap's end
  int64_t step = -1;                 ///< index into RunTimeline::generation_steps; −1 when between steps
  int64_t onloads = 0, offloads = 0, onload_bytes = 0;
  int64_t modules = 0;               ///< distinct modules swapped
  uint32_t first_swap = 0, last_swap = 0;  ///< rows into RunTimeline::weight_swaps
};

/// A run as the viewer draws it. Its rows are the run's (storage::SharedRunRows, absolute times),
/// indexed by Slice::row through the track's Source, with two exceptions: `dynamo_graph_breaks`
/// keeps the records that have a time (DynamoGraphBreakRow::time_ns), in log order: instants on
/// the thread that ran the generation steps (Dynamo compiles on the thread that calls the
/// model), most of them in the first generate, before the trace; `memory_counters` is empty
/// (the counters become memory lanes).
struct RunTimeline : storage::SharedRunRows {
  int64_t origin_ns = 0;    ///< absolute host-clock ns of relative time 0
  int64_t duration_ns = 0;  ///< relative end of the last event
  std::vector<std::string> strings;
  std::vector<LaneGroup> groups;  ///< devices (accelerators by index, then cpu, disk), then host threads
  std::vector<Flow> flows;        ///< sorted by start
  /// A preview drawn while the run loads (ui/timeline_loader.h): only some kinds are read yet;
  /// `pending` names the others that have rows (the reader's names: "hook_events", ...), whose
  /// lanes and rows are still empty. False, and `pending` empty, for a whole run.
  bool partial = false;
  std::vector<std::string> pending;

  std::vector<ResidencyUnit> residency_units;
  /// How many of `dynamo_graph_breaks` were logged before the recording's first event (negative
  /// relative time: the run's origin is its recorded events', not the compile log's).
  int64_t dynamo_breaks_before = 0;
  std::vector<RunPhase> phases;
  std::vector<SwapGroup> swap_groups;
  /// correlationId → the CUDA API call (Runtime or Driver row) that launched a GPU record.
  std::unordered_map<uint32_t, std::pair<Source, uint32_t>> launches;

  size_t event_count() const;
  /// Index of the group for `device` (−1 if none).
  int group_of(const std::string& device) const;
  /// The index of `s` in `strings`, adding it if new; a text past kMaxLabelBytes is cut to
  /// them, ending in "..." (texts equal that far are one label).
  uint32_t intern(const std::string& s);
  /// Interns every label of `other` in its order (as intern() met them there); returns each
  /// one's index here, by its index there.
  std::vector<uint32_t> merge_strings(const RunTimeline& other);
  static constexpr size_t kMaxLabelBytes = 512;

 private:
  /// Labels by their text (at most kMaxLabelBytes): open addressing, each slot (the text's
  /// hash, index into `strings` + 1; 0: empty).
  std::vector<std::pair<uint64_t, uint32_t>> slots_;
  size_t used_ = 0;
};

/// A module's name as the views show it: "<root>" for the root module ("").
std::string module_label(const std::string& module);
/// "cpu", "disk" or "device": where an onloaded weight came from.
const char* weight_source_name(events::WeightSource source);
/// "pre_forward", "post_forward", "init_hook", "detach_hook".
const char* hook_phase_name(events::HookPhase phase);
/// nsys' copyKind names (ENUM_CUDA_MEMCPY_OPER): "Unknown", "HtoD", "DtoH", ..., "PtoP"; "?" out of range.
const char* copy_kind_name(tracer::MemcpyKind kind);
/// The accelerator index a device name stands for: "0" and "cuda:0" → "0"; other names as given.
std::string canonical_device(const std::string& device);

/// The slices of every category that occurs in the run's lanes (for the legend), as flags
/// indexed by Category.
std::vector<bool> categories_used(const RunTimeline& tl);

/// An event the timeline's search found: its source row, its time and where it is drawn.
struct SearchMatch {
  Source source = Source::Compute;
  uint32_t row = 0;
  int64_t start_ns = 0, end_ns = 0;  ///< relative
  uint32_t group = 0;                ///< index into RunTimeline::groups
  uint16_t track = 0, level = 0;     ///< the group's track, the slice's nesting level in it
};
/// The events whose name (the slice's label) or module contains `query`, ignoring case and
/// the query's leading and trailing blanks, in time order (ties: by group, track): module
/// compute, hooks, transfers (once, on their source's lane), weight swaps, compiler-disabled
/// scopes, regions, steps, graph breaks (by function or module), CPU ops, GPU records. Not the
/// residency lanes (they span the run). An empty query finds nothing.
std::vector<SearchMatch> find_events(const RunTimeline& tl, std::string_view query);

/// Loads run `run` of `reader`. Throws storage::CaptureError / std::out_of_range (no such run).
/// Reads every kind it draws (hookscope's host events, CPU ops, kernels, memcpys, memsets,
/// CUDA runtime and driver calls); the origin is the earliest of them all.
RunTimeline load_run_timeline(const storage::CaptureReader& reader, int64_t run);

/// Fields of one source row for the hover tooltip / details pane: (name, value) pairs, values
/// formatted with units; times relative to the run's origin.
std::vector<std::pair<std::string, std::string>> describe(const RunTimeline& tl, Source source, uint32_t row);
/// Start and end (relative ns) of one source row.
std::pair<int64_t, int64_t> extent(const RunTimeline& tl, Source source, uint32_t row);

/// Statistics of a time range (Nsight's "analysis summary" of a selection): per lane group,
/// busy time per category (clipped to the range), and bytes moved by the transfers and weight
/// onloads that overlap it (each counted whole), with the bandwidth those copies achieved
/// (bytes / their total duration).
struct GroupRangeStats {
  std::string device;
  int64_t busy_ns[kCategoryCount] = {};
  int64_t count[kCategoryCount] = {};
  int64_t bytes_in = 0, bytes_out = 0, onload_bytes = 0;
  int64_t copy_ns_in = 0, copy_ns_out = 0, onload_ns = 0;  ///< whole durations of those copies
  double gbps_in() const { return copy_ns_in ? static_cast<double>(bytes_in) / copy_ns_in : 0; }
  double gbps_out() const { return copy_ns_out ? static_cast<double>(bytes_out) / copy_ns_out : 0; }
  double gbps_onload() const { return onload_ns ? static_cast<double>(onload_bytes) / onload_ns : 0; }
};
struct RangeStats {
  int64_t t0_ns = 0, t1_ns = 0;  ///< relative
  std::vector<GroupRangeStats> groups;
  int64_t graph_breaks = 0;
  int64_t dynamo_break_records = 0;  ///< Dynamo's graph-break records logged in the range
};
RangeStats range_stats(const RunTimeline& tl, int64_t t0_ns, int64_t t1_ns);

}  // namespace hs::ui
