// Store: the writer of a capture file (format in storage/schema.h).
//
// It implements the tracer's consumer interfaces — `tracer::EventWriter` (host events from the
// HostTracer's writer thread) and `tracer::ActivityWriter` (CUPTI records, imported traces) —
// and offers direct methods for what the app knows itself (results, devices, diagnostics,
// compile results). All methods are thread-safe (one connection behind a mutex).
//
// Durability: WAL journal, synchronous=NORMAL, one transaction per batch. A run row is written
// `incomplete` by `begin_run` and flipped to `complete` in the same transaction as its last
// batch, so a process killed at any point (SIGKILL included) leaves a file whose finished runs
// read `complete` and whose interrupted run reads `incomplete` — never a half-written run that
// looks whole. Indexes are built by `finalize()` at the end of a capture.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "storage/schema.h"
#include "tracer/event_writer.h"
#include "tracer/gpu_activity.h"

namespace hs::storage {

/// Thrown by Store::write_batch / write_activity for rows each in range whose durations or byte
/// counts would sum past 2^63 - 1 in their run's table (every reader adds them up, and
/// CaptureReader::check_rows refuses such a run): the message names the capture, the run, the
/// table and the row. How an import of such values is refused (the importers leave sums to the
/// Store).
class RowSumError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct StoreOptions {
  /// An existing capture at the path is replaced (with its -wal/-shm). A file that is not a
  /// hookscope capture is never replaced: the Store throws instead.
  bool overwrite = false;
  /// META_DATA_EXPORT.EXPORT_PRODUCT_VERSION of a new file.
  std::string product_version = "hookscope 0.1.0";
  /// How long to wait for another connection's lock before failing (ms).
  int busy_timeout_ms = 5000;
};

class Store final : public tracer::EventWriter, public tracer::ActivityWriter {
 public:
  /// Creates `path` (a new capture) or opens an existing hookscope capture to append runs.
  /// Throws CaptureError naming the file when it is not a capture ("not a hookscope capture:
  /// FILE (...)"), has a newer schema, is corrupt or locked, or cannot be created. A file that
  /// is not a capture is left untouched.
  explicit Store(std::filesystem::path path, StoreOptions options = {});
  /// Closes the file (see close()); errors are swallowed.
  ~Store() override;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& path() const;

  // --- tracer::EventWriter -------------------------------------------------------------
  /// Inserts the run as `incomplete` in its own transaction; returns RUNS.id.
  /// Throws std::invalid_argument when device_map_json / versions_json is not a JSON object.
  int64_t begin_run(const tracer::RunInfo& info) override;
  /// One transaction: new strings, threads, records, and (if `batch.end`) the run's end.
  /// Throws std::invalid_argument for an unknown run or an undefined string id, and RowSumError
  /// for rows whose durations or byte counts would sum past 2^63 - 1 in their table for the run;
  /// the batch is then not written.
  void write_batch(const tracer::RecordBatch& batch) override;

  // --- tracer::ActivityWriter ------------------------------------------------------------
  /// One transaction: every record of the batch (strings interned), and a DIAGNOSTICS warning
  /// plus RUNS.droppedRecords when the source dropped records. Throws std::invalid_argument
  /// for an unknown run, and RowSumError as write_batch does.
  void write_activity(const tracer::ActivityBatch& batch) override;

  // --- direct methods for the app --------------------------------------------------------
  /// Same as begin_run (for runs written without a HostTracer).
  int64_t add_run(const tracer::RunInfo& info) { return begin_run(info); }
  /// Ends a run written without a HostTracer: status, error, end time (0 = now).
  void end_run(int64_t run, tracer::RunStatus status, std::string_view error = {}, int64_t end_ns = 0);
  /// Merges `results` (a JSON object) into RUNS.results with RFC 7386 merge-patch semantics:
  /// keys are added or replaced, a null value removes a key. Typical keys: latency_ms,
  /// argmax_match, logits_identical, params_on_meta_after, weight_devices, graph_count,
  /// graph_break_count. Throws std::invalid_argument for an unknown run or a non-object.
  void set_run_result(int64_t run, const nlohmann::json& results);
  /// Files run `run` under another cell (RUNS scenario, policy, mode, fullgraph, model): how an
  /// import takes the cell a `hookscope export` trace names. Throws std::invalid_argument for
  /// an unknown run.
  void set_run_cell(int64_t run, const std::string& scenario, const std::string& policy, const std::string& mode,
                    bool fullgraph, const std::string& model);
  /// Sets RUNS.engine of run `run`: how an import gives a `hookscope export` trace of a torch or
  /// LibTorch run its engine back. Throws std::invalid_argument for an unknown run.
  void set_run_engine(int64_t run, const std::string& engine);
  /// Sets RUNS.versions of run `run` to `versions` (a JSON object): how a run whose stack is
  /// known only once it has run (a profiled program) records it. Throws std::invalid_argument
  /// for an unknown run or a non-object.
  void set_run_versions(int64_t run, const nlohmann::json& versions);
  /// Sets META_DATA_EXPORT row `name` to `value` (added or replaced), e.g.
  /// HOOKSCOPE_CAPTURE_SETTINGS: the capture's settings as JSON. Throws std::invalid_argument
  /// for the rows the store itself owns (schema version, finalized flag, ...).
  void set_metadata(std::string_view name, std::string_view value);
  /// Adds a DIAGNOSTICS row (run = nullopt: about the whole capture). Returns its id.
  int64_t add_diagnostic(std::optional<int64_t> run, Severity severity, std::string_view source,
                         std::string_view text, std::optional<int64_t> time_ns = std::nullopt);
  /// Adds a DEVICES row; returns its id.
  int64_t add_device(const DeviceInfo& device);
  /// Adds a TARGET_INFO_GPU row (real GPUs only).
  void add_gpu(const GpuInfo& gpu);
  /// Adds the COMPILE_RESULTS row of a run.
  void add_compile_result(int64_t run, const CompileResult& result);
  /// Records a module of a run (the tracer also records every module its events name).
  void add_module(int64_t run, std::string_view fqn, std::string_view module_class);

  /// End of a capture: builds the indexes, records HOOKSCOPE_FINALIZED=1, checkpoints the WAL.
  /// Idempotent; more runs may still be appended afterwards.
  void finalize();
  /// Checkpoints and switches the file back to a single-file (rollback journal) database, so a
  /// closed capture is one self-contained file. Further calls throw CaptureError. Idempotent.
  void close();

  /// Number of StringIds rows (for tests and benchmarks).
  int64_t string_count() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hs::storage
