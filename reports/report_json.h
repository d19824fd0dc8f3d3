// The report JSON (schema 2): the one document `report` prints as Markdown, HTML and JSON, and
// `report A B` compares.
#pragma once

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::reports {

/// The report JSON (schema 2) of a capture: the model, the capture's `settings` (command,
/// date, machine, prompt, tokens, warm-ups, repeats, interleaving, versions merged over the
/// runs), the devices, and per run its stored result (latency spreads: prefill_ms,
/// decode_ms_per_token, tokens_per_s, eager_* twins) with `speedup` {vs_eager, verdict
/// ("faster", "slower", "within noise", "not judged"), why} for compiled runs, `recorded`
/// totals computed by SQL over the run's events (transfers, weight onloads, graph breaks), its
/// peak resident bytes per device and its `stats` (reports/stats.h's `stats_json`: totals and the
/// reports but the per-module hook_time, which `hookscope stats` prints). Runs that never ended
/// are `incomplete`. Throws the reader's errors, and storage::CaptureError naming the file, the
/// run and the field when a run's results hold a field of another type than hookscope writes.
nlohmann::json build_report(const storage::CaptureReader& rd);

/// One run of build_report's "runs" as it writes it (before the verdicts are added): the run's
/// results with its record's fields, break facts, recording_overhead, stats, recorded totals and,
/// for a profiled program, its iterations. What a view that shows one run's report figures
/// starts from (the viewer's Compare tab for profiled programs). Throws as build_report.
nlohmann::json report_run(const storage::CaptureReader& rd, const storage::RunRecord& rec);

}  // namespace hs::reports
