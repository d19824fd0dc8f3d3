// `hookscope capture`: runs the scenario × policy × mode (× fullgraph) matrix on one model
// and records every run into one SQLite capture; `hookscope report` and `hookscope explain`
// read such a file back.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::app {

/// Registers `capture`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_capture_command(CLI::App& app, std::function<int()>& run_selected);
/// Registers `report` (Markdown + report.json from a capture).
CLI::App* add_report_command(CLI::App& app, std::function<int()>& run_selected);
/// Registers `explain` (one run's graph breaks, like torch._dynamo.explain).
CLI::App* add_explain_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::app
