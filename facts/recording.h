// What recording cost the generate a torch engine run's timeline shows. The torch engine times
// its measured generates unrecorded and then runs one more generate under torch.profiler with
// the hook ranges (the one its trace, so its timeline, holds): that generate's wall time over
// the median of the measured ones says how much longer every duration on the timeline is than
// the run the latency tables time. report.json, the report's latency and runs tables, the
// viewer's timeline header, `stats`, `explain` and the Chrome export read it from here (catalogue
// key `recording_overhead`); a run without it shows none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace hs::facts {

struct RecordingOverhead {
  double profiled_ms = 0;          ///< results.profiled_run.generate_ms: the recorded generate's wall time
  double unrecorded_median_ms = 0; ///< median of results.generate_ms: the measured generates' wall times
  int64_t unrecorded_n = 0;        ///< how many measured generates
  double ratio = 0;                ///< profiled_ms / unrecorded_median_ms
};

/// The figure from a run's RUNS.results; nullopt where it has no profiled generate or no
/// measured generate beside it (a LibTorch engine run, an import, a profiled program: nothing ran
/// unrecorded), or where either time is missing, not a number or not positive. Never throws.
std::optional<RecordingOverhead> recording_overhead(const nlohmann::json& results);

/// "1.27×" (two decimals): how every view writes the ratio.
std::string recording_overhead_text(const RecordingOverhead& o);

/// "130.00 ms recorded ÷ 100.00 ms, the median of 3 unrecorded generates": the two times the
/// ratio divides, as the views that explain it write them.
std::string recording_overhead_detail(const RecordingOverhead& o);

}  // namespace hs::facts
