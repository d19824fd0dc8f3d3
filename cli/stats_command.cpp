// `hookscope stats`: the reports of reports/stats.h over a capture's runs, as aligned tables, CSV
// (one file per report with -o, as nsys stats names them) or one JSON document.
#include "cli/stats_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/cli_util.h"
#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/recording.h"
#include "storage/capture_reader.h"
#include "storage/capture_settings.h"
#include "output/paths.h"
#include "output/text.h"

namespace hs::cli {

using nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string csv_cell(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (!v.is_string()) return v.dump();
  const std::string s = v.get<std::string>();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// A column's header and cell as people read them, the way `nsys stats` prints them: times in
// ns with thousands separators (means and medians to 0.1 ns), GB/s with two decimals.
std::string text_header(const std::string& column) {
  if (ends_with(column, "_ns")) return column.substr(0, column.size() - 3) + " (ns)";
  if (column == "gb_per_s") return "GB/s";
  return column;
}

// 1234567.25 -> "1,234,567" (decimals 0) or "1,234,567.3" (decimals 1).
std::string grouped(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  const std::string_view s = buf;
  const size_t first = s.front() == '-' ? 1 : 0;
  const size_t int_end = std::min(s.find('.'), s.size());
  std::string out(s.substr(0, first));
  for (size_t i = first; i < int_end; ++i) {
    out += s[i];
    if (i + 1 < int_end && (int_end - i - 1) % 3 == 0) out += ',';
  }
  out += s.substr(int_end);
  return out;
}

std::string text_cell(const std::string& column, const json& v) {
  char buf[64];
  if (ends_with(column, "_ns") && v.is_number()) return grouped(v.get<double>(), v.is_number_float() ? 1 : 0);
  if (v.is_number_float()) {
    std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
    return buf;
  }
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (const size_t nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl) + " ...";
    return s.empty() ? "-" : s;
  }
  return v.dump();
}

// The runs' recording_overhead (facts/recording.h) as a table of the text form, under the
// catalogue's label: every selected run, "not measured" where nothing ran unrecorded beside its
// profiled generate; no table when no run has the figure (a capture without torch engine runs).
std::optional<reports::StatsTable> recording_table(const storage::CaptureReader& rd,
                                                   const std::vector<reports::RunStats>& runs) {
  const facts::Fact& f = facts::fact("recording_overhead");
  reports::StatsTable t{"recording_overhead", std::string(f.label) + ": " + std::string(f.definition), "",
                        {"run", "engine", "cell", std::string(f.label), "recorded generate (ms)",
                         "unrecorded median (ms)", "unrecorded generates"},
                        {}};
  bool any = false;
  const auto ms = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return json(buf);
  };
  for (const reports::RunStats& r : runs) {
    const auto o = facts::recording_overhead(rd.run(r.run).results);
    any |= o.has_value();
    std::vector<json> row{r.run, reports::shortened_text(r.engine, reports::kMaxStatsCell),
                          reports::shortened_text(r.cell, reports::kMaxStatsCell)};
    if (o)
      row.insert(row.end(), {facts::recording_overhead_text(*o), ms(o->profiled_ms), ms(o->unrecorded_median_ms),
                             json(std::to_string(o->unrecorded_n))});
    else
      row.insert(row.end(), {"not measured", "", "", ""});
    t.rows.push_back(std::move(row));
  }
  if (!any) return std::nullopt;
  return t;
}

struct StatsArgs {
  std::string file, reports, format = "table", out;
  int64_t run_id = 0;
  std::optional<int64_t> run;  ///< set from run_id when --run was given
};



int run_stats(const StatsArgs& a) {
  storage::CaptureReader rd(a.file);
  (void)storage::capture_settings(rd);  // damaged settings: refused as by every reading command
  const std::vector<std::string> reports = output::split_list(a.reports);
  reports::StatsOptions opt{reports, a.run};
  const std::vector<reports::RunStats> runs = reports::compute_stats(rd, opt);
  if (runs.empty()) throw std::invalid_argument(a.file + ": the capture holds no complete run (pick one with --run ID)");
  const std::vector<reports::StatsTable> tables = reports::stats_tables(runs, reports);
  const auto models = output::model_folders(rd);
  output::refuse_output_in_model_folder("-o", a.out, models, "a run of " + a.file + " was made from it");
  if (a.format == "csv") {
    // -o /dev/stdout (whatever stdout is), a FIFO, a terminal: every table written there as to
    // stdout, not as OUT_<report>.csv files.
    struct stat st {};
    const bool to_stdout = a.out.empty() || a.out == "/dev/stdout";
    const bool stream = !to_stdout && ::stat(a.out.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
    std::string all;
    // OUT_<report>.csv: every name checked before the first is written.
    const std::string base = ends_with(a.out, ".csv") ? a.out.substr(0, a.out.size() - 4) : a.out;
    auto path_of = [&](const reports::StatsTable& t) { return base + "_" + t.name + ".csv"; };
    if (!to_stdout && !stream)
      for (const auto& t : tables) output::refuse_overwriting_input("-o", path_of(t), a.file, "read", models);
    for (const auto& t : tables) {
      const std::string csv = stats_csv(t);
      if (to_stdout || stream) {
        all += (all.empty() ? "" : "\n") + csv;
        continue;
      }
      output::write_output_file(path_of(t), csv);
      std::cerr << "wrote " << output::terminal_text(path_of(t)) << "\n";
    }
    if (stream) output::write_output_file(a.out, all);
    else if (isatty(STDOUT_FILENO)) std::cout << output::terminal_text(all);  // a name's ESC, U+202E: shown, inert
    else std::cout << all;  // the cells' bytes as the capture holds them
    return 0;
  }
  std::string text;
  if (a.format == "json") {
    json doc = stats_document(a.file, runs, tables);
    // Each run's break figures as every view names them (facts/breaks.h), beside its totals.
    for (size_t i = 0; i < runs.size(); ++i) {
      const json f = facts::break_facts(rd, rd.run(runs[i].run));
      json& b = doc["runs"][i]["breaks"] = json::object();
      for (const char* k : {"breaks_source", "graph_count", "graph_break_count", "recompiles", "frames_skipped",
                            "recompile_limit_hits", "log_graph_break_records", "disabled_scope_entries",
                            "captured_regions", "recorded_disabled_scope_entries"})
        b[k] = f[k];
      // What recording cost the run's timeline, as report.json has it (null: not measured).
      const auto o = facts::recording_overhead(rd.run(runs[i].run).results);
      doc["runs"][i]["recording_overhead"] = o ? json(o->ratio) : json(nullptr);
    }
    text = output::json_text(doc, 2) + "\n";
  } else {
    const auto overhead = recording_table(rd, runs);
    text = (overhead ? stats_text({*overhead}) : "") + stats_text(tables);
  }
  if (a.out.empty()) {
    std::cout << (a.format == "json" ? text : output::terminal_text(text));  // names from the capture and its logs
    return 0;
  }
  output::refuse_overwriting_input("-o", a.out, a.file, "read", models);
  output::write_output_file(a.out, text);
  return 0;
}

// A text table's cell is at most this many bytes (a longer name ends in "..."; the CSV and
// JSON forms keep it whole): one name of megabytes must not widen every row to megabytes.
constexpr size_t kMaxCell = 200;

std::string shortened(std::string s, size_t max) { return reports::shortened_text(std::move(s), max); }

}  // namespace

std::string stats_csv(const reports::StatsTable& table) {
  std::string out;
  auto line = [&out](const std::vector<json>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) out += ',';
      out += csv_cell(cells[i]);
    }
    out += '\n';
  };
  line(std::vector<json>(table.columns.begin(), table.columns.end()));
  for (const auto& row : table.rows) line(row);
  return out;
}

std::string stats_text(const std::vector<reports::StatsTable>& tables) {
  std::ostringstream out;
  for (const auto& t : tables) {
    out << "\n ** " << t.title << " (" << t.name << "):\n\n";
    if (t.rows.empty()) {
      out << "  (no rows: " << t.empty << ")\n";
      continue;
    }
    std::vector<std::vector<std::string>> cells(1);
    for (const auto& c : t.columns) cells[0].push_back(text_header(c));
    for (const auto& row : t.rows) {
      cells.emplace_back();
      for (size_t i = 0; i < row.size(); ++i)  // a name's newline or tab cannot break the table
        cells.back().push_back(shortened(output::terminal_text(text_cell(t.columns[i], row[i]), false), kMaxCell));
    }
    // Widths in characters (terminal_text leaves well-formed UTF-8): "é" takes one column, not two.
    const auto chars = [](const std::string& s) {
      return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xc0) != 0x80; }));
    };
    std::vector<size_t> width(t.columns.size(), 0);
    for (const auto& line : cells)
      for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], chars(line[i]));
    // Numbers right-aligned, text left-aligned (by the first row's type).
    for (size_t l = 0; l < cells.size(); ++l) {
      std::string line = " ";
      for (size_t i = 0; i < cells[l].size(); ++i) {
        const std::string& s = cells[l][i];
        const std::string pad(width[i] - chars(s), ' ');
        line += "  " + (t.rows[0][i].is_number() ? pad + s : s + pad);
      }
      out << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
      if (l == 0) {
        std::string rule = " ";
        for (size_t w : width) rule += "  " + std::string(w, '-');
        out << rule << "\n";
      }
    }
  }
  return out.str();
}

json stats_document(const std::string& file, const std::vector<reports::RunStats>& runs, const std::vector<reports::StatsTable>& tables) {
  json doc{{"file", file},
           {"units", {{"time", "ns"}, {"size", "bytes"}, {"rate", "GB/s (1e9 bytes/s)"}}},
           {"runs", json::array()},
           {"reports", json::object()}};
  for (const reports::RunStats& r : runs)
    doc["runs"].push_back({{"run", r.run}, {"engine", r.engine}, {"cell", r.cell}, {"scenario", r.scenario},
                           {"policy", r.policy}, {"mode", r.mode}, {"fullgraph", r.fullgraph}, {"status", r.status},
                           {"totals", reports::stats_totals_json(r.totals)}});
  // A row names its run by id only: the run's engine and cell (its label, whole) are in "runs",
  // once, not repeated on every row (a label of megabytes made gigabytes of JSON).
  for (const reports::StatsTable& t : tables) {
    json rows = json::array();
    for (const auto& row : t.rows) {
      json o = json::object();
      for (size_t i = 0; i < row.size(); ++i)
        if (t.columns[i] != "engine" && t.columns[i] != "cell") o[t.columns[i]] = row[i];
      rows.push_back(std::move(o));
    }
    doc["reports"][t.name] = std::move(rows);
  }
  return doc;
}

CLI::App* add_stats_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<StatsArgs>();
  auto* c = app.add_subcommand("stats", "Summary tables of a capture's runs, like nsys stats: hook time, device "
                                        "compute, transfers, weight swaps, compiler-disabled time, graph breaks");
  c->add_option("file", a->file, kCaptureFileHelp)->required();
  c->add_option("--report", a->reports, "Comma-separated reports (default: all)")->check(list_of(reports::stats_report_names()));
  c->add_option("--format", a->format, "table (times in ns, as nsys stats prints them), csv or json (times in ns, sizes in bytes)")
      ->check(one_of({"table", "csv", "json"}));
  auto* run = c->add_option("--run", a->run_id, "One run id, whatever its status (default: every complete run)");
  c->add_option("-o,--output", a->out,
                "Write here instead of stdout; csv: one file per report, OUT_<report>.csv (a .csv suffix of OUT "
                "dropped), or all of them into /dev/stdout or a FIFO");
  c->footer("Reports: " + output::join(reports::stats_report_names(), ", ") +
            "\nExamples:\n  hookscope stats out/demo.sqlite\n"
            "  hookscope stats out/demo.sqlite --report hook_time_by_device --run 2\n"
            "  hookscope stats out/demo.sqlite --report transfers,weight_swaps --format csv -o out/stats\n"
            "  hookscope stats out/demo.sqlite --format json > out/stats.json");
  c->callback([a, run, &run_selected] {
    if (run->count()) a->run = a->run_id;
    run_selected = [a] { return run_stats(*a); };
  });
  return c;
}

}  // namespace hs::cli
