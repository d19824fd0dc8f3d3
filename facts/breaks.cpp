#include "facts/breaks.h"

#include <map>

#include "importers/dynamo_summary.h"

namespace hs::facts {

using nlohmann::json;

namespace {

json number_or_null(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? *it : json(nullptr);
}

// The run's TORCH_TRACE log, summarised (importers/dynamo_summary.h); without its rows, the
// summary an imported `hookscope export` trace carried (RUNS.results "carried_log"); nulls
// without either.
void add_log(const storage::CaptureReader& rd, int64_t run, const json& res, json& f) {
  const json dyn = importers::dynamo_summary(rd, run);
  f["log_break_reasons"] = json::array();
  if (dyn.value("compiles", 0) == 0) {
    if (res.contains("carried_log") && res["carried_log"].is_object())
      for (const auto& [k, v] : res["carried_log"].items())
        if (f.contains(k)) f[k] = v;
    return;
  }
  f["log_compiles"] = dyn["compiles"];
  f["log_graphs"] = dyn["graph_count"];
  f["log_graph_break_records"] = dyn["graph_breaks"];
  f["log_graph_break_count"] = dyn["graph_break_count"];
  f["log_break_reasons"] = dyn["break_reasons"];
  f["log_statuses"] = dyn["statuses"];
  for (const char* k : {"recompiles", "frames_skipped", "recompile_limit_hits"}) f["log_" + std::string(k)] = dyn[k];
}

}  // namespace

json break_facts(const storage::CaptureReader& rd, const storage::RunRecord& rec) {
  static const json empty = json::object();
  const json& res = rec.results.is_object() ? rec.results : empty;
  json f;
  for (const char* k : {"graph_count", "graph_break_count", "recompiles", "frames_skipped", "recompile_limit_hits",
                        "log_compiles", "log_graphs", "log_graph_break_records", "log_graph_break_count", "log_statuses",
                        "log_recompiles", "log_frames_skipped", "log_recompile_limit_hits", "disabled_scope_entries",
                        "captured_regions", "guard_recompiles"})
    f[k] = nullptr;
  f["break_reasons"] = json::array();
  add_log(rd, rec.id, res, f);
  // A profiled program's run (`hookscope profile`) has only its imported log too: no explain, no
  // compile metrics of Dynamo's, so its figures keep the log's names as an import's do.
  const bool imported = rec.engine == "import" || rec.engine == "profile";
  // A file written before runs named their engine holds LibTorch-engine runs only, which then
  // stored their disabled-scope entries as "graph_break_count": they are read as what they are.
  const bool legacy = rec.engine.empty() && !res.contains("disabled_scope_entries") && res.contains("graph_break_count") &&
                      res["graph_break_count"].is_number();
  // Dynamo's names hold Dynamo's figures: explain's of one forward, only for a run that ran
  // explain (an imported log's graphs − 1 is log_graph_break_count, never graph_break_count).
  const bool explained =
      !imported && !legacy && res.contains("graph_break_count") && res["graph_break_count"].is_number();
  const bool libtorch =
      legacy || (!explained && res.contains("disabled_scope_entries") && res["disabled_scope_entries"].is_number());
  if (explained) {
    f["graph_count"] = number_or_null(res, "graph_count");
    f["graph_break_count"] = res["graph_break_count"];
  }
  // The engine's own: explain's of one forward, or the LibTorch engine's cuts (a refused
  // fullgraph run has cuts and no count: the first names where it stopped).
  if ((!imported || explained || libtorch) && res.contains("break_reasons") && res["break_reasons"].is_array())
    f["break_reasons"] = res["break_reasons"];
  if (libtorch) {
    f["disabled_scope_entries"] = legacy ? res["graph_break_count"] : res["disabled_scope_entries"];
    f["captured_regions"] = number_or_null(res, "captured_regions");
  }
  // Over the compiled run: the compile metrics the torch engine read (else, for a torch run
  // recorded before it read them, the log's). An imported log's counts stay under log_*: they
  // count a recompile-limit failure as a recompile and a skipped frame, which Dynamo's counters
  // do not, so Dynamo's names would read differently for the same run.
  for (const char* k : {"recompiles", "frames_skipped", "recompile_limit_hits"}) {
    const json mine = imported ? json(nullptr) : number_or_null(res, k);
    f[k] = !mine.is_null() || imported ? mine : f["log_" + std::string(k)];
  }
  // The LibTorch engine's emulated compiler: its own name (files written before it had one kept
  // it under "recompiles").
  if (libtorch) {
    f["guard_recompiles"] = res.contains("guard_recompiles") ? number_or_null(res, "guard_recompiles")
                                                              : number_or_null(res, "recompiles");
    f["recompiles"] = nullptr;
  }
  // A profiled program never has the LibTorch engine's rows: null, as its other figures that do
  // not apply (not a count of 0).
  f["recorded_disabled_scope_entries"] = rec.engine == "profile" ? json(nullptr) : json(rd.count("GRAPH_BREAKS", rec.id));
  if (explained) f["breaks_source"] = "dynamo";
  else if (libtorch || (f["recorded_disabled_scope_entries"].is_number() && f["recorded_disabled_scope_entries"] != 0))
    f["breaks_source"] = "libtorch";
  else if (!f["log_compiles"].is_null()) f["breaks_source"] = "log";
  else f["breaks_source"] = "none";
  return f;
}

std::string breaks_text(const json& r) {
  if (r.value("status", "") == "incomplete") return "incomplete";
  std::string recompiles;  // Dynamo's, or (†) the LibTorch engine's emulated compiler's
  for (const char* k : {"recompiles", "guard_recompiles"})
    if (const auto it = r.find(k); it != r.end() && it->is_number() && it->get<int64_t>() > 0)
      recompiles = " (" + std::to_string(it->get<int64_t>()) + (it->get<int64_t>() == 1 ? " recompile" : " recompiles") +
                   (std::string_view(k) == "recompiles" ? ")" : "†)");
  if (const auto it = r.find("graph_break_count"); it != r.end() && it->is_number())
    return std::to_string(it->get<int64_t>()) + recompiles;
  if (const auto it = r.find("disabled_scope_entries"); it != r.end() && it->is_number())
    return std::to_string(it->get<int64_t>()) + "†" + recompiles;
  // A run with only a compile log: the breaks it logged, as tlparse lists them (its graphs − 1
  // would count every recompile's graph as a break).
  if (const auto it = r.find("log_graph_break_records"); it != r.end() && it->is_number())
    return "log: " + std::to_string(it->get<int64_t>()) + " records" + recompiles;
  return "–";
}

std::optional<BreakSite> main_break_site(const json& r) {
  const auto it = r.find("break_reasons");
  if (it == r.end() || !it->is_array()) return std::nullopt;
  // Count per (function, gb code), first seen wins ties.
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  std::vector<std::pair<std::string, std::string>> order;
  for (const json& b : *it) {
    if (!b.is_object() || !b.contains("function") || !b["function"].is_string()) continue;
    const std::pair key{b["function"].get<std::string>(), b.contains("gb_code") && b["gb_code"].is_string()
                                                              ? b["gb_code"].get<std::string>()
                                                              : std::string()};
    const auto n = b.contains("count") && b["count"].is_number() ? b["count"].get<int64_t>() : int64_t{1};
    if (counts.emplace(key, 0).second) order.push_back(key);
    counts[key] += n;
  }
  std::optional<BreakSite> best;
  for (const auto& key : order)
    if (!best || counts[key] > best->count) best = BreakSite{key.first, key.second, counts[key]};
  return best;
}

}  // namespace hs::facts
