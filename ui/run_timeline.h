// One run of a capture laid out for the timeline, the way trace viewers (Perfetto, Nsight
// Systems) show tracks of slices, instants, counters and flows: a lane group per device — real
// or emulated — with module compute, incoming and outgoing activation transfers, weight
// onloads/offloads, weight residency per module and a memory counter; one host group per
// recording thread with the model's forward, hook spans, compiler-disabled scopes, compiled
// regions, graph breaks and generation steps; and the transfer flows between device groups.
//
// Built from a storage::CaptureReader (never from the model). Slice times are ns relative to
// `origin_ns` (the run's earliest event); the source rows keep the absolute host-clock times
// the capture stored. No window or ImGui here: unit-tested headless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/capture_reader.h"
#include "ui/timeline.h"

namespace hs::ui {

/// Which row vector of RunTimeline a track's `Slice::row` indexes.
enum class Source : uint8_t { Compute, Transfer, WeightSwap, Residency, Hook, Disabled, Region, Step, Break };

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
  kCategoryCount
};
const char* category_name(uint8_t c);

/// What a track shows. A device group's tracks come in this order: compute, transfers in,
/// transfers out, weight onload/offload (only when the device onloads or offloads), memory
/// (only when something was ever resident); its residency lanes are kept apart
/// (LaneGroup::residency_summary and LaneGroup::residency). A host group's: model forward
/// (only on the thread that ran the root module), hooks, compiler-disabled, compiled regions,
/// graph breaks, generation steps.
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
  Steps,             ///< generation steps
};
/// The lane's title: "compute", "transfers in", ...; a Residency lane is titled by its module
/// instead (Track::name).
const char* lane_name(Lane lane);
/// Which row vector of RunTimeline the lane's slices index (Memory: none, it has no slices).
Source lane_source(Lane lane);

struct Track {
  std::string name;
  Lane lane = Lane::Compute;
  Source source = Source::Compute;                 ///< lane_source(lane)
  std::vector<std::vector<Slice>> levels;          ///< see build_levels
  std::vector<Slice> instants;                     ///< graph breaks: start == end, sorted
  std::vector<std::pair<int64_t, int64_t>> counter;  ///< (relative ns, bytes), sorted; memory
  int64_t counter_max = 0;
  size_t slice_count() const;
};

struct LaneGroup {
  std::string device;  ///< "0", "1", "cpu", "disk" — or "host" for a thread group
  std::string title;   ///< e.g. "accelerator 1 (emulated, CPU memory)"
  bool emulated = false;
  bool host = false;   ///< a recording thread rather than a device
  uint32_t thread = 0; ///< host groups: the tracer's thread index
  std::vector<Track> tracks;     ///< in the order Lane lists them
  std::vector<Track> residency;  ///< one lane per module whose weights live on / visit this device
  /// The union of `residency`'s on-device intervals in one lane (shown while the per-module
  /// lanes are collapsed); labelled with the module when one, else "N modules".
  Track residency_summary;
};

/// An activation transfer drawn from the source group's "out" lane to the destination's "in".
struct Flow {
  int64_t start_ns, end_ns;  ///< relative
  uint32_t src_group, dst_group;
  uint32_t row;  ///< into RunTimeline::transfers
};

/// Where a module's weights live: `device` while materialised, `home` otherwise.
struct ResidencyUnit {
  std::string module;
  std::string device;  ///< execution device ("0", ...)
  std::string home;    ///< "cpu" / "disk" for offloaded modules, else == device
  int64_t bytes = 0;   ///< bytes materialised per onload (0 when unknown)
};

struct RunTimeline {
  storage::RunRecord run;
  int64_t origin_ns = 0;    ///< absolute host-clock ns of relative time 0
  int64_t duration_ns = 0;  ///< relative end of the last event
  std::vector<std::string> strings;
  std::vector<LaneGroup> groups;  ///< devices (accelerators by index, then cpu, disk), then host threads
  std::vector<Flow> flows;        ///< sorted by start

  // Source rows (absolute times), indexed by Slice::row through the track's Source.
  std::vector<storage::ModuleComputeRow> compute;
  std::vector<storage::TransferRow> transfers;
  std::vector<storage::WeightSwapRow> swaps;
  std::vector<ResidencyUnit> residency_units;
  std::vector<storage::HookEventRow> hooks;
  std::vector<storage::DisabledScopeRow> disabled;
  std::vector<storage::RegionRow> regions;
  std::vector<storage::GenerationStepRow> steps;
  std::vector<storage::GraphBreakRow> breaks;

  size_t event_count() const;
  /// Index of the group for `device` (−1 if none).
  int group_of(const std::string& device) const;
  uint32_t intern(const std::string& s);

 private:
  std::unordered_map<std::string, uint32_t> ids_;
};

/// A module's name as the views show it: "<root>" for the root module ("").
std::string module_label(const std::string& module);
/// "cpu", "disk" or "device": where an onloaded weight came from.
const char* weight_source_name(events::WeightSource source);
/// "pre_forward", "post_forward", "init_hook", "detach_hook".
const char* hook_phase_name(events::HookPhase phase);

/// Loads run `run` of `reader`. Throws storage::CaptureError / std::out_of_range (no such run).
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
};
RangeStats range_stats(const RunTimeline& tl, int64_t t0_ns, int64_t t1_ns);

}  // namespace hs::ui
