// CaptureReader: read-only queries over a capture file, for reports and the UI (storage
// readers feed the ui views).
//
// The file is opened with SQLITE_OPEN_READONLY and never modified. A capture still being
// written, or left by a killed process, is in WAL mode and is read through its `-wal`; SQLite
// then keeps a `-shm` index beside it, as any reader does — unless the folder or that `-shm`
// is not writable, in which case a private snapshot (the file and its -wal, copied to a
// temporary folder removed when the reader closes) is read instead. A WAL-mode file whose
// `-wal` is missing is opened immutable (nothing created): what was checkpointed is read, and
// an error says the -wal is missing when that is not a capture. Opening checks the format first and throws a
// `CaptureError` naming the file when it is not a hookscope capture ("not a hookscope
// capture: FILE (no META_DATA_EXPORT / schema version)" or "(not an SQLite database: ...)"),
// has a newer schema version, is corrupt, locked or missing. Query failures also throw
// `CaptureError`. Times are host steady-clock ns, sizes bytes. One reader may be used from
// several threads: its queries take turns on the connection (one lock, held for a query's
// length, so a long read makes every other query of that reader wait for it). A thread that
// reads much while others query (the viewer's background load) reads through a `sibling()`:
// a second connection to the same file, with a lock of its own.
//
// Two forms of a run's rows: `RunRows` (each string its own std::string; reports, exports) and
// `SharedRunRows` (each string a `SharedText` into the capture's StringIds, read once: the
// viewer's timeline of millions of rows), read kind by kind with `plan_shared` / `read_shared`.
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/schema.h"
#include "tracer/event_kinds.h"
#include "tracer/event_writer.h"
#include "tracer/events.h"
#include "tracer/gpu_activity.h"

namespace hs::storage {

struct ReaderOptions {
  /// How long to wait for a lock held by a writer before failing (ms). WAL readers normally
  /// never wait; a rollback-journal writer in the middle of a commit can make them.
  int busy_timeout_ms = 2000;
  /// A run with at least this many rows in an event table is read from a closed capture's
  /// pages (sorted by start after: report, stats and export of runs of millions of events);
  /// fewer, through SQLite's (runId, start) index, which costs less for them.
  int64_t page_read_min_rows = 256;
};

/// A CUPTI record's duration (ns) as every reader counts and sums it: end - start, or 0 where
/// the record ends before it starts (an end CUPTI did not fill in). Within int64 for the rows
/// check_rows accepts.
constexpr int64_t gpu_duration_ns(int64_t start_ns, int64_t end_ns) {
  return end_ns > start_ns ? end_ns - start_ns : 0;
}

struct RunRecord {
  int64_t id = 0;
  std::string scenario, policy, mode, model;
  bool fullgraph = false;
  nlohmann::json device_map, versions;  ///< objects
  tracer::RunStatus status = tracer::RunStatus::Incomplete;
  std::string error;
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns;  ///< empty while incomplete and never ended
  int64_t dropped_records = 0;
  nlohmann::json results;  ///< object: whatever the app stored with set_run_result
  std::string engine;      ///< "libtorch", "torch", "import" ("" in a file written without one)
  std::string label;       ///< the user's name for the run ("" = none)
};

/// Whether the run's events come from a trace of another process (the torch engine's driver, or
/// an import) rather than from hookscope's own engine: then the capture-wide DEVICES rows (the
/// LibTorch engine's accelerators, emulated or real) are not its devices — only the rows of its
/// own and the devices its events name are.
inline bool recorded_from_trace(const RunRecord& run) { return run.engine == "torch" || run.engine == "import"; }

/// The form the reader returns: strings owned, plus the columns the store derived that mean
/// something in a row — `thread` (host events' recording thread) and a transfer's
/// `copy_kind`. Other derived columns (runId, globalPid, nsys-only ones) and a module's class
/// (read it with `modules(run)`) are absent (empty members).
template <class Tag>
struct stored_member {
  using type = typename kinds::member_of<Tag, std::string>::type;
};
template <>
struct stored_member<kinds::ModuleClass> {
  using type = kinds::Absent<kinds::ModuleClass>;
};
template <>
struct stored_member<kinds::Thread> {
  using type = uint32_t;
};
template <>
struct stored_member<kinds::CopyKind> {
  using type = tracer::MemcpyKind;
};
struct Stored {
  template <class Tag>
  using member = typename stored_member<Tag>::type;
};

// One row type per event kind, e.g. `HookEventRow` {hook, phase, module, start_ns, end_ns,
// thread}, `TransferRow` {src, dst, bytes, emulated, module ("" = unknown), start_ns, end_ns,
// thread, copy_kind}, `KernelRow`, `MemcpyRow`, `CpuOpRow`: the fields of the kind's
// declaration in tracer/event_kinds.h (instants have `time_ns`; activity records `os_tid` for
// globalTid).
#define HS_ROW_TYPE_(Type, Row, ...) using Row = kinds::Type##Row<Stored>;
HS_HOST_EVENT_KINDS(HS_ROW_TYPE_)
HS_ACTIVITY_KINDS(HS_ROW_TYPE_)
#undef HS_ROW_TYPE_

/// A string of a capture's StringIds table, shared by every row that names it: 8 bytes, no
/// allocation, read as a `const std::string&` or a std::string_view (implicitly) or through the
/// few members below.
/// It points into a string table the reader loaded once; whoever keeps rows holding it keeps
/// that table (`SharedRunRows::string_tables`). Default: "".
class SharedText {
 public:
  SharedText() noexcept : s_(&empty_string()) {}
  explicit SharedText(const std::string& s) noexcept : s_(&s) {}
  const std::string& str() const noexcept { return *s_; }
  operator const std::string&() const noexcept { return *s_; }
  operator std::string_view() const noexcept { return *s_; }
  std::string_view view() const noexcept { return *s_; }
  bool empty() const noexcept { return s_->empty(); }
  size_t size() const noexcept { return s_->size(); }
  const char* c_str() const noexcept { return s_->c_str(); }
  const char* data() const noexcept { return s_->data(); }
  char operator[](size_t i) const noexcept { return (*s_)[i]; }
  size_t find(std::string_view what, size_t pos = 0) const noexcept { return s_->find(what, pos); }
  size_t find(char c, size_t pos = 0) const noexcept { return s_->find(c, pos); }
  size_t rfind(char c, size_t pos = std::string::npos) const noexcept { return s_->rfind(c, pos); }
  std::string substr(size_t pos, size_t n = std::string::npos) const { return s_->substr(pos, n); }
  bool starts_with(std::string_view p) const noexcept { return s_->starts_with(p); }
  bool ends_with(std::string_view p) const noexcept { return s_->ends_with(p); }
  int compare(std::string_view o) const noexcept { return s_->compare(o); }
  /// The same for two values read from one string table entry (one id): a key for caches of
  /// what is made from a string (labels), never compared across tables.
  const void* key() const noexcept { return s_; }

  friend bool operator==(const SharedText& a, const SharedText& b) noexcept { return a.s_ == b.s_ || *a.s_ == *b.s_; }
  friend bool operator==(const SharedText& a, std::string_view b) noexcept { return a.view() == b; }
  friend std::strong_ordering operator<=>(const SharedText& a, const SharedText& b) noexcept {
    return a.view().compare(b.view()) <=> 0;
  }
  friend std::strong_ordering operator<=>(const SharedText& a, std::string_view b) noexcept {
    return a.view().compare(b) <=> 0;
  }
  friend std::string operator+(const SharedText& a, std::string_view b) { return concat(a.view(), b); }
  friend std::string operator+(std::string_view a, const SharedText& b) { return concat(a, b.view()); }
  friend std::string operator+(const SharedText& a, const SharedText& b) { return concat(a.view(), b.view()); }
  friend std::string operator+(const SharedText& a, char b) { return concat(a.view(), std::string_view(&b, 1)); }
  friend std::ostream& operator<<(std::ostream& os, const SharedText& t) { return os << t.str(); }

 private:
  static const std::string& empty_string() noexcept;
  static std::string concat(std::string_view a, std::string_view b) {
    std::string s;
    s.reserve(a.size() + b.size());
    return s.append(a).append(b);
  }
  const std::string* s_;
};
inline void to_json(nlohmann::json& j, const SharedText& t) { j = t.str(); }

/// The form of rows read with shared strings: `Stored`'s, with SharedText for each string.
template <class Tag>
struct shared_member : stored_member<Tag> {};
template <>
struct shared_member<kinds::Text> {
  using type = SharedText;
};
template <>
struct shared_member<kinds::TextOrNull> {
  using type = SharedText;
};
struct Shared {
  template <class Tag>
  using member = typename shared_member<Tag>::type;
};
// One row type per event kind in that form: `SharedHookEventRow`, `SharedKernelRow`, ...
#define HS_SHARED_ROW_TYPE_(Type, Row, ...) using Shared##Row = kinds::Type##Row<Shared>;
HS_HOST_EVENT_KINDS(HS_SHARED_ROW_TYPE_)
HS_ACTIVITY_KINDS(HS_SHARED_ROW_TYPE_)
#undef HS_SHARED_ROW_TYPE_

/// The StringIds tables that SharedText values point into (immutable; a capture still being
/// written may need a newer one while it is read).
using StringTables = std::vector<std::shared_ptr<const std::vector<std::string>>>;

struct ModuleRow {
  std::string fqn, module_class;
};
struct ThreadRow {
  uint32_t thread;
  int64_t os_tid;
};

/// Transfers of a run that moved bytes, grouped by (src, dst, copyKind, emulated).
struct TransferSum {
  std::string src, dst;
  tracer::MemcpyKind copy_kind;
  bool emulated;
  int64_t count, bytes, total_ns;  ///< total_ns: sum of (end − start)
};
/// Weight swaps of a run grouped by (onload, source).
struct WeightSwapSum {
  bool onload;
  events::WeightSource source;
  int64_t count, bytes, total_ns;
};

struct CompileResultRow {
  int64_t run_id;
  CompileResult result;
};
struct DiagnosticRow {
  int64_t id;
  std::optional<int64_t> run_id;
  std::optional<int64_t> time_ns;
  Severity severity;
  std::string source, text;
};
struct DeviceRow {
  int64_t id;
  DeviceInfo info;
};

/// Every event row of one run: its record and one vector per kind of tracer/event_kinds.h, named
/// as the reader's method for that kind (`hook_events`, `weight_swaps`, ..., `cpu_ops`,
/// `dynamo_recompiles`), each in that method's order. What the Chrome export and the viewer's
/// timeline start from (`CaptureReader::run_rows`); a new kind is a new member by itself.
struct RunRows {
  RunRecord run;
#define HS_RUN_ROWS_MEMBER_(Type, Row, rows, ...) std::vector<Row> rows;
  HS_HOST_EVENT_KINDS(HS_RUN_ROWS_MEMBER_)
  HS_ACTIVITY_KINDS(HS_RUN_ROWS_MEMBER_)
#undef HS_RUN_ROWS_MEMBER_
};

/// RunRows in the Shared form: the same rows in the same order, strings shared, with the
/// string tables they point into.
struct SharedRunRows {
  RunRecord run;
#define HS_SHARED_RUN_ROWS_MEMBER_(Type, Row, rows, ...) std::vector<Shared##Row> rows;
  HS_HOST_EVENT_KINDS(HS_SHARED_RUN_ROWS_MEMBER_)
  HS_ACTIVITY_KINDS(HS_SHARED_RUN_ROWS_MEMBER_)
#undef HS_SHARED_RUN_ROWS_MEMBER_
  StringTables string_tables;
};

/// How far the reads of one load have come, and how to stop them, shared between the threads
/// that read and those that watch.
struct ReadProgress {
  std::atomic<int64_t> rows{0};     ///< rows read so far, added every few thousand
  std::atomic<bool> cancel{false};  ///< set: each read stops at its next few thousand rows (ReadCancelled)
};
/// What a read throws when its ReadProgress::cancel was set.
class ReadCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How `read_shared` reads one kind's rows of one run (from `plan_shared`).
struct ReadPlan {
  enum class Way {
    None,     ///< the file has no row of the run in that table (or no such table)
    Scan,     ///< the table's rows by rowid (in [first_rowid, end_rowid) when bounded), sorted after
    Ordered,  ///< one query in the kind's order (a kind without times: by rowid)
  };
  Way way = Way::None;
  int64_t rows = -1;  ///< the run's rows in the table; −1 when it is not known before reading
  /// The earliest and latest start of those rows, when the (runId, start) index says them.
  std::optional<int64_t> min_start, max_start;
  bool bounded = false;
  int64_t first_rowid = 0, end_rowid = 0;
};

struct PagePass;  // in capture_reader.cpp
namespace detail {
class PageFile;  // storage/btree_pages.h
}

class CaptureReader {
 public:
  /// Opens `path` read-only and checks it is a capture this build reads (see above).
  explicit CaptureReader(std::filesystem::path path, ReaderOptions options = {});
  ~CaptureReader();
  CaptureReader(const CaptureReader&) = delete;
  CaptureReader& operator=(const CaptureReader&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int schema_version() const { return schema_version_; }
  /// META_DATA_EXPORT as a map (EXPORT_PRODUCT_VERSION, HOOKSCOPE_SCHEMA_VERSION, ...).
  std::map<std::string, std::string> metadata() const;
  /// True once Store::finalize() ran (indexes built).
  bool finalized() const;
  /// Names of the indexes in the file (for checks).
  std::vector<std::string> indexes() const;

  /// Every run, by id. Throws CaptureError naming the file and the run when a run's
  /// RUNS.results is not a JSON object (a damaged file).
  std::vector<RunRecord> runs() const;
  /// One run. Throws std::out_of_range naming the file when there is no such run.
  RunRecord run(int64_t id) const;
  /// Checks run `run`'s timed rows in every event table: each start (and end) an integer in
  /// [-2^62, 2^62) ns, no end before its start (CUPTI's tables aside: CUPTI may leave a
  /// record's end unfilled, and such a record's duration counts as 0, gpu_duration_ns), no
  /// byte count that is negative or not an integer, and the durations (and bytes) of each
  /// table summing within int64. No capture writes other rows; reading them gave negative
  /// durations, overflowing sums and timelines drawn empty. Throws CaptureError "capture FILE:
  /// run N: K rows of TABLE that no capture writes; the first (rowid R: start S, end E) REASON:
  /// the file was edited or is damaged" (or "... the durations of TABLE sum past 2^63 ...") at
  /// the first table that fails. One pass over the run's rows of each table.
  void check_rows(int64_t run) const;

  // Events of one run, one method per kind of tracer/event_kinds.h, each returning its row
  // type: hook_events, weight_swaps, transfers, disabled_scopes, module_compute, regions,
  // graph_breaks, generation_steps, memory_counters (host events); kernels, memcpys, memsets,
  // runtime_calls, driver_calls, syncs, external_correlations, clock_samples, cpu_ops,
  // dynamo_compiles, dynamo_graph_breaks, dynamo_recompiles (activity records). Ordered by
  // start time (then insertion), or by insertion for kinds without times. A kind whose table
  // the file lacks (written before the kind existed) reads as empty.
#define HS_READER_METHOD_(Type, Row, rows, ...) std::vector<Row> rows(int64_t run) const;
  HS_HOST_EVENT_KINDS(HS_READER_METHOD_)
  HS_ACTIVITY_KINDS(HS_READER_METHOD_)
#undef HS_READER_METHOD_
  /// All of the above for run `run`, with its record. Throws as `run(id)` for an unknown run
  /// (it does not check_rows).
  RunRows run_rows(int64_t run) const;

  /// How the rows of kind `Row` (a Shared...Row) of run `run` will be read, with their count
  /// when the file says it cheaply: a finalized capture holding one run in the table (its
  /// row count: no row visited), else the run's rows counted through the (runId, start) index
  /// and their rowids bounded by a binary search on rowid; a table without that index (a
  /// capture not finalized) is scanned whole, its count unknown. A kind without times is read
  /// by one query in rowid order (counted). Throws CaptureError as the other queries.
  template <class Row>
  ReadPlan plan_shared(int64_t run) const;
  /// The rows of kind `Row` of run `run` in the Shared form, in the order of the kind's Stored
  /// reader (by start, then rowid): a table scan (each row visited once instead of through the
  /// index; a closed capture's records decoded straight from its pages, storage/btree_pages.h,
  /// else through SQLite), sorted by start after. A bounded scan that finds fewer rows than the
  /// plan counted (runs written interleaved) is read again in order through the index. The
  /// string tables the rows point into are added to `tables`. While reading, rows
  /// `check_rows` refuses are looked for (a start or end that is no integer in [-2^62, 2^62),
  /// an end before its start, bytes negative or no integer, sums past int64); when one is
  /// seen, `check_rows(run)` throws its CaptureError. With `progress`, rows read are added to
  /// it and a set `cancel` throws ReadCancelled.
  template <class Row>
  std::vector<Row> read_shared(int64_t run, const ReadPlan& plan, StringTables& tables,
                               ReadProgress* progress = nullptr) const;
  /// plan_shared then read_shared on this thread: the rows of kind `Row` (a Shared...Row) of run
  /// `run`, each distinct string held once however many rows name it (a module's name over
  /// every call of its hooks), the string tables added to `tables`. How the per-run readers
  /// (stats, report, the exports) read rows. Throws as read_shared.
  template <class Row>
  std::vector<Row> shared_rows(int64_t run, StringTables& tables) const {
    return read_shared<Row>(run, plan_shared<Row>(run), tables);
  }
  /// Every kind of run `run` in the Shared form, with its record (plan_shared + read_shared
  /// per kind, on this thread). Throws as `run(id)` for an unknown run.
  SharedRunRows shared_run_rows(int64_t run, ReadProgress* progress = nullptr) const;
  /// Another reader of the same file (the same private snapshot, when this one reads one) on
  /// a connection of its own: its queries never wait for this reader's, nor this one's for
  /// it. It starts with this reader's string table. Throws CaptureError when the file can no
  /// longer be opened.
  std::unique_ptr<CaptureReader> sibling() const;
  std::vector<ModuleRow> modules(int64_t run) const;
  std::vector<ThreadRow> threads(int64_t run) const;
  /// The process id of each of a run's rows of activity table `table` (CPU_OPS,
  /// CUPTI_ACTIVITY_KIND_RUNTIME or CUPTI_ACTIVITY_KIND_DRIVER): globalTid / 0x1000000, in the
  /// order of cpu_ops / runtime_calls / driver_calls (whose `os_tid` keeps only the tid). For an
  /// imported GPU annotation (CPU_OPS category gpu_user_annotation) it is the device's pid.
  /// Throws std::invalid_argument for another table; empty when the file lacks the table.
  std::vector<int64_t> activity_pids(int64_t run, std::string_view table) const;

  /// The run's transfers that moved bytes (bytes > 0), grouped by (src, dst, copyKind, emulated).
  std::vector<TransferSum> transfer_sums(int64_t run) const;
  /// The run's transfer calls that moved nothing (bytes = 0: a torch-engine send_to_device of
  /// tensors already where they go): how many, and their summed duration (ns). Not transfers.
  std::pair<int64_t, int64_t> empty_transfers(int64_t run) const;
  std::vector<WeightSwapSum> weight_swap_sums(int64_t run) const;
  /// The [start, end] ns of each of the run's CPU ops named exactly `name` (e.g. Dynamo's
  /// "_compile.compile_inner (dynamo_timed)"), by start; empty when the file lacks CPU_OPS.
  std::vector<std::pair<int64_t, int64_t>> cpu_op_spans(int64_t run, std::string_view name) const;

  /// Compile results of one run, or of every run when `run` is empty.
  std::vector<CompileResultRow> compile_results(std::optional<int64_t> run = std::nullopt) const;
  /// Diagnostics of one run (plus the capture-wide ones), or all when `run` is empty.
  std::vector<DiagnosticRow> diagnostics(std::optional<int64_t> run = std::nullopt) const;
  /// Devices of one run (plus the run-independent ones), or all when `run` is empty.
  std::vector<DeviceRow> devices(std::optional<int64_t> run = std::nullopt) const;
  /// TARGET_INFO_GPU rows.
  std::vector<GpuInfo> gpus() const;

  /// Row count of a table (optionally of one run). `table` must be one of this file's tables;
  /// otherwise throws CaptureError naming the file (a damaged or older capture may lack a table
  /// the caller expects, so this is the file's error, not the caller's).
  int64_t count(std::string_view table, std::optional<int64_t> run = std::nullopt) const;

 private:
  template <class Row>
  std::vector<Row> read_rows(int64_t run) const;
  /// Whether the file has `table`; throws CaptureError when it lacks one that every capture has
  /// (HOOK_EVENTS and the other event tables of the first capture format).
  bool has_table(std::string_view table) const;
  /// StringIds by id (shared, immutable); reloaded when `need` is past its end.
  std::shared_ptr<const std::vector<std::string>> string_table(int64_t need) const;
  struct Db;
  struct Sibling {};
  CaptureReader(const CaptureReader& parent, Sibling);
  /// Opens db_'s connection to db_->target (after the constructor chose it).
  void open_connection();
  /// The selected columns of kind `Row` for this file (cached per table).
  template <class Row>
  std::string select_columns() const;
  template <class Row>
  std::pair<int64_t, int64_t> run_rowids(int64_t run) const;
  /// One pass over the pages (storage/btree_pages.h) of the tables check_rows checks: what it
  /// found, made once and again after another connection commits; nullptr when the file is
  /// not one to read so. Called with db_->mu held inside a read transaction.
  const PagePass* page_pass() const;
  /// Throws detail::PageFormatError unless `file` maps the file SQLite has open (SQLite's file
  /// not moved or unlinked, and the path's inode the mapped one's): a capture renamed over the
  /// path while it was read is read through SQLite, all of it from the file SQLite opened.
  void check_same_file(const detail::PageFile& file) const;
  /// Whether the page pass found every row of run `run` in the tables check_rows checks,
  /// DIAGNOSTICS aside, as it requires. False when it did not or could not: then check_rows
  /// asks SQLite.
  bool rows_proven(int64_t run) const;
  /// read_rows of a checked kind from the file's pages: the run's rowid range as the page pass
  /// found it, decoded in place and sorted by start (then rowid), as SQLite's ordered query
  /// reads them. nullopt when the rows are to be read through SQLite: too few to pay for it,
  /// runs interleaved in the table, pages not as the format says, a count that differs.
  template <class Row>
  std::optional<std::vector<Row>> read_rows_from_pages(int64_t run) const;
  template <class Row>
  void scan_shared(int64_t run, const ReadPlan& plan, StringTables& tables, ReadProgress* progress,
                   std::vector<Row>& out) const;
  /// The scan of scan_shared from the file's pages (storage/btree_pages.h); false (nothing
  /// read) when the file is not one to read so, or its pages are not as the format says.
  template <class Row>
  bool scan_pages(int64_t run, const ReadPlan& plan, StringTables& tables, ReadProgress* progress,
                  std::vector<Row>& out, bool& bad) const;
  std::filesystem::path path_;
  std::unique_ptr<Db> db_;
  int schema_version_ = 0;
};

}  // namespace hs::storage
