// Text taken from a capture (scenario, policy and mode names, labels, module and device names,
// error messages, settings) written into the Markdown report: it must stay inside its table cell,
// line or code span whatever it holds, on GitHub (GFM) and in report --html alike.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hs::app {

/// `s` on one Markdown line: control characters (newlines, tabs, ESC, DEL) become spaces and
/// each `|` becomes `\|`, which GFM reads as a literal pipe in a table cell, in code spans too
/// (a backslash right before a pipe becomes `\\`, so that `a\|` stays in its cell).
std::string md_text(std::string_view s);

/// `v` with md_text applied to every string and every object key, recursively: what the report
/// renderers read, so that a lookup by name (a device id in `peak_memory_bytes`) still matches.
nlohmann::json md_safe(const nlohmann::json& v);

/// `s` (already md_text'ed) as an inline code span: fenced by one backtick more than the longest
/// run of backticks inside, padded with a space when `s` starts or ends with a backtick.
std::string md_code(std::string_view s);

}  // namespace hs::app
