// `report --html`: the report as one self-contained HTML page a reviewer attaches to a PR. It
// opens offline in any browser: CSS in one <style>, pictures as inline SVG (reports/report_svg.h),
// no scripts, no external URLs, nothing fetched. Every text taken from the capture (module
// names, labels, error messages, settings) is escaped.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/report_svg.h"

namespace hs::reports {

/// The Markdown that render_markdown writes, as HTML: `#`…`###` headings, pipe tables (first
/// row the header, cells split at every unescaped pipe as GFM does; `\|` is a literal pipe, in code spans too), `> ` quotes, `- ` lists, paragraphs; inline
/// `code` (also the ``double-backtick`` form) and **bold**. Everything else is text, escaped.
/// A table's header cells that name a check get a `title` tooltip, and beside the table an
/// <aside> explains each check it shows (check_explanations()): in full the first time, later
/// as links to that first explanation (`#check-N`).
std::string markdown_to_html(const std::string& markdown);

/// What a check or column of the report means: (name as a table header shows it, HTML text).
/// Matched against a table's header cells and the heading above it, by substring.
const std::vector<std::pair<std::string, std::string>>& check_explanations();

/// A self-contained HTML page: `title` (text, escaped) as its <title>, the report's stylesheet in
/// one <style>, `body` (HTML, as is) inside <body>. No scripts, nothing fetched.
std::string html_document(const std::string& title, const std::string& body);

/// The page: a header (model, capture name, run count), the verdict (render_verdict_markdown
/// with each run it rests on a link to that run's row), the pictures as figures, the tables
/// (`markdown`: render_tables_markdown of `report`) with the checks explained beside them, one
/// table row per run of `report["runs"]` (id `run-N`: status, latency, breaks, checks, recorded
/// transfers and onloads, the error's first line), then the settings (`report["settings"]` as
/// a definition list, collapsed; a note when the capture lacks them).
/// `capture_name` is shown as the source (pass the file's name, not a full local path).
/// Throws std::invalid_argument when `report` lacks `runs` or `model`.
std::string render_html(const nlohmann::json& report, const std::string& markdown,
                        const std::vector<ReportPicture>& pictures, const std::string& capture_name);

}  // namespace hs::reports
