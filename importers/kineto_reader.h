// Internal to the Kineto importer: reading a Chrome trace (plain or gzip) as a stream of events,
// one JSON object at a time, without the whole text in memory.
//
// `read_chrome_trace` reads the file in chunks (zlib's gzread, which also reads plain files)
// into a sliding window. A small scanner walks the trace's top level and finds where each
// entry of `traceEvents` (or of a top-level array: Chrome's "JSON Array Format") begins and
// ends, bounding its nesting and string lengths as it goes; simdjson parses that entry in
// place into a reused DOM (no allocation per event) and the caller gets a view of it, with its
// `ts` / `dur` converted from the decimal text of the number to integer ns — never through a
// double. The trace's other top-level keys are small and arrive as nlohmann values through
// their own callbacks. Memory is the window (one chunk, or the largest entry) plus one DOM.
// A file larger than `pipeline_bytes` is read in two stages on two threads: reading,
// inflating and scanning on a thread of the reader's own, simdjson and the callbacks on the
// caller's, with a few batches of 256 KiB of events' texts (each parsed as one simdjson array)
// between them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <simdjson.h>

namespace hs::importers::kineto {

/// One entry of `traceEvents`. A view into the reader's buffers: valid during the callback only.
struct RawEvent {
  simdjson::dom::object obj;      ///< the event object (simdjson DOM; members in file order)
  std::optional<int64_t> ts_ns;   ///< `ts` in ns (the file's µs, exact); nullopt when absent or not a number
  std::optional<int64_t> dur_ns;  ///< `dur` in ns; nullopt when absent or not a number
  uint64_t offset = 0;            ///< byte offset of the event's '{' in the (decompressed) JSON text
  uint64_t index = 0;             ///< its position in `traceEvents` (0 = the first entry)
  /// The members every event is read for (the last of each name, as member() finds it),
  /// found in one pass over the object; nullopt when absent.
  std::optional<simdjson::dom::element> ph, cat, name, pid, tid, id, ts, dur, args;
};

/// The member `key` of `o`; the last one when the key repeats (as JSON.parse and Python's json
/// read such an object). nullopt when absent.
std::optional<simdjson::dom::element> member(simdjson::dom::object o, std::string_view key);

struct TraceCallbacks {
  /// Each event, in file order. Throwing aborts the read (the exception propagates).
  std::function<void(const RawEvent&)> event;
  /// Each entry of `deviceProperties`.
  std::function<void(const nlohmann::ordered_json&)> device;
  /// Any other top-level key with its value (`baseTimeNanoseconds`, `distributedInfo`,
  /// `schemaVersion`, ...): scalars and containers up to kMaxMetadataNodes values; larger
  /// containers arrive as null.
  std::function<void(std::string_view key, const nlohmann::ordered_json& value)> metadata;
  /// After each chunk read: bytes of the file consumed so far (compressed bytes for .gz), file size.
  std::function<void(uint64_t bytes_read, uint64_t total_bytes)> progress;
};

/// Values (scalars and containers) of one top-level value or `deviceProperties` entry that
/// are built; a larger one arrives as null.
inline constexpr size_t kMaxMetadataNodes = 100000;
/// The deepest nesting of one value of the trace: an event (its `args` included), a
/// `deviceProperties` entry, a top-level key's value. A deeper one is refused before it is
/// parsed (nlohmann copies and dumps recurse once per level). Half storage::kMaxJsonDepth, so
/// that a value the import keeps in RUNS.results (the `hookscope` object of an exported trace)
/// stays readable there.
inline constexpr size_t kMaxValueDepth = 256;
/// The longest string of the trace, bytes (of its JSON text): a value is held whole while it is
/// parsed, so a small .json.gz inflating to one huge string would take gigabytes.
/// torch.profiler's longest (a Python stack, an op's args) are far below it.
inline constexpr uint64_t kMaxStringBytes = uint64_t{64} << 20;
/// The largest single value held whole (an event, a `deviceProperties` entry, a top-level
/// value other than `traceEvents`, which is streamed), bytes of its JSON text.
inline constexpr uint64_t kMaxValueBytes = uint64_t{256} << 20;

/// Files larger than this (bytes on disk) are read in two stages on two threads (see the top).
inline constexpr uint64_t kPipelineBytes = uint64_t{4} << 20;

/// Reads `file` (plain JSON, or gzip-compressed JSON: detected from the content). The
/// callbacks run on the calling thread, in file order, whatever `pipeline_bytes` is.
/// Throws ImportError naming the file and the byte offset (in the decompressed text) for a
/// file that cannot be opened, a truncated gzip stream, text that is not JSON or ends early,
/// a top level that is neither an object with `traceEvents` nor an array of events, an
/// event whose `ts` / `dur` is not a number (or does not fit int64 ns), a value nested
/// deeper than kMaxValueDepth ("traceEvents[12].args: JSON nested deeper than 256 levels"),
/// a string longer than kMaxStringBytes and a value larger than kMaxValueBytes.
void read_chrome_trace(const std::filesystem::path& file, const TraceCallbacks& callbacks,
                       uint64_t pipeline_bytes = kPipelineBytes);

/// A decimal number of µs as JSON writes it ("5243847375771.562", "12", "1.5e3", "-0.25") in
/// integer ns, exactly: digits beyond ns are rounded half away from zero. nullopt when the text
/// is not a JSON number or the value does not fit int64.
std::optional<int64_t> decimal_us_to_ns(std::string_view text);

}  // namespace hs::importers::kineto
