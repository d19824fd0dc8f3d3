// `hookscope capture`: runs the scenario × policy × mode (× fullgraph) matrix on one model
// through an engine (engines/engine.h) and records every run into one SQLite capture.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers `capture`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_capture_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli
