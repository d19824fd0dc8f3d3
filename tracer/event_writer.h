// The tracer's consumer interface: what the HostTracer's writer thread hands downstream.
//
// Layering (docs/architecture.md): `tracer <- storage`. The tracer never includes storage; it
// writes through the abstract `EventWriter` declared here, which `hs::storage::Store`
// implements and the app wires up. Everything here is plain data: no SQLite, no JSON library, no LibTorch.
//
// Units: every time is host steady-clock nanoseconds (`hs::events::now_ns()`), every size bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

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
  std::string engine;                  ///< what produced the run: "libtorch", "torch", "import"
  std::string label;                   ///< the user's name for the run ("" = none)
};

/// Id of a string within one run: dense, 0-based, assigned by the tracer. A `RecordBatch`
/// defines each id (in `strings`) no later than the first batch whose records use it.
using StrId = uint32_t;

/// The form the HostTracer records: a host event with its strings replaced by run-scoped
/// `StrId`s. Trivially copyable, at most `kRecordPayload` bytes.
struct Recorded {
  template <class Tag>
  using member = typename kinds::member_of<Tag, StrId>::type;
};

/// Recorded host events, one struct per kind (`rec::HookSpan`, ...): the fields of
/// `events::HookSpan` etc., in the same order, with `StrId` for every string.
namespace rec {
#define HS_REC_STRUCT_(Type, ...) using Type = kinds::Type<Recorded>;
HS_HOST_EVENT_KINDS(HS_REC_STRUCT_)
#undef HS_REC_STRUCT_
}  // namespace rec

/// Which host event kind a record holds (the order of HS_HOST_EVENT_KINDS).
enum class EventKind : uint8_t {
#define HS_EVENT_KIND_(Type, ...) Type,
  HS_HOST_EVENT_KINDS(HS_EVENT_KIND_)
#undef HS_EVENT_KIND_
};
inline constexpr size_t kEventKinds = 0
#define HS_COUNT_KIND_(...) +1
    HS_HOST_EVENT_KINDS(HS_COUNT_KIND_);
#undef HS_COUNT_KIND_

/// The kind of a recorded struct: `kind_of<rec::HookSpan> == EventKind::HookSpan`.
template <class R>
inline constexpr EventKind kind_of = EventKind{};
#define HS_KIND_OF_(Type, ...) \
  template <>                  \
  inline constexpr EventKind kind_of<rec::Type> = EventKind::Type;
HS_HOST_EVENT_KINDS(HS_KIND_OF_)
#undef HS_KIND_OF_

/// Bytes a recorded event may take (a Record is 64 bytes in all).
inline constexpr size_t kRecordPayload = 56;
#define HS_REC_FITS_(Type, ...)                                                                      \
  static_assert(sizeof(rec::Type) <= kRecordPayload && std::is_trivially_copyable_v<rec::Type>,      \
                "rec::" #Type " must fit a Record: fewer or smaller fields (strings are 4-byte ids)");
HS_HOST_EVENT_KINDS(HS_REC_FITS_)
#undef HS_REC_FITS_

/// One recorded event of any kind, and the recording thread it came from (`thread`: the
/// tracer's 0-based index of that thread within the run; `ThreadDef` maps it to the OS thread
/// id). The event is kept as bytes, so chunks of Records are plain arrays.
struct Record {
  uint32_t thread = 0;
  EventKind kind = EventKind{};
  alignas(8) unsigned char payload[kRecordPayload] = {};

  template <class R>
  static Record of(const R& event, uint32_t thread = 0) {
    Record r;
    r.set(event);
    r.thread = thread;
    return r;
  }
  /// Stores `event` (and its kind).
  template <class R>
  void set(const R& event) {
    kind = kind_of<R>;
    std::memcpy(payload, &event, sizeof(R));
  }
  template <class R>
  bool holds() const {
    return kind == kind_of<R>;
  }
  /// The event, which must be of kind `kind_of<R>`.
  template <class R>
  R get() const {
    R event;
    std::memcpy(static_cast<void*>(&event), payload, sizeof(R));
    return event;
  }
};
static_assert(sizeof(Record) == 64 && std::is_trivially_copyable_v<Record>,
              "records are copied into preallocated chunks of 64-byte slots");

/// Calls `f(std::type_identity<rec::X>{})` for the recorded struct of kind `k`.
template <class F>
void with_kind(EventKind k, F&& f) {
  switch (k) {
#define HS_WITH_KIND_CASE_(Type, ...) \
  case EventKind::Type:               \
    f(std::type_identity<rec::Type>{}); \
    return;
    HS_HOST_EVENT_KINDS(HS_WITH_KIND_CASE_)
#undef HS_WITH_KIND_CASE_
  }
}

/// Calls `f(const rec::X&)` with the event of `r`.
template <class F>
void visit(const Record& r, F&& f) {
  with_kind(r.kind, [&](auto type) { f(r.get<typename decltype(type)::type>()); });
}

/// Calls `f(StrId&)` for every string field of the event in `r`, in declaration order (used
/// to remap ids).
template <class F>
void for_each_string(Record& r, F&& f) {
  with_kind(r.kind, [&](auto type) {
    using R = typename decltype(type)::type;
    R event = r.get<R>();
    R::columns([&](auto tag, std::string_view, std::string_view, auto field) {
      if constexpr (kinds::is_text<typename decltype(tag)::type>) f(field(event));
    });
    r.set(event);
  });
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
