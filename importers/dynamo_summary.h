// The Dynamo side of a run, from the rows an import of a torch.compile log wrote
// (DYNAMO_COMPILES, DYNAMO_GRAPH_BREAKS, DYNAMO_RECOMPILES; importers/torch_trace_log.h), as one
// JSON document for `hookscope report` and `hookscope explain`.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::importers {

/// The most bytes of a text of the summary (Dynamo's reasons, gb types and codes, frames,
/// guards, code names and files are far shorter; a longer one ends in "...").
inline constexpr size_t kMaxDynamoText = 4096;

/// The summary of run `run` (an object; every count 0 and every list empty for a run without
/// Dynamo rows):
///   "compiles": rows, "statuses": {"compiled": n, "restarted": n, "skipped": n, "failed": n,
///   "incomplete": n} (only the statuses present),
///   "graph_count", "graph_break_count": as torch._dynamo.explain counts them (graphs handed to
///     the backend; breaks = graphs - 1, 0 without a graph),
///   "graph_breaks": break records (one per `dynamo_graph_break_reason`, restarts included),
///   "break_reasons": [{"reason", "gb_type", "gb_code", "user_frame", "count", "frame_skipped"
///     (how many of them made Dynamo skip the frame), "chained_gb_codes": [...],
///     "compile_ids": [...], "module_calls": [{"callee", "site", "count"}] (the hooked module
///     call each break happened under, importers::module_call)}]: breaks grouped by code, type, reason and user frame, hexadecimal
///     addresses in reasons written "0x…" so that the same break on another function object
///     groups with it; most frequent first, then in log order,
///   "frames_skipped": n, "skipped_frames": [{"compile_id", "attempt", "code", "file", "line",
///     "status", "reason", "gb_code"}]: compiles whose frame runs eagerly (statuses 'skipped' and
///     'failed'; under fullgraph=True a failure raises instead, which the log does not record),
///   "recompiles": recompilations, "recompile_guards": failing guards (one per cached compile
///     checked), "recompile_reasons": [{"guard", "count", "compile_ids"}] (most first),
///   "recompile_limit_hits": n, "recompile_limit_frames": [{"compile_id", "code", "file", "line"}],
///   "compile_ids": [{"compile_id", "attempt", "status", "code", "file", "line", "guard_count",
///     "graph_op_count", "graphs", "compile_time_s", "fail_type", "fail_gb_code",
///     "restart_reasons"}] in log order (absent values null).
/// Each text is cut to kMaxDynamoText bytes (output::cut_text; groups are made of whole texts):
/// a reason or frame of megabytes in an edited capture is held and shown once, cut.
/// Throws storage::CaptureError when the capture cannot be read.
nlohmann::json dynamo_summary(const storage::CaptureReader& reader, int64_t run);

}  // namespace hs::importers
