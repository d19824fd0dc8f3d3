// `hookscope report A.sqlite B.sqlite`: before/after across two captures. The cells of the
// matrix (engine, scenario, policy, mode, fullgraph) are matched between the two report JSONs
// (reports/report_json.h `build_report`), each matched cell gets A's and B's graph breaks,
// fullgraph outcome and decode latency, the delta B/A and a noise verdict, and the deltas of what
// the hooks cost (hook and compiler-disabled time and transfers from each run's `stats.totals`,
// graph breaks from the run); cells only one file holds are listed, and settings that differ
// between the captures are warned about first.
//
// Eager is compared first, per engine and scenario: eager runs nothing the compiler touches, so
// when an eager decode time (an eager cell's, or a compiled cell's interleaved eager) moved
// beyond its spread the machine changed between the captures. There the eager cells read
// "machine drift" rather than faster/slower, and the compiled cells are judged by their speed-up
// over their own file's eager (the runs' `speedup_vs_eager`) instead of by absolute time.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"

namespace hs::reports {

/// One side of a comparison.
struct DiffSide {
  std::string label;       ///< what the tables call it ("main", "pr"; default: the file's stem)
  std::string file;        ///< the capture's path as given
  nlohmann::json report;   ///< `build_report`'s document (schema 1)
  nlohmann::json settings; ///< object, setting name → text (`capture_settings`)
  std::vector<std::filesystem::path> models;  ///< `model_folders` of the capture
};

/// The settings that decide whether two captures compare, flattened to name → text: `model`
/// (a local folder by its name only), `architecture`, `dtype`, `params`, `devices` (ids with their kind), `engines`, `new tokens`, `repeats` (each
/// the distinct values over the runs, comma-separated), every version RUNS records per engine
/// (`versions.torch [libtorch]`) and, when the report has a `settings` object, its fields
/// (`settings.prompt`; nested objects joined with dots). Fields that differ between any two
/// captures by nature (date, time stamps, command line, output path) are left out. Throws the
/// reader's errors.
nlohmann::json capture_settings(const nlohmann::json& report, const storage::CaptureReader& rd);

/// Two latency objects ({median, min, max, n} in ms, optionally {q1, q3}; either may be null)
/// compared: {"a", "b" (the objects), "ratio" (B median / A median), "delta_pct" ((B−A)/A ×
/// 100), "spread" ("iqr" when both carry q1 and q3, else "min-max"), "verdict"}. The verdict is
/// measurement::judge's (B against A, as compiled against eager): "within noise" when the two
/// spreads overlap, "faster" / "slower" when they are apart, "not judged" when a side has fewer
/// than 3 samples, null when a side has no latency or a median of 0 (then ratio and delta_pct
/// are null too).
nlohmann::json compare_latency(const nlohmann::json& a, const nlohmann::json& b);

/// The diff document (`hookscope report --help` describes its schema). Cells are matched by engine,
/// scenario, policy, mode and fullgraph; a file holding the same cell several times (imports
/// appended) matches them in run order. `eager_moved` lists, per engine and scenario, the eager
/// measurement that moved furthest beyond its spread; each cell's `verdict` is judged as the
/// header says (`judged_by`). Throws std::invalid_argument when a report lacks `runs` (naming
/// the side).
nlohmann::json build_report_diff(const DiffSide& a, const DiffSide& b);

/// The diff as Markdown a reviewer pastes into a PR: the settings that differ (a warning table
/// at the top), the matched cells (breaks, outcome, latency A and B, B/A, Δ, verdict), then the
/// cells only one capture holds. Throws std::invalid_argument when a field is missing.
std::string render_diff_markdown(const nlohmann::json& diff);

/// The diff as one self-contained HTML page (reports/report_html.h `html_document`): `markdown`
/// (render_diff_markdown's, of `diff`) turned into HTML by `markdown_to_html`.
std::string render_diff_html(const nlohmann::json& diff, const std::string& markdown);

/// Labels for two captures: the given ones (exactly two, distinct, non-empty; else
/// std::invalid_argument naming --labels), else the files' stems — with their parent folder
/// when the stems are equal, and " (A)" / " (B)" when those are too.
std::pair<std::string, std::string> diff_labels(const std::string& file_a, const std::string& file_b,
                                                const std::vector<std::string>& given);

/// One side read from `file` (a file that is missing or not a capture fails with the reader's
/// error, naming it; std::invalid_argument when it holds no runs).
DiffSide read_diff_side(const std::string& file, const std::string& label);

}  // namespace hs::reports
