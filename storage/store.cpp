#include "storage/store.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "storage/event_tables.h"
#include "storage/sqlite_util.h"

namespace hs::storage {

namespace fs = std::filesystem;
using detail::Stmt;

namespace {

// The indexes finalize() builds: (runId, start) / (runId, correlationId) per event table (see
// detail::index_sql), plus these.
constexpr std::string_view kExtraIndexSql = R"SQL(
CREATE INDEX IF NOT EXISTS DIAGNOSTICS_runId ON DIAGNOSTICS (runId);
CREATE INDEX IF NOT EXISTS COMPILE_RESULTS_runId ON COMPILE_RESULTS (runId);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_KERNEL_stream ON CUPTI_ACTIVITY_KIND_KERNEL (deviceId, streamId, start);
)SQL";

const std::string& index_sql() {
  static const std::string sql = [] {
    std::string out(kExtraIndexSql);
    detail::for_each_kind([&](auto kind) { out += detail::index_sql<typename decltype(kind)::type>(); });
    return out;
  }();
  return sql;
}

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
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers past a double
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

  // An event table's INSERTs: one row, and kMultiRows rows at once (one VDBE run per group
  // instead of per row; 128 rows measured ~4 % fewer instructions per event than 32, more
  // gains nothing).
  static constexpr size_t kMultiRows = 128;
  struct KindTable {
    Stmt one, many;
    std::vector<const tracer::Record*> pending;  // host events waiting to fill a group
  };
  struct Stmts {
    Stmt begin, commit;
    Stmt ins_string, ins_thread, ins_module;
    Stmt ins_run, run_exists, end_run, ins_diag;
    std::array<KindTable, tracer::kEventKinds> host;  // by tracer::EventKind
#define HS_ACTIVITY_TABLE_(Type, Row, rows, ...) KindTable rows;
    HS_ACTIVITY_KINDS(HS_ACTIVITY_TABLE_)  // one member per activity kind, named as its batch span
#undef HS_ACTIVITY_TABLE_
  };
  std::unique_ptr<Stmts> st;

  // StringIds interning (whole file), looked up by view: no std::string built per lookup.
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view v) const noexcept { return std::hash<std::string_view>{}(v); }
  };
  std::unordered_map<std::string, int64_t, ViewHash, std::equal_to<>> strings;
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

  // A capture written before an event kind existed lacks its table: add it (empty), so runs
  // appended now can record that kind. One written before a nullable column was added (e.g.
  // DYNAMO_GRAPH_BREAKS.timeNs) gets the column: its old rows read NULL there.
  void add_missing_event_tables() {
    bool missing = false;
    std::string add_columns;
    detail::for_each_kind([&](auto kind) {
      using K = typename decltype(kind)::type;
      Stmt q(db, path, "SELECT name FROM pragma_table_info(?)");
      q.bind(1, K::table);
      std::set<std::string, std::less<>> present;
      while (q.step()) present.insert(q.text(0));
      missing = missing || present.empty();
      if (present.empty()) return;
      K::columns([&](auto tag, std::string_view column, std::string_view, auto) {
        using Tag = typename decltype(tag)::type;
        if constexpr (kinds::has_column<Tag>)
          if (!present.count(column) && detail::column_type<Tag>() == std::string_view("INTEGER"))
            add_columns += "ALTER TABLE " + std::string(K::table) + " ADD COLUMN " + std::string(column) + " INTEGER;\n";
      });
    });
    if (!missing && add_columns.empty()) return;
    detail::exec(db, path, "BEGIN IMMEDIATE", "upgrading");
    try {
      if (missing) detail::exec(db, path, event_tables_sql(), "adding event tables to");
      if (!add_columns.empty()) detail::exec(db, path, add_columns, "adding columns to");
      detail::exec(db, path, "COMMIT", "upgrading");
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
    // Host event tables now; activity tables on their first rows (CPU captures have none).
#define HS_PREPARE_HOST_(Type, ...) prepare_kind<tracer::rec::Type>(st->host[static_cast<size_t>(tracer::EventKind::Type)]);
    HS_HOST_EVENT_KINDS(HS_PREPARE_HOST_)
#undef HS_PREPARE_HOST_
    for (KindTable& t : st->host) t.pending.reserve(kMultiRows);
    st->run_exists = p("SELECT 1 FROM RUNS WHERE id = ?");
    st->end_run = p("UPDATE RUNS SET status = ?, error = ?, end = ?, droppedRecords = droppedRecords + ? WHERE id = ?");
    st->ins_diag = p("INSERT INTO DIAGNOSTICS (runId, start, severity, source, text) VALUES (?, ?, ?, ?, ?)");
  }

  template <class K>
  void prepare_kind(KindTable& t) {
    t.one = Stmt(db, path, detail::insert_sql<K>(1));
    t.many = Stmt(db, path, detail::insert_sql<K>(kMultiRows));
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
    if (auto it = strings.find(s); it != strings.end()) return it->second;
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
    Stmt& q = st->run_exists;
    q.bind(1, run);
    const bool found = q.step();
    q.reset();
    return found;
  }

  // --- event tables -----------------------------------------------------------------
  // Where a row's derived columns come from: its run, its recording thread (host events),
  // and how its strings become StringIds ids — run-scoped tracer ids for host events,
  // interned text for activity records.
  struct RowCtx {
    Impl& m;
    int64_t run;
    RunState* rs = nullptr;  // host events only
    uint32_t thread = 0;     // host events only: the row's recording thread
    int64_t global_pid;      // pid * 0x1000000 of the process the rows were traced in
    int64_t text_id(tracer::StrId id) const {
      if (id >= rs->ids.size() || rs->ids[id] < 0)
        throw std::invalid_argument("write_batch: string id " + std::to_string(id) + " of run " +
                                    std::to_string(run) + " was never defined (capture " + m.path.string() + ")");
      return rs->ids[id];
    }
    int64_t text_id(std::string_view s) const { return m.intern(s); }
    std::optional<int64_t> text_or_null(tracer::StrId id) const {
      const int64_t sid = text_id(id);
      return sid == m.empty_sid ? std::nullopt : std::optional<int64_t>(sid);
    }
    std::optional<int64_t> text_or_null(std::string_view s) const {
      return s.empty() ? std::nullopt : std::optional<int64_t>(m.intern(s));
    }
    std::string_view text(tracer::StrId id) const { return m.text(text_id(id)); }
    std::string_view text(std::string_view s) const { return s; }
  };

  template <class Tag, class R, class Field>
  void bind_value(Stmt& s, int i, RowCtx& c, const R& r, Field field);
  template <class R>
  int bind_row(Stmt& s, int first, RowCtx& c, const R& r);
  template <class At>
  size_t insert_rows(KindTable& t, RowCtx& c, size_t n, bool all, At&& at);
  // Per run and table, the sums so far of its rows' durations (end - start) and byte counts,
  // which every reader adds up: CaptureReader::check_rows refuses a run whose sums pass
  // 2^63 - 1, so the Store refuses the row that would make them (an import's values, each in
  // range, may still add up past it). The tables check_rows sums: with a start and an end, not
  // CUPTI's.
  struct RowSums {
    int64_t dur = 0, bytes = 0;
  };
  std::map<std::pair<int64_t, std::string_view>, RowSums> row_sums;
  template <class R, class At>
  void add_row_sums(int64_t run, size_t n, At&& at);
  void flush_rows(tracer::EventKind kind, RowCtx& c, bool all);
  template <class R>
  void write_activity_rows(KindTable& t, RowCtx& c, std::span<const R> rows);
  void write_records(int64_t run, RunState& rs, const tracer::RecordBatch& b);
};

namespace {
template <class T>
int64_t as_int64(T v) {
  return static_cast<int64_t>(v);
}
}  // namespace

// Binds the column of one line of a kind's declaration (see tracer/event_kinds.h for the tags).
template <class Tag, class R, class Field>
void Store::Impl::bind_value(Stmt& s, int i, RowCtx& c, const R& r, Field field) {
  namespace k = kinds;
  if constexpr (std::is_same_v<Tag, k::Text>) {
    s.bind(i, c.text_id(field(r)));
  } else if constexpr (std::is_same_v<Tag, k::TextOrNull>) {
    s.bind(i, c.text_or_null(field(r)));
  } else if constexpr (std::is_same_v<Tag, k::GlobalTid>) {
    s.bind(i, c.global_pid + field(r));
  } else if constexpr (std::is_same_v<Tag, k::GlobalPid>) {
    s.bind(i, c.global_pid);
  } else if constexpr (std::is_same_v<Tag, k::Thread>) {
    s.bind(i, c.thread);
  } else if constexpr (std::is_same_v<Tag, k::CopyKind>) {
    s.bind(i, static_cast<int>(copy_kind_for(c.text(r.src), c.text(r.dst))));
  } else if constexpr (k::is_constant<Tag>::value) {
    s.bind(i, k::is_constant<Tag>::value_of);
  } else if constexpr (detail::is_optional_tag<Tag>::value) {
    if (const auto& v = field(r))
      s.bind(i, as_int64(*v));
    else
      s.bind_null(i);
  } else {
    s.bind(i, as_int64(field(r)));  // times, Nullable<T>, integers, bools, enums
  }
}

// Binds one row from parameter `first` (1-based) of `s`: every bound column in table order
// (runId is ?1 of every row, bound once per statement); returns the parameters bound.
template <class R>
int Store::Impl::bind_row(Stmt& s, int first, RowCtx& c, const R& r) {
  int i = first;
  R::columns([&](auto tag, std::string_view, std::string_view, auto field) {
    using Tag = typename decltype(tag)::type;
    if constexpr (std::is_same_v<Tag, kinds::ModuleClass>) {
      // `r` through a Tag-dependent cast: clang checks non-dependent code in a discarded
      // branch of the generic lambda, and rows without a ModuleClass have no `module`.
      const auto& row = static_cast<const std::conditional_t<std::is_same_v<Tag, Tag>, R, void>&>(r);
      note_module(c.run, *c.rs, c.text_id(row.module), c.text_id(field(r)));
    } else if constexpr (detail::is_bound<Tag>) {
      bind_value<Tag>(s, i++, c, r, field);
    }
  });
  return i - first;
}

// Adds rows [0, n) of kind R of `run` to row_sums; throws RowSumError naming the run,
// the table and the first row that takes a sum past 2^63 - 1 (the sums are then as before).
// A CUPTI record may end before it starts (an end CUPTI did not fill in): it adds no duration,
// as the readers count it (storage::gpu_duration_ns).
template <class R, class At>
void Store::Impl::add_row_sums(int64_t run, size_t n, At&& at) {
  if constexpr (detail::has_tag<R, kinds::Start>() && detail::has_tag<R, kinds::End>()) {
    constexpr bool cupti = R::table.starts_with("CUPTI_ACTIVITY_KIND_");
    if (n == 0) return;
    RowSums& total = row_sums[{run, R::table}];
    RowSums sums = total;
    for (size_t j = 0; j < n; ++j) {
      const R& r = at(j);
      int64_t start = 0, end = 0, bytes = 0;
      R::columns([&](auto tag, std::string_view column, std::string_view, auto field) {
        using Tag = typename decltype(tag)::type;
        if constexpr (std::is_same_v<Tag, kinds::Start>) start = as_int64(field(r));
        else if constexpr (std::is_same_v<Tag, kinds::End>) end = as_int64(field(r));
        else if constexpr (!kinds::is_column_only<Tag>) {
          if constexpr (std::is_integral_v<std::remove_cvref_t<decltype(field(r))>>)
            if (column == "bytes") bytes = as_int64(field(r));
        }
      });
      int64_t dur = 0;
      const bool dur_over = (!cupti || end > start) && (__builtin_sub_overflow(end, start, &dur) ||
                                                        __builtin_add_overflow(sums.dur, dur, &sums.dur));
      if (dur_over || __builtin_add_overflow(sums.bytes, bytes, &sums.bytes))
        throw RowSumError(
            "capture " + path.string() + ": run " + std::to_string(run) + ": the " +
            (dur_over ? "durations" : "byte counts") + " of its " + std::string(R::table) +
            " rows would sum past 2^63 - 1 with the row starting at " + std::to_string(start) + " ns, ending at " +
            std::to_string(end) + " ns" + (dur_over ? "" : ", of " + std::to_string(bytes) + " bytes") +
            ": every reader adds them up, so no capture holds such rows");
    }
    total = sums;
  }
}

// Inserts rows [0, n) of one kind (`at(j)` is row j): groups of kMultiRows through the
// multi-row statement, the remainder (when `all`) one by one. Returns the rows inserted.
template <class At>
size_t Store::Impl::insert_rows(KindTable& t, RowCtx& c, size_t n, bool all, At&& at) {
  add_row_sums<std::remove_cvref_t<decltype(at(0))>>(c.run, all ? n : n - n % kMultiRows, at);
  size_t k = 0;
  if (k + kMultiRows <= n) t.many.bind(1, c.run);  // bindings survive exec's reset
  for (; k + kMultiRows <= n; k += kMultiRows) {
    int col = 2;
    for (size_t j = 0; j < kMultiRows; ++j) col += bind_row(t.many, col, c, at(k + j));
    t.many.exec();
  }
  if (all && k < n) {
    t.one.bind(1, c.run);
    for (; k < n; ++k) {
      bind_row(t.one, 2, c, at(k));
      t.one.exec();
    }
  }
  return k;
}

// Inserts the pending rows of one host event table (all of them, or only full groups).
void Store::Impl::flush_rows(tracer::EventKind kind, RowCtx& c, bool all) {
  KindTable& t = st->host[static_cast<size_t>(kind)];
  tracer::with_kind(kind, [&](auto type) {
    using R = typename decltype(type)::type;
    const size_t done = insert_rows(t, c, t.pending.size(), all, [&](size_t j) {
      c.thread = t.pending[j]->thread;
      return t.pending[j]->get<R>();
    });
    t.pending.erase(t.pending.begin(), t.pending.begin() + static_cast<std::ptrdiff_t>(done));
  });
}

// Inserts activity records of one kind, preparing the kind's statements on its first rows.
template <class R>
void Store::Impl::write_activity_rows(KindTable& t, RowCtx& c, std::span<const R> rows) {
  if (rows.empty()) return;
  if (!t.one.raw()) prepare_kind<R>(t);
  insert_rows(t, c, rows.size(), true, [&](size_t j) -> const R& { return rows[j]; });
}

void Store::Impl::write_records(int64_t run, RunState& rs, const tracer::RecordBatch& b) {
  for (const tracer::StringDef& s : b.strings) {
    if (s.id >= rs.ids.size()) rs.ids.resize(static_cast<size_t>(s.id) + 1, -1);
    rs.ids[s.id] = intern(s.text);
  }
  for (const tracer::ThreadDef& t : b.threads) st->ins_thread.bind(1, run).bind(2, t.thread).bind(3, t.os_tid).exec();
  RowCtx c{*this, run, &rs, 0, global_pid};
  for (auto& t : st->host) t.pending.clear();
  try {
    for (const tracer::Record& r : b.records) {
      auto& pending = st->host[static_cast<size_t>(r.kind)].pending;
      pending.push_back(&r);
      if (pending.size() == kMultiRows) flush_rows(r.kind, c, false);
    }
    for (size_t kind = 0; kind < tracer::kEventKinds; ++kind) flush_rows(static_cast<tracer::EventKind>(kind), c, true);
  } catch (...) {
    for (auto& t : st->host) t.pending.clear();
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
    m.add_missing_event_tables();
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
    Stmt& ins = m.st->ins_run;  // prepared by the first run: opening a capture to read it asks for none
    if (!ins.raw())
      ins = Stmt(m.db, m.path,
                 "INSERT INTO RUNS (scenario, policy, mode, fullgraph, model, device_map, versions, status, start, "
                 "startUtcNs, globalPid, engine, label) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, info.scenario).bind(2, info.policy).bind(3, info.mode).bind(4, info.fullgraph).bind(5, info.model)
        .bind(6, device_map.dump()).bind(7, versions.dump()).bind(8, static_cast<int>(tracer::RunStatus::Incomplete))
        .bind(9, info.start_ns ? info.start_ns : events::now_ns()).bind(10, utc_now_ns()).bind(11, m.global_pid)
        .bind(12, info.engine);
    if (info.label.empty()) ins.bind_null(13); else ins.bind(13, info.label);
    ins.exec();
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

void Store::write_activity(const tracer::ActivityBatch& b) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  if (!m.run_exists(b.run_id))
    throw std::invalid_argument("write_activity: no run " + std::to_string(b.run_id) + " in capture " +
                                m.path.string());
  const int64_t run = b.run_id;
  Impl::RowCtx c{m, run, nullptr, 0, b.pid ? *b.pid * 0x1000000 : m.global_pid};
  m.in_transaction([&] {
#define HS_WRITE_ACTIVITY_(Type, Row, rows, ...) m.write_activity_rows(m.st->rows, c, b.rows);
    HS_ACTIVITY_KINDS(HS_WRITE_ACTIVITY_)
#undef HS_WRITE_ACTIVITY_
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

void Store::set_metadata(std::string_view name, std::string_view value) {
  for (std::string_view own : {kSchemaVersionKey, kProductVersionKey, std::string_view("HOOKSCOPE_TIME_DOMAIN"),
                               std::string_view("HOOKSCOPE_FINALIZED"),
                               std::string_view("HOOKSCOPE_SQLITE_VERSION")})
    if (name == own) throw std::invalid_argument("set_metadata: " + std::string(name) + " is written by the store itself");
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  m.in_transaction([&] {
    Stmt del(m.db, m.path, "DELETE FROM META_DATA_EXPORT WHERE name = ?");
    del.bind(1, name).exec();
    Stmt ins(m.db, m.path, "INSERT INTO META_DATA_EXPORT (name, value) VALUES (?, ?)");
    ins.bind(1, name).bind(2, value).exec();
  });
}

void Store::set_run_cell(int64_t run, const std::string& scenario, const std::string& policy, const std::string& mode,
                         bool fullgraph, const std::string& model) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  m.in_transaction([&] {
    Stmt up(m.db, m.path, "UPDATE RUNS SET scenario = ?, policy = ?, mode = ?, fullgraph = ?, model = ? WHERE id = ?");
    up.bind(1, scenario).bind(2, policy).bind(3, mode).bind(4, fullgraph ? 1 : 0).bind(5, model).bind(6, run).exec();
    if (sqlite3_changes(m.db) == 0)
      throw std::invalid_argument("set_run_cell: no run " + std::to_string(run) + " in capture " + m.path.string());
  });
}

void Store::set_run_engine(int64_t run, const std::string& engine) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  m.in_transaction([&] {
    Stmt up(m.db, m.path, "UPDATE RUNS SET engine = ? WHERE id = ?");
    up.bind(1, engine).bind(2, run).exec();
    if (sqlite3_changes(m.db) == 0)
      throw std::invalid_argument("set_run_engine: no run " + std::to_string(run) + " in capture " + m.path.string());
  });
}

void Store::set_run_versions(int64_t run, const nlohmann::json& versions) {
  if (!versions.is_object())
    throw std::invalid_argument("set_run_versions: versions must be a JSON object, got: " + versions.dump());
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.require_open();
  m.in_transaction([&] {
    Stmt up(m.db, m.path, "UPDATE RUNS SET versions = ? WHERE id = ?");
    up.bind(1, versions.dump()).bind(2, run).exec();
    if (sqlite3_changes(m.db) == 0)
      throw std::invalid_argument("set_run_versions: no run " + std::to_string(run) + " in capture " + m.path.string());
  });
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
             "INSERT INTO COMPILE_RESULTS (runId, region_count, disabled_scope_entries, recompiles, fullgraph_ok, error, "
             "break_reasons) VALUES (?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, run).bind(2, r.region_count).bind(3, r.disabled_scope_entries).bind(4, r.recompiles)
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
    detail::exec(m.db, m.path, index_sql(), "building the indexes");
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
