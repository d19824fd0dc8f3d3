// Text taken from a capture (scenario, policy and mode names, labels, module and device names,
// error messages, settings) written into the Markdown report: it must read as the same literal
// text, on one line and inside its table cell, on GitHub (GFM) and in report --html alike — no
// link, image, HTML tag, emphasis or code span may come out of a name.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hs::reports {

/// `s` as literal Markdown text on one line: control characters (C0, DEL, C1, U+2028/U+2029)
/// and invisible reordering ones (bidi controls, U+FEFF) become spaces and a backslash goes before every character GFM could read as markup:
/// \ ` * [ ] < & | ~ $ #, a `_` not inside a word, and a line-starting `>`, `- `, `+ ` or `1. `.
/// GFM reads each `\X` as X in text and `\|` as a pipe inside a table cell, so the result stays
/// in its cell too. Letters, digits, `_` inside words, `-`, `.`, `:`, `/` are kept as they are,
/// so identifiers (JSON keys, device ids, policy names) come out unchanged.
std::string md_text(std::string_view s);

/// The text md_text was given, from its result: each `\X` (X ASCII punctuation) becomes X.
std::string md_unescape(std::string_view s);

/// `s` (md_text's result) cut to at most `max` bytes with "..." at the end when it is longer:
/// never between a backslash and the character it escapes, nor inside a UTF-8 character.
std::string md_shortened(std::string_view s, size_t max);

/// `v` with md_text applied to every string and every object key, recursively: what the report
/// renderers read, so that a lookup by name (a device id in `peak_memory_bytes`) still matches.
nlohmann::json md_safe(const nlohmann::json& v);

/// Where a code span goes: on a line of text (a list item, a heading) or in a table cell, where
/// GFM reads `\|` as a pipe before it reads code spans.
enum class MdPlace { line, cell };

/// `s` (md_text's result) as an inline code span showing the original text: fenced by one
/// backtick more than its longest run of backticks, padded with a space when it starts or ends
/// with one or has a space at both ends; in a cell each `|` written `\|`. Empty for an empty
/// text. A cell's text holding a backslash right before a pipe cannot be a code span there (GFM
/// would show the backslash doubled): it stays `s`, plain text.
std::string md_code(std::string_view s, MdPlace where);

}  // namespace hs::reports
