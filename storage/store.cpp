#include "storage/store.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <ctime>
#include <variant>
#include <mutex>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "storage/sqlite_util.h"

namespace hs::storage {

namespace fs = std::filesystem;
using detail::Stmt;

namespace {

// Event tables and the index finalize() gives each.
constexpr std::string_view kIndexSql = R"SQL(
CREATE INDEX IF NOT EXISTS HOOK_EVENTS_runId_start ON HOOK_EVENTS (runId, start);
CREATE INDEX IF NOT EXISTS WEIGHT_SWAPS_runId_start ON WEIGHT_SWAPS (runId, start);
CREATE INDEX IF NOT EXISTS TRANSFERS_runId_start ON TRANSFERS (runId, start);
CREATE INDEX IF NOT EXISTS DISABLED_SCOPES_runId_start ON DISABLED_SCOPES (runId, start);
CREATE INDEX IF NOT EXISTS MODULE_COMPUTE_runId_start ON MODULE_COMPUTE (runId, start);
CREATE INDEX IF NOT EXISTS COMPILE_REGIONS_runId_start ON COMPILE_REGIONS (runId, start);
CREATE INDEX IF NOT EXISTS GRAPH_BREAKS_runId_start ON GRAPH_BREAKS (runId, start);
CREATE INDEX IF NOT EXISTS GENERATION_STEPS_runId_start ON GENERATION_STEPS (runId, start);
CREATE INDEX IF NOT EXISTS MEMORY_COUNTERS_runId_start ON MEMORY_COUNTERS (runId, start);
CREATE INDEX IF NOT EXISTS DIAGNOSTICS_runId ON DIAGNOSTICS (runId);
CREATE INDEX IF NOT EXISTS COMPILE_RESULTS_runId ON COMPILE_RESULTS (runId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_KERNEL_runId_start ON CUPTI_ACTIVITY_KIND_KERNEL (runId, start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_KERNEL_correlationId ON CUPTI_ACTIVITY_KIND_KERNEL (runId, correlationId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_KERNEL_stream ON CUPTI_ACTIVITY_KIND_KERNEL (deviceId, streamId, start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMCPY_runId_start ON CUPTI_ACTIVITY_KIND_MEMCPY (runId, start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMCPY_correlationId ON CUPTI_ACTIVITY_KIND_MEMCPY (runId, correlationId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMSET_runId_start ON CUPTI_ACTIVITY_KIND_MEMSET (runId, start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMSET_correlationId ON CUPTI_ACTIVITY_KIND_MEMSET (runId, correlationId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_RUNTIME_runId_start ON CUPTI_ACTIVITY_KIND_RUNTIME (runId, start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_RUNTIME_correlationId ON CUPTI_ACTIVITY_KIND_RUNTIME (runId, correlationId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_DRIVER_runId_start ON CUPTI_ACTIVITY_KIND_DRIVER (runId, start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_DRIVER_correlationId ON CUPTI_ACTIVITY_KIND_DRIVER (runId, correlationId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_SYNCHRONIZATION_runId_start ON CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (runId, start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_SYNCHRONIZATION_correlationId ON CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (runId, correlationId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION_correlationId ON CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION (runId, correlationId);
)SQL";

std::string iso8601(std::chrono::system_clock::time_point tp, bool utc) {
  const std::time_t t = std::chrono::system_clock::to_time_t(tp);
  std::tm tm{};
  if (utc)
    gmtime_r(&t, &tm);
  else
    localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, utc ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

int64_t utc_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nlohmann::json parse_object(std::string_view text, std::string_view field) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string(field) + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(std::string(field) + " must be a JSON object, got: " + j.dump());
  return j;
}

}  // namespace

struct Store::Impl {
  fs::path path;
  StoreOptions opts;
  sqlite3* db = nullptr;
  std::mutex mu;
  int64_t global_pid = static_cast<int64_t>(::getpid()) * 0x1000000;

  struct Stmts {
    Stmt begin, commit;
    Stmt ins_string, ins_thread, ins_module;
    Stmt ins_kernel, ins_memcpy, ins_memset, ins_runtime, ins_driver, ins_sync, ins_extcorr, ins_clock;
    Stmt end_run, ins_diag;
  };
  std::unique_ptr<Stmts> st;

  // StringIds interning (whole file).
  std::unordered_map<std::string, int64_t> strings;
  std::unordered_map<int64_t, const std::string*> text_of;  // keys of `strings` (stable nodes)
  int64_t next_string = 1;
  int64_t empty_sid = -1;

  // Runs begun by this Store and not yet ended: tracer StrId → StringIds.id, modules seen.
  struct RunState {
    std::vector<int64_t> ids;
    std::unordered_set<int64_t> modules;
  };
  std::unordered_map<int64_t, RunState> runs;

  // Undo log of the open transaction (in-memory state to drop on rollback).
  std::vector<const std::string*> txn_strings;
  std::vector<std::pair<int64_t, int64_t>> txn_modules;
  bool in_txn = false;

  ~Impl() { close_db(); }

  void close_db() {
    st.reset();
    for (auto& t : tables) t = EventTable{};
    if (db) sqlite3_close_v2(db);
    db = nullptr;
  }

  void open(int flags) {
    // SQLite's memory statistics (sqlite3_memory_used) take a global mutex on every allocation
    // and nothing here reads them: off, once per process. sqlite3_config only works before
    // SQLite initialises; when a reader opened a file first it fails harmlessly (SQLITE_MISUSE).
    static const int memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    (void)memstatus_off;
    // NOMUTEX: this Store serialises every use of the connection with `mu` itself.
    const int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
      close_db();
      throw CaptureError(path, "cannot open capture " + path.string() + " for writing: " + msg);
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, opts.busy_timeout_ms);
  }

  // WAL + synchronous=NORMAL: a commit is an append to the WAL without fsync — durable against
  // a killed process (not against power loss, where the last commits may be lost, never the
  // file's consistency). The WAL is folded into the file every 16384 pages (64 MiB) rather
  // than SQLite's default 1000: fewer fsyncing checkpoints during capture (measured ~1.5x
  // ingest), while the WAL stays bounded.
  void set_pragmas() {
    detail::exec(db, path,
                 "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY; "
                 "PRAGMA cache_size=-32768; PRAGMA foreign_keys=OFF; PRAGMA wal_autocheckpoint=16384; "
                 "PRAGMA journal_size_limit=67108864;",
                 "configuring");
  }

  void create_schema() {
    detail::exec(db, path, "PRAGMA page_size=4096;", "configuring");
    set_pragmas();
    detail::exec(db, path, "BEGIN IMMEDIATE", "creating");
    try {
      detail::exec(db, path, schema_sql(), "creating the schema");
      Stmt meta(db, path, "INSERT INTO META_DATA_EXPORT (name, value) VALUES (?, ?)");
      meta.bind(1, kSchemaVersionKey).bind(2, std::to_string(kSchemaVersion)).exec();
      meta.bind(1, kProductVersionKey).bind(2, opts.product_version).exec();
      meta.bind(1, "HOOKSCOPE_TIME_DOMAIN").bind(2, "host steady_clock (CLOCK_MONOTONIC), ns").exec();
      meta.bind(1, "HOOKSCOPE_FINALIZED").bind(2, "0").exec();
      meta.bind(1, "HOOKSCOPE_SQLITE_VERSION").bind(2, sqlite3_libversion()).exec();
      const auto now = std::chrono::system_clock::now();
      Stmt start(db, path,
                 "INSERT INTO TARGET_INFO_SESSION_START_TIME (utcEpochNs, utcTime, localTime, steadyNs) "
                 "VALUES (?, ?, ?, ?)");
      start.bind(1, static_cast<int64_t>(
                        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()))
          .bind(2, iso8601(now, true))
          .bind(3, iso8601(now, false))
          .bind(4, events::now_ns())
          .exec();
      detail::exec(db, path, "COMMIT", "creating");
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  void load_strings() {
    Stmt q(db, path, "SELECT id, value FROM StringIds");
    while (q.step()) {
      const int64_t id = q.int64(0);
      auto [it, _] = strings.emplace(q.text(1), id);
      text_of[id] = &it->first;
      if (it->first.empty()) empty_sid = id;
      next_string = std::max(next_string, id + 1);
    }
  }

  void prepare() {
    st = std::make_unique<Stmts>();
    auto p = [&](std::string_view sql) { return Stmt(db, path, sql); };
    st->begin = p("BEGIN IMMEDIATE");
    st->commit = p("COMMIT");
    st->ins_string = p("INSERT INTO StringIds (id, value) VALUES (?, ?)");
    st->ins_thread = p("INSERT INTO THREADS (runId, threadId, tid) VALUES (?, ?, ?)");
    st->ins_module = p(
        "INSERT INTO MODULES (runId, moduleId, classId) VALUES (?, ?, ?) ON CONFLICT (runId, moduleId) "
        "DO UPDATE SET classId = coalesce(MODULES.classId, excluded.classId)");
    // Event tables, in Event::index() order, with their column counts.
    static constexpr std::pair<const char*, int> kEventTables[] = {
        {"HOOK_EVENTS", 7},     {"WEIGHT_SWAPS", 12},   {"TRANSFERS", 10},
        {"DISABLED_SCOPES", 7}, {"MODULE_COMPUTE", 6},  {"COMPILE_REGIONS", 7},
        {"GRAPH_BREAKS", 7},    {"GENERATION_STEPS", 6}, {"MEMORY_COUNTERS", 5}};
    static_assert(std::size(kEventTables) == std::variant_size_v<tracer::Event>);
    for (size_t k = 0; k < tables.size(); ++k) {
      const auto [name, cols] = kEventTables[k];
      // runId is ?1 in every row: bound once per statement, not once per row.
      std::string row = "(?1";
      for (int c = 1; c < cols; ++c) row += ", ?";
      row += ")";
      std::string many = std::string("INSERT INTO ") + name + " VALUES " + row;
      for (size_t r = 1; r < kMultiRows; ++r) many += ", " + row;
      tables[k].one = p(std::string("INSERT INTO ") + name + " VALUES " + row);
      tables[k].many = p(many);
      tables[k].pending.reserve(kMultiRows);
    }
    st->ins_kernel = p(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
        "globalPid, demangledName, shortName, mangledName, launchType, cacheConfig, registersPerThread, gridX, gridY, "
        "gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, "
        "localMemoryTotal, gridId, graphNodeId, runId) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st->ins_memcpy = p(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
        "globalPid, bytes, copyKind, srcKind, dstKind, srcDeviceId, dstDeviceId, graphNodeId, runId) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st->ins_memset = p(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, "
        "globalPid, value, bytes, graphNodeId, memKind, runId) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st->ins_runtime = p(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
        "returnValue, runId) VALUES (?, ?, 0, ?, ?, ?, ?, ?)");
    st->ins_driver = p(
        "INSERT INTO CUPTI_ACTIVITY_KIND_DRIVER (start, end, eventClass, globalTid, correlationId, nameId, "
        "returnValue, runId) VALUES (?, ?, 1, ?, ?, ?, ?, ?)");
    st->ins_sync = p(
        "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId, streamId, "
        "correlationId, globalPid, syncType, eventId, runId) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st->ins_extcorr = p(
        "INSERT INTO CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION (externalKind, externalId, correlationId, runId) "
        "VALUES (?, ?, ?, ?)");
    st->ins_clock = p("INSERT INTO CLOCK_CALIBRATION (runId, deviceId, hostNs, gpuNs) VALUES (?, ?, ?, ?)");
    st->end_run = p("UPDATE RUNS SET status = ?, error = ?, end = ?, droppedRecords = droppedRecords + ? WHERE id = ?");
    st->ins_diag = p("INSERT INTO DIAGNOSTICS (runId, start, severity, source, text) VALUES (?, ?, ?, ?, ?)");
  }

  void require_open() const {
    if (!db) throw CaptureError(path, "capture " + path.string() + " is closed");
  }

  // --- transactions with an in-memory undo log ---------------------------------------
  void begin() {
    st->begin.exec();
    in_txn = true;
    txn_strings.clear();
    txn_modules.clear();
  }
  void commit() {
    st->commit.exec();
    in_txn = false;
  }
  void rollback() noexcept {
    if (!in_txn) return;
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    in_txn = false;
    for (const std::string* s : txn_strings) {
      if (s->empty()) empty_sid = -1;
      auto it = strings.find(*s);
      text_of.erase(it->second);
      strings.erase(it);
    }
    if (!txn_strings.empty()) {
      next_string = 1;
      for (const auto& [_, id] : strings) next_string = std::max(next_string, id + 1);
    }
    for (const auto& [run, m] : txn_modules)
      if (auto it = runs.find(run); it != runs.end()) it->second.modules.erase(m);
  }
  template <class F>
  auto in_transaction(F&& f) {
    begin();
    try {
      if constexpr (std::is_void_v<decltype(f())>) {
        f();
        commit();
      } else {
        auto r = f();
        commit();
        return r;
      }
    } catch (...) {
      rollback();
      throw;
    }
  }

  std::string_view text(int64_t sid) const { return *text_of.at(sid); }

  int64_t intern(std::string_view s) {
    if (auto it = strings.find(std::string(s)); it != strings.end()) return it->second;
    const int64_t id = next_string++;
    st->ins_string.bind(1, id).bind(2, s).exec();
    auto [it, _] = strings.emplace(std::string(s), id);
    text_of[id] = &it->first;
    if (in_txn) txn_strings.push_back(&it->first);
    if (s.empty()) empty_sid = id;
    return id;
  }

  void note_module(int64_t run, RunState& rs, int64_t module, std::optional<int64_t> cls) {
    if (!rs.modules.insert(module).second) return;
    if (in_txn) txn_modules.emplace_back(run, module);
    st->ins_module.bind(1, run).bind(2, module).bind(3, cls).exec();
  }

  RunState& run_state(int64_t run, std::string_view what) {
    auto it = runs.find(run);
    if (it == runs.end())
      throw std::invalid_argument(std::string(what) + ": run " + std::to_string(run) +
                                  " is not an open run of this Store (" + path.string() +
                                  "): begin_run it first; a run that ended or whose batch failed takes no more "
                                  "batches");
    return it->second;
  }

  bool run_exists(int64_t run) {
    Stmt q(db, path, "SELECT 1 FROM RUNS WHERE id = ?");
    q.bind(1, run);
    return q.step();
  }

  // --- event tables -----------------------------------------------------------------
  static constexpr size_t kMultiRows = 128;
  struct EventTable {
    Stmt one, many;  // 1-row and kMultiRows-row INSERTs
    std::vector<const tracer::Record*> pending;
  };
  std::array<EventTable, std::variant_size_v<tracer::Event>> tables;  // by Event::index()
  struct BatchCtx {
    int64_t run;
    RunState& rs;
    const fs::path& path;
    int64_t sid(tracer::StrId id) const {
      if (id >= rs.ids.size() || rs.ids[id] < 0)
        throw std::invalid_argument("write_batch: string id " + std::to_string(id) + " of run " +
                                    std::to_string(run) + " was never defined (capture " + path.string() + ")");
      return rs.ids[id];
    }
  };
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::HookSpan& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::WeightSwap& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::Transfer& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::DisabledScope& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::ModuleCompute& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::Region& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::GraphBreak& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::GenerationStep& e);
  int bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::MemoryCounter& e);
  void flush_rows(size_t kind, BatchCtx& c, bool all);
  void write_records(int64_t run, RunState& rs, const tracer::RecordBatch& b);
};

// Binds one event's row from parameter `i` (1-based) of `s`, every column but the first
// (runId: parameter ?1 of every row, bound once per statement); returns the parameters bound.
// Column order = the table's DDL order.
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::HookSpan& e) {
  const int64_t module = c.sid(e.module);
  s.bind(i, e.start_ns).bind(i + 1, e.end_ns).bind(i + 2, thread).bind(i + 3, c.sid(e.hook))
      .bind(i + 4, static_cast<int>(e.phase)).bind(i + 5, module);
  note_module(c.run, c.rs, module, c.sid(e.module_class));
  return 6;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::WeightSwap& e) {
  s.bind(i, e.start_ns).bind(i + 1, e.end_ns).bind(i + 2, thread).bind(i + 3, e.onload)
      .bind(i + 4, c.sid(e.module)).bind(i + 5, c.sid(e.tensor)).bind(i + 6, e.bytes).bind(i + 7, c.sid(e.dtype))
      .bind(i + 8, static_cast<int>(e.source)).bind(i + 9, c.sid(e.device)).bind(i + 10, e.pinned);
  return 11;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::Transfer& e) {
  const int64_t module = c.sid(e.module), src = c.sid(e.src), dst = c.sid(e.dst);
  s.bind(i, e.start_ns).bind(i + 1, e.end_ns).bind(i + 2, thread).bind(i + 3, src)
      .bind(i + 4, dst).bind(i + 5, e.bytes).bind(i + 6, static_cast<int>(copy_kind_for(text(src), text(dst))))
      .bind(i + 7, e.emulated);
  if (module == empty_sid)
    s.bind_null(i + 8);
  else
    s.bind(i + 8, module);
  return 9;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::DisabledScope& e) {
  s.bind(i, e.start_ns).bind(i + 1, e.end_ns).bind(i + 2, thread).bind(i + 3, c.sid(e.function))
      .bind(i + 4, c.sid(e.module)).bind(i + 5, e.depth);
  return 6;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::ModuleCompute& e) {
  const int64_t module = c.sid(e.module);
  s.bind(i, e.start_ns).bind(i + 1, e.end_ns).bind(i + 2, thread).bind(i + 3, module)
      .bind(i + 4, c.sid(e.device));
  note_module(c.run, c.rs, module, c.sid(e.module_class));
  return 5;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::Region& e) {
  s.bind(i, e.start_ns).bind(i + 1, e.end_ns).bind(i + 2, thread).bind(i + 3, e.index)
      .bind(i + 4, e.op_count).bind(i + 5, c.sid(e.backend));
  return 6;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::GraphBreak& e) {
  s.bind(i, e.time_ns).bind(i + 1, thread).bind(i + 2, c.sid(e.reason))
      .bind(i + 3, c.sid(e.function)).bind(i + 4, c.sid(e.module)).bind(i + 5, c.sid(e.module_stack));
  return 6;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx&, uint32_t thread, const tracer::rec::GenerationStep& e) {
  s.bind(i, e.start_ns).bind(i + 1, e.end_ns).bind(i + 2, thread).bind(i + 3, e.step)
      .bind(i + 4, e.token);
  return 5;
}
int Store::Impl::bind_row(Stmt& s, int i, BatchCtx& c, uint32_t thread, const tracer::rec::MemoryCounter& e) {
  s.bind(i, e.time_ns).bind(i + 1, thread).bind(i + 2, c.sid(e.device)).bind(i + 3, e.bytes);
  return 4;
}

// Inserts the pending rows of one event table: groups of kMultiRows through the multi-row
// statement (one VDBE run per group instead of per row; 128 rows measured ~4 % fewer
// instructions per event than 32, more gains nothing), the remainder one by one.
void Store::Impl::flush_rows(size_t kind, BatchCtx& c, bool all) {
  EventTable& t = tables[kind];
  auto bind_into = [&](Stmt& s, int base, const tracer::Record* r) {
    return std::visit([&](const auto& e) { return bind_row(s, base, c, r->thread, e); }, r->event);
  };
  size_t k = 0;
  if (k + kMultiRows <= t.pending.size()) t.many.bind(1, c.run);  // bindings survive exec's reset
  for (; k + kMultiRows <= t.pending.size(); k += kMultiRows) {
    int col = 2;
    for (size_t j = 0; j < kMultiRows; ++j) col += bind_into(t.many, col, t.pending[k + j]);
    t.many.exec();
  }
  if (all && k < t.pending.size()) {
    t.one.bind(1, c.run);
    for (; k < t.pending.size(); ++k) {
      bind_into(t.one, 2, t.pending[k]);
      t.one.exec();
    }
  }
  t.pending.erase(t.pending.begin(), t.pending.begin() + static_cast<std::ptrdiff_t>(k));
}

void Store::Impl::write_records(int64_t run, RunState& rs, const tracer::RecordBatch& b) {
  for (const tracer::StringDef& s : b.strings) {
    if (s.id >= rs.ids.size()) rs.ids.resize(static_cast<size_t>(s.id) + 1, -1);
    rs.ids[s.id] = intern(s.text);
  }
  for (const tracer::ThreadDef& t : b.threads) st->ins_thread.bind(1, run).bind(2, t.thread).bind(3, t.os_tid).exec();
  BatchCtx c{run, rs, path};
  for (auto& t : tables) t.pending.clear();
  try {
    for (const tracer::Record& r : b.records) {
      const size_t kind = r.event.index();
      tables[kind].pending.push_back(&r);
      if (tables[kind].pending.size() == kMultiRows) flush_rows(kind, c, false);
    }
    for (size_t kind = 0; kind < tables.size(); ++kind) flush_rows(kind, c, true);
  } catch (...) {
    for (auto& t : tables) t.pending.clear();
    throw;
  }
}

// ---------------------------------------------------------------------------------------

Store::Store(fs::path path, StoreOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = std::move(path);
  m.opts = std::move(options);
  std::error_code ec;
  const bool exists = fs::exists(m.path, ec);
  if (exists && !fs::is_regular_file(m.path, ec))
    throw CaptureError(m.path, "cannot use " + m.path.string() + " as a capture: not a regular file");
  const bool has_content = exists && fs::file_size(m.path, ec) > 0;
  if (has_content) {
    // Validate before touching anything: a file that is not a capture is never modified.
    m.open(SQLITE_OPEN_READWRITE);
    try {
      detail::check_capture(m.db, m.path);
    } catch (const CaptureError& e) {
      m.close_db();
      const std::string what = e.what();
      if (what.rfind("not a hookscope capture", 0) == 0)
        throw CaptureError(m.path, what + "; refusing to write into it");
      throw;
    }
    if (m.opts.overwrite) {
      m.close_db();
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        fs::path p = m.path;
        p += suffix;
        fs::remove(p, ec);
        if (ec) throw CaptureError(m.path, "cannot replace capture " + m.path.string() + ": " + ec.message());
      }
    }
  }
  if (!m.db) {
    m.open(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    try {
      m.create_schema();
    } catch (...) {
      m.close_db();
      throw;
    }
  } else {
    m.set_pragmas();
    m.load_strings();
  }
  m.prepare();
}

Store::~Store() {
  try {
    close();
  } catch (...) {
  }
}

const fs::path& Store::path() const { return impl_->path; }

int64_t Store::begin_run(const tracer::RunInfo& info) {
  const nlohmann::json device_map = parse_object(info.device_map_json, "RunInfo.device_map_json");
  const nlohmann::json versions = parse_object(info.versions_json, "RunInfo.versions_json");
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  const int64_t id = m.in_transaction([&] {
    Stmt ins(m.db, m.path,
             "INSERT INTO RUNS (scenario, policy, mode, fullgraph, model, device_map, versions, status, start, "
             "startUtcNs, globalPid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, info.scenario).bind(2, info.policy).bind(3, info.mode).bind(4, info.fullgraph).bind(5, info.model)
        .bind(6, device_map.dump()).bind(7, versions.dump()).bind(8, static_cast<int>(tracer::RunStatus::Incomplete))
        .bind(9, info.start_ns ? info.start_ns : events::now_ns()).bind(10, utc_now_ns()).bind(11, m.global_pid)
        .exec();
    return static_cast<int64_t>(sqlite3_last_insert_rowid(m.db));
  });
  m.runs[id];
  return id;
}

void Store::write_batch(const tracer::RecordBatch& batch) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  Impl::RunState& rs = m.run_state(batch.run_id, "write_batch");
  try {
    m.in_transaction([&] {
      m.write_records(batch.run_id, rs, batch);
      if (const tracer::RunEnd* end = batch.end) {
        m.st->end_run.bind(1, static_cast<int>(end->status));
        if (end->error.empty())
          m.st->end_run.bind_null(2);
        else
          m.st->end_run.bind(2, end->error);
        m.st->end_run.bind(3, end->end_ns ? end->end_ns : events::now_ns())
            .bind(4, static_cast<int64_t>(end->dropped_records))
            .bind(5, batch.run_id)
            .exec();
        if (end->dropped_records > 0)
          m.st->ins_diag.bind(1, batch.run_id).bind(2, end->end_ns).bind(3, static_cast<int>(Severity::Warning))
              .bind(4, "tracer")
              .bind(5, "the tracer dropped " + std::to_string(end->dropped_records) +
                           " events (buffers full, too many threads or strings); the run's tables are incomplete")
              .exec();
      }
    });
  } catch (...) {
    m.runs.erase(batch.run_id);  // its string ids may be half-defined now: no more batches
    throw;
  }
  if (batch.end) m.runs.erase(batch.run_id);
}

void Store::write_gpu_batch(const tracer::GpuActivityBatch& b) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  if (!m.run_exists(b.run_id))
    throw std::invalid_argument("write_gpu_batch: no run " + std::to_string(b.run_id) + " in capture " +
                                m.path.string());
  const int64_t run = b.run_id;
  const int64_t gpid = m.global_pid;
  auto graph_node = [](int64_t id) { return id ? std::optional<int64_t>(id) : std::nullopt; };
  m.in_transaction([&] {
    for (const auto& k : b.kernels) {
      auto& s = m.st->ins_kernel;
      s.bind(1, k.start_ns).bind(2, k.end_ns).bind(3, k.device_id).bind(4, k.context_id).bind(5, k.stream_id)
          .bind(6, k.correlation_id).bind(7, gpid).bind(8, m.intern(k.demangled_name))
          .bind(9, m.intern(k.short_name));
      if (k.mangled_name.empty())
        s.bind_null(10);
      else
        s.bind(10, m.intern(k.mangled_name));
      s.bind(11, k.launch_type).bind(12, k.cache_config).bind(13, k.registers_per_thread).bind(14, k.grid_x)
          .bind(15, k.grid_y).bind(16, k.grid_z).bind(17, k.block_x).bind(18, k.block_y).bind(19, k.block_z)
          .bind(20, k.static_shared_memory).bind(21, k.dynamic_shared_memory).bind(22, k.local_memory_per_thread)
          .bind(23, k.local_memory_total).bind(24, k.grid_id).bind(25, graph_node(k.graph_node_id)).bind(26, run)
          .exec();
    }
    for (const auto& c : b.memcpys) {
      auto& s = m.st->ins_memcpy;
      s.bind(1, c.start_ns).bind(2, c.end_ns).bind(3, c.device_id).bind(4, c.context_id).bind(5, c.stream_id)
          .bind(6, c.correlation_id).bind(7, gpid).bind(8, c.bytes).bind(9, static_cast<int>(c.copy_kind))
          .bind(10, static_cast<int>(c.src_kind)).bind(11, static_cast<int>(c.dst_kind));
      if (c.src_device_id < 0)
        s.bind_null(12);
      else
        s.bind(12, c.src_device_id);
      if (c.dst_device_id < 0)
        s.bind_null(13);
      else
        s.bind(13, c.dst_device_id);
      s.bind(14, graph_node(c.graph_node_id)).bind(15, run).exec();
    }
    for (const auto& c : b.memsets)
      m.st->ins_memset.bind(1, c.start_ns).bind(2, c.end_ns).bind(3, c.device_id).bind(4, c.context_id)
          .bind(5, c.stream_id).bind(6, c.correlation_id).bind(7, gpid).bind(8, c.value).bind(9, c.bytes)
          .bind(10, graph_node(c.graph_node_id)).bind(11, static_cast<int>(c.mem_kind)).bind(12, run).exec();
    for (const auto& a : b.api_calls) {
      auto& s = a.driver ? m.st->ins_driver : m.st->ins_runtime;
      s.bind(1, a.start_ns).bind(2, a.end_ns).bind(3, gpid + a.os_tid).bind(4, a.correlation_id)
          .bind(5, m.intern(a.name)).bind(6, a.return_value).bind(7, run).exec();
    }
    for (const auto& y : b.syncs)
      m.st->ins_sync.bind(1, y.start_ns).bind(2, y.end_ns).bind(3, y.device_id).bind(4, y.context_id)
          .bind(5, y.stream_id).bind(6, y.correlation_id).bind(7, gpid).bind(8, static_cast<int>(y.sync_type))
          .bind(9, y.event_id).bind(10, run).exec();
    for (const auto& x : b.external_correlations)
      m.st->ins_extcorr.bind(1, static_cast<int64_t>(x.kind)).bind(2, static_cast<int64_t>(x.external_id))
          .bind(3, x.correlation_id).bind(4, run).exec();
    for (const auto& c : b.clock_samples)
      m.st->ins_clock.bind(1, run).bind(2, c.device_id).bind(3, c.host_ns).bind(4, c.gpu_ns).exec();
    if (b.dropped_records > 0) {
      Stmt up(m.db, m.path, "UPDATE RUNS SET droppedRecords = droppedRecords + ? WHERE id = ?");
      up.bind(1, static_cast<int64_t>(b.dropped_records)).bind(2, run).exec();
      m.st->ins_diag.bind(1, run).bind_null(2).bind(3, static_cast<int>(Severity::Warning)).bind(4, "cupti")
          .bind(5, "CUPTI dropped " + std::to_string(b.dropped_records) + " activity records")
          .exec();
    }
  });
}

void Store::end_run(int64_t run, tracer::RunStatus status, std::string_view error, int64_t end_ns) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  if (!m.run_exists(run))
    throw std::invalid_argument("end_run: no run " + std::to_string(run) + " in capture " + m.path.string());
  m.in_transaction([&] {
    m.st->end_run.bind(1, static_cast<int>(status));
    if (error.empty())
      m.st->end_run.bind_null(2);
    else
      m.st->end_run.bind(2, error);
    m.st->end_run.bind(3, end_ns ? end_ns : events::now_ns()).bind(4, int64_t{0}).bind(5, run).exec();
  });
  m.runs.erase(run);
}

void Store::set_run_result(int64_t run, const nlohmann::json& results) {
  if (!results.is_object())
    throw std::invalid_argument("set_run_result: results must be a JSON object, got: " + results.dump());
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  m.in_transaction([&] {
    Stmt q(m.db, m.path, "SELECT results FROM RUNS WHERE id = ?");
    q.bind(1, run);
    if (!q.step())
      throw std::invalid_argument("set_run_result: no run " + std::to_string(run) + " in capture " +
                                  m.path.string());
    nlohmann::json current = nlohmann::json::parse(q.text(0), nullptr, /*allow_exceptions=*/false);
    if (!current.is_object()) current = nlohmann::json::object();
    current.merge_patch(results);
    q.reset();
    Stmt up(m.db, m.path, "UPDATE RUNS SET results = ? WHERE id = ?");
    up.bind(1, current.dump()).bind(2, run).exec();
  });
}

int64_t Store::add_diagnostic(std::optional<int64_t> run, Severity severity, std::string_view source,
                              std::string_view text, std::optional<int64_t> time_ns) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  return m.in_transaction([&] {
    m.st->ins_diag.bind(1, run).bind(2, time_ns).bind(3, static_cast<int>(severity)).bind(4, source).bind(5, text)
        .exec();
    return static_cast<int64_t>(sqlite3_last_insert_rowid(m.db));
  });
}

int64_t Store::add_device(const DeviceInfo& d) {
  if (d.name.empty()) throw std::invalid_argument("add_device: DeviceInfo.name (the logical id) is empty");
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  return m.in_transaction([&] {
    Stmt ins(m.db, m.path,
             "INSERT INTO DEVICES (runId, name, kind, backing, label, max_memory, gpuId) VALUES (?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, d.run_id).bind(2, d.name).bind(3, static_cast<int>(d.kind)).bind(4, d.backing).bind(5, d.label)
        .bind(6, d.max_memory).bind(7, d.gpu_id).exec();
    return static_cast<int64_t>(sqlite3_last_insert_rowid(m.db));
  });
}

void Store::add_gpu(const GpuInfo& g) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  m.in_transaction([&] {
    Stmt ins(m.db, m.path,
             "INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, isDiscrete, l2CacheSize, totalMemory, "
             "memoryBandwidth, clockRate, smCount, uuid, chipName, cuDevice, maxShmemPerBlock, threadsPerWarp, "
             "asyncEngines, maxWarpsPerSm, computeMajor, computeMinor) "
             "VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, g.id).bind(2, g.name).bind(3, g.bus_location).bind(4, g.is_discrete).bind(5, g.l2_cache_size)
        .bind(6, g.total_memory).bind(7, g.memory_bandwidth).bind(8, g.clock_rate).bind(9, g.sm_count)
        .bind(10, g.uuid).bind(11, g.chip_name).bind(12, g.id).bind(13, g.max_shmem_per_block)
        .bind(14, g.threads_per_warp).bind(15, g.async_engines).bind(16, g.max_warps_per_sm)
        .bind(17, g.compute_major).bind(18, g.compute_minor).exec();
  });
}

void Store::add_compile_result(int64_t run, const CompileResult& r) {
  if (!r.break_reasons.is_array())
    throw std::invalid_argument("add_compile_result: break_reasons must be a JSON array, got: " +
                                r.break_reasons.dump());
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  if (!m.run_exists(run))
    throw std::invalid_argument("add_compile_result: no run " + std::to_string(run) + " in capture " +
                                m.path.string());
  m.in_transaction([&] {
    Stmt ins(m.db, m.path,
             "INSERT INTO COMPILE_RESULTS (runId, graph_count, graph_break_count, recompiles, fullgraph_ok, error, "
             "break_reasons) VALUES (?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, run).bind(2, r.graph_count).bind(3, r.graph_break_count).bind(4, r.recompiles)
        .bind(5, r.fullgraph_ok);
    if (r.error.empty())
      ins.bind_null(6);
    else
      ins.bind(6, r.error);
    ins.bind(7, r.break_reasons.dump()).exec();
  });
}

void Store::add_module(int64_t run, std::string_view fqn, std::string_view module_class) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  if (!m.run_exists(run))
    throw std::invalid_argument("add_module: no run " + std::to_string(run) + " in capture " + m.path.string());
  m.in_transaction([&] {
    const int64_t module = m.intern(fqn);
    const int64_t cls = m.intern(module_class);
    if (auto it = m.runs.find(run); it != m.runs.end()) {
      m.note_module(run, it->second, module, cls);
    } else {
      m.st->ins_module.bind(1, run).bind(2, module).bind(3, cls).exec();
    }
  });
}

void Store::finalize() {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  m.in_transaction([&] {
    detail::exec(m.db, m.path, kIndexSql, "building the indexes");
    detail::exec(m.db, m.path, "UPDATE META_DATA_EXPORT SET value = '1' WHERE name = 'HOOKSCOPE_FINALIZED'",
                 "finalizing");
  });
  detail::exec(m.db, m.path, "PRAGMA wal_checkpoint(TRUNCATE);", "checkpointing");
}

void Store::close() {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  if (!m.db) return;
  m.st.reset();
  for (auto& t : m.tables) t = Impl::EventTable{};
  // Best effort: fold the WAL into the file and leave one self-contained file. Fails harmlessly
  // (stays in WAL mode) while another connection has the file open.
  sqlite3_exec(m.db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;", nullptr, nullptr, nullptr);
  const int rc = sqlite3_close(m.db);
  if (rc != SQLITE_OK) {
    const std::string msg = sqlite3_errmsg(m.db);
    sqlite3_close_v2(m.db);
    m.db = nullptr;
    throw CaptureError(m.path, "closing capture " + m.path.string() + " failed: " + msg);
  }
  m.db = nullptr;
}

int64_t Store::string_count() const {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  Stmt q(m.db, m.path, "SELECT count(*) FROM StringIds");
  q.step();
  return q.int64(0);
}

}  // namespace hs::storage
