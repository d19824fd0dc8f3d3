// `hookscope report`: the report JSON (schema 1) of a capture, with totals from SQL over the
// recorded events, and its Markdown (app/report.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/report_command.h"
#include "app/report.h"
#include "app/report_html.h"
#include "app/report_svg.h"
#include "importers/dynamo_summary.h"
#include "storage/capture_reader.h"

namespace hs::app {

using nlohmann::json;

namespace {

json device_id_json(const std::string& name) {
  if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) return std::stoll(name);
  return name;
}

// Dynamo's own records of the run (a torch-engine or imported run's compile log), and the
// counts the run result lacks taken from them.
void add_dynamo(const storage::CaptureReader& rd, int64_t run, json& r) {
  const json dyn = importers::dynamo_summary(rd, run);
  if (dyn.value("compiles", 0) == 0) return;
  r["dynamo"] = {{"compiles", dyn["compiles"]},           {"statuses", dyn["statuses"]},
                 {"graph_count", dyn["graph_count"]},     {"graph_break_count", dyn["graph_break_count"]},
                 {"frames_skipped", dyn["frames_skipped"]}, {"recompiles", dyn["recompiles"]},
                 {"recompile_limit_hits", dyn["recompile_limit_hits"]}};
  for (const char* k : {"graph_count", "graph_break_count", "frames_skipped", "recompiles", "recompile_limit_hits"})
    if (!r.contains(k) || r[k].is_null()) r[k] = dyn[k];
  if (!r.contains("break_reasons") || !r["break_reasons"].is_array() || r["break_reasons"].empty())
    r["break_reasons"] = dyn["break_reasons"];
}

}  // namespace

json build_report(const storage::CaptureReader& rd) {
  json report{{"schema", 1}, {"model", nullptr}, {"devices", json::array()}, {"runs", json::array()}};
  for (const auto& d : rd.devices()) {
    const auto& i = d.info;
    if (i.run_id) continue;
    std::string kind = i.kind == storage::DeviceKind::Cuda ? "cuda" : i.kind == storage::DeviceKind::Emulated ? "emulated" : "cpu";
    report["devices"].push_back({{"id", device_id_json(i.name)}, {"kind", kind}, {"backing", i.backing},
                                 {"max_memory", i.max_memory ? json(*i.max_memory) : json(nullptr)}});
  }
  for (const auto& rec : rd.runs()) {
    json r = rec.results.is_object() ? rec.results : json::object();
    if (report["model"].is_null() && r.contains("model")) report["model"] = r["model"];
    r.erase("model");
    r["id"] = rec.id;
    r["scenario"] = rec.scenario;
    r["policy"] = rec.policy;
    r["mode"] = rec.mode;
    r["fullgraph"] = rec.fullgraph;
    r["engine"] = rec.engine;
    if (!rec.label.empty()) r["label"] = rec.label;
    if (rec.status == tracer::RunStatus::Incomplete) {
      r["status"] = "incomplete";
      r["error"] = "the capture stopped before this run ended";
    } else if (rec.status == tracer::RunStatus::Failed && r.value("status", "") != "error") {
      r["status"] = "error";
      r["error"] = rec.error;
    }
    for (const char* k : {"error", "graph_count", "graph_break_count", "captured_regions", "disabled_scope_entries", "argmax_match", "logits_identical",
                          "logits_max_abs_diff", "logits_max_ulp", "params_on_meta_after", "latency_ms"})
      if (!r.contains(k)) r[k] = nullptr;
    if (!r.contains("break_reasons")) r["break_reasons"] = json::array();
    if (!r.contains("weight_devices")) r["weight_devices"] = json::array();
    if (!r.contains("new_tokens")) r["new_tokens"] = 0;
    // Totals straight from the recorded events (what the timeline shows).
    int64_t tb = 0, tn = 0, sb = 0, sn = 0;
    for (const auto& t : rd.transfer_sums(rec.id)) {
      tb += t.bytes;
      tn += t.count;
    }
    for (const auto& w : rd.weight_swap_sums(rec.id))
      if (w.onload) {
        sb += w.bytes;
        sn += w.count;
      }
    // Peak resident bytes per device: the capture stores it with the results; a run that never
    // ended has only its recorded counters.
    if (!r.contains("peak_memory_bytes") || !r["peak_memory_bytes"].is_object()) {
      json peaks = json::object();
      for (const auto& c : rd.memory_counters(rec.id))
        peaks[c.device] = std::max(peaks.value(c.device, int64_t{0}), c.bytes);
      r["peak_memory_bytes"] = peaks;
    }
    add_dynamo(rd, rec.id, r);
    r["recorded"] = {{"transfers", tn}, {"transfer_bytes", tb}, {"weight_onloads", sn}, {"weight_onload_bytes", sb},
                     {"graph_breaks", rd.graph_breaks(rec.id).size()}};
    report["runs"].push_back(r);
  }
  if (report["model"].is_null()) report["model"] = {{"id", "?"}, {"path", ""}, {"dtype", "?"}, {"params", 0}, {"bytes", 0}};
  return report;
}

namespace {

struct ReportArgs {
  std::string file, markdown, json_out, html, assets;
  std::vector<int64_t> timeline_runs;  ///< drawn in --html / --assets (empty: the default choice)
};

int run_report(const ReportArgs& a) {
  storage::CaptureReader rd(a.file);
  json report = build_report(rd);
  if (report["runs"].empty()) throw std::invalid_argument(a.file + ": the capture holds no runs");
  std::string md = render_markdown(report);
  // The capture is an input: never written over, whatever name or link points at it.
  for (const auto& [flag, out] : {std::pair{"--markdown", a.markdown}, std::pair{"--json", a.json_out},
                                   std::pair{"--html", a.html}})
    if (!out.empty() && std::filesystem::exists(out) && std::filesystem::equivalent(out, a.file))
      throw std::invalid_argument(std::string(flag) + ": " + out + " is the capture being reported; name another file");
  // Each output is written next to its name and renamed when complete.
  auto write = [](const std::string& path, const std::string& text) {
    const std::string tmp = path + ".partial";
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.close();
    if (!f) throw std::runtime_error("cannot write " + path);
    std::filesystem::rename(tmp, path);
  };
  // The pictures (compare chart, timelines): inline in the HTML, files beside the Markdown.
  std::vector<ReportPicture> pictures;
  if (!a.html.empty() || !a.assets.empty()) pictures = report_pictures(rd, report, a.timeline_runs);
  const std::string tables_md = md;
  if (!a.assets.empty()) md += write_picture_assets(pictures, a.assets, a.markdown, a.file);
  if (!a.markdown.empty()) write(a.markdown, md);
  if (!a.json_out.empty()) write(a.json_out, report.dump(2) + "\n");
  if (!a.html.empty())
    write(a.html, render_html(report, tables_md, pictures, std::filesystem::path(a.file).filename().string()));
  std::cout << md;
  return 0;
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ReportArgs>();
  auto* c = app.add_subcommand("report", "Markdown tables (and report.json) from a capture");
  c->add_option("file", a->file, "Capture written by `hookscope capture`")->required();
  auto* markdown = c->add_option("--markdown", a->markdown, "Also write the Markdown here");
  c->add_option("--json", a->json_out, "Write the report JSON (schema 1) here");
  c->add_option("--html", a->html,
                "Write one self-contained HTML page here: the tables with each check explained, the settings, every "
                "run, the compare chart and timelines as inline SVG (no scripts, nothing fetched)");
  c->add_option("--assets", a->assets, "With --markdown: write the chart and timelines as SVG files in this folder, linked from the Markdown")
      ->needs(markdown);
  c->add_option("--timeline-runs", a->timeline_runs,
                "Runs drawn as timelines by --html / --assets (default: one compiled run per policy of the first scenario)")
      ->delimiter(',');
  c->footer("Examples:\n  hookscope report out/demo.sqlite --markdown out/report.md --json out/report.json\n"
            "  hookscope report out/demo.sqlite --html out/report.html --timeline-runs 2,6\n"
            "  hookscope report out/demo.sqlite --markdown out/report.md --assets out/report-assets");
  c->callback([a, &run_selected] { run_selected = [a] { return run_report(*a); }; });
  return c;
}

}  // namespace hs::app
