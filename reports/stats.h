// Summary statistics of a capture's runs, in the spirit of `nsys stats`: named reports, one
// table each, computed from the recorded events through the CaptureReader (never written).
// `hookscope stats` prints them (cli/stats_command.cpp); `hookscope report` puts the same
// numbers in report.json under each run's "stats" and the "where the time goes" table in the
// Markdown (reports/report_stats.cpp).
//
// Units everywhere: times are ns (host steady clock durations, end − start), sizes bytes,
// rates GB/s (10^9 bytes per second = bytes per ns).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::reports {

/// The reports, in the order `hookscope stats` prints them:
///   hook_time            hook class × phase × module (with the module's execution device)
///   hook_time_by_device  hook class × phase × execution device (modules pooled)
///                        (both: each call's time less Dynamo's compiling inside it, as
///                        StatsTotals::hook_busy_ns)
///   device_compute       module compute per execution device
///   transfers            activation transfers that moved bytes, by copy kind and device pair
///                        (src → dst); calls that moved nothing are counted apart in the totals
///   weight_swaps         weight onloads / offloads by source and device
///   compiler_disabled    compiler-disabled scopes by function
///   graph_breaks         the compile log's graph-break records and the LibTorch engine's
///                        disabled-scope entries recorded, grouped by site
///   gpu_by_caller        GPU kernels, copies and memsets by the hook call or module forward
///                        that launched them (CUPTI external correlation)
const std::vector<std::string>& stats_report_names();

/// Durations of a group of spans (ns). `median_ns` is the middle value, the mean of the two
/// middle ones for an even count. All zero for an empty group.
struct DurationStats {
  int64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
  double mean_ns = 0, median_ns = 0;
};

/// One hook class's phase on one module. `phase` is ENUM_HOOK_PHASE's label ("pre_forward",
/// "post_forward", "init_hook", "detach_hook"); `module` the FQN ("<root>" for the model);
/// `device` the module's execution device ("" when the capture does not say: see
/// `compute_stats`).
struct HookTimeRow {
  std::string hook, phase, module, device;
  DurationStats time;
};
/// One hook class's phase on one execution device, over all its modules.
struct HookDeviceRow {
  std::string hook, phase, device;
  int64_t modules = 0;  ///< distinct modules pooled
  DurationStats time;
};
/// Module compute on one execution device (MODULE_COMPUTE; the root module's rows, which span
/// every device, are left out). `busy_ns` is the union of the spans (nested modules counted
/// once): the time the device's compute lane is busy.
struct DeviceComputeRow {
  std::string device;
  int64_t modules = 0, calls = 0, busy_ns = 0;
};
/// Copies of one kind between two devices. Transfers: `kind` is nsys' copy-kind name ("HtoD",
/// "DtoH", "DtoD", "PtoP", "HtoH", "Unknown") of the logical src → dst. Weight swaps: `kind` is
/// "onload" or "offload", `src` where an onload read the weight ("cpu", "disk", "device"; an
/// offload's is "device") and `dst` the device it landed on ("meta" for an offload).
struct CopyRow {
  std::string kind, src, dst;
  bool emulated = false;  ///< transfers: an emulated accelerator took part (always false for swaps)
  int64_t count = 0, bytes = 0, total_ns = 0;
  double gb_per_s = 0;  ///< bytes / total_ns; 0 when total_ns is 0
};
/// Compiler-disabled scopes of one function (DISABLED_SCOPES). `time` counts every entry,
/// nested ones included (each inclusive of what ran inside it); `nested` of them had depth > 1.
struct DisabledScopeRow {
  std::string function;
  int64_t nested = 0;
  DurationStats time;
};
/// Breaks at one site. LibTorch engine (GRAPH_BREAKS: disabled-scope entries recorded over the
/// run): `source` "libtorch", `site` the
/// compiler-disabled function, `where` the module FQN ("<root>"), `reason` the first one
/// recorded. Dynamo's compile log (DYNAMO_GRAPH_BREAKS of a torch-engine or imported run: its
/// graph-break records over every compile, grouped through importers::dynamo_summary): `source`
/// "log", `site` the gb code ("" when Dynamo gave
/// none), `where` the user frame ("file:line"), `reason` the break type.
struct BreakSiteRow {
  std::string source, site, where, reason;
  int64_t count = 0;
};

/// GPU work of one kind on one device launched by one caller: the innermost hook call
/// (`caller` its method, e.g. "AlignDevicesHook.pre_forward") or module forward (`caller`
/// "forward") running when it was launched, joined through the record's correlationId →
/// EXTERNAL_CORRELATION (CUSTOM1, the LibTorch engine's pushes, before any other kind) →
/// HOOK_EVENTS / MODULE_COMPUTE.externalId; when the external id names a CPU op instead (a
/// torch.profiler trace: kernels name their aten op), the innermost hook call or module forward
/// running when that op began. `caller` "(unattributed)" and `module` "" when neither names it
/// (work launched outside every hook and forward, or while nothing was recorded). `kind` is "kernel", "memset" or "memcpy
/// HtoD" (nsys' copy-kind names); `total_ns` the GPU time (end − start of each record).
struct GpuCallerRow {
  std::string caller, module, kind;
  int64_t device = 0;  ///< CUDA device index (deviceId)
  int64_t count = 0, total_ns = 0, bytes = 0;
};

/// The run-level sums behind "where the time goes". Busy times are unions of spans (time
/// inside at least one span, nesting counted once).
struct StatsTotals {
  /// hook_busy_ns: time inside at least one hook call, less hook_compile_ns, the time Dynamo
  /// spent compiling frames inside them (torch.profiler's "_compile.compile_inner (dynamo_timed)"
  /// ranges: a hook whose frame Dynamo compiled on its first calls). facts/catalogue.h.
  int64_t hook_calls = 0, hook_busy_ns = 0, hook_compile_ns = 0;
  int64_t disabled_entries = 0, disabled_busy_ns = 0;
  int64_t transfers = 0, transfer_bytes = 0, transfer_ns = 0;  ///< transfers that moved bytes
  /// transfer calls that moved nothing (0 bytes: a send_to_device of tensors already in place)
  int64_t empty_transfer_calls = 0, empty_transfer_ns = 0;
  int64_t onloads = 0, onload_bytes = 0, onload_ns = 0;
  int64_t offloads = 0, offload_bytes = 0, offload_ns = 0;
  /// facts/catalogue.h's recorded_disabled_scope_entries (GRAPH_BREAKS rows: the LibTorch
  /// engine's cuts) and log_graph_break_records (DYNAMO_GRAPH_BREAKS rows: the compile log's).
  int64_t recorded_disabled_scope_entries = 0, log_graph_break_records = 0;
};

/// The statistics of one run. Only the requested reports are filled; `totals` always is. Rows
/// are grouped by whole names; each text in them is then cut to kMaxStatsCell bytes
/// (shortened_text), as every view shows it.
/// Every list is sorted: time reports by total time (most first), copies by kind, src, dst,
/// graph breaks by count (most first) then site and where.
struct RunStats {
  int64_t run = 0;
  std::string engine;  ///< "libtorch", "torch", "import" ("" in older files)
  std::string cell;    ///< the run's label, else "scenario/policy/mode[/fullgraph]"
  std::string scenario, policy, mode;
  bool fullgraph = false;
  std::string status;  ///< "complete", "failed", "incomplete" (of the capture, not the result)
  StatsTotals totals;
  std::vector<HookTimeRow> hook_time;
  std::vector<HookDeviceRow> hook_time_by_device;
  std::vector<DeviceComputeRow> device_compute;
  std::vector<CopyRow> transfers, weight_swaps;
  std::vector<DisabledScopeRow> compiler_disabled;
  std::vector<BreakSiteRow> graph_breaks;
  std::vector<GpuCallerRow> gpu_by_caller;
};

struct StatsOptions {
  std::vector<std::string> reports;  ///< names from stats_report_names(); empty = all
  std::optional<int64_t> run;        ///< one run (whatever its status); empty = every complete run
};

/// Statistics of the selected runs, by run id. A module's execution device is that of its
/// MODULE_COMPUTE rows (LibTorch engine), else the `device=` of its `hookscope::pre_forward`
/// / `post_forward` ranges kept in CPU_OPS (torch engine, imports of the driver's traces),
/// else the device its weights were onloaded to, else "". Throws std::invalid_argument naming
/// an unknown report, std::out_of_range naming the file for an unknown run, and the reader's
/// errors.
std::vector<RunStats> compute_stats(const storage::CaptureReader& reader, const StatsOptions& options = {});

/// A generic table of one report over several runs, as `hookscope stats` prints it: the
/// columns "run", "engine", "cell", then the report's own (times "*_ns" in ns, "bytes" in bytes,
/// "gb_per_s" in GB/s); each row's cells are JSON numbers, strings or booleans.
struct StatsTable {
  std::string name, title;
  std::string empty;  ///< what no rows means for this report (e.g. "no GPU activity recorded ...")
  std::vector<std::string> columns;
  std::vector<std::vector<nlohmann::json>> rows;
};

/// The most bytes of any text in a row of a StatsTable or stats_json (a run's engine and cell,
/// a module's, hook's or caller's name): a longer one ends in "..." (the table, CSV, JSON rows);
/// the JSON document's "runs" keep a run's label whole, once.
inline constexpr size_t kMaxStatsCell = 200;

/// `s` cut to at most `max` bytes between UTF-8 characters, ending in "..." when cut.
std::string shortened_text(std::string s, size_t max);

/// The tables of `reports` (empty = all) over `runs`, in stats_report_names() order; each row
/// begins with its run's id, engine and cell (cut to kMaxStatsCell bytes).
std::vector<StatsTable> stats_tables(const std::vector<RunStats>& runs, const std::vector<std::string>& reports = {});

/// The totals as a JSON object keyed by StatsTotals' member names.
nlohmann::json stats_totals_json(const StatsTotals& totals);

/// One run's statistics as JSON (report.json's per-run "stats"): {"units": {...}, "totals":
/// {...} (StatsTotals' members), and per report an array of row objects keyed by the report's
/// own columns (empty when nothing was recorded)}; with `reports`, only those reports (the ones
/// computed: a report left out is absent, not an empty array that would read "none").
nlohmann::json stats_json(const RunStats& run, const std::vector<std::string>& reports = {});

}  // namespace hs::reports
