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
// several threads: its queries take turns on the connection (one lock, held for a query's length).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
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
};

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
  /// Checks run `run`'s timed rows in every event table hookscope's tracer and importers write
  /// (not CUPTI's): each start (and end) an integer in [-2^62, 2^62) ns, no end before its
  /// start, no byte count that is negative or not an integer, and the durations (and bytes) of
  /// each table summing within int64. No capture writes other rows; reading them gave negative
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
  std::filesystem::path path_;
  std::unique_ptr<Db> db_;
  int schema_version_ = 0;
};

}  // namespace hs::storage
