// `hookscope import`: a torch.profiler (Kineto) trace and/or a TORCH_TRACE compile log as one
// run of a capture (new, or appended to with --append).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers `import`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_import_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli
