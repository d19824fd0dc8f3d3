// Small helpers the commands share: comma-separated option values and their validators.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "hooks/device_map.h"

namespace hs::storage {
class CaptureReader;
}

namespace hs::app {

/// "a, b,,c" → {"a", "b", "c"}: items split at commas, surrounding blanks trimmed, empty ones dropped.
std::vector<std::string> split_list(const std::string& s);

/// The items joined with `sep`.
std::string join(const std::vector<std::string>& items, const char* sep);

/// Parse-time check of a comma-separated option against its allowed values: a bad value is a
/// usage error (exit 2) whose message names the option (CLI11 prefixes it) and the choices; so
/// is a value given twice ("sharded,sharded" would run and store the same runs twice).
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

/// Throws CLI::ValidationError naming the option when an option of the parsed subcommand (or
/// of `app`) that takes a value was given an empty or all-blank one (`--out ""`): such a value
/// names no file, folder or label, and would otherwise fall back to a default unseen. The
/// exception is an option whose empty value is documented (`plan --no-split ""`: no class).
void refuse_empty_values(const CLI::App& app);

/// Throws std::invalid_argument "FLAG: not valid UTF-8 (byte 0xFF at offset N)" unless `value`
/// is UTF-8: the text a capture stores (labels, cell names, prompts) is printed in JSON reports.
void refuse_invalid_utf8(const std::string& flag, const std::string& value);

/// Throws std::invalid_argument "FLAG: holds a control character (a newline, tab, …) at offset
/// N; a name is one line" when `value` has a byte below 0x20 or 0x7f: run, cell and label names
/// are table cells and lines of the reports.
void refuse_control_characters(const std::string& flag, const std::string& value);

/// `s` as it may reach a terminal: every control character (C0, DEL, C1 written as UTF-8) and
/// every invisible character that reorders or splits what is shown (U+200E/F, U+202A..E,
/// U+2066..9 bidi controls, U+2028/9 line separators, U+FEFF) shown as `\xNN` or `\uNNNN`, so
/// that an escape sequence or a reordering in a name or a log line reads as text instead of
/// acting on the terminal. Newline and tab are kept when `keep_lines` (a multi-line message),
/// escaped too when not (a name, which must not fake a line of hookscope's output). A byte that
/// is not part of well-formed UTF-8 is shown as `\xNN` too (the text stays UTF-8). Other text
/// unchanged.
std::string terminal_text(std::string_view s, bool keep_lines = true);

/// The code point and length in bytes of the UTF-8 character at byte `i` of `s` when it is one
/// that terminal_text escapes and md_text blanks beyond ASCII's controls: a C1 control (2 bytes),
/// U+200E/F, U+2028..U+202E, U+2066..U+2069, U+FEFF (3 bytes); {0, 0} for any other.
std::pair<unsigned, size_t> invisible_character_at(std::string_view s, size_t i);

/// The length in bytes (1 to 4) of the well-formed UTF-8 character starting at byte `i` of `s`
/// (RFC 3629: no overlong form, no surrogate, nothing past U+10FFFF); 0 when the bytes there are
/// not one, or `i` is past the end.
size_t utf8_length_at(std::string_view s, size_t i);

/// `doc` as JSON text (`indent` as nlohmann's dump) with every invalid UTF-8 sequence of its
/// strings replaced by U+FFFD: how the commands print documents built from a capture's text,
/// which another program may have written with any bytes.
std::string json_text(const nlohmann::json& doc, int indent);

/// For a command line whose first word is no subcommand of `app`: "hookscope: 'WORD' is no
/// command; the commands are: a, b, ..." (or did_you_mean's suggestion when one is close); ""
/// when the first word is a subcommand or there is none.
std::string unknown_command(CLI::App& app, const std::vector<std::string>& args);

/// The lines a command prints after writing `capture` (holding `runs` runs): how to open it
/// with `report`, `view` and `export` (paths shell-quoted where they need it). The export's
/// suggested output is never the capture nor one of `inputs` (the files the capture was made
/// from: following the hint must not replace an import's trace).
std::string open_hint(const std::filesystem::path& capture, size_t runs, const std::vector<std::string>& inputs = {});
/// True when both paths exist and are the same file (device and inode, links followed): how an
/// output is checked against the inputs it must never replace.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

/// True when `inner` is `outer` or lies inside it (both resolved, links followed).
bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer);

/// The file of the folder `model_dir` that `out` is (or links to: symlink or hard link), if any.
std::optional<std::filesystem::path> model_file_at(const std::filesystem::path& out,
                                                   const std::filesystem::path& model_dir);

/// The checkpoint folders the capture's runs were made from: each distinct RUNS.model, or
/// results `model.path` (a hub id's snapshot), that is an absolute path to a folder holding
/// config.json (imports name none).
std::vector<std::filesystem::path> model_folders(const storage::CaptureReader& capture);

/// The one rule for where hookscope writes, checked by every flag that names an output (files,
/// folders, the capture's --out, --keep-offload-dir, --keep-driver-files): never into a model's
/// folder. Throws std::invalid_argument
///   "FLAG: OUT is (or links to) the model's file F (WHY); hookscope never writes into a model's folder: name a place outside it"
/// when `out` is one of the files of a folder of `models` under any name (a link, a hard link), and
///   "FLAG: OUT is or lies inside the model's folder M (WHY); hookscope never writes ..."
/// when it is the folder or lies inside it (links followed, `out` need not exist). With
/// `holds_too` (a folder whose contents the command replaces), "... holds the model's folder M
/// ..." when a model's folder lies inside `out`. `why` says where the folder comes from ("a run
/// of C was made from it", "--model").
void refuse_output_in_model_folder(const std::string& flag, const std::filesystem::path& out,
                                   const std::vector<std::filesystem::path>& models, const std::string& why,
                                   bool holds_too = false);

/// Throws std::invalid_argument "FLAG: OUT is the capture being ROLE; name another file" when
/// `out` is `input` (same_file, or the same path once normalised when `out` does not exist yet),
/// and refuse_output_in_model_folder's message when it is a file of, or lies inside, one of
/// `models` (model_folders of that capture). How every command keeps its outputs off the
/// captures it reads and the checkpoints they were made from (`role`: "reported", "exported",
/// "read", ...).
void refuse_overwriting_input(const std::string& flag, const std::filesystem::path& out,
                              const std::filesystem::path& input, const std::string& role,
                              const std::vector<std::filesystem::path>& models = {});

/// Throws std::invalid_argument "FLAG2: OUT is also FLAG1's output; name two files" when two of
/// the (flag, path) outputs of one command name the same file (empty paths are not outputs).
void refuse_shared_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

/// Writes `bytes` through an ExportFile: to a temporary sibling renamed onto `path` when
/// complete, so that a reader never sees half a file and a failed write leaves an earlier file
/// alone (a link's file replaced, /dev/stdout or a FIFO written in place). Throws
/// std::invalid_argument when `path` is a folder, std::runtime_error "cannot write PATH: REASON"
/// when the write fails.
void write_output_file(const std::filesystem::path& path, const std::string& bytes);

/// `--max-memory` of a command: hooks::parse_max_memory (accelerate's syntax, which lets
/// get_max_memory merely warn about an index it has no device for), then every key checked
/// against the devices the command can use, so that no budget names a device that cannot exist:
/// an accelerator index below 0 or above `max_index` (`limit` says why, e.g. "--devices 2"), or
/// "mps" unless `mps_ok`. Throws std::invalid_argument "--max-memory: ..." naming the entry and
/// the key at fault.
hooks::MaxMemory parse_max_memory_option(const std::string& spec, int max_index, const std::string& limit, bool mps_ok);

}  // namespace hs::app
