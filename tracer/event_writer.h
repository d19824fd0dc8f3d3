// The tracer's consumer interface: what the HostTracer's writer thread hands downstream.
//
// Layering (DESIGN.md §2): `tracer ← storage`. The tracer never includes storage; it writes
// through the abstract `EventWriter` declared here, which `hs::storage::Store` implements and
// the app wires up. Everything here is plain data: no SQLite, no JSON library, no LibTorch.
//
// Units: every time is host steady-clock nanoseconds (`hs::events::now_ns()`), every size bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "tracer/events.h"

namespace hs::tracer {

/// Status of one run (one scenario × policy × mode) in a capture. The integer values are the
/// ids of the `ENUM_RUN_STATUS` table in the capture file.
enum class RunStatus : int {
  Incomplete = 0,  ///< begun, not (yet) ended: the process died or the run is still recording
  Complete = 1,    ///< every batch committed, the run ended normally
  Failed = 2,      ///< every batch committed, but the scenario ended with an error (see `error`)
};

/// Lower-case name of a status: "incomplete", "complete", "failed".
std::string_view to_string(RunStatus s);

/// What a run is. JSON fields are passed as text so the tracer needs no JSON library; the
/// consumer validates them (the Store throws `std::invalid_argument` on malformed JSON).
struct RunInfo {
  std::string scenario;                ///< e.g. "qwen3-8b/sharded-4"
  std::string policy;                  ///< "whole-hook" | "offload-only" | "" (no hooks)
  std::string mode;                    ///< "eager" | "default" | "reduce-overhead"
  bool fullgraph = false;              ///< compile(..., fullgraph=true)
  std::string model;                   ///< checkpoint folder or model id
  std::string device_map_json = "{}";  ///< JSON object, module FQN → device ("0", "cpu", "disk")
  std::string versions_json = "{}";    ///< JSON object, e.g. {"hookscope":"0.1.0","torch":"2.11.0"}
  int64_t start_ns = 0;                ///< host steady-clock ns; 0 = the time begin_run is called
};

/// Id of a string within one run: dense, 0-based, assigned by the tracer. A `RecordBatch`
/// defines each id (in `strings`) no later than the first batch whose records use it.
using StrId = uint32_t;

/// Recorded events with their strings replaced by run-scoped `StrId`s. One struct per kind of
/// `hs::events`; field meanings and units as there.
namespace rec {
struct HookSpan {
  int64_t start_ns, end_ns;
  StrId hook, module, module_class;
  events::HookPhase phase;
};
struct WeightSwap {
  int64_t start_ns, end_ns;
  int64_t bytes;
  StrId module, tensor, dtype, device;
  events::WeightSource source;
  bool onload, pinned;
};
struct Transfer {
  int64_t start_ns, end_ns;
  int64_t bytes;
  StrId src, dst, module;  ///< module: the empty string when unknown
  bool emulated;
};
struct DisabledScope {
  int64_t start_ns, end_ns;
  StrId function, module;
  int32_t depth;
};
struct ModuleCompute {
  int64_t start_ns, end_ns;
  StrId module, module_class, device;
};
struct Region {
  int64_t start_ns, end_ns;
  int64_t op_count;
  StrId backend;
  int32_t index;
};
struct GraphBreak {
  int64_t time_ns;
  StrId reason, function, module, module_stack;
};
struct GenerationStep {
  int64_t start_ns, end_ns;
  int64_t step, token;
};
struct MemoryCounter {
  int64_t time_ns;
  int64_t bytes;
  StrId device;
};
}  // namespace rec

/// One recorded event of any kind.
using Event = std::variant<rec::HookSpan, rec::WeightSwap, rec::Transfer, rec::DisabledScope, rec::ModuleCompute,
                           rec::Region, rec::GraphBreak, rec::GenerationStep, rec::MemoryCounter>;

/// An event and the recording thread it came from (`thread`: the tracer's 0-based index of
/// that thread within the run; `ThreadDef` maps it to the OS thread id).
struct Record {
  Event event;
  uint32_t thread = 0;
};
static_assert(std::is_trivially_copyable_v<Record>, "records are copied into preallocated chunks");

/// Calls `f(StrId&)` for every string field of `e` (used to remap ids).
template <class F>
void for_each_string(Event& e, F&& f) {
  std::visit(
      [&](auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, rec::HookSpan>) {
          f(r.hook), f(r.module), f(r.module_class);
        } else if constexpr (std::is_same_v<T, rec::WeightSwap>) {
          f(r.module), f(r.tensor), f(r.dtype), f(r.device);
        } else if constexpr (std::is_same_v<T, rec::Transfer>) {
          f(r.src), f(r.dst), f(r.module);
        } else if constexpr (std::is_same_v<T, rec::DisabledScope>) {
          f(r.function), f(r.module);
        } else if constexpr (std::is_same_v<T, rec::ModuleCompute>) {
          f(r.module), f(r.module_class), f(r.device);
        } else if constexpr (std::is_same_v<T, rec::Region>) {
          f(r.backend);
        } else if constexpr (std::is_same_v<T, rec::GraphBreak>) {
          f(r.reason), f(r.function), f(r.module), f(r.module_stack);
        } else if constexpr (std::is_same_v<T, rec::MemoryCounter>) {
          f(r.device);
        }
      },
      e);
}

/// A string id's text, first defined in this batch.
struct StringDef {
  StrId id;
  std::string_view text;
};

/// A recording thread, first seen in this batch.
struct ThreadDef {
  uint32_t thread;  ///< index used by `Record::thread`
  int64_t os_tid;   ///< Linux thread id (gettid)
};

/// The end of a run, carried by its last batch.
struct RunEnd {
  RunStatus status = RunStatus::Complete;
  std::string_view error;     ///< why a run failed or stayed incomplete ("" = none)
  int64_t end_ns = 0;         ///< host steady-clock ns
  uint64_t dropped_records = 0;  ///< events the tracer could not buffer (see TracerStats)
};

/// A batch of records of one run. The spans are valid only during the `write_batch` call.
struct RecordBatch {
  int64_t run_id = 0;
  std::span<const StringDef> strings;  ///< ids first used by this batch (or defined early)
  std::span<const ThreadDef> threads;  ///< threads first seen in this batch
  std::span<const Record> records;
  /// Set on the run's last batch: the consumer must apply it in the same transaction as the
  /// batch's records, so a run reads `complete` only once all its records are committed.
  const RunEnd* end = nullptr;
};

/// Where the tracer's writer thread delivers. Implemented by `hs::storage::Store`.
/// Calls may come from different threads (the app's for `begin_run`, the tracer's writer
/// thread for `write_batch`), never concurrently for the same run from the HostTracer.
class EventWriter {
 public:
  virtual ~EventWriter() = default;
  /// Records a new run as `incomplete` (durably, before returning) and returns its id (> 0).
  /// Throws on failure (e.g. `std::runtime_error` naming the capture file).
  virtual int64_t begin_run(const RunInfo& info) = 0;
  /// Writes one batch atomically (one transaction). Throws on failure; the run then stays
  /// `incomplete`.
  virtual void write_batch(const RecordBatch& batch) = 0;
};

}  // namespace hs::tracer
