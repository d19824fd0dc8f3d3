// `hookscope stats`: summary statistics of a capture's runs as tables, CSV or JSON, in the
// spirit of `nsys stats` (the reports are reports/stats.h's).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "reports/stats.h"

namespace hs::cli {

/// `table` as CSV (RFC 4180: a cell with a comma, quote or line break is quoted): the header
/// row, then one line per row. Times in ns, sizes in bytes, rates in GB/s, booleans 0/1.
std::string stats_csv(const reports::StatsTable& table);

/// `tables` as aligned text for people: a title line per report, times in ms (4 decimals: 0.1 µs),
/// "-" for an empty cell, "(no rows)" for an empty report.
std::string stats_text(const std::vector<reports::StatsTable>& tables);

/// The JSON `hookscope stats --format json` prints: {"file", "units", "runs": [{"run", "engine",
/// "cell", "scenario", "policy", "mode", "fullgraph", "status", "totals"}], "reports": {NAME:
/// [row objects keyed by the table's columns but "engine" and "cell": a row names its run by
/// "run", and the run's label is written once, whole, in "runs"]}}; the command adds each run's
/// "breaks" (the counts of facts/breaks.h, as report and explain show them).
nlohmann::json stats_document(const std::string& file, const std::vector<reports::RunStats>& runs,
                              const std::vector<reports::StatsTable>& tables);

/// Registers `stats`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_stats_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli
