// "where the time goes": the run totals of reports/stats.h as one Markdown table.
#include "reports/report_stats.h"

#include <cstdio>
#include <set>
#include <sstream>

namespace hs::reports {

using nlohmann::json;

namespace {

std::string ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string bytes_h(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  for (; b >= 1024 && i < 4; ++i) b /= 1024;
  char buf[32];
  std::snprintf(buf, sizeof buf, i ? "%.1f %s" : "%.0f %s", b, unit[i]);
  return buf;
}

// "12.3 (2013)": ms and how many; "–" when there were none.
std::string time_cell(const json& t, const char* ns_key, const char* count_key) {
  const int64_t n = t.value(count_key, int64_t{0});
  if (n == 0) return "–";
  return ms(t.value(ns_key, int64_t{0})) + " (" + std::to_string(n) + ")";
}

// "1.5 MiB in 3.2 ms (0.49 GB/s)"; "–" when there were none.
std::string bytes_cell(const json& t, const char* count_key, const char* bytes_key, const char* ns_key) {
  if (t.value(count_key, int64_t{0}) == 0) return "–";
  const int64_t bytes = t.value(bytes_key, int64_t{0}), ns = t.value(ns_key, int64_t{0});
  std::string cell = bytes_h(static_cast<double>(bytes)) + " in " + ms(ns) + " ms";
  if (ns > 0 && bytes > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.2f GB/s)", static_cast<double>(bytes) / static_cast<double>(ns));
    cell += buf;
  }
  return cell;
}

}  // namespace

std::string render_where_time_goes(const json& runs) {
  std::ostringstream md;
  bool header = false;
  auto listed = [](const json& r) {
    return r.contains("stats") && r["stats"].is_object() && !r.value("fullgraph", false) &&
           r.value("status", "") != "incomplete";
  };
  // What "summed over what it recorded" means for each engine the table lists, and only those:
  // a profile-only capture has no generate to speak of.
  std::set<std::string> engines;
  for (const auto& r : runs)
    if (listed(r)) engines.insert(r.value("engine", "libtorch"));  // a file from before engines were named: libtorch
  std::string what;
  for (const auto& [engine, text] : std::initializer_list<std::pair<const char*, const char*>>{
           {"libtorch", "a libtorch run every recorded generate, warm-ups and measured ones, prefill and decode, the "
                        "interleaved eager generates left out"},
           {"torch", "a torch run its one profiled generate"},
           {"profile", "a profiled program its capture ranges"}})
    if (engines.count(engine)) what += (what.empty() ? ": " : "; ") + std::string(text);
  for (const auto& r : runs) {
    if (!listed(r)) continue;
    if (!header)
      md << "\n### where the time goes (per run, summed over what it recorded" << what
         << "; `hookscope stats FILE` has the breakdown)\n\n"
            "| engine | scenario | policy | mode | hook time, ms (calls) | compiler-disabled, ms (entries) | "
            "transfers | weight onloads |\n|---|---|---|---|---|---|---|---|\n";
    header = true;
    const json& t = r["stats"].value("totals", json::object());
    // A torch run that compiled its hooks into the graph (nothing disabled them) has no hook
    // ranges of its own: say so rather than print an empty cell that reads "free".
    const bool traced_hooks = r.value("engine", "") == "torch" && r.value("mode", "") != "eager" &&
                              t.value("hook_calls", int64_t{0}) == 0;
    md << "| " << r.value("engine", "") << " | " << r.value("scenario", "") << " | " << r.value("policy", "") << " | "
       << r.value("mode", "") << " | "
       << (traced_hooks ? std::string("– (traced into the compiled graph: no ranges of their own)")
                        : time_cell(t, "hook_busy_ns", "hook_calls") +
                              (t.value("hook_compile_ns", int64_t{0}) > 0
                                   ? "; besides " + ms(t["hook_compile_ns"].get<int64_t>()) + " ms of Dynamo compiling inside them"
                                   : std::string()))
       << " | "
       << time_cell(t, "disabled_busy_ns", "disabled_entries") << " | "
       << bytes_cell(t, "transfers", "transfer_bytes", "transfer_ns")
       // Calls that moved nothing (a torch-engine send_to_device on one device) are not transfers.
       << (t.value("empty_transfer_calls", int64_t{0}) > 0
               ? "; " + std::to_string(t["empty_transfer_calls"].get<int64_t>()) + " calls moved nothing (" +
                     ms(t.value("empty_transfer_ns", int64_t{0})) + " ms)"
               : std::string())
       << " | "
       << bytes_cell(t, "onloads", "onload_bytes", "onload_ns") << " |\n";
  }
  return md.str();
}

}  // namespace hs::reports
