// Small helpers the commands share: comma-separated option values and their validators.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
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

/// Levenshtein distance (insertions, deletions, substitutions; bytes).
size_t edit_distance(std::string_view a, std::string_view b);

/// For a command line `app` rejected (`args`: argv without the program): "did you mean
/// --scenarios?" naming, for the first `--flag` that is no option of the chosen subcommand nor
/// of the app, the option within 2 edits of it (the closest; the first declared on a tie), or
/// for a first word that is no subcommand the subcommand that close. "" when nothing is.
std::string did_you_mean(CLI::App& app, const std::vector<std::string>& args);

/// The lines a command prints after writing `capture` (holding `runs` runs): how to open it
/// with `report`, `view` and `export` (paths shell-quoted where they need it).
std::string open_hint(const std::filesystem::path& capture, size_t runs);

}  // namespace hs::app
