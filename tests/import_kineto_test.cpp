// The torch.profiler (Kineto) Chrome-trace importer. References:
//  - a real trace recorded during the test run by tests/oracles/profile_trace.py (a tiny
//    transformers Llama with the driver's hookscope:: ranges and a torch.compile'd function),
//    parsed here independently with nlohmann's DOM and, for exact times, by the oracle with
//    Python's Decimal;
//  - a GPU trace written here in libkineto's shape (libkineto/src/output_json.cpp and the
//    CUPTI activity metadata it writes: kernels, memcpy HtoD/DtoH/DtoD/PtoP, memset, runtime
//    and driver calls, ac2g flows, deviceProperties), since this machine has no GPU;
//  - bad input, each case with its message.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "importers/kineto_reader.h"
#include "importers/kineto_trace.h"
#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace hs;
using importers::ImportError;
using importers::KinetoOptions;
using importers::KinetoSummary;
using json = nlohmann::json;
using Rows = std::vector<std::vector<std::string>>;

// ---- helpers -------------------------------------------------------------------------------
struct RawDb {
  sqlite3* db = nullptr;
  explicit RawDb(const fs::path& p) {
    if (sqlite3_open_v2(p.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      throw std::runtime_error("raw open failed: " + p.string());
  }
  ~RawDb() { sqlite3_close_v2(db); }
  Rows rows(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("raw prepare failed: ") + sqlite3_errmsg(db) + " in " + sql);
    Rows out;
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::vector<std::string> r;
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
        r.push_back(t ? t : "NULL");
      }
      out.push_back(std::move(r));
    }
    sqlite3_finalize(s);
    return out;
  }
  std::string one(const std::string& sql) {
    auto r = rows(sql);
    return r.empty() || r[0].empty() ? "" : r[0][0];
  }
  /// Every column but runId of `table`'s rows of `run`, in insertion order.
  Rows table(const std::string& table, int64_t run) {
    std::string cols;
    for (auto& c : rows("PRAGMA table_info(" + table + ")"))
      if (c[1] != "runId") cols += (cols.empty() ? "" : ", ") + c[1];
    return rows("SELECT " + cols + " FROM " + table + " WHERE runId = " + std::to_string(run) + " ORDER BY rowid");
  }
};

tracer::RunInfo run_info(const std::string& label) {
  tracer::RunInfo info;
  info.scenario = label;
  info.mode = "eager";
  info.model = "tiny-llama";
  return info;
}

struct Imported {
  fs::path capture;
  int64_t run = 0;
  KinetoSummary summary;
};

/// Imports `trace` as a new run of `capture` (created or appended to) and ends the run.
Imported import_trace(const fs::path& capture, const fs::path& trace, const KinetoOptions& opts = {}) {
  storage::Store store(capture);
  Imported out{capture, store.add_run(run_info(trace.filename().string())), {}};
  out.summary = importers::import_kineto_trace(trace, store, out.run, opts);
  store.end_run(out.run, tracer::RunStatus::Complete);
  return out;
}

/// The message of the ImportError importing `trace` throws ("" when it does not throw); the run
/// it was imported into must stay incomplete.
std::string import_error(const fs::path& trace, const KinetoOptions& opts = {}) {
  const fs::path capture = trace.parent_path() / (trace.filename().string() + ".hscope");
  int64_t run = 0;
  std::string message;
  {
    storage::Store store(capture);
    run = store.add_run(run_info("bad"));
    try {
      importers::import_kineto_trace(trace, store, run, opts);
    } catch (const ImportError& e) {
      message = e.what();
      EXPECT_EQ(e.file(), trace);
    }
  }
  EXPECT_EQ(storage::CaptureReader(capture).run(run).status, tracer::RunStatus::Incomplete);
  return message;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- the real trace --------------------------------------------------------------------------
const fs::path& trace_dir() {
  static const fs::path dir = test::cached_oracle("kineto-trace", "profile_trace.py");
  return dir;
}
const json& oracle() {
  static const json j = test::read_json(trace_dir() / "result.json");
  return j;
}
const json& trace_doc() {
  static const json j = json::parse(test::read_file(trace_dir() / "trace.json"));
  return j;
}
/// The real trace imported once per test process (ctest runs each case in its own process), into
/// a folder of the current test.
const Imported& real() {
  static const Imported im = [] {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const fs::path dir = test::scratch_dir("import_kineto_" + test);
    return import_trace(dir / "capture.hscope", trace_dir() / "trace.json");
  }();
  return im;
}
const std::set<std::string> kHostCategories = {"cpu_op", "user_annotation", "python_function",
                                               "gpu_user_annotation"};

TEST(ImportKineto, EveryHostEventOfARealTraceIsACpuOpRow) {
  const json& doc = trace_doc();
  std::map<std::string, int64_t> by_cat, host;
  for (const json& e : doc["traceEvents"]) {
    const std::string cat = e.contains("cat") ? e["cat"].get<std::string>() : "(ph " + e["ph"].get<std::string>() + ")";
    ++by_cat[cat];
    if (e["ph"] == "X" && kHostCategories.count(cat)) ++host[cat];
  }
  ASSERT_GT(host["cpu_op"], 100);
  ASSERT_GT(host["user_annotation"], 10);
  ASSERT_GT(host["python_function"], 100) << "with_stack=True records python_function events";

  const Imported& im = real();
  EXPECT_EQ(im.summary.events, static_cast<int64_t>(doc["traceEvents"].size()));
  EXPECT_EQ(im.summary.events_by_category, by_cat);
  EXPECT_TRUE(im.summary.unknown_categories.empty());
  RawDb db(im.capture);
  std::map<std::string, int64_t> rows;
  for (auto& r : db.rows("SELECT s.value, count(*) FROM CPU_OPS o JOIN StringIds s ON s.id = o.categoryId "
                         "WHERE runId = " + std::to_string(im.run) + " GROUP BY s.value"))
    rows[r[0]] = std::stoll(r[1]);
  EXPECT_EQ(rows, host);
  int64_t total = 0;
  for (auto& [_, n] : host) total += n;
  EXPECT_EQ(im.summary.rows_by_table.at("CPU_OPS"), total);

  // The file's own pid / tid: globalTid = pid * 0x1000000 + tid, nsys' serialisation.
  const int64_t pid = oracle()["sample"][0]["pid"], tid = oracle()["sample"][0]["tid"];
  EXPECT_EQ(im.summary.pids, std::vector<int64_t>{pid});
  EXPECT_EQ(db.one("SELECT count(*) FROM CPU_OPS WHERE globalTid != " + std::to_string(pid * 0x1000000 + tid)), "0");
  EXPECT_EQ(im.summary.process_names.count(pid), 1u);
  EXPECT_EQ(im.summary.base_time_ns, oracle()["base_ns"].get<int64_t>());
  EXPECT_EQ(im.summary.gpu_count, 0);
}

TEST(ImportKineto, TimesAreExactNanosecondsAndSlicesKeepTheirArgs) {
  const Imported& im = real();
  RawDb db(im.capture);
  // Exact: the oracle computed base + ts * 1000 with Decimal.
  for (const json& s : oracle()["sample"]) {
    const std::string where = "o.runId = " + std::to_string(im.run) + " AND o.start = " +
                              std::to_string(s["start_ns"].get<int64_t>()) + " AND o.end = " +
                              std::to_string(s["end_ns"].get<int64_t>());
    EXPECT_EQ(db.one("SELECT count(*) FROM CPU_OPS o JOIN StringIds n ON n.id = o.nameId JOIN StringIds c ON "
                     "c.id = o.categoryId WHERE " + where + " AND n.value = '" + s["name"].get<std::string>() +
                     "' AND c.value = '" + s["cat"].get<std::string>() + "'"),
              "1")
        << s.dump();
  }
  // Every slice, in file order, against the DOM's doubles (a double of ~5e12 µs is good to ~1 ns).
  const int64_t base = oracle()["base_ns"];
  std::vector<const json*> slices;
  for (const json& e : trace_doc()["traceEvents"])
    if (e["ph"] == "X" && e.contains("cat") && kHostCategories.count(e["cat"].get<std::string>())) slices.push_back(&e);
  const Rows rows = db.rows(
      "SELECT n.value, c.value, o.start, o.end, coalesce(o.externalId, -1), coalesce(a.value, '{}') FROM CPU_OPS o "
      "JOIN StringIds n ON n.id = o.nameId JOIN StringIds c ON c.id = o.categoryId LEFT JOIN StringIds a ON a.id = "
      "o.argsId WHERE o.runId = " + std::to_string(im.run) + " ORDER BY o.rowid");
  ASSERT_EQ(rows.size(), slices.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& e = *slices[i];
    ASSERT_EQ(rows[i][0], e["name"].get<std::string>()) << i;
    EXPECT_EQ(rows[i][1], e["cat"].get<std::string>());
    const int64_t start = std::stoll(rows[i][2]), end = std::stoll(rows[i][3]);
    EXPECT_LE(std::llabs(start - base - std::llround(e["ts"].get<double>() * 1000)), 2) << e.dump();
    EXPECT_LE(std::llabs(end - start - std::llround(e["dur"].get<double>() * 1000)), 2) << e.dump();
    json args = e.value("args", json::object());
    EXPECT_EQ(std::stoll(rows[i][4]), args.value("External id", int64_t{-1}));
    // The rest as Kineto wrote it, less the ids with their own columns and the per-event indexes.
    for (const char* key : {"External id", "Sequence number", "Ev Idx", "Python id", "Python parent id"})
      args.erase(key);
    EXPECT_EQ(json::parse(rows[i][5]), args) << e.dump();
  }
  // Shapes recorded (record_shapes=True) travel in the args.
  EXPECT_NE(db.one("SELECT count(*) FROM CPU_OPS o JOIN StringIds a ON a.id = o.argsId WHERE a.value LIKE "
                   "'%\"Input Dims\"%'"),
            "0");
}

TEST(ImportKineto, NestingIsKept) {
  const Imported& im = real();
  RawDb db(im.capture);
  auto range = [&](const std::string& like) {
    return db.rows("SELECT o.start, o.end FROM CPU_OPS o JOIN StringIds n ON n.id = o.nameId WHERE o.runId = " +
                   std::to_string(im.run) + " AND n.value LIKE '" + like + "' ORDER BY o.start");
  };
  const Rows generate = range("hookscope::generate %"), steps = range("hookscope::step %"),
             pre = range("hookscope::pre_forward %"), onload = range("hookscope::weight_onload %");
  ASSERT_EQ(generate.size(), 1u);
  ASSERT_EQ(steps.size(), 3u);
  for (auto& s : steps) {
    EXPECT_GE(std::stoll(s[0]), std::stoll(generate[0][0]));
    EXPECT_LE(std::stoll(s[1]), std::stoll(generate[0][1]));
  }
  ASSERT_EQ(pre.size(), onload.size());
  for (size_t i = 0; i < pre.size(); ++i) {
    EXPECT_GE(std::stoll(onload[i][0]), std::stoll(pre[i][0])) << "weight_onload runs inside its pre_forward";
    EXPECT_LE(std::stoll(onload[i][1]), std::stoll(pre[i][1]));
  }
}

TEST(ImportKineto, HookscopeRangesBecomeHookscopeRows) {
  const Imported& im = real();
  const json& hs = oracle()["hookscope_ranges"];
  storage::CaptureReader r(im.capture);
  RawDb db(im.capture);
  auto times_of = [&](const std::string& prefix) {
    std::multiset<std::pair<int64_t, int64_t>> out;
    for (auto& row : db.rows("SELECT o.start, o.end FROM CPU_OPS o JOIN StringIds n ON n.id = o.nameId WHERE "
                             "o.runId = " + std::to_string(im.run) + " AND n.value LIKE '" + prefix + " %'"))
      out.insert({std::stoll(row[0]), std::stoll(row[1])});
    return out;
  };

  const auto hooks = r.hook_events(im.run);
  ASSERT_EQ(hooks.size(), hs["hookscope::pre_forward"].get<size_t>() + hs["hookscope::post_forward"].get<size_t>());
  std::multiset<std::pair<int64_t, int64_t>> pre, post;
  for (const auto& h : hooks) {
    EXPECT_EQ(h.hook, "AlignDevicesHook");
    EXPECT_TRUE(h.module == "model.layers.0" || h.module == "model.layers.1") << h.module;
    (h.phase == events::HookPhase::PreForward ? pre : post).insert({h.start_ns, h.end_ns});
  }
  EXPECT_EQ(pre, times_of("hookscope::pre_forward"));
  EXPECT_EQ(post, times_of("hookscope::post_forward"));

  const auto swaps = r.weight_swaps(im.run);
  ASSERT_EQ(swaps.size(), hs["hookscope::weight_onload"].get<size_t>() + hs["hookscope::weight_offload"].get<size_t>());
  std::multiset<std::pair<int64_t, int64_t>> on, off;
  for (const auto& w : swaps) {
    EXPECT_EQ(w.tensor, "mlp.up_proj.weight");
    EXPECT_EQ(w.bytes, 128 * 64 * 4) << "the up_proj weight of the tiny Llama, float32";
    EXPECT_EQ(w.dtype, "float32");
    EXPECT_EQ(w.device, w.onload ? "cpu" : "meta");
    if (w.onload) {
      EXPECT_EQ(w.source, events::WeightSource::Cpu);
    }
    (w.onload ? on : off).insert({w.start_ns, w.end_ns});
  }
  EXPECT_EQ(on, times_of("hookscope::weight_onload"));
  EXPECT_EQ(off, times_of("hookscope::weight_offload"));

  const auto transfers = r.transfers(im.run);
  ASSERT_EQ(transfers.size(), hs["hookscope::send_to_device"].get<size_t>());
  std::set<int64_t> bytes;
  for (const auto& t : transfers) {
    EXPECT_EQ(t.src, "cpu");
    EXPECT_EQ(t.dst, "cpu");
    EXPECT_EQ(t.copy_kind, tracer::MemcpyKind::HtoH);
    EXPECT_TRUE(t.module == "model.layers.0" || t.module == "model.layers.1");
    bytes.insert(t.bytes);
  }
  EXPECT_EQ(bytes, (std::set<int64_t>{6 * 64 * 4, 64 * 4})) << "hidden states of the 6-token prefill, then 1 token";

  const auto steps = r.generation_steps(im.run);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].step, static_cast<int64_t>(i));
    const std::string name =
        db.one("SELECT n.value FROM CPU_OPS o JOIN StringIds n ON n.id = o.nameId WHERE o.start = " +
               std::to_string(steps[i].start_ns) + " AND n.value LIKE 'hookscope::step %'");
    EXPECT_EQ(name, "hookscope::step step=" + std::to_string(i) + " token=" + std::to_string(steps[i].token));
  }
  const auto threads = r.threads(im.run);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads[0].os_tid, oracle()["sample"][0]["tid"].get<int64_t>()) << "the trace's tid";
}

TEST(ImportKineto, CompiledRegionsCarryTheirCompileIds) {
  const Imported& im = real();
  const auto regions = storage::CaptureReader(im.capture).regions(im.run);
  std::multiset<std::string> ids;
  for (const auto& r : regions) ids.insert(r.compile_id);
  std::multiset<std::string> want;
  for (auto& [name, n] : oracle()["compiled_regions"].items())
    for (int i = 0; i < n.get<int>(); ++i) want.insert(name.substr(std::string("Torch-Compiled Region: ").size()));
  ASSERT_EQ(ids, want);
  ASSERT_EQ(ids.count("1/0"), 2u) << "the frame resumed after the graph break";
  RawDb db(im.capture);
  for (const auto& r : regions) {
    EXPECT_EQ(r.backend, "");
    const auto outer = std::find_if(regions.begin(), regions.end(), [&](const auto& o) {
      return o.compile_id == "0/0" && o.start_ns <= r.start_ns && r.end_ns <= o.end_ns;
    });
    ASSERT_NE(outer, regions.end()) << "every region lies in a call of frame 0";
    EXPECT_EQ(r.index, r.compile_id == "0/0" ? 0 : 1) << "index within the outermost compiled region";
    const std::string ops = db.one(
        "SELECT count(*) FROM CPU_OPS o JOIN StringIds c ON c.id = o.categoryId JOIN StringIds n ON n.id = "
        "o.nameId WHERE o.runId = " + std::to_string(im.run) + " AND c.value = 'cpu_op' AND n.value NOT LIKE "
        "'Torch-Compiled Region%' AND o.start >= " + std::to_string(r.start_ns) + " AND o.end <= " +
        std::to_string(r.end_ns));
    EXPECT_EQ(std::to_string(r.op_count), ops);
    EXPECT_GT(r.op_count, 0);
  }
}

TEST(ImportKineto, MemoryInstantsBecomeMemoryCounters) {
  std::vector<int64_t> allocated;
  for (const json& e : trace_doc()["traceEvents"])
    if (e.value("name", "") == "[memory]") allocated.push_back(e["args"]["Total Allocated"]);
  ASSERT_GT(allocated.size(), 10u) << "profile_memory=True";
  const Imported& im = real();
  RawDb db(im.capture);
  const Rows rows = db.rows("SELECT d.value, m.bytes FROM MEMORY_COUNTERS m JOIN StringIds d ON d.id = m.device "
                            "WHERE m.runId = " + std::to_string(im.run) + " ORDER BY m.rowid");
  ASSERT_EQ(rows.size(), allocated.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], "cpu");
    EXPECT_EQ(std::stoll(rows[i][1]), allocated[i]);
  }
}

TEST(ImportKineto, GzipSmallBatchesAndProgressGiveIdenticalRows) {
  const fs::path dir = test::scratch_dir("import_kineto_gz");
  const fs::path capture = dir / "capture.hscope";
  const Imported plain = import_trace(capture, trace_dir() / "trace.json");
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  KinetoOptions opts;
  opts.batch_rows = 7;  // many batches: flushes between slices and their flows, regions across batches
  opts.progress = [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); };
  const Imported gz = import_trace(capture, trace_dir() / "trace.json.gz", opts);
  EXPECT_EQ(gz.summary.events_by_category, plain.summary.events_by_category);
  EXPECT_EQ(gz.summary.rows_by_table, plain.summary.rows_by_table);
  EXPECT_EQ(gz.summary.first_ns, plain.summary.first_ns);
  EXPECT_EQ(gz.summary.last_ns, plain.summary.last_ns);
  RawDb db(capture);
  for (const char* table : {"CPU_OPS", "HOOK_EVENTS", "WEIGHT_SWAPS", "TRANSFERS", "GENERATION_STEPS",
                            "COMPILE_REGIONS", "MEMORY_COUNTERS", "THREADS"}) {
    const Rows a = db.table(table, plain.run), b = db.table(table, gz.run);
    EXPECT_FALSE(a.empty()) << table;
    EXPECT_EQ(a, b) << table;
  }
  ASSERT_FALSE(progress.empty());
  const uint64_t size = fs::file_size(trace_dir() / "trace.json.gz");
  EXPECT_EQ(progress.back(), std::make_pair(size, size));
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
}

// A large trace is read on a thread of its own while the caller parses and imports, and full
// batches of rows are written on a third: the rows, summary and progress are those of one thread.
TEST(ImportKineto, ReadingOnAThreadOfItsOwnGivesIdenticalRows) {
  const fs::path dir = test::scratch_dir("import_kineto_pipeline");
  const fs::path capture = dir / "capture.hscope";
  KinetoOptions one;
  one.pipeline_bytes = UINT64_MAX;
  for (const char* file : {"trace.json", "trace.json.gz"}) {
    const fs::path trace = trace_dir() / file;
    ASSERT_LE(fs::file_size(trace), importers::kineto::kPipelineBytes) << "the default reads it in one stage";
    std::vector<std::pair<uint64_t, uint64_t>> progress_one, progress_two;
    one.progress = [&](uint64_t done, uint64_t total) { progress_one.emplace_back(done, total); };
    KinetoOptions two;
    two.pipeline_bytes = 0;
    two.batch_rows = 5;  // the writer thread writes one batch while the next is built
    two.progress = [&](uint64_t done, uint64_t total) { progress_two.emplace_back(done, total); };
    const Imported a = import_trace(capture, trace, one), b = import_trace(capture, trace, two);
    EXPECT_EQ(b.summary.events, a.summary.events);
    EXPECT_EQ(b.summary.events_by_category, a.summary.events_by_category);
    EXPECT_EQ(b.summary.rows_by_table, a.summary.rows_by_table);
    EXPECT_EQ(b.summary.pids, a.summary.pids);
    EXPECT_EQ(b.summary.first_ns, a.summary.first_ns);
    EXPECT_EQ(b.summary.last_ns, a.summary.last_ns);
    EXPECT_EQ(progress_two, progress_one) << file;
    RawDb db(capture);
    for (const char* table : {"CPU_OPS", "HOOK_EVENTS", "WEIGHT_SWAPS", "TRANSFERS", "GENERATION_STEPS",
                              "COMPILE_REGIONS", "MEMORY_COUNTERS", "THREADS"}) {
      const Rows ra = db.table(table, a.run), rb = db.table(table, b.run);
      EXPECT_FALSE(ra.empty()) << file << " " << table;
      EXPECT_EQ(rb, ra) << file << " " << table;
    }
  }
}

// A callback that throws stops the reading thread wherever it is, and the import ends with
// what the callback threw, the thread joined (no hang, nothing left running).
TEST(ImportKineto, AnErrorWhileTheReadingThreadIsAheadEndsTheImport) {
  const fs::path trace = trace_dir() / "trace.json";
  for (uint64_t stop_at : {uint64_t{0}, uint64_t{1}, uint64_t{3000}}) {
    uint64_t seen = 0;
    importers::kineto::TraceCallbacks cb;
    cb.event = [&](const importers::kineto::RawEvent&) {
      if (seen++ == stop_at) throw std::runtime_error("stop here");
    };
    try {
      importers::kineto::read_chrome_trace(trace, cb, 0);
      ADD_FAILURE() << "no throw";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "stop here");
    }
    EXPECT_EQ(seen, stop_at + 1);
  }
}

// ---- a GPU trace in libkineto's shape ---------------------------------------------------------
// Field names and layout as libkineto writes them (output_json.cpp; CuptiActivity.h metadata:
// "device", "context", "stream", "correlation", "registers per thread", "shared memory", "grid",
// "block", "bytes", "fromDevice"/"toDevice" for peer copies, "cbid"; names from memcpyName /
// "Memset (<kind>)"; ac2g flows right after the slice they bind to).
constexpr const char* kGpuTrace = R"JSON({
  "schemaVersion": 1,
  "deviceProperties": [
    {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150012411904, "computeMajor": 9, "computeMinor": 0,
     "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
     "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
     "sharedMemPerMultiprocessor": 233472},
    {"id": 1, "name": "NVIDIA H200", "totalGlobalMem": 150012411904, "computeMajor": 9, "computeMinor": 0,
     "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
     "sharedMemPerBlock": 49152, "numSms": 132}
  ],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2, "pg_count": 1, "pg_config": [], "nccl_version": "2.21.5"},
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4243, "ts": 10.000, "dur": 50.500,
   "args": {"External id": 7, "Record function id": 0, "Sequence number": 11, "Input Dims": [[4, 8], [8, 16]]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4243, "ts": 20.100, "dur": 5.250,
   "args": {"External id": 7, "cbid": 211, "correlation": 101}},
  {"ph": "s", "id": 101, "pid": 4242, "tid": 4243, "ts": 20.100, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
   "pid": 0, "tid": 7, "ts": 30.000, "dur": 2.001,
   "args": {"External id": 7, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 101,
            "registers per thread": 32, "shared memory": 1024, "blocks per SM": 0.5, "warps per SM": 2.0,
            "grid": [64, 2, 1], "block": [128, 1, 1], "est. achieved occupancy %": 3}},
  {"ph": "f", "id": 101, "pid": 0, "tid": 7, "ts": 30.000, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "aten::mm", "pid": 0, "tid": 7, "ts": 29.999, "dur": 2.003,
   "args": {"External id": 7}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 4242, "tid": 4243, "ts": 40.000, "dur": 3.000,
   "args": {"cbid": 41, "correlation": 102}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 41.000, "dur": 1.500,
   "args": {"device": 0, "context": 1, "stream": 7, "correlation": 102, "bytes": 4096, "memory bandwidth (GB/s)": 2.73}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 44.000, "dur": 1.000,
   "args": {"device": 0, "context": 1, "stream": 7, "correlation": 103, "bytes": 2048, "memory bandwidth (GB/s)": 2.048}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7, "ts": 46.000, "dur": 0.500,
   "args": {"device": 0, "context": 1, "stream": 7, "correlation": 104, "bytes": 1024}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "tid": 7, "ts": 47.000, "dur": 4.000,
   "args": {"fromDevice": 0, "inDevice": 0, "toDevice": 1, "fromContext": 1, "inContext": 1, "toContext": 2,
            "stream": 7, "correlation": 105, "bytes": 8192, "memory bandwidth (GB/s)": 2.048}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 52.000, "dur": 0.250,
   "args": {"device": 0, "context": 1, "stream": 7, "correlation": 106, "bytes": 512}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4243, "ts": 60.000, "dur": 4.000,
   "args": {"External id": 8, "cbid": 211}},
  {"ph": "s", "id": 107, "pid": 4242, "tid": 4243, "ts": 60.000, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 70.000, "dur": 10.000,
   "args": {"External id": 8, "device": 0, "context": 1, "stream": 7, "grid": [1, 1, 1], "block": [256, 1, 1]}},
  {"ph": "f", "id": 107, "pid": 0, "tid": 7, "ts": 70.000, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 4242, "tid": 4243, "ts": 80.000, "dur": 2.000,
   "args": {"External id": 9, "cbid": 307, "correlation": 108}},
  {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 1, "tid": 13, "ts": 85.000, "dur": 1.000,
   "args": {"External id": 9, "device": 1, "context": 2, "stream": 13, "correlation": 108, "grid": [8, 1, 1],
            "block": [128, 1, 1], "graph node id": 77}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 90.000, "dur": 1.000,
   "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 109, "device": 0, "context": 1}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4243, "ts": 95.000,
   "args": {"Total Reserved": 2097152, "Total Allocated": 4096, "Bytes": 4096, "Device Id": 0, "Device Type": 1,
            "Addr": 139872, "Ev Idx": 3}},
  {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0, "ts": 1.000, "dur": 1.000},
  {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0, "ts": 2.000, "dur": 1.000},
  {"name": "process_name", "ph": "M", "ts": 1.000, "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
  {"name": "thread_name", "ph": "M", "ts": 1.000, "pid": 4242, "tid": 4243, "args": {"name": "thread 4243 (python)"}},
  {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 100.000}
  ],
  "traceName": "gpu.json"
})JSON";

TEST(ImportKineto, GpuRecordsGoToTheNsysTablesWithTheirCorrelations) {
  const fs::path dir = test::scratch_dir("import_kineto_gpu");
  write(dir / "gpu.json", kGpuTrace);
  const Imported im = import_trace(dir / "capture.hscope", dir / "gpu.json");
  const int64_t base = 1700000000000000000;
  storage::CaptureReader r(im.capture);

  const auto kernels = r.kernels(im.run);
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_EQ(kernels[0].short_name, "vectorized_elementwise_kernel");
  EXPECT_EQ(kernels[0].correlation_id, 101u);
  EXPECT_EQ(kernels[0].start_ns, base + 30000);
  EXPECT_EQ(kernels[0].end_ns, base + 32001);
  EXPECT_EQ(kernels[0].stream_id, 7u);
  EXPECT_EQ(kernels[0].context_id, 1u);
  EXPECT_EQ(kernels[0].registers_per_thread, 32);
  EXPECT_EQ(kernels[0].static_shared_memory, 1024);
  EXPECT_EQ(kernels[0].grid_x, 64);
  EXPECT_EQ(kernels[0].grid_y, 2);
  EXPECT_EQ(kernels[0].block_x, 128);
  EXPECT_EQ(kernels[1].demangled_name, "gemm_kernel");
  EXPECT_EQ(kernels[1].correlation_id, 107u) << "no correlation in its args: taken from its ac2g flow";
  EXPECT_EQ(kernels[2].device_id, 1u);
  EXPECT_EQ(kernels[2].stream_id, 13u);
  EXPECT_EQ(kernels[2].graph_node_id, 77);

  const auto copies = r.memcpys(im.run);
  ASSERT_EQ(copies.size(), 4u);
  using K = tracer::MemcpyKind;
  using M = tracer::MemKind;
  EXPECT_EQ(copies[0].copy_kind, K::HtoD);
  EXPECT_EQ(copies[0].src_kind, M::Pageable);
  EXPECT_EQ(copies[0].dst_kind, M::Device);
  EXPECT_EQ(copies[0].bytes, 4096);
  EXPECT_FALSE(copies[0].src_device_id.has_value());
  EXPECT_EQ(copies[0].dst_device_id, 0);
  EXPECT_EQ(copies[1].copy_kind, K::DtoH);
  EXPECT_EQ(copies[1].dst_kind, M::Pinned);
  EXPECT_EQ(copies[1].src_device_id, 0);
  EXPECT_FALSE(copies[1].dst_device_id.has_value());
  EXPECT_EQ(copies[2].copy_kind, K::DtoD);
  EXPECT_EQ(copies[3].copy_kind, K::PtoP);
  EXPECT_EQ(copies[3].src_device_id, 0);
  EXPECT_EQ(copies[3].dst_device_id, 1);
  EXPECT_EQ(copies[3].bytes, 8192);
  EXPECT_EQ(copies[3].correlation_id, 105u);

  const auto sets = r.memsets(im.run);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].bytes, 512);
  EXPECT_EQ(sets[0].mem_kind, M::Device);
  EXPECT_EQ(sets[0].end_ns - sets[0].start_ns, 250);

  const auto calls = r.runtime_calls(im.run);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].name, "cudaLaunchKernel");
  EXPECT_EQ(calls[0].os_tid, 4243);
  EXPECT_EQ(calls[2].correlation_id, 107u) << "from the ac2g flow that starts in it";
  const auto driver = r.driver_calls(im.run);
  ASSERT_EQ(driver.size(), 1u);
  EXPECT_EQ(driver[0].name, "cuLaunchKernel");
  const auto ops = r.cpu_ops(im.run);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].category, "cpu_op");
  EXPECT_EQ(ops[0].external_id, 7);
  EXPECT_EQ(ops[0].sequence_number, 11);
  EXPECT_EQ(json::parse(ops[0].args), json::parse(R"({"Record function id": 0, "Input Dims": [[4, 8], [8, 16]]})"));
  EXPECT_EQ(ops[1].category, "gpu_user_annotation");
  EXPECT_EQ(ops[1].start_ns, base + 29999);
  EXPECT_EQ(ops[1].args, "") << "only the External id, which has its column";
  const auto syncs = r.syncs(im.run);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0].sync_type, tracer::SyncType::StreamSynchronize);

  RawDb db(im.capture);
  const std::string run = std::to_string(im.run);
  // A kernel finds its launching call (correlationId) and the op that launched it (External id).
  const Rows launches = db.rows(
      "SELECT k.correlationId, coalesce(rn.value, dn.value), opn.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
      "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.runId = k.runId AND r.correlationId = k.correlationId "
      "LEFT JOIN StringIds rn ON rn.id = r.nameId "
      "LEFT JOIN CUPTI_ACTIVITY_KIND_DRIVER d ON d.runId = k.runId AND d.correlationId = k.correlationId "
      "LEFT JOIN StringIds dn ON dn.id = d.nameId "
      "LEFT JOIN CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION x ON x.runId = k.runId AND x.correlationId = "
      "k.correlationId LEFT JOIN CPU_OPS o ON o.runId = k.runId AND o.externalId = x.externalId AND o.globalTid / "
      "0x1000000 = 4242 LEFT JOIN StringIds opn ON opn.id = o.nameId WHERE k.runId = " + run + " ORDER BY k.start");
  EXPECT_EQ(launches, (Rows{{"101", "cudaLaunchKernel", "aten::mm"},
                            {"107", "cudaLaunchKernel", "NULL"},
                            {"108", "cuLaunchKernel", "NULL"}}));
  EXPECT_EQ(db.one("SELECT group_concat(externalId || '->' || correlationId, ',') FROM "
                   "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION WHERE runId = " + run),
            "7->101,8->107,9->108");
  // The trace's process: globalPid of GPU rows, globalTid of host rows.
  EXPECT_EQ(db.one("SELECT DISTINCT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL"), std::to_string(4242LL * 0x1000000));
  EXPECT_EQ(db.one("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME"),
            std::to_string(4242LL * 0x1000000 + 4243));
  // The GPU-side annotation keeps its pid / tid (GPU 0, stream 7).
  EXPECT_EQ(db.one("SELECT o.globalTid FROM CPU_OPS o JOIN StringIds c ON c.id = o.categoryId WHERE c.value = "
                   "'gpu_user_annotation'"),
            std::to_string(7));
  EXPECT_EQ(db.one("SELECT count(*) FROM TARGET_INFO_GPU"), "2");
  EXPECT_EQ(db.one("SELECT name || ' ' || smCount || ' ' || totalMemory || ' ' || computeMajor || ' ' || "
                   "maxShmemPerBlock || ' ' || maxWarpsPerSm FROM TARGET_INFO_GPU WHERE id = 0"),
            "NVIDIA H200 132 150012411904 9 232448 64");
  EXPECT_EQ(db.one("SELECT d.value || ':' || m.bytes FROM MEMORY_COUNTERS m JOIN StringIds d ON d.id = m.device"),
            "0:4096");

  const KinetoSummary& s = im.summary;
  EXPECT_EQ(s.gpu_count, 2);
  EXPECT_EQ(s.pids, std::vector<int64_t>{4242});
  EXPECT_EQ(s.unknown_categories, (std::map<std::string, int64_t>{{"overhead", 2}}));
  ASSERT_EQ(s.diagnostics.size(), 1u);
  EXPECT_TRUE(contains(s.diagnostics[0], "overhead (2)")) << s.diagnostics[0];
  EXPECT_EQ(s.distributed_info["world_size"], 2);
  EXPECT_EQ(s.process_names.at(0), "GPU 0");
  EXPECT_EQ(s.thread_names.at({4242, 4243}), "thread 4243 (python)");
  EXPECT_EQ(s.first_ns, base + 10000);
  EXPECT_EQ(s.last_ns, base + 95000) << "the [memory] instant";
  EXPECT_EQ(s.rows_by_table.at("CUPTI_ACTIVITY_KIND_KERNEL"), 3);
  EXPECT_EQ(s.rows_by_table.at("CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION"), 3);
}

// Copy and sync kinds are read by the names hookscope prints (tracer/kind_names.h): Kineto's
// ten copy kinds and the Uvm ones hookscope's export writes for a CUPTI capture; Kineto's sync
// kinds, anything else Unknown.
TEST(ImportKineto, CopyAndSyncKindsAreReadByTheirPrintedNames) {
  const fs::path dir = test::scratch_dir("import_kineto_kinds");
  write(dir / "kinds.json", R"j([
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy UvmHtoD (Managed -> Device)", "pid": 0, "tid": 7, "ts": 1,
     "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 64}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy AtoD (Array -> Device)", "pid": 0, "tid": 7, "ts": 3,
     "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 64}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy XtoY (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 5,
     "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 64}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 7, "ts": 7, "dur": 1,
     "args": {"device": 0, "stream": 7, "wait_on_cuda_event_id": 3}},
    {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 9, "dur": 1,
     "args": {"cuda_sync_kind": "Context Sync", "device": 0, "stream": 7}},
    {"ph": "X", "cat": "cuda_sync", "name": "Some Future Sync", "pid": 0, "tid": 7, "ts": 11, "dur": 1,
     "args": {"device": 0, "stream": 7}}
  ])j");
  const Imported im = import_trace(dir / "capture.hscope", dir / "kinds.json");
  storage::CaptureReader r(im.capture);
  const auto copies = r.memcpys(im.run);
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0].copy_kind, tracer::MemcpyKind::UvmHtoD);
  EXPECT_EQ(copies[0].src_kind, tracer::MemKind::Managed);
  EXPECT_EQ(copies[1].copy_kind, tracer::MemcpyKind::AtoD);
  EXPECT_EQ(copies[2].copy_kind, tracer::MemcpyKind::Unknown);
  const auto syncs = r.syncs(im.run);
  ASSERT_EQ(syncs.size(), 3u);
  EXPECT_EQ(syncs[0].sync_type, tracer::SyncType::StreamWaitEvent);
  EXPECT_EQ(syncs[0].event_id, 3u);
  EXPECT_EQ(syncs[1].sync_type, tracer::SyncType::ContextSynchronize) << "cuda_sync_kind wins over the name";
  EXPECT_EQ(syncs[2].sync_type, tracer::SyncType::Unknown);
}

TEST(ImportKineto, ReadsChromeArrayFormatAndCountsUnknownHookscopeRanges) {
  const fs::path dir = test::scratch_dir("import_kineto_array");
  write(dir / "array.json", R"([
    {"ph": "X", "cat": "user_annotation", "name": "hookscope::future_thing a=1", "pid": 5, "tid": 6, "ts": 1, "dur": 2},
    {"ph": "X", "cat": "user_annotation", "name": "hookscope::step step=0 token=42", "pid": 5, "tid": 6,
     "ts": 1.5e0, "dur": 0.0005},
    {"ph": "B", "cat": "mystery", "name": "x", "pid": 5, "tid": 6, "ts": 3}
  ])");
  const Imported im = import_trace(dir / "capture.hscope", dir / "array.json");
  EXPECT_EQ(im.summary.rows_by_table.at("CPU_OPS"), 2);
  EXPECT_EQ(im.summary.unknown_categories, (std::map<std::string, int64_t>{{"mystery", 1}}));
  ASSERT_EQ(im.summary.diagnostics.size(), 2u);
  EXPECT_TRUE(contains(im.summary.diagnostics[1], "future_thing (1)")) << im.summary.diagnostics[1];
  const auto steps = storage::CaptureReader(im.capture).generation_steps(im.run);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].token, 42);
  EXPECT_EQ(steps[0].start_ns, 1500);
  EXPECT_EQ(steps[0].end_ns, 1501) << "0.0005 µs rounds half away from zero";
}

// torch's _RecordFunctionFast (the driver's ranges) writes a cpu_op: a hookscope:: range is
// filed as a user_annotation and never counts as an op of the compiled region around it.
TEST(ImportKineto, AHookscopeRangeRecordedAsACpuOpIsAnAnnotation) {
  const fs::path dir = test::scratch_dir("import_kineto_fast_range");
  write(dir / "fast.json", R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 0/0", "pid": 5, "tid": 6, "ts": 1, "dur": 10},
    {"ph": "X", "cat": "cpu_op", "name": "hookscope::pre_forward hook=AlignDevicesHook module=model.layers.0 device=cpu",
     "pid": 5, "tid": 6, "ts": 2, "dur": 3, "args": {"External id": 9, "Record function id": 0}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 6, "ts": 6, "dur": 1}
  ]})");
  const Imported im = import_trace(dir / "capture.hscope", dir / "fast.json");
  storage::CaptureReader r(im.capture);
  const auto ops = r.cpu_ops(im.run);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].category, "cpu_op");
  EXPECT_EQ(ops[1].category, "user_annotation") << ops[1].name;
  EXPECT_EQ(ops[2].category, "cpu_op");
  const auto hooks = r.hook_events(im.run);
  ASSERT_EQ(hooks.size(), 1u);
  EXPECT_EQ(hooks[0].module, "model.layers.0");
  EXPECT_EQ(hooks[0].start_ns - ops[0].start_ns, 1000);
  const auto regions = r.regions(im.run);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].op_count, 1) << "aten::mm only";
}

// Hook time leaves out Dynamo's compiling inside the hooks (the first calls of a compiled model:
// a hook's frame compiled inside its range), and says how much that was; a compile outside any
// hook is neither.
TEST(ImportKineto, HookTimeLeavesOutDynamosCompilingInsideTheHooks) {
  const fs::path dir = test::scratch_dir("import_kineto_hook_compile");
  write(dir / "t.json", R"J({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "hookscope::pre_forward hook=AlignDevicesHook module=m0 device=cpu",
     "pid": 5, "tid": 6, "ts": 10, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "_compile.compile_inner (dynamo_timed)", "pid": 5, "tid": 6, "ts": 20, "dur": 60},
    {"ph": "X", "cat": "cpu_op", "name": "_compile.compile_inner (dynamo_timed)", "pid": 5, "tid": 6, "ts": 190, "dur": 20},
    {"ph": "X", "cat": "user_annotation", "name": "hookscope::post_forward hook=AlignDevicesHook module=m0 device=cpu",
     "pid": 5, "tid": 6, "ts": 200, "dur": 20},
    {"ph": "X", "cat": "cpu_op", "name": "_compile.compile_inner (dynamo_timed)", "pid": 5, "tid": 6, "ts": 300, "dur": 50}
  ]})J");
  const Imported im = import_trace(dir / "capture.hscope", dir / "t.json");
  const auto r = test::hookscope({"stats", im.capture.string(), "--format", "json", "-o", (dir / "s.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json t = test::read_json(dir / "s.json")["runs"].at(0)["totals"];
  EXPECT_EQ(t["hook_calls"], 2);
  EXPECT_EQ(t["hook_compile_ns"], 70'000) << "60 µs inside pre_forward, 10 µs of post_forward";
  EXPECT_EQ(t["hook_busy_ns"], 120'000 - 70'000) << t.dump();
  // Each call's hook time in the breakdown leaves it out the same way: 100 − 60, 20 − 10 µs.
  std::map<std::string, int64_t> by_phase;
  const nlohmann::json doc = test::read_json(dir / "s.json");
  for (const auto& row : doc["reports"]["hook_time"])
    by_phase[row["phase"].get<std::string>()] = row["total_ns"].get<int64_t>();
  EXPECT_EQ(by_phase, (std::map<std::string, int64_t>{{"post_forward", 10'000}, {"pre_forward", 40'000}}));
}

// Kineto's own errors are kept as the run's notes; the one a CUDA build of torch writes on a
// machine without a GPU says what it means.
TEST(ImportKineto, KinetosNoDeviceErrorSaysWhatItMeans) {
  const fs::path dir = test::scratch_dir("import_kineto_no_gpu");
  write(dir / "t.json", R"J({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 6, "ts": 1, "dur": 1}],
    "ERROR": ["ERROR:2026-12-06 18:28:54 15918:15918 DeviceProperties.cpp:48] gpuGetDeviceCount failed with code 35"]})J");
  const Imported im = import_trace(dir / "capture.hscope", dir / "t.json");
  std::string notes;
  for (const auto& d : im.summary.diagnostics) notes += d + "\n";
  EXPECT_NE(notes.find("Kineto ERROR: ERROR:2026-12-06 18:28:54 15918:15918 DeviceProperties.cpp:48] gpuGetDeviceCount "
                       "failed with code 35 (Kineto found no CUDA device: the trace holds host activity only)"),
            std::string::npos)
      << notes;
}

// ---- bad input -------------------------------------------------------------------------------
namespace {
// `ev` (a trace's start and one event, ending in ", ") followed by copies of its event up to
// about `bytes` of text, ending in ", ".
std::string padded_events(const std::string& ev, size_t bytes) {
  const std::string one = ev.substr(ev.find('[') + 1);
  std::string out = ev;
  while (out.size() < bytes) out += one;
  return out;
}
}  // namespace

TEST(ImportKineto, BadInputNamesTheFileAndTheOffset) {
  const fs::path dir = test::scratch_dir("import_kineto_bad");
  const std::string real_text = test::read_file(trace_dir() / "trace.json");
  const std::string real_gz = test::read_file(trace_dir() / "trace.json.gz");
  struct Case {
    std::string name, text, want1, want2;
  };
  const std::string ev =
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, )";
  const std::vector<Case> cases = {
      {"truncated.json", real_text.substr(0, real_text.size() / 2), "the JSON text ends early",
       "byte " + std::to_string(real_text.size() / 2)},
      {"truncated.json.gz", real_gz.substr(0, real_gz.size() / 2), "the gzip stream ends early", "byte "},
      {"garbage.json", "this is not json", "not valid JSON", "byte 1"},
      {"bom.json", "\xEF\xBB\xBF" + ev + "]}", "begins with a UTF-8 byte-order mark", "byte 0"},
      {"empty.json", "", "the file is empty", ""},
      {"nothing.json", R"({"schemaVersion": 1})", "no traceEvents array", ""},
      {"no_ph.json", ev + R"({"cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 1}]})",
       "the event has no 'ph'", "byte " + std::to_string(ev.size())},
      {"no_ts.json", ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "dur": 1}]})",
       "traceEvents[1] (the cpu_op event 'b'): it has no 'ts'", "byte " + std::to_string(ev.size())},
      {"string_ts.json", ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": "2", "dur": 1}]})",
       "traceEvents[1] (the cpu_op event 'b'): its 'ts' is not a number", "byte " + std::to_string(ev.size())},
      {"no_dur.json", ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2}]})",
       "traceEvents[1] (the cpu_op event 'b'): a complete ('X') event without 'dur'",
       "byte " + std::to_string(ev.size())},
      {"negative_dur.json",
       ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": -0.5}]})",
       "traceEvents[1] (the cpu_op event 'b'): its 'dur' is negative (-500 ns)", "byte " + std::to_string(ev.size())},
      {"huge_ts.json", ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1}]})",
       "'ts' is 1e300: not a number of µs that fits int64 ns", "byte "},
      {"no_pid.json", ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "tid": 1, "ts": 2, "dur": 1}]})",
       "has no integer 'pid'", "byte " + std::to_string(ev.size())},
      {"not_object.json", ev + R"(5]})", "a traceEvents entry is not a JSON object", "byte "},
      // A ':' in an array entry, or before an object entry's first name, with the window past the
      // file's start (2 MiB of events before): no name to read (the kineto_trace fuzz target's
      // UBSan finding: the offsets of none pointed before the window).
      {"colon_in_array.json", padded_events(ev, 2u << 20) + R"(["ts": 5]]})", "not valid JSON", "byte "},
      {"colon_first.json", padded_events(ev, 2u << 20) + R"({: 5, "ts": 1}]})", "not valid JSON", "byte "},
      {"zeros.json", std::string(1000, '\0'), "a NUL byte (0x00) where a value should begin: not JSON text", "byte 0:"},
      {"control_byte.json", ev + "\x01]}", "the byte 0x01 where a value should begin", "byte " + std::to_string(ev.size())},
      {"comma.json", R"({"traceEvents": [,]})", "',' (0x2C) where a value should begin", "byte 17:"},
      {"trailing_comma.json", ev + R"(]})", "not valid JSON", "byte " + std::to_string(ev.size())},
      // A number past double (nlohmann's out_of_range, not a parse error) in an event, and in a
      // top-level value: refused as bad JSON, never an exception of another kind.
      {"number_overflow.json", ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"a": 5e739}}]})",
       "not valid JSON (traceEvents[1]): number overflow", "byte " + std::to_string(ev.size())},
      {"top_overflow.json", R"({"schemaVersion": 1e999, )" + ev.substr(1, ev.size() - 3) + "]}",
       "not valid JSON (schemaVersion): number overflow", "byte 18"},
      {"hookscope_key.json",
       ev + R"({"ph": "X", "cat": "user_annotation", "name": "hookscope::weight_onload module=m tensor=w dtype=float32 source=cpu device=0", "pid": 1, "tid": 1, "ts": 2, "dur": 1}]})",
       "the range 'hookscope::weight_onload' has no 'bytes='", "byte " + std::to_string(ev.size())},
      {"hookscope_number.json",
       ev + R"({"ph": "X", "cat": "user_annotation", "name": "hookscope::step step=one token=1", "pid": 1, "tid": 1, "ts": 2, "dur": 1}]})",
       "'step=one' is not an integer", "byte "},
      {"ts_past_2_62.json", ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 4.7e15, "dur": 1}]})",
       "traceEvents[1] (the cpu_op event 'b'): its time, ", "lies outside [-2^62, 2^62) ns"},
      {"end_past_2_62.json",
       ev + R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 4611686018427387.9}]})",
       "traceEvents[1] (the cpu_op event 'b'): it ends past 2^62 ns", "byte " + std::to_string(ev.size())},
      {"negative_memory.json",
       ev + R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Total Allocated": -5}}]})",
       "'Total Allocated' is negative (-5)", "byte " + std::to_string(ev.size())},
      {"negative_bytes.json",
       ev + R"({"ph": "X", "cat": "user_annotation", "name": "hookscope::weight_onload module=m tensor=w dtype=float32 source=cpu device=0 bytes=-4", "pid": 1, "tid": 1, "ts": 2, "dur": 1}]})",
       "'bytes=-4' is negative", "byte " + std::to_string(ev.size())},
      {"base_string.json", R"({"baseTimeNanoseconds": "abc", )" + ev.substr(1, ev.size() - 3) + "]}",
       "baseTimeNanoseconds is \"abc\": not ns since the Unix epoch", ""},
      {"base_negative.json", R"({"baseTimeNanoseconds": -5, )" + ev.substr(1, ev.size() - 3) + "]}",
       "baseTimeNanoseconds is -5: not ns since the Unix epoch", ""},
      {"base_past_int64.json", R"({"baseTimeNanoseconds": 9223372036854775813, )" + ev.substr(1, ev.size() - 3) + "]}",
       "baseTimeNanoseconds is 9223372036854775813: not ns since the Unix epoch", ""},
  };
  KinetoOptions two_stages;  // every file read on a thread of its own, as a large one is
  two_stages.pipeline_bytes = 0;
  two_stages.batch_rows = 1;
  for (const Case& c : cases) {
    const fs::path p = dir / c.name;
    write(p, c.text);
    const std::string msg = import_error(p);
    EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << c.name << ": " << msg;
    EXPECT_TRUE(contains(msg, c.want1)) << c.name << ": " << msg;
    EXPECT_TRUE(contains(msg, c.want2)) << c.name << ": " << msg;
    EXPECT_EQ(import_error(p, two_stages), msg) << c.name;
  }
  // A gigabyte of zeros (a sparse file) is refused at its first byte, not read to the bound.
  {
    std::ofstream(dir / "sparse.json").close();
    fs::resize_file(dir / "sparse.json", uintmax_t{1} << 30);
    const std::string msg = import_error(dir / "sparse.json");
    EXPECT_TRUE(contains(msg, "byte 0: not valid JSON: syntax error: a NUL byte (0x00)")) << msg;
    fs::remove(dir / "sparse.json");
  }
  const std::string missing = import_error(dir / "missing.json");
  EXPECT_TRUE(contains(missing, "cannot read the trace")) << missing;
  // Blank runs between tokens reach the parser as one byte (a trace padded with gigabytes of
  // blanks took that much memory in nlohmann's lexer); the offsets still count every byte.
  const std::string blanks = std::string(1 << 20, ' ') + "\n\t\r ";
  const std::string padded = R"({"traceEvents": [)" + blanks;
  write(dir / "blanks_garbage.json", padded + "x]}");
  std::string msg = import_error(dir / "blanks_garbage.json");
  EXPECT_TRUE(contains(msg, "not valid JSON")) << msg;
  EXPECT_TRUE(contains(msg, "byte " + std::to_string(padded.size()) + ":")) << msg;
  write(dir / "blanks_no_ph.json", ev + blanks + R"({"cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2}]})");
  msg = import_error(dir / "blanks_no_ph.json");
  EXPECT_TRUE(contains(msg, "the event has no 'ph'")) << msg;
  EXPECT_TRUE(contains(msg, "byte " + std::to_string(ev.size() + blanks.size()))) << msg;
}

// Blanks inside strings (after an escaped quote too) are the text's own and stay as they are.
TEST(ImportKineto, BlanksInsideStringsAreKept) {
  const fs::path dir = test::scratch_dir("import_kineto_blanks");
  // The name's JSON text: two blanks after an escaped quote, three after an escaped backslash,
  // escaped tabs; a tracker that took \" for the string's end would squeeze the blanks after it.
  const std::string name = R"(a  \"b\\\"  \\   c\t\t d\\)";
  write(dir / "trace.json", "{  \"traceEvents\" :\n\n  [ {\"ph\": \"X\", \"cat\":  \"cpu_op\", \"name\": \"" + name +
                                "\",   \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}  ]  }   ");
  const Imported im = import_trace(dir / "capture.hscope", dir / "trace.json");
  const auto ops = storage::CaptureReader(im.capture).cpu_ops(im.run);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].name, "a  \"b\\\"  \\   c\t\t d\\");
}

// The reader scans 64-byte blocks as bit masks and falls back to bytes around a backslash: names
// with escaped quotes, backslashes and brackets, shifted through every offset of a block (and
// across the window's refills), read back exactly, and every event's times with them.
TEST(ImportKineto, EscapesAndBracketsAtEveryBlockOffsetReadBack) {
  const fs::path dir = test::scratch_dir("import_kineto_block_offsets");
  std::string text = R"({"traceEvents": [)";
  std::vector<std::string> names;
  for (int shift = 0; shift < 200; ++shift) {
    // JSON text of the name, and the name it stands for.
    const std::string pad(static_cast<size_t>(shift), 'x');
    // One escaped quote (a scanner that took it for the string's end would see the brackets).
    const std::string json_name = pad + R"(\"{[[,:\\ \u0041)" + std::string(static_cast<size_t>(shift % 7), ']');
    names.push_back(pad + "\"{[[,:\\ A" + std::string(static_cast<size_t>(shift % 7), ']'));
    text += (shift ? ", " : "") + std::string(R"({"ph": "X", "cat": "cpu_op", "name": ")") + json_name +
            R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(10 + shift) + ".5" + R"(, "dur": 1, "args": {"k": [")" +
            pad + R"(\\", "]"]}})";
  }
  text += "]}";
  write(dir / "trace.json", text);
  const Imported im = import_trace(dir / "capture.hscope", dir / "trace.json");
  const auto ops = storage::CaptureReader(im.capture).cpu_ops(im.run);
  ASSERT_EQ(ops.size(), names.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].name, names[i]) << i;
    EXPECT_EQ(ops[i].start_ns, static_cast<int64_t>(10 + i) * 1000 + 500) << i;
  }
}

// Member names written with escapes: "t\u0073" is `ts` and its number text is read exactly; an
// escaped name of another member changes nothing. An args object of many members (one named
// twice) keeps each name once, with its last value, where it first appears.
TEST(ImportKineto, EscapedNamesAndManyArgsReadAsJsonSaysTheyAre) {
  const fs::path dir = test::scratch_dir("import_kineto_escaped_names");
  std::string args = R"({"k0": 1)";
  for (int i = 1; i < 40; ++i) args += ", \"k" + std::to_string(i) + "\": " + std::to_string(i);
  args += R"(, "k3": "last"})";
  write(dir / "trace.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "n\u0061me": "p", "pid": 1, "tid": 1, )"
                            R"("t\u0073": 12345678901234.5674, "dur": 1.0004999, "args": )" + args + "}]}");
  const Imported im = import_trace(dir / "capture.hscope", dir / "trace.json");
  const auto ops = storage::CaptureReader(im.capture).cpu_ops(im.run);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].name, "p");
  EXPECT_EQ(ops[0].start_ns, 12345678901234567);
  EXPECT_EQ(ops[0].end_ns - ops[0].start_ns, 1000);
  const nlohmann::json kept = nlohmann::json::parse(ops[0].args);
  EXPECT_EQ(kept.size(), 40u);
  EXPECT_EQ(kept["k3"], "last");
  EXPECT_EQ(ops[0].args.find("\"k3\""), ops[0].args.rfind("\"k3\"")) << ops[0].args;
  EXPECT_LT(ops[0].args.find("\"k3\""), ops[0].args.find("\"k4\"")) << "written where it first appears";
}

TEST(ImportKineto, DecimalMicrosecondsBecomeExactNanoseconds) {
  using importers::kineto::decimal_us_to_ns;
  EXPECT_EQ(decimal_us_to_ns("5243847375771.562"), 5243847375771562);
  EXPECT_EQ(decimal_us_to_ns("12"), 12000);
  EXPECT_EQ(decimal_us_to_ns("0.001"), 1);
  EXPECT_EQ(decimal_us_to_ns("0.0004"), 0);
  EXPECT_EQ(decimal_us_to_ns("0.0005"), 1);
  EXPECT_EQ(decimal_us_to_ns("-0.25"), -250);
  EXPECT_EQ(decimal_us_to_ns("1.5e3"), 1500000);
  EXPECT_EQ(decimal_us_to_ns("25E-1"), 2500);
  EXPECT_EQ(decimal_us_to_ns("0"), 0);
  EXPECT_EQ(decimal_us_to_ns("9223372036854775.807"), INT64_MAX);
  EXPECT_EQ(decimal_us_to_ns("9223372036854775.808"), std::nullopt);
  EXPECT_EQ(decimal_us_to_ns("1e300"), std::nullopt);
  EXPECT_EQ(decimal_us_to_ns("abc"), std::nullopt);
  EXPECT_EQ(decimal_us_to_ns("1.2.3"), std::nullopt);
  // Past 36 significant digits: zeros (or anything) after the dot cannot change the ns.
  EXPECT_EQ(decimal_us_to_ns("1000.000000000000000000000000000000000000000"), 1000000);
  EXPECT_EQ(decimal_us_to_ns("0.000499999999999999999999999999999999999999"), 0);
  EXPECT_EQ(decimal_us_to_ns("1000000000000000000000000000000000000000"), std::nullopt);
  EXPECT_EQ(decimal_us_to_ns(""), std::nullopt);
  // Kineto's texts (at most 15 digits before the dot and 3 after) take a path of their own;
  // the texts either side of its bounds take the general one; both give the exact ns.
  EXPECT_EQ(decimal_us_to_ns("123456789012345.999"), 123456789012345999);
  EXPECT_EQ(decimal_us_to_ns("-123456789012345.9"), -123456789012345900);
  EXPECT_EQ(decimal_us_to_ns("1234567890123456.5"), 1234567890123456500);
  EXPECT_EQ(decimal_us_to_ns("1.2345"), 1235);
  EXPECT_EQ(decimal_us_to_ns("007.5"), 7500);
  // Found by the fuzzer (UBSan, signed overflow): long runs of digits either side of the dot.
  EXPECT_EQ(decimal_us_to_ns("22222222222222222222.5"), std::nullopt);
  EXPECT_EQ(decimal_us_to_ns("-2222222222222222.2"), -2222222222222222200);
  EXPECT_EQ(decimal_us_to_ns("1.22222222222222222222222"), 1222);
  EXPECT_EQ(decimal_us_to_ns("1.2225"), 1223);
  EXPECT_EQ(decimal_us_to_ns("-"), std::nullopt);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int64_t ns = static_cast<int64_t>(rng() % 2000000000000000000ull) - 1000000000000000000;
    const int64_t whole = ns / 1000, part = ns % 1000;
    char text[48];
    std::snprintf(text, sizeof text, "%s%lld.%03lld", ns < 0 ? "-" : "", static_cast<long long>(std::llabs(whole)),
                  static_cast<long long>(std::llabs(part)));
    ASSERT_EQ(decimal_us_to_ns(text), ns) << text;
  }
}

}  // namespace

// ---- hardening: nesting, byte counts, what --append adopts -------------------------------
namespace {
std::string nested(size_t depth, const std::string& inner = "") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}
const std::string kOp = R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5})";
/// A trace of `first` then `second` (events), after `top` (top-level keys, each ending in ", ").
std::string trace_of(const std::string& first, const std::string& second, const std::string& top = "") {
  return "{" + top + R"("traceEvents": [)" + first + (second.empty() ? "" : ", " + second) + "]}";
}
/// Every file in `dir` but `keep`, by name.
std::set<std::string> others(const fs::path& dir, const std::set<std::string>& keep) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (!keep.count(e.path().filename().string())) out.insert(e.path().filename().string());
  return out;
}
}  // namespace

// A value nested deeper than kineto::kMaxValueDepth (an event's args, distributedInfo, a
// deviceProperties entry) is refused while it is read, before it is built, naming the file, the
// byte and the value: 100,000 levels crashed the import (SIGSEGV) where the value was copied and
// dumped. 256 levels import, and the run they make reads back.
TEST(ImportKineto, ValuesNestedTooDeepAreRefusedNamingTheValue) {
  ASSERT_EQ(importers::kineto::kMaxValueDepth, 256u);
  const fs::path dir = test::scratch_dir("import_kineto_deep");
  const std::string args_head = trace_of(kOp, R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, )"
                                              R"("ts": 20, "dur": 1, "args": {"Input Dims": )");
  struct Case {
    std::string name, text, want;
    size_t byte;
  };
  const std::string dist_head = R"({"distributedInfo": {"backend": "nccl", "rank": )";
  const std::vector<Case> cases = {
      {"args.json", args_head.substr(0, args_head.size() - 2) + nested(100000) + "}}]}",
       "traceEvents[1].args: JSON nested deeper than 256 levels", args_head.size() - 2 + 254},
      {"args_30000.json", args_head.substr(0, args_head.size() - 2) + nested(30000) + "}}]}",
       "traceEvents[1].args: JSON nested deeper than 256 levels", args_head.size() - 2 + 254},
      {"args_object.json", trace_of(R"({"ph": "X", "cat": "cpu_op", "args": )" + nested(300, "{}") + "}", ""),
       "traceEvents[0].args: JSON nested deeper than 256 levels", 0},
      {"distributed.json", dist_head + nested(100000) + "}, " + trace_of(kOp, "").substr(1),
       "distributedInfo.rank: JSON nested deeper than 256 levels", dist_head.size() + 255},
      {"distributed_top.json", R"({"distributedInfo": )" + nested(30000) + ", " + trace_of(kOp, "").substr(1),
       "distributedInfo: JSON nested deeper than 256 levels", 0},
      {"device.json", trace_of(kOp, "", R"("deviceProperties": [{"id": 0, "name": )" + nested(300) + "}], "),
       "deviceProperties[0].name: JSON nested deeper than 256 levels", 0},
      {"array_format.json", "[" + kOp + ", {\"args\": " + nested(100000) + "}]",
       "traceEvents[1].args: JSON nested deeper than 256 levels", 0},
  };
  for (const Case& c : cases) {
    const fs::path p = dir / c.name;
    write(p, c.text);
    const std::string msg = import_error(p);
    EXPECT_EQ(msg.rfind(p.string() + ": byte ", 0), 0u) << c.name << ": " << msg;
    EXPECT_TRUE(contains(msg, ": " + c.want)) << c.name << ": " << msg;
    if (c.byte) {
      EXPECT_TRUE(contains(msg, ": byte " + std::to_string(c.byte) + ": ")) << c.name << ": " << msg;
    }
  }
  // At the bound (the event, its args and 254 arrays: 256 levels): imported whole, its args
  // kept as written.
  write(dir / "at_bound.json", args_head.substr(0, args_head.size() - 2) + nested(254) + "}}]}");
  const Imported im = import_trace(dir / "at_bound.hscope", dir / "at_bound.json");
  const auto ops = storage::CaptureReader(im.capture).cpu_ops(im.run);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[1].args, R"({"Input Dims":)" + nested(254) + "}");
}

// The CLI: a trace nested too deep fails with the message above and exit 1, leaving no file
// (no OUT, OUT.lock, OUT.partial-PID, -wal, -shm); appended, the capture's runs are kept and the
// new run is marked failed. A "hookscope" object at the bound is kept in RUNS.results, which
// report reads back (a value at the importer's bound fits the readers').
TEST(ImportKinetoCli, ADeepTraceFailsCleanlyAndOneAtTheBoundReadsBack) {
  const fs::path dir = test::scratch_dir("import_kineto_deep_cli");
  write(dir / "deep.json", trace_of(kOp, R"({"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 20, )"
                                         R"("dur": 1, "args": {"a": )" + nested(100000) + "}}"));
  write(dir / "ok.json", trace_of(kOp, ""));
  const fs::path out = dir / "out.sqlite";
  auto r = test::hookscope({"import", (dir / "deep.json").string(), "-o", out.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, (dir / "deep.json").string() + ": byte ")) << r.err;
  EXPECT_TRUE(contains(r.err, ": traceEvents[1].args: JSON nested deeper than 256 levels")) << r.err;
  EXPECT_EQ(others(dir, {"deep.json", "ok.json"}), std::set<std::string>{}) << "no output, lock or partial file";

  r = test::hookscope({"import", (dir / "ok.json").string(), "-o", out.string(), "--label", "first"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::hookscope({"import", (dir / "deep.json").string(), "-o", out.string(), "--append"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "JSON nested deeper than 256 levels")) << r.err;
  EXPECT_EQ(others(dir, {"deep.json", "ok.json", "out.sqlite"}), std::set<std::string>{});
  const auto runs = storage::CaptureReader(out).runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, tracer::RunStatus::Complete);
  EXPECT_EQ(runs[0].label, "first");
  EXPECT_EQ(runs[1].status, tracer::RunStatus::Failed);

  write(dir / "exported.json", R"({"hookscope": {"x": )" + nested(255) + "}, " + trace_of(kOp, "").substr(1));
  r = test::hookscope({"import", (dir / "exported.json").string(), "-o", out.string(), "--append"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto last = storage::CaptureReader(out).runs().back();
  EXPECT_EQ(last.results["import"]["trace"]["hookscope_run"]["x"].dump(), nested(255));
  r = test::hookscope({"report", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// One string longer than the importer reads (a small .json.gz can inflate to a gigabyte of one
// string, which the JSON lexer would hold whole): refused naming the byte it starts at, exit 1,
// nothing left behind.
TEST(ImportKinetoCli, AStringPastTheBoundIsRefusedNamingWhereItStarts) {
  const fs::path dir = test::scratch_dir("import_kineto_long_string");
  const std::string head = R"({"ph": "X", "cat": "cpu_op", "name": ")";
  write(dir / "long.json", trace_of(kOp, head + std::string(importers::kineto::kMaxStringBytes + 1, 'a') +
                                             R"(", "pid": 1, "tid": 1, "ts": 20, "dur": 1})"));
  const fs::path out = dir / "out.sqlite";
  auto r = test::hookscope({"import", (dir / "long.json").string(), "-o", out.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, (dir / "long.json").string() + ": byte ")) << r.err;
  EXPECT_TRUE(contains(r.err, "a string longer than 64 MiB")) << r.err;
  EXPECT_EQ(others(dir, {"long.json"}), std::set<std::string>{}) << "no output, lock or partial file";
}

// A value past kMaxValueBytes is refused even where the whole file would fit in the window
// (it grew to 512 MiB and read a 300 MiB value whole), and the window holds no more than that.
TEST(ImportKineto, AValuePastTheBoundIsRefusedWhereverItLies) {
  const fs::path dir = test::scratch_dir("import_kineto_large_value");
  const uint64_t n = importers::kineto::kMaxValueBytes / 2 + 1;  // "1," pairs
  {
    std::ofstream f(dir / "large.json", std::ios::binary);
    f << R"({"traceEvents": [], "x": [)";
    const std::string chunk = [] {
      std::string c;
      for (int i = 0; i < (1 << 19); ++i) c += "1,";
      return c;
    }();
    for (uint64_t left = n; left > 0;) {
      const uint64_t k = std::min<uint64_t>(left, chunk.size() / 2);
      f.write(chunk.data(), static_cast<std::streamsize>(2 * k));
      left -= k;
    }
    f << "1]}";
  }
  const std::string msg = import_error(dir / "large.json");
  EXPECT_TRUE(contains(msg, "byte 25: x is larger than 256 MiB of JSON text")) << msg;
  fs::remove(dir / "large.json");
}

// A byte count a capture refuses (negative, past int64, not an integer) is refused by the
// import, naming the event and the field: -100 was kept (stats printed it) and 2^70 stored as 0.
TEST(ImportKineto, ByteCountsACaptureRefusesAreRefusedNamingTheEventAndField) {
  const fs::path dir = test::scratch_dir("import_kineto_bytes");
  const auto memcpy = [](const std::string& bytes) {
    return R"j({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, )j"
           R"j("ts": 20, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 1, "bytes": )j" + bytes + "}}";
  };
  const auto memset = [](const std::string& bytes) {
    return R"j({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 20, "dur": 5, )j"
           R"j("args": {"device": 0, "stream": 7, "bytes": )j" + bytes + "}}";
  };
  const auto memory = [](const std::string& bytes) {
    return R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 20, )"
           R"("args": {"Total Allocated": )" + bytes + ", \"Device Id\": 0, \"Device Type\": 1}}";
  };
  const auto counter = [](const std::string& bytes) {
    return R"({"ph": "C", "name": "hookscope::memory device=0", "pid": 1, "tid": 1, "ts": 20, "args": {"bytes": )" +
           bytes + "}}";
  };
  const std::string memcpy_name = "(the gpu_memcpy event 'Memcpy HtoD (Pageable -> Device)'): args 'bytes' is ";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"memcpy_negative", memcpy("-100"), memcpy_name + "negative (-100): not a byte count"},
      {"memcpy_2_70", memcpy("1180591620717411303424"), memcpy_name + "1.1805916207174113e+21: not a byte count"},
      {"memcpy_2_63", memcpy("9223372036854775808"), memcpy_name + "9223372036854775808: not a byte count"},
      {"memcpy_fraction", memcpy("1.5"), memcpy_name + "1.5: not a byte count"},
      {"memcpy_text", memcpy("\"12\""), memcpy_name + "\"12\": not a byte count"},
      {"memset_negative", memset("-1"), "(the gpu_memset event 'Memset (Device)'): args 'bytes' is negative (-1)"},
      {"memory_2_70", memory("1180591620717411303424"),
       "(the cpu_instant_event event '[memory]'): args 'Total Allocated' is 1.1805916207174113e+21"},
      {"counter_negative", counter("-8"), "(the event 'hookscope::memory device=0'): args 'bytes' is negative (-8)"},
  };
  for (const auto& [name, event, want] : cases) {
    const fs::path p = dir / (name + ".json");
    write(p, trace_of(kOp, event));
    const std::string msg = import_error(p);
    EXPECT_EQ(msg.rfind(p.string() + ": byte " + std::to_string(trace_of(kOp, "x").size() - 3) + ": ", 0), 0u)
        << name << ": " << msg;
    EXPECT_TRUE(contains(msg, "traceEvents[1] " + want)) << name << ": " << msg;
    EXPECT_TRUE(contains(msg, "(an integer from 0 to 2^63 - 1)")) << name << ": " << msg;
  }
  // The largest count a capture holds is kept as it is.
  write(dir / "max.json", trace_of(kOp, memcpy("9223372036854775807")));
  const Imported im = import_trace(dir / "max.hscope", dir / "max.json");
  RawDb raw(im.capture);
  EXPECT_EQ(raw.one("SELECT bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"), "9223372036854775807");
  // The CLI: exit 1, nothing written.
  const auto r = test::hookscope({"import", (dir / "memcpy_negative.json").string(), "-o", (dir / "out.sqlite").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "args 'bytes' is negative (-100)")) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out.sqlite"));
}

// Values each in range whose sums pass int64 (the durations of two ops, the byte counts of two
// transfers) are refused at import, naming the table and the row: the import wrote them and every
// reader then refused the capture as "edited or damaged".
TEST(ImportKineto, RowsWhoseSumsPassInt64AreRefusedNamingTheTableAndRow) {
  const fs::path dir = test::scratch_dir("import_kineto_sums");
  const std::string op = R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, )"
                         R"("ts": -4611686018427387, "dur": 9223372036854765})";
  const std::string transfer =
      R"({"ph": "X", "cat": "user_annotation", "name": "hookscope::send_to_device module=m bytes=9223372036854775807 )"
      R"(src=cpu dst=0", "pid": 1, "tid": 1, "ts": 20, "dur": 1})";
  // CUPTI's tables as well (stats sums their durations and bytes per caller).
  const auto memcpy = [](const std::string& dur, const std::string& bytes) {
    return R"j({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, )j"
           R"("ts": 50, "dur": )" + dur + R"(, "args": {"device": 0, "stream": 7, "correlation": 9, "bytes": )" + bytes +
           "}}";
  };
  const std::string big_copy = memcpy("1", "9223372036854775807"), long_copy = memcpy("4500000000000000", "8");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"durations", trace_of(op, op),
       "the durations of its CPU_OPS rows would sum past 2^63 - 1 with the row starting at -4611686018427387000 ns, "
       "ending at 4611686018427378000 ns"},
      {"bytes", trace_of(kOp, transfer + ", " + transfer),
       "the byte counts of its TRANSFERS rows would sum past 2^63 - 1 with the row starting at 20000 ns, ending at "
       "21000 ns, of 9223372036854775807 bytes"},
      {"memcpy-bytes", trace_of(kOp, big_copy + ", " + big_copy),
       "the byte counts of its CUPTI_ACTIVITY_KIND_MEMCPY rows would sum past 2^63 - 1 with the row starting at "
       "50000 ns, ending at 51000 ns, of 9223372036854775807 bytes"},
      {"memcpy-durations", trace_of(kOp, long_copy + ", " + long_copy + ", " + long_copy),
       "the durations of its CUPTI_ACTIVITY_KIND_MEMCPY rows would sum past 2^63 - 1 with the row starting at "
       "50000 ns, ending at 4500000000000050000 ns"},
  };
  for (const auto& [name, trace, want] : cases) {
    SCOPED_TRACE(name);
    write(dir / (name + ".json"), trace);
    const fs::path out = dir / (name + ".sqlite");
    const auto r = test::hookscope({"import", (dir / (name + ".json")).string(), "-o", out.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, want)) << r.err;
    EXPECT_TRUE(contains(r.err, "every reader adds them up, so no capture holds such rows")) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // One such row alone is a capture every reader reads.
  write(dir / "one.json", trace_of(kOp, transfer + ", " + big_copy));
  const auto r = test::hookscope({"import", (dir / "one.json").string(), "-o", (dir / "one.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::hookscope({"report", (dir / "one.sqlite").string()}).exit_code, 0);
  // A copy whose CUPTI rows were edited to sum past int64 is refused by the readers, naming the run
  // and the table (stats printed the wrapped sum); a record that ends before it starts (an end
  // CUPTI did not fill in) is not: its duration counts as 0.
  const fs::path edited = test::edited_copy(
      dir / "one.sqlite", dir / "edited.sqlite",
      "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY SELECT * FROM CUPTI_ACTIVITY_KIND_MEMCPY; "
      "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 9223372036854775807");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"stats", edited.string(), "--report",
                                                                        "gpu_by_caller"},
                                               {"report", edited.string()}}) {
    const auto e = test::hookscope(args);
    EXPECT_EQ(e.exit_code, 1) << e.out;
    EXPECT_TRUE(contains(e.err, "run 1: the durations or byte counts of CUPTI_ACTIVITY_KIND_MEMCPY sum past 2^63"))
        << e.err;
  }
  const fs::path unfilled = test::edited_copy(dir / "one.sqlite", dir / "unfilled.sqlite",
                                              "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = 0");
  const auto u = test::hookscope({"stats", unfilled.string(), "--report", "gpu_by_caller", "--format", "json"});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  const auto rows = nlohmann::json::parse(u.out)["reports"]["gpu_by_caller"];
  ASSERT_EQ(rows.size(), 1u) << u.out;
  EXPECT_EQ(rows[0]["total_ns"], 0) << u.out;
  EXPECT_EQ(rows[0]["bytes"], 9223372036854775807LL) << u.out;
}

// --append adds a run to a capture every reader opens, never to anything else: a zero-byte file
// (SQLite took it for an empty database and the Store made it a capture that every reader then
// refused), another program's database, or a capture whose RUNS lost its primary key (appending
// failed with "end_run: no run N" and left a run without an id). Each is refused naming the file,
// and left as it was.
// hookscope never writes into a model's folder: a trace may name the checkpoint it was made from
// (read only once importing), so a capture is never put in a folder holding a config.json, under
// any name.
TEST(ImportKinetoCli, NeverWritesIntoAModelsFolder) {
  const fs::path dir = test::scratch_dir("import_kineto_model_folder");
  write(dir / "ok.json", trace_of(kOp, ""));
  const fs::path model = dir / "my-model", other = dir / "other-model";
  fs::create_directories(model / "sub");
  fs::create_directories(other);
  write(model / "config.json", "{}");
  write(other / "config.json", "{}");
  const std::vector<std::vector<std::string>> cases = {
      {"-o", (model / "run.sqlite").string()},
      {"-o", (model / "sub" / "run.sqlite").string()},
      {"-o", (dir / "link" / "run.sqlite").string()},  // through a link to the model's folder
  };
  fs::create_directory_symlink(model, dir / "link");
  for (const auto& extra : cases) {
    std::vector<std::string> args{"import", (dir / "ok.json").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << extra[1] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "hookscope never writes into a model's folder")) << r.err;
  }
  EXPECT_EQ(others(model, {"config.json", "sub"}), std::set<std::string>{}) << "nothing written there";
  EXPECT_TRUE(fs::is_empty(model / "sub"));
  // Next to a model's folder is fine.
  EXPECT_EQ(test::hookscope({"import", (dir / "ok.json").string(), "-o", (dir / "fine.sqlite").string(), "--model",
                             model.string()}).exit_code, 0);
  // A --model folder named from the current folder is stored as its absolute path: the readers then
  // keep their outputs out of it from any folder (a relative name was not recognised as a model's).
  const auto rel = test::run({"/bin/sh", "-c", "cd '" + dir.string() + "' && '" + test::cli() +
                                                   "' import ok.json --model my-model -o rel.sqlite"});
  ASSERT_EQ(rel.exit_code, 0) << rel.err;
  EXPECT_EQ(storage::CaptureReader(dir / "rel.sqlite").runs().at(0).model, model.string());
  const auto rep = test::run({"/bin/sh", "-c", "cd '" + dir.string() + "' && '" + test::cli() +
                                                   "' report rel.sqlite --json my-model/r.json"});
  EXPECT_EQ(rep.exit_code, 1) << rep.err;
  EXPECT_TRUE(contains(rep.err, "--json: my-model/r.json is or lies inside the model's folder " + model.string()))
      << rep.err;
  EXPECT_FALSE(fs::exists(model / "r.json"));
}

// The lines saying where a command wrote show an output's name inert on the terminal: its ESC
// sequences, OSC title and U+202E as escapes (import, stats -o and export -o echoed them raw).
// view --screenshot's line is tested in view_cli_test.cpp, which runs under a display.
TEST(ImportKinetoCli, WhereOutputsWentIsSaidInertOnTheTerminal) {
  const fs::path dir = test::scratch_dir("import_kineto_nasty_names");
  write(dir / "ok.json", trace_of(kOp, ""));
  const std::string nasty = "n\u202e\x1b[2J\x1b]0;title\x07";
  const fs::path db = dir / (nasty + ".sqlite");
  const std::vector<std::vector<std::string>> commands = {
      {"import", (dir / "ok.json").string(), "-o", db.string()},
      {"stats", db.string(), "--format", "csv", "-o", (dir / nasty).string()},
      {"export", db.string(), "-o", (dir / (nasty + ".json")).string()},
      {"export", db.string(), "--format", "csv", "-o", (dir / (nasty + "-csv")).string()},
  };
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0]);
    const auto r = test::hookscope(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "n\\u202e\\x1b[2J\\x1b]0;title\\x07")) << r.err;
    for (const std::string raw : {"\x1b", "\x07", "\u202e"}) EXPECT_FALSE(contains(r.err, raw)) << r.err;
  }
}

// An output name the file system allows, but whose temporary files beside it (`OUT.PID.partial`,
// `OUT.lock`, `OUT.partial-PID`) it would not, is refused before anything is written, naming the
// flag, the length and the most it may be (it failed halfway at the temporary file's name).
TEST(ImportKinetoCli, AnOutputNameWithNoRoomForItsTemporaryFilesIsRefusedUpFront) {
  const fs::path dir = test::scratch_dir("import_kineto_long_names");
  write(dir / "ok.json", trace_of(kOp, ""));
  const std::string name(240, 'n');  // 247 bytes with ".sqlite": legal, but not with ".lock" and more
  const fs::path db = dir / "ok.sqlite";
  ASSERT_EQ(test::hookscope({"import", (dir / "ok.json").string(), "-o", db.string()}).exit_code, 0);
  const std::vector<std::vector<std::string>> commands = {
      {"import", (dir / "ok.json").string(), "-o", (dir / (name + ".sqlite")).string()},
      {"stats", db.string(), "--format", "csv", "-o", (dir / (name + ".csv")).string()},
      {"export", db.string(), "-o", (dir / (name + ".json")).string()},
      {"report", db.string(), "--json", (dir / (name + ".json")).string()},
  };
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0]);
    const auto r = test::hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "its file name is 2")) << r.err;  // 245 to 254: each names its own file
    EXPECT_TRUE(contains(r.err, "name it in at most 223 bytes")) << r.err;
    EXPECT_FALSE(contains(r.err, "File name too long")) << r.err;
    EXPECT_EQ(others(dir, {"ok.json", "ok.sqlite"}), std::set<std::string>{}) << "nothing written";
  }
  const auto imp = test::hookscope(commands[0]);
  EXPECT_TRUE(contains(imp.err, "--out: " + commands[0][3] + ": its file name is 247 bytes")) << imp.err;
  // Each names its flag, and every output is checked before the first is written: a report's
  // other outputs, every one of stats' OUT_<report>.csv files (the first name fits, a later
  // report's longer name does not).
  const std::string ok = (dir / "ok.md").string(), long_json = (dir / (name + ".json")).string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> flagged = {
      {{"report", db.string(), "--markdown", ok, "--json", long_json}, "--json: "},
      {{"report", db.string(), "--markdown", ok, "--html", long_json}, "--html: "},
      {{"stats", db.string(), "--format", "csv", "-o", (dir / std::string(200, 'p')).string()}, "-o: "},
      {{"export", db.string(), "-o", long_json}, "-o: "},
      // What would fail at the write is refused first too: a folder, a missing folder, a path
      // through a file.
      {{"report", db.string(), "--markdown", ok, "--json", dir.string()}, "--json: "},
      {{"report", db.string(), "--markdown", ok, "--json", (dir / "no" / "r.json").string()}, "--json: "},
      {{"report", db.string(), "--markdown", ok, "--html", (dir / "ok.json" / "r.html").string()}, "--html: "},
  };
  for (const auto& [args, flag] : flagged) {
    SCOPED_TRACE(args[0] + " " + flag);
    const auto f = test::hookscope(args);
    EXPECT_EQ(f.exit_code, 1) << f.err;
    EXPECT_TRUE(contains(f.err, "hookscope: error: " + flag)) << f.err;
    EXPECT_EQ(others(dir, {"ok.json", "ok.sqlite"}), std::set<std::string>{}) << "nothing written";
  }
  // At the most it may be, the name works.
  const fs::path longest = dir / (std::string(223 - 7, 'm') + ".sqlite");
  const auto r = test::hookscope({"import", (dir / "ok.json").string(), "-o", longest.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(storage::CaptureReader(longest).runs().size(), 1u);
}

// An output named through a dangling link creates the file the link names, as the shell's `>`
// does; the link stays (it was replaced by a regular file).
TEST(ImportKinetoCli, AnOutputThroughADanglingLinkCreatesItsTarget) {
  const fs::path dir = test::scratch_dir("import_kineto_dangling");
  write(dir / "ok.json", trace_of(kOp, ""));
  const fs::path db = dir / "ok.sqlite";
  ASSERT_EQ(test::hookscope({"import", (dir / "ok.json").string(), "-o", db.string()}).exit_code, 0);
  fs::create_directory(dir / "sub");
  fs::create_symlink("sub/stats.txt", dir / "stats.txt");
  fs::create_symlink("sub/report.json", dir / "report.json");
  ASSERT_EQ(test::hookscope({"stats", db.string(), "-o", (dir / "stats.txt").string()}).exit_code, 0);
  ASSERT_EQ(test::hookscope({"report", db.string(), "--json", (dir / "report.json").string()}).exit_code, 0);
  for (const char* name : {"stats.txt", "report.json"}) {
    EXPECT_TRUE(fs::is_symlink(dir / name)) << name;
    EXPECT_TRUE(fs::is_regular_file(dir / "sub" / name)) << name;
    EXPECT_GT(fs::file_size(dir / "sub" / name), 0u) << name;
  }
}

// The report of a run imported without --policy, --mode or --model names what is missing
// instead of printing empty headings and a row of question marks.
TEST(ImportKinetoCli, TheReportOfABareImportHasNoEmptyHeadings) {
  const fs::path dir = test::scratch_dir("import_kineto_bare_report");
  write(dir / "ok.json", trace_of(kOp, ""));
  ASSERT_EQ(test::hookscope({"import", (dir / "ok.json").string(), "-o", (dir / "c.sqlite").string()}).exit_code, 0);
  const auto r = test::hookscope({"report", (dir / "c.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "No model or device recorded")) << r.out;
  EXPECT_FALSE(contains(r.out, "| ? | ? |")) << r.out;
  EXPECT_FALSE(contains(r.out, "fullgraph,  |")) << r.out;
  EXPECT_FALSE(contains(r.out, "| scenario | mode |  |")) << r.out;
  EXPECT_TRUE(contains(r.out, "No run recorded a graph-break figure")) << "no LibTorch table for a run it did not make";
  EXPECT_FALSE(contains(r.out, "disabled-scope entries† per compiled forward")) << r.out;
  // The page says the same, titled by the capture's name rather than a question mark.
  const fs::path page = dir / "r.html";
  ASSERT_EQ(test::hookscope({"report", (dir / "c.sqlite").string(), "--html", page.string()}).exit_code, 0);
  const std::string html = test::read_file(page);
  EXPECT_TRUE(contains(html, "<h1>hookscope report: c.sqlite</h1>")) << "the title names the capture";
  EXPECT_FALSE(contains(html, "hookscope report: ?"));
  EXPECT_TRUE(contains(html, "No run recorded a graph-break figure"));
  // The timeline's caption names the lanes this run draws, not a generate's.
  EXPECT_TRUE(contains(html, "Lane groups per host thread (CPU ops): faded blocks")) << html;
  EXPECT_FALSE(contains(html, "the other timelines")) << "one timeline: no others to share a scale with";
  EXPECT_FALSE(contains(html, "generation steps"));
}

// SIGINT while a large trace is imported: the import stops at its next progress report, the run
// is ended `incomplete`, the capture is closed as after an error (an appended capture keeps its
// earlier run, with no journal, WAL, lock or temporary file left) and it exits 130 saying so.
// A signal that arrives once the run is written lets the import finish (exit 0). Found by a
// try-out: an interrupted --append left a rollback journal that every reader then refused, and
// a signal after "wrote run" printed "stays incomplete" about a complete run, exiting 130.
// The temporary files an import killed outright left (`OUT.partial-PID`, its WAL and shared
// memory: nothing can remove them at a SIGKILL) are removed by the next import into OUT, which
// says so; those of a process still alive, and other files, are left alone.
TEST(ImportKinetoCli, AKilledImportsTemporaryFilesGoAtTheNextImport) {
  const fs::path dir = test::scratch_dir("import_kineto_stale");
  write(dir / "ok.json", trace_of(kOp, ""));
  const pid_t dead = fork();  // a pid whose process has ended
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  const std::string stale = "out.sqlite.partial-" + std::to_string(dead);
  const std::string alive = "out.sqlite.partial-" + std::to_string(getpid());
  for (const std::string& name : {stale, stale + "-wal", stale + "-shm", alive, std::string("out.sqlite.partial-x"),
                                  std::string("other.sqlite.partial-") + std::to_string(dead)})
    write(dir / name, "left over");
  const auto r = test::hookscope({"import", (dir / "ok.json").string(), "-o", (dir / "out.sqlite").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(others(dir, {"ok.json", "out.sqlite"}),
            (std::set<std::string>{alive, "out.sqlite.partial-x", "other.sqlite.partial-" + std::to_string(dead)}));
  EXPECT_TRUE(contains(r.err, "removed " + (dir / stale).string() + "-wal, left by an import into " +
                                  (dir / "out.sqlite").string() + " that was killed"))
      << r.err;
  EXPECT_EQ(storage::CaptureReader(dir / "out.sqlite").runs().size(), 1u);
}

TEST(ImportKinetoCli, AnInterruptedImportEndsItsRunIncompleteAndLeavesNoFiles) {
  const fs::path dir = test::scratch_dir("import_kineto_interrupt");
  const fs::path big = dir / "big.json";
  {  // the real trace's events 30 times over (each copy under its own pid): about 55 MB
    std::ofstream f(big, std::ios::binary);
    f << "[";
    bool first = true;
    for (int copy = 0; copy < 30; ++copy)
      for (json e : trace_doc()["traceEvents"]) {
        if (e.contains("pid") && e["pid"].is_number_integer()) e["pid"] = e["pid"].get<int64_t>() + 1000 * copy;
        f << (std::exchange(first, false) ? "" : ",\n") << e.dump();
      }
    f << "]\n";
  }
  ASSERT_GT(fs::file_size(big), importers::kineto::kPipelineBytes);
  const fs::path base = dir / "base.hscope";
  ASSERT_EQ(test::hookscope({"import", (trace_dir() / "trace.json").string(), "-o", base.string()}).exit_code, 0);
  auto runs_in = [](const fs::path& capture) {  // RUNS rows as a concurrent reader sees them; -1: none yet
    sqlite3* db = nullptr;
    int64_t n = -1;
    if (sqlite3_open_v2(capture.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(db, "SELECT count(*) FROM RUNS", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    }
    sqlite3_close_v2(db);
    return n;
  };
  int interrupted = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    for (const bool append : {true, false}) {
      const fs::path out = dir / "out.hscope", log = dir / "log.txt";
      fs::remove(out);
      if (append) fs::copy_file(base, out);
      std::vector<std::string> argv{test::cli(), "import", big.string(), "-o", out.string()};
      if (append) argv.push_back("--append");
      const pid_t pid = test::start(argv, log);
      // Signal once the run being imported exists (its row is committed before the trace is read).
      const fs::path written = append ? out : fs::path(out.string() + ".partial-" + std::to_string(pid));
      const int64_t want = append ? 2 : 1;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (runs_in(written) < want && std::chrono::steady_clock::now() < deadline && waitpid(pid, nullptr, WNOHANG) == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      kill(pid, SIGINT);
      int status = 0;
      waitpid(pid, &status, 0);
      const std::string err = test::read_file(log);
      ASSERT_TRUE(WIFEXITED(status)) << err;
      const int rc = WEXITSTATUS(status);
      ASSERT_TRUE(rc == 130 || rc == 0) << rc << ": " << err;
      EXPECT_EQ(others(dir, {"big.json", "base.hscope", "out.hscope", "log.txt"}), std::set<std::string>{})
          << "no journal, WAL, lock or temporary file left; " << err;
      if (rc == 130) {
        ++interrupted;
        EXPECT_TRUE(contains(err, append ? "interrupted by SIGINT: run 2 stays incomplete in " + out.string()
                                         : "interrupted by SIGINT: nothing was written to " + out.string()))
            << err;
        if (!append) {
          EXPECT_FALSE(fs::exists(out));
          continue;
        }
      } else {
        EXPECT_TRUE(contains(err, "wrote run " + std::to_string(want))) << err;
      }
      const auto runs = storage::CaptureReader(out).runs();
      ASSERT_EQ(runs.size(), static_cast<size_t>(want)) << err;
      if (append) {
        EXPECT_EQ(runs[0].status, tracer::RunStatus::Complete) << "the earlier run is intact";
      }
      EXPECT_EQ(runs.back().status, rc == 130 ? tracer::RunStatus::Incomplete : tracer::RunStatus::Complete) << err;
      EXPECT_EQ(test::hookscope({"stats", out.string()}).exit_code, 0);
    }
  }
  EXPECT_GE(interrupted, 1) << "no SIGINT landed while importing 55 MB";
}

TEST(ImportKinetoCli, AppendRefusesWhatIsNotACaptureAndLeavesItAsItWas) {
  const fs::path dir = test::scratch_dir("import_kineto_append");
  write(dir / "ok.json", trace_of(kOp, ""));
  const fs::path empty = dir / "empty.sqlite", foreign = dir / "foreign.sqlite", rebuilt = dir / "rebuilt.sqlite";
  write(empty, "");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes (id INTEGER, text TEXT)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_EQ(test::hookscope({"import", (dir / "ok.json").string(), "-o", rebuilt.string()}).exit_code, 0);
  test::edited_copy(rebuilt, rebuilt.string() + ".tmp",
                    "PRAGMA journal_mode=DELETE; CREATE TABLE R2 AS SELECT * FROM RUNS; INSERT INTO R2 SELECT * FROM "
                    "RUNS; DROP TABLE RUNS; ALTER TABLE R2 RENAME TO RUNS;");
  fs::rename(rebuilt.string() + ".tmp", rebuilt);
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {empty, "not a hookscope capture: " + empty.string() + " (an empty file)"},
      {foreign, "not a hookscope capture: " + foreign.string()},
      {rebuilt, "capture " + rebuilt.string() + ": RUNS.id is not the table's INTEGER PRIMARY KEY"},
  };
  for (const auto& [file, want] : cases) {
    const std::string before = test::read_file(file);
    const auto r = test::hookscope({"import", (dir / "ok.json").string(), "-o", file.string(), "--append"});
    EXPECT_EQ(r.exit_code, 1) << file << ": " << r.err;
    EXPECT_TRUE(contains(r.err, want)) << file << ": " << r.err;
    EXPECT_FALSE(contains(r.err, "end_run")) << r.err;
    EXPECT_EQ(test::read_file(file), before) << file << " is left as it was";
  }
  EXPECT_EQ(others(dir, {"ok.json", "empty.sqlite", "foreign.sqlite", "rebuilt.sqlite"}), std::set<std::string>{})
      << "no lock, -wal or -shm left";
  // A reader refuses the rebuilt capture the same way.
  const auto r = test::hookscope({"stats", rebuilt.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "RUNS.id is not the table's INTEGER PRIMARY KEY")) << r.err;
}
