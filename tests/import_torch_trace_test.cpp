// The TORCH_TRACE importer against the real thing: tests/oracles/compile_log.py runs
// torch.compile (backend "eager") on a tiny Llama dispatched with accelerate's hooks, writes the
// structured log (one process, cells marked with `hookscope_cell` artifacts), runs tlparse on
// each cell's records and torch._dynamo.explain on the same model. The imported compile ids,
// graph breaks, failures and counts must be tlparse's and explain's.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "importers/dynamo_summary.h"
#include "importers/dynamo_text.h"
#include "importers/import_error.h"
#include "importers/md5.h"
#include "importers/torch_trace_log.h"
#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace hs;
using importers::ImportError;
using importers::TorchTraceLog;
using importers::TorchTraceOptions;
using importers::TorchTraceSummary;

namespace {

/// The oracle's folder (made once per build) and its facts.
struct CompileLog {
  fs::path dir;
  json facts;
  fs::path trace_dir() const { return dir / "torch_trace"; }
  fs::path tlparse(const std::string& cell) const { return dir / "tlparse" / cell; }
  fs::path cell_log(const std::string& cell) const { return dir / "cells" / (cell + ".log"); }
};

const CompileLog& compile_log() {
  static const CompileLog log = [] {
    CompileLog l;
    l.dir = test::cached_oracle("compile_log", "compile_log.py");
    l.facts = test::read_json(l.dir / "result.json");
    return l;
  }();
  return log;
}

TorchTraceLog read_cell(const std::string& cell, TorchTraceSummary* sum = nullptr) {
  TorchTraceOptions o;
  o.cell = cell;
  return importers::read_torch_trace(compile_log().trace_dir(), o, sum);
}

/// tlparse's directory key of a row: "[F/C]", "[F/C_A]".
std::string tlparse_key(const std::string& compile_id, int attempt) {
  return "[" + compile_id + (attempt ? "_" + std::to_string(attempt) : "") + "]";
}

/// compile_directory.json of a cell, without the records that name no compile ("[-/-]").
json compile_directory(const std::string& cell) {
  json dir = test::read_json(compile_log().tlparse(cell) / "compile_directory.json");
  dir.erase("[-/-]");
  return dir;
}

/// tlparse's break files of a cell, by compile key, in log order.
std::map<std::string, std::vector<std::string>> tlparse_breaks(const std::string& cell) {
  std::map<std::string, std::vector<std::string>> out;
  const json dir = compile_directory(cell);
  for (const auto& [key, entry] : dir.items())
    for (const json& a : entry["artifacts"])
      if (a["name"].get<std::string>().rfind("dynamo_graph_break_reason_", 0) == 0)
        out[key].push_back(test::read_file(compile_log().tlparse(cell) / a["url"].get<std::string>()));
  return out;
}

/// tlparse's failures_and_restarts.html as (key, failure type, first graph-break code) triples.
std::multiset<std::vector<std::string>> tlparse_failures(const std::string& cell) {
  const std::string html = test::read_file(compile_log().tlparse(cell) / "failures_and_restarts.html");
  std::multiset<std::vector<std::string>> out;
  for (size_t at = html.find("<tr> <td>"); at != std::string::npos; at = html.find("<tr> <td>", at + 1)) {
    const std::string row = html.substr(at, html.find("</tr>", at) - at);
    const size_t open = row.find("'>[") + 2, close = row.find("]</a>") + 1;
    const std::string type = row.find("RestartAnalysis") != std::string::npos ? "RestartAnalysis" : "Failure";
    const std::vector<std::string> codes = importers::graph_break_codes(row);
    out.insert({row.substr(open, close - open), type, codes.empty() ? "" : codes.front()});
  }
  return out;
}

std::string read_text(const fs::path& p) { return test::read_file(p); }
void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

/// A scratch folder holding `text` as a TORCH_TRACE log.
fs::path log_with(const std::string& name, const std::string& text) {
  const fs::path dir = test::scratch_dir("torch_trace_" + name);
  write_text(dir / "dedicated_log_torch_trace_test.log", text);
  return dir;
}

/// The ImportError message of reading `dir` (fails the test when it reads).
std::string import_error(const fs::path& dir, const std::string& cell = "") {
  TorchTraceOptions o;
  o.cell = cell;
  try {
    importers::read_torch_trace(dir, o);
  } catch (const ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "read " << dir << " without an error";
  return "";
}

const std::vector<std::string> kCells = {"hooks", "explain", "fullgraph", "nohooks", "nohooks-explain"};

}  // namespace

// ---- the real log against tlparse and explain ------------------------------------------------

TEST(ImportTorchTrace, CompileIdsAreTlparsesCompileDirectory) {
  for (const std::string& cell : kCells) {
    const TorchTraceLog log = read_cell(cell);
    std::set<std::string> ours, theirs;
    for (const auto& c : log.compiles) EXPECT_TRUE(ours.insert(tlparse_key(c.compile_id, c.attempt)).second) << cell;
    const json dir = compile_directory(cell);
    for (const auto& [key, entry] : dir.items()) theirs.insert(key);
    EXPECT_EQ(ours, theirs) << cell;
  }
}

TEST(ImportTorchTrace, GraphBreaksAreTlparsesBreakFiles) {
  std::set<std::string> codes;
  for (const std::string& cell : kCells) {
    const TorchTraceLog log = read_cell(cell);
    const auto theirs = tlparse_breaks(cell);
    std::map<std::string, std::vector<const storage::DynamoGraphBreakRow*>> ours;
    for (const auto& b : log.graph_breaks) ours[tlparse_key(b.compile_id, b.attempt)].push_back(&b);
    ASSERT_EQ(ours.size(), theirs.size()) << cell;
    for (const auto& [key, files] : theirs) {
      ASSERT_EQ(ours[key].size(), files.size()) << cell << " " << key;
      for (size_t i = 0; i < files.size(); ++i) {
        const storage::DynamoGraphBreakRow& b = *ours[key][i];
        const std::string& file = files[i];
        EXPECT_EQ(file.rfind("Graph break in user code at " + b.user_frame + "\n", 0), 0u) << key;
        EXPECT_NE(file.find("\n\n" + b.reason + "\n\nUser code traceback:\n" + b.user_stack), std::string::npos) << key;
        std::vector<std::string> file_codes = importers::graph_break_codes(file.substr(0, file.find("Traceback (most")));
        std::vector<std::string> row_codes{b.gb_code};
        for (size_t at = 0; !b.chained_gb_codes.empty() && at != std::string::npos;) {
          const size_t comma = b.chained_gb_codes.find(',', at);
          row_codes.push_back(b.chained_gb_codes.substr(at, comma - at));
          at = comma == std::string::npos ? comma : comma + 1;
        }
        EXPECT_EQ(row_codes, file_codes) << key;
        codes.insert(row_codes.begin(), row_codes.end());
        EXPECT_EQ(b.gb_type, b.reason.substr(0, b.reason.find('\n'))) << key;
      }
    }
  }
  // What the hooks make Dynamo do, as the brief of this importer names it.
  EXPECT_TRUE(codes.count("GB0098")) << "torch.compiler.disable'd hook functions";
  EXPECT_TRUE(codes.count("GB7000")) << "graph break in loop";
}

TEST(ImportTorchTrace, RecompileReasonsAreTlparses) {
  for (const std::string& cell : kCells) {
    TorchTraceSummary sum;
    const TorchTraceLog log = read_cell(cell, &sum);
    std::map<std::string, std::vector<std::string>> ours, theirs;
    for (const auto& r : log.recompiles) ours[tlparse_key(r.compile_id, 0)].push_back(r.reason);
    const json dir = compile_directory(cell);
    int64_t files = 0;
    for (const auto& [key, entry] : dir.items())
      for (const json& a : entry["artifacts"])
        if (a["name"].get<std::string>().rfind("recompile_reasons_", 0) == 0) {
          ++files;
          // One reason is written as its text, several as a JSON list.
          const std::string text = test::read_file(compile_log().tlparse(cell) / a["url"].get<std::string>());
          const json list = text.front() == '[' ? json::parse(text) : json::array({text});
          for (const json& r : list) theirs[key].push_back(r.get<std::string>());
        }
    EXPECT_EQ(ours, theirs) << cell;
    EXPECT_EQ(sum.recompiles, files) << cell;
  }
}

TEST(ImportTorchTrace, FailuresAndRestartsAreTlparses) {
  for (const std::string& cell : kCells) {
    const TorchTraceLog log = read_cell(cell);
    std::multiset<std::vector<std::string>> ours;
    for (const auto& c : log.compiles) {
      const std::string key = tlparse_key(c.compile_id, c.attempt);
      if (!c.restart_reasons.empty())
        for (const json& r : json::parse(c.restart_reasons)) {
          const auto codes = importers::graph_break_codes(r.get<std::string>());
          ours.insert({key, "RestartAnalysis", codes.empty() ? "" : codes.front()});
        }
      if (!c.fail_type.empty()) {
        const auto codes = importers::graph_break_codes(c.fail_reason);
        ours.insert({key, "Failure", codes.empty() ? "" : codes.front()});
      }
    }
    EXPECT_EQ(ours, tlparse_failures(cell)) << cell;
  }
}

TEST(ImportTorchTrace, GraphBreakCountIsExplains) {
  const json& explain = compile_log().facts["explain"];
  for (const auto& [compiled, explained] : std::map<std::string, std::string>{
           {"hooks", "explain"}, {"explain", "explain"}, {"nohooks", "nohooks-explain"},
           {"nohooks-explain", "nohooks-explain"}}) {
    TorchTraceSummary sum;
    read_cell(compiled, &sum);
    EXPECT_EQ(sum.graph_count, explain[explained]["graph_count"].get<int64_t>()) << compiled;
    EXPECT_EQ(sum.graph_break_count, explain[explained]["graph_break_count"].get<int64_t>()) << compiled;
  }
  EXPECT_GT(explain["explain"]["graph_break_count"].get<int64_t>(), 0) << "the hooks break the graph";
  EXPECT_EQ(explain["nohooks-explain"]["graph_break_count"].get<int64_t>(), 0) << "no hooks: one graph";
}

TEST(ImportTorchTrace, RecordCountsAreTlparses) {
  const json& stats = compile_log().facts["tlparse_stats"];
  int64_t records = 0;
  for (const std::string& cell : kCells) {
    TorchTraceSummary sum;
    read_cell(cell, &sum);
    EXPECT_EQ(sum.records, stats[cell]["ok"].get<int64_t>()) << cell;
    EXPECT_EQ(sum.unknown_records, stats[cell].value("unknown", int64_t{0})) << cell;
    records += sum.records;
  }
  TorchTraceSummary all;
  importers::read_torch_trace(compile_log().trace_dir(), {}, &all);
  EXPECT_EQ(all.cells, kCells);
  EXPECT_EQ(all.cell_markers, static_cast<int64_t>(kCells.size()));
  EXPECT_EQ(all.records, records) << "the cells cut the log without losing or sharing a record";
  EXPECT_EQ(all.records + all.cell_markers, stats["all"]["ok"].get<int64_t>());
  EXPECT_EQ(all.unknown_records, stats["all"].value("unknown", int64_t{0}));
}

TEST(ImportTorchTrace, HooksCellHasRecompileLimitHitsAndSkippedFrames) {
  TorchTraceSummary sum;
  const TorchTraceLog log = read_cell("hooks", &sum);
  EXPECT_GT(sum.recompile_limit_hits, 0) << "accelerate's new_forward recompiles per hooked module class";
  EXPECT_GT(sum.recompiles, 0);
  EXPECT_GT(sum.frames_skipped, 0);
  int64_t limit = 0;
  for (const auto& c : log.compiles) {
    if (c.fail_gb_code == "GB0039") {
      ++limit;
      EXPECT_EQ(c.status, "failed");
      EXPECT_FALSE(c.code_name.empty()) << c.compile_id << ": named from its dynamo_start";
    }
    if (c.status == "compiled") {
      EXPECT_TRUE(c.guard_count.has_value()) << c.compile_id;
      EXPECT_TRUE(c.compile_ns.has_value()) << c.compile_id;
    }
    if (c.attempt > 0) {
      EXPECT_FALSE(c.code_name.empty()) << c.compile_id;
    }
  }
  EXPECT_EQ(limit, sum.recompile_limit_hits);
  for (const auto& r : log.recompiles) {
    EXPECT_FALSE(r.guard.empty()) << r.reason;
    EXPECT_EQ(r.reason.rfind(r.guard_compile_id + ": ", 0), 0u) << r.reason;
  }
}

TEST(ImportTorchTrace, FullgraphCellIsOneFailedCompileWithTheErrorExplainNames) {
  TorchTraceSummary sum;
  const TorchTraceLog log = read_cell("fullgraph", &sum);
  const json& error = compile_log().facts["fullgraph_error"];
  ASSERT_TRUE(error.is_object()) << "fullgraph=True raises on the hooks";
  ASSERT_EQ(log.compiles.size(), 1u);
  EXPECT_EQ(log.compiles[0].status, "failed");
  EXPECT_EQ(log.compiles[0].fail_type, error["type"].get<std::string>());
  EXPECT_EQ(log.compiles[0].fail_reason.rfind(error["message"].get<std::string>(), 0), 0u);
  EXPECT_TRUE(log.graph_breaks.empty()) << "fullgraph raises instead of breaking";
  EXPECT_EQ(sum.graph_count, 0);
  EXPECT_EQ(sum.graph_break_count, 0);
}

// Texts of megabytes in an edited capture's Dynamo rows (a reason, a gb code, a user frame) are
// grouped whole but held once and shown cut: the summary's groups and counts are those of the
// file as imported, each text at most kMaxDynamoText bytes, and `report --json` stays small
// (the reason was copied per break and written whole three times: 31 MB for a 10 MB text).
TEST(ImportTorchTrace, HugeTextsAreGroupedWholeAndShownCut) {
  const fs::path file = test::scratch_dir("import_torch_trace_huge") / "capture.hscope";
  int64_t run = 0;
  {
    storage::Store store(file);
    run = store.add_run({.scenario = "imported", .policy = "whole-hook", .mode = "default", .model = "tiny-llama", .engine = "import", .label = ""});
    TorchTraceOptions o;
    o.cell = "hooks";
    importers::import_torch_trace(compile_log().trace_dir(), store, run, o);
    store.end_run(run, tracer::RunStatus::Complete);
    store.finalize();
  }
  const json before = importers::dynamo_summary(storage::CaptureReader(file), run);
  ASSERT_FALSE(before["break_reasons"].empty());
  // The break sites of `stats` (gb code and user frame): their counts, largest first.
  auto site_counts = [&] {
    const auto r = test::hookscope({"stats", file.string(), "--report", "graph_breaks", "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
    std::vector<int64_t> counts;
    const json doc = json::parse(r.out);
    for (const json& row : doc["reports"]["graph_breaks"])
      if (row["source"] == "log") counts.push_back(row["count"].get<int64_t>());
    std::sort(counts.rbegin(), counts.rend());
    return counts;
  };
  const std::vector<int64_t> sites = site_counts();
  ASSERT_GT(sites.size(), 1u);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    // One distinct MiB of text per edited entry: 'R', 'G', 'F' repeated, then the id.
    const std::string sql =
        "UPDATE StringIds SET value = replace(hex(zeroblob(524288)), '0', 'R') || id WHERE id IN (SELECT reasonId FROM "
        "DYNAMO_GRAPH_BREAKS); UPDATE StringIds SET value = replace(hex(zeroblob(524288)), '0', 'G') || id WHERE id IN "
        "(SELECT gbCodeId FROM DYNAMO_GRAPH_BREAKS); UPDATE StringIds SET value = replace(hex(zeroblob(524288)), '0', "
        "'F') || id WHERE id IN (SELECT userFrameId FROM DYNAMO_GRAPH_BREAKS);";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  const json after = importers::dynamo_summary(storage::CaptureReader(file), run);
  auto breaks = [](const json& summary) {
    int64_t n = 0;
    for (const json& g : summary["break_reasons"]) n += g["count"].get<int64_t>();
    return n;
  };
  EXPECT_EQ(breaks(after), breaks(before)) << "every break still counted once";
  EXPECT_EQ(after["graph_breaks"], before["graph_breaks"]);
  std::map<std::string, int> cut;
  for (const json& g : after["break_reasons"])
    for (const char* k : {"reason", "gb_code", "user_frame"}) {
      if (!g[k].is_string()) continue;
      const std::string& t = g[k].get_ref<const std::string&>();
      EXPECT_LE(t.size(), importers::kMaxDynamoText) << k;
      cut[k] += t.ends_with("...");
    }
  for (const char* k : {"reason", "gb_code", "user_frame"}) EXPECT_GT(cut[k], 0) << k << " shown cut";
  // The edited frames differ only in their last bytes, past any cut: still one site each (stats
  // grouped the cut texts, merging them).
  EXPECT_EQ(site_counts(), sites);
  const fs::path out = file.parent_path() / "report.json";
  const auto r = test::hookscope({"report", file.string(), "--json", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  EXPECT_LT(fs::file_size(out), size_t{1} << 20);
}

TEST(ImportTorchTrace, ImportWritesTheRowsAndTheSummaryGroupsThem) {
  const fs::path file = test::scratch_dir("import_torch_trace_store") / "capture.hscope";
  TorchTraceOptions o;
  o.cell = "hooks";
  int64_t run = 0;
  TorchTraceSummary sum;
  {
    storage::Store store(file);
    run = store.add_run({.scenario = "imported", .policy = "whole-hook", .mode = "default", .model = "tiny-llama", .engine = "import", .label = ""});
    sum = importers::import_torch_trace(compile_log().trace_dir(), store, run, o);
    store.end_run(run, tracer::RunStatus::Complete);
  }
  const TorchTraceLog log = read_cell("hooks");
  storage::CaptureReader r(file);
  ASSERT_EQ(r.dynamo_compiles(run).size(), log.compiles.size());
  ASSERT_EQ(r.dynamo_graph_breaks(run).size(), log.graph_breaks.size());
  ASSERT_EQ(r.dynamo_recompiles(run).size(), log.recompiles.size());
  EXPECT_EQ(r.dynamo_compiles(run)[3].compile_id, log.compiles[3].compile_id);
  EXPECT_EQ(r.dynamo_graph_breaks(run).back().reason, log.graph_breaks.back().reason);

  const json s = importers::dynamo_summary(r, run);
  EXPECT_EQ(s["graph_break_count"], compile_log().facts["explain"]["explain"]["graph_break_count"]);
  EXPECT_EQ(s["graph_count"], sum.graph_count);
  EXPECT_EQ(s["compiles"], sum.compiles);
  EXPECT_EQ(s["graph_breaks"], sum.graph_breaks);
  EXPECT_EQ(s["frames_skipped"], sum.frames_skipped);
  EXPECT_EQ(s["recompile_limit_hits"], sum.recompile_limit_hits);
  EXPECT_EQ(s["recompiles"], sum.recompiles);
  EXPECT_EQ(s["recompile_guards"], sum.recompile_guards);
  EXPECT_GE(sum.recompile_guards, sum.recompiles);
  int64_t grouped = 0;
  for (const json& g : s["break_reasons"]) {
    grouped += g["count"].get<int64_t>();
    EXPECT_EQ(g["compile_ids"].size(), g["count"].get<size_t>());
    EXPECT_EQ(g["reason"].get<std::string>().find("0x7f"), std::string::npos) << "addresses masked";
  }
  EXPECT_EQ(grouped, sum.graph_breaks);
  ASSERT_FALSE(s["break_reasons"].empty());
  EXPECT_EQ(s["break_reasons"][0]["gb_code"], "GB0098") << "the hooks' break is the most frequent";
  EXPECT_LT(s["break_reasons"].size(), static_cast<size_t>(sum.graph_breaks)) << "identical reasons grouped";
  EXPECT_EQ(s["compile_ids"].size(), static_cast<size_t>(sum.compiles));
  EXPECT_EQ(s["skipped_frames"].size(), static_cast<size_t>(sum.frames_skipped));
  EXPECT_TRUE(r.diagnostics(run).empty() == (sum.unknown_records == 0));
}

TEST(ImportTorchTrace, EmptyRunSummaryIsAllZeros) {
  const fs::path file = test::scratch_dir("import_torch_trace_empty") / "capture.hscope";
  int64_t run = 0;
  {
    storage::Store store(file);
    run = store.add_run({.scenario = "s", .policy = "p", .mode = "m", .model = "x", .engine = "import", .label = ""});
  }
  const json s = importers::dynamo_summary(storage::CaptureReader(file), run);
  EXPECT_EQ(s["compiles"], 0);
  EXPECT_EQ(s["graph_break_count"], 0);
  EXPECT_TRUE(s["break_reasons"].empty());
}

// ---- cells ------------------------------------------------------------------------------------

namespace {
/// A `hookscope_cell` marker as the torch engine writes it (trace_structured "artifact").
std::string marker(const std::string& cell) {
  const std::string payload = "{\"cell\": \"" + cell + "\"}";
  importers::Md5 md5;
  md5.update(payload);
  return "V1201 04:54:54.313000 1 /x/driver.py:15] {\"artifact\": {\"name\": \"hookscope_cell\", \"encoding\": "
         "\"json\"}, \"has_payload\": \"" + md5.hex() + "\"}\n\t" + payload + "\n";
}

TorchTraceSummary summary_of(const fs::path& dir, const std::string& cell = "") {
  TorchTraceOptions o;
  o.cell = cell;
  TorchTraceSummary sum;
  importers::read_torch_trace(dir, o, &sum);
  return sum;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) out.push_back(text.substr(at, nl - at));
  if (at < text.size()) out.push_back(text.substr(at));
  return out;
}
/// The index of the first line holding both `a` and `b`; lines.size() when none does.
size_t first_line_with(const std::vector<std::string>& lines, const std::string& a, const std::string& b) {
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(a) != std::string::npos && lines[i].find(b) != std::string::npos) return i;
  return lines.size();
}
std::string join(const std::vector<std::string>& lines, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}
/// Index of the first record line followed by at least two payload lines.
size_t record_with_long_payload(const std::vector<std::string>& lines) {
  for (size_t i = 0; i + 2 < lines.size(); ++i)
    if (lines[i][0] != '\t' && lines[i + 1][0] == '\t' && lines[i + 2][0] == '\t') return i;
  ADD_FAILURE() << "no record with a multi-line payload";
  return 0;
}
}  // namespace

TEST(ImportTorchTrace, ACellIsTheRecordsBetweenItsMarkerAndTheNext) {
  const std::string x = read_text(compile_log().cell_log("nohooks"));
  const std::string y = read_text(compile_log().cell_log("fullgraph"));
  const TorchTraceSummary sx = summary_of(log_with("cells_x", x)), sy = summary_of(log_with("cells_y", y));
  ASSERT_GT(sx.records, 0);
  ASSERT_GT(sy.records, 0);
  const fs::path dir = log_with("cells", x + marker("a") + x + marker("b") + y);
  const TorchTraceSummary whole = summary_of(dir), a = summary_of(dir, "a"), b = summary_of(dir, "b");
  EXPECT_EQ(whole.cells, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(whole.records, 2 * sx.records + sy.records) << "records before the first marker belong to no cell";
  EXPECT_EQ(whole.compiles, 2 * sx.compiles + sy.compiles) << "compile ids repeat after a marker: new rows";
  EXPECT_EQ(a.records, sx.records);
  EXPECT_EQ(a.compiles, sx.compiles);
  EXPECT_EQ(a.graph_count, sx.graph_count);
  EXPECT_EQ(b.records, sy.records);
  EXPECT_EQ(b.compiles, sy.compiles);
  EXPECT_EQ(b.record_types, sy.record_types);
  // Without a marker between them, a repeated dynamo_start of an id still starts a new row.
  EXPECT_EQ(summary_of(log_with("cells_reset", x + x)).compiles, 2 * sx.compiles);
  EXPECT_EQ(import_error(dir, "zz"),
            (dir / "dedicated_log_torch_trace_test.log").string() +
                ": no hookscope_cell marker for cell 'zz' (cells: \"a\", \"b\")");
}

// ---- bad input --------------------------------------------------------------------------------

TEST(ImportTorchTrace, MissingFileOrEmptyDirectoryNamesThePath) {
  const fs::path missing = test::scratch_dir("torch_trace_missing") / "nope";
  EXPECT_EQ(import_error(missing), missing.string() + ": no such file or directory");
  const fs::path empty = test::scratch_dir("torch_trace_empty_dir");
  write_text(empty / "notes.txt", "not a log");
  EXPECT_EQ(import_error(empty),
            empty.string() + ": no TORCH_TRACE log (dedicated_log_torch_trace_*.log) in it");
  const fs::path ranked = test::scratch_dir("torch_trace_rank1_only");
  write_text(ranked / "dedicated_log_torch_trace_rank_1_abc.log", "");
  EXPECT_NE(import_error(ranked).find("no rank-0 TORCH_TRACE log"), std::string::npos);
}

// A FIFO in a log's place is refused at once; it used to wait for a writer forever (holding the
// capture's lock). Should the read block, the test opens the FIFO's write end and closes it, so
// the reader sees an end of file and the test fails instead of hanging.
TEST(ImportTorchTrace, AFifoIsRefusedNotWaitedOn) {
  const fs::path dir = test::scratch_dir("torch_trace_fifo");
  const fs::path fifo = dir / "dedicated_log_torch_trace_fifo.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  for (const fs::path& target : {fifo, dir}) {
    SCOPED_TRACE(target.string());
    auto read = std::async(std::launch::async, [&] {
      try {
        importers::read_torch_trace(target, {});
      } catch (const ImportError& e) {
        return std::string(e.what());
      }
      return std::string("read without an error");
    });
    if (read.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "the read waited on the FIFO";
      ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
    }
    const std::string msg = read.get();
    if (target == fifo)
      EXPECT_EQ(msg, fifo.string() + ": not a regular file (a FIFO, device or socket)");
    else  // a folder's logs are its regular files
      EXPECT_EQ(msg, dir.string() + ": no TORCH_TRACE log (dedicated_log_torch_trace_*.log) in it");
  }
}

TEST(ImportTorchTrace, ADirectoryMeansItsRankZeroLogs) {
  const std::string x = read_text(compile_log().cell_log("nohooks"));
  const fs::path dir = test::scratch_dir("torch_trace_ranks");
  write_text(dir / "dedicated_log_torch_trace_rank_0_abc.log", x);
  write_text(dir / "dedicated_log_torch_trace_rank_1_def.log", "garbage that is never read\n");
  const TorchTraceSummary sum = summary_of(dir);
  ASSERT_EQ(sum.files.size(), 1u);
  EXPECT_EQ(sum.files[0].filename(), "dedicated_log_torch_trace_rank_0_abc.log");
  EXPECT_EQ(sum.records, summary_of(log_with("ranks_x", x)).records);
}

// A log converted to CRLF line endings (copied through Windows) reads as the original: every
// payload still matches its MD5. A folder's other entries are never read, so a loop of links
// beside the log (or one named like a log) is skipped, not a reason to refuse the import.
TEST(ImportTorchTrace, ACrlfLogReadsAsTheOriginalAndOtherEntriesAreSkipped) {
  const std::string x = read_text(compile_log().cell_log("nohooks"));
  std::string crlf;
  for (const char c : x) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const TorchTraceSummary want = summary_of(log_with("crlf_original", x));
  const fs::path dir = log_with("crlf", crlf);
  fs::create_symlink("loop-b", dir / "loop-a");
  fs::create_symlink("loop-a", dir / "loop-b");
  fs::create_symlink("dedicated_log_torch_trace_loop.log", dir / "dedicated_log_torch_trace_loop.log");
  const TorchTraceSummary got = summary_of(dir);
  ASSERT_EQ(got.files.size(), 1u);
  EXPECT_EQ(got.files[0].filename(), "dedicated_log_torch_trace_test.log");
  EXPECT_EQ(got.records, want.records);
  EXPECT_EQ(got.record_types, want.record_types);
  const TorchTraceLog a = importers::read_torch_trace(log_with("crlf_original_rows", x), {});
  const TorchTraceLog b = importers::read_torch_trace(dir, {});
  EXPECT_EQ(a.compiles.size(), b.compiles.size());
  ASSERT_EQ(a.graph_breaks.size(), b.graph_breaks.size());
  for (size_t i = 0; i < a.graph_breaks.size(); ++i) EXPECT_EQ(a.graph_breaks[i].reason, b.graph_breaks[i].reason);
}

TEST(ImportTorchTrace, TruncatedPayloadNamesTheRecordLine) {
  const std::vector<std::string> lines = lines_of(read_text(compile_log().cell_log("nohooks")));
  const size_t rec = record_with_long_payload(lines);
  // Cut inside the payload: its MD5 no longer matches.
  const fs::path cut = log_with("truncated_payload", join(lines, rec + 2));
  EXPECT_EQ(import_error(cut), (cut / "dedicated_log_torch_trace_test.log").string() + ": line " +
                                   std::to_string(rec + 1) +
                                   ": the record's payload does not match its has_payload MD5: truncated or damaged log");
  // Cut right after the record line: no payload at all.
  const fs::path none = log_with("no_payload", join(lines, rec + 1));
  EXPECT_EQ(import_error(none), (none / "dedicated_log_torch_trace_test.log").string() + ": line " +
                                    std::to_string(rec + 1) +
                                    ": the record announces a payload (has_payload) but no payload line follows: "
                                    "truncated log");
}

TEST(ImportTorchTrace, NonRecordLinesNameTheirLine) {
  const std::vector<std::string> lines = lines_of(read_text(compile_log().cell_log("nohooks")));
  const std::string file = "/dedicated_log_torch_trace_test.log";
  {
    std::vector<std::string> l = lines;
    l.insert(l.begin() + 1, "this is not a record");
    const fs::path dir = log_with("not_a_record", join(l, l.size()));
    EXPECT_EQ(import_error(dir), dir.string() + file +
                                     ": line 2: not a TORCH_TRACE record: no glog prefix ('V1201 04:54:56.531000 "
                                     "PID FILE:LINE] {...}')");
  }
  {
    // A last line cut in the middle of its JSON (a killed process).
    const size_t rec = record_with_long_payload(lines);
    const std::string text = join(lines, rec) + lines[rec].substr(0, lines[rec].size() / 2);
    const fs::path dir = log_with("cut_json", text);
    const std::string e = import_error(dir);
    EXPECT_EQ(e.rfind(dir.string() + file + ": line " + std::to_string(rec + 1) +
                          ": not a JSON object after the glog prefix: ",
                      0),
              0u)
        << e;
  }
  {
    std::vector<std::string> l = lines;
    ASSERT_NE(l[0].find("{\"str\""), std::string::npos) << "a slice starts with its str records";
    l.insert(l.begin() + 1, "\tstray payload");
    const fs::path dir = log_with("stray_payload", join(l, l.size()));
    EXPECT_EQ(import_error(dir), dir.string() + file +
                                     ": line 2: a payload line (starting with a tab) where no record announced a "
                                     "payload");
  }
  {
    TorchTraceOptions o;
    o.max_line_bytes = 64;
    const fs::path dir = log_with("long_line", join(lines, lines.size()));
    try {
      importers::read_torch_trace(dir, o);
      ADD_FAILURE() << "a line over max_line_bytes was read";
    } catch (const ImportError& e) {
      EXPECT_EQ(std::string(e.what()),
                dir.string() + file +
                    ": line 1: longer than 64 bytes, the most hookscope reads of one line of a TORCH_TRACE log: the log "
                    "is damaged or is no such log");
    }
  }
}

// compilation_metrics values no Dynamo writes (a negative time or count, a time past int64 ns)
// are refused naming the record's line and the metric, as the Kineto importer refuses a negative dur.
TEST(ImportTorchTrace, ImpossibleCompilationMetricsAreRefused) {
  const std::vector<std::string> lines = lines_of(read_text(compile_log().cell_log("nohooks")));
  const size_t at = first_line_with(lines, "\"compilation_metrics\"", "\"guard_count\": ");
  ASSERT_LT(at, lines.size()) << "the cell has a compilation_metrics record";
  const std::string file = "/dedicated_log_torch_trace_test.log";
  for (const auto& [key, value, why] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"entire_frame_compile_time_s", "-1.5", "negative"},
           {"entire_frame_compile_time_s", "1e+30", "out of range"},
           {"guard_count", "-7", "negative"},
           {"guard_count", "1.5", "not an integer"},
           {"guard_count", "9223372036854775808", "out of range"},
           {"guard_count", "2e+20", "out of range"},
           {"start_time", "\"soon\"", "not a number"}}) {
    std::vector<std::string> l = lines;
    const size_t k = l[at].find("\"" + key + "\": ");
    ASSERT_NE(k, std::string::npos) << key;
    const size_t v = k + key.size() + 4, end = l[at].find_first_of(",}", v);
    l[at].replace(v, end - v, value);
    const fs::path dir = log_with("metrics_" + key + "_" + why.substr(0, 3), join(l, l.size()));
    EXPECT_EQ(import_error(dir), dir.string() + file + ": line " + std::to_string(at + 1) + ": compilation_metrics." +
                                     key + " = " + value + ": " + why);
  }
}

// The envelope's ids (tlparse reads them as u32): a negative, fractional, string or huge one is
// a damaged log named by its line, not an id cut to 32 bits or a compile "-/0".
TEST(ImportTorchTrace, EnvelopeIdsOutOfRangeAreRefused) {
  const std::vector<std::string> lines = lines_of(read_text(compile_log().cell_log("nohooks")));
  const size_t at = first_line_with(lines, "\"dynamo_start\"", "\"frame_id\": 0");
  ASSERT_LT(at, lines.size()) << "the cell has a dynamo_start record of frame 0";
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"frame_id", "-1"}, {"frame_id", "\"0\""}, {"frame_id", "99999999999999999999"}, {"frame_id", "0.5"},
           {"attempt", "9999999999"}, {"frame_compile_id", "[0]"}}) {
    std::vector<std::string> l = lines;
    const size_t k = l[at].find("\"" + key + "\": ");
    if (k == std::string::npos) {  // frame_compile_id / attempt: added beside frame_id
      const size_t f = l[at].find("\"frame_id\": 0");
      ASSERT_NE(f, std::string::npos);
      l[at].insert(f, "\"" + key + "\": " + value + ", ");
    } else {
      const size_t v = k + key.size() + 4, end = l[at].find_first_of(",}", v);
      l[at].replace(v, end - v, value);
    }
    const fs::path dir = log_with("envelope_" + key + "_" + std::to_string(value.size()), join(l, l.size()));
    const std::string err = import_error(dir);
    EXPECT_NE(err.find(": line " + std::to_string(at + 1) + ": the record's \"" + key + "\" is "), std::string::npos)
        << key << " = " << value << ": " << err;
    EXPECT_NE(err.find("not an id from 0 to 2147483647"), std::string::npos) << err;
  }
}

TEST(ImportTorchTrace, UnknownRecordTypesAreCountedAndReported) {
  const std::string x = read_text(compile_log().cell_log("nohooks"));
  const std::string future =
      "V1201 04:54:56.531000 1 /torch/_dynamo/future.py:1] {\"future_record\": {\"x\": 1}, \"frame_id\": 0, "
      "\"frame_compile_id\": 0, \"attempt\": 0}\n";
  const TorchTraceSummary base = summary_of(log_with("unknown_base", x));
  const fs::path dir = log_with("unknown", x + future + future);
  const TorchTraceSummary sum = summary_of(dir);
  EXPECT_EQ(sum.unknown_records, base.unknown_records + 2);
  EXPECT_EQ(sum.unknown_types.at("future_record"), 2);
  EXPECT_EQ(sum.record_types.at("future_record"), 2);
  EXPECT_EQ(sum.records, base.records + 2);
  EXPECT_EQ(sum.compiles, base.compiles) << "it names compile 0/0, which exists";

  const fs::path file = test::scratch_dir("import_torch_trace_unknown") / "capture.hscope";
  int64_t run = 0;
  {
    storage::Store store(file);
    run = store.add_run({.scenario = "s", .policy = "p", .mode = "m", .model = "x", .engine = "import", .label = ""});
    importers::import_torch_trace(dir, store, run, {});
  }
  const auto diags = storage::CaptureReader(file).diagnostics(run);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].severity, storage::Severity::Info);
  EXPECT_EQ(diags[0].source, "torch_trace");
  EXPECT_NE(diags[0].text.find("future_record x2"), std::string::npos) << diags[0].text;
}

// Found by torch_trace_fuzz under UBSan: a float id past int64's range was cast to int64
// (undefined). It is a damaged record, refused naming its line, and never cast.
// (`./run test --sanitize` halts on such a cast.)
TEST(ImportTorchTrace, AFloatIdPastInt64IsRefusedNotCast) {
  const std::string x = read_text(compile_log().cell_log("nohooks"));
  const std::string huge =
      "V1201 04:54:56.531000 1 /torch/_dynamo/future.py:1] {\"future_record\": {\"x\": 1}, \"frame_id\": 1.5e73, "
      "\"frame_compile_id\": -1e300, \"attempt\": 9e99}\n";
  const fs::path dir = log_with("huge", x + huge);
  EXPECT_NE(import_error(dir).find(": line " + std::to_string(lines_of(x).size() + 1) +
                                   ": the record's \"frame_id\" is 1.5e+73"),
            std::string::npos)
      << import_error(dir);
}

// An empty log (a torch that died before logging, a wrong file) is not an empty compile.
TEST(ImportTorchTrace, AnEmptyLogIsAnImportError) {
  const fs::path dir = log_with("empty", "");
  EXPECT_NE(import_error(dir).find("empty: no TORCH_TRACE records"), std::string::npos) << import_error(dir);
}

// Found by torch_trace_fuzz: a number past a double's range ('1e143615') is nlohmann's out_of_range.406,
// not a parse_error; it escaped the reader and aborted. It is the file's error, with its line.
TEST(ImportTorchTrace, ANumberPastADoubleIsAnImportErrorWithItsLine) {
  const std::string x = read_text(compile_log().cell_log("nohooks"));
  const size_t lines = lines_of(x).size();
  const std::string file = "/dedicated_log_torch_trace_test.log";
  {
    const fs::path dir = log_with("past_double", x +
                                                     "V1201 04:54:56.531000 1 /torch/_dynamo/future.py:1] {\"future_"
                                                     "record\": {\"x\": 13072759667271522e143615}, \"frame_id\": 0}\n");
    const std::string e = import_error(dir);
    const std::string want = dir.string() + file + ": line " + std::to_string(lines + 1) +
                             ": not a JSON object after the glog prefix: ";
    EXPECT_EQ(e.rfind(want, 0), 0u) << e;
    EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
  }
  {
    const std::string payload = "{\"cell\": \"a\", \"n\": 1e99999}";
    importers::Md5 md5;
    md5.update(payload);
    const std::string bad = "V1201 04:54:54.313000 1 /x/driver.py:15] {\"artifact\": {\"name\": \"hookscope_cell\", "
                            "\"encoding\": \"json\"}, \"has_payload\": \"" + md5.hex() + "\"}\n\t" + payload + "\n";
    const fs::path dir = log_with("past_double_marker", bad + x);
    EXPECT_EQ(import_error(dir), dir.string() + file + ": line 1: a hookscope_cell marker whose payload is not JSON");
  }
}

TEST(ImportTorchTrace, ABadLogWritesNothing) {
  const std::vector<std::string> lines = lines_of(read_text(compile_log().cell_log("hooks")));
  const fs::path dir = log_with("bad_writes_nothing", join(lines, record_with_long_payload(lines) + 2));
  const fs::path file = test::scratch_dir("import_torch_trace_bad") / "capture.hscope";
  storage::Store store(file);
  const int64_t run = store.add_run({.scenario = "s", .policy = "p", .mode = "m", .model = "x", .engine = "import", .label = ""});
  EXPECT_THROW(importers::import_torch_trace(dir, store, run, {}), ImportError);
  store.close();
  storage::CaptureReader r(file);
  EXPECT_TRUE(r.dynamo_compiles(run).empty());
  EXPECT_EQ(r.run(run).status, tracer::RunStatus::Incomplete) << "the caller ends the run failed";
}

// ---- Dynamo's texts ------------------------------------------------------------------------------

TEST(DynamoText, ParsesAChainedBreakAndARecompileReason) {
  const std::string payload =
      "Graph break in user code at /a/hooks.py:50\n"
      "Graph Break Reason: Failed to handle graph break gracefully. Skipping the function and falling back to "
      "eager. Graph break encountered:\n\n"
      "Skip calling `torch.compiler.disable()`d function\n"
      "  Explanation: Skip calling function `<function f at 0x7f4869e0d1c0>` since it was wrapped\n"
      "    over two lines\n"
      "  Hint: Remove the `torch.compiler.disable` call\n\n"
      "  Developer debug context: <function f at 0x7f4869e0d1c0>\n\n"
      " For more details about this graph break, please visit: https://x/gb/gb0098.html\n\n"
      "*** While handling this graph break, another graph break occurred: ***\n\n"
      "graph break in loop\n"
      "  Explanation: torch.compile detected a graph break in a for/while loop.\n\n"
      "  Developer debug context: frame skipped: f (/a/m.py line 389)\n\n"
      " For more details about this graph break, please visit: https://x/gb/gb7000.html\n\n"
      "User code traceback:\n"
      "  File \"/a/m.py\", line 392, in forward\n"
      "    hidden_states = decoder_layer(\n\n"
      "Traceback (most recent call last):\n  File \"/t/x.py\", line 1, in w\n";
  const importers::GraphBreakReport r = importers::parse_graph_break_report(payload);
  EXPECT_EQ(r.user_frame, "/a/hooks.py:50");
  EXPECT_EQ(r.instruction.rfind("Failed to handle graph break gracefully", 0), 0u);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].gb_type, "Skip calling `torch.compiler.disable()`d function");
  EXPECT_EQ(r.messages[0].gb_code, "GB0098");
  EXPECT_EQ(r.messages[0].explanation,
            "Skip calling function `<function f at 0x7f4869e0d1c0>` since it was wrapped\nover two lines");
  EXPECT_EQ(r.messages[0].hints, std::vector<std::string>{"Remove the `torch.compiler.disable` call"});
  EXPECT_EQ(r.messages[0].context, "<function f at 0x7f4869e0d1c0>");
  EXPECT_EQ(r.messages[1].gb_type, "graph break in loop");
  EXPECT_EQ(r.messages[1].gb_code, "GB7000");
  EXPECT_EQ(r.user_stack, "  File \"/a/m.py\", line 392, in forward\n    hidden_states = decoder_layer(");
  EXPECT_TRUE(r.frame_skipped);
  EXPECT_EQ(r.reason.rfind("Skip calling", 0), 0u);
  EXPECT_EQ(r.reason.substr(r.reason.size() - 11), "gb7000.html");
  EXPECT_EQ(importers::without_addresses("f at 0x7f4869e0d1c0> 10x5"), "f at 0x\u2026> 10x5");

  const importers::RecompileReason rr = importers::parse_recompile_reason(
      "0/6: ___check_type_id(module, 94861060722928), type=<class 'Linear'>  # args = f()  # hooks.py:187 in "
      "new_forward\nUser stack trace:\n  File ...");
  EXPECT_EQ(rr.guard_compile_id, "0/6");
  EXPECT_EQ(rr.guard, "___check_type_id(module, 94861060722928), type=<class 'Linear'>");
  EXPECT_TRUE(importers::is_recompile_limit("GB0039", ""));
  EXPECT_TRUE(importers::is_recompile_limit("", "cache_size_limit reached"));
  EXPECT_FALSE(importers::is_recompile_limit("GB0098", "Skip calling"));
}

// ---- when a break happened ----------------------------------------------------------------------
namespace {
/// `text` with every glog prefix's time of day moved by `by_us` (modulo a day): what the same
/// log looks like written in another time zone, or started just before midnight.
std::string with_times_moved(const std::string& text, int64_t by_us) {
  constexpr int64_t kDay = int64_t{86'400} * 1'000'000;
  std::string out;
  for (std::string line : lines_of(text)) {
    if (!line.empty() && line[0] != '\t' && line.size() > 21 && line[5] == ' ' && line[8] == ':') {
      const int64_t tod = ((std::stoll(line.substr(6, 2)) * 60 + std::stoll(line.substr(9, 2))) * 60 +
                           std::stoll(line.substr(12, 2))) * 1'000'000 + std::stoll(line.substr(15, 6));
      const int64_t t = ((tod + by_us) % kDay + kDay) % kDay;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld.%06lld", static_cast<long long>(t / 3'600'000'000),
                    static_cast<long long>(t / 60'000'000 % 60), static_cast<long long>(t / 1'000'000 % 60),
                    static_cast<long long>(t % 1'000'000));
      line.replace(6, 15, buf);
    }
    out += line + "\n";
  }
  return out;
}
}  // namespace

// Every graph break of the real log has a time: its artifact's glog time, dated by its compile's
// start_time, inside that compile (start_time .. + entire_frame_compile_time_s); the same log
// written in another time zone, or across midnight, gives the same times; the run's trace shift
// moves them with the trace.
TEST(ImportTorchTrace, AGraphBreakIsPlacedInsideItsCompile) {
  const TorchTraceLog log = read_cell("hooks");
  ASSERT_FALSE(log.graph_breaks.empty());
  // A restarted compile's metrics (start_time) are on its last attempt; its breaks on any.
  std::map<std::string, const storage::DynamoCompileRow*> compiles;
  for (const auto& c : log.compiles)
    if (c.start_utc_ns) compiles[c.compile_id] = &c;
  int64_t placed = 0;
  for (const auto& b : log.graph_breaks) {
    const storage::DynamoCompileRow* c = compiles[b.compile_id];
    if (!c) continue;
    ASSERT_TRUE(b.time_ns.has_value()) << b.compile_id << " line " << b.log_line;
    ++placed;
    // glog's µs against compilation_metrics' start_time: a few ms of slack either side.
    EXPECT_GE(*b.time_ns, *c->start_utc_ns - 5'000'000) << b.compile_id;
    EXPECT_LE(*b.time_ns, *c->start_utc_ns + c->compile_ns.value_or(0) + 5'000'000) << b.compile_id;
  }
  EXPECT_EQ(placed, static_cast<int64_t>(log.graph_breaks.size())) << "every break's compile has a start_time";

  const std::string text = read_text(compile_log().cell_log("hooks"));
  const int64_t first_tod = [&] {
    const std::string l = lines_of(text).front();
    return ((std::stoll(l.substr(6, 2)) * 60 + std::stoll(l.substr(9, 2))) * 60 + std::stoll(l.substr(12, 2))) *
               1'000'000 + std::stoll(l.substr(15, 6));
  }();
  constexpr int64_t kDay = int64_t{86'400} * 1'000'000;
  // 23:59:59.990 at the first record: the compiles run over midnight.
  for (const int64_t by : {int64_t{3'600'000'000} * 5, kDay - 10'000 - first_tod}) {
    const fs::path dir = log_with("tz_" + std::to_string(by), with_times_moved(text, by));
    TorchTraceOptions o;
    o.shift_ns = -1'000;
    const TorchTraceLog moved = importers::read_torch_trace(dir, o);
    ASSERT_EQ(moved.graph_breaks.size(), log.graph_breaks.size());
    for (size_t i = 0; i < log.graph_breaks.size(); ++i) {
      ASSERT_EQ(moved.graph_breaks[i].time_ns.has_value(), log.graph_breaks[i].time_ns.has_value());
      if (log.graph_breaks[i].time_ns) {
        EXPECT_EQ(*moved.graph_breaks[i].time_ns, *log.graph_breaks[i].time_ns - 1'000);
      }
    }
  }
}

// The hooked module a break happened under: the innermost call into torch.nn.Module's call
// machinery in the break's user stack, by its call expression and site.
TEST(ImportTorchTrace, ABreaksHookedModuleCallIsTheInnermostModuleCall) {
  const std::string stack =
      "  File \"/x/transformers/generation/utils.py\", line 4319, in _prefill\n"
      "    return self(**model_inputs, return_dict=True)\n"
      "  File \"/x/torch/nn/modules/module.py\", line 1779, in _wrapped_call_impl\n"
      "    return self._call_impl(*args, **kwargs)\n"
      "  File \"/x/transformers/models/llama/modeling_llama.py\", line 370, in forward\n"
      "    inputs_embeds: torch.Tensor = self.embed_tokens(input_ids)\n"
      "  File \"/x/torch/nn/modules/module.py\", line 1779, in _wrapped_call_impl\n"
      "    return self._call_impl(*args, **kwargs)\n"
      "  File \"/x/torch/nn/modules/module.py\", line 1790, in _call_impl\n"
      "    return forward_call(*args, **kwargs)\n"
      "  File \"/x/accelerate/hooks.py\", line 187, in new_forward\n"
      "    args, kwargs = module._hf_hook.pre_forward(module, *args, **kwargs)\n";
  const importers::ModuleCall c = importers::module_call(stack);
  EXPECT_EQ(c.callee, "self.embed_tokens");
  EXPECT_EQ(c.site, "modeling_llama.py:370 in forward");
  EXPECT_EQ(importers::module_call(stack.substr(0, stack.find("  File \"/x/transformers/models"))).callee, "self");
  EXPECT_TRUE(importers::module_call("  File \"/x/a.py\", line 1, in f\n    g()\n").empty());
  // A line of several calls: which one called the module the stack cannot say, so the whole
  // call expression, not the outer function.
  const std::string nested = "  File \"/x/net.py\", line 9, in forward\n    x = torch.relu(l(x))\n"
                             "  File \"/x/torch/nn/modules/module.py\", line 1779, in _wrapped_call_impl\n"
                             "    return self._call_impl(*args, **kwargs)\n";
  EXPECT_EQ(importers::module_call(nested).callee, "torch.relu(l(x))");
  // A compound statement on one line: its body's call.
  auto on_line = [](const std::string& source) {
    return importers::module_call("  File \"/x/net.py\", line 9, in forward\n    " + source +
                                  "\n  File \"/x/torch/nn/modules/module.py\", line 1779, in _wrapped_call_impl\n"
                                  "    return self._call_impl(*args, **kwargs)\n")
        .callee;
  };
  EXPECT_EQ(on_line("for i in range(6): y = cm(x)"), "cm");
  EXPECT_EQ(on_line("def forward(s, x): return s.fc2(x)"), "s.fc2");
  EXPECT_EQ(importers::break_label("GB0098", "Skip calling", "function `<function AlignDevicesHook.pre_forward at 0x1>`"),
            "GB0098 AlignDevicesHook.pre_forward");

  // In the real log, every hook break (GB0098) happened under a module call of the model.
  int64_t hook_breaks = 0;
  for (const auto& b : read_cell("hooks").graph_breaks)
    if (b.gb_code == "GB0098") {
      ++hook_breaks;
      EXPECT_FALSE(importers::module_call(b.user_stack).empty()) << b.user_stack;
    }
  EXPECT_GT(hook_breaks, 0);
}

// A record nested 100,000 arrays deep (a log from anyone) is refused naming its line, before
// anything recurses over it.
TEST(ImportTorchTrace, ARecordNestedTooDeepIsRefusedNamingItsLine) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const fs::path dir = log_with("deep", "V1201 04:54:56.531000 1 /x/convert_frame.py:1] {\"dynamo_start\": {\"stack\": " +
                                            deep + "}, \"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0}\n");
  const std::string e = import_error(dir);
  EXPECT_NE(e.find(": line 1: not a JSON object after the glog prefix: the record: JSON nested deeper than 512 levels"),
            std::string::npos)
      << e;
}
