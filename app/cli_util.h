// Small helpers the commands share: comma-separated option values and their validators.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::app {

/// "a, b,,c" → {"a", "b", "c"}: items split at commas, surrounding blanks trimmed, empty ones dropped.
std::vector<std::string> split_list(const std::string& s);

/// The items joined with `sep`.
std::string join(const std::vector<std::string>& items, const char* sep);

/// Parse-time check of a comma-separated option against its allowed values: a bad value is a
/// usage error (exit 2) whose message names the option (CLI11 prefixes it) and the choices.
CLI::Validator list_of(std::vector<std::string> allowed);

/// The same for a single value.
CLI::Validator one_of(std::vector<std::string> allowed);

}  // namespace hs::app
