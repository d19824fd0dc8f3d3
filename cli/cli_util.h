// Small helpers the commands share: option validators, "did you mean", the hint printed after
// a capture is written, and --max-memory's checks. Text and output-path helpers are output/'s.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "hooks/device_map.h"

namespace hs::cli {

/// The help of a command's capture argument: every command that writes a capture named.
inline constexpr const char* kCaptureFileHelp =
    "Capture written by `hookscope capture`, `hookscope profile` or `hookscope import`";

/// Parse-time check of a comma-separated option against its allowed values: a bad value is a
/// usage error (exit 2) whose message names the option (CLI11 prefixes it) and the choices; so
/// is a value given twice ("sharded,sharded" would run and store the same runs twice).
CLI::Validator list_of(std::vector<std::string> allowed);

/// The same for a single value.
CLI::Validator one_of(std::vector<std::string> allowed);

/// Puts a check first on every option of `app` and of its subcommands that takes a number
/// (CLI11's type INT, UINT or FLOAT, vectors of them included), so that a value that is no
/// number is a usage error saying so, the option named: "--max-new-tokens: 'abc' is not a whole
/// number" (CLI::Range alone says "Value abc not in range", and an option without a range "Could
/// not convert"). A number outside an option's range is left to its CLI::Range ("not in range");
/// NaN and infinities are not numbers an option takes. Call it once, after every command's
/// options are declared.
void check_numbers(CLI::App& app);

/// Parse-time check of a --max-memory value's syntax (hooks::parse_max_memory: "0=200MB,cpu=4GiB"):
/// a malformed one is a usage error (exit 2) with the parser's message. Which devices exist is
/// checked later (parse_max_memory_option).
CLI::Validator max_memory_spec();

/// Levenshtein distance (insertions, deletions, substitutions; bytes).
size_t edit_distance(std::string_view a, std::string_view b);

/// For a command line `app` rejected (`args`: argv without the program): "did you mean
/// --scenarios?" naming, for the first `--flag` that is no option of the chosen subcommand nor
/// of the app, the option within 2 edits of it (the closest; the first declared on a tie), or
/// for a first word that is no subcommand the subcommand that close. "" when nothing is.
std::string did_you_mean(CLI::App& app, const std::vector<std::string>& args);

/// Throws CLI::ValidationError naming the option when an option of the parsed subcommand (or
/// of `app`) that takes a value was given an empty or all-blank one (`--out ""`): such a value
/// names no file, folder or label, and would otherwise fall back to a default unseen. The
/// exception is an option whose empty value is documented (`plan --no-split ""`: no class).
void refuse_empty_values(const CLI::App& app);

/// For a command line whose first word is no subcommand of `app`: "hookscope: 'WORD' is no
/// command; the commands are: a, b, ..." (or did_you_mean's suggestion when one is close); ""
/// when the first word is a subcommand or there is none.
std::string unknown_command(CLI::App& app, const std::vector<std::string>& args);

/// `--max-memory` of a command: hooks::parse_max_memory (accelerate's syntax, which lets
/// get_max_memory merely warn about an index it has no device for), then every key checked
/// against the devices the command can use, so that no budget names a device that cannot exist:
/// an accelerator index below 0 or above `max_index` (`limit` says why, e.g. "--devices 2"), or
/// "mps" unless `mps_ok`. Throws std::invalid_argument "--max-memory: ..." naming the entry and
/// the key at fault.
hooks::MaxMemory parse_max_memory_option(const std::string& spec, int max_index, const std::string& limit, bool mps_ok);

/// A filesystem error that reached the command's top as a line the user can act on: the flag
/// or argument that gave the path (found among `args`: a value that is the path or a folder
/// above it, absolute or relative), the path, what was being done and why, e.g.
/// "--assets out/loop: cannot create the folder: a loop of symbolic links" — never the C++
/// library's "filesystem error: ...". Text from the paths is made printable.
std::string filesystem_error_message(const std::filesystem::filesystem_error& e, const std::vector<std::string>& args);

/// One `--accelerate NAME=PATH` value, split. NAME becomes a policy's name: a table cell, a line
/// of the reports and the name of the torch engine's folders for its runs, so it is 1 to 64 of
/// the characters A-Z a-z 0-9 . _ + -, not beginning with '.' or '-', and neither whole-hook nor
/// offload-only (no '/', so it can never lead a folder elsewhere). PATH is not checked here.
/// Throws std::invalid_argument "--accelerate: ..." quoting the value (made printable).
struct AccelerateTree {
  std::string name, path;
};
AccelerateTree parse_accelerate_tree(const std::string& value);

}  // namespace hs::cli
