// `hookscope report`: Markdown (app/report.h) and the report JSON (schema 1) from a capture.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::app {

/// The report JSON (schema 1) of a capture: the model, the devices, and per run its stored
/// result with `recorded` totals computed by SQL over the run's events (transfers, weight
/// onloads, graph breaks), its peak resident bytes per device and its `stats` (app/stats.h's
/// `stats_json`: totals and every report's rows). Runs that never ended are
/// `incomplete`. Throws the reader's errors.
nlohmann::json build_report(const storage::CaptureReader& rd);

/// Registers `report`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_report_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::app
