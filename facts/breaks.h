// The graph-break facts of one run, computed once from the capture: Dynamo's own figures
// (torch._dynamo.explain of one forward, the compile metrics of the compiled run), the run's
// TORCH_TRACE log over the whole run, and the LibTorch engine's region cuts — each under the
// name facts/catalogue.h gives it. Report, explain, stats and the viewer read these fields and
// nothing else for breaks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::facts {

/// The break facts of `run` as one JSON object (every key present; null where the run's engine
/// or recordings cannot establish it):
///   "breaks_source": "dynamo" (torch engine: explain and compile metrics), "log" (only an
///     imported TORCH_TRACE log), "libtorch" (the LibTorch engine's regions) or "none";
///   "graph_count", "graph_break_count", "break_reasons": torch._dynamo.explain of one forward
///     (torch engine only; reasons [{"reason", "gb_type", "gb_code", "user_frame", "function",
///     "count"}]); for a LibTorch run "break_reasons" is its region cuts [{"reason",
///     "function", "module"}] (one per disabled-scope entry of one forward);
///   "recompiles", "frames_skipped", "recompile_limit_hits": Dynamo's compile metrics of the
///     compiled run as the torch engine read them, else the log's; null without either;
///   "log_compiles", "log_graphs", "log_graph_break_records", "log_graph_break_count",
///     "log_break_reasons" (importers::dynamo_summary's grouped records), "log_statuses": the
///     run's TORCH_TRACE log (null / [] without one);
///   "disabled_scope_entries", "captured_regions": the LibTorch engine's one compiled forward;
///   "recorded_disabled_scope_entries": GRAPH_BREAKS rows over the whole run (LibTorch engine;
///     null for a profiled program's run).
/// A run of a file written before runs named their engine is a LibTorch-engine run: its stored
/// "graph_break_count" is read as its disabled_scope_entries.
/// `results` is the run's RUNS.results (checked by storage::check_run_results).
/// Throws storage::CaptureError when the capture cannot be read.
nlohmann::json break_facts(const storage::CaptureReader& reader, const storage::RunRecord& run);

/// A compiled run's breaks as one cell of text, the same in every view: "11 (24 recompiles)"
/// for Dynamo's graph_break_count, "7†" for the LibTorch engine's disabled-scope entries,
/// "log: 3 records" for a run with only a compile log (its graph-break records, as tlparse lists
/// them), "–" when none is known. `run` is a
/// report run (the object break_facts' fields were merged into).
std::string breaks_text(const nlohmann::json& run);

/// Where most of a run's breaks happened: the disabled function of its most frequent break
/// reason (explain's for a torch run, "AlignDevicesHook.pre_forward", with its gb code and the
/// reasons' count; a LibTorch run's most frequent cut function). std::nullopt when the run has
/// no break reason naming a function.
struct BreakSite {
  std::string function, gb_code;  ///< gb_code "" for a LibTorch run
  int64_t count = 0;              ///< break reasons at that function
};
std::optional<BreakSite> main_break_site(const nlohmann::json& run);

}  // namespace hs::facts
