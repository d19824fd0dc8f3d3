#include "importers/dynamo_summary.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "importers/dynamo_text.h"
#include "output/text.h"
#include "storage/bounded_json.h"

using nlohmann::json;

namespace hs::importers {

namespace {

using storage::SharedDynamoCompileRow;
using storage::SharedDynamoGraphBreakRow;
using storage::SharedDynamoRecompileRow;

json opt(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json text(std::string_view s) { return output::cut_text(s, kMaxDynamoText); }
json text_or_null(std::string_view s) { return s.empty() ? json(nullptr) : text(s); }

/// Groups keep their first appearance's position: most frequent first, then log order.
void sort_by_count(json& groups) {
  std::stable_sort(groups.begin(), groups.end(),
                   [](const json& a, const json& b) { return a["count"].get<int64_t>() > b["count"].get<int64_t>(); });
}

/// Counts `c` into `calls` ([{"callee", "site", "count"}], in order of first appearance).
void add_module_call(json& calls, const ModuleCall& c) {
  if (c.empty()) return;
  for (json& m : calls)
    if (m["callee"] == c.callee && m["site"] == c.site) {
      m["count"] = m["count"].get<int64_t>() + 1;
      return;
    }
  calls.push_back({{"callee", c.callee}, {"site", c.site}, {"count", 1}});
}

json break_reasons(const std::vector<SharedDynamoGraphBreakRow>& breaks) {
  // Grouped by views of the whole texts: the rows' string tables, and each distinct reason
  // without its addresses, made once per string (a reason is never copied per break).
  std::map<const void*, std::string> cleaned;
  using Key = std::tuple<std::string_view, std::string_view, std::string_view, std::string_view>;
  std::map<Key, size_t> index;
  json groups = json::array();
  for (const SharedDynamoGraphBreakRow& b : breaks) {
    auto [r, made] = cleaned.try_emplace(b.reason.key());
    if (made) r->second = without_addresses(b.reason);
    const std::string_view reason = r->second;
    const Key key{b.gb_code, b.gb_type, reason, b.user_frame};
    auto [it, fresh] = index.try_emplace(key, groups.size());
    if (fresh)
      groups.push_back({{"reason", text(reason)}, {"gb_type", text(b.gb_type)}, {"gb_code", text_or_null(b.gb_code)},
                        {"user_frame", text_or_null(b.user_frame)}, {"count", 0}, {"frame_skipped", 0},
                        {"chained_gb_codes", json::array()}, {"compile_ids", json::array()},
                        {"module_calls", json::array()}});
    json& g = groups[it->second];
    g["count"] = g["count"].get<int64_t>() + 1;
    add_module_call(g["module_calls"], module_call(b.user_stack));
    g["frame_skipped"] = g["frame_skipped"].get<int64_t>() + (b.frame_skipped ? 1 : 0);
    g["compile_ids"].push_back(text(b.compile_id));
    const json chained = text(b.chained_gb_codes);
    if (!b.chained_gb_codes.empty() &&
        std::find(g["chained_gb_codes"].begin(), g["chained_gb_codes"].end(), chained) == g["chained_gb_codes"].end())
      g["chained_gb_codes"].push_back(chained);
  }
  sort_by_count(groups);
  return groups;
}

json recompile_reasons(const std::vector<SharedDynamoRecompileRow>& recompiles) {
  std::map<std::string_view, size_t> index;  // views into the rows' string tables
  json groups = json::array();
  for (const SharedDynamoRecompileRow& r : recompiles) {
    auto [it, fresh] = index.try_emplace(r.guard, groups.size());
    if (fresh) groups.push_back({{"guard", text(r.guard)}, {"count", 0}, {"compile_ids", json::array()}});
    json& g = groups[it->second];
    g["count"] = g["count"].get<int64_t>() + 1;
    g["compile_ids"].push_back(text(r.compile_id));
  }
  sort_by_count(groups);
  return groups;
}

/// Recompilations: one `recompile_reasons` artifact (one log line) each.
size_t recompilations(const std::vector<SharedDynamoRecompileRow>& rows) {
  std::vector<int64_t> lines;
  for (const SharedDynamoRecompileRow& r : rows) lines.push_back(r.log_line);
  std::sort(lines.begin(), lines.end());
  return static_cast<size_t>(std::unique(lines.begin(), lines.end()) - lines.begin());
}

/// Why a skipped frame runs eagerly: the last break of its failure, or Dynamo's skip.
json skipped_frame(const SharedDynamoCompileRow& c) {
  std::string reason = "Dynamo skipped the frame (nothing to compile in it)";
  if (c.status == "failed") {
    const std::vector<GraphBreakMessage> messages = parse_graph_break_messages(c.fail_reason);
    reason = messages.empty() || messages.back().gb_type.empty() ? c.fail_type.str() : messages.back().gb_type;
  }
  return {{"compile_id", text(c.compile_id)}, {"attempt", c.attempt},      {"code", text_or_null(c.code_name)},
          {"file", text_or_null(c.file)},     {"line", opt(c.line)},      {"status", text(c.status)},
          {"reason", text(reason)},           {"gb_code", text_or_null(c.fail_gb_code)}};
}

// A compile's restart reasons: a JSON array the importer wrote into the capture, read back
// bounded (storage/bounded_json.h); anything else is a damaged file, named with its run.
json restart_reasons(const storage::CaptureReader& reader, int64_t run, const SharedDynamoCompileRow& c) {
  if (c.restart_reasons.empty()) return json::array();
  try {
    json reasons = storage::parse_json_bounded(c.restart_reasons, "capture " + reader.path().string() + ": run " +
                                                                      std::to_string(run) + ": compile " +
                                                                      output::cut_text(c.compile_id, kMaxDynamoText) +
                                                                      ": DYNAMO_COMPILES.restartReasonsId");
    for (json& r : reasons)
      if (r.is_string()) r = text(r.get_ref<const std::string&>());
    return reasons;
  } catch (const storage::JsonError& e) {
    throw storage::CaptureError(reader.path(), std::string(e.what()) + "; the file is damaged");
  }
}

json compile_entry(const storage::CaptureReader& reader, int64_t run, const SharedDynamoCompileRow& c) {
  return {{"compile_id", text(c.compile_id)},
          {"attempt", c.attempt},
          {"status", text(c.status)},
          {"code", text_or_null(c.code_name)},
          {"file", text_or_null(c.file)},
          {"line", opt(c.line)},
          {"guard_count", opt(c.guard_count)},
          {"graph_op_count", opt(c.graph_op_count)},
          {"graphs", c.graphs},
          {"compile_time_s", c.compile_ns ? json(static_cast<double>(*c.compile_ns) / 1e9) : json(nullptr)},
          {"fail_type", text_or_null(c.fail_type)},
          {"fail_gb_code", text_or_null(c.fail_gb_code)},
          {"restart_reasons", restart_reasons(reader, run, c)}};
}

}  // namespace

json dynamo_summary(const storage::CaptureReader& reader, int64_t run) {
  storage::StringTables strings;  // what the rows' texts point into: each held once
  const auto compiles = reader.shared_rows<SharedDynamoCompileRow>(run, strings);
  const auto breaks = reader.shared_rows<SharedDynamoGraphBreakRow>(run, strings);
  const auto recompiles = reader.shared_rows<SharedDynamoRecompileRow>(run, strings);
  json statuses = json::object(), skipped = json::array(), limit_frames = json::array(), ids = json::array();
  int64_t graphs = 0;
  for (const SharedDynamoCompileRow& c : compiles) {
    const std::string status = output::cut_text(c.status, kMaxDynamoText);
    statuses[status] = statuses.value(status, 0) + 1;
    graphs += c.graphs;
    if (c.status == "skipped" || c.status == "failed") skipped.push_back(skipped_frame(c));
    if (is_recompile_limit(c.fail_gb_code, c.fail_reason))
      limit_frames.push_back({{"compile_id", text(c.compile_id)}, {"code", text_or_null(c.code_name)},
                              {"file", text_or_null(c.file)}, {"line", opt(c.line)}});
    ids.push_back(compile_entry(reader, run, c));
  }
  return {{"compiles", compiles.size()},
          {"statuses", statuses},
          {"graph_count", graphs},
          {"graph_break_count", std::max<int64_t>(graphs - 1, 0)},
          {"graph_breaks", breaks.size()},
          {"break_reasons", break_reasons(breaks)},
          {"frames_skipped", skipped.size()},
          {"skipped_frames", skipped},
          {"recompiles", recompilations(recompiles)},
          {"recompile_guards", recompiles.size()},
          {"recompile_reasons", recompile_reasons(recompiles)},
          {"recompile_limit_hits", limit_frames.size()},
          {"recompile_limit_frames", limit_frames},
          {"compile_ids", ids}};
}

}  // namespace hs::importers
