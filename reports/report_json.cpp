// The report JSON (schema 2) of a capture: its settings, devices and runs, each run's stored
// results with its speed-up verdict, totals by SQL over its events, peak memory and stats.
#include "reports/report_json.h"

#include <algorithm>

#include "facts/breaks.h"
#include "facts/recording.h"
#include "facts/catalogue.h"
#include "facts/iterations.h"
#include "facts/verdicts.h"
#include "measurement/verdict.h"
#include "reports/stats.h"
#include "storage/bounded_json.h"
#include "storage/capture_settings.h"
#include "storage/run_results.h"

namespace hs::reports {


using nlohmann::json;

namespace {

json device_id_json(const std::string& name) {
  if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) return std::stoll(name);
  return name;
}

// The run's graph-break facts (facts/breaks.h), each under its one name: Dynamo's where Dynamo
// gave them, the log's and the LibTorch engine's under their own.
void add_break_facts(const storage::CaptureReader& rd, const storage::RunRecord& rec, json& r) {
  json f = facts::break_facts(rd, rec);
  for (auto& [k, v] : f.items()) r[k] = std::move(v);  // nulls kept: not a merge patch
  r.erase("dynamo");
}

// Every fact's label, unit, source and definition (facts/catalogue.h), keyed by its field.
json definitions() {
  json d = json::object();
  for (const facts::Fact& f : facts::catalogue())
    d[std::string(f.key)] = {{"label", f.label}, {"unit", f.unit}, {"source", f.source}, {"definition", f.definition}};
  return d;
}

// The capture's settings (null for a file written before they were stored) with the versions
// every run recorded merged in: {"versions": {"torch": ["2.11.0"], ...}} lists each value seen.
json settings_of(const storage::CaptureReader& rd) {
  json settings = storage::capture_settings(rd);
  json versions = settings.contains("versions") && settings["versions"].is_object() ? settings["versions"] : json::object();
  for (const auto& rec : rd.runs()) {
    if (!rec.versions.is_object()) continue;
    for (const auto& [k, v] : rec.versions.items()) {
      if (!v.is_string() && !v.is_number()) continue;
      const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
      json& seen = versions[k];
      if (seen.is_string() && seen.get<std::string>() == text) continue;
      if (!seen.is_array()) seen = seen.is_null() ? json::array() : json::array({seen});
      if (std::find(seen.begin(), seen.end(), json(text)) == seen.end()) seen.push_back(text);
    }
  }
  for (auto& [k, v] : versions.items())
    if (v.is_array() && v.size() == 1) v = v[0];
  settings["versions"] = versions;
  return settings;
}

// The verdict of every compiled run against its eager baseline (measurement/verdict.h).
void add_verdicts(json& runs) {
  std::vector<const json*> ptrs;
  for (const auto& r : runs) ptrs.push_back(&r);
  const auto judged = measurement::judge_runs(ptrs);
  for (size_t i = 0; i < judged.size(); ++i)
    if (judged[i])
      runs[i]["speedup"] = {{"vs_eager", judged[i]->speedup},
                            {"verdict", measurement::verdict_name(judged[i]->verdict)},
                            {"why", judged[i]->why}};
}

}  // namespace

json report_run(const storage::CaptureReader& rd, const storage::RunRecord& rec) try {
  json r = rec.results.is_object() ? rec.results : json::object();
  storage::check_run_results(r, rd, rec.id);
  rd.check_rows(rec.id);
  r.erase("model");
  r["id"] = rec.id;
  // The cell's names key every table of the report, each shown once per table: cut as stats
  // cuts its cells, a name of megabytes (an edited capture, an import's flag) is never repeated.
  r["scenario"] = shortened_text(rec.scenario, kMaxStatsCell);
  r["policy"] = shortened_text(rec.policy, kMaxStatsCell);
  r["mode"] = shortened_text(rec.mode, kMaxStatsCell);
  r["fullgraph"] = rec.fullgraph;
  r["engine"] = shortened_text(rec.engine, kMaxStatsCell);
  if (!rec.label.empty()) r["label"] = rec.label;
  if (rec.status == tracer::RunStatus::Incomplete) {
    r["status"] = "incomplete";
    r["error"] = "the capture stopped before this run ended";
  } else if (rec.status == tracer::RunStatus::Failed && r.value("status", "") != "error") {
    r["status"] = "error";
    r["error"] = rec.error;
  }
  for (const char* k : {"error", "argmax_match", "logits_identical",
                        "logits_max_abs_diff", "logits_max_ulp", "params_on_meta_after", "prefill_ms",
                        "decode_ms_per_token", "tokens_per_s", "speedup"})
    if (!r.contains(k)) r[k] = nullptr;
  if (!r.contains("weight_devices")) r["weight_devices"] = json::array();
  if (!r.contains("new_tokens")) r["new_tokens"] = 0;
  // Peak resident bytes per device: the capture stores it with the results; a run that never
  // ended has only its recorded counters.
  if (!r.contains("peak_memory_bytes") || !r["peak_memory_bytes"].is_object()) {
    json peaks = json::object();
    for (const auto& c : rd.memory_counters(rec.id))
      peaks[c.device] = std::max(peaks.value(c.device, int64_t{0}), c.bytes);
    r["peak_memory_bytes"] = peaks;
  }
  add_break_facts(rd, rec, r);
  const auto overhead = facts::recording_overhead(r);
  r["recording_overhead"] = overhead ? json(overhead->ratio) : json(nullptr);
  // reports/stats.h: hook time per device, transfers, ... (per-module hook rows: `hookscope stats`).
  static const std::vector<std::string> kReportStats = {"hook_time_by_device", "device_compute", "transfers",
                                                        "weight_swaps", "compiler_disabled", "graph_breaks"};
  const RunStats stats = compute_stats(rd, {kReportStats, rec.id}).front();
  r["stats"] = stats_json(stats, kReportStats);
  // The recorded totals are the stats' (one computation): transfers that moved bytes, calls
  // that moved nothing apart, weight onloads.
  const StatsTotals& t = stats.totals;
  r["recorded"] = {{"transfers", t.transfers},          {"transfer_bytes", t.transfer_bytes},
                   {"empty_transfer_calls", t.empty_transfer_calls}, {"weight_onloads", t.onloads},
                   {"weight_onload_bytes", t.onload_bytes}};
  // A profiled program's iterations (facts/iterations.h), which its verdict times.
  if (rec.engine == "profile") r["iterations"] = facts::iteration_figures(facts::iterations(rd, rec.id));
  return r;
} catch (const json::exception& e) {  // a field of another type than hookscope writes
  throw storage::CaptureError(rd.path(), "capture " + rd.path().string() + ": run " + std::to_string(rec.id) +
                                             ": RUNS.results does not hold what hookscope writes there (" + e.what() +
                                             "); the file is damaged or was written by another program");
}

namespace {
/// The most bytes of the model's name or path the report shows (a path is at most 4096).
constexpr size_t kMaxModelText = 4096;
}  // namespace

json build_report(const storage::CaptureReader& rd) {
  json report{{"schema", 2}, {"model", nullptr}, {"settings", settings_of(rd)}, {"devices", json::array()},
              {"runs", json::array()}};
  std::string run_model;  // the first run's RUNS.model: what `import --model` names
  for (const auto& d : rd.devices()) {
    const auto& i = d.info;
    if (i.run_id) continue;
    std::string kind = i.kind == storage::DeviceKind::Cuda ? "cuda" : i.kind == storage::DeviceKind::Emulated ? "emulated" : "cpu";
    report["devices"].push_back({{"id", device_id_json(i.name)}, {"kind", kind}, {"backing", i.backing},
                                 {"max_memory", i.max_memory ? json(*i.max_memory) : json(nullptr)}});
  }
  for (const auto& rec : rd.runs()) {
    json r = report_run(rd, rec);
    if (report["model"].is_null() && rec.results.is_object() && rec.results.contains("model"))
      report["model"] = rec.results["model"];
    if (run_model.empty()) run_model = rec.model;
    report["runs"].push_back(std::move(r));
  }
  add_verdicts(report["runs"]);
  report["verdicts"] = facts::scenario_verdicts(report);
  report["definitions"] = definitions();
  if (report["model"].is_null()) {
    // Only runs without a model description (torch-engine or imported runs): the name the
    // capture was given, else the one a run was imported with.
    std::string given = report["settings"].value("model", "");
    if (given.empty()) given = run_model;
    given = shortened_text(given, kMaxModelText);
    std::string id = given;  // a folder's last component: "org/name/" is "name"
    while (id.size() > 1 && id.back() == '/') id.pop_back();
    id = std::filesystem::path(id).filename().string();
    // The dtype the runs ran (each records its own), else the one the capture asked for.
    json dtype = report["settings"].value("dtype", json("?"));
    for (const auto& r : report["runs"])
      if (r.contains("dtype") && r["dtype"].is_string()) {
        dtype = r["dtype"];
        break;
      }
    report["model"] = {{"id", id.empty() ? "?" : id}, {"path", given}, {"dtype", dtype}, {"params", nullptr},
                       {"bytes", nullptr}};
  }
  return report;
}

}  // namespace hs::reports
