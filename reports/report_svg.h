// The report's pictures as SVG: the compare chart (decode latency per scenario × mode × policy)
// and timelines of chosen runs. Each picture is a standalone SVG 1.1 document: presentation
// attributes only (no CSS classes, scripts, fonts or external references), every word a <text>
// element so it stays crisp at any zoom and searchable, tooltips as <title> children. The HTML
// report (reports/report_html.h) inlines them; `report --assets DIR` writes them as files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/capture_reader.h"
#include "ui/run_timeline.h"

namespace hs::reports {

/// One picture of a report.
struct ReportPicture {
  std::string file;     ///< its name under --assets: "compare.svg", "timeline-run-7.svg"
  std::string title;    ///< a heading: "decode latency", "run 7: sharded whole-hook default"
  std::string caption;  ///< how to read it: one or two sentences of hookscope's own Markdown, no names
  std::string svg;      ///< the document: one <svg> element with its xmlns
};

/// `s` with & < > " ' replaced by entities, control characters (ESC, CR, DEL, ...) by spaces and
/// each byte that is not UTF-8 by U+FFFD:
/// safe as XML/HTML text and as a quoted attribute value.
std::string xml_escape(std::string_view s);

/// The compare chart: per engine, per scenario × mode, one bar per policy — the median decode
/// time (`decode_ms_per_token` where every completed run of the engine has it, else
/// `latency_ms`, the sum of the decode steps), a min–max whisker, and beside it the speed-up
/// against eager under the same policy (the run's interleaved eager measurement when it has one)
/// — "faster" / "slower" only when the two min–max ranges are apart, else "within noise".
/// Fullgraph runs are left out (their latency repeats the non-fullgraph run's structure); runs
/// without a latency show their status. Empty string when no run has a latency.
std::string compare_chart_svg(const nlohmann::json& report);

/// The timeline of one run over [0, span_ns] relative ns (span_ns ≥ tl.duration_ns; several runs
/// drawn with one span share a scale): a lane group per device and per host thread with their
/// tracks (compute, transfers, weight swaps, memory, hooks, compiled regions, graph breaks,
/// steps, ...; nesting drawn to 3 levels), lane labels, a time axis in ms. Events narrower than
/// a pixel merge into blocks ("N events"); the merge width grows until the document holds at
/// most `max_elements` SVG elements (so a run of millions of events stays a small file).
/// Device groups without any event are left out.
std::string timeline_svg(const ui::RunTimeline& tl, int64_t span_ns, size_t max_elements = 20000);

/// The runs drawn when none are named: the first verdict's compiled runs (report["verdicts"],
/// facts/verdicts.h: torch engine first, the first policy above the second); without a verdict,
/// in the first scenario one compiled run (mode not eager, not fullgraph, preferably completed)
/// per policy, all of the engine of the first such run.
std::vector<int64_t> default_timeline_runs(const nlohmann::json& report);

/// The compare chart (when any run has a latency) and the timelines of `runs`
/// (default_timeline_runs(report) when empty) on one shared time scale, read from `rd`.
/// Throws std::invalid_argument naming a run id the report does not hold, and the reader's errors.
std::vector<ReportPicture> report_pictures(const storage::CaptureReader& rd, const nlohmann::json& report,
                                           std::vector<int64_t> runs);

/// `report --assets DIR`: writes each picture as DIR/<file> (creating DIR) and returns the
/// Markdown that shows them — a "pictures" section of image links relative to the folder of
/// `markdown_path`. Refuses (std::invalid_argument, before writing anything) a picture path that
/// is the capture `capture_path` or a file of its `models` (model_folders), or a DIR that is an
/// existing non-folder; throws std::runtime_error when a file cannot be written.
std::string write_picture_assets(const std::vector<ReportPicture>& pictures, const std::string& dir,
                                 const std::string& markdown_path, const std::string& capture_path,
                                 const std::vector<std::filesystem::path>& models = {});

}  // namespace hs::reports
