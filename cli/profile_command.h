// `hookscope profile [options] [--] COMMAND ARGS...`: a Python program of the user's, run with the
// torch engine's recording injected (no edits to it), once per policy, each in its own process,
// into one capture (docs/profile.md).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

/// Registers `profile`; `run_selected` is set to the command's action when it is chosen.
/// `command`: the program's words, as split_profile_command found them.
CLI::App* add_profile_command(CLI::App& app, std::function<int()>& run_selected, std::vector<std::string> command);

/// The command line (without the program name) split where a `profile` command's program
/// begins: after the first `--`, else at the first word after `profile` that is neither one of
/// its options nor an option's value. {args, {}} when the first word is not `profile`.
std::pair<std::vector<std::string>, std::vector<std::string>> split_profile_command(const std::vector<std::string>& args);

}  // namespace hs::cli
