// Internal to the Kineto importer: the rows of one import, buffered and written in batches.
//
// Activity records (CPU ops, CUDA API calls, GPU records) go through Store::write_activity,
// one batch per traced process (the batch's pid gives their globalTid / globalPid); host
// events (hook spans, swaps, transfers, regions, steps, memory counters) through
// Store::write_batch with run-scoped string ids and one recording thread per (pid, tid).
// Strings of activity records are owned here until their batch is written.
//
// A full batch is written by a writer thread of the sink's own while the importer reads on
// (SQLite's part of an import, about a fifth of it, overlaps the parsing): flush() hands the
// buffered rows over and returns; at most one batch is in flight, so memory stays two
// batches. The last batch (finish()) is written on the calling thread, so an import of one
// batch starts no thread. Nothing else may use the Store while a batch is in flight:
// drain() waits for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "importers/kineto_trace.h"
#include "storage/store.h"
#include "tracer/event_writer.h"
#include "tracer/events.h"
#include "tracer/gpu_activity.h"

namespace hs::importers::kineto {

/// Activity records of one process, one vector per kind (named as ActivityBatch's spans).
struct ActivityRows {
#define HS_KINETO_ROWS_(Type, Row, rows, ...) std::vector<tracer::Type> rows;
  HS_ACTIVITY_KINDS(HS_KINETO_ROWS_)
#undef HS_KINETO_ROWS_
};

class RowSink {
 public:
  RowSink(storage::Store& store, int64_t run, size_t batch_rows, KinetoSummary& summary);
  /// Waits for a batch still being written (its error, if any, is dropped: the import is
  /// being abandoned). Never throws.
  ~RowSink();
  RowSink(const RowSink&) = delete;
  RowSink& operator=(const RowSink&) = delete;

  /// A copy of `s` that lives until the next flush (for the string fields of activity records).
  std::string_view keep(std::string_view s);

  /// The activity rows of process `pid`; nullopt: the traced process (GPU records, whose
  /// globalPid is the process that launched them: the last host pid seen, else 0).
  ActivityRows& activity(std::optional<int64_t> pid);
  /// Records that `pid` is a traced process (host side): the summary's pids, GPU rows' globalPid.
  void note_host_pid(int64_t pid);

  /// A run-scoped string id for host events.
  tracer::StrId str(std::string_view s);
  /// Adds a host event recorded on thread (pid, tid).
  template <class R>
  void host(const R& event, int64_t pid, int64_t tid) {
    cur_.records.push_back(tracer::Record::of(event, thread(pid, tid)));
    ++pending_;
  }
  /// Counts one activity row added (for the batch size).
  void added() { ++pending_; }

  /// Hands everything buffered to the writer thread when a batch is full.
  void maybe_flush() {
    if (pending_ >= batch_rows_) flush();
  }
  /// Hands everything buffered to the writer thread (after the batch before it is written).
  /// Throws what writing the batch before it threw (storage::CaptureError).
  void flush();
  /// Writes everything buffered, on this thread, once the batch in flight is written. Throws
  /// what either write threw.
  void finish();
  /// Waits until no batch is being written; throws what writing it threw.
  void drain();

 private:
  /// The rows of one batch, and the strings they view.
  struct Buffers {
    std::map<std::optional<int64_t>, ActivityRows> activity;
    // keep()'s copies: blocks of kArenaBlock bytes (a longer string gets a block of its own),
    // freed once the batch is written, so a row's strings cost no allocation each.
    std::vector<std::unique_ptr<char[]>> arena;
    size_t arena_used = kArenaBlock;  // bytes used of the last block
    std::vector<tracer::StringDef> new_strings;
    std::vector<tracer::ThreadDef> new_threads;
    std::vector<tracer::Record> records;
    int64_t default_pid = 0;  // GPU rows' globalPid: the last host pid seen when it was handed over
    void clear();             // empties it, keeping the vectors' capacity
  };
  static constexpr size_t kArenaBlock = size_t{64} << 10;

  uint32_t thread(int64_t pid, int64_t tid);
  void count(const Buffers& b);  // into summary_.rows_by_table
  void write(Buffers& b);        // into the Store, then clear()
  void writer_main();

  storage::Store& store_;
  int64_t run_;
  size_t batch_rows_;
  KinetoSummary& summary_;
  size_t pending_ = 0;
  std::optional<int64_t> last_host_pid_;

  Buffers cur_;  // filled by the importer
  Buffers out_;  // being written by the writer thread while busy_

  struct SvHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, tracer::StrId, SvHash, std::equal_to<>> strings_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> threads_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false, stop_ = false;  // guarded by mu_
  std::exception_ptr error_;          // guarded by mu_: the writer thread's failure
  std::thread writer_;                // started by the first flush()
};

}  // namespace hs::importers::kineto
