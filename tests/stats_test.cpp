// `hookscope stats` and reports/stats.h on a real capture of the tiny transformers-written Llama
// (LibTorch engine: sharded and cpu-offload, eager and compiled) plus an imported torch.compile
// log (Dynamo's breaks): every report's numbers recomputed by hand-written SQL over the same
// file (sqlite3's C API, independent of the reader), the CSV / JSON shapes, the run filter, the
// errors, and the same numbers in report.json and the Markdown.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "reports/stats.h"
#include "cli/report_command.h"
#include "reports/report_json.h"
#include "cli/stats_command.h"
#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/synthetic.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using hs::test::hookscope;

namespace {

struct Capture {
  fs::path dir, db;
};

// Four LibTorch runs (sharded / cpu-offload × eager / default on 2 accelerators) and one run
// imported from a real torch.compile log (its `hooks` cell), in one file.
const Capture& capture() {
  static const Capture c = [] {
    Capture k;
    k.dir = hs::test::scratch_dir("stats-tiny-llama-" + std::to_string(getpid()));
    k.db = k.dir / "capture.sqlite";
    auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                        "--scenarios", "sharded,cpu-offload", "--policies", "whole-hook", "--modes", "eager,default",
                        "--fullgraph", "off", "--devices", "2", "--prompt-ids", "5,17,99,3", "--max-new-tokens", "3",
                        "--repeats", "1", "--warmup", "1", "--out", k.db.string()});
    if (r.exit_code != 0) throw std::runtime_error("capture failed: " + r.err);
    const fs::path log = hs::test::cached_oracle("compile_log", "compile_log.py") / "torch_trace";
    r = hookscope({"import", "--compile-log", log.string(), "--cell", "hooks", "--mode", "default", "--append", "-o",
                   k.db.string()});
    if (r.exit_code != 0) throw std::runtime_error("import failed: " + r.err);
    return k;
  }();
  return c;
}

/// Hand-written SQL over the capture, read-only.
class Sql {
 public:
  explicit Sql(const fs::path& p) {
    if (sqlite3_open_v2(p.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      throw std::runtime_error("open " + p.string());
  }
  ~Sql() { sqlite3_close(db_); }
  /// Rows of `sql` with `args` bound in order (integers or strings); cells as JSON.
  std::vector<std::vector<json>> rows(const std::string& sql, const std::vector<json>& args = {}) const {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string(sqlite3_errmsg(db_)) + ": " + sql);
    for (size_t i = 0; i < args.size(); ++i) {
      const int at = static_cast<int>(i + 1);
      if (args[i].is_string())
        sqlite3_bind_text(s, at, args[i].get_ref<const std::string&>().c_str(), -1, SQLITE_TRANSIENT);
      else
        sqlite3_bind_int64(s, at, args[i].get<int64_t>());
    }
    std::vector<std::vector<json>> out;
    while (sqlite3_step(s) == SQLITE_ROW) {
      out.emplace_back();
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        const int t = sqlite3_column_type(s, c);
        if (t == SQLITE_NULL) out.back().push_back(nullptr);
        else if (t == SQLITE_INTEGER) out.back().push_back(sqlite3_column_int64(s, c));
        else if (t == SQLITE_FLOAT) out.back().push_back(sqlite3_column_double(s, c));
        else out.back().push_back(reinterpret_cast<const char*>(sqlite3_column_text(s, c)));
      }
    }
    sqlite3_finalize(s);
    return out;
  }
  int64_t one(const std::string& sql, const std::vector<json>& args = {}) const {
    const auto r = rows(sql, args);
    return r.empty() || r[0][0].is_null() ? 0 : r[0][0].get<int64_t>();
  }

 private:
  sqlite3* db_ = nullptr;
};

std::vector<hs::reports::RunStats> all_stats() {
  hs::storage::CaptureReader rd(capture().db);
  return hs::reports::compute_stats(rd);
}

std::vector<int64_t> complete_runs(const Sql& sql) {
  std::vector<int64_t> ids;
  for (const auto& r : sql.rows("SELECT id FROM RUNS WHERE status = 1 ORDER BY id")) ids.push_back(r[0].get<int64_t>());
  return ids;
}

// The module as the reports name it: FQN, "<root>" for ''.
const char* kModuleName = "CASE s.value WHEN '' THEN '<root>' ELSE s.value END";

TEST(Stats, EveryCompleteRunOfBothSourcesIsThere) {
  Sql sql(capture().db);
  const auto stats = all_stats();
  const auto ids = complete_runs(sql);
  ASSERT_EQ(stats.size(), ids.size());
  ASSERT_EQ(ids.size(), 5u);
  std::set<std::string> engines;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(stats[i].run, ids[i]);
    engines.insert(stats[i].engine);
  }
  EXPECT_EQ(engines, (std::set<std::string>{"libtorch", "import"}));
  EXPECT_EQ(stats[1].cell, "sharded/whole-hook/default");
}

TEST(Stats, HookTimeEqualsTheSql) {
  Sql sql(capture().db);
  int rows = 0;
  std::string query =
      "SELECT count(*), sum(h.end - h.start), min(h.end - h.start), max(h.end - h.start) FROM HOOK_EVENTS h "
      "JOIN StringIds k ON k.id = h.hookId JOIN StringIds s ON s.id = h.moduleId JOIN ENUM_HOOK_PHASE p ON "
      "p.id = h.phase WHERE h.runId = ? AND k.value = ? AND p.label = ? AND ";
  query.append(kModuleName).append(" = ?");
  for (const auto& s : all_stats()) {
    int64_t total = 0, count = 0;
    for (const auto& h : s.hook_time) {
      const auto r = sql.rows(query, {s.run, h.hook, h.phase, h.module});
      EXPECT_EQ(h.time.count, r[0][0]) << s.run << " " << h.hook << " " << h.module;
      EXPECT_EQ(h.time.total_ns, r[0][1]);
      EXPECT_EQ(h.time.min_ns, r[0][2]);
      EXPECT_EQ(h.time.max_ns, r[0][3]);
      EXPECT_DOUBLE_EQ(h.time.mean_ns, static_cast<double>(h.time.total_ns) / h.time.count);
      EXPECT_LE(h.time.min_ns, h.time.median_ns);
      EXPECT_LE(h.time.median_ns, h.time.max_ns);
      total += h.time.total_ns;
      count += h.time.count;
      ++rows;
    }
    EXPECT_EQ(count, sql.one("SELECT count(*) FROM HOOK_EVENTS WHERE runId = ?", {s.run}));
    EXPECT_EQ(total, sql.one("SELECT sum(end - start) FROM HOOK_EVENTS WHERE runId = ?", {s.run}));
    for (size_t i = 1; i < s.hook_time.size(); ++i)
      EXPECT_GE(s.hook_time[i - 1].time.total_ns, s.hook_time[i].time.total_ns) << "most time first";
  }
  EXPECT_GT(rows, 10);
}

TEST(Stats, HookMedianIsTheMiddleDuration) {
  Sql sql(capture().db);
  const auto stats = all_stats();
  const auto& h = stats[0].hook_time.front();
  const auto d = sql.rows(
      "SELECT h.end - h.start FROM HOOK_EVENTS h JOIN StringIds k ON k.id = h.hookId JOIN StringIds s ON s.id = "
      "h.moduleId JOIN ENUM_HOOK_PHASE p ON p.id = h.phase WHERE h.runId = ? AND k.value = ? AND p.label = ? AND " +
          std::string(kModuleName) + " = ? ORDER BY 1",
      {stats[0].run, h.hook, h.phase, h.module});
  ASSERT_EQ(static_cast<int64_t>(d.size()), h.time.count);
  const size_t m = d.size() / 2;
  const double want = d.size() % 2 ? d[m][0].get<double>() : (d[m - 1][0].get<double>() + d[m][0].get<double>()) / 2;
  EXPECT_DOUBLE_EQ(h.time.median_ns, want);
}

TEST(Stats, AlignDevicesHookCostPerDeviceEqualsTheSql) {
  Sql sql(capture().db);
  int checked = 0;
  for (const auto& s : all_stats()) {
    if (s.engine != "libtorch") continue;
    std::set<std::string> devices;
    for (const auto& h : s.hook_time_by_device) {
      if (h.device.empty()) continue;
      devices.insert(h.device);
      // A module's execution device: the device of its module compute.
      const auto r = sql.rows(
          "SELECT count(*), sum(h.end - h.start), count(DISTINCT h.moduleId) FROM HOOK_EVENTS h JOIN StringIds k ON "
          "k.id = h.hookId JOIN ENUM_HOOK_PHASE p ON p.id = h.phase WHERE h.runId = ?1 AND k.value = ?2 AND "
          "p.label = ?3 AND h.moduleId IN (SELECT c.moduleId FROM MODULE_COMPUTE c JOIN StringIds d ON d.id = "
          "c.device WHERE c.runId = ?1 AND d.value = ?4)",
          {s.run, h.hook, h.phase, h.device});
      EXPECT_EQ(h.time.count, r[0][0]) << s.run << " " << h.hook << " " << h.phase << " on " << h.device;
      EXPECT_EQ(h.time.total_ns, r[0][1]);
      EXPECT_EQ(h.modules, r[0][2]);
      ++checked;
    }
    if (s.scenario == "sharded") {
      EXPECT_EQ(devices, (std::set<std::string>{"0", "1"})) << s.run;
    }
    int64_t pooled = 0, by_module = 0;
    for (const auto& h : s.hook_time_by_device) pooled += h.time.total_ns;
    for (const auto& h : s.hook_time) by_module += h.time.total_ns;
    EXPECT_EQ(pooled, by_module);
  }
  EXPECT_GT(checked, 4);
}

TEST(Stats, TotalsEqualTheSql) {
  Sql sql(capture().db);
  // The union of properly nested spans is the sum of the outermost ones.
  auto outermost = [&](const std::string& table, int64_t run) {
    return sql.one("SELECT sum(a.end - a.start) FROM " + table + " a WHERE a.runId = ?1 AND NOT EXISTS (SELECT 1 FROM " +
                       table + " b WHERE b.runId = ?1 AND b.start <= a.start AND b.end >= a.end AND (b.start < a.start "
                       "OR b.end > a.end OR b.rowid < a.rowid))",
                   {run});
  };
  for (const auto& s : all_stats()) {
    const auto& t = s.totals;
    EXPECT_EQ(t.hook_calls, sql.one("SELECT count(*) FROM HOOK_EVENTS WHERE runId = ?", {s.run}));
    EXPECT_EQ(t.hook_busy_ns, outermost("HOOK_EVENTS", s.run)) << s.run;
    EXPECT_EQ(t.disabled_entries, sql.one("SELECT count(*) FROM DISABLED_SCOPES WHERE runId = ?", {s.run}));
    EXPECT_EQ(t.disabled_busy_ns, outermost("DISABLED_SCOPES", s.run)) << s.run;
    // Transfers moved bytes; calls that moved nothing are counted apart.
    EXPECT_EQ(t.transfers, sql.one("SELECT count(*) FROM TRANSFERS WHERE runId = ? AND bytes > 0", {s.run}));
    EXPECT_EQ(t.transfer_bytes, sql.one("SELECT sum(bytes) FROM TRANSFERS WHERE runId = ?", {s.run}));
    EXPECT_EQ(t.transfer_ns, sql.one("SELECT sum(end - start) FROM TRANSFERS WHERE runId = ? AND bytes > 0", {s.run}));
    EXPECT_EQ(t.empty_transfer_calls, sql.one("SELECT count(*) FROM TRANSFERS WHERE runId = ? AND bytes = 0", {s.run}));
    EXPECT_EQ(t.empty_transfer_ns, sql.one("SELECT coalesce(sum(end - start), 0) FROM TRANSFERS WHERE runId = ? AND bytes = 0", {s.run}));
    EXPECT_EQ(t.onload_bytes, sql.one("SELECT sum(bytes) FROM WEIGHT_SWAPS WHERE runId = ? AND onload = 1", {s.run}));
    EXPECT_EQ(t.onload_ns, sql.one("SELECT sum(end - start) FROM WEIGHT_SWAPS WHERE runId = ? AND onload = 1", {s.run}));
    EXPECT_EQ(t.offloads, sql.one("SELECT count(*) FROM WEIGHT_SWAPS WHERE runId = ? AND onload = 0", {s.run}));
    // Two facts, never one figure standing in for the other.
    EXPECT_EQ(t.recorded_disabled_scope_entries, sql.one("SELECT count(*) FROM GRAPH_BREAKS WHERE runId = ?", {s.run}));
    EXPECT_EQ(t.log_graph_break_records, sql.one("SELECT count(*) FROM DYNAMO_GRAPH_BREAKS WHERE runId = ?", {s.run}));
    if (s.engine == "libtorch") {
      EXPECT_GT(t.hook_busy_ns, 0);
      EXPECT_GT(t.disabled_busy_ns, 0);
      EXPECT_GT(s.scenario == "sharded" ? t.transfer_bytes : t.onload_bytes, 0) << s.run;
    }
  }
}

TEST(Stats, DeviceComputeEqualsTheSql) {
  Sql sql(capture().db);
  for (const auto& s : all_stats()) {
    int64_t calls = 0;
    for (const auto& d : s.device_compute) {
      const std::string where =
          "FROM MODULE_COMPUTE a JOIN StringIds dv ON dv.id = a.device JOIN StringIds m ON m.id = a.moduleId WHERE "
          "a.runId = ?1 AND dv.value = ?2 AND m.value <> ''";
      EXPECT_EQ(d.calls, sql.one("SELECT count(*) " + where, {s.run, d.device}));
      EXPECT_EQ(d.modules, sql.one("SELECT count(DISTINCT a.moduleId) " + where, {s.run, d.device}));
      // Busy: the outermost spans of the device (module spans nest).
      EXPECT_EQ(d.busy_ns, sql.one("SELECT sum(a.end - a.start) " + where +
                                       " AND NOT EXISTS (SELECT 1 FROM MODULE_COMPUTE b JOIN StringIds bm ON bm.id = "
                                       "b.moduleId WHERE b.runId = ?1 AND b.device = a.device AND bm.value <> '' AND "
                                       "b.start <= a.start AND b.end >= a.end AND (b.start < a.start OR b.end > a.end "
                                       "OR b.rowid < a.rowid))",
                                   {s.run, d.device}))
          << s.run << " " << d.device;
      calls += d.calls;
    }
    EXPECT_EQ(calls, sql.one("SELECT count(*) FROM MODULE_COMPUTE a JOIN StringIds m ON m.id = a.moduleId WHERE "
                             "a.runId = ? AND m.value <> ''",
                             {s.run}));
    if (s.engine == "libtorch") {
      EXPECT_FALSE(s.device_compute.empty());
    }
  }
}

TEST(Stats, TransfersAndWeightSwapsEqualTheSql) {
  Sql sql(capture().db);
  for (const auto& s : all_stats()) {
    auto want = sql.rows(
        "SELECT o.name, src.value, dst.value, t.emulated, count(*), sum(t.bytes), sum(t.end - t.start) FROM TRANSFERS t "
        "JOIN StringIds src ON src.id = t.src JOIN StringIds dst ON dst.id = t.dst JOIN ENUM_CUDA_MEMCPY_OPER o ON o.id "
        "= t.copyKind WHERE t.runId = ? GROUP BY t.copyKind, t.src, t.dst, t.emulated",
        {s.run});
    ASSERT_EQ(s.transfers.size(), want.size()) << s.run;
    for (const auto& t : s.transfers) {
      // nsys' enum name of the kind: 'CUDA_MEMCPY_KIND_' + the short name in capitals.
      std::string kind_name = "CUDA_MEMCPY_KIND_" + t.kind;
      for (auto& c : kind_name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      int matched = 0;
      for (const auto& w : want)
        if (w[0] == kind_name && w[1] == t.src && w[2] == t.dst && w[3] == static_cast<int64_t>(t.emulated)) {
          ++matched;
          EXPECT_EQ(t.count, w[4]);
          EXPECT_EQ(t.bytes, w[5]);
          EXPECT_EQ(t.total_ns, w[6]);
          EXPECT_DOUBLE_EQ(t.gb_per_s, static_cast<double>(t.bytes) / static_cast<double>(t.total_ns));
        }
      EXPECT_EQ(matched, 1) << t.kind << " " << t.src << " -> " << t.dst;
    }
    want = sql.rows(
        "SELECT w.onload, e.label, d.value, count(*), sum(w.bytes), sum(w.end - w.start) FROM WEIGHT_SWAPS w JOIN "
        "ENUM_WEIGHT_SOURCE e ON e.id = w.source JOIN StringIds d ON d.id = w.device WHERE w.runId = ? GROUP BY "
        "w.onload, w.source, w.device",
        {s.run});
    ASSERT_EQ(s.weight_swaps.size(), want.size()) << s.run;
    for (const auto& w : s.weight_swaps) {
      int matched = 0;
      for (const auto& r : want)
        if (r[0] == static_cast<int64_t>(w.kind == "onload") && r[1] == w.src && r[2] == w.dst) {
          ++matched;
          EXPECT_EQ(w.count, r[3]);
          EXPECT_EQ(w.bytes, r[4]);
          EXPECT_EQ(w.total_ns, r[5]);
        }
      EXPECT_EQ(matched, 1) << w.kind << " " << w.src << " -> " << w.dst;
    }
    if (s.engine == "libtorch" && s.scenario == "cpu-offload") {
      EXPECT_EQ(s.weight_swaps.front().kind, "onload");
    }
  }
}

TEST(Stats, CompilerDisabledTimeEqualsTheSql) {
  Sql sql(capture().db);
  int checked = 0;
  for (const auto& s : all_stats()) {
    int64_t entries = 0;
    for (const auto& d : s.compiler_disabled) {
      const auto r = sql.rows(
          "SELECT count(*), sum(x.end - x.start), min(x.end - x.start), max(x.end - x.start), sum(x.depth > 1) FROM "
          "DISABLED_SCOPES x JOIN StringIds f ON f.id = x.functionId WHERE x.runId = ? AND f.value = ?",
          {s.run, d.function});
      EXPECT_EQ(d.time.count, r[0][0]) << d.function;
      EXPECT_EQ(d.time.total_ns, r[0][1]);
      EXPECT_EQ(d.time.min_ns, r[0][2]);
      EXPECT_EQ(d.time.max_ns, r[0][3]);
      EXPECT_EQ(d.nested, r[0][4]);
      entries += d.time.count;
      ++checked;
    }
    EXPECT_EQ(entries, sql.one("SELECT count(*) FROM DISABLED_SCOPES WHERE runId = ?", {s.run}));
  }
  EXPECT_GT(checked, 0);
}

TEST(Stats, GraphBreaksGroupBySiteLikeTheSql) {
  Sql sql(capture().db);
  int libtorch = 0, dynamo = 0;
  for (const auto& s : all_stats()) {
    std::map<std::pair<std::string, std::string>, int64_t> want;
    for (const auto& r : sql.rows("SELECT f.value, " + std::string(kModuleName) +
                                      ", count(*) FROM GRAPH_BREAKS g JOIN StringIds f ON f.id = g.functionId JOIN "
                                      "StringIds s ON s.id = g.moduleId WHERE g.runId = ? GROUP BY 1, 2",
                                  {s.run}))
      want[{r[0].get<std::string>(), r[1].get<std::string>()}] = r[2].get<int64_t>();
    for (const auto& r : sql.rows("SELECT coalesce(c.value, ''), coalesce(u.value, ''), count(*) FROM "
                                  "DYNAMO_GRAPH_BREAKS g LEFT JOIN StringIds c ON c.id = g.gbCodeId LEFT JOIN StringIds "
                                  "u ON u.id = g.userFrameId WHERE g.runId = ? GROUP BY 1, 2",
                                  {s.run}))
      want[{r[0].get<std::string>(), r[1].get<std::string>()}] = r[2].get<int64_t>();
    ASSERT_EQ(s.graph_breaks.size(), want.size()) << s.run;
    for (const auto& b : s.graph_breaks) {
      EXPECT_EQ(b.count, want[std::pair(b.site, b.where)]) << b.source << " " << b.site << " " << b.where;
      (b.source == "log" ? dynamo : libtorch) += 1;
    }
    for (size_t i = 1; i < s.graph_breaks.size(); ++i) {
      const auto &a = s.graph_breaks[i - 1], &b = s.graph_breaks[i];
      EXPECT_TRUE(a.count > b.count || (a.count == b.count && std::tie(a.site, a.where) < std::tie(b.site, b.where)))
          << "sorted by count, then site";
    }
  }
  EXPECT_GT(libtorch, 0);
  EXPECT_GT(dynamo, 0);
}

// An imported compile log's counts are the log's (graphs − 1 over every compile it holds, which
// may span many forwards): explain and the report label them so, not as explain's of one forward.
TEST(StatsCli, AnImportedLogsBreakCountIsLabelledTheLogs) {
  Sql sql(capture().db);
  const int64_t run = sql.rows("SELECT id FROM RUNS WHERE engine = 'import'").at(0).at(0).get<int64_t>();
  auto r = hookscope({"explain", capture().db.string(), "--run", std::to_string(run), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json d = json::parse(r.out);
  EXPECT_EQ(d["counts_from"], "log") << r.out;
  // Dynamo's name holds only explain's figure: the log's graphs − 1 has its own.
  EXPECT_TRUE(d["graph_break_count"].is_null()) << r.out;
  EXPECT_EQ(d["log_graph_break_count"].get<int64_t>(), std::max<int64_t>(d["log_graphs"].get<int64_t>() - 1, 0)) << r.out;
  r = hookscope({"explain", capture().db.string(), "--run", std::to_string(run)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Graphs − 1 in the log: " + std::to_string(d["log_graph_break_count"].get<int64_t>()) +
                       "  (from the compile log: one forward's graph_break_count only if the log holds one)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("torch._dynamo.explain of one forward"), std::string::npos) << r.out;
  r = hookscope({"report", capture().db.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("### graph-break records in the log (each run's compile log, every compile of the run"),
            std::string::npos)
      << r.out;
}

TEST(StatsCli, CsvHasTheHeaderAndOneLinePerRow) {
  Sql sql(capture().db);
  const auto r = hookscope({"stats", capture().db.string(), "--report", "transfers", "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, "run,engine,cell,kind,src,dst,emulated,count,bytes,total_ns,gb_per_s");
  int64_t lines = 0;
  while (std::getline(in, line)) lines += !line.empty();
  EXPECT_EQ(lines, sql.one("SELECT count(*) FROM (SELECT 1 FROM TRANSFERS t JOIN RUNS r ON r.id = t.runId WHERE "
                           "r.status = 1 GROUP BY t.runId, t.src, t.dst, t.copyKind, t.emulated)"));
  EXPECT_GT(lines, 0);

  // -o: one file per report, named as nsys stats names them.
  const fs::path out = capture().dir / "csv" / "stats.csv";
  fs::create_directories(out.parent_path());
  const auto w = hookscope({"stats", capture().db.string(), "--format", "csv", "-o", out.string()});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  for (const auto& name : hs::reports::stats_report_names()) {
    const fs::path f = capture().dir / "csv" / ("stats_" + name + ".csv");
    ASSERT_TRUE(fs::exists(f)) << f;
    EXPECT_EQ(hs::test::read_file(f).rfind("run,engine,cell,", 0), 0u) << f;
  }
  const std::string hooks = hs::test::read_file(capture().dir / "csv" / "stats_hook_time.csv");
  EXPECT_EQ(hooks.substr(0, hooks.find('\n')),
            "run,engine,cell,hook,phase,module,device,count,total_ns,mean_ns,median_ns,min_ns,max_ns");
}

TEST(StatsCli, JsonParsesAndAddsUp) {
  Sql sql(capture().db);
  const auto r = hookscope({"stats", capture().db.string(), "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["units"]["time"], "ns");
  EXPECT_EQ(doc["runs"].size(), complete_runs(sql).size());
  for (const auto& name : hs::reports::stats_report_names()) EXPECT_TRUE(doc["reports"].contains(name)) << name;
  int64_t bytes = 0;
  for (const auto& row : doc["reports"]["weight_swaps"])
    if (row["kind"] == "onload") bytes += row["bytes"].get<int64_t>();
  EXPECT_EQ(bytes, sql.one("SELECT sum(w.bytes) FROM WEIGHT_SWAPS w JOIN RUNS r ON r.id = w.runId WHERE r.status = 1 "
                           "AND w.onload = 1"));
  int64_t hook_ns = 0;
  for (const auto& row : doc["reports"]["hook_time"]) hook_ns += row["total_ns"].get<int64_t>();
  EXPECT_EQ(hook_ns, sql.one("SELECT sum(h.end - h.start) FROM HOOK_EVENTS h JOIN RUNS r ON r.id = h.runId WHERE "
                             "r.status = 1"));
}

TEST(StatsCli, RunSelectsOneRun) {
  Sql sql(capture().db);
  const int64_t id = complete_runs(sql)[1];
  const auto r = hookscope({"stats", capture().db.string(), "--run", std::to_string(id), "--format", "json",
                            "--report", "hook_time,graph_breaks"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["runs"].size(), 1u);
  EXPECT_EQ(doc["runs"][0]["run"], id);
  EXPECT_EQ(doc["reports"].size(), 2u);
  ASSERT_FALSE(doc["reports"]["hook_time"].empty());
  for (const auto& [name, rows] : doc["reports"].items())
    for (const auto& row : rows) EXPECT_EQ(row["run"], id) << name;
  // The table is for people: titles, times in ns as nsys stats prints them (1,234,567).
  const auto t = hookscope({"stats", capture().db.string(), "--run", std::to_string(id), "--report", "hook_time_by_device"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("** Hook time by hook class, phase and execution device (hook_time_by_device)"), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("total (ns)"), std::string::npos) << t.out;
  EXPECT_TRUE(std::regex_search(t.out, std::regex(" [0-9]{1,3}(,[0-9]{3})+ "))) << "grouped ns: " << t.out;
  EXPECT_NE(t.out.find("AlignDevicesHook"), std::string::npos) << t.out;
  // A report with nothing to show says what that means (no GPU on this machine: no CUPTI rows).
  const auto g = hookscope({"stats", capture().db.string(), "--run", std::to_string(id), "--report", "gpu_by_caller"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("(no rows: no GPU activity recorded"), std::string::npos) << g.out;
}

TEST(StatsCli, BadArgumentsAreNamed) {
  const std::string db = capture().db.string();
  auto r = hookscope({"stats", db, "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
  r = hookscope({"stats", db, "--report", "hook_time,nope"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'nope'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("graph_breaks"), std::string::npos) << "the choices are listed: " << r.err;
  r = hookscope({"stats", db, "--format", "xml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'xml'"), std::string::npos) << r.err;
  r = hookscope({"stats", db, "--run", "999"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no run 999"), std::string::npos) << r.err;
  r = hookscope({"stats", db, "--format", "json", "-o", db});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the capture being read"), std::string::npos) << r.err;
  EXPECT_TRUE(hs::storage::CaptureReader(db).finalized()) << "the capture is untouched";
  // The library names a bad report too.
  hs::storage::CaptureReader rd(db);
  try {
    hs::reports::compute_stats(rd, {{"nope"}, std::nullopt});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
  r = hookscope({"stats", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("hookscope stats out/demo.sqlite --report hook_time_by_device --run 2"), std::string::npos)
      << r.out;
}

TEST(StatsReport, ReportJsonCarriesEveryRunsStats) {
  hs::storage::CaptureReader rd(capture().db);
  const json report = hs::reports::build_report(rd);
  std::map<int64_t, hs::reports::RunStats> by_id;
  for (auto& s : all_stats()) by_id[s.run] = s;
  ASSERT_EQ(report["runs"].size(), by_id.size());
  for (const auto& run : report["runs"]) {
    ASSERT_TRUE(run.contains("stats")) << run["id"];
    const auto& s = by_id.at(run["id"].get<int64_t>());
    EXPECT_EQ(run["stats"]["totals"], hs::reports::stats_totals_json(s.totals));
    // Per module hook rows stay in `hookscope stats` (they would make report.json megabytes).
    EXPECT_FALSE(run["stats"].contains("hook_time")) << "absent, not an empty list that reads as no hook time";
    EXPECT_EQ(run["stats"]["hook_time_by_device"].size(), s.hook_time_by_device.size());
    EXPECT_EQ(run["stats"]["transfers"].size(), s.transfers.size());
    EXPECT_EQ(run["stats"]["graph_breaks"].size(), s.graph_breaks.size());
    if (!s.hook_time_by_device.empty()) {
      EXPECT_EQ(run["stats"]["hook_time_by_device"][0]["total_ns"], s.hook_time_by_device[0].time.total_ns);
    }
  }
}

TEST(StatsReport, MarkdownSaysWhereTheTimeGoes) {
  const fs::path dir = hs::test::scratch_dir("stats-report-" + std::to_string(getpid()));
  auto r = hookscope({"capture", "--engine", "libtorch", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                      "--scenarios", "sharded", "--policies", "whole-hook", "--modes", "eager,default", "--fullgraph",
                      "both", "--devices", "2", "--prompt-ids", "5,17,99,3", "--max-new-tokens", "2", "--repeats", "1",
                      "--warmup", "0", "--out", (dir / "c.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = hookscope({"report", (dir / "c.sqlite").string(), "--json", (dir / "report.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("### where the time goes");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string md = r.out.substr(at);
  // One row per eager / compiled run, none for the fullgraph run.
  EXPECT_NE(md.find("| libtorch | sharded | whole-hook | eager | "), std::string::npos) << md;
  EXPECT_NE(md.find("| libtorch | sharded | whole-hook | default | "), std::string::npos) << md;
  size_t rows = 0;
  for (size_t p = md.find("| libtorch |"); p != std::string::npos; p = md.find("| libtorch |", p + 1)) ++rows;
  EXPECT_EQ(rows, 2u) << md;
  // The sharded runs move activations: bytes, time and rate.
  EXPECT_NE(md.find(" GB/s) |"), std::string::npos) << md;
  // The hook time cell is the run's hook busy time in ms and its calls, as report.json says.
  const json report = hs::test::read_json(dir / "report.json");
  for (const auto& run : report["runs"]) {
    if (run["mode"] != "default" || run["fullgraph"].get<bool>()) continue;
    const json& t = run["stats"]["totals"];
    char cell[64];
    std::snprintf(cell, sizeof cell, "| %.1f (%lld) |", t["hook_busy_ns"].get<double>() / 1e6,
                  static_cast<long long>(t["hook_calls"].get<int64_t>()));
    EXPECT_NE(md.find(std::string("| default ") + cell), std::string::npos) << cell << "\n" << md;
  }
}

}  // namespace

// Names and log text from a capture reach a terminal as text: an escape sequence in a scenario
// name (a hand-edited or imported capture) or in a file name an error repeats is shown as
// `\x1b`, so it cannot recolour the terminal or set its title; a name's newline or tab as
// `\x0a` / `\x09`, so it cannot fake a line of output; a bidi override as `\u202e`.
TEST(StatsCli, EscapeSequencesReachTheTerminalAsText) {
  const fs::path db = hs::test::edited_copy(
      capture().db, capture().dir / "escapes.sqlite",
      "UPDATE RUNS SET scenario = 'a' || char(27) || ']0;pwned' || char(7) || 'b' || char(10) || "
      "'hookscope: FAKE' || char(8238) || 'x', policy = 'p' || char(9) || 'q'");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"explain", db.string()},
                                               {"explain", db.string(), "--run", "1"},
                                               {"stats", db.string(), "--report", "transfers"}}) {
    const auto r = hookscope(args);
    ASSERT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_EQ(r.out.find_first_of("\x1b\x07\t"), std::string::npos) << args[0] << ": " << r.out;
    EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << args[0] << ": U+202E reorders the line";
    EXPECT_NE(r.out.find("a\\x1b]0;pwned\\x07b"), std::string::npos) << args[0] << ": " << r.out;
    if (args[0] == "explain") {  // stats cuts a long cell
      EXPECT_NE(r.out.find("a\\x1b]0;pwned\\x07b\\x0ahookscope: FAKE\\u202ex"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("p\\x09q"), std::string::npos) << r.out;
    }
  }
  const auto r = hookscope({"report", (capture().dir / "no\x1b[31m.sqlite").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no\\x1b[31m.sqlite"), std::string::npos) << r.err;
}

// `import --model` names the model of an imported run: report and the two-capture comparison
// show it (they showed "?").
TEST(StatsCli, AnImportedRunsModelIsReported) {
  const fs::path log = hs::test::cached_oracle("compile_log", "compile_log.py") / "torch_trace";
  json ids;
  for (const char* model : {"org/model-a/", "org/model-b"}) {  // a folder's trailing slash: the same name
    const fs::path db = capture().dir / (std::string("imported-") + std::string(model + 4, 7) + ".sqlite");
    fs::remove(db);
    auto r = hookscope({"import", "--compile-log", log.string(), "--cell", "hooks", "--model", model, "-o", db.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = hookscope({"report", db.string(), "--json", (db.string() + ".json")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ids.push_back(hs::test::read_json(db.string() + ".json")["model"]["id"]);
  }
  EXPECT_EQ(ids, json({"model-a", "model-b"}));
  const auto r = hookscope({"report", (capture().dir / "imported-model-a.sqlite").string(),
                            (capture().dir / "imported-model-b.sqlite").string(), "--json",
                            (capture().dir / "imported-diff.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json diff = hs::test::read_json(capture().dir / "imported-diff.json");
  bool model_differs = false;
  for (const auto& d : diff["settings_differ"]) model_differs |= d.value("setting", "") == "model";
  EXPECT_TRUE(model_differs) << diff.dump(1);
}

// An import appended to a capture that fails says which run stays there, marked failed, and
// explain shows that run's error.
TEST(StatsCli, AFailedAppendNamesItsRunAndExplainShowsItsError) {
  const fs::path db = capture().dir / "failed-append.sqlite";
  fs::copy_file(capture().db, db, fs::copy_options::overwrite_existing);
  const int64_t last = Sql(db).one("SELECT max(id) FROM RUNS"), ok = Sql(db).one("SELECT count(*) FROM RUNS WHERE status = 1");
  const fs::path log = hs::test::cached_oracle("compile_log", "compile_log.py") / "torch_trace";
  auto r = hookscope({"import", "--compile-log", log.string(), "--cell", "no-such-cell", "--append", "-o", db.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string run = std::to_string(last + 1);
  EXPECT_NE(r.err.find("[hookscope] run " + run + " stays in " + db.string() + ", marked failed"), std::string::npos) << r.err;
  EXPECT_EQ(Sql(db).one("SELECT count(*) FROM RUNS WHERE status = 1"), ok) << "the earlier runs are all there";
  EXPECT_EQ(Sql(db).one("SELECT count(*) FROM RUNS WHERE id > ?", {last}), 1);
  r = hookscope({"explain", db.string(), "--run", run});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no hookscope_cell marker for cell 'no-such-cell'"), std::string::npos) << r.out;
}

namespace {
// A copy of the capture named `name`, edited by `sql` (as a hand-edited or damaged file).
fs::path edited_copy(const std::string& name, const std::string& sql) {
  return hs::test::edited_copy(capture().db, capture().dir / (name + ".sqlite"), sql);
}
}  // namespace

// Rows no capture writes (an end before its start, a time that is no integer or lies past
// ±2^62 ns, a negative byte count) are refused by every command that sums or draws them,
// naming the run, the table and the first such row: they printed negative durations and
// overflowed sums, and the viewer drew the run empty.
TEST(DamagedCapture, RowsNoCaptureWritesAreRefusedNamingRunTableAndRow) {
  struct Case {
    const char* name;
    const char* sql;
    const char* table;
    const char* run;
    const char* shows;  // the row as the message quotes it
    const char* why;
  };
  const Case cases[] = {
      {"he-backwards", "UPDATE HOOK_EVENTS SET start = end + 1000 WHERE rowid = (SELECT min(rowid) FROM HOOK_EVENTS WHERE runId = 1)",
       "HOOK_EVENTS", "1", ", end ", ") it ends before it starts: "},
      {"he-text", "UPDATE HOOK_EVENTS SET start = 'abc' WHERE rowid = (SELECT max(rowid) FROM HOOK_EVENTS WHERE runId = 1)",
       "HOOK_EVENTS", "1", "start 'abc'", ") its start is not an integer: "},
      {"he-max", "UPDATE HOOK_EVENTS SET end = 9223372036854775807 WHERE runId = 1 AND rowid % 7 = 0", "HOOK_EVENTS", "1",
       "end 9223372036854775807", ") its end lies outside [-2^62, 2^62) ns: "},
      {"tr-negative", "UPDATE TRANSFERS SET bytes = -1000 WHERE runId = 1", "TRANSFERS", "1", "bytes -1000",
       ") its byte count is negative: "},
      {"sw-real", "UPDATE WEIGHT_SWAPS SET bytes = 2.5 WHERE runId = 3", "WEIGHT_SWAPS", "3", "bytes 2.5",
       ") its byte count is not an integer: "},
      {"he-sum", "UPDATE HOOK_EVENTS SET start = 0, end = 4611686018427387903 WHERE rowid IN (SELECT rowid FROM "
                 "HOOK_EVENTS WHERE runId = 1 LIMIT 3)",
       "HOOK_EVENTS", "1", "", ""},
      // Both times out of range, their difference past int64 (the page pass subtracted it: UBSan).
      {"he-far", "UPDATE HOOK_EVENTS SET start = -7523372036854725808, end = 1700000000000080000 WHERE rowid = "
                 "(SELECT min(rowid) FROM HOOK_EVENTS WHERE runId = 1)",
       "HOOK_EVENTS", "1", "start -7523372036854725808", ") its start lies outside [-2^62, 2^62) ns: "},
      {"mc-min", "UPDATE MEMORY_COUNTERS SET start = -9223372036854775808 WHERE runId = 3", "MEMORY_COUNTERS", "3",
       "start -9223372036854775808", ") its start lies outside [-2^62, 2^62) ns: "},
  };
  for (const Case& c : cases) {
    const fs::path db = edited_copy(c.name, c.sql);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"stats", db.string()},
          {"stats", db.string(), "--run", c.run},
          {"report", db.string(), "--markdown", (capture().dir / (std::string(c.name) + ".md")).string()},
          {"explain", db.string(), "--run", c.run},
          {"export", db.string(), "--run", c.run, "--format", "chrome", "-o",
           (capture().dir / (std::string(c.name) + ".json")).string()}}) {
      const auto r = hookscope(args);
      EXPECT_EQ(r.exit_code, 1) << c.name << " " << args[0] << ": " << r.out;
      const bool sum = *c.shows == 0;  // every row in range, their durations summing past int64
      for (const std::string& part :
           {std::string("run ") + c.run + ": ",
            sum ? std::string("the durations of ") + c.table + " sum past 2^63"
                : std::string(" of ") + c.table + " that no capture writes; the first (rowid ",
            std::string(c.shows), std::string(c.why), std::string("the file was edited or is damaged")})
        EXPECT_NE(r.err.find(part), std::string::npos) << c.name << " " << args[0] << ": no '" << part << "' in " << r.err;
    }
    EXPECT_FALSE(fs::exists(capture().dir / (std::string(c.name) + ".md"))) << "nothing written";
    EXPECT_FALSE(fs::exists(capture().dir / (std::string(c.name) + ".json"))) << "nothing written";
  }
  // The capture as written passes every check (and the imported run's diagnostics, tied to no time).
  for (const auto& rec : hs::storage::CaptureReader(capture().db).runs())
    EXPECT_NO_THROW(hs::storage::CaptureReader(capture().db).check_rows(rec.id)) << rec.id;
}

// check_rows proves a closed capture's rows in one pass over its pages, once per reader: a row
// another connection edits afterwards is still found (the pass is made again after a commit),
// the message is SQLite's, and a run the pass cannot prove is still checked through SQLite.
TEST(DamagedCapture, RowsEditedWhileAReaderIsOpenAreCheckedAgain) {
  const fs::path db = edited_copy("edited-later", "SELECT 1");
  const hs::storage::CaptureReader reader(db);
  for (const auto& rec : reader.runs()) EXPECT_NO_THROW(reader.check_rows(rec.id)) << rec.id;
  {
    sqlite3* w = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &w), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(w,
                           "UPDATE HOOK_EVENTS SET start = end + 1000 WHERE rowid = "
                           "(SELECT min(rowid) FROM HOOK_EVENTS WHERE runId = 1)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(w);
  }
  try {
    reader.check_rows(1);
    ADD_FAILURE() << "an end before its start, written after the first check, was not found";
  } catch (const hs::storage::CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("run 1: 1 row of HOOK_EVENTS that no capture writes; the first (rowid "),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(reader.check_rows(3)) << "another run's rows are still whole";
}

// A text of megabytes in a capture (a module's name, a run's scenario, policy and mode: an edited
// file, an import's flags) is shown cut, never copied whole into every row: stats wrote a 10 MB
// module name once per row (233 MB of JSON), the report its cell names once per table (188 MB),
// the Chrome export the module once per event (363 MB).
TEST(DamagedCapture, AHugeNameIsShownCutNotRepeatedPerRow) {
  const std::string zeros = "hex(zeroblob(524288))";  // 1 MiB of '0'
  const fs::path db = edited_copy(
      "huge-names",
      "UPDATE StringIds SET value = replace(" + zeros + ", '0', 'M') WHERE id = (SELECT moduleId FROM HOOK_EVENTS "
      "GROUP BY moduleId ORDER BY count(*) DESC LIMIT 1); UPDATE RUNS SET scenario = " + zeros + ", policy = 'p' || " +
      zeros + ", mode = 'm' || " + zeros + " WHERE id = 1");
  const fs::path dir = hs::test::scratch_dir("huge-names-out");
  const std::vector<std::pair<std::vector<std::string>, size_t>> commands = {
      // (command, the most bytes of output allowed: the stats JSON names each run's cell whole once)
      {{"stats", db.string(), "--format", "json", "-o", (dir / "stats.json").string()}, 8u << 20},
      {{"stats", db.string(), "--format", "csv", "-o", (dir / "stats.csv").string()}, 1u << 20},
      {{"report", db.string(), "--markdown", (dir / "report.md").string(), "--json", (dir / "report.json").string(),
        "--html", (dir / "report.html").string()}, 1u << 20},
      {{"export", db.string(), "--run", "1", "-o", (dir / "trace.json").string()}, 8u << 20},
      {{"export", db.string(), "--run", "1", "--format", "csv", "-o", dir.string()}, 8u << 20},
      {{"explain", db.string()}, 1u << 20},
      {{"explain", db.string(), "--run", "1"}, 1u << 20},
  };
  // Stats cuts a row's text at 200 bytes, the report's pictures a title at 1000, the Chrome and CSV
  // exports at 4 KiB and 64 KiB (their sizes bound them below): none holds the name whole.
  const std::string whole_module(1001, 'M');
  for (const auto& [args, most] : commands) {
    SCOPED_TRACE(args[0] + " " + args.back());
    const auto r = hookscope(args);
    ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
    EXPECT_LT(r.out.size(), most);
    EXPECT_EQ(r.out.find(whole_module), std::string::npos);
    bool cut = false;  // some output shows a name cut
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string text = hs::test::read_file(e.path());
      EXPECT_LT(text.size(), most) << e.path();
      if (args[0] != "export") {
        EXPECT_EQ(text.find(whole_module), std::string::npos) << e.path() << ": cut";
      }
      cut |= text.find("MMM...") != std::string::npos || text.find("000...") != std::string::npos;
      fs::remove(e.path());
    }
    cut |= r.out.find("000...") != std::string::npos;  // explain's listing
    EXPECT_TRUE(cut);
  }
  // What the readers hold: every row naming the module shares its one copy of the name, and the
  // statistics, grouped by the whole name, keep it cut (once per row of each run's statistics,
  // not once per hook call: a 10 MB name over 244 calls had taken 3 GB resident).
  hs::storage::CaptureReader rd(db);
  hs::storage::StringTables tables;
  std::set<const void*> copies;
  for (const auto& h : rd.shared_rows<hs::storage::SharedHookEventRow>(1, tables))
    if (h.module.size() == (1u << 20)) copies.insert(h.module.key());
  EXPECT_EQ(copies.size(), 1u);
  bool module_row = false;
  for (const auto& run : hs::reports::compute_stats(rd))
    for (const auto& row : run.hook_time) {
      EXPECT_LE(row.module.size(), hs::reports::kMaxStatsCell);
      module_row |= row.module.starts_with("MMM") && row.module.ends_with("...");
    }
  EXPECT_TRUE(module_row) << "the huge module's rows are there, cut";
}

// One text under two StringIds ids (an edited or merged file) is one name: the statistics,
// which group hook calls by their table entry, merge the two entries' groups as SQL's GROUP BY
// the text would. Half of the busiest module's hook rows are moved to a copy of its name.
TEST(DamagedCapture, OneNameUnderTwoIdsIsOneRow) {
  const fs::path db = edited_copy(
      "two-ids",
      "INSERT INTO StringIds (id, value) SELECT (SELECT max(id) + 1 FROM StringIds), value FROM StringIds WHERE id = "
      "(SELECT moduleId FROM HOOK_EVENTS GROUP BY moduleId ORDER BY count(*) DESC LIMIT 1); "
      "UPDATE HOOK_EVENTS SET moduleId = (SELECT max(id) FROM StringIds) WHERE rowid % 2 = 0 AND moduleId = "
      "(SELECT moduleId FROM HOOK_EVENTS GROUP BY moduleId ORDER BY count(*) DESC LIMIT 1)");
  auto rows = [](const fs::path& file) {
    std::map<std::tuple<int64_t, std::string, std::string, std::string>, std::pair<int64_t, int64_t>> out;
    hs::storage::CaptureReader rd(file);
    for (const auto& run : hs::reports::compute_stats(rd)) {
      for (const auto& r : run.hook_time) {
        auto [it, fresh] = out.try_emplace({run.run, r.hook, r.phase, r.module}, r.time.count, r.time.total_ns);
        EXPECT_TRUE(fresh) << "one row per name: " << r.module;
      }
      for (const auto& r : run.hook_time_by_device)
        out[{run.run, r.hook, r.phase, "device " + r.device}] = {r.modules, r.time.total_ns};
    }
    return out;
  };
  EXPECT_EQ(rows(db), rows(capture().db));
}

// Byte counts each in range but summing past int64 (two of 2^63-1) are refused before any sum,
// naming the run and the table.
TEST(DamagedCapture, ASumPastInt64NamesTheRunAndTable) {
  const fs::path db = edited_copy("tr-huge", "UPDATE TRANSFERS SET bytes = 9223372036854775807 WHERE runId = 1");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"stats", db.string(), "--report", "transfers"},
                                               {"report", db.string()}}) {
    const auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.err.find("run 1: the durations or byte counts of TRANSFERS sum past 2^63"), std::string::npos) << r.err;
  }
}

// Results (RUNS.results) a renderer would print as nonsense are refused naming the run and the
// field: a repeat count past 32 bits showed as 2, a negative median as "-3.00".
TEST(DamagedCapture, ResultsOutsideWhatHookscopeWritesNameTheRunAndField) {
  const std::pair<const char*, const char*> cases[] = {
      {"json_set(results, '$.decode_ms_per_token.n', 4294967298)",
       "field 'decode_ms_per_token.n' is 4294967298, where hookscope writes a count of repeats"},
      {"json_set(results, '$.decode_ms_per_token.median', -3.0)",
       "field 'decode_ms_per_token.median' is -3.0, where hookscope writes a number from 0 to 1e12"},
      {"json_set(results, '$.decode_ms_per_token.max', 1e308)", "field 'decode_ms_per_token.max' is 1e+308"},
      {"json_set(results, '$.new_tokens', -4)", "field 'new_tokens' is -4, where hookscope writes a count (0 or more)"},
      {"json_set(results, '$.status', 7)", "field 'status' is 7, where hookscope writes a string"},
      {"json_set(results, '$.status', json('null'))", "field 'status' is null, where hookscope writes a string"},
      {"json_set(results, '$.decode_ms_per_token.median', json('null'))",
       "field 'decode_ms_per_token.median' is null, where hookscope writes a number from 0 to 1e12"},
      {"replace(json_set(results, '$.decode_ms_per_token.min', 12345.5), '12345.5', '-0.0')",  // SQLite writes 0.0
       "field 'decode_ms_per_token.min' is -0.0"},
      {"json_set(results, '$.model.bytes', -5)", "field 'model.bytes' is -5, where hookscope writes a count"},
  };
  int i = 0;
  for (const auto& [edit, says] : cases) {
    const fs::path db = edited_copy("results-" + std::to_string(i++), std::string("UPDATE RUNS SET results = ") + edit +
                                                                          " WHERE id = 2");
    for (const std::vector<std::string>& args : {std::vector<std::string>{"report", db.string()},
                                                 {"explain", db.string(), "--run", "2"}}) {
      const auto r = hookscope(args);
      EXPECT_EQ(r.exit_code, 1) << edit << " " << args[0] << ": " << r.out;
      EXPECT_NE(r.err.find(std::string("run 2: RUNS.results ") + says), std::string::npos) << edit << ": " << r.err;
    }
  }
}

// A name of megabytes (a hand-made capture) is cut in the text table — its rows stay a line of
// a few hundred bytes — and kept whole in the JSON form.
TEST(DamagedCapture, AHugeNameIsCutInTheTextTableAndInJson) {
  const fs::path db = edited_copy(
      "huge-name", "UPDATE StringIds SET value = printf('%.*c', 300000, 'x') WHERE id = (SELECT moduleId FROM "
                   "HOOK_EVENTS WHERE runId = 1 AND moduleId IN (SELECT id FROM StringIds WHERE value != '') LIMIT 1)");
  auto r = hookscope({"stats", db.string(), "--run", "1", "--report", "hook_time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t longest = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
  EXPECT_LT(longest, 2000u);
  EXPECT_NE(r.out.find(std::string(197, 'x') + "..."), std::string::npos) << r.out.substr(0, 2000);
  // The JSON's rows cut it the same way (it was kept whole in each: 233 MB for a 10 MB name).
  r = hookscope({"stats", db.string(), "--run", "1", "--report", "hook_time", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(std::string(hs::reports::kMaxStatsCell + 1, 'x')), std::string::npos);
  EXPECT_NE(r.out.find(std::string(197, 'x') + "..."), std::string::npos);
}

// Text that is not UTF-8 in a capture (another program wrote it) is exported as U+FFFD: the
// Chrome trace stays JSON that Perfetto and Python read.
TEST(DamagedCapture, BytesThatAreNotUtf8AreExportedAsReplacementCharacters) {
  const fs::path db = edited_copy("not-utf8",
                                  "UPDATE StringIds SET value = CAST(X'414243FF80C328' AS TEXT) WHERE id = (SELECT hookId "
                                  "FROM HOOK_EVENTS WHERE runId = 1 LIMIT 1); UPDATE RUNS SET scenario = "
                                  "CAST(X'7368E282' AS TEXT) WHERE id = 1");
  const fs::path out = capture().dir / "not-utf8.json";
  const auto r = hookscope({"export", db.string(), "--run", "1", "--format", "chrome", "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json trace;
  ASSERT_NO_THROW(trace = hs::test::read_json(out));
  EXPECT_EQ(trace["hookscope"]["scenario"], "sh\xef\xbf\xbd\xef\xbf\xbd");  // one U+FFFD per byte
  const std::string text = hs::test::read_file(out);
  EXPECT_NE(text.find("ABC\\ufffd\\ufffd\\ufffd("), std::string::npos);
}

namespace {
// A small capture of `runs` runs imported from a generated trace (no LibTorch): per run, a
// pre_forward and a post_forward range of each of `modules` modules on device 0, so that
// hook_time has 2 × modules rows per run.
fs::path imported_capture(const fs::path& dir, int runs, int modules) {
  std::string events;
  for (int m = 0; m < modules; ++m)
    for (const char* phase : {"pre_forward", "post_forward"}) {
      const int64_t ts = 10 + 10 * (2 * m + (std::string(phase) == "post_forward"));
      events += std::string(events.empty() ? "" : ", ") + R"({"ph": "X", "cat": "user_annotation", "name": "hookscope::)" +
                phase + " hook=AlignDevicesHook module=layers." + std::to_string(m) +
                R"( device=0", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) + R"(, "dur": 5})";
    }
  const fs::path trace = dir / "trace.json";
  std::ofstream(trace) << R"({"traceEvents": [)" << events << "]}";
  const fs::path db = dir / "capture.sqlite";
  for (int i = 0; i < runs; ++i) {
    std::vector<std::string> args{"import", trace.string(), "-o", db.string()};
    if (i > 0) args.push_back("--append");
    const auto r = hookscope(args);
    if (r.exit_code != 0) throw std::runtime_error("import failed: " + r.err);
  }
  return db;
}
}  // namespace

// A run's label is written once per run, whole, in the JSON's "runs"; rows name their run by
// id. Labels of 10 MB on 12 runs took 22 GB and 1 MB ones wrote 742 MB of JSON (the label
// repeated on every row). The text table and CSV rows cut it to 200 bytes.
TEST(StatsCli, ALongLabelIsWrittenOncePerRunNotOncePerRow) {
  const fs::path dir = hs::test::scratch_dir("stats-long-labels");
  const fs::path db = hs::test::edited_copy(
      imported_capture(dir, 3, 40), dir / "labels.sqlite",
      "UPDATE RUNS SET label = replace(hex(zeroblob(500000)), '0', char(96 + id))");  // 1,000,000 × 'a', 'b', 'c'
  const size_t label = 1000000;
  auto r = hookscope({"stats", db.string(), "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.out.size(), 3 * label + 200000) << "O(label × runs), not × rows";
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["runs"].size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(doc["runs"][i]["cell"], std::string(label, static_cast<char>('a' + i))) << "whole, once per run";
  ASSERT_EQ(doc["reports"]["hook_time"].size(), 3u * 80u);
  for (const auto& [name, rows] : doc["reports"].items())
    for (const auto& row : rows) {
      EXPECT_TRUE(row.contains("run")) << name;
      EXPECT_FALSE(row.contains("cell")) << name << ": the run's label is in \"runs\"";
      EXPECT_FALSE(row.contains("engine")) << name;
    }
  for (const std::vector<std::string>& args : {std::vector<std::string>{"stats", db.string(), "--report", "hook_time"},
                                               {"stats", db.string(), "--report", "hook_time", "--format", "csv"}}) {
    r = hookscope(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_LT(r.out.size(), 250000u) << args.back();
    EXPECT_NE(r.out.find(std::string(197, 'b') + "..."), std::string::npos) << args.back();
    EXPECT_EQ(r.out.find(std::string(198, 'b')), std::string::npos) << args.back();
  }
}

// JSON nested 30,000 and 100,000 deep in RUNS.results, .versions, .device_map or the capture's
// settings (META_DATA_EXPORT) is refused by every reader, naming the file, the run and the
// column: report and view crashed (SIGSEGV) on it, and only report refused the settings.
// Nothing is written.
TEST(DamagedCapture, JsonNestedTooDeepIsRefusedNamingTheColumn) {
  const fs::path dir = hs::test::scratch_dir("stats-deep-json");
  const fs::path db = imported_capture(dir, 1, 2);
  const std::pair<std::string, std::string> columns[] = {
      {"UPDATE RUNS SET results = '{\"a\": ' || @DEEP || '}'", "run 1: RUNS.results"},
      {"UPDATE RUNS SET versions = @DEEP", "run 1: RUNS.versions"},
      {"UPDATE RUNS SET device_map = @DEEP", "run 1: RUNS.device_map"},
      {"INSERT INTO META_DATA_EXPORT VALUES ('HOOKSCOPE_CAPTURE_SETTINGS', @DEEP)",
       "META_DATA_EXPORT.HOOKSCOPE_CAPTURE_SETTINGS"},
  };
  for (int depth : {30000, 100000}) {
    const std::string deep = "'" + std::string(depth, '[') + std::string(depth, ']') + "'";
    for (const auto& [sql, column] : columns) {
      std::string edit = sql;
      edit.replace(edit.find("@DEEP"), 5, deep);
      const fs::path bad = hs::test::edited_copy(db, dir / "deep.sqlite", edit);
      const fs::path out = dir / "out";
      for (const std::vector<std::string>& args :
           {std::vector<std::string>{"report", bad.string(), "--markdown", out.string() + ".md"},
            {"stats", bad.string(), "--format", "json"},
            {"explain", bad.string(), "--run", "1"},
            {"export", bad.string(), "--format", "chrome", "-o", out.string() + ".json"},
            {"view", bad.string(), "--screenshot", out.string() + ".png"}}) {
        const auto r = hookscope(args);
        EXPECT_EQ(r.exit_code, 1) << args[0] << " " << column << ": " << r.err;
        EXPECT_NE(r.err.find("capture " + bad.string() + ": " + column + ": JSON nested deeper than 512 levels (byte "),
                  std::string::npos)
            << args[0] << ": " << r.err;
      }
      for (const char* ext : {".md", ".json", ".png"}) EXPECT_FALSE(fs::exists(out.string() + ext)) << ext;
    }
  }
}

namespace {
// A synthetic capture of three runs: a torch engine run whose profiled generate took 130 ms
// beside measured generates of 90, 200 and 100 ms (recording_overhead 130 / median 100 = 1.30×,
// where the mean would read 1.00× and the inverse 0.77×), a LibTorch run and a torch run without
// measured generates. Returns their ids in that order.
std::vector<int64_t> recording_capture(const fs::path& db) {
  hs::storage::Store store(db);
  hs::storage::add_synthetic_devices(store, 2);
  hs::storage::SyntheticRun s;
  s.devices = 2;
  s.layers = 2;
  s.tokens = 2;
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(hs::storage::write_synthetic_run(store, s).run_id);
  hs::storage::set_torch_generate_times(store, ids[0], 130.0, {90.0, 200.0, 100.0});
  store.set_run_engine(ids[1], "libtorch");
  store.set_run_engine(ids[2], "torch");
  store.finalize();
  store.close();
  return ids;
}
}  // namespace

// `-o /dev/stdout` (here a file) takes every CSV table as stdout does: it made
// /dev/stdout_<report>.csv files.
TEST(StatsCli, CsvToDevStdoutIsWrittenInPlace) {
  const fs::path db = hs::test::scratch_dir("stats-csv-dev-stdout") / "capture.sqlite";
  (void)recording_capture(db);
  const auto to_stdout = hookscope({"stats", db.string(), "--format", "csv"});
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  const auto r = hookscope({"stats", db.string(), "--format", "csv", "-o", "/dev/stdout"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, to_stdout.out);
  EXPECT_NE(r.out.find("run,engine,"), std::string::npos) << r.out;
  for (const auto& e : fs::directory_iterator("/dev"))
    EXPECT_NE(e.path().filename().string().rfind("stdout_", 0), 0u) << e.path();
}

// What recording cost a torch engine run's timeline (facts/recording.h) heads the text form under
// the catalogue's label, with the two times it divides, and is each run's "recording_overhead" in
// the JSON (report.json's number; null: not measured).
TEST(StatsCli, ATorchRunsRecordingOverheadHeadsTheTablesAndIsInTheJson) {
  const fs::path db = hs::test::scratch_dir("stats-recording-overhead") / "capture.sqlite";
  const auto ids = recording_capture(db);
  auto r = hookscope({"stats", db.string(), "--report", "hook_time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string label = "timeline's generate vs unrecorded";
  const size_t title = r.out.find("\n ** " + label + ": the wall time of the generate a torch engine run's timeline");
  ASSERT_NE(title, std::string::npos) << r.out;
  EXPECT_LT(title, r.out.find("(hook_time):")) << "before the reports: " << r.out;
  EXPECT_NE(r.out.find("  " + label + "  recorded generate (ms)  unrecorded median (ms)  unrecorded generates\n"),
            std::string::npos)
      << r.out;
  const auto row = [&](int64_t id, const std::string& engine, const std::string& rest) {
    return std::regex_search(r.out, std::regex("\n +" + std::to_string(id) + "  " + engine +
                                               " +sharded/whole-hook/default  " + rest + "\n"));
  };
  EXPECT_TRUE(row(ids[0], "torch", "1\\.30× +130\\.00 +100\\.00 +3")) << r.out;
  EXPECT_TRUE(row(ids[1], "libtorch", "not measured +- +- +-")) << r.out;
  EXPECT_TRUE(row(ids[2], "torch", "not measured +- +- +-")) << r.out;
  // JSON: report.json's number, null where nothing ran unrecorded.
  r = hookscope({"stats", db.string(), "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["runs"].size(), 3u);
  EXPECT_DOUBLE_EQ(doc["runs"][0]["recording_overhead"].get<double>(), 1.3) << doc["runs"][0].dump();
  EXPECT_TRUE(doc["runs"][1]["recording_overhead"].is_null()) << doc["runs"][1].dump();
  EXPECT_TRUE(doc["runs"][2]["recording_overhead"].is_null()) << doc["runs"][2].dump();
  // No run with the figure, no table.
  r = hookscope({"stats", db.string(), "--run", std::to_string(ids[1]), "--report", "hook_time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(label), std::string::npos) << r.out;
}
