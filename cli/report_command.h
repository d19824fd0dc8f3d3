// `hookscope report`: Markdown (reports/report.h) and the report JSON (schema 2) from a capture.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers `report`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_report_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli
