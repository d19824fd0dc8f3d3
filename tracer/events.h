// The event vocabulary: what models, hooks and the emulated compiler report, and the narrow
// `EventSink` interface they report to. The kinds themselves (fields, units, tables) are
// declared in tracer/event_kinds.h. Dependency-free on purpose: the hooks never depend on
// SQLite or CUPTI; the tracer implements the sink.
//
// Times are host steady-clock nanoseconds (`hs::events::now_ns()`); sizes are bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tracer/event_kinds.h"

namespace hs::events {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Which hook callback ran (ENUM_HOOK_PHASE).
enum class HookPhase { PreForward, PostForward, InitHook, DetachHook };

/// Where an onloaded weight came from (ENUM_WEIGHT_SOURCE).
enum class WeightSource { Cpu, Disk, Device };

}  // namespace hs::events

namespace hs::kinds {
HS_HOST_EVENT_KINDS(HS_KIND_DECLARE)
}  // namespace hs::kinds

namespace hs::events {

// One struct per host event kind, e.g. `events::HookSpan` (hook, phase, module, module_class,
// start_ns, end_ns): the F and T lines of its declaration in tracer/event_kinds.h, in order.
#define HS_EVENT_STRUCT_(Type, ...) using Type = kinds::Type<kinds::Emitted>;
HS_HOST_EVENT_KINDS(HS_EVENT_STRUCT_)
#undef HS_EVENT_STRUCT_

/// The sink: one method per host event kind (`hook_span`, `weight_swap`, ...), each with an
/// empty default so a sink implements only what it records. Implementations must be cheap and
/// must not throw on the recording path.
class EventSink {
 public:
  virtual ~EventSink() = default;
  /// A view of the same bytes as `text`: what a producer passes again and again (module FQNs
  /// and classes, hook classes, device names) is pinned once and then recorded without the sink
  /// reading its bytes. HostTracer returns a copy of its own, valid and unchanged as long as the
  /// tracer lives (up to TracerOptions::pinned_strings / pinned_bytes; past that, `text` itself).
  /// This default pins nothing and returns `text` itself, valid as long as `text`'s bytes are;
  /// a caller tells the two apart by the address (`pin(t).data() != t.data()`: pinned).
  /// Thread-safe; never throws; not for the recording path (it may lock and copy).
  virtual std::string_view pin(std::string_view text) noexcept { return text; }
#define HS_SINK_METHOD_(Type, Row, rows, table, doc, fields, method) \
  virtual void method(const Type&) {}
  HS_HOST_EVENT_KINDS(HS_SINK_METHOD_)
#undef HS_SINK_METHOD_
};

/// Calls the method of `sink` for the kind of `event` (`emit(s, HookSpan{...})` is
/// `s.hook_span(...)`): for code generic over kinds.
#define HS_EMIT_OVERLOAD_(Type, Row, rows, table, doc, fields, method) \
  inline void emit(EventSink& sink, const Type& event) { sink.method(event); }
HS_HOST_EVENT_KINDS(HS_EMIT_OVERLOAD_)
#undef HS_EMIT_OVERLOAD_

}  // namespace hs::events
