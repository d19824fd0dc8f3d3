// `hookscope explain`: one run's graph breaks, like torch._dynamo.explain.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers `explain`; `run_selected` is set to the command's action when it is chosen.
CLI::App* add_explain_command(CLI::App& app, std::function<int()>& run_selected);

}  // namespace hs::cli
