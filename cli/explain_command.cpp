// `hookscope explain`: one run's graph breaks, in the shape torch._dynamo.explain prints, with
// identical reasons grouped and counted. A torch-engine or imported run shows Dynamo's own
// records (gb codes, frames skipped, recompiles); a LibTorch-engine run its disabled-scope
// entries under their own name.
#include <cctype>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/explain_command.h"
#include "cli/cli_util.h"
#include "cli/report_command.h"
#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/iterations.h"
#include "facts/profile_verdicts.h"
#include "facts/recording.h"
#include "importers/dynamo_summary.h"
#include "storage/capture_reader.h"
#include "storage/capture_settings.h"
#include "storage/run_results.h"
#include "output/text.h"
#include "reports/stats.h"

namespace hs::cli {

using nlohmann::json;

namespace {

struct ExplainArgs {
  std::string file;
  int64_t run_id = 0;
  std::optional<int64_t> run;  ///< set from run_id when --run was given (any value: a bad id is an error)
  bool json = false;
};

std::string status_name(tracer::RunStatus s) {
  return s == tracer::RunStatus::Complete ? "complete" : s == tracer::RunStatus::Failed ? "failed" : "incomplete";
}

// "complete", or what the run's result says when the capture completed but the run did not
// (a fullgraph run that raised is a result: "fullgraph raised").
std::string outcome_of(const storage::RunRecord& r) {
  if (r.status != tracer::RunStatus::Complete) return status_name(r.status);
  const auto it = r.results.find("status");
  const std::string s = it != r.results.end() && it->is_string() ? it->get<std::string>() : "ok";
  if (s == "ok") return "complete";
  return r.fullgraph ? "complete, fullgraph raised" : "complete, " + s;
}

// The LibTorch engine's break records grouped by (reason, function) with their modules.
json group_libtorch_reasons(const json& reasons) {
  std::map<std::pair<std::string, std::string>, json> groups;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& b : reasons) {
    const std::pair key{b.value("reason", ""), b.value("function", "")};
    auto [it, fresh] = groups.try_emplace(key, json{{"reason", key.first}, {"function", key.second}, {"count", 0}, {"modules", json::array()}});
    if (fresh) order.push_back(key);
    it->second["count"] = it->second["count"].get<int64_t>() + 1;
    it->second["modules"].push_back(b.value("module", "").empty() ? "<root>" : b.value("module", ""));
  }
  json out = json::array();
  for (const auto& k : order) out.push_back(groups[k]);
  return out;
}

// The run's explain document: what --json prints and the text is made from. Every figure is a
// fact of facts/breaks.h under its own name (the same numbers report, stats and view show).
json explain_doc(const storage::CaptureReader& rd, const storage::RunRecord& rec) {
  const json& r = rec.results;
  json doc{{"run", rec.id}, {"scenario", rec.scenario}, {"policy", rec.policy}, {"mode", rec.mode},
           {"fullgraph", rec.fullgraph}, {"engine", rec.engine}, {"status", outcome_of(rec)},
           {"error", r.contains("error") ? r["error"] : json(nullptr)}};
  // A run that failed before it stored results (an import whose file was refused): RUNS.error.
  if (!doc["error"].is_string() && rec.status == tracer::RunStatus::Failed && !rec.error.empty()) doc["error"] = rec.error;
  json f = facts::break_facts(rd, rec);
  const std::string source = f["breaks_source"];
  doc["source"] = source == "log" ? "dynamo" : source;
  doc["counts_from"] = source == "dynamo" ? "torch._dynamo.explain" : source;
  for (auto& [k, v] : f.items()) doc[k] = v;
  if (source == "dynamo" || source == "log") {
    const json dyn = importers::dynamo_summary(rd, rec.id);
    for (const char* k : {"skipped_frames", "recompile_reasons", "compile_ids"}) doc[k] = dyn[k];
  } else if (source == "none") {
    doc["break_reasons"] = json::array();
  } else if (r.contains("break_reasons")) {
    doc["break_reasons"] = group_libtorch_reasons(r["break_reasons"]);
  } else {
    // A run without the engine's results (imported from a `hookscope export` trace): its
    // recorded disabled-scope entries over the whole run stand in for one forward's, and say so.
    json rows = json::array();
    for (const auto& b : rd.graph_breaks(rec.id)) rows.push_back({{"reason", b.reason}, {"function", b.function}, {"module", b.module}});
    doc["break_reasons"] = group_libtorch_reasons(rows);
    doc["break_reasons_from"] = "recorded";
  }
  if (doc["source"] == "libtorch") doc["recorded_disabled_scopes"] = rd.count("DISABLED_SCOPES", rec.id);
  if (rec.engine == "profile") {  // the program hookscope profile ran, and its iterations
    for (const char* k : {"command", "exit_status", "stderr_tail"})
      if (r.contains(k)) doc[k] = r[k];
    doc["iterations"] = facts::iteration_figures(facts::iterations(rd, rec.id));
  }
  // What recording cost the generate the run's timeline shows (facts/recording.h), as
  // report.json has it: null where nothing ran unrecorded beside it.
  const auto overhead = facts::recording_overhead(r);
  doc["recording_overhead"] = overhead ? json(overhead->ratio) : json(nullptr);
  return doc;
}

std::string num(const json& d, const char* k) {
  return d.contains(k) && d[k].is_number() ? std::to_string(d[k].get<int64_t>()) : std::string("-");
}

// A name from the capture as the listing shows it: on one line (a newline in it cannot fake a
// line), inert on a terminal, cut as stats and the report cut it (a name of megabytes in an
// edited capture is not printed whole).
std::string shown_name(const std::string& s) {
  return output::terminal_text(reports::shortened_text(s, reports::kMaxStatsCell), false);
}

// One break reason as explain prints it: gb code and type, the reason indented under it, the
// user frame, or the LibTorch engine's function and modules.
void print_reason(const json& b, int i, std::ostream& out) {
  const auto name = [](const json& v) { return shown_name(v.is_string() ? v.get<std::string>() : v.dump()); };
  out << "  Break Reason " << i << " (x" << b.value("count", int64_t{1}) << "):\n";
  if (b.contains("gb_code") || b.contains("gb_type"))
    out << "    " << name(b.value("gb_code", json(""))) << " " << name(b.value("gb_type", json(""))) << "\n";
  // Dynamo's reasons run over several lines (explanation, hints, a link): indented under it.
  std::string reason = b.value("reason", "");
  for (size_t at = reason.find('\n'); at != std::string::npos; at = reason.find('\n', at + 7)) reason.replace(at, 1, "\n      ");
  out << "    Reason: " << reason << "\n";
  if (b.contains("user_frame") && !b["user_frame"].is_null()) out << "    User frame: " << name(b["user_frame"]) << "\n";
  if (b.contains("function") && !b["function"].is_null()) out << "    Function: " << name(b["function"]) << "\n";
  if (b.contains("modules") && !b["modules"].empty()) {
    const auto& m = b["modules"];
    out << "    Modules: " << name(m[0]);
    if (m.size() > 1) out << " … " << name(m.back()) << " (" << m.size() << ")";
    out << "\n";
  }
}

void print_reasons(const std::string& title, const json& reasons, std::ostream& out) {
  out << title << (reasons.empty() ? ": none\n" : ":\n");
  int i = 0;
  for (const auto& b : reasons) print_reason(b, ++i, out);
}

void print_doc(const json& d, std::ostream& out) {
  // Names on one line each (terminal_text without lines): a newline in one cannot fake a line.
  const auto name = [](const json& v) { return shown_name(v.is_string() ? v.get<std::string>() : v.dump()); };
  out << "Run " << d["run"] << ": " << name(d["scenario"]) << ", policy " << name(d["policy"]);
  if (!d["mode"].get<std::string>().empty()) out << ", mode " << name(d["mode"]);
  out << (d["fullgraph"].get<bool>() ? ", fullgraph=True" : "") << " (" << name(d["engine"]) << " engine)\n";
  if (d.contains("command")) {
    const std::string cmd = facts::program_command(d);
    out << "Command: " << name(cmd) << "  (exit status " << num(d, "exit_status") << ")\n";
  }
  if (d.contains("iterations") && d["iterations"]["ms"].is_object()) {
    char median[32];
    std::snprintf(median, sizeof median, "%.2f", d["iterations"]["ms"]["median"].get<double>());
    out << "Iterations (" << d["iterations"]["source"].get<std::string>() << "s, the export's ProfilerStep#N): "
        << num(d["iterations"], "count") << ", median " << median << " ms\n";
  }
  if (d["error"].is_string()) out << "Error: " << d["error"].get<std::string>() << "\n";
  const std::string from = d.value("counts_from", "");
  if (from == "torch._dynamo.explain") {
    out << "Graph Count: " << num(d, "graph_count") << "\nGraph Break Count: " << num(d, "graph_break_count")
        << "  (torch._dynamo.explain of one forward)\n";
    print_reasons("Break Reasons (torch._dynamo.explain of that forward, identical ones grouped)", d["break_reasons"], out);
  } else if (from == "log") {
    out << "Graphs − 1 in the log: " << num(d, "log_graph_break_count")
        << "  (from the compile log: one forward's graph_break_count only if the log holds one)\n";
  } else if (from == "none") {
    out << (d["mode"] == "eager" ? "No graph breaks: an eager run compiles nothing\n"
                                 : "No break figures: the run holds no torch._dynamo.explain, no compile log and no "
                                   "LibTorch-engine regions (an imported trace carries none of them)\n");
  } else {
    out << "Captured Regions: " << num(d, "captured_regions") << "\nDisabled-Scope Entries: "
        << num(d, "disabled_scope_entries")
        << "  (one captured forward; LibTorch engine: not Dynamo's graph_break_count; capture with --engine torch for "
           "Dynamo's)\n";
    if (d.contains("recorded_disabled_scopes"))
      out << "Compiler-disabled scopes entered over the whole run (DISABLED_SCOPES, eager runs too): "
          << num(d, "recorded_disabled_scopes") << "\n";
    print_reasons(d.contains("break_reasons_from")
                      ? "Break Reasons (the run's recorded disabled-scope entries over the whole run, identical ones grouped)"
                      : "Break Reasons (identical ones grouped)",
                  d["break_reasons"], out);
    out << "Disabled-scope entries inside captured regions over the whole run (GRAPH_BREAKS: prefill and every "
           "decode step): "
        << num(d, "recorded_disabled_scope_entries") << "\n";
  }
  if (from == "torch._dynamo.explain" || from == "log") {
    if (d["recompiles"].is_number() || d["frames_skipped"].is_number())
      out << "Frames Skipped (ran eagerly): " << num(d, "frames_skipped") << "\nRecompiles: " << num(d, "recompiles")
          << "\nRecompile Limit Hits: " << num(d, "recompile_limit_hits") << "\n";
    else  // an imported log: its own counts, under its own names
      out << "In the log: " << num(d, "log_frames_skipped") << " compiles skipped or failed (ran eagerly), "
          << num(d, "log_recompiles") << " recompile_reasons, " << num(d, "log_recompile_limit_hits")
          << " recompile-limit failures (Dynamo's own counters are not in a log)\n";
    if (d["log_compiles"].is_number()) {
      out << "Over the whole run (TORCH_TRACE log: every compile, recompiles for new shapes included): "
          << num(d, "log_graphs") << " graphs in " << num(d, "log_compiles") << " compiles, "
          << num(d, "log_graph_break_records") << " graph-break records\n";
      print_reasons("Graph-break records in the log (every compile of the run, identical ones grouped)",
                    d["log_break_reasons"], out);
    }
  }
}

// The run's recording_overhead under its catalogue label: a torch engine run's (or "not
// measured" when it has none), any other run's only where its results hold one.
void print_recording_overhead(const storage::RunRecord& rec, std::ostream& out) {
  const auto o = facts::recording_overhead(rec.results);
  if (!o && rec.engine != "torch") return;  // nothing ran unrecorded: no figure to speak of
  std::string label(facts::fact("recording_overhead").label);
  label[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(label[0])));
  if (o)
    out << label << ": " << facts::recording_overhead_text(*o) << "  (" << facts::recording_overhead_detail(*o)
        << "; the timeline's durations are about this much longer than the latency tables')\n";
  else
    out << label << ": not measured (the run holds no profiled generate beside measured ones)\n";
}

int run_explain(const ExplainArgs& a) {
  storage::CaptureReader rd(a.file);
  (void)storage::capture_settings(rd);  // damaged settings: refused as by every reading command
  auto runs = rd.runs();
  if (runs.empty()) throw std::invalid_argument(a.file + ": the capture holds no runs");
  if (!a.run) {
    if (a.json) {
      json list = json::array();
      for (const auto& r : runs)
        list.push_back({{"run", r.id}, {"scenario", r.scenario}, {"policy", r.policy}, {"mode", r.mode},
                        {"fullgraph", r.fullgraph}, {"engine", r.engine}, {"status", outcome_of(r)}});
      std::cout << output::json_text(list, 2) << "\n";
      return 0;
    }
    std::ostringstream out;
    out << "runs in " << a.file << " (pick one with --run ID):\n";
    for (const auto& r : runs)
      out << "  " << r.id << "  " << shown_name(r.engine) << (r.engine.empty() ? "" : " ") << shown_name(r.scenario) << " "
          << shown_name(r.policy) << " " << shown_name(r.mode)
          << (r.fullgraph ? " fullgraph" : "") << "  [" << outcome_of(r) << "]\n";
    std::cout << output::terminal_text(out.str());  // names from the capture: no escape sequence acts
    return 0;
  }
  const storage::RunRecord rec = rd.run(*a.run);
  if (rec.status == tracer::RunStatus::Incomplete && !a.json) {
    std::cout << "Run " << rec.id << ": incomplete (the capture stopped before this run ended)\n";
    return 0;
  }
  storage::check_run_results(rec.results, rd, rec.id);
  rd.check_rows(rec.id);
  json doc;
  try {
    doc = explain_doc(rd, rec);
  } catch (const json::exception& e) {  // a field of another type than hookscope writes
    throw storage::CaptureError(rd.path(), "capture " + a.file + ": run " + std::to_string(rec.id) +
                                               ": RUNS.results does not hold what hookscope writes there (" + e.what() +
                                               "); the file is damaged or was written by another program");
  }
  if (a.json) {
    std::cout << output::json_text(doc, 2) << "\n";
    return 0;
  }
  std::ostringstream out;
  print_doc(doc, out);
  print_recording_overhead(rec, out);
  std::cout << output::terminal_text(out.str());  // names and reasons from the capture and its log
  return 0;
}

}  // namespace

CLI::App* add_explain_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ExplainArgs>();
  auto* c = app.add_subcommand("explain", "One run's graph breaks, like torch._dynamo.explain (identical reasons grouped)");
  c->add_option("file", a->file, kCaptureFileHelp)->required();
  auto* run = c->add_option("--run", a->run_id, "Run id (omit to list the runs)");
  c->add_flag("--json", a->json, "Print the run's breaks (or the list of runs) as JSON");
  c->footer("Examples:\n  hookscope explain out/demo.sqlite\n  hookscope explain out/demo.sqlite --run 2\n"
            "  hookscope explain out/demo.sqlite --run 2 --json");
  c->callback([a, run, &run_selected] {
    if (run->count() > 0) a->run = a->run_id;
    run_selected = [a] { return run_explain(*a); };
  });
  return c;
}

}  // namespace hs::cli
