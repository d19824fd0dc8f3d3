// One run from another process's recordings: a torch.profiler (Kineto) trace and/or a
// TORCH_TRACE compile log, imported into a run of a capture. `hookscope import` and the torch
// engine both use it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/store.h"

namespace hs::importers {

struct RunFiles {
  std::optional<std::filesystem::path> trace;        ///< Chrome trace (.json or .json.gz)
  std::optional<std::filesystem::path> compile_log;  ///< TORCH_TRACE folder or one log file
  std::string cell;  ///< take the compile log's records of this `hookscope_cell` only ("" = all)
};

struct RunImportOptions {
  /// Called now and then while the trace is read: (bytes read, total bytes).
  std::function<void(uint64_t, uint64_t)> progress;
  /// The trace's clock onto the capture's, ns (KinetoOptions::shift_ns); 0 keeps the trace's.
  int64_t trace_shift_ns = 0;
};

struct RunImportSummary {
  nlohmann::json trace;        ///< what the trace gave: events per category, rows per table (null: none)
  nlohmann::json compile_log;  ///< what the log gave: compile ids, breaks, graph_break_count (null: none)
  std::vector<std::string> diagnostics;  ///< the trace's: unknown categories, Kineto's own warnings
};

/// Imports `files` into run `run_id` of `store` (begun by the caller, who also ends it), and
/// stores the diagnostics as DIAGNOSTICS rows of the run. Throws ImportError (naming the file
/// and where in it) for input it cannot read; what was written of the run before stays, and the
/// caller leaves the run `incomplete` or `failed`.
RunImportSummary import_run_files(storage::Store& store, int64_t run_id, const RunFiles& files,
                                  const RunImportOptions& options);

}  // namespace hs::importers
