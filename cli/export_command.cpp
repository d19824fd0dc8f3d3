#include "cli/export_command.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>

#include "cli/cli_util.h"
#include "exports/export_chrome.h"
#include "exports/export_csv.h"
#include "storage/capture_reader.h"
#include "storage/capture_settings.h"
#include "storage/run_results.h"
#include "output/paths.h"
#include "output/text.h"

namespace hs::cli {

namespace fs = std::filesystem;

namespace {

struct ExportArgs {
  std::string file;
  std::string run;  ///< a run id, "all", or "" (the only run)
  std::string format = "chrome";
  std::string tables;
  std::string out;
  bool gzip = false;
};

// "1-4" for consecutive ids, else "1, 3, 7".
std::string id_list(const std::vector<int64_t>& ids) {
  if (ids.empty()) return "none";
  if (ids.back() - ids.front() + 1 == static_cast<int64_t>(ids.size()) && ids.size() > 2)
    return std::to_string(ids.front()) + "-" + std::to_string(ids.back());
  std::string out;
  for (const int64_t id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

std::vector<int64_t> select_runs(const storage::CaptureReader& reader, const std::string& run) {
  std::vector<int64_t> ids;
  for (const auto& r : reader.runs()) ids.push_back(r.id);
  const std::string file = reader.path().string();
  if (ids.empty()) throw std::invalid_argument(file + " holds no runs");
  if (run == "all") return ids;
  if (run.empty()) {
    if (ids.size() == 1) return ids;
    throw std::invalid_argument(file + " holds " + std::to_string(ids.size()) + " runs (ids " + id_list(ids) +
                                "): give --run ID or --run all (`hookscope report " + file + "` says which is which)");
  }
  int64_t id = 0;
  const auto [p, ec] = std::from_chars(run.data(), run.data() + run.size(), id);
  if (ec != std::errc() || p != run.data() + run.size())
    throw std::invalid_argument("--run: '" + run + "' is neither a run id nor 'all'");
  if (std::find(ids.begin(), ids.end(), id) == ids.end())
    throw std::invalid_argument("--run " + run + ": " + file + " has no such run (its runs: " + id_list(ids) + ")");
  return {id};
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}


fs::path output_folder(const ExportArgs& a) {
  const fs::path dir(a.out);
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw std::invalid_argument("-o: " + a.out + " is a file; " + a.format + " export with these options writes a folder");
  return dir;
}

std::string listing(const std::map<std::string, int64_t>& counts, const char* unit) {
  std::string out;
  for (const auto& [k, n] : counts) out += (out.empty() ? "" : ", ") + k + " " + std::to_string(n) + unit;
  return out;
}

int export_chrome(const ExportArgs& a, const storage::CaptureReader& reader, const std::vector<int64_t>& runs) {
  for (const int64_t run : runs) {  // a damaged run fails before any file is written
    reader.check_rows(run);
    storage::check_run_results(reader.run(run).results, reader, run);  // its facts go into the trace
  }
  const bool one_file = a.run != "all";
  const bool gzip = a.gzip || ends_with(a.out, ".gz");
  std::vector<std::pair<int64_t, fs::path>> files;
  if (one_file) {
    fs::path out(a.out + (a.gzip && !ends_with(a.out, ".gz") ? ".gz" : ""));
    if (out.has_parent_path() && !fs::is_directory(out.parent_path()))
      throw std::invalid_argument("-o: folder " + out.parent_path().string() + " does not exist");
    if (fs::is_directory(out)) throw std::invalid_argument("-o: " + out.string() + " is a folder; name the trace file");
    files.emplace_back(runs.front(), out);
  } else {
    const fs::path dir = output_folder(a);
    for (const int64_t run : runs)
      files.emplace_back(run, dir / ("run-" + std::to_string(run) + (gzip ? ".json.gz" : ".json")));
  }
  const auto models = output::model_folders(reader);
  for (const auto& [run, path] : files)
    output::refuse_overwriting_input("-o", path, reader.path(), "exported", models, /*folder_made=*/!one_file);
  if (!one_file) fs::create_directories(a.out);
  for (size_t i = 0; i < files.size(); ++i) {
    exports::ChromeExportOptions o;
    o.gzip = gzip;
    o.rank = static_cast<int>(i);
    o.world_size = static_cast<int>(files.size());
    const exports::ChromeExportSummary s = exports::export_chrome_trace(reader, files[i].first, files[i].second, o);
    std::map<std::string, int64_t> slices;
    for (const auto& [cat, n] : s.by_category)
      if (cat.front() != '(') slices[cat] = n;
    std::fprintf(stderr, "[hookscope] wrote run %lld to %s: %lld events (%s)\n", static_cast<long long>(files[i].first),
                 output::terminal_text(files[i].second.string()).c_str(), static_cast<long long>(s.events),
                 listing(slices, "").c_str());
  }
  const fs::path first = files.front().second;
  const std::string folder = !one_file ? a.out : first.has_parent_path() ? first.parent_path().string() : ".";
  std::fprintf(stderr, "[hookscope] open it in https://ui.perfetto.dev or chrome://tracing; HTA: "
               "TraceAnalysis(trace_dir=\"%s\"); back into a capture: hookscope import TRACE -o NEW.sqlite\n",
               output::terminal_text(folder).c_str());
  return 0;
}

int export_csv_tables(const ExportArgs& a, const storage::CaptureReader& reader, const std::vector<int64_t>& runs) {
  const fs::path dir = output_folder(a);
  std::vector<std::string> tables;
  for (const auto& t : output::split_list(a.tables)) tables.push_back(exports::csv_table(t));
  const auto models = output::model_folders(reader);
  for (const auto& t : tables.empty() ? exports::csv_tables() : tables)
    for (const char* ext : {".csv", ".csv.gz"})
      output::refuse_overwriting_input("-o", dir / (t + ext), reader.path(), "exported", models, /*folder_made=*/true);
  const exports::CsvExportSummary s = exports::export_csv(reader, runs, tables, dir, a.gzip);
  std::fprintf(stderr, "[hookscope] wrote %zu table%s to %s: %s\n", s.files.size(), s.files.size() == 1 ? "" : "s",
               output::terminal_text(dir.string()).c_str(),
               s.rows.empty() ? "no event rows in the run" : listing(s.rows, " rows").c_str());
  return 0;
}

int run_export(const ExportArgs& a) {
  std::error_code ec;
  if (!fs::exists(a.file, ec) && !ec) throw std::invalid_argument("FILE: " + a.file + " does not exist");
  if (a.out.empty()) throw std::invalid_argument("-o: empty path");
  if (a.format == "chrome" && !a.tables.empty())
    throw std::invalid_argument("--tables selects CSV tables; a chrome trace holds every kind (use --format csv)");
  const storage::CaptureReader reader(a.file);
  (void)storage::capture_settings(reader);  // damaged settings: refused as by every reading command
  output::refuse_output_in_model_folder("-o", a.out, output::model_folders(reader), "a run of " + a.file + " was made from it");
  const std::vector<int64_t> runs = select_runs(reader, a.run);
  return a.format == "chrome" ? export_chrome(a, reader, runs) : export_csv_tables(a, reader, runs);
}

}  // namespace

CLI::App* add_export_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ExportArgs>();
  auto* c = app.add_subcommand(
      "export", "Write runs of a capture as a Chrome trace (Perfetto, chrome://tracing, HTA; Kineto's shape) or as CSV tables");
  c->add_option("file", a->file, kCaptureFileHelp)->required();
  c->add_option("--run", a->run, "Run id, or 'all' (default: the capture's only run)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            int64_t id = 0;
            const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
            return v == "all" || (ec == std::errc() && p == v.data() + v.size()) ? ""
                                                                                   : "'" + v + "' is neither a run id nor 'all'";
          },
          "ID|all"));
  c->add_option("--format", a->format, "chrome: one Trace Event Format JSON file per run; csv: one file per event table")
      ->check(one_of({"chrome", "csv"}))
      ->capture_default_str();
  c->add_option("--tables", a->tables,
                "csv: comma-separated tables (HOOK_EVENTS or hook_events, ...; default: every event table with rows)");
  c->add_option("-o,--out", a->out,
                "chrome: the trace file (.json; .json.gz is gzip), or a folder of run-ID.json files with --run all; "
                "csv: a folder of TABLE.csv files")
      ->required();
  c->add_flag("--gzip", a->gzip, "Compress with gzip (zlib): .json.gz / .csv.gz ('.gz' is appended to a chrome -o file)");
  c->footer("Examples:\n  hookscope export out/demo.sqlite --run 3 --format chrome -o out/run3.json\n"
            "  hookscope export out/demo.sqlite --run all --format chrome --gzip -o out/traces   (HTA: trace_dir=out/traces)\n"
            "  hookscope export out/demo.sqlite --run 3 --format csv --tables HOOK_EVENTS,TRANSFERS -o out/csv");
  c->callback([a, &run_selected] { run_selected = [a] { return run_export(*a); }; });
  return c;
}

}  // namespace hs::cli
