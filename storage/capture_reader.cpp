#include "storage/capture_reader.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "storage/bounded_json.h"
#include "storage/btree_pages.h"
#include "storage/event_tables.h"
#include "storage/sqlite_util.h"

namespace hs::storage {

namespace fs = std::filesystem;
using detail::Stmt;

namespace {
/// Prepared statements of one connection that no query is using, by SQL text. Parsing is most
/// of the cost of a short query, and readers run the same few dozen per run of a capture.
/// `mu` serialises the connection: it is opened SQLITE_OPEN_NOMUTEX (SQLite's own mutex, taken
/// at every sqlite3_column_* call, was a seventh of reading a large run), and a query holds `mu`
/// from its preparation to its end, as do the reader's caches (one lock: a query's loop may
/// fill a cache).
struct StmtCache {
  sqlite3* db = nullptr;
  std::recursive_mutex mu;
  std::multimap<std::string, sqlite3_stmt*, std::less<>> idle;
  void finalize_all() {
    for (auto& [sql, s] : idle) sqlite3_finalize(s);
    idle.clear();
  }
};

/// The connection's lock, taken before a query's statement exists and given back after it is
/// handed back (a base of Query, so it is constructed first and destroyed last).
struct ConnectionLock {
  std::unique_lock<std::recursive_mutex> held;
};

/// A statement of the cache for one query: prepared the first time its SQL is run, borrowed by
/// one query at a time (a second query of the same text meanwhile prepares its own), reset and
/// handed back at the end of the query. Holds the connection's lock throughout. Errors as Stmt's.
class Query : private ConnectionLock, public Stmt {
 public:
  Query(StmtCache& cache, const fs::path& path, std::string_view sql)
      : ConnectionLock{std::unique_lock<std::recursive_mutex>(cache.mu)},
        Stmt(take(cache, path, sql)),
        cache_(cache),
        sql_(sql) {}
  ~Query() {
    sqlite3_stmt* s = release();
    if (!s) return;
    sqlite3_reset(s);  // its result repeats an error step() has already thrown
    sqlite3_clear_bindings(s);
    cache_.idle.emplace(std::move(sql_), s);
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

 private:
  static Stmt take(StmtCache& cache, const fs::path& path, std::string_view sql) {
    if (auto it = cache.idle.find(sql); it != cache.idle.end()) {
      sqlite3_stmt* s = it->second;
      cache.idle.erase(it);
      return Stmt(cache.db, path, s);
    }
    return Stmt(cache.db, path, sql);
  }
  StmtCache& cache_;
  std::string sql_;
};
}  // namespace

/// A private copy of a WAL capture the reader may not touch: removed when its last reader
/// (the one that made it, or a sibling) closes.
struct SnapshotDir {
  fs::path dir;
  ~SnapshotDir() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

/// Where one run's rows of one table lie: their count and the rowids of the first and last.
struct RunSpan {
  int64_t rows = 0, first_rowid = 0, last_rowid = 0;
};
/// What one pass over the pages of the tables check_rows checks found.
struct PagePass {
  bool every_table = true;                 ///< every checked table was read so (else none is proven)
  std::unordered_set<int64_t> suspect;     ///< runs with a row check_rows may refuse
  /// Per table read so whose runs lie in disjoint rowid ranges: each run's span.
  std::map<std::string, std::unordered_map<int64_t, RunSpan>, std::less<>> spans;
};

struct CaptureReader::Db : StmtCache {  // the caches below are guarded by StmtCache::mu
  std::shared_ptr<const std::vector<std::string>> strings;  ///< StringIds by id, loaded on first use
  std::map<std::string, std::string, std::less<>> select_sql;  ///< per event table, for this file's columns
  std::map<std::string, std::string, std::less<>> select_columns;  ///< per event table: its read columns
  std::shared_ptr<SnapshotDir> snapshot;  ///< set when reading a private snapshot
  /// One pass over the checked tables' pages (page_pass), made at PRAGMA data_version
  /// `pass_version`; nullopt when the file is not one to read so.
  std::optional<PagePass> pass;
  int64_t pass_version = -1;
  bool pass_made = false;
  std::string target;  ///< what sqlite3_open_v2 opens (the file, a URI, the snapshot's copy)
  int flags = SQLITE_OPEN_READONLY;
  int busy_timeout_ms = 2000;
  int64_t page_read_min_rows = 256;
  ~Db() {
    finalize_all();
    if (db) sqlite3_close_v2(db);
  }
};

namespace {
/// True when the file's header says WAL journal mode (bytes 18 and 19 == 2).
bool wal_mode(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  char h[20] = {};
  return f.read(h, sizeof h) && std::string_view(h, 16) == std::string_view("SQLite format 3\0", 16) && h[18] == 2 &&
         h[19] == 2;
}

/// "file:" URI of a path (RFC 3986 escaping of what SQLite's URI parser treats specially).
std::string file_uri(const fs::path& p) {
  std::string out = "file:";
  for (unsigned char c : fs::absolute(p).string()) {
    if (c == '%' || c == '?' || c == '#' || c < 0x21 || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

/// A JSON column hookscope writes, read as written or, when it is not JSON, as `fallback`
/// (hookscope never writes such a value). One nested past kMaxJsonDepth or longer than
/// kMaxJsonBytes is a damaged file: CaptureError naming the file, `where` (the run or row) and
/// `column` (TABLE.column).
nlohmann::json parse_json(const std::string& text, nlohmann::json fallback, const fs::path& path,
                          const std::string& where, std::string_view column) {
  try {
    return parse_json_bounded(text, "capture " + path.string() + ": " + where + ": " + std::string(column));
  } catch (const JsonError& e) {
    if (e.kind() == JsonError::Kind::Invalid) return fallback;
    throw CaptureError(path, std::string(e.what()) + "; the file is damaged");
  }
}
}  // namespace

CaptureReader::CaptureReader(fs::path path, ReaderOptions options) : path_(std::move(path)), db_(std::make_unique<Db>()) {
  std::error_code ec;
  if (!fs::exists(path_, ec))  // "no such file" only when there is none: a loop of links or a folder we cannot search says so
    throw CaptureError(path_, "cannot open capture " + path_.string() + ": " +
                                  (!ec ? std::string("no such file")
                                   : ec == std::errc::too_many_symbolic_link_levels ? std::string("a loop of symbolic links")
                                                                                    : ec.message()));
  if (!fs::is_regular_file(path_, ec))
    throw CaptureError(path_, "not a hookscope capture: " + path_.string() + " (not a regular file)");
  // A closed capture is one rollback-journal file: opened read-only, nothing is written. A
  // capture still being written, or left by a killed process, is in WAL mode: SQLite reads
  // its -wal through a -shm index it creates beside the file. Where that would touch anything
  // the reader must not (no -wal: it would create one; a folder or -shm we cannot write), read
  // a private snapshot instead.
  std::string& target = db_->target;
  int& flags = db_->flags;
  target = path_.string();
  db_->busy_timeout_ms = options.busy_timeout_ms;
  db_->page_read_min_rows = options.page_read_min_rows;
  bool missing_wal = false;
  if (wal_mode(path_)) {
    const fs::path wal = path_.string() + "-wal", shm = path_.string() + "-shm";
    const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
    if (!fs::exists(wal, ec)) {
      missing_wal = true;  // only what was checkpointed into the main file is there to read
      target = file_uri(path_) + "?immutable=1";
      flags |= SQLITE_OPEN_URI;
    } else if (access(dir.c_str(), W_OK) != 0 || (fs::exists(shm, ec) && access(shm.c_str(), W_OK) != 0)) {
      std::string tmpl = (fs::temp_directory_path() / "hookscope-reader-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) throw CaptureError(path_, "cannot make a snapshot folder for " + path_.string());
      db_->snapshot = std::make_shared<SnapshotDir>();
      db_->snapshot->dir = tmpl;
      const fs::path copy = db_->snapshot->dir / path_.filename();
      fs::copy_file(path_, copy, ec);
      if (!ec) fs::copy_file(wal, copy.string() + "-wal", ec);
      if (ec)
        throw CaptureError(path_, "cannot snapshot " + path_.string() + " (and its -wal) to read it: " + ec.message());
      target = copy.string();
    }
  }
  open_connection();
  try {
    schema_version_ = detail::check_capture(db_->db, path_);
  } catch (const CaptureError& e) {
    if (!missing_wal) throw;
    throw CaptureError(path_, std::string(e.what()) + "; it is in WAL mode and its write-ahead log " + path_.string() +
                                  "-wal is missing (copy the capture together with its -wal and -shm files)");
  }
}

void CaptureReader::open_connection() {
  const int rc = sqlite3_open_v2(db_->target.c_str(), &db_->db, db_->flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) detail::fail(path_, db_->db, rc, "opening");
  sqlite3_extended_result_codes(db_->db, 1);
  sqlite3_busy_timeout(db_->db, db_->busy_timeout_ms);
}

CaptureReader::CaptureReader(const CaptureReader& parent, Sibling)
    : path_(parent.path_), db_(std::make_unique<Db>()), schema_version_(parent.schema_version_) {
  auto strings = parent.string_table(-1);  // loaded once, shared
  std::lock_guard<std::recursive_mutex> lock(parent.db_->mu);
  db_->strings = std::move(strings);
  db_->select_sql = parent.db_->select_sql;
  db_->select_columns = parent.db_->select_columns;
  db_->snapshot = parent.db_->snapshot;
  db_->target = parent.db_->target;
  db_->flags = parent.db_->flags;
  db_->busy_timeout_ms = parent.db_->busy_timeout_ms;
  db_->page_read_min_rows = parent.db_->page_read_min_rows;
  open_connection();
}

std::unique_ptr<CaptureReader> CaptureReader::sibling() const {
  return std::unique_ptr<CaptureReader>(new CaptureReader(*this, Sibling{}));
}

CaptureReader::~CaptureReader() = default;

const std::string& SharedText::empty_string() noexcept {
  static const std::string empty;
  return empty;
}

std::map<std::string, std::string> CaptureReader::metadata() const {
  std::map<std::string, std::string> out;
  Query q(*db_, path_, "SELECT name, value FROM META_DATA_EXPORT");
  while (q.step()) out[q.text(0)] = q.text(1);
  return out;
}

bool CaptureReader::finalized() const {
  Query q(*db_, path_, "SELECT value FROM META_DATA_EXPORT WHERE name = 'HOOKSCOPE_FINALIZED'");
  return q.step() && q.text(0) == "1";
}

std::vector<std::string> CaptureReader::indexes() const {
  std::vector<std::string> out;
  Query q(*db_, path_, "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name");
  while (q.step()) out.push_back(q.text(0));
  return out;
}

namespace {
constexpr std::string_view kRunColumns =
    "SELECT id, scenario, policy, mode, fullgraph, model, device_map, versions, status, error, start, end, "
    "droppedRecords, results, engine, label FROM RUNS";

// RUNS.results: a JSON object (empty text: none yet). Anything else is a damaged capture, named
// with its run rather than read as "no results".
nlohmann::json results_json(const std::string& text, const fs::path& path, int64_t run) {
  if (text.empty()) return nlohmann::json::object();
  const std::string where = "capture " + path.string() + ": run " + std::to_string(run) + ": RUNS.results";
  nlohmann::json j;
  try {
    j = parse_json_bounded(text, where);
  } catch (const JsonError& e) {
    if (e.kind() != JsonError::Kind::Invalid) throw CaptureError(path, std::string(e.what()) + "; the file is damaged");
    j = nlohmann::json(nlohmann::json::value_t::discarded);
  }
  if (j.is_discarded() || !j.is_object())
    throw CaptureError(path, where + " is not a JSON object (" +
                                 (j.is_discarded() ? "not valid JSON" : std::string("a ") + j.type_name()) +
                                 "); the file is damaged");
  return j;
}

RunRecord read_run(const Stmt& q, const fs::path& path) {
  RunRecord r;
  r.id = q.int64(0);
  r.scenario = q.text(1);
  r.policy = q.text(2);
  r.mode = q.text(3);
  r.fullgraph = q.int64(4) != 0;
  r.model = q.text(5);
  const std::string run = "run " + std::to_string(r.id);
  r.device_map = parse_json(q.text(6), nlohmann::json::object(), path, run, "RUNS.device_map");
  r.versions = parse_json(q.text(7), nlohmann::json::object(), path, run, "RUNS.versions");
  const int64_t status = q.int64(8);  // the ids of ENUM_RUN_STATUS
  if (status < 0 || status > static_cast<int64_t>(tracer::RunStatus::Failed))
    throw CaptureError(path, "capture " + path.string() + ": run " + std::to_string(r.id) + ": RUNS.status is " +
                                 std::to_string(status) + ", not a run status (0 incomplete, 1 complete, 2 failed); the file is damaged");
  r.status = static_cast<tracer::RunStatus>(status);
  r.error = q.text(9);
  r.start_ns = q.int64(10);
  r.end_ns = q.opt_int64(11);
  r.dropped_records = q.int64(12);
  r.results = results_json(q.text(13), path, r.id);
  r.engine = q.text(14);
  r.label = q.text(15);
  return r;
}
}  // namespace

std::vector<RunRecord> CaptureReader::runs() const {
  std::vector<RunRecord> out;
  Query q(*db_, path_, std::string(kRunColumns) + " ORDER BY id");
  while (q.step()) out.push_back(read_run(q, path_));
  return out;
}

RunRecord CaptureReader::run(int64_t id) const {
  Query q(*db_, path_, std::string(kRunColumns) + " WHERE id = ?");
  q.bind(1, id);
  if (!q.step()) throw std::out_of_range("no run " + std::to_string(id) + " in capture " + path_.string());
  return read_run(q, path_);
}

void CaptureReader::check_rows(int64_t run) const {
  // Every event kind with times (its declaration says which also have an end and a byte
  // count), plus DIAGNOSTICS, which is not an event kind (its start may be NULL: a diagnostic
  // tied to no time). CUPTI's records (the CUPTI_ACTIVITY_KIND_* tables) may end before they
  // start (CUPTI can hand over a record whose end is 0, not filled in), and such a GPU capture
  // must still open: their durations are summed as gpu_duration_ns counts them. The page pass
  // does not look at them (checked_kind), so they are always checked here.
  struct Timed {
    std::string_view table;
    bool end, bytes, null_start, cupti;
  };
  static const std::vector<Timed> kTables = [] {
    std::vector<Timed> out;
    detail::for_each_kind([&](auto kind) {
      using K = typename decltype(kind)::type;
      if constexpr (detail::has_tag<K, kinds::Start>())
        out.push_back({K::table, detail::has_tag<K, kinds::End>(), detail::has_column_named<K>("bytes"), false,
                       K::table.starts_with("CUPTI_ACTIVITY_KIND_")});
    });
    out.push_back({"DIAGNOSTICS", false, false, true, false});
    return out;
  }();
  // Times within [-2^62, 2^62) ns (146 years each way): any difference of two fits in int64.
  const std::string in_range = " BETWEEN -4611686018427387904 AND 4611686018427387903";
  const bool proven = rows_proven(run);  // the event tables: one pass over the pages found them whole
  for (const Timed& t : kTables) {
    if (proven && !t.null_start && !t.cupti) continue;
    if (!has_table(t.table)) continue;
    // Why a row is not one hookscope writes ('' when it is one), the first reason that applies.
    std::string why = "CASE";
    if (t.null_start) why += " WHEN start IS NULL THEN ''";  // a diagnostic tied to no time
    why += " WHEN typeof(start) != 'integer' THEN 'its start is not an integer'"
           " WHEN start NOT" + in_range + " THEN 'its start lies outside [-2^62, 2^62) ns'";
    if (t.end)
      why += " WHEN typeof(end) != 'integer' THEN 'its end is not an integer'"
             " WHEN end NOT" + in_range + " THEN 'its end lies outside [-2^62, 2^62) ns'" +
             (t.cupti ? "" : " WHEN end < start THEN 'it ends before it starts'");
    if (t.bytes)
      why += " WHEN typeof(bytes) != 'integer' THEN 'its byte count is not an integer'"
             " WHEN bytes < 0 THEN 'its byte count is negative'";
    why += " ELSE '' END";
    const std::string table(t.table);
    Query q(*db_, path_, "SELECT count(*), min(rowid) FROM " + table + " WHERE runId = ?1 AND (" + why + ") != ''");
    q.bind(1, run);
    if (q.step() && q.int64(0) > 0) {
      const int64_t n = q.int64(0), rowid = q.int64(1);
      Query first(*db_, path_,
                  "SELECT quote(start), " + std::string(t.end ? "quote(end)" : "NULL") + ", " +
                      (t.bytes ? "quote(bytes)" : "NULL") + ", " + why + " FROM " + table + " WHERE rowid = ?");
      first.bind(1, rowid);
      std::string row = "rowid " + std::to_string(rowid), reason;
      if (first.step()) {
        row += ": start " + first.text(0).substr(0, 80);
        if (t.end) row += ", end " + first.text(1).substr(0, 80);
        if (t.bytes) row += ", bytes " + first.text(2).substr(0, 80);
        reason = first.text(3);
      }
      throw CaptureError(path_, "capture " + path_.string() + ": run " + std::to_string(run) + ": " +
                                    std::to_string(n) + " row" + (n == 1 ? "" : "s") + " of " + table +
                                    " that no capture writes; the first (" + row + ") " + reason +
                                    ": the file was edited or is damaged");
    }
    // Every row is in range; their durations and byte counts must also sum within int64, since
    // stats and report add them up (any subset's sum is then within it too).
    if (!t.end) continue;  // instants: nothing adds them up
    const std::string sums =
        std::string(t.cupti ? "sum(max(end - start, 0)), " : "sum(end - start), ") + (t.bytes ? "sum(bytes)" : "0");
    try {
      Query total(*db_, path_, "SELECT " + sums + " FROM " + table + " WHERE runId = ?");
      total.bind(1, run);
      total.step();
    } catch (const CaptureError& e) {
      if (std::string_view(e.what()).find("integer overflow") == std::string_view::npos) throw;
      throw CaptureError(path_, "capture " + path_.string() + ": run " + std::to_string(run) + ": the " +
                                    (t.bytes ? "durations or byte counts" : "durations") +
                                    " of " + table + " sum past 2^63, which no capture writes: the file was edited or "
                                    "is damaged");
    }
  }
}

// String columns hold StringIds ids; they are resolved in memory against one copy of the table
// (a subquery per row made loading 10M events several times slower). A capture still being
// written may add strings: an id past the copy reloads it.
namespace {
class Strings {
 public:
  explicit Strings(std::function<std::shared_ptr<const std::vector<std::string>>(int64_t)> load)
      : load_(std::move(load)) {}
  /// The string of column `col` ("" for NULL or an id the file does not define).
  template <class Src>
  std::string operator()(const Src& q, int col) {
    if (q.is_null(col)) return {};
    const int64_t id = q.int64(col);
    if (id < 0) return {};
    if (!v_) v_ = load_(-1);  // first use
    if (static_cast<size_t>(id) >= v_->size() && !reloaded_) {
      v_ = load_(id);  // once per read: an id the file does not define must not reload it per row
      reloaded_ = true;
    }
    return static_cast<size_t>(id) < v_->size() ? (*v_)[static_cast<size_t>(id)] : std::string();
  }

 private:
  std::function<std::shared_ptr<const std::vector<std::string>>(int64_t)> load_;
  std::shared_ptr<const std::vector<std::string>> v_;
  bool reloaded_ = false;
};
}  // namespace

std::shared_ptr<const std::vector<std::string>> CaptureReader::string_table(int64_t need) const {
  std::lock_guard<std::recursive_mutex> lock(db_->mu);
  if (db_->strings && (need < 0 || static_cast<size_t>(need) < db_->strings->size())) return db_->strings;
  auto v = std::make_shared<std::vector<std::string>>();
  // The Store numbers strings 1, 2, 3, ...: an id past the table's row count (counted in the
  // same statement, so a capture being written cannot grow the table between the two) is a
  // damaged file, never a vector sized by it.
  Query q(*db_, path_, "SELECT id, value, (SELECT count(*) FROM StringIds) FROM StringIds ORDER BY id");
  while (q.step()) {
    const int64_t id = q.int64(0), rows = q.int64(2);
    if (id < 0) continue;  // not an id this schema writes
    if (id > rows)
      throw CaptureError(path_, "capture " + path_.string() + ": StringIds has id " + std::to_string(id) + " in a table of " +
                                    std::to_string(rows) + " strings (ids run 1.." + std::to_string(rows) +
                                    "); the file is damaged");
    if (static_cast<size_t>(id) >= v->size()) v->resize(static_cast<size_t>(id) + 1);
    (*v)[static_cast<size_t>(id)] = q.text(1);
  }
  db_->strings = std::move(v);
  return db_->strings;
}

// Small and aggregate queries resolve strings in SQL.
#define HS_SV(col) "(SELECT value FROM StringIds WHERE id = " col ")"
#define HS_STR(col, alias) HS_SV(col) " AS " alias

namespace {
/// The table of an event kind, as its declaration (tracer/event_kinds.h) names it.
template <template <class> class Kind>
constexpr std::string_view table_of = Kind<kinds::Emitted>::table;
}  // namespace

bool CaptureReader::has_table(std::string_view table) const {
  Query q(*db_, path_, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  q.bind(1, table);
  if (q.step()) return true;
  // The event tables of the first capture format: every hookscope capture has them, empty or
  // not, so one that is gone is damage, not "no events". Kinds added since (CPU_OPS, CUPTI
  // overheads, the TORCH_TRACE tables) may be absent from a capture written before them, and read
  // as none. Which kinds were there first is history, not something a declaration says: the list
  // is frozen (a kind added from now on never joins it); the names are the declarations'.
  static constexpr std::string_view kEveryCapture[] = {
      table_of<kinds::HookSpan>,       table_of<kinds::WeightSwap>,     table_of<kinds::Transfer>,
      table_of<kinds::DisabledScope>,  table_of<kinds::ModuleCompute>,  table_of<kinds::Region>,
      table_of<kinds::GraphBreak>,     table_of<kinds::GenerationStep>, table_of<kinds::MemoryCounter>,
      table_of<kinds::ClockSample>,    table_of<kinds::KernelActivity>, table_of<kinds::MemcpyActivity>,
      table_of<kinds::MemsetActivity>, table_of<kinds::RuntimeActivity>, table_of<kinds::DriverActivity>,
      table_of<kinds::SyncActivity>,   table_of<kinds::ExternalCorrelation>};
  for (std::string_view t : kEveryCapture)
    if (t == table)
      throw CaptureError(path_, "capture " + path_.string() + " has no table " + std::string(table) +
                                    ", which every hookscope capture has; the file is damaged");
  return false;
}

namespace {
/// True for the lines of a kind that the reader selects: columns with a member in the row.
template <class Tag>
constexpr bool is_read = kinds::has_column<Tag> && !std::is_empty_v<Stored::member<Tag>>;

template <class Row>
constexpr bool timed_kind = detail::has_tag<Row, kinds::Start>();

/// The kinds check_rows checks: with times, not CUPTI's.
template <class Row>
constexpr bool checked_kind = timed_kind<Row> && !Row::table.starts_with("CUPTI_ACTIVITY_KIND_");

/// `SELECT <read columns> FROM <table> WHERE runId = ? ORDER BY start, rowid` (rowid alone for
/// kinds without times). A column the file's table lacks (a capture written before the column
/// was added, e.g. HOOK_EVENTS.externalId) is selected as NULL: its member reads 0, "" or nullopt.
template <class Row>
std::string select_columns_of(const std::set<std::string, std::less<>>& present) {
  std::string columns;
  Row::columns([&](auto tag, std::string_view column, std::string_view, auto) {
    if constexpr (is_read<typename decltype(tag)::type>)
      columns += (columns.empty() ? "" : ", ") + (present.count(column) ? std::string(column) : std::string("NULL"));
  });
  return columns;
}

template <class Row>
std::string select_sql(const std::set<std::string, std::less<>>& present) {
  const bool timed = detail::has_tag<Row, kinds::Start>();
  return "SELECT " + select_columns_of<Row>(present) + " FROM " + std::string(Row::table) +
         " WHERE runId = ? ORDER BY " + (timed ? "start, rowid" : "rowid");
}

// Reads column `col` into the row member of one line (see tracer/event_kinds.h for the tags).
template <class Tag, class Src, class Str, class Member>
void read_value(const Src& q, int col, Str& str, Member& out) {
  if constexpr (kinds::is_text<Tag>) {
    out = str(q, col);
  } else if constexpr (std::is_same_v<Tag, kinds::GlobalTid>) {
    out = q.int64(col) & 0xFFFFFF;  // globalTid = pid * 0x1000000 + tid
  } else if constexpr (detail::is_optional_tag<Tag>::value) {
    if (q.is_null(col))
      out.reset();
    else
      out = static_cast<typename Member::value_type>(q.int64(col));
  } else if constexpr (std::is_same_v<Member, bool>) {
    out = q.int64(col) != 0;
  } else {
    out = static_cast<Member>(q.int64(col));  // NULL (a Nullable<T> left empty) reads 0
  }
}
}  // namespace

template <class Row>
std::vector<Row> CaptureReader::read_rows(int64_t run) const {
  std::vector<Row> out;
  if (!has_table(Row::table)) return out;
  if constexpr (checked_kind<Row>)
    if (auto rows = read_rows_from_pages<Row>(run)) return std::move(*rows);
  std::string sql;
  {
    std::lock_guard<std::recursive_mutex> lock(db_->mu);
    auto it = db_->select_sql.find(Row::table);
    if (it == db_->select_sql.end()) {
      std::set<std::string, std::less<>> present;
      Query info(*db_, path_, "SELECT name FROM pragma_table_info(?)");
      info.bind(1, Row::table);
      while (info.step()) present.insert(info.text(0));
      it = db_->select_sql.emplace(std::string(Row::table), select_sql<Row>(present)).first;
    }
    sql = it->second;
  }
  Query q(*db_, path_, sql);
  q.bind(1, run);
  Strings str([this](int64_t need) { return string_table(need); });
  while (q.step()) {
    Row& r = out.emplace_back();
    int col = 0;
    Row::columns([&](auto tag, std::string_view, std::string_view, auto field) {
      using Tag = typename decltype(tag)::type;
      if constexpr (is_read<Tag>) read_value<Tag>(q, col++, str, field(r));
    });
  }
  return out;
}

#define HS_READER_METHOD_(Type, Row, rows, ...) \
  std::vector<Row> CaptureReader::rows(int64_t run) const { return read_rows<Row>(run); }
HS_HOST_EVENT_KINDS(HS_READER_METHOD_)
HS_ACTIVITY_KINDS(HS_READER_METHOD_)
#undef HS_READER_METHOD_

RunRows CaptureReader::run_rows(int64_t run) const {
  RunRows out;
  out.run = this->run(run);
#define HS_READ_ALL_(Type, Row, rows, ...) out.rows = rows(run);
  HS_HOST_EVENT_KINDS(HS_READ_ALL_)
  HS_ACTIVITY_KINDS(HS_READ_ALL_)
#undef HS_READ_ALL_
  return out;
}

// ------------------------------------------------------------------ shared rows

namespace {
/// Resolves string columns to SharedText in one copy of StringIds (as Strings does), and adds
/// each table it used to `held`.
class SharedStrings {
 public:
  SharedStrings(std::function<std::shared_ptr<const std::vector<std::string>>(int64_t)> load, StringTables& held)
      : load_(std::move(load)), held_(held) {}
  template <class Src>
  SharedText operator()(const Src& q, int col) {
    if (q.is_null(col)) return {};
    const int64_t id = q.int64(col);
    if (id < 0) return {};
    if (!v_) use(load_(-1));
    if (static_cast<size_t>(id) >= v_->size() && !reloaded_) {
      use(load_(id));  // once per read, as Strings
      reloaded_ = true;
    }
    return static_cast<size_t>(id) < v_->size() ? SharedText((*v_)[static_cast<size_t>(id)]) : SharedText();
  }

 private:
  void use(std::shared_ptr<const std::vector<std::string>> v) {
    v_ = std::move(v);
    if (std::find(held_.begin(), held_.end(), v_) == held_.end()) held_.push_back(v_);
  }
  std::function<std::shared_ptr<const std::vector<std::string>>(int64_t)> load_;
  StringTables& held_;
  std::shared_ptr<const std::vector<std::string>> v_;
  bool reloaded_ = false;
};


/// Where a row's start, end and bytes are among the selected columns (−1: none).
struct CheckedColumns {
  int start = -1, end = -1, bytes = -1;
};
template <class Row>
constexpr CheckedColumns checked_columns() {
  CheckedColumns c;
  int col = 0;
  Row::columns([&](auto tag, std::string_view column, std::string_view, auto) {
    using Tag = typename decltype(tag)::type;
    if constexpr (is_read<Tag>) {
      if (std::is_same_v<Tag, kinds::Start>) c.start = col;
      if (std::is_same_v<Tag, kinds::End>) c.end = col;
      if (column == "bytes") c.bytes = col;
      ++col;
    }
  });
  return c;
}

/// What check_rows refuses, looked for in each row as it is read: one flag, and the sums.
class RowCheck {
 public:
  explicit RowCheck(CheckedColumns c) : c_(c) {}
  template <class Src>
  void see(const Src& s) {
    const int64_t start = time(s, c_.start);
    if (c_.end >= 0) {
      const int64_t end = time(s, c_.end);
      int64_t dur = 0;  // a time out of range is already bad, but its difference must not overflow
      bad_ |= end < start || __builtin_sub_overflow(end, start, &dur) ||
              __builtin_add_overflow(durations_, dur, &durations_);
    }
    if (c_.bytes >= 0) {
      const int64_t b = s.int64(c_.bytes);
      bad_ |= s.type(c_.bytes) != SQLITE_INTEGER || b < 0 || __builtin_add_overflow(bytes_, b, &bytes_);
    }
  }
  bool bad() const { return bad_; }

 private:
  template <class Src>
  int64_t time(const Src& s, int col) {
    constexpr int64_t kLimit = int64_t{1} << 62;  // [-2^62, 2^62), as check_rows
    const int64_t v = s.int64(col);
    bad_ |= s.type(col) != SQLITE_INTEGER || v < -kLimit || v >= kLimit;
    return v;
  }
  CheckedColumns c_;
  bool bad_ = false;
  int64_t durations_ = 0, bytes_ = 0;
};

/// A statement's row, read as the readers read a row.
struct StmtRow {
  const Stmt& q;
  int64_t int64(int col) const { return q.int64(col); }
  bool is_null(int col) const { return q.is_null(col); }
  int type(int col) const { return sqlite3_column_type(q.raw(), col); }
};

/// A record read from its page (detail::PageFile), its selected columns by their index in the
/// table (−1: a column the file's table lacks, NULL).
struct PageRow {
  const detail::Record& r;
  const std::vector<int>& cid;
  int64_t int64(int col) const { return cid[col] < 0 ? 0 : r.int64(cid[col]); }
  bool is_null(int col) const { return cid[col] < 0 || r.is_null(cid[col]); }
  int type(int col) const { return cid[col] < 0 ? SQLITE_NULL : r.type(cid[col]); }
};

/// The start of a timed row (an instant's time).
template <class Row>
int64_t start_of(const Row& r) {
  int64_t v = 0;
  Row::columns([&](auto tag, std::string_view, std::string_view, auto field) {
    if constexpr (std::is_same_v<typename decltype(tag)::type, kinds::Start>) v = field(r);
  });
  return v;
}

/// Rows read by rowid into the reader's order: by start, rows with the same start by rowid.
template <class Row>
void sort_by_start(std::vector<Row>& rows) {
  if (std::is_sorted(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return start_of(a) < start_of(b); }))
    return;
  std::vector<std::pair<int64_t, uint32_t>> keys(rows.size());  // (start, rowid order): unique, so sort is stable
  for (size_t i = 0; i < rows.size(); ++i) keys[i] = {start_of(rows[i]), static_cast<uint32_t>(i)};
  std::sort(keys.begin(), keys.end());
  // In place, cycle by cycle (no second copy of millions of rows): position p takes row keys[p].
  constexpr uint32_t kPlaced = UINT32_MAX;
  for (size_t p = 0; p < keys.size(); ++p) {
    if (keys[p].second == kPlaced || keys[p].second == p) continue;
    Row held = std::move(rows[p]);
    size_t at = p;
    while (keys[at].second != p) {
      const size_t from = keys[at].second;
      rows[at] = std::move(rows[from]);
      keys[at].second = kPlaced;
      at = from;
    }
    rows[at] = std::move(held);
    keys[at].second = kPlaced;
  }
}

/// Adds rows read to `progress` every kBatch rows, and stops the read when it is cancelled.
class ProgressTicker {
 public:
  static constexpr int64_t kBatch = 4096;
  explicit ProgressTicker(ReadProgress* p) : p_(p) {}
  ~ProgressTicker() { flush(); }
  void tick() {
    if (++n_ < kBatch) return;
    flush();
    if (p_ && p_->cancel.load(std::memory_order_relaxed)) throw ReadCancelled("read cancelled");
  }
  void flush() {
    if (p_ && n_) p_->rows.fetch_add(n_, std::memory_order_relaxed);
    n_ = 0;
  }

 private:
  ReadProgress* p_;
  int64_t n_ = 0;
};

/// Reads the row `q` is on into `r`.
template <class Row, class Src, class Str>
void read_row(const Src& q, Str& str, Row& r) {
  int col = 0;
  Row::columns([&](auto tag, std::string_view, std::string_view, auto field) {
    using Tag = typename decltype(tag)::type;
    if constexpr (is_read<Tag>) read_value<Tag>(q, col++, str, field(r));
  });
}
}  // namespace

template <class Row>
std::string CaptureReader::select_columns() const {
  std::lock_guard<std::recursive_mutex> lock(db_->mu);
  auto it = db_->select_columns.find(Row::table);
  if (it == db_->select_columns.end()) {
    std::set<std::string, std::less<>> present;
    Query info(*db_, path_, "SELECT name FROM pragma_table_info(?)");
    info.bind(1, Row::table);
    while (info.step()) present.insert(info.text(0));
    it = db_->select_columns.emplace(std::string(Row::table), select_columns_of<Row>(present)).first;
  }
  return it->second;
}

/// [first, end) rowids of the run's rows in the kind's table, found by binary search on rowid,
/// right when the table's runIds never decrease along its rowids (runs written one after the
/// other); read_shared checks the rows it finds there against the plan's count.
template <class Row>
std::pair<int64_t, int64_t> CaptureReader::run_rowids(int64_t run) const {
  const std::string table(Row::table);
  int64_t lo = 0, hi = 0;
  {
    Query q(*db_, path_, "SELECT min(rowid), max(rowid) FROM " + table);
    q.step();
    lo = q.int64(0);
    hi = q.int64(1);
    // Exclusive; a table ending at rowid 2^63 - 1 (a hand-edited file) ends there, which the
    // page reader takes as "to the table's end" (storage/btree_pages.h).
    if (hi < INT64_MAX) ++hi;
  }
  Query probe(*db_, path_, "SELECT runId FROM " + table + " WHERE rowid >= ?1 ORDER BY rowid LIMIT 1");
  // The first rowid x in [lo, hi] whose next row (rowid >= x) has a runId of at least `id`.
  auto first_at_least = [&](int64_t id) {
    int64_t a = lo, b = hi;
    while (a < b) {
      const int64_t mid = a + static_cast<int64_t>((static_cast<uint64_t>(b) - static_cast<uint64_t>(a)) / 2);
      probe.reset();
      probe.bind(1, mid);
      if (probe.step() && probe.int64(0) < id)
        a = mid + 1;
      else
        b = mid;
    }
    return a;
  };
  return {first_at_least(run), run == INT64_MAX ? hi : first_at_least(run + 1)};
}

template <class Row>
ReadPlan CaptureReader::plan_shared(int64_t run) const {
  ReadPlan p;
  const std::string table(Row::table);
  if (!has_table(Row::table)) {
    p.rows = 0;
    return p;
  }
  auto count = [&](const std::string& where) {
    Query q(*db_, path_, "SELECT count(*) FROM " + table + where);
    if (!where.empty()) q.bind(1, run);
    q.step();
    return q.int64(0);
  };
  if constexpr (!timed_kind<Row>) {
    p.rows = count(" WHERE runId = ?1");
    p.way = p.rows ? ReadPlan::Way::Ordered : ReadPlan::Way::None;
    return p;
  } else {
    bool indexed = false;
    {
      Query q(*db_, path_, "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?");
      q.bind(1, table + "_runId_start");
      indexed = q.step();
    }
    p.way = ReadPlan::Way::Scan;
    if (!indexed) return p;  // a capture not finalized: every row visited anyway
    // The index's ends: one query each (SQLite seeks for a lone min() or max() only).
    std::optional<int64_t> ends[2];
    for (int i = 0; i < 2; ++i) {
      Query q(*db_, path_, std::string(i ? "SELECT max(runId) FROM " : "SELECT min(runId) FROM ") + table);
      if (q.step() && !q.is_null(0)) ends[i] = q.int64(0);
    }
    if (!ends[0] || !ends[1] || run < *ends[0] || run > *ends[1]) {
      p.rows = 0;
      p.way = ReadPlan::Way::None;
    } else if (*ends[0] == *ends[1]) {
      p.rows = count("");  // every row is the run's: the b-tree's count, no row visited
    } else {
      p.rows = count(" WHERE runId = ?1");
      p.bounded = true;
      std::tie(p.first_rowid, p.end_rowid) = run_rowids<Row>(run);
    }
    if (p.way == ReadPlan::Way::None) return p;
    for (const char* f : {"min", "max"}) {  // each one seek in the index
      Query e(*db_, path_, "SELECT " + std::string(f) + "(start) FROM " + table + " WHERE runId = ?1");
      e.bind(1, run);
      if (e.step() && !e.is_null(0)) (*f == 'm' && f[1] == 'i' ? p.min_start : p.max_start) = e.int64(0);
    }
    return p;
  }
}

namespace {
/// Ends a read transaction however its scope is left.
struct ReadTransaction {
  sqlite3* db;
  const fs::path& path;
  bool began;  // false inside one already open (it is the outer one's to end)
  ReadTransaction(sqlite3* d, const fs::path& p) : db(d), path(p), began(sqlite3_get_autocommit(d) != 0) {
    if (began) detail::exec(db, path, "BEGIN", "reading");
  }
  ~ReadTransaction() {
    if (began) sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  }
};
}  // namespace

namespace {
/// Where a table's records hold what kind `Row` reads, for detail::PageFile.
struct PageLayout {
  uint32_t root = 0;     ///< the table's b-tree
  int columns = 0;       ///< the table's column count
  std::vector<int> cid;  ///< each read column's index in the records (−1: the table lacks it, NULL)
  int run_cid = -1;      ///< runId's
};

/// The layout of kind `Row`'s table, or nullopt when its records are not to be read from the
/// pages (no such table, WITHOUT ROWID, a rowid alias or a column default, no runId). Called
/// with the reader's lock held.
template <class Row>
std::optional<PageLayout> page_layout(StmtCache& db, const fs::path& path) {
  PageLayout l;
  {
    Query q(db, path, "SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?");
    q.bind(1, Row::table);
    if (!q.step() || q.text(1).find("WITHOUT ROWID") != std::string::npos) return std::nullopt;
    l.root = static_cast<uint32_t>(q.int64(0));
  }
  std::map<std::string, int, std::less<>> cid_of;
  {
    Query q(db, path, "SELECT cid, name, pk, dflt_value IS NOT NULL FROM pragma_table_info(?)");
    q.bind(1, Row::table);
    while (q.step()) {
      if (q.int64(2) != 0 || q.int64(3) != 0) return std::nullopt;  // a rowid alias or a default: SQLite knows them
      cid_of[q.text(1)] = static_cast<int>(q.int64(0));
      l.columns = std::max(l.columns, static_cast<int>(q.int64(0)) + 1);
    }
  }
  Row::columns([&](auto tag, std::string_view column, std::string_view, auto) {
    if constexpr (is_read<typename decltype(tag)::type>) {
      auto it = cid_of.find(column);
      l.cid.push_back(it == cid_of.end() ? -1 : it->second);
    }
  });
  const auto run_col = cid_of.find("runId");
  if (run_col == cid_of.end()) return std::nullopt;
  l.run_cid = run_col->second;
  return l;
}

/// One pass over a checked kind's records: RowCheck per run, and where each run's rows lie.
/// Adds each run it cannot prove to `pass.suspect` and the runs' spans to `pass.spans` (when
/// no two runs' rowid ranges overlap); false when the table is not one to read so.
template <class Row>
bool check_pages(StmtCache& db, const fs::path& path, detail::PageFile& file, PagePass& pass) {
  const std::optional<PageLayout> layout = page_layout<Row>(db, path);
  if (!layout) return false;
  struct Seen {
    RunSpan span;
    RowCheck check;
  };
  std::unordered_map<int64_t, Seen> runs;
  int64_t last_run = 0;
  Seen* last = nullptr;  // runs lie in long stretches of rowids: one lookup per stretch
  bool foreign_run_id = false;
  file.scan(layout->root, layout->columns, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
            [&](int64_t rowid, const detail::Record& r) {
              if (r.type(layout->run_cid) != SQLITE_INTEGER) {  // SQL's runId = N may still match it
                foreign_run_id = true;
                return;
              }
              const int64_t run = r.int64(layout->run_cid);
              if (!last || run != last_run) {
                auto [it, added] = runs.try_emplace(run, Seen{{0, rowid, rowid}, RowCheck(checked_columns<Row>())});
                last = &it->second;
                last_run = run;
              }
              ++last->span.rows;
              last->span.last_rowid = rowid;
              last->check.see(PageRow{r, layout->cid});
            });
  if (foreign_run_id) return false;
  std::vector<RunSpan> by_first;
  for (const auto& [run, seen] : runs) {
    if (seen.check.bad()) pass.suspect.insert(run);
    by_first.push_back(seen.span);
  }
  std::sort(by_first.begin(), by_first.end(), [](const RunSpan& a, const RunSpan& b) { return a.first_rowid < b.first_rowid; });
  bool disjoint = true;
  for (size_t i = 1; i < by_first.size(); ++i) disjoint &= by_first[i - 1].last_rowid < by_first[i].first_rowid;
  if (disjoint) {
    auto& spans = pass.spans[std::string(Row::table)];
    for (const auto& [run, seen] : runs) spans.emplace(run, seen.span);
  }
  return true;
}
}  // namespace

void CaptureReader::check_same_file(const detail::PageFile& file) const {
  // A file renamed over the path after SQLite opened it: its pages are not the ones SQLite reads.
  int moved = 0;
  struct stat st {};
  if (sqlite3_file_control(db_->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK || moved ||
      ::stat(db_->target.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_dev) != file.device() ||
      static_cast<uint64_t>(st.st_ino) != file.inode())
    throw detail::PageFormatError("not the file SQLite has open");
}

const PagePass* CaptureReader::page_pass() const {
  if (db_->snapshot || (db_->flags & SQLITE_OPEN_URI)) return nullptr;  // WAL captures, as scan_pages
  std::lock_guard<std::recursive_mutex> lock(db_->mu);
  int64_t version = 0;
  {
    Query lock_taken(*db_, path_, "SELECT count(*) FROM sqlite_master");  // the shared lock, before any page is read
    lock_taken.step();
    Query q(*db_, path_, "PRAGMA data_version");  // changes when another connection commits
    q.step();
    version = q.int64(0);
  }
  if (db_->pass_made && version == db_->pass_version) return db_->pass ? &*db_->pass : nullptr;
  db_->pass_made = true;
  db_->pass_version = version;
  db_->pass.reset();
  try {
    detail::PageFile file(db_->target);
    check_same_file(file);
    PagePass pass;
    // A table every capture has but this file lacks is check_rows' error (through SQLite), not
    // this pass's: the pass leaves it and proves nothing.
    auto present = [&](std::string_view table) {
      try {
        return has_table(table);
      } catch (const CaptureError&) {
        pass.every_table = false;
        return false;
      }
    };
#define HS_CHECK_PAGES_(Type, Row, rows, ...) \
  if constexpr (checked_kind<Row>)            \
    if (present(Row::table)) pass.every_table &= check_pages<Row>(*db_, path_, file, pass);
    HS_HOST_EVENT_KINDS(HS_CHECK_PAGES_)
    HS_ACTIVITY_KINDS(HS_CHECK_PAGES_)
#undef HS_CHECK_PAGES_
    db_->pass = std::move(pass);
  } catch (const detail::PageFormatError&) {
  }
  return db_->pass ? &*db_->pass : nullptr;
}

bool CaptureReader::rows_proven(int64_t run) const {
  std::lock_guard<std::recursive_mutex> lock(db_->mu);
  const ReadTransaction transaction(db_->db, path_);
  const PagePass* pass = page_pass();
  return pass && pass->every_table && !pass->suspect.contains(run);
}

template <class Row>
std::optional<std::vector<Row>> CaptureReader::read_rows_from_pages(int64_t run) const {
  if (db_->snapshot || (db_->flags & SQLITE_OPEN_URI)) return std::nullopt;  // WAL: no pass, no transaction per read
  std::lock_guard<std::recursive_mutex> lock(db_->mu);
  if (db_->pass_made) {
    // What SQLite reads at least as cheaply (few rows, none, runs interleaved) goes to it
    // without the pass being checked against the file: SQLite's rows are right either way.
    if (!db_->pass) return std::nullopt;
    const auto table = db_->pass->spans.find(Row::table);
    if (table == db_->pass->spans.end()) return std::nullopt;
    const auto found = table->second.find(run);
    if (found == table->second.end() || found->second.rows < db_->page_read_min_rows) return std::nullopt;
  }
  const ReadTransaction transaction(db_->db, path_);  // the pass and the read under one shared lock
  const PagePass* pass = page_pass();
  if (!pass) return std::nullopt;
  const auto table = pass->spans.find(Row::table);
  if (table == pass->spans.end()) return std::nullopt;
  const auto found = table->second.find(run);
  if (found == table->second.end()) return std::vector<Row>{};  // the pass saw every row: none is the run's
  const RunSpan span = found->second;
  if (span.rows < db_->page_read_min_rows) return std::nullopt;
  const std::optional<PageLayout> layout = page_layout<Row>(*db_, path_);
  if (!layout) return std::nullopt;
  std::vector<Row> out;
  out.reserve(static_cast<size_t>(span.rows));
  try {
    detail::PageFile file(db_->target);
    check_same_file(file);
    Strings str([this](int64_t need) { return string_table(need); });
    const int64_t end = span.last_rowid == std::numeric_limits<int64_t>::max() ? span.last_rowid : span.last_rowid + 1;
    file.scan(layout->root, layout->columns, span.first_rowid, end, [&](int64_t, const detail::Record& r) {
      if (r.type(layout->run_cid) == SQLITE_INTEGER && r.int64(layout->run_cid) == run)
        read_row(PageRow{r, layout->cid}, str, out.emplace_back());
    });
  } catch (const detail::PageFormatError&) {
    return std::nullopt;
  }
  if (static_cast<int64_t>(out.size()) != span.rows) return std::nullopt;
  sort_by_start(out);
  return out;
}

template <class Row>
bool CaptureReader::scan_pages(int64_t run, const ReadPlan& plan, StringTables& tables, ReadProgress* progress,
                               std::vector<Row>& out, bool& bad) const {
  if (db_->snapshot || (db_->flags & SQLITE_OPEN_URI)) return false;  // WAL captures: their pages are not all in the file
  std::lock_guard<std::recursive_mutex> lock(db_->mu);
  const ReadTransaction transaction(db_->db, path_);  // SQLite's shared lock: no writer commits meanwhile
  const std::optional<PageLayout> layout = page_layout<Row>(*db_, path_);
  if (!layout) return false;
  // Named, not a structured binding: clang 14 (the fuzz build's) cannot capture one.
  const uint32_t root = layout->root;
  const int columns = layout->columns, run_cid = layout->run_cid;
  const std::vector<int>& cid = layout->cid;
  try {
    detail::PageFile file(db_->target);
    check_same_file(file);
    SharedStrings str([this](int64_t need) { return string_table(need); }, tables);
    RowCheck check(checked_columns<Row>());
    {
      ProgressTicker ticker(progress);
      file.scan(root, columns, plan.bounded ? plan.first_rowid : std::numeric_limits<int64_t>::min(),
                plan.bounded ? plan.end_rowid : std::numeric_limits<int64_t>::max(),
                [&](int64_t, const detail::Record& r) {
                  if (r.type(run_cid) != SQLITE_INTEGER || r.int64(run_cid) != run) return;
                  const PageRow row{r, cid};
                  read_row(row, str, out.emplace_back());
                  if constexpr (checked_kind<Row>) check.see(row);
                  ticker.tick();
                });
    }
    bad = check.bad();
    return true;
  } catch (const detail::PageFormatError&) {
    if (progress) progress->rows.fetch_sub(static_cast<int64_t>(out.size()), std::memory_order_relaxed);
    out.clear();
    return false;
  }
}

template <class Row>
void CaptureReader::scan_shared(int64_t run, const ReadPlan& plan, StringTables& tables, ReadProgress* progress,
                                std::vector<Row>& out) const {
  const bool scan = plan.way == ReadPlan::Way::Scan;
  if (plan.rows > 0) out.reserve(static_cast<size_t>(plan.rows));
  if (bool bad = false; scan && scan_pages(run, plan, tables, progress, out, bad)) {
    if (bad) check_rows(run);  // throws its CaptureError naming the table, row and reason
    return;
  }
  std::string sql = "SELECT " + select_columns<Row>() + " FROM " + std::string(Row::table);
  if (!scan)
    sql += std::string(" WHERE runId = ?1 ORDER BY ") + (timed_kind<Row> ? "start, rowid" : "rowid");
  else if (plan.bounded)
    sql += " WHERE rowid >= ?2 AND rowid < ?3 AND +runId = ?1";  // '+': not through the index
  else
    sql += " WHERE +runId = ?1";
  bool bad = false;
  {
    Query q(*db_, path_, sql);
    q.bind(1, run);
    if (scan && plan.bounded) q.bind(2, plan.first_rowid).bind(3, plan.end_rowid);
    SharedStrings str([this](int64_t need) { return string_table(need); }, tables);
    ProgressTicker ticker(progress);
    RowCheck check(checked_columns<Row>());
    while (q.step()) {
      const StmtRow row{q};
      read_row(row, str, out.emplace_back());
      if constexpr (checked_kind<Row>) check.see(row);
      ticker.tick();
    }
    bad = check.bad();
  }
  if (bad) check_rows(run);  // throws its CaptureError naming the table, row and reason
}

template <class Row>
std::vector<Row> CaptureReader::read_shared(int64_t run, const ReadPlan& plan, StringTables& tables,
                                            ReadProgress* progress) const {
  std::vector<Row> out;
  if (plan.way == ReadPlan::Way::None) return out;
  scan_shared(run, plan, tables, progress, out);
  if (plan.way != ReadPlan::Way::Scan) return out;
  if (plan.bounded && static_cast<int64_t>(out.size()) != plan.rows) {
    // Some of the run's rows lie outside the rowids found (runs written interleaved): in order
    // through the index instead.
    if (progress) progress->rows.fetch_sub(static_cast<int64_t>(out.size()), std::memory_order_relaxed);
    out.clear();
    ReadPlan ordered = plan;
    ordered.way = ReadPlan::Way::Ordered;
    scan_shared(run, ordered, tables, progress, out);
    return out;
  }
  if constexpr (timed_kind<Row>) sort_by_start(out);
  return out;
}

#define HS_SHARED_INSTANCES_(Type, Row, rows, ...)                                                          \
  template ReadPlan CaptureReader::plan_shared<Shared##Row>(int64_t) const;                                 \
  template std::vector<Shared##Row> CaptureReader::read_shared<Shared##Row>(int64_t, const ReadPlan&,       \
                                                                            StringTables&, ReadProgress*) const;
HS_HOST_EVENT_KINDS(HS_SHARED_INSTANCES_)
HS_ACTIVITY_KINDS(HS_SHARED_INSTANCES_)
#undef HS_SHARED_INSTANCES_

SharedRunRows CaptureReader::shared_run_rows(int64_t run, ReadProgress* progress) const {
  SharedRunRows out;
  out.run = this->run(run);
#define HS_READ_SHARED_(Type, Row, rows, ...) \
  out.rows = read_shared<Shared##Row>(run, plan_shared<Shared##Row>(run), out.string_tables, progress);
  HS_HOST_EVENT_KINDS(HS_READ_SHARED_)
  HS_ACTIVITY_KINDS(HS_READ_SHARED_)
#undef HS_READ_SHARED_
  return out;
}

std::vector<ModuleRow> CaptureReader::modules(int64_t run) const {
  std::vector<ModuleRow> out;
  Query q(*db_, path_,
         "SELECT " HS_STR("moduleId", "m") ", coalesce(" HS_SV("classId") ", '') FROM MODULES WHERE runId = ? "
         "ORDER BY m");
  q.bind(1, run);
  while (q.step()) out.push_back({q.text(0), q.text(1)});
  return out;
}

std::vector<ThreadRow> CaptureReader::threads(int64_t run) const {
  std::vector<ThreadRow> out;
  Query q(*db_, path_, "SELECT threadId, tid FROM THREADS WHERE runId = ? ORDER BY threadId");
  q.bind(1, run);
  while (q.step()) out.push_back({static_cast<uint32_t>(q.int64(0)), q.int64(1)});
  return out;
}

std::vector<int64_t> CaptureReader::activity_pids(int64_t run, std::string_view table) const {
  bool has_tid = false;  // a table of a timed kind whose declaration has a globalTid column
  detail::for_each_kind([&](auto kind) {
    using K = typename decltype(kind)::type;
    if constexpr (detail::has_tag<K, kinds::GlobalTid>() && detail::has_tag<K, kinds::Start>())
      has_tid = has_tid || K::table == table;
  });
  if (!has_tid)
    throw std::invalid_argument("activity_pids: no globalTid in table " + std::string(table));
  std::vector<int64_t> out;
  if (!has_table(table)) return out;
  // The row order of select_sql for a timed kind.
  Query q(*db_, path_, "SELECT globalTid FROM " + std::string(table) + " WHERE runId = ? ORDER BY start, rowid");
  q.bind(1, run);
  while (q.step()) out.push_back(q.int64(0) >> 24);
  return out;
}

std::vector<TransferSum> CaptureReader::transfer_sums(int64_t run) const {
  std::vector<TransferSum> out;
  Query q(*db_, path_,
         "SELECT " HS_STR("src", "s") ", " HS_STR("dst", "d") ", copyKind, emulated, count(*), sum(bytes), "
         "sum(end - start) FROM TRANSFERS WHERE runId = ? AND bytes > 0 GROUP BY src, dst, copyKind, emulated "
         "ORDER BY s, d");
  q.bind(1, run);
  while (q.step())
    out.push_back({q.text(0), q.text(1), static_cast<tracer::MemcpyKind>(q.int64(2)), q.int64(3) != 0, q.int64(4),
                   q.int64(5), q.int64(6)});
  return out;
}

std::pair<int64_t, int64_t> CaptureReader::empty_transfers(int64_t run) const {
  Query q(*db_, path_, "SELECT count(*), coalesce(sum(end - start), 0) FROM TRANSFERS WHERE runId = ? AND bytes = 0");
  q.bind(1, run);
  q.step();
  return {q.int64(0), q.int64(1)};
}

std::vector<WeightSwapSum> CaptureReader::weight_swap_sums(int64_t run) const {
  std::vector<WeightSwapSum> out;
  Query q(*db_, path_,
         "SELECT onload, source, count(*), sum(bytes), sum(end - start) FROM WEIGHT_SWAPS WHERE runId = ? "
         "GROUP BY onload, source ORDER BY onload DESC, source");
  q.bind(1, run);
  while (q.step())
    out.push_back({q.int64(0) != 0, static_cast<events::WeightSource>(q.int64(1)), q.int64(2), q.int64(3),
                   q.int64(4)});
  return out;
}

std::vector<std::pair<int64_t, int64_t>> CaptureReader::cpu_op_spans(int64_t run, std::string_view name) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!has_table(table_of<kinds::CpuOpActivity>)) return out;
  Query q(*db_, path_,
          "SELECT start, end FROM CPU_OPS WHERE runId = ? AND nameId = (SELECT id FROM StringIds WHERE value = ?) "
          "ORDER BY start, rowid");
  q.bind(1, run);
  q.bind(2, name);
  while (q.step()) out.emplace_back(q.int64(0), q.int64(1));
  return out;
}

#undef HS_STR
#undef HS_SV

std::vector<CompileResultRow> CaptureReader::compile_results(std::optional<int64_t> run) const {
  std::vector<CompileResultRow> out;
  Query q(*db_, path_,
         "SELECT runId, region_count, disabled_scope_entries, recompiles, fullgraph_ok, error, break_reasons "
         "FROM COMPILE_RESULTS WHERE (?1 IS NULL OR runId = ?1) ORDER BY runId, rowid");
  q.bind(1, run);
  while (q.step()) {
    CompileResultRow r;
    r.run_id = q.int64(0);
    r.result.region_count = q.int64(1);
    r.result.disabled_scope_entries = q.int64(2);
    r.result.recompiles = q.int64(3);
    r.result.fullgraph_ok = q.int64(4) != 0;
    r.result.error = q.text(5);
    r.result.break_reasons = parse_json(q.text(6), nlohmann::json::array(), path_, "run " + std::to_string(r.run_id),
                                        "COMPILE_RESULTS.break_reasons");
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<DiagnosticRow> CaptureReader::diagnostics(std::optional<int64_t> run) const {
  std::vector<DiagnosticRow> out;
  Query q(*db_, path_,
         "SELECT id, runId, start, severity, source, text FROM DIAGNOSTICS "
         "WHERE (?1 IS NULL OR runId = ?1 OR runId IS NULL) ORDER BY id");
  q.bind(1, run);
  while (q.step())
    out.push_back({q.int64(0), q.opt_int64(1), q.opt_int64(2), static_cast<Severity>(q.int64(3)), q.text(4),
                   q.text(5)});
  return out;
}

std::vector<DeviceRow> CaptureReader::devices(std::optional<int64_t> run) const {
  std::vector<DeviceRow> out;
  Query q(*db_, path_,
         "SELECT id, runId, name, kind, backing, label, max_memory, gpuId FROM DEVICES "
         "WHERE (?1 IS NULL OR runId = ?1 OR runId IS NULL) ORDER BY id");
  q.bind(1, run);
  while (q.step()) {
    DeviceRow d;
    d.id = q.int64(0);
    d.info.run_id = q.opt_int64(1);
    d.info.name = q.text(2);
    d.info.kind = static_cast<DeviceKind>(q.int64(3));
    d.info.backing = q.text(4);
    d.info.label = q.text(5);
    d.info.max_memory = q.opt_int64(6);
    d.info.gpu_id = q.opt_int64(7);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<GpuInfo> CaptureReader::gpus() const {
  std::vector<GpuInfo> out;
  Query q(*db_, path_,
         "SELECT id, name, busLocation, uuid, chipName, isDiscrete, totalMemory, memoryBandwidth, l2CacheSize, "
         "clockRate, smCount, computeMajor, computeMinor, asyncEngines, maxShmemPerBlock, threadsPerWarp, "
         "maxWarpsPerSm FROM TARGET_INFO_GPU ORDER BY id");
  while (q.step()) {
    GpuInfo g;
    g.id = q.int64(0);
    g.name = q.text(1);
    g.bus_location = q.text(2);
    g.uuid = q.text(3);
    g.chip_name = q.text(4);
    g.is_discrete = q.int64(5) != 0;
    g.total_memory = q.int64(6);
    g.memory_bandwidth = q.int64(7);
    g.l2_cache_size = q.int64(8);
    g.clock_rate = q.int64(9);
    g.sm_count = q.int64(10);
    g.compute_major = q.int64(11);
    g.compute_minor = q.int64(12);
    g.async_engines = q.int64(13);
    g.max_shmem_per_block = q.int64(14);
    g.threads_per_warp = q.int64(15);
    g.max_warps_per_sm = q.int64(16);
    out.push_back(std::move(g));
  }
  return out;
}

int64_t CaptureReader::count(std::string_view table, std::optional<int64_t> run) const {
  // Only names that are tables of this file (no SQL built from arbitrary input).
  std::set<std::string> tables;
  {
    Query q(*db_, path_, "SELECT name FROM sqlite_master WHERE type = 'table'");
    while (q.step()) tables.insert(q.text(0));
  }
  const std::string t(table);
  if (!tables.count(t))
    throw CaptureError(path_, "count: no table '" + t + "' in capture " + path_.string());
  if (!run) {
    Query q(*db_, path_, "SELECT count(*) FROM \"" + t + "\"");
    q.step();
    return q.int64(0);
  }
  Query q(*db_, path_, "SELECT count(*) FROM \"" + t + "\" WHERE runId = ?");
  q.bind(1, *run);
  q.step();
  return q.int64(0);
}

}  // namespace hs::storage
