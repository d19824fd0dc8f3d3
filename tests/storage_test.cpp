// Capture files: schema (nsys names), Store ← HostTracer round trips, crash safety (SIGKILL),
// the read-only CaptureReader and its refusals. Raw SQL checks go through the SQLite C API.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "importers/dynamo_summary.h"
#include "storage/bounded_json.h"
#include "storage/btree_pages.h"
#include "storage/capture_reader.h"
#include "storage/schema.h"
#include "storage/sqlite_util.h"
#include "storage/store.h"
#include "tests/test_util.h"
#include "tracer/host_tracer.h"

namespace {

namespace fs = std::filesystem;
using namespace hs;
using storage::CaptureError;
using storage::CaptureReader;
using storage::Store;
using tracer::HostTracer;
using tracer::MemcpyKind;
using tracer::RunStatus;

// ---- raw SQL helpers -------------------------------------------------------------------
struct RawDb {
  sqlite3* db = nullptr;
  explicit RawDb(const fs::path& p, int flags = SQLITE_OPEN_READONLY) {
    if (sqlite3_open_v2(p.c_str(), &db, flags, nullptr) != SQLITE_OK)
      throw std::runtime_error("raw open failed: " + p.string());
  }
  ~RawDb() { sqlite3_close_v2(db); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string e = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error("raw exec failed: " + e + " in " + sql);
    }
  }
  // All rows, each column as text ("NULL" for null).
  std::vector<std::vector<std::string>> rows(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("raw prepare failed: ") + sqlite3_errmsg(db) + " in " + sql);
    std::vector<std::vector<std::string>> out;
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
  std::vector<std::string> columns(const std::string& table) {
    std::vector<std::string> out;
    for (auto& r : rows("PRAGMA table_info(" + table + ")")) out.push_back(r[1]);
    return out;
  }
};

struct FileState {
  std::string bytes;
  fs::file_time_type mtime;
  bool operator==(const FileState&) const = default;
};
FileState file_state(const fs::path& p) { return {test::read_file(p), fs::last_write_time(p)}; }

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// Runs `f` and returns the CaptureError message (fails the test if nothing is thrown).
template <class F>
std::string capture_error(F&& f) {
  try {
    f();
  } catch (const CaptureError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a CaptureError";
  return {};
}

tracer::RunInfo run_info(const std::string& scenario) {
  tracer::RunInfo i;
  i.scenario = scenario;
  i.policy = "offload-only";
  i.mode = "default";
  i.fullgraph = true;
  i.model = "tiny-llama";
  i.device_map_json = R"({"model.embed_tokens": 0, "model.layers.0": "cpu", "lm_head": "disk"})";
  i.versions_json = R"({"hookscope": "0.1.0", "torch": "2.11.0"})";
  return i;
}

// ---- schema ----------------------------------------------------------------------------

TEST(CaptureSchema, HasNsysTablesColumnsAndEnums) {
  const fs::path file = test::scratch_dir("storage_schema") / "capture.hscope";
  { Store store(file); }
  RawDb db(file);
  auto has = [&](const std::string& table, const std::vector<std::string>& cols) {
    const auto got = db.columns(table);
    ASSERT_FALSE(got.empty()) << "missing table " << table;
    for (const auto& c : cols)
      EXPECT_NE(std::find(got.begin(), got.end(), c), got.end()) << table << " lacks column " << c;
  };
  has("StringIds", {"id", "value"});
  has("META_DATA_EXPORT", {"name", "value"});
  has("TARGET_INFO_SESSION_START_TIME", {"utcEpochNs", "utcTime", "localTime"});
  has("TARGET_INFO_GPU", {"vmId", "id", "name", "busLocation", "isDiscrete", "l2CacheSize", "totalMemory",
                          "memoryBandwidth", "clockRate", "smCount", "uuid", "chipName", "cuDevice", "computeMajor",
                          "computeMinor", "maxShmemPerBlock", "maxWarpsPerSm", "asyncEngines"});
  has("CUPTI_ACTIVITY_KIND_KERNEL",
      {"start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId", "globalPid",
       "demangledName", "shortName", "mangledName", "launchType", "cacheConfig", "registersPerThread", "gridX", "gridY",
       "gridZ", "blockX", "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory", "localMemoryPerThread",
       "localMemoryTotal", "gridId", "sharedMemoryExecuted", "graphNodeId", "sharedMemoryLimitConfig"});
  has("CUPTI_ACTIVITY_KIND_MEMCPY",
      {"start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId", "globalPid", "bytes",
       "copyKind", "srcKind", "dstKind", "srcDeviceId", "srcContextId", "dstDeviceId", "dstContextId",
       "migrationCause", "graphNodeId", "virtualAddress"});
  has("CUPTI_ACTIVITY_KIND_MEMSET", {"start", "end", "deviceId", "contextId", "streamId", "correlationId",
                                     "globalPid", "value", "bytes", "graphNodeId", "memKind"});
  has("CUPTI_ACTIVITY_KIND_RUNTIME",
      {"start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", "callchainId"});
  has("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", {"start", "end", "deviceId", "contextId", "streamId", "correlationId",
                                              "globalPid", "syncType", "eventId"});
  for (const char* t : {"ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_HOOK_PHASE", "ENUM_WEIGHT_SOURCE",
                        "ENUM_RUN_STATUS", "ENUM_CUPTI_SYNC_TYPE", "ENUM_DEVICE_KIND", "ENUM_DIAGNOSTIC_SEVERITY"})
    has(t, {"id", "name", "label"});
  has("RUNS", {"id", "scenario", "policy", "mode", "fullgraph", "model", "device_map", "versions", "status", "error",
               "start", "end", "results"});
  has("DEVICES", {"id", "runId", "name", "kind", "backing", "label", "max_memory"});
  has("MODULES", {"runId", "moduleId", "classId"});
  has("HOOK_EVENTS", {"runId", "start", "end", "threadId", "hookId", "phase", "moduleId"});
  has("WEIGHT_SWAPS", {"runId", "start", "end", "onload", "moduleId", "tensorId", "bytes", "dtypeId", "source",
                       "device", "pinned"});
  has("TRANSFERS", {"runId", "start", "end", "src", "dst", "bytes", "copyKind", "emulated", "moduleId"});
  has("MODULE_COMPUTE", {"runId", "start", "end", "moduleId", "device"});
  has("COMPILE_REGIONS", {"runId", "start", "end", "regionIndex", "opCount", "backendId", "compileId"});
  has("GRAPH_BREAKS", {"runId", "start", "reasonId", "functionId", "moduleId", "moduleStackId"});
  has("COMPILE_RESULTS", {"runId", "region_count", "disabled_scope_entries", "recompiles", "fullgraph_ok", "error"});
  has("GENERATION_STEPS", {"runId", "start", "end", "step", "token"});
  has("MEMORY_COUNTERS", {"runId", "start", "device", "bytes"});
  has("DIAGNOSTICS", {"runId", "severity", "source", "text"});
  has("DISABLED_SCOPES", {"runId", "start", "end", "functionId", "moduleId", "depth"});
  has("CPU_OPS",
      {"runId", "start", "end", "globalTid", "nameId", "argsId", "externalId", "sequenceNumber", "categoryId"});
  // Column order as in earlier captures (SELECT * keeps working); newer columns come last.
  EXPECT_EQ(db.columns("HOOK_EVENTS"),
            (std::vector<std::string>{"runId", "start", "end", "threadId", "hookId", "phase", "moduleId", "externalId"}));
  EXPECT_EQ(db.columns("TRANSFERS"), (std::vector<std::string>{"runId", "start", "end", "threadId", "src", "dst",
                                                               "bytes", "copyKind", "emulated", "moduleId"}));
  EXPECT_EQ(db.columns("GRAPH_BREAKS"), (std::vector<std::string>{"runId", "start", "threadId", "reasonId",
                                                                  "functionId", "moduleId", "moduleStackId"}));
  EXPECT_EQ(db.columns("CUPTI_ACTIVITY_KIND_RUNTIME"),
            (std::vector<std::string>{"start", "end", "eventClass", "globalTid", "correlationId", "nameId",
                                      "returnValue", "callchainId", "runId"}));
  EXPECT_EQ(db.columns("CLOCK_CALIBRATION"), (std::vector<std::string>{"runId", "deviceId", "hostNs", "gpuNs"}));

  // nsys enum ids, names and labels.
  EXPECT_EQ(db.rows("SELECT id, name, label FROM ENUM_CUDA_MEMCPY_OPER WHERE id IN (0, 1, 2, 8, 9, 10) ORDER BY id"),
            (std::vector<std::vector<std::string>>{{"0", "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"},
                                                   {"1", "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"},
                                                   {"2", "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"},
                                                   {"8", "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"},
                                                   {"9", "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"},
                                                   {"10", "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"}}));
  EXPECT_EQ(db.one("SELECT count(*) FROM ENUM_CUDA_MEMCPY_OPER"), "14");
  EXPECT_EQ(db.rows("SELECT id, name, label FROM ENUM_CUDA_MEM_KIND WHERE id IN (0, 1, 7) ORDER BY id"),
            (std::vector<std::vector<std::string>>{{"0", "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"},
                                                   {"1", "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"},
                                                   {"7", "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"}}));
  EXPECT_EQ(db.one("SELECT label FROM ENUM_HOOK_PHASE WHERE id = 0"), "pre_forward");
  EXPECT_EQ(db.one("SELECT label FROM ENUM_WEIGHT_SOURCE WHERE id = 1"), "disk");
  EXPECT_EQ(db.one("SELECT label FROM ENUM_RUN_STATUS WHERE id = 0"), "incomplete");
  EXPECT_EQ(db.one("SELECT label FROM ENUM_RUN_STATUS WHERE id = 1"), "complete");
  // Metadata, session start; GPU tables empty on a CPU capture.
  EXPECT_EQ(db.one("SELECT value FROM META_DATA_EXPORT WHERE name = 'HOOKSCOPE_SCHEMA_VERSION'"),
            std::to_string(storage::kSchemaVersion));
  EXPECT_EQ(db.one("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'"), "hookscope 0.1.0");
  EXPECT_EQ(db.one("SELECT count(*) FROM TARGET_INFO_SESSION_START_TIME WHERE utcEpochNs > 0"), "1");
  for (const char* t : {"TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                        "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME",
                        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"})
    EXPECT_EQ(db.one(std::string("SELECT count(*) FROM ") + t), "0") << t;
  // A closed capture is one self-contained file (rollback journal, no -wal left behind).
  EXPECT_EQ(db.one("PRAGMA journal_mode"), "delete");
  EXPECT_FALSE(fs::exists(fs::path(file.string() + "-wal")));
}

TEST(CopyKind, LogicalDirectionUsesNsysIds) {
  EXPECT_EQ(storage::copy_kind_for("cpu", "0"), MemcpyKind::HtoD);
  EXPECT_EQ(storage::copy_kind_for("disk", "1"), MemcpyKind::HtoD);
  EXPECT_EQ(storage::copy_kind_for("1", "cpu"), MemcpyKind::DtoH);
  EXPECT_EQ(storage::copy_kind_for("0", "1"), MemcpyKind::PtoP);
  EXPECT_EQ(storage::copy_kind_for("2", "2"), MemcpyKind::DtoD);
  EXPECT_EQ(storage::copy_kind_for("cpu", "cpu"), MemcpyKind::HtoH);
  EXPECT_EQ(storage::copy_kind_for("meta", "0"), MemcpyKind::Unknown);
}

// ---- round trip through HostTracer → Store → CaptureReader ----------------------------

// Events the tracer had to drop (a pool too small for the burst) reach the file: the run's
// droppedRecords and a warning saying its tables are incomplete.
TEST(Store, DroppedEventsAreCountedInTheRunAndSaid) {
  const fs::path file = test::scratch_dir("storage_dropped") / "capture.hscope";
  int64_t run = 0;
  uint64_t dropped = 0;
  {
    Store store(file);
    tracer::TracerOptions o;
    o.chunks = 2;
    o.chunk_records = 8;
    HostTracer tr(store, o);
    run = tr.begin_run(run_info("tiny/drops"));
    events::EventSink& s = tr;
    for (int i = 0; i < 20000; ++i)
      s.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.0", "LlamaDecoderLayer", 0, i, i + 1});
    const auto st = tr.end_run(RunStatus::Complete);
    dropped = st.dropped();
    store.finalize();
  }
  ASSERT_GT(dropped, 0u) << "a 16-record pool cannot hold a 20000-event burst";
  CaptureReader r(file);
  EXPECT_EQ(r.run(run).dropped_records, static_cast<int64_t>(dropped));
  EXPECT_EQ(r.hook_events(run).size() + dropped, 20000u);
  bool said = false;
  for (const auto& d : r.diagnostics(run))
    said |= d.severity == storage::Severity::Warning && d.source == "tracer" &&
            d.text.find("dropped " + std::to_string(dropped) + " events") != std::string::npos;
  EXPECT_TRUE(said) << "a warning names the drops";
}

// A capture written before a column existed (HOOK_EVENTS.externalId came later) still reads:
// the missing column reads as 0, everything else as written.
TEST(CaptureReader, AFileWithoutANewerColumnReadsItAsZero) {
  const fs::path file = test::scratch_dir("storage_old_columns") / "capture.sqlite";
  int64_t run = 0;
  {
    Store store(file);
    HostTracer tr(store);
    run = tr.begin_run(run_info("tiny/sharded"));
    tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.0", "LlamaDecoderLayer", 41, 100, 150});
    tr.module_compute({"model.layers.0", "LlamaDecoderLayer", "0", 42, 150, 300});
    tr.end_run(RunStatus::Complete);
    store.finalize();
  }
  ASSERT_EQ(CaptureReader(file).hook_events(run).at(0).external_id, 41);
  {
    RawDb raw(file, SQLITE_OPEN_READWRITE);
    raw.exec("PRAGMA journal_mode=DELETE");
    raw.exec("ALTER TABLE HOOK_EVENTS DROP COLUMN externalId");
  }
  CaptureReader r(file);
  const auto hooks = r.hook_events(run);
  ASSERT_EQ(hooks.size(), 1u);
  EXPECT_EQ(hooks[0].external_id, 0);
  EXPECT_EQ(hooks[0].hook, "AlignDevicesHook");
  EXPECT_EQ(hooks[0].module, "model.layers.0");
  EXPECT_EQ(hooks[0].end_ns, 150);
  EXPECT_EQ(r.module_compute(run).at(0).external_id, 42) << "the other tables keep theirs";
}

// Found by capture_reader_fuzz: a file whose sqlite_master lacks a table count() reads threw
// std::invalid_argument (a caller's error) and aborted the harness; it is the file's error.
// Reading its rows is too: a capture without HOOK_EVENTS read as one without a hook call, but
// every capture has the table. A kind added later (CPU_OPS) may be absent and reads as none.
TEST(CaptureReader, ATableTheFileLacksIsACaptureErrorNamingTheFile) {
  const fs::path file = test::scratch_dir("storage_no_hook_events") / "capture.sqlite";
  int64_t run = 0;
  {
    Store store(file);
    HostTracer tr(store);
    run = tr.begin_run(run_info("tiny/sharded"));
    tr.end_run(RunStatus::Complete);
    store.finalize();
  }
  {
    RawDb raw(file, SQLITE_OPEN_READWRITE);
    raw.exec("PRAGMA journal_mode=DELETE");
    raw.exec("DROP TABLE HOOK_EVENTS; DROP TABLE CPU_OPS");
  }
  CaptureReader r(file);
  EXPECT_EQ(r.count("RUNS"), 1);
  std::string msg = capture_error([&] { (void)r.count("HOOK_EVENTS", run); });
  EXPECT_NE(msg.find("no table 'HOOK_EVENTS'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
  EXPECT_TRUE(r.cpu_ops(run).empty());
  EXPECT_TRUE(r.module_compute(run).empty());
  msg = capture_error([&] { (void)r.hook_events(run); });
  EXPECT_EQ(msg, "capture " + file.string() +
                     " has no table HOOK_EVENTS, which every hookscope capture has; the file is damaged");
}

// A RUNS.status that is none of ENUM_RUN_STATUS's ids is a damaged file named with its run, not
// a run read as incomplete.
TEST(CaptureReader, ARunStatusOutsideItsEnumIsACaptureErrorNamingTheRun) {
  const fs::path file = test::scratch_dir("storage_bad_status") / "capture.sqlite";
  {
    Store store(file);
    HostTracer tr(store);
    tr.begin_run(run_info("tiny/sharded"));
    tr.end_run(RunStatus::Complete);
    store.finalize();
  }
  for (const char* status : {"77", "-1"}) {
    {
      RawDb raw(file, SQLITE_OPEN_READWRITE);
      raw.exec("PRAGMA journal_mode=DELETE");
      raw.exec(std::string("UPDATE RUNS SET status = ") + status);
    }
    try {
      CaptureReader(file).runs();
      ADD_FAILURE() << "read status " << status;
    } catch (const storage::CaptureError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(file.string() + ": run 1: RUNS.status is " + status), std::string::npos) << m;
    }
  }
}

// A string id far past the StringIds table (a damaged or hostile file) is named, not a vector
// of four billion strings.
TEST(CaptureReader, AStringIdPastTheTableIsACaptureErrorNotAnAllocation) {
  const fs::path file = test::scratch_dir("storage_string_id_past") / "capture.sqlite";
  int64_t run = 0;
  {
    Store store(file);
    HostTracer tr(store);
    run = tr.begin_run(run_info("tiny/sharded"));
    tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.0", "LlamaDecoderLayer", 0, 100, 150});
    tr.end_run(RunStatus::Complete);
    store.finalize();
  }
  {
    RawDb raw(file, SQLITE_OPEN_READWRITE);
    raw.exec("PRAGMA journal_mode=DELETE");
    raw.exec("INSERT INTO StringIds (id, value) VALUES (4000000000, 'far')");
  }
  try {
    (void)CaptureReader(file).hook_events(run);
    ADD_FAILURE() << "read a string table with id 4000000000";
  } catch (const storage::CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("StringIds has id 4000000000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

TEST(Store, RoundTripsEveryEventKindAndTheDirectMethods) {
  const fs::path file = test::scratch_dir("storage_roundtrip") / "capture.hscope";
  int64_t run = 0;
  {
    Store store(file);
    HostTracer tr(store);
    run = tr.begin_run(run_info("tiny/offload"));
    events::EventSink& s = tr;
    s.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.0", "LlamaDecoderLayer", 0, 100, 150});
    s.hook_span({"AlignDevicesHook", events::HookPhase::PostForward, "model.layers.0", "LlamaDecoderLayer", 0, 300, 320});
    s.weight_swap({true, "model.layers.0", "mlp.up_proj.weight", 4096, "bfloat16", events::WeightSource::Disk, "0",
                   false, 110, 140});
    s.weight_swap({false, "model.layers.0", "mlp.up_proj.weight", 4096, "bfloat16", events::WeightSource::Device,
                   "meta", false, 305, 306});
    s.transfer({"cpu", "0", 2048, true, "model.layers.0", 120, 130});
    s.transfer({"0", "1", 1024, true, "", 200, 210});  // module unknown
    s.transfer({"0", "1", 1024, true, "model.layers.1", 220, 240});
    s.disabled_scope({"AlignDevicesHook._onload_weights", "model.layers.0", 1, 105, 145});
    s.module_compute({"model.layers.0", "LlamaDecoderLayer", "0", 0, 150, 300});
    s.region({0, 12, "eager", "", 90, 104});
    s.graph_break({"Skip calling `torch.compiler.disable()`d function", "AlignDevicesHook._onload_weights",
                   "model.layers.0", "model > model.layers.0", 104});
    s.generation_step({0, 1234, 80, 400});
    s.memory_counter({"0", 1 << 20, 145});
    std::thread other([&] { s.memory_counter({"cpu", 7, 500}); });
    other.join();
    tr.end_run(RunStatus::Complete);

    store.set_run_result(run, {{"latency_ms", {{"p50", 12.5}}}, {"argmax_match", true}});
    store.set_run_result(run, {{"logits_identical", true}, {"params_on_meta_after", 0}});
    store.add_diagnostic(run, storage::Severity::Info, "compile", "skipping cudagraphs due to cpu device", 95);
    store.add_diagnostic(std::nullopt, storage::Severity::Warning, "cupti", "CUPTI unavailable (CPU build)");
    storage::DeviceInfo d0{run, "0", storage::DeviceKind::Emulated, "cpu", "emulated accelerator 0 (cpu)",
                           int64_t{1} << 30, std::nullopt};
    store.add_device(d0);
    store.add_device({std::nullopt, "cpu", storage::DeviceKind::Cpu, "cpu", "host", std::nullopt, std::nullopt});
    storage::CompileResult cr;
    cr.region_count = 2;
    cr.disabled_scope_entries = 1;
    cr.recompiles = 0;
    cr.fullgraph_ok = false;
    cr.error = "Unsupported: Skip calling `torch.compiler.disable()`d function";
    cr.break_reasons = {"Skip calling `torch.compiler.disable()`d function"};
    store.add_compile_result(run, cr);
    store.add_module(run, "model.norm", "LlamaRMSNorm");
    store.finalize();
  }

  CaptureReader r(file);
  EXPECT_EQ(r.schema_version(), storage::kSchemaVersion);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 1u);
  const auto& ru = runs[0];
  EXPECT_EQ(ru.id, run);
  EXPECT_EQ(ru.scenario, "tiny/offload");
  EXPECT_EQ(ru.policy, "offload-only");
  EXPECT_EQ(ru.mode, "default");
  EXPECT_TRUE(ru.fullgraph);
  EXPECT_EQ(ru.model, "tiny-llama");
  EXPECT_EQ(ru.device_map["lm_head"], "disk");
  EXPECT_EQ(ru.versions["torch"], "2.11.0");
  EXPECT_EQ(ru.status, RunStatus::Complete);
  ASSERT_TRUE(ru.end_ns.has_value());
  EXPECT_GE(*ru.end_ns, ru.start_ns);
  EXPECT_EQ(ru.dropped_records, 0);
  EXPECT_EQ(ru.results["latency_ms"]["p50"], 12.5);
  EXPECT_EQ(ru.results["argmax_match"], true);  // merged, not replaced, by the second call
  EXPECT_EQ(ru.results["logits_identical"], true);

  const auto hooks = r.hook_events(run);
  ASSERT_EQ(hooks.size(), 2u);
  EXPECT_EQ(hooks[0].hook, "AlignDevicesHook");
  EXPECT_EQ(hooks[0].phase, events::HookPhase::PreForward);
  EXPECT_EQ(hooks[0].module, "model.layers.0");
  EXPECT_EQ(hooks[0].start_ns, 100);
  EXPECT_EQ(hooks[0].end_ns, 150);
  EXPECT_EQ(hooks[1].phase, events::HookPhase::PostForward);

  const auto swaps = r.weight_swaps(run);
  ASSERT_EQ(swaps.size(), 2u);
  EXPECT_TRUE(swaps[0].onload);
  EXPECT_EQ(swaps[0].tensor, "mlp.up_proj.weight");
  EXPECT_EQ(swaps[0].bytes, 4096);
  EXPECT_EQ(swaps[0].dtype, "bfloat16");
  EXPECT_EQ(swaps[0].source, events::WeightSource::Disk);
  EXPECT_EQ(swaps[0].device, "0");
  EXPECT_FALSE(swaps[0].pinned);
  EXPECT_FALSE(swaps[1].onload);
  EXPECT_EQ(swaps[1].device, "meta");

  const auto tr = r.transfers(run);
  ASSERT_EQ(tr.size(), 3u);
  EXPECT_EQ(tr[0].src, "cpu");
  EXPECT_EQ(tr[0].dst, "0");
  EXPECT_EQ(tr[0].copy_kind, MemcpyKind::HtoD);
  EXPECT_TRUE(tr[0].emulated);
  EXPECT_EQ(tr[0].module, "model.layers.0");
  EXPECT_EQ(tr[1].copy_kind, MemcpyKind::PtoP);
  EXPECT_EQ(tr[1].module, "");
  const auto sums = r.transfer_sums(run);
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0].src, "0");
  EXPECT_EQ(sums[0].count, 2);
  EXPECT_EQ(sums[0].bytes, 2048);
  EXPECT_EQ(sums[0].total_ns, 30);
  EXPECT_EQ(sums[1].src, "cpu");
  EXPECT_EQ(sums[1].bytes, 2048);
  const auto swap_sums = r.weight_swap_sums(run);
  ASSERT_EQ(swap_sums.size(), 2u);
  EXPECT_TRUE(swap_sums[0].onload);
  EXPECT_EQ(swap_sums[0].source, events::WeightSource::Disk);
  EXPECT_EQ(swap_sums[0].bytes, 4096);
  EXPECT_EQ(swap_sums[0].total_ns, 30);
  EXPECT_FALSE(swap_sums[1].onload);

  const auto scopes = r.disabled_scopes(run);
  ASSERT_EQ(scopes.size(), 1u);
  EXPECT_EQ(scopes[0].function, "AlignDevicesHook._onload_weights");
  EXPECT_EQ(scopes[0].depth, 1);
  const auto compute = r.module_compute(run);
  ASSERT_EQ(compute.size(), 1u);
  EXPECT_EQ(compute[0].device, "0");
  EXPECT_EQ(compute[0].end_ns, 300);
  const auto regions = r.regions(run);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].op_count, 12);
  EXPECT_EQ(regions[0].backend, "eager");
  EXPECT_EQ(regions[0].compile_id, "") << "the LibTorch engine has no Dynamo compile ids";
  const auto breaks = r.graph_breaks(run);
  ASSERT_EQ(breaks.size(), 1u);
  EXPECT_EQ(breaks[0].reason, "Skip calling `torch.compiler.disable()`d function");
  EXPECT_EQ(breaks[0].function, "AlignDevicesHook._onload_weights");
  EXPECT_EQ(breaks[0].module_stack, "model > model.layers.0");
  EXPECT_EQ(breaks[0].time_ns, 104);
  const auto steps = r.generation_steps(run);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].token, 1234);
  const auto counters = r.memory_counters(run);
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0].bytes, 1 << 20);
  EXPECT_NE(counters[0].thread, counters[1].thread) << "two recording threads, two thread ids";
  EXPECT_EQ(r.threads(run).size(), 2u);

  const auto modules = r.modules(run);
  ASSERT_EQ(modules.size(), 2u);
  EXPECT_EQ(modules[0].fqn, "model.layers.0");
  EXPECT_EQ(modules[0].module_class, "LlamaDecoderLayer");
  EXPECT_EQ(modules[1].fqn, "model.norm");

  const auto diags = r.diagnostics(run);
  ASSERT_EQ(diags.size(), 2u);
  EXPECT_EQ(diags[0].text, "skipping cudagraphs due to cpu device");
  EXPECT_EQ(diags[0].time_ns, 95);
  EXPECT_FALSE(diags[1].run_id.has_value());
  const auto devs = r.devices(run);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].info.kind, storage::DeviceKind::Emulated);
  EXPECT_EQ(devs[0].info.max_memory, int64_t{1} << 30);
  EXPECT_FALSE(devs[1].info.run_id.has_value());
  const auto crs = r.compile_results(run);
  ASSERT_EQ(crs.size(), 1u);
  EXPECT_EQ(crs[0].result.region_count, 2);
  EXPECT_EQ(crs[0].result.disabled_scope_entries, 1);
  EXPECT_FALSE(crs[0].result.fullgraph_ok);
  EXPECT_EQ(crs[0].result.break_reasons.size(), 1u);
  EXPECT_TRUE(r.gpus().empty());
  EXPECT_EQ(r.metadata().at("EXPORT_PRODUCT_VERSION"), "hookscope 0.1.0");
  EXPECT_THROW(r.run(run + 1), std::out_of_range);
  EXPECT_THROW(r.count("sqlite_master; DROP TABLE RUNS"), storage::CaptureError);
}

TEST(Store, InternsEveryStringOnceAcrossRunsAndReferencesStringIds) {
  const fs::path file = test::scratch_dir("storage_strings") / "capture.hscope";
  {
    Store store(file);
    HostTracer tr(store);
    std::vector<std::string> modules;
    for (int m = 0; m < 10; ++m) modules.push_back(std::string("model.layers.").append(std::to_string(m)));
    for (const char* scenario : {"r0", "r1", "r2"}) {
      tr.begin_run(run_info(scenario));
      for (int i = 0; i < 1000; ++i)
        tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, modules[static_cast<size_t>(i % 10)],
                      "LlamaDecoderLayer", 0, i, i + 1});
      tr.end_run();
    }
    // 1 hook + 10 modules + 1 class: shared by all three runs.
    EXPECT_EQ(store.string_count(), 12);
  }
  RawDb db(file);
  EXPECT_EQ(db.one("SELECT count(*) = count(DISTINCT value) FROM StringIds"), "1");
  EXPECT_EQ(db.one("SELECT count(*) FROM HOOK_EVENTS"), "3000");
  // Every string column resolves through StringIds (nsys-style join).
  EXPECT_EQ(db.one("SELECT count(*) FROM HOOK_EVENTS h JOIN StringIds m ON m.id = h.moduleId "
                   "JOIN StringIds k ON k.id = h.hookId WHERE k.value = 'AlignDevicesHook'"),
            "3000");
  EXPECT_EQ(db.one("SELECT count(*) FROM HOOK_EVENTS h JOIN StringIds m ON m.id = h.moduleId "
                   "WHERE m.value = 'model.layers.3'"),
            "300");
}

TEST(Store, RunIsIncompleteUntilItsLastBatchCommits) {
  const fs::path file = test::scratch_dir("storage_status") / "capture.hscope";
  Store store(file);
  HostTracer tr(store);
  const int64_t run = tr.begin_run(run_info("status"));
  {
    CaptureReader r(file);  // a second, read-only connection while the capture is written
    EXPECT_EQ(r.run(run).status, RunStatus::Incomplete);
    EXPECT_FALSE(r.run(run).end_ns.has_value());
  }
  for (int i = 0; i < 100; ++i) tr.generation_step({i, i, i, i + 1});
  tr.flush();
  {
    CaptureReader r(file);
    EXPECT_EQ(r.run(run).status, RunStatus::Incomplete) << "records committed, run not ended";
    EXPECT_EQ(r.generation_steps(run).size(), 100u);
  }
  tr.end_run(RunStatus::Complete);
  CaptureReader r(file);
  EXPECT_EQ(r.run(run).status, RunStatus::Complete);
  EXPECT_EQ(r.generation_steps(run).size(), 100u);
}

TEST(Store, SigkillMidCaptureLeavesEarlierRunsCompleteAndTheInterruptedOneIncomplete) {
  const fs::path file = test::scratch_dir("storage_sigkill") / "capture.hscope";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Child: one finished run, then an endless second run, flushing as it goes.
    close(ready[0]);
    try {
      Store store(file);
      tracer::TracerOptions o;
      o.chunk_records = 500;  // chunk hand-offs and flushes both fall on multiples of 500
      HostTracer tr(store, o);
      tr.begin_run(run_info("first"));
      for (int i = 0; i < 1000; ++i)
        tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.0", "LlamaDecoderLayer", 0, i,
                      i + 1});
      tr.end_run(RunStatus::Complete);
      tr.begin_run(run_info("interrupted"));
      for (int64_t i = 0;; ++i) {
        tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.1", "LlamaDecoderLayer", 0, i,
                      i + 1});
        if (i % 500 == 499) {
          tr.flush();
          if (i == 999 && write(ready[1], "x", 1) != 1) _exit(3);
        }
      }
    } catch (...) {
      _exit(2);
    }
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "child failed before the interrupted run was under way";
  close(ready[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it write more batches
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  {
    CaptureReader r(file);
    const auto runs = r.runs();
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].scenario, "first");
    EXPECT_EQ(runs[0].status, RunStatus::Complete);
    EXPECT_EQ(r.hook_events(runs[0].id).size(), 1000u);
    EXPECT_EQ(runs[1].scenario, "interrupted");
    EXPECT_EQ(runs[1].status, RunStatus::Incomplete);
    EXPECT_FALSE(runs[1].end_ns.has_value());
    EXPECT_GE(r.hook_events(runs[1].id).size(), 1000u);
    EXPECT_EQ(r.hook_events(runs[1].id).size() % 500, 0u) << "only whole batches are visible";
  }
  // The file stays usable: a new process appends a run; the interrupted one stays incomplete.
  {
    Store store(file);
    HostTracer tr(store);
    tr.begin_run(run_info("after"));
    tr.end_run();
  }
  CaptureReader r(file);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].status, RunStatus::Incomplete);
  EXPECT_EQ(runs[2].status, RunStatus::Complete);
}

TEST(Store, FinalizeBuildsIndexesThatQueriesUse) {
  const fs::path file = test::scratch_dir("storage_indexes") / "capture.hscope";
  {
    Store store(file);
    HostTracer tr(store);
    tr.begin_run(run_info("idx"));
    tr.hook_span({"h", events::HookPhase::PreForward, "m", "C", 0, 1, 2});
    tr.end_run();
    CaptureReader before(file);
    EXPECT_FALSE(before.finalized());
    for (const auto& name : before.indexes())
      EXPECT_EQ(name.rfind("sqlite_autoindex", 0), 0u) << "no hookscope index before finalize: " << name;
    store.finalize();
    store.finalize();  // idempotent
  }
  CaptureReader r(file);
  EXPECT_TRUE(r.finalized());
  const auto idx = r.indexes();
  for (const char* want : {"HOOK_EVENTS_runId_start", "TRANSFERS_runId_start", "WEIGHT_SWAPS_runId_start",
                           "GRAPH_BREAKS_runId_start", "MODULE_COMPUTE_runId_start",
                           "CUPTI_ACTIVITY_KIND_KERNEL_correlationId", "CUPTI_ACTIVITY_KIND_MEMCPY_runId_start"})
    EXPECT_NE(std::find(idx.begin(), idx.end(), want), idx.end()) << "missing index " << want;
  RawDb db(file);
  const auto plan = db.rows("EXPLAIN QUERY PLAN SELECT * FROM HOOK_EVENTS WHERE runId = 1 ORDER BY start");
  std::string text;
  for (const auto& row : plan) text += row.back() + "\n";
  EXPECT_NE(text.find("HOOK_EVENTS_runId_start"), std::string::npos) << text;
}

TEST(Store, AppendsRunsToAnExistingCaptureAndOverwritesOnlyCaptures) {
  const fs::path dir = test::scratch_dir("storage_append");
  const fs::path file = dir / "capture.hscope";
  {
    Store store(file);
    const int64_t run = store.add_run(run_info("a"));
    store.end_run(run, RunStatus::Complete);
  }
  {
    Store store(file);
    const int64_t run = store.add_run(run_info("b"));
    store.end_run(run, RunStatus::Failed, "fullgraph=True raised");
  }
  {
    CaptureReader r(file);
    ASSERT_EQ(r.runs().size(), 2u);
    EXPECT_EQ(r.runs()[1].status, RunStatus::Failed);
    EXPECT_EQ(r.runs()[1].error, "fullgraph=True raised");
  }
  { Store store(file, {.overwrite = true}); }
  EXPECT_TRUE(CaptureReader(file).runs().empty()) << "overwrite starts a fresh capture";
}

TEST(Store, RejectsBadInputWithClearErrorsAndRollsBackPartialBatches) {
  const fs::path file = test::scratch_dir("storage_bad_input") / "capture.hscope";
  Store store(file);
  tracer::RunInfo bad = run_info("bad");
  bad.device_map_json = "{not json";
  try {
    store.begin_run(bad);
    FAIL() << "invalid JSON must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RunInfo.device_map_json"), std::string::npos) << e.what();
  }
  bad.device_map_json = "[1, 2]";
  EXPECT_THROW(store.begin_run(bad), std::invalid_argument);
  EXPECT_THROW(store.set_run_result(42, {{"x", 1}}), std::invalid_argument);
  EXPECT_THROW(store.set_run_result(1, nlohmann::json::array()), std::invalid_argument);
  EXPECT_THROW(store.add_compile_result(42, {}), std::invalid_argument);
  EXPECT_THROW(store.add_device({}), std::invalid_argument);

  const int64_t run = store.begin_run(run_info("ok"));
  // A batch whose second record names an undefined string id: nothing of it may land.
  const tracer::StringDef strings[] = {{0, "model.layers.0"}};
  const tracer::Record recs[2] = {
      tracer::Record::of(tracer::rec::MemoryCounter{.device = 0, .bytes = 10, .time_ns = 1}),
      tracer::Record::of(tracer::rec::MemoryCounter{.device = 7, .bytes = 20, .time_ns = 2})};
  tracer::RecordBatch b;
  b.run_id = run;
  b.strings = strings;
  b.records = recs;
  try {
    store.write_batch(b);
    FAIL() << "an undefined string id must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("never defined"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.string_count(), 0) << "the failed batch's strings were rolled back";
  tracer::RecordBatch other;
  other.run_id = 999;
  EXPECT_THROW(store.write_batch(other), std::invalid_argument);
  CaptureReader r(file);
  EXPECT_TRUE(r.memory_counters(run).empty());
  EXPECT_EQ(r.run(run).status, RunStatus::Incomplete);
}

TEST(Store, WritesGpuActivityIntoTheNsysTables) {
  const fs::path file = test::scratch_dir("storage_gpu") / "capture.hscope";
  {
    Store store(file);
    const int64_t run = store.add_run(run_info("gpu"));
    storage::GpuInfo g;
    g.id = 0;
    g.name = "NVIDIA H200";
    g.total_memory = int64_t{141} << 30;
    g.sm_count = 132;
    g.compute_major = 9;
    store.add_gpu(g);
    tracer::KernelActivity k;
    k.start_ns = 1000;
    k.end_ns = 2000;
    k.correlation_id = 7;
    k.demangled_name = "void gemm<float>(float*)";
    k.short_name = "gemm";
    k.grid_x = 128;
    tracer::MemcpyActivity m1{.device_id = 0, .context_id = 1, .stream_id = 7, .correlation_id = 8, .bytes = 4096,
                              .copy_kind = MemcpyKind::HtoD, .src_kind = tracer::MemKind::Pageable,
                              .dst_kind = tracer::MemKind::Device, .dst_device_id = 0, .start_ns = 1100,
                              .end_ns = 1500};
    tracer::MemcpyActivity m2 = m1;
    m2.correlation_id = 9;
    m2.bytes = 1024;
    m2.src_kind = tracer::MemKind::Pinned;
    m2.start_ns = 1600;
    m2.end_ns = 1700;
    tracer::MemsetActivity ms{.device_id = 0, .context_id = 1, .stream_id = 7, .correlation_id = 10, .value = 0,
                              .bytes = 256, .mem_kind = tracer::MemKind::Device, .start_ns = 1700, .end_ns = 1710};
    tracer::RuntimeActivity api{.os_tid = 4242, .correlation_id = 7, .name = "cudaLaunchKernel", .start_ns = 900,
                                .end_ns = 950};
    tracer::DriverActivity drv{.os_tid = 4242, .correlation_id = 11, .name = "cuLaunchKernel", .start_ns = 960,
                               .end_ns = 970};
    tracer::SyncActivity sy{.device_id = 0, .context_id = 1, .stream_id = 7, .correlation_id = 12,
                            .sync_type = tracer::SyncType::StreamSynchronize, .start_ns = 2000, .end_ns = 2100};
    tracer::ExternalCorrelation ext{tracer::ExternalKind::Custom1, 99, 7};
    tracer::ClockSample clk{0, 500, 123456789};
    tracer::ActivityBatch b;
    b.run_id = run;
    b.kernels = {&k, 1};
    const tracer::MemcpyActivity copies[] = {m1, m2};
    b.memcpys = copies;
    b.memsets = {&ms, 1};
    b.runtime_calls = {&api, 1};
    b.driver_calls = {&drv, 1};
    b.syncs = {&sy, 1};
    b.external_correlations = {&ext, 1};
    b.clock_samples = {&clk, 1};
    store.write_activity(b);
    tracer::ActivityBatch unknown;
    unknown.run_id = 77;
    EXPECT_THROW(store.write_activity(unknown), std::invalid_argument);
  }
  RawDb db(file);
  // The joins people run on nsys exports work unchanged.
  EXPECT_EQ(db.one("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                   "ON r.correlationId = k.correlationId JOIN StringIds s ON s.id = k.shortName"),
            "gemm");
  EXPECT_EQ(db.rows("SELECT e.label, SUM(m.bytes), COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
                    "JOIN ENUM_CUDA_MEMCPY_OPER e ON e.id = m.copyKind GROUP BY e.label"),
            (std::vector<std::vector<std::string>>{{"Host-to-Device", "5120", "2"}}));
  EXPECT_EQ(db.one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEM_KIND k ON k.id = m.srcKind "
                   "WHERE k.label = 'Pageable'"),
            "1");
  EXPECT_EQ(db.one("SELECT s.value FROM CUPTI_ACTIVITY_KIND_DRIVER d JOIN StringIds s ON s.id = d.nameId"),
            "cuLaunchKernel");
  EXPECT_EQ(db.one("SELECT eventClass || ',' || (SELECT eventClass FROM CUPTI_ACTIVITY_KIND_DRIVER) "
                   "FROM CUPTI_ACTIVITY_KIND_RUNTIME"),
            "0,1");
  EXPECT_EQ(db.one("SELECT globalTid % 0x1000000 FROM CUPTI_ACTIVITY_KIND_RUNTIME"), "4242");
  EXPECT_EQ(db.one("SELECT globalPid / 0x1000000 FROM CUPTI_ACTIVITY_KIND_KERNEL"), std::to_string(getpid()));
  EXPECT_EQ(db.one("SELECT e.name FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s JOIN ENUM_CUPTI_SYNC_TYPE e "
                   "ON e.id = s.syncType"),
            "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE");
  EXPECT_EQ(db.one("SELECT externalId FROM CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION WHERE correlationId = 7"), "99");
  EXPECT_EQ(db.one("SELECT gpuNs FROM CLOCK_CALIBRATION"), "123456789");
  EXPECT_EQ(db.one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE bytes = 256"), "1");
  // Absent values are NULL, as in nsys: no mangled name, host side of a copy, not from a graph.
  EXPECT_EQ(db.one("SELECT coalesce(mangledName, 'NULL') || coalesce(graphNodeId, 'NULL') "
                   "FROM CUPTI_ACTIVITY_KIND_KERNEL"),
            "NULLNULL");
  EXPECT_EQ(db.rows("SELECT coalesce(srcDeviceId, 'NULL'), dstDeviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY LIMIT 1"),
            (std::vector<std::vector<std::string>>{{"NULL", "0"}}));
  CaptureReader r(file);
  ASSERT_EQ(r.gpus().size(), 1u);
  EXPECT_EQ(r.gpus()[0].name, "NVIDIA H200");
  EXPECT_EQ(r.gpus()[0].sm_count, 132);
  const int64_t run = r.runs()[0].id;
  ASSERT_EQ(r.syncs(run).size(), 1u);
  EXPECT_EQ(r.syncs(run)[0].sync_type, tracer::SyncType::StreamSynchronize);
  ASSERT_EQ(r.external_correlations(run).size(), 1u);
  EXPECT_EQ(r.external_correlations(run)[0].kind, tracer::ExternalKind::Custom1);
  EXPECT_EQ(r.external_correlations(run)[0].external_id, 99u);
  ASSERT_EQ(r.clock_samples(run).size(), 1u);
  EXPECT_EQ(r.clock_samples(run)[0].gpu_ns, 123456789);
  ASSERT_EQ(r.driver_calls(run).size(), 1u);
  EXPECT_EQ(r.driver_calls(run)[0].name, "cuLaunchKernel");
}

// ---- activity kinds: write through the Store, read through the CaptureReader ---------------

/// A fresh capture with one run, and a batch for it.
struct ActivityFile {
  fs::path file;
  int64_t run = 0;
  explicit ActivityFile(const std::string& name) : file(test::scratch_dir(name) / "capture.hscope") {
    Store store(file);
    run = store.add_run(run_info(name));
  }
  template <class F>
  void write(F&& fill) {
    Store store(file);
    tracer::ActivityBatch b;
    b.run_id = run;
    fill(b);
    store.write_activity(b);
  }
};

TEST(ActivityKinds, KernelRoundTrips) {
  ActivityFile f("activity_kernel");
  tracer::KernelActivity k{.device_id = 1, .context_id = 2, .stream_id = 7, .correlation_id = 41,
                           .demangled_name = "void at::native::vectorized_elementwise_kernel<4>(int)",
                           .short_name = "vectorized_elementwise_kernel", .registers_per_thread = 32,
                           .grid_x = 1024, .grid_y = 2, .grid_z = 1, .block_x = 128, .block_y = 1, .block_z = 1,
                           .static_shared_memory = 0, .dynamic_shared_memory = 4096, .grid_id = 5, .start_ns = 100,
                           .end_ns = 180};
  tracer::KernelActivity graph = k;
  graph.mangled_name = "_ZN2at6native29vectorized_elementwise_kernel";
  graph.graph_node_id = 77;
  graph.start_ns = 50;  // earlier: rows come back ordered by start
  graph.end_ns = 60;
  const tracer::KernelActivity kernels[] = {k, graph};
  f.write([&](tracer::ActivityBatch& b) { b.kernels = kernels; });
  const auto rows = CaptureReader(f.file).kernels(f.run);
  ASSERT_EQ(rows.size(), 2u);
  const storage::KernelRow& a = rows[1];
  EXPECT_EQ(a.start_ns, 100);
  EXPECT_EQ(a.end_ns, 180);
  EXPECT_EQ(a.device_id, 1u);
  EXPECT_EQ(a.context_id, 2u);
  EXPECT_EQ(a.stream_id, 7u);
  EXPECT_EQ(a.correlation_id, 41u);
  EXPECT_EQ(a.demangled_name, "void at::native::vectorized_elementwise_kernel<4>(int)");
  EXPECT_EQ(a.short_name, "vectorized_elementwise_kernel");
  EXPECT_EQ(a.mangled_name, "");
  EXPECT_EQ(a.grid_x, 1024);
  EXPECT_EQ(a.grid_y, 2);
  EXPECT_EQ(a.block_x, 128);
  EXPECT_EQ(a.registers_per_thread, 32);
  EXPECT_EQ(a.dynamic_shared_memory, 4096);
  EXPECT_EQ(a.grid_id, 5);
  EXPECT_FALSE(a.graph_node_id.has_value());
  EXPECT_EQ(rows[0].mangled_name, "_ZN2at6native29vectorized_elementwise_kernel");
  EXPECT_EQ(rows[0].graph_node_id, 77);
  EXPECT_TRUE(CaptureReader(f.file).kernels(f.run + 1).empty()) << "rows are per run";
}

TEST(ActivityKinds, MemcpyRoundTripsEveryDirection) {
  ActivityFile f("activity_memcpy");
  using tracer::MemKind;
  const tracer::MemcpyActivity copies[] = {
      {.device_id = 0, .stream_id = 7, .correlation_id = 1, .bytes = 4096, .copy_kind = MemcpyKind::HtoD,
       .src_kind = MemKind::Pinned, .dst_kind = MemKind::Device, .dst_device_id = 0, .start_ns = 10, .end_ns = 20},
      {.device_id = 0, .stream_id = 7, .correlation_id = 2, .bytes = 2048, .copy_kind = MemcpyKind::DtoH,
       .src_kind = MemKind::Device, .dst_kind = MemKind::Pageable, .src_device_id = 0, .start_ns = 30, .end_ns = 40},
      {.device_id = 0, .stream_id = 8, .correlation_id = 3, .bytes = 1024, .copy_kind = MemcpyKind::DtoD,
       .src_kind = MemKind::Device, .dst_kind = MemKind::Device, .src_device_id = 0, .dst_device_id = 0,
       .start_ns = 50, .end_ns = 55},
      {.device_id = 1, .stream_id = 9, .correlation_id = 4, .bytes = 8192, .copy_kind = MemcpyKind::PtoP,
       .src_kind = MemKind::Device, .dst_kind = MemKind::Device, .src_device_id = 0, .dst_device_id = 1,
       .graph_node_id = 12, .start_ns = 60, .end_ns = 90},
  };
  f.write([&](tracer::ActivityBatch& b) { b.memcpys = copies; });
  const auto rows = CaptureReader(f.file).memcpys(f.run);
  ASSERT_EQ(rows.size(), 4u);
  const MemcpyKind kinds[] = {MemcpyKind::HtoD, MemcpyKind::DtoH, MemcpyKind::DtoD, MemcpyKind::PtoP};
  const int64_t bytes[] = {4096, 2048, 1024, 8192};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].copy_kind, kinds[i]) << i;
    EXPECT_EQ(rows[i].bytes, bytes[i]) << i;
    EXPECT_EQ(rows[i].correlation_id, i + 1) << i;
    EXPECT_EQ(rows[i].start_ns, copies[i].start_ns) << i;
    EXPECT_EQ(rows[i].end_ns, copies[i].end_ns) << i;
    EXPECT_EQ(rows[i].src_kind, copies[i].src_kind) << i;
    EXPECT_EQ(rows[i].dst_kind, copies[i].dst_kind) << i;
    EXPECT_EQ(rows[i].src_device_id, copies[i].src_device_id) << i;
    EXPECT_EQ(rows[i].dst_device_id, copies[i].dst_device_id) << i;
  }
  EXPECT_EQ(rows[3].device_id, 1u);
  EXPECT_EQ(rows[3].stream_id, 9u);
  EXPECT_EQ(rows[3].graph_node_id, 12);
  EXPECT_FALSE(rows[0].src_device_id.has_value()) << "host side: NULL, read back as none";
}

TEST(ActivityKinds, MemsetRoundTrips) {
  ActivityFile f("activity_memset");
  const tracer::MemsetActivity m{.device_id = 2, .context_id = 1, .stream_id = 3, .correlation_id = 17,
                                 .value = 255, .bytes = 1 << 20, .mem_kind = tracer::MemKind::Managed,
                                 .start_ns = 5, .end_ns = 9};
  f.write([&](tracer::ActivityBatch& b) { b.memsets = {&m, 1}; });
  const auto rows = CaptureReader(f.file).memsets(f.run);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].device_id, 2u);
  EXPECT_EQ(rows[0].stream_id, 3u);
  EXPECT_EQ(rows[0].correlation_id, 17u);
  EXPECT_EQ(rows[0].value, 255);
  EXPECT_EQ(rows[0].bytes, 1 << 20);
  EXPECT_EQ(rows[0].mem_kind, tracer::MemKind::Managed);
  EXPECT_FALSE(rows[0].graph_node_id.has_value());
  EXPECT_EQ(rows[0].start_ns, 5);
  EXPECT_EQ(rows[0].end_ns, 9);
}

TEST(ActivityKinds, RuntimeCallRoundTrips) {
  ActivityFile f("activity_runtime");
  const tracer::RuntimeActivity calls[] = {
      {.os_tid = 31337, .correlation_id = 41, .name = "cudaLaunchKernel", .return_value = 0, .start_ns = 95,
       .end_ns = 99},
      {.os_tid = 31338, .correlation_id = 42, .name = "cudaMemcpyAsync", .return_value = 1, .start_ns = 100,
       .end_ns = 120},
  };
  f.write([&](tracer::ActivityBatch& b) { b.runtime_calls = calls; });
  CaptureReader r(f.file);
  const auto rows = r.runtime_calls(f.run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "cudaLaunchKernel");
  EXPECT_EQ(rows[0].os_tid, 31337) << "globalTid keeps the Linux tid in its low 24 bits";
  EXPECT_EQ(rows[0].correlation_id, 41u);
  EXPECT_EQ(rows[0].start_ns, 95);
  EXPECT_EQ(rows[0].end_ns, 99);
  EXPECT_EQ(rows[1].name, "cudaMemcpyAsync");
  EXPECT_EQ(rows[1].return_value, 1);
  EXPECT_TRUE(r.driver_calls(f.run).empty()) << "runtime and driver calls have their own tables";
  RawDb db(f.file);
  EXPECT_EQ(db.one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid / 0x1000000 = " +
                   std::to_string(getpid())),
            "2");
}

TEST(ActivityKinds, CpuOpRoundTrips) {
  ActivityFile f("activity_cpu_op");
  const std::string args = R"({"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]})";
  const tracer::CpuOpActivity ops[] = {
      {.os_tid = 777, .name = "aten::mm", .args = args, .external_id = 12, .sequence_number = 3,
       .category = "cpu_op", .start_ns = 10, .end_ns = 30},
      // no args, no ids
      {.os_tid = 778, .name = "aten::empty", .category = "user_annotation", .start_ns = 12, .end_ns = 13},
  };
  f.write([&](tracer::ActivityBatch& b) { b.cpu_ops = ops; });
  const auto rows = CaptureReader(f.file).cpu_ops(f.run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "aten::mm");
  EXPECT_EQ(rows[0].os_tid, 777);
  EXPECT_EQ(nlohmann::json::parse(rows[0].args)["Input Dims"][1][1], 16);
  EXPECT_EQ(rows[0].external_id, 12);
  EXPECT_EQ(rows[0].sequence_number, 3);
  EXPECT_EQ(rows[0].start_ns, 10);
  EXPECT_EQ(rows[0].end_ns, 30);
  EXPECT_EQ(rows[1].name, "aten::empty");
  EXPECT_EQ(rows[1].os_tid, 778);
  EXPECT_EQ(rows[1].args, "");
  EXPECT_FALSE(rows[1].external_id.has_value());
  EXPECT_FALSE(rows[1].sequence_number.has_value());
  EXPECT_EQ(rows[0].category, "cpu_op");
  EXPECT_EQ(rows[1].category, "user_annotation");
  RawDb db(f.file);
  EXPECT_EQ(db.one("SELECT s.value FROM CPU_OPS o JOIN StringIds s ON s.id = o.categoryId WHERE o.externalId = 12"),
            "cpu_op");
  EXPECT_EQ(db.one("SELECT count(*) FROM CPU_OPS WHERE argsId IS NULL AND externalId IS NULL"), "1");
  // The link an importer relies on: op -> (External id) -> CUDA API call's correlation id.
  EXPECT_EQ(db.one("SELECT s.value FROM CPU_OPS o JOIN StringIds s ON s.id = o.nameId WHERE o.externalId = 12"),
            "aten::mm");
}

TEST(ActivityKinds, RecordsOfAnotherProcessKeepItsPid) {
  // An imported trace names its own process: globalTid / globalPid derive from the batch's pid.
  ActivityFile f("activity_pid");
  const tracer::CpuOpActivity op{.os_tid = 4243, .name = "aten::mm", .category = "cpu_op", .start_ns = 1, .end_ns = 2};
  const tracer::RuntimeActivity call{.os_tid = 4243, .correlation_id = 5, .name = "cudaLaunchKernel", .start_ns = 1,
                                     .end_ns = 2};
  const tracer::KernelActivity k{.correlation_id = 5, .demangled_name = "k", .short_name = "k", .start_ns = 3,
                                 .end_ns = 4};
  f.write([&](tracer::ActivityBatch& b) {
    b.pid = 4242;
    b.cpu_ops = {&op, 1};
    b.runtime_calls = {&call, 1};
    b.kernels = {&k, 1};
  });
  f.write([&](tracer::ActivityBatch& b) { b.cpu_ops = {&op, 1}; });  // no pid: this process
  RawDb db(f.file);
  EXPECT_EQ(db.one("SELECT group_concat(globalTid, ',') FROM CPU_OPS"),
            std::to_string(4242 * 0x1000000LL + 4243) + "," + std::to_string(getpid() * 0x1000000LL + 4243));
  EXPECT_EQ(db.one("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME"), std::to_string(4242 * 0x1000000LL + 4243));
  EXPECT_EQ(db.one("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL"), std::to_string(4242 * 0x1000000LL));
  const auto rows = CaptureReader(f.file).cpu_ops(f.run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].os_tid, 4243);
  EXPECT_EQ(rows[1].os_tid, 4243);
}

TEST(Store, RegionCompileIdRoundTrips) {
  // Imported regions carry Dynamo's compile id 'F/C'; the LibTorch engine's leave it NULL.
  const fs::path file = test::scratch_dir("storage_region_compile_id") / "capture.hscope";
  int64_t run = 0;
  {
    Store store(file);
    HostTracer tr(store);
    run = tr.begin_run(run_info("imported"));
    events::EventSink& s = tr;
    s.region({0, 40, "", "0/0", 100, 200});
    s.region({1, 3, "", "1/0", 150, 180});
    s.region({0, 12, "eager", "", 300, 310});
    tr.end_run(RunStatus::Complete);
  }
  const auto regions = CaptureReader(file).regions(run);
  ASSERT_EQ(regions.size(), 3u);
  EXPECT_EQ(regions[0].compile_id, "0/0");
  EXPECT_EQ(regions[0].backend, "");
  EXPECT_EQ(regions[0].op_count, 40);
  EXPECT_EQ(regions[1].compile_id, "1/0");
  EXPECT_EQ(regions[1].index, 1);
  EXPECT_EQ(regions[1].start_ns, 150);
  EXPECT_EQ(regions[1].end_ns, 180);
  EXPECT_EQ(regions[2].compile_id, "");
  EXPECT_EQ(regions[2].backend, "eager");
  RawDb db(file);
  EXPECT_EQ(db.one("SELECT count(*) FROM COMPILE_REGIONS WHERE compileId IS NULL"), "1");
  EXPECT_EQ(db.one("SELECT s.value FROM COMPILE_REGIONS r JOIN StringIds s ON s.id = r.compileId WHERE r.start = 150"),
            "1/0");
}

TEST(ActivityKinds, DynamoCompileRoundTrips) {
  ActivityFile f("activity_dynamo_compile");
  const tracer::DynamoCompile compiles[] = {
      {.compile_id = "0/0", .frame_id = 0, .frame_compile_id = 0, .attempt = 1, .status = "compiled",
       .code_name = "new_forward", .file = "/site-packages/accelerate/hooks.py", .line = 186, .guard_count = 14,
       .graph_op_count = 0, .graph_node_count = 1, .graphs = 0, .start_utc_ns = 1796100896521466000,
       .compile_ns = 580898000, .before_restart_ns = 316802740,
       .restart_reasons = R"(["Skip calling `torch.compiler.disable()`d function"])", .log_line = 12},
      {.compile_id = "0/8", .frame_id = 0, .frame_compile_id = 8, .attempt = 0, .status = "failed",
       .fail_type = "Unsupported", .fail_reason = "Dynamo recompile limit exceeded\n  Explanation: ...",
       .fail_gb_code = "GB0039", .fail_user_frame = "/a/hooks.py:187", .recompile_reason = "0/7: not args",
       .log_line = 900},
      {.compile_id = "!1/2/0", .compiled_autograd_id = 1, .status = "incomplete", .log_line = 950},
  };
  f.write([&](tracer::ActivityBatch& b) { b.dynamo_compiles = compiles; });
  const auto rows = CaptureReader(f.file).dynamo_compiles(f.run);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].compile_id, "0/0");
  EXPECT_EQ(rows[0].frame_id, 0);
  EXPECT_EQ(rows[0].frame_compile_id, 0);
  EXPECT_EQ(rows[0].attempt, 1);
  EXPECT_EQ(rows[0].status, "compiled");
  EXPECT_EQ(rows[0].code_name, "new_forward");
  EXPECT_EQ(rows[0].file, "/site-packages/accelerate/hooks.py");
  EXPECT_EQ(rows[0].line, 186);
  EXPECT_EQ(rows[0].guard_count, 14);
  EXPECT_EQ(rows[0].graph_op_count, 0) << "zero is a value, not NULL";
  EXPECT_EQ(rows[0].graph_node_count, 1);
  EXPECT_EQ(rows[0].start_utc_ns, 1796100896521466000);
  EXPECT_EQ(rows[0].compile_ns, 580898000);
  EXPECT_FALSE(rows[0].backend_compile_ns.has_value());
  EXPECT_EQ(rows[0].before_restart_ns, 316802740);
  EXPECT_EQ(nlohmann::json::parse(rows[0].restart_reasons).size(), 1u);
  EXPECT_EQ(rows[0].fail_type, "");
  EXPECT_EQ(rows[0].log_line, 12);
  EXPECT_EQ(rows[1].status, "failed");
  EXPECT_EQ(rows[1].fail_gb_code, "GB0039");
  EXPECT_EQ(rows[1].fail_user_frame, "/a/hooks.py:187");
  EXPECT_EQ(rows[1].recompile_reason, "0/7: not args");
  EXPECT_FALSE(rows[1].guard_count.has_value());
  EXPECT_EQ(rows[2].compiled_autograd_id, 1);
  EXPECT_FALSE(rows[2].frame_id.has_value());
  RawDb db(f.file);
  EXPECT_EQ(db.one("SELECT count(*) FROM DYNAMO_COMPILES WHERE guardCount IS NULL AND failTypeId IS NULL"), "1");
  EXPECT_EQ(db.one("SELECT s.value FROM DYNAMO_COMPILES c JOIN StringIds s ON s.id = c.failGbCodeId"), "GB0039");
}

TEST(ActivityKinds, DynamoGraphBreakAndRecompileRoundTrip) {
  ActivityFile f("activity_dynamo_break");
  const tracer::DynamoGraphBreak breaks[] = {
      {.compile_id = "3/0", .attempt = 0, .gb_code = "GB0098",
       .gb_type = "Skip calling `torch.compiler.disable()`d function", .explanation = "Skip calling function f",
       .hints = "Remove the `torch.compiler.disable` call", .context = "<function f>",
       .reason = "Skip calling `torch.compiler.disable()`d function\n  Explanation: ...",
       .instruction = "Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):",
       .user_frame = "/a/hooks.py:50", .user_stack = "  File \"/a/hooks.py\", line 50, in wrapper",
       .chained_gb_codes = "GB7000", .frame_skipped = true, .log_line = 77},
      {.compile_id = "4/1", .attempt = 0, .gb_type = "an older torch's break", .reason = "an older torch's break",
       .log_line = 80},
  };
  const tracer::DynamoRecompile recompiles[] = {
      {.compile_id = "0/8", .guard_compile_id = "0/7", .guard = "not args", .reason = "0/7: not args  # x",
       .log_line = 899},
      {.compile_id = "0/8", .guard = "?", .reason = "Unable to find recompilation reasons", .log_line = 899},
  };
  f.write([&](tracer::ActivityBatch& b) {
    b.dynamo_graph_breaks = breaks;
    b.dynamo_recompiles = recompiles;
  });
  CaptureReader r(f.file);
  const auto rows = r.dynamo_graph_breaks(f.run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].compile_id, "3/0");
  EXPECT_EQ(rows[0].gb_code, "GB0098");
  EXPECT_EQ(rows[0].gb_type, "Skip calling `torch.compiler.disable()`d function");
  EXPECT_EQ(rows[0].explanation, "Skip calling function f");
  EXPECT_EQ(rows[0].hints, "Remove the `torch.compiler.disable` call");
  EXPECT_EQ(rows[0].context, "<function f>");
  EXPECT_EQ(rows[0].instruction.rfind("Encountered graph break", 0), 0u);
  EXPECT_EQ(rows[0].user_frame, "/a/hooks.py:50");
  EXPECT_EQ(rows[0].user_stack, "  File \"/a/hooks.py\", line 50, in wrapper");
  EXPECT_EQ(rows[0].chained_gb_codes, "GB7000");
  EXPECT_TRUE(rows[0].frame_skipped);
  EXPECT_EQ(rows[0].log_line, 77);
  EXPECT_EQ(rows[1].gb_code, "") << "no code: NULL, read back as empty";
  EXPECT_FALSE(rows[1].frame_skipped);
  const auto rec = r.dynamo_recompiles(f.run);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec[0].compile_id, "0/8");
  EXPECT_EQ(rec[0].guard_compile_id, "0/7");
  EXPECT_EQ(rec[0].guard, "not args");
  EXPECT_EQ(rec[0].reason, "0/7: not args  # x");
  EXPECT_EQ(rec[1].guard_compile_id, "");
  EXPECT_EQ(rec[1].log_line, 899);
  RawDb db(f.file);
  EXPECT_EQ(db.one("SELECT count(*) FROM DYNAMO_GRAPH_BREAKS WHERE gbCodeId IS NULL"), "1");
  EXPECT_EQ(db.one("SELECT count(*) FROM DYNAMO_RECOMPILES WHERE guardCompileId IS NULL"), "1");
}

TEST(ActivityKinds, ACaptureFromBeforeAKindExistedReadsItEmptyAndTakesItWhenAppended) {
  ActivityFile f("activity_old_capture");
  { RawDb(f.file, SQLITE_OPEN_READWRITE).exec("DROP TABLE CPU_OPS"); }  // as written before CPU ops existed
  EXPECT_TRUE(CaptureReader(f.file).cpu_ops(f.run).empty());
  const tracer::CpuOpActivity op{.os_tid = 1, .name = "aten::add", .start_ns = 1, .end_ns = 2};
  f.write([&](tracer::ActivityBatch& b) { b.cpu_ops = {&op, 1}; });
  ASSERT_EQ(CaptureReader(f.file).cpu_ops(f.run).size(), 1u);
  EXPECT_EQ(CaptureReader(f.file).cpu_ops(f.run)[0].name, "aten::add");
}

// ---- the reader's refusals ---------------------------------------------------------------

TEST(CaptureReader, RefusesFilesThatAreNotCapturesAndLeavesThemUntouched) {
  const fs::path dir = test::scratch_dir("storage_refuse");

  // An SQLite database of something else.
  const fs::path other = dir / "other.sqlite";
  {
    RawDb db(other, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("CREATE TABLE notes (id INTEGER, text TEXT); INSERT INTO notes VALUES (1, 'hello');");
  }
  const FileState other_before = file_state(other);
  std::string msg = capture_error([&] { CaptureReader r(other); });
  EXPECT_NE(msg.find("not a hookscope capture: " + other.string() + " (no META_DATA_EXPORT / schema version)"),
            std::string::npos)
      << msg;
  msg = capture_error([&] { Store s(other); });
  EXPECT_NE(msg.find("not a hookscope capture: " + other.string()), std::string::npos) << msg;
  msg = capture_error([&] { Store s(other, {.overwrite = true}); });
  EXPECT_NE(msg.find("refusing to write into it"), std::string::npos) << msg;
  EXPECT_TRUE(file_state(other) == other_before) << "a non-capture file must not be modified";
  EXPECT_FALSE(fs::exists(fs::path(other.string() + "-wal")));

  // Garbage bytes.
  const fs::path garbage = dir / "garbage.hscope";
  std::string junk;
  for (int i = 0; i < 8192; ++i) junk.push_back(static_cast<char>((i * 131 + 7) % 251));
  write_bytes(garbage, junk);
  const FileState garbage_before = file_state(garbage);
  msg = capture_error([&] { CaptureReader r(garbage); });
  EXPECT_NE(msg.find("not a hookscope capture: " + garbage.string() + " (not an SQLite database"), std::string::npos)
      << msg;
  msg = capture_error([&] { Store s(garbage); });
  EXPECT_NE(msg.find(garbage.string()), std::string::npos) << msg;
  EXPECT_TRUE(file_state(garbage) == garbage_before);

  // A capture from a newer hookscope.
  const fs::path newer = dir / "newer.hscope";
  { Store s(newer); }
  {
    RawDb db(newer, SQLITE_OPEN_READWRITE);
    db.exec("UPDATE META_DATA_EXPORT SET value = '" + std::to_string(storage::kSchemaVersion + 1) +
            "' WHERE name = 'HOOKSCOPE_SCHEMA_VERSION'");
  }
  const FileState newer_before = file_state(newer);
  const std::string v = std::to_string(storage::kSchemaVersion + 1);
  msg = capture_error([&] { CaptureReader r(newer); });
  EXPECT_NE(msg.find("capture " + newer.string() + " has schema version " + v + ", newer than this hookscope reads (" +
                     std::to_string(storage::kSchemaVersion) + ")"),
            std::string::npos)
      << msg;
  msg = capture_error([&] { Store s(newer); });
  EXPECT_NE(msg.find("schema version " + v), std::string::npos) << msg;
  EXPECT_TRUE(file_state(newer) == newer_before);

  // Missing file.
  msg = capture_error([&] { CaptureReader r(dir / "missing.hscope"); });
  EXPECT_NE(msg.find("cannot open capture " + (dir / "missing.hscope").string() + ": no such file"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(fs::exists(dir / "missing.hscope")) << "the reader must not create files";
}

TEST(CaptureReader, ReportsCorruptAndLockedCapturesByName) {
  const fs::path dir = test::scratch_dir("storage_corrupt");
  const fs::path file = dir / "capture.hscope";
  {
    Store store(file);
    HostTracer tr(store);
    tr.begin_run(run_info("c"));
    for (int i = 0; i < 5000; ++i) tr.generation_step({i, i, i, i});
    tr.end_run();
  }
  // Locked: another connection holds an exclusive lock on the (rollback-journal) file.
  {
    RawDb locker(file, SQLITE_OPEN_READWRITE);
    locker.exec("BEGIN EXCLUSIVE");
    const std::string msg = capture_error([&] { CaptureReader r(file, {.busy_timeout_ms = 50}); });
    EXPECT_NE(msg.find("capture " + file.string() + " is locked"), std::string::npos) << msg;
    locker.exec("ROLLBACK");
  }
  // Corrupt: the schema page overwritten after the 100-byte header.
  std::string bytes = test::read_file(file);
  for (size_t i = 100; i < 4096 && i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  write_bytes(file, bytes);
  const FileState before = file_state(file);
  const std::string msg = capture_error([&] {
    CaptureReader r(file);
    r.runs();
  });
  EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("corrupt"), std::string::npos) << msg;
  EXPECT_TRUE(file_state(file) == before);
}

// A rollback journal left by a writer killed inside a transaction: the reader says so (SQLite
// alone says "attempt to write a readonly database") and touches neither file.
TEST(CaptureReader, ALeftoverRollbackJournalIsNamed) {
  const fs::path file = test::scratch_dir("storage_hot_journal") / "capture.hscope";
  {
    Store store(file);
    HostTracer tr(store);
    tr.begin_run(run_info("j"));
    for (int i = 0; i < 2000; ++i) tr.generation_step({i, i, i, i});
    tr.end_run();
  }  // closed: a rollback-journal database
  const pid_t pid = fork();
  if (pid == 0) {  // a writer that dies mid-transaction, its changes spilled into the file
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) _exit(2);
    const char* sql = "PRAGMA cache_size=1; BEGIN; UPDATE GENERATION_STEPS SET step = step + 1; "
                      "UPDATE RUNS SET label = 'half-written';";
    _exit(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_TRUE(fs::exists(file.string() + "-journal"));
  const FileState before = file_state(file);
  const std::string msg = capture_error([&] {
    CaptureReader r(file);
    r.runs();
  });
  EXPECT_NE(msg.find(file.string() + "-journal"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rollback journal"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("readonly database"), std::string::npos) << msg;
  EXPECT_TRUE(file_state(file) == before);
  EXPECT_TRUE(fs::exists(file.string() + "-journal"));
}

TEST(CaptureReader, ReadingACaptureDoesNotModifyIt) {
  const fs::path file = test::scratch_dir("storage_readonly") / "capture.hscope";
  {
    Store store(file);
    const int64_t run = store.add_run(run_info("ro"));
    store.end_run(run, RunStatus::Complete);
    store.finalize();
  }
  const FileState before = file_state(file);
  {
    CaptureReader r(file);
    EXPECT_EQ(r.runs().size(), 1u);
    EXPECT_EQ(r.count("RUNS"), 1);
    EXPECT_EQ(r.count("HOOK_EVENTS", 1), 0);
  }
  EXPECT_TRUE(file_state(file) == before);
}

TEST(CaptureReader, AWalCaptureCopiedWithoutItsWalIsReadWithoutCreatingFiles) {
  const fs::path dir = test::scratch_dir("storage_wal_copy");
  const fs::path file = dir / "live.hscope", copy_dir = dir / "copy", copy = copy_dir / "live.hscope";
  fs::create_directories(copy_dir);
  Store store(file);  // stays open: the file is in WAL mode with uncheckpointed pages
  HostTracer tr(store);
  const int64_t run = tr.begin_run(run_info("wal"));
  for (int i = 0; i < 100; ++i) tr.generation_step({i, i, i, i + 1});
  tr.flush();
  fs::copy_file(file, copy);
  const FileState before = file_state(copy);
  try {
    CaptureReader r(copy);  // whatever was checkpointed is readable
    EXPECT_LE(r.generation_steps(run).size(), 100u);
  } catch (const CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("-wal is missing"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(fs::path(copy.string() + "-wal")));
  EXPECT_FALSE(fs::exists(fs::path(copy.string() + "-shm")));
  EXPECT_TRUE(file_state(copy) == before);
  // With its -wal beside it, everything committed so far is there.
  fs::copy_file(fs::path(file.string() + "-wal"), fs::path(copy.string() + "-wal"));
  CaptureReader r(copy);
  EXPECT_EQ(r.run(run).status, RunStatus::Incomplete);
  EXPECT_EQ(r.generation_steps(run).size(), 100u);
  tr.end_run(RunStatus::Complete);
}

// The reader keeps each query's prepared statement for the next call of the same SQL; a
// statement is lent to one query at a time, so threads sharing a reader each read whole,
// correct rows, and a query run again (the next run's, the same run's) starts from its first.
TEST(CaptureReader, ThreadsSharingAReaderReadWhatOneThreadReads) {
  const fs::path file = test::scratch_dir("storage_shared_reader") / "capture.hscope";
  std::vector<int64_t> runs;
  {
    Store store(file);
    HostTracer tr(store);
    for (int k = 0; k < 3; ++k) {
      runs.push_back(tr.begin_run(run_info("shared/" + std::to_string(k))));
      events::EventSink& s = tr;
      for (int i = 0; i < 300 * (k + 1); ++i)
        s.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers." + std::to_string(i % 30),
                     "LlamaDecoderLayer", 0, i, i + 1});
      tr.end_run(RunStatus::Complete);
    }
    store.finalize();
  }
  const CaptureReader r(file);
  std::vector<std::vector<storage::HookEventRow>> alone;
  for (int64_t run : runs) alone.push_back(r.hook_events(run));
  ASSERT_EQ(alone[2].size(), 900u);
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        const size_t k = static_cast<size_t>(i + t) % runs.size();
        const auto rows = r.hook_events(runs[k]);
        bad[static_cast<size_t>(t)] += rows.size() != alone[k].size() || rows.empty() ||
                                       rows.front().module != alone[k].front().module ||
                                       rows.back().start_ns != alone[k].back().start_ns;
        bad[static_cast<size_t>(t)] += r.runs().size() != runs.size() || r.run(runs[k]).id != runs[k];
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
  EXPECT_EQ(r.hook_events(runs[0]).size(), 300u) << "a statement used by every thread, read once more";
}

TEST(CaptureReader, AReaderOfALiveCaptureResolvesStringsAddedAfterItOpened) {
  const fs::path file = test::scratch_dir("storage_live_strings") / "live.hscope";
  Store store(file);
  HostTracer tr(store);
  const int64_t run = tr.begin_run(run_info("live"));
  tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.0", "LlamaDecoderLayer", 0, 1, 2});
  tr.flush();
  CaptureReader r(file);
  ASSERT_EQ(r.hook_events(run).size(), 1u);
  EXPECT_EQ(r.hook_events(run)[0].module, "model.layers.0");
  // New strings after the reader loaded its copy of StringIds.
  tr.hook_span({"SequentialHook", events::HookPhase::PostForward, "model.layers.17", "LlamaDecoderLayer", 0, 3, 4});
  tr.flush();
  const auto rows = r.hook_events(run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].hook, "SequentialHook");
  EXPECT_EQ(rows[1].module, "model.layers.17");
  tr.end_run(RunStatus::Complete);
}

}  // namespace


// SQLite's "integer overflow" (a SUM past int64) names the tables its query read and says the
// file holds values no capture writes.
TEST(SqliteErrors, ASumPastInt64NamesTheTablesItsQueryRead) {
  const fs::path file = hs::test::scratch_dir("sum_overflow") / "sums.sqlite";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE T (runId INTEGER, bytes INTEGER); CREATE TABLE N (id INTEGER);"
                         "INSERT INTO T VALUES (1, 9223372036854775807), (1, 9223372036854775807); INSERT INTO N VALUES (1);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  {
    hs::storage::detail::Stmt q(db, file, "SELECT sum(t.bytes) FROM T t JOIN N n ON n.id = t.runId WHERE t.runId = 1");
    try {
      q.step();
      ADD_FAILURE() << "the sum overflowed without an error";
    } catch (const hs::storage::CaptureError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("capture " + file.string() + ": a sum over T, N passes 2^63 (SQLite: integer overflow)"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("edited or is damaged"), std::string::npos) << what;
    }
  }
  sqlite3_close(db);
}

// ---- untrusted JSON (storage/bounded_json.h) ---------------------------------------------
namespace {
std::string nested(size_t depth, const std::string& inner = "") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}
storage::JsonError json_error(std::string_view text, const storage::JsonLimits& limits = {}) {
  try {
    (void)storage::parse_json_bounded(text, "THE VALUE", limits);
  } catch (const storage::JsonError& e) {
    return e;
  }
  ADD_FAILURE() << "parsed: " << text.substr(0, 80);
  return storage::JsonError(storage::JsonError::Kind::Invalid, "");
}
}  // namespace

// The bound is checked on the text, before nlohmann builds anything: a value nested 100,000
// deep parsed fine and then overflowed the stack where it was copied or dumped.
TEST(BoundedJson, DepthAndSizeAreRefusedBeforeParsingNamingTheValue) {
  EXPECT_EQ(storage::parse_json_bounded(nested(storage::kMaxJsonDepth), "v").dump(), nested(storage::kMaxJsonDepth));
  for (size_t depth : {storage::kMaxJsonDepth + 1, size_t{30000}, size_t{100000}}) {
    const storage::JsonError e = json_error(nested(depth));
    EXPECT_EQ(e.kind(), storage::JsonError::Kind::TooDeep);
    EXPECT_EQ(std::string(e.what()), "THE VALUE: JSON nested deeper than 512 levels (byte 512)");
  }
  // Objects count as arrays do; brackets inside strings (escaped quotes included) do not.
  EXPECT_EQ(json_error(R"({"a":)" + nested(600) + "}").kind(), storage::JsonError::Kind::TooDeep);
  const std::string in_string = "{\"s\": \"\\\"" + std::string(1000, '[') + std::string(1000, '{') + "\", \"t\": [1]}";
  EXPECT_EQ(storage::parse_json_bounded(in_string, "v")["t"][0], 1);
  EXPECT_EQ(storage::parse_ordered_json_bounded(R"({"b": 1, "a": 2})", "v").begin().key(), "b");

  const storage::JsonError big = json_error("[1, 2, 3]", {.max_depth = 512, .max_bytes = 8});
  EXPECT_EQ(big.kind(), storage::JsonError::Kind::TooLarge);
  EXPECT_EQ(std::string(big.what()), "THE VALUE: JSON text of 9 bytes, more than the 8 bytes hookscope reads in one value");
  const storage::JsonError bad = json_error("{\"a\": ");
  EXPECT_EQ(bad.kind(), storage::JsonError::Kind::Invalid);
  EXPECT_EQ(std::string(bad.what()),
            "THE VALUE: not valid JSON at line 1, column 7 (byte 6): the text ends before the JSON value is complete");
  EXPECT_EQ(json_error("1e999").kind(), storage::JsonError::Kind::Invalid) << "a number past a double";
}

// The model files' readers (config.json, tokenizer.json, safetensors headers and index, the
// offload index) read through the same bounds: a string past max_string_bytes, a NUL byte and
// every syntax error are named with their line and column, in plain words (never nlohmann's
// "[json.exception.parse_error.101] ...").
TEST(BoundedJson, StringsNulBytesAndSyntaxErrorsAreNamedInPlainWords) {
  const storage::JsonLimits limits{.max_depth = 8, .max_bytes = 1 << 20, .max_string_bytes = 4};
  EXPECT_EQ(storage::parse_json_bounded(R"({"abcd": "wxyz"})", "v", limits)["abcd"], "wxyz");
  const storage::JsonError long_string = json_error("[1,\n \"abcde\"]", limits);
  EXPECT_EQ(long_string.kind(), storage::JsonError::Kind::StringTooLong);
  EXPECT_EQ(std::string(long_string.what()),
            "THE VALUE: a string longer than 4 bytes at line 2, column 2 (byte 5) (hookscope reads strings up to that "
            "size)");
  const storage::JsonError nul = json_error(std::string("{}\0x", 4));
  EXPECT_EQ(nul.kind(), storage::JsonError::Kind::Invalid);
  EXPECT_EQ(std::string(nul.what()),
            "THE VALUE: not valid JSON at line 1, column 3 (byte 2): a NUL byte (0x00): JSON text never holds one");
  EXPECT_EQ(nul.invalid_at(), "at line 1, column 3 (byte 2): a NUL byte (0x00): JSON text never holds one");
  const std::pair<std::string, std::string> cases[] = {
      {"", "at line 1, column 1 (byte 0): the text is empty (no JSON value)"},
      {"[1, 2", "at line 1, column 6 (byte 5): the text ends before the JSON value is complete"},
      {"[1, NaN]", "at line 1, column 5 (byte 4): 'NaN' is not a JSON value (JSON has no NaN or Infinity)"},
      {"{\"a\": tru}", "at line 1, column 7 (byte 6): 'tru' is not a JSON value (a string needs double quotes)"},
      {"[1] [2]", "at line 1, column 5 (byte 4): more text after the JSON value, from '[' (0x5B)"},
      {"[1 2]", "at line 1, column 4 (byte 3): found a number in an array where ']' was expected"},
      {"{\"a\": 1,}", "at line 1, column 9 (byte 8): found '}' in an object where a string was expected"},
      {"[\"\xC3(\"]", "at line 1, column 4 (byte 3): a string holds bytes that are not UTF-8"},
      {"[\"a\tb\"]",
       "at line 1, column 4 (byte 3): a string holds the control character 0x09 unescaped (escape it as \\u0009)"},
      {"[\"abc", "at line 1, column 6 (byte 5): the text ends before the JSON value is complete"},
      {"[-x]", "at line 1, column 3 (byte 2): a malformed number: expected digit after '-'"},
      {"[@]", "at line 1, column 2 (byte 1): unexpected '@' (0x40)"},
      {"[1e999]", "at line 1, column 2 (byte 1): number overflow: 1e999 is past a double's range"},
  };
  for (const auto& [text, says] : cases) {
    SCOPED_TRACE(text);
    const storage::JsonError e = json_error(text);
    EXPECT_EQ(e.kind(), storage::JsonError::Kind::Invalid);
    EXPECT_EQ(std::string(e.what()), "THE VALUE: not valid JSON " + says);
    const std::optional<storage::JsonSyntaxError> found = storage::find_json_syntax_error(text);
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(storage::describe_json_error(text, *found), says);
  }
  EXPECT_FALSE(storage::find_json_syntax_error(R"({"a": [1, 2.5, "x"]})").has_value());
}

// Every JSON column a reader parses — RUNS.results, .versions, .device_map,
// COMPILE_RESULTS.break_reasons, DYNAMO_COMPILES' restart reasons — nested past the bound is a
// CaptureError naming the file, the run and the column: report and view crashed (SIGSEGV) on
// such a file.
TEST(CaptureReader, JsonColumnsNestedTooDeepNameTheRunAndColumn) {
  ActivityFile f("storage_deep_json");
  {
    Store store(f.file);
    store.add_compile_result(f.run, {});
  }
  const tracer::DynamoCompile compile{.compile_id = "0/0", .status = "compiled", .restart_reasons = "[]", .log_line = 1};
  f.write([&](tracer::ActivityBatch& b) { b.dynamo_compiles = {&compile, 1}; });
  EXPECT_NO_THROW(importers::dynamo_summary(CaptureReader(f.file), f.run));
  const fs::path copy = f.file.parent_path() / "edited.hscope";
  const std::pair<std::string, std::string> columns[] = {
      {"UPDATE RUNS SET results = ?", "RUNS.results"},
      {"UPDATE RUNS SET versions = ?", "RUNS.versions"},
      {"UPDATE RUNS SET device_map = ?", "RUNS.device_map"},
      {"UPDATE COMPILE_RESULTS SET break_reasons = ?", "COMPILE_RESULTS.break_reasons"},
      {"UPDATE StringIds SET value = ? WHERE id = (SELECT restartReasonsId FROM DYNAMO_COMPILES)",
       "compile 0/0: DYNAMO_COMPILES.restartReasonsId"},
  };
  for (size_t depth : {size_t{30000}, size_t{100000}}) {
    for (const auto& [sql, column] : columns) {
      fs::copy_file(f.file, copy, fs::copy_options::overwrite_existing);
      {
        RawDb raw(copy, SQLITE_OPEN_READWRITE);
        raw.exec("PRAGMA journal_mode=DELETE");
        sqlite3_stmt* s = nullptr;
        ASSERT_EQ(sqlite3_prepare_v2(raw.db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
        const std::string text = "{\"a\": " + nested(depth) + "}";
        sqlite3_bind_text(s, 1, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
        ASSERT_EQ(sqlite3_step(s), SQLITE_DONE) << sql;
        sqlite3_finalize(s);
      }
      const std::string msg = capture_error([&] {
        CaptureReader rd(copy);
        for (const auto& run : rd.runs()) (void)run.results.dump();
        (void)rd.compile_results(std::nullopt);
        (void)importers::dynamo_summary(rd, f.run);
      });
      EXPECT_NE(msg.find("capture " + copy.string() + ": run " + std::to_string(f.run) + ": " + column +
                         ": JSON nested deeper than 512 levels (byte "),
                std::string::npos)
          << depth << " " << column << ": " << msg;
      EXPECT_NE(msg.find("the file is damaged"), std::string::npos) << msg;
    }
  }
}

// A RUNS table rebuilt without its INTEGER PRIMARY KEY (CREATE TABLE ... AS SELECT keeps no
// constraint) may hold one run twice: readers showed it twice, and appending gave the new run
// no id ("end_run: no run 25"). Readers and the Store refuse it, naming the file, and leave it
// as it was.
TEST(CaptureReader, ARunsTableRebuiltWithoutItsPrimaryKeyIsRefused) {
  const fs::path file = test::scratch_dir("storage_runs_no_pk") / "capture.sqlite";
  {
    Store store(file);
    store.end_run(store.add_run(run_info("a")), RunStatus::Complete);
  }
  {
    RawDb raw(file, SQLITE_OPEN_READWRITE);
    raw.exec("PRAGMA journal_mode=DELETE");
    raw.exec("CREATE TABLE R2 AS SELECT * FROM RUNS; INSERT INTO R2 SELECT * FROM RUNS; DROP TABLE RUNS; "
             "ALTER TABLE R2 RENAME TO RUNS;");
  }
  const FileState before = file_state(file);
  const std::string want = "capture " + file.string() + ": RUNS.id is not the table's INTEGER PRIMARY KEY";
  std::string msg = capture_error([&] { CaptureReader rd(file); });
  EXPECT_NE(msg.find(want), std::string::npos) << msg;
  msg = capture_error([&] { Store store(file); });
  EXPECT_NE(msg.find(want), std::string::npos) << msg;
  EXPECT_TRUE(file_state(file) == before) << "nothing written";
}

// ---- the page reader (storage/btree_pages.h) -----------------------------------------------
// Its inputs are written here: a table through SQLite, in two tests then changed (a record's
// bytes, a row deleted). fuzz/btree_pages_fuzz.cpp checks it against SQLite on arbitrary files.
namespace {
namespace pages = hs::storage::detail;

constexpr int64_t kRowidMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kRowidMax = std::numeric_limits<int64_t>::max();

/// A table written by SQLite with 512-byte pages, in rollback-journal mode (the page reader's
/// files): `sql` run on a new database at `file`; the root page of table t.
uint32_t write_table(const fs::path& file, const std::string& sql) {
  RawDb raw(file, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  raw.exec("PRAGMA page_size=512; PRAGMA journal_mode=DELETE; " + sql);
  return static_cast<uint32_t>(std::stoul(raw.one("SELECT rootpage FROM sqlite_master WHERE name = 't'")));
}

/// SQLite's 9-byte varint of `v` (8 bytes of 7 bits, the last of 8): any value, in the longest
/// form a reader must decode.
std::string varint9(uint64_t v) {
  std::string out(9, '\0');
  out[8] = static_cast<char>(v & 0xff);
  v >>= 8;
  for (int i = 7; i >= 0; --i, v >>= 7) out[static_cast<size_t>(i)] = static_cast<char>(0x80 | (v & 0x7f));
  return out;
}

/// The rowids `scan` reads from the table at `root`, over [first, end).
std::vector<int64_t> scanned_rowids(const fs::path& file, uint32_t root, int columns, int64_t first, int64_t end) {
  pages::PageFile f(file);
  std::vector<int64_t> out;
  f.scan(root, columns, first, end, [&](int64_t rowid, const pages::Record&) { out.push_back(rowid); });
  return out;
}
}  // namespace

// A record whose header gives values of up to 2^63 bytes each, their sizes summing to 2^64 + 8:
// the sum wrapped to 8, inside the record, and the integer between them was read at its
// offset's low 32 bits, 1 MiB past the record and the file (the reader's check was on the sum).
// Each value's size is now checked against what is left of the record: the record is refused.
TEST(PageReader, ValuesWhoseSizesWrapPastTheRecordAreRefused) {
  const fs::path file = test::scratch_dir("pages_wrapping_sizes") / "t.sqlite";
  const uint32_t root = write_table(file, "CREATE TABLE t (a, b, c, d); INSERT INTO t VALUES (zeroblob(40), NULL, NULL, NULL)");
  // The one cell of the root leaf: payload 45 (1 byte), rowid 1, then the record: header 5
  // bytes (its size, then serial types 92 = a 40-byte blob, NULL, NULL, NULL) and 40 bytes.
  std::string bytes = test::read_file(file);
  const size_t page = static_cast<size_t>(root - 1) * 512;
  ASSERT_EQ(static_cast<uint8_t>(bytes[page]), 13) << "a table leaf";
  const size_t cell = page + (static_cast<uint8_t>(bytes[page + 8]) << 8 | static_cast<uint8_t>(bytes[page + 9]));
  ASSERT_EQ(bytes.substr(cell, 4), std::string("\x2d\x01\x05\x5c", 4));
  // The same 45 bytes: a header of 29 (its size; a blob of 2^62 + 2^20 bytes; an 8-byte integer;
  // blobs of 2^62 and 2^63 - 2^20 bytes), a body of 16.
  const uint64_t blob0 = (uint64_t{1} << 62) + (uint64_t{1} << 20), blob2 = uint64_t{1} << 62,
                 blob3 = (uint64_t{1} << 63) - (uint64_t{1} << 20);
  const std::string record = std::string(1, '\x1d') + varint9(2 * blob0 + 12) + std::string(1, '\x06') +
                             varint9(2 * blob2 + 12) + varint9(2 * blob3 + 12) + std::string(16, '\0');
  ASSERT_EQ(record.size(), 45u);
  bytes.replace(cell + 2, record.size(), record);
  write_bytes(file, bytes);

  pages::PageFile f(file);
  int records = 0;
  try {
    f.scan(root, 4, kRowidMin, kRowidMax, [&](int64_t, const pages::Record& r) {
      ++records;
      EXPECT_EQ(r.type(1), SQLITE_NULL) << "column b an integer 1 MiB past its record";
    });
    ADD_FAILURE() << "the record was read";
  } catch (const pages::PageFormatError& e) {
    EXPECT_STREQ(e.what(), "a record's values past its record");
  }
  EXPECT_EQ(records, 0);
}

// The end of a whole scan (INT64_MAX, as the capture reader asks for one) was one past the last
// rowid read: a row at rowid 2^63 - 1 was left out, where SQLite reads it. It reads to the
// table's end now, as SQLite does; ranges below it are as they were.
TEST(PageReader, AScanToTheEndReadsRowidInt64MaxAsSQLiteDoes) {
  const fs::path file = test::scratch_dir("pages_rowid_max") / "t.sqlite";
  const uint32_t root = write_table(
      file,
      "CREATE TABLE t (runId INTEGER, v INTEGER); "
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT 1, i FROM n; "
      "INSERT INTO t (rowid, runId, v) VALUES (-9223372036854775808, 1, 0), (9223372036854775807, 1, 301)");
  std::vector<int64_t> sqlite_rowids;
  {
    RawDb raw(file);
    for (const auto& r : raw.rows("SELECT rowid FROM t")) sqlite_rowids.push_back(std::stoll(r[0]));
  }
  ASSERT_EQ(sqlite_rowids.size(), 302u);
  EXPECT_EQ(scanned_rowids(file, root, 2, kRowidMin, kRowidMax), sqlite_rowids);
  EXPECT_EQ(scanned_rowids(file, root, 2, 300, kRowidMax), (std::vector<int64_t>{300, kRowidMax}));
  EXPECT_EQ(scanned_rowids(file, root, 2, 299, kRowidMax - 1), (std::vector<int64_t>{299, 300}));
  EXPECT_EQ(scanned_rowids(file, root, 2, kRowidMin, 2), (std::vector<int64_t>{kRowidMin, 1}));
}

// An empty or reversed range reads no page. It walked the tree before, and where an interior
// key was no rowid of its child (the child's largest row deleted since: SQLite leaves the key)
// it computed end − 1 of an end of INT64_MIN, a signed overflow (UBSan, the fuzz target's first
// finding).
TEST(PageReader, AnEmptyOrReversedRangeReadsNoPage) {
  const fs::path file = test::scratch_dir("pages_empty_range") / "t.sqlite";
  const uint32_t root = write_table(
      file,
      "CREATE TABLE t (v INTEGER); "
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i FROM n");
  // The root's first cell: its left child's largest rowid, when the child split off.
  const std::string bytes = test::read_file(file);
  const size_t page = static_cast<size_t>(root - 1) * 512;
  ASSERT_EQ(static_cast<uint8_t>(bytes[page]), 5) << "an interior table page";
  const size_t cell = page + (static_cast<uint8_t>(bytes[page + 12]) << 8 | static_cast<uint8_t>(bytes[page + 13]));
  int64_t key = 0;
  for (size_t i = cell + 4;; ++i) {  // a small varint: rowids up to 300
    key = key << 7 | (static_cast<uint8_t>(bytes[i]) & 0x7f);
    if (!(static_cast<uint8_t>(bytes[i]) & 0x80)) break;
  }
  ASSERT_GT(key, 1);
  ASSERT_LT(key, 300);
  {
    RawDb raw(file, SQLITE_OPEN_READWRITE);
    raw.exec("DELETE FROM t WHERE rowid = " + std::to_string(key));
  }
  ASSERT_EQ(scanned_rowids(file, root, 1, key, key + 2), (std::vector<int64_t>{key + 1})) << "the key outlived its row";
  for (const auto& [first, end] : std::vector<std::pair<int64_t, int64_t>>{
           {key, kRowidMin}, {kRowidMin, kRowidMin}, {5, 5}, {kRowidMax - 1, kRowidMax - 1}, {300, 1}})
    EXPECT_EQ(scanned_rowids(file, root, 1, first, end), std::vector<int64_t>{}) << first << ", " << end;
  // No page read: a root past the file is not looked at.
  EXPECT_EQ(scanned_rowids(file, 100000, 1, 7, 3), std::vector<int64_t>{});
  EXPECT_THROW(scanned_rowids(file, 100000, 1, 3, 7), pages::PageFormatError);
}
