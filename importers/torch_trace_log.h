// torch.compile's structured compile log (`TORCH_TRACE=dir`, the file tlparse reads) into a
// capture: one DYNAMO_COMPILES row per compile id and attempt, one DYNAMO_GRAPH_BREAKS row per
// graph break, one DYNAMO_RECOMPILES row per failing guard (tracer/event_kinds.h).
//
// The format (torch/_logging/_internal.py, `trace_structured`): one record per line,
//   V1201 04:54:56.531000 32543 /path/to/convert_frame.py:276] {"dynamo_start": {...}, "frame_id": 0,
//     "frame_compile_id": 0, "attempt": 0, "has_payload": "<md5>"}
// a glog prefix, then a JSON object whose first key other than the envelope's (rank,
// compiled_autograd_id, frame_id, frame_compile_id, attempt, has_payload, stack) is the record
// type; with `has_payload`, the payload follows as lines starting with a tab, and its MD5 is
// `has_payload`. `str` records intern file names for the stacks. The records used:
//   dynamo_start         a compile begins (its stack's last frame is the code compiled);
//   compilation_metrics  its end: co_name/co_filename/co_firstlineno, guard_count,
//                        graph_op_count, times, fail_type/fail_reason, restart_reasons;
//   dynamo_output_graph  a graph handed to the backend (torch._dynamo.explain counts these);
//   artifact             `dynamo_graph_break_reason` (a graph break), `recompile_reasons`
//                        (the guards that failed), `hookscope_cell` (a cell marker, below);
// every other record type tlparse knows is counted; a type it does not know (a log from
// another torch version) is counted as unknown, a diagnostic, not an error.
//
// Compile ids are Dynamo's "F/C" (frame id / frame compile id), with the attempt Dynamo
// restarted tracing at (tlparse's directory keys "[F/C]", "[F/C_1]"). A compile id is a row as
// soon as any record names it, as in tlparse's compile_directory.json. Dynamo numbers frames
// from 0 again after torch._dynamo.reset(), so an id may repeat in a log: a second
// `dynamo_start` (or `compilation_metrics`) for an id starts a new row.
//
// Cells: hookscope's torch engine (docs/torch-engine.md) writes, before each cell, an
// `artifact` named `hookscope_cell` with the JSON payload {"cell": "<id>"}. With a cell
// selected, only the records between that cell's marker and the next marker (or the end of
// the file) are imported.
//
// Streaming: the file is read line by line; a line longer than `max_line_bytes` is an error.
// Payloads are hashed as they stream; only the payloads of the artifacts above are kept
// (each at most `max_payload_bytes`). Nothing is written unless the whole selection reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "storage/capture_reader.h"
#include "storage/store.h"

namespace hs::importers {

struct TorchTraceOptions {
  /// The cell to import ("" = every record of the log).
  std::string cell;
  /// Added to a graph break's wall-clock time (ns since the epoch) to put it on the capture's
  /// clock: the run's trace shift (RunImportOptions::trace_shift_ns); 0 keeps wall-clock time.
  int64_t shift_ns = 0;
  size_t max_line_bytes = size_t{64} << 20;     ///< bytes of one line (a record header or a payload line)
  size_t max_payload_bytes = size_t{64} << 20;  ///< bytes of one kept payload (break reason, recompile reasons)
};

/// What a log held, as rows (owned strings): the reader's row types of the three kinds.
struct TorchTraceLog {
  std::vector<storage::DynamoCompileRow> compiles;
  std::vector<storage::DynamoGraphBreakRow> graph_breaks;
  std::vector<storage::DynamoRecompileRow> recompiles;
};

struct TorchTraceSummary {
  std::vector<std::filesystem::path> files;  ///< the logs read, in order
  int64_t lines = 0;         ///< lines read (all files, every cell)
  int64_t cell_markers = 0;  ///< `hookscope_cell` markers seen (every cell)
  std::vector<std::string> cells;  ///< the cells marked, in order of their markers
  /// Records imported: the selection's records other than `str` and cell markers (tlparse's
  /// "ok" count for the same records).
  int64_t records = 0;
  std::map<std::string, int64_t> record_types;  ///< records imported, by type
  /// Records of types this importer (and tlparse) does not know, by type (a diagnostic).
  int64_t unknown_records = 0;
  std::map<std::string, int64_t> unknown_types;
  int64_t compiles = 0;              ///< DYNAMO_COMPILES rows
  int64_t graph_breaks = 0;          ///< DYNAMO_GRAPH_BREAKS rows (`dynamo_graph_break_reason` artifacts)
  int64_t recompiles = 0;            ///< recompilations (`recompile_reasons` artifacts)
  int64_t recompile_guards = 0;      ///< DYNAMO_RECOMPILES rows: a failing guard per cached compile checked
  /// Compiles whose frame runs eagerly: status 'skipped' or 'failed'. (Under fullgraph=True a
  /// failure raises instead; the log does not say which mode ran, the caller knows.)
  int64_t frames_skipped = 0;
  int64_t recompile_limit_hits = 0;  ///< compiles that failed on the recompile limit (GB0039)
  /// Graphs handed to the backend, and the breaks between them, as torch._dynamo.explain
  /// counts them for the same calls: graph_break_count = graph_count - 1 (0 without a graph;
  /// explain itself says -1 there).
  int64_t graph_count = 0;
  int64_t graph_break_count = 0;
};

/// The log file(s) a path names: a file is itself; a directory (TORCH_TRACE's) holds one log
/// per process, `dedicated_log_torch_trace_[rank_N_]XXXX.log`: the rank-0 logs
/// (`..._rank_0_*.log`) when the run was distributed, else the logs without a rank, oldest
/// (modification time) first. Throws ImportError naming the path when it does not exist or a
/// directory holds no such log.
std::vector<std::filesystem::path> torch_trace_files(const std::filesystem::path& dir_or_file);

/// Reads the log(s) of `dir_or_file` (see torch_trace_files) and returns the selection's rows.
/// `summary`, when given, is filled. Throws ImportError ("FILE: line N: ...") for a line that
/// is not a glog-prefixed JSON object, a payload line with no record expecting one, a payload
/// whose MD5 is not its `has_payload` (truncated), an over-long line or payload, a
/// `hookscope_cell` or `recompile_reasons` payload that is not what torch writes, or a cell
/// that has no marker in the log ("FILE: no hookscope_cell marker for cell 'c3' (cells: ...)").
TorchTraceLog read_torch_trace(const std::filesystem::path& dir_or_file, const TorchTraceOptions& options,
                               TorchTraceSummary* summary = nullptr);

/// Imports the selection into run `run_id` of `store`: the rows in one transaction
/// (Store::write_activity), then, when records of unknown types were read, a DIAGNOSTICS
/// warning (source "torch_trace") naming the types and counts. Throws what read_torch_trace
/// throws, before anything is written, and std::invalid_argument for an unknown run.
TorchTraceSummary import_torch_trace(const std::filesystem::path& dir_or_file, storage::Store& store,
                                     int64_t run_id, const TorchTraceOptions& options);

}  // namespace hs::importers
