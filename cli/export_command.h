// `hookscope export`: a capture's runs in the formats other tools read — a Chrome trace shaped
// like torch.profiler's (Perfetto, chrome://tracing, HTA; exports/export_chrome.h) or CSV tables
// (exports/export_csv.h).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers `export`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_export_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli
