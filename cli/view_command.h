// `hookscope view`: the desktop viewer (ui/) on a capture file.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers `view`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_view_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli
