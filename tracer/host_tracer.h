// HostTracer: the host-clock recorder behind `hs::events::EventSink`.
//
// Recording path (any thread, once a run has begun): the event's strings are interned into
// that thread's preallocated string table, the event is copied into the thread's current
// chunk (a fixed-capacity array of `Record`s). No heap allocation, no lock and no I/O happen
// on this path, except (a) a thread's first event of a run, which claims one of the
// preallocated thread slots under a mutex, and (b) when a chunk fills: then the chunk is
// handed to the writer thread (a short mutex + condition-variable notify) and a preallocated
// spare is taken. When no spare
// is left (the writer is behind), the event is *dropped and counted* — the tracer never
// allocates to keep up. A thread beyond `max_threads`, or a string that does not fit the
// thread's string table, also drops (and counts) the event.
//
// Writer thread: drains the full chunks once `writer_wake_chunks` of them wait, and on
// `flush()`/`end_run()` every full and partial one, into the
// `EventWriter` in batches of at most `batch_records` records (one consumer call — one
// transaction in the Store — per batch). String ids are remapped from per-thread ids to
// run-scoped ids (`StrId`), and each id's text travels with the first batch that needs it.
//
// Run boundaries: `end_run` stops accepting events and waits for recording calls already in
// progress, so every event whose call returned before `end_run` was called is in the run;
// events recorded concurrently with it may or may not be; later ones are ignored.
//
// Typical use (the app wires the pieces):
//   hs::storage::Store store("capture.hscope");
//   hs::tracer::HostTracer tracer(store);
//   int64_t run = tracer.begin_run(info);     // run row written as `incomplete`
//   runtime.set_sink(&tracer);                // hs::hooks::Runtime (hooks/runtime.h)
//   ... model forward ...
//   runtime.set_sink(nullptr);
//   tracer.end_run(RunStatus::Complete);      // last batch + `complete`, one transaction
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tracer/event_writer.h"
#include "tracer/events.h"

namespace hs::tracer {

/// Sizes of the preallocated buffers. All memory is allocated (and touched) by the first
/// `begin_run` and reused by later runs; none during recording. With the defaults:
/// 64 × 4096 × 64 B = 16 MiB of chunks plus 32 × ~200 KiB of string tables.
struct TracerOptions {
  size_t chunk_records = 4096;              ///< records per chunk (a Record is 64 bytes)
  size_t chunks = 64;                       ///< chunks in the shared pool (spares + in flight)
  size_t max_threads = 32;                  ///< recording threads per run
  size_t strings_per_thread = 4096;         ///< distinct strings per thread per run
  size_t string_bytes_per_thread = 128 << 10;  ///< bytes of string text per thread per run
  size_t batch_records = 65536;             ///< max records per EventWriter::write_batch
  /// Full chunks that wake the writer thread between `flush()`es; 0 = half of `chunks`. The
  /// writer's SQLite work shares the cores and the memory bandwidth with the model, so it
  /// waits: the chunks are written at `flush()` / `end_run()` (which the engines call where
  /// nothing is timed, after each generate) or once this many are full, leaving the rest of
  /// the pool to record into meanwhile. 1 writes each chunk as it fills.
  size_t writer_wake_chunks = 0;
  /// Texts `pin()` keeps (each once), and the bytes they may take; allocated with the tracer.
  /// An event whose text is a pinned view is recorded without interning the text's bytes.
  size_t pinned_strings = 16384;
  size_t pinned_bytes = 1 << 20;
};

/// Counters of one run (or of the current run while it records).
struct TracerStats {
  uint64_t recorded = 0;            ///< events accepted into a chunk
  uint64_t dropped_no_chunk = 0;    ///< dropped: no spare chunk (the writer fell behind)
  uint64_t dropped_no_thread = 0;   ///< dropped: more than max_threads recording threads
  uint64_t dropped_strings = 0;     ///< dropped: the thread's string table or text arena was full
  uint64_t chunks_handed_off = 0;   ///< full chunks passed to the writer thread
  uint64_t batches_written = 0;     ///< successful EventWriter::write_batch calls
  uint64_t records_written = 0;     ///< records in those batches
  uint64_t dropped() const { return dropped_no_chunk + dropped_no_thread + dropped_strings; }
};

class HostTracer final : public events::EventSink {
 public:
  /// `writer` must outlive the tracer. Starts the writer thread.
  /// Throws `std::invalid_argument` when an option is zero.
  explicit HostTracer(EventWriter& writer, TracerOptions options = {});
  /// Stops the writer thread. A run still active is flushed but left `incomplete` (its end
  /// records error "tracer destroyed before end_run"); errors are swallowed.
  ~HostTracer() override;
  HostTracer(const HostTracer&) = delete;
  HostTracer& operator=(const HostTracer&) = delete;

  /// Starts a run: preallocates the buffers, calls `writer.begin_run(info)` (which records the
  /// run as `incomplete`) and starts accepting events. Returns the run id.
  /// Throws `std::logic_error` if a run is already active; rethrows the writer's exceptions
  /// (then no run is active).
  int64_t begin_run(const RunInfo& info);

  /// Writes everything recorded before this call (full and partial chunks) and returns once
  /// it is committed; call it where the writer's work disturbs nothing that is measured
  /// (TracerOptions::writer_wake_chunks). Events recorded concurrently may or may not be included.
  /// Throws `std::runtime_error` if the writer failed (the message is the writer's), and
  /// `std::logic_error` when no run is active.
  void flush();

  /// Stops accepting events, waits for in-flight recording calls, writes everything, and
  /// commits the run's end (`status`, `error`, end time, dropped count) in the same batch as
  /// its last records. Returns the run's counters.
  /// Throws `std::logic_error` when no run is active, `std::runtime_error` when the writer
  /// failed during the run (the run then stays `incomplete` in the store; the tracer is ready
  /// for a new run).
  TracerStats end_run(RunStatus status = RunStatus::Complete, std::string_view error = {});

  /// True between begin_run and end_run.
  bool recording() const { return active_.load(std::memory_order_acquire); }
  /// Id of the active run (0 when none).
  int64_t run_id() const { return run_id_.load(std::memory_order_acquire); }
  /// Counters of the active run, or of the last ended run.
  TracerStats stats() const;
  const TracerOptions& options() const { return opts_; }

  /// A copy of `text` owned by the tracer (one per distinct text, kept for the tracer's life):
  /// an event field that is this view is recorded by the text's index, its bytes never read on
  /// the recording path. Returns `text` itself once TracerOptions::pinned_strings or
  /// pinned_bytes are used up, or when memory runs out (the event is then interned as any
  /// other). Thread-safe, any time; never throws.
  std::string_view pin(std::string_view text) noexcept override;

  // EventSink: the recording path, one method per host event kind (hook_span, weight_swap,
  // ...). Cheap, never throws, never allocates.
#define HS_TRACER_SINK_METHOD_(Type, Row, rows, table, doc, fields, method) \
  void method(const events::Type& e) override;
  HS_HOST_EVENT_KINDS(HS_TRACER_SINK_METHOD_)
#undef HS_TRACER_SINK_METHOD_

  // Implementation details (host_tracer.cpp).
  struct ThreadBuffer;
  struct Chunk;
  struct WriterState;
  struct PinnedTexts;

 private:
  template <class E>
  void record(const E& event) noexcept;
  ThreadBuffer* acquire_buffer() noexcept;
  ThreadBuffer* claim_buffer_slow(uint64_t gen) noexcept;
  void take_spare(ThreadBuffer& tb) noexcept;
  void hand_off(ThreadBuffer& tb) noexcept;
  void allocate_buffers();
  void reset_buffers();
  void wait_quiescent();
  TracerStats collect_stats() const;
  void writer_main();
  void writer_round(bool partial, const RunEnd* end);
  void process_chunk(ThreadBuffer& tb, Chunk& c);
  void emit_batch(const RunEnd* end);
  void request_and_wait(const RunEnd* end);

  EventWriter& writer_;
  const TracerOptions opts_;
  size_t wake_chunks_ = 1;  // opts_.writer_wake_chunks resolved: full chunks that wake the writer

  // Run state. `gen_` is process-unique per run, so stale thread-local caches never match.
  std::atomic<bool> active_{false};
  std::atomic<uint64_t> gen_{0};
  std::atomic<int64_t> run_id_{0};
  std::mutex lifecycle_mu_;  // serialises begin_run / flush / end_run
  std::mutex claim_mu_;      // thread-slot claims vs. run start/stop

  // Pinned texts (pin()), allocated with the tracer: the recording path tells a pinned view by
  // its address within their arena and the index stored before it.
  std::unique_ptr<PinnedTexts> pins_;

  // Preallocated storage (sized by allocate_buffers, reused across runs).
  std::unique_ptr<Record[]> record_storage_;
  std::unique_ptr<Chunk[]> chunks_;
  size_t chunk_count_ = 0;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_;
  std::atomic<uint32_t> claimed_{0};
  std::atomic<uint64_t> dropped_no_thread_{0};

  // Chunk exchange between recording threads and the writer thread (guarded by pool_mu_).
  std::mutex pool_mu_;
  std::condition_variable pool_cv_;  // wakes the writer
  std::condition_variable done_cv_;  // wakes flush/end_run
  std::vector<Chunk*> spares_;       // capacity == chunk count: push/pop never reallocate
  std::vector<Chunk*> full_;         // ring of full chunks, capacity == chunk count
  size_t full_head_ = 0, full_count_ = 0;
  std::atomic<size_t> spare_count_{0};
  uint64_t request_seq_ = 0, done_seq_ = 0;
  const RunEnd* request_end_ = nullptr;
  bool stop_ = false;

  // Owned by the writer thread while it works; read by others only after a request completes.
  std::unique_ptr<WriterState> ws_;
  std::atomic<uint64_t> batches_written_{0}, records_written_{0};
  TracerStats last_stats_;

  std::thread writer_thread_;
};

}  // namespace hs::tracer
