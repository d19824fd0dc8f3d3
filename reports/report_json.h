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

}  // namespace hs::reports
