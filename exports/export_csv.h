// `hookscope export --format csv`: event tables of a capture as CSV files, one per table.
//
// A file is the table's columns as the capture's reader returns them — `runId` first, then
// the kind's columns in table order (tracer/event_kinds.h), strings resolved from StringIds,
// enums and times as the stored integers (ns), an empty cell for NULL — under a header row.
// Fields holding a comma, a double quote, a line break or an edge space are quoted as RFC 4180
// says (quotes doubled); lines end with CRLF. Columns the capture keeps only for nsys' sake
// (globalPid, nsys-only and constant columns) are left out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "storage/capture_reader.h"

namespace hs::exports {

/// The event tables `export_csv` writes, by table name ("HOOK_EVENTS", ..., "DYNAMO_RECOMPILES").
std::vector<std::string> csv_tables();

/// A table named by its table name or its reader name, in any case ("HOOK_EVENTS",
/// "hook_events"), as csv_tables() spells it. Throws std::invalid_argument listing the tables.
std::string csv_table(const std::string& name);

struct CsvExportSummary {
  std::map<std::string, int64_t> rows;           ///< data rows written per table
  std::vector<std::filesystem::path> files;      ///< the files written, in table order
};

/// Writes `tables` (csv_tables() names; empty = every event table with at least one row in
/// `runs`) of the runs `runs` into folder `dir` (created when missing) as TABLE.csv, or
/// TABLE.csv.gz with `gzip`. A named table without rows still gets its header. Each file is
/// written under a temporary name and renamed when complete. Throws std::out_of_range for an
/// unknown run, storage::CaptureError for a read failure, std::runtime_error for a write failure.
CsvExportSummary export_csv(const storage::CaptureReader& reader, const std::vector<int64_t>& runs,
                            const std::vector<std::string>& tables, const std::filesystem::path& dir, bool gzip);

}  // namespace hs::exports
