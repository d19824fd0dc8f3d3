// Internal to the Kineto importer: the rows of one import, buffered and written in batches.
//
// Activity records (CPU ops, CUDA API calls, GPU records) go through Store::write_activity,
// one batch per traced process (the batch's pid gives their globalTid / globalPid); host
// events (hook spans, swaps, transfers, regions, steps, memory counters) through
// Store::write_batch with run-scoped string ids and one recording thread per (pid, tid).
// Strings of activity records are owned here until their batch is written.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
    records_.push_back(tracer::Record::of(event, thread(pid, tid)));
    ++pending_;
  }
  /// Counts one activity row added (for the batch size).
  void added() { ++pending_; }

  /// Writes everything buffered when a batch is full.
  void maybe_flush() {
    if (pending_ >= batch_rows_) flush();
  }
  /// Writes everything buffered.
  void flush();

 private:
  uint32_t thread(int64_t pid, int64_t tid);

  storage::Store& store_;
  int64_t run_;
  size_t batch_rows_;
  KinetoSummary& summary_;
  size_t pending_ = 0;
  std::optional<int64_t> last_host_pid_;

  std::map<std::optional<int64_t>, ActivityRows> activity_;
  // keep()'s copies: blocks of kArenaBlock bytes (a longer string gets a block of its own),
  // freed at flush, so a row's strings cost no allocation each.
  static constexpr size_t kArenaBlock = size_t{64} << 10;
  std::vector<std::unique_ptr<char[]>> arena_;
  size_t arena_used_ = kArenaBlock;  // bytes used of the last block

  std::unordered_map<std::string, tracer::StrId> strings_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> threads_;
  std::vector<tracer::StringDef> new_strings_;
  std::vector<tracer::ThreadDef> new_threads_;
  std::vector<tracer::Record> records_;
};

}  // namespace hs::importers::kineto
