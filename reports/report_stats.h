// The report's "where the time goes" table, from the per-run "stats" of the report JSON
// (reports/stats.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hs::reports {

/// Markdown: one row per eager or compiled run (fullgraph and incomplete runs left out) of each
/// engine, from its `stats.totals`: hook time (union of the hook spans, ms, and calls),
/// compiler-disabled time (ms, entries), transfer bytes and time, weight-onload bytes and time,
/// with "–" where nothing was recorded. `runs` is the report's "runs" array; "" when no run has
/// stats (a report JSON from before they existed).
std::string render_where_time_goes(const nlohmann::json& runs);

}  // namespace hs::reports
