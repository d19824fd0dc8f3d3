// Text hookscope prints or writes from what others wrote (labels, cell names, logs, a capture's
// JSON columns): comma lists, UTF-8 checks, and text made safe for a terminal or a JSON document.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hs::output {

/// "a, b,,c" → {"a", "b", "c"}: items split at commas, surrounding blanks trimmed, empty ones dropped.
std::vector<std::string> split_list(const std::string& s);

/// The items joined with `sep`.
std::string join(const std::vector<std::string>& items, const char* sep);

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

/// `s` cut to at most `max` bytes between UTF-8 characters, ending in "..." when cut (a copy of
/// at most `max` bytes, however long `s` is): how a name of megabytes is shown.
std::string cut_text(std::string_view s, size_t max);

/// The length in bytes (1 to 4) of the well-formed UTF-8 character starting at byte `i` of `s`
/// (RFC 3629: no overlong form, no surrogate, nothing past U+10FFFF); 0 when the bytes there are
/// not one, or `i` is past the end.
size_t utf8_length_at(std::string_view s, size_t i);

/// `doc` as JSON text (`indent` as nlohmann's dump) with every invalid UTF-8 sequence of its
/// strings replaced by U+FFFD, and DEL and the characters terminal_text escapes beyond ASCII's
/// controls written as \u escapes (the same strings, inert on a terminal): how the commands
/// print documents built from a capture's text, which another program may have written with any
/// bytes.
std::string json_text(const nlohmann::json& doc, int indent);

/// Appends `s` as a JSON string literal (quotes, backslashes, control characters, DEL and the
/// invisible characters escaped; each byte that is not part of a well-formed UTF-8 character
/// written as U+FFFD, as json_text does).
void append_json_string(std::string& out, std::string_view s);

}  // namespace hs::output
