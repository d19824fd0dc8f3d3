// Internal to the Kineto importer: reading a Chrome trace (plain or gzip) as a stream of events,
// one JSON object at a time, without the whole text in memory.
//
// `read_chrome_trace` runs nlohmann's SAX parser over a chunked reader (zlib's gzread, which
// also reads plain files) and hands the caller each entry of `traceEvents` (or of a top-level
// array: Chrome's "JSON Array Format") as a small DOM, with its `ts` / `dur` converted from the
// decimal text of the number to integer ns — never through a double. The trace's other
// top-level keys arrive through their own callbacks. Memory is one chunk plus one event.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hs::importers::kineto {

/// One entry of `traceEvents`.
struct RawEvent {
  nlohmann::ordered_json obj;     ///< the event object as written (keys in file order)
  std::optional<int64_t> ts_ns;   ///< `ts` in ns (the file's µs, exact); nullopt when absent
  std::optional<int64_t> dur_ns;  ///< `dur` in ns; nullopt when absent
  uint64_t offset = 0;            ///< byte offset of the event's '{' in the (decompressed) JSON text
  uint64_t index = 0;             ///< its position in `traceEvents` (0 = the first entry)
};

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

inline constexpr size_t kMaxMetadataNodes = 100000;
/// The deepest nesting of one value of the trace: an event (its `args` included), a
/// `deviceProperties` entry, a top-level key's value. A deeper one is refused before it is
/// built (nlohmann copies and dumps recurse once per level). Half storage::kMaxJsonDepth, so
/// that a value the import keeps in RUNS.results (the `hookscope` object of an exported trace)
/// stays readable there.
inline constexpr size_t kMaxValueDepth = 256;
/// The longest string of the trace, bytes (of its JSON text): nlohmann's lexer holds a string
/// whole and the parser copies it, so a small .json.gz inflating to one huge string would take
/// gigabytes. torch.profiler's longest (a Python stack, an op's args) are far below it.
inline constexpr uint64_t kMaxStringBytes = uint64_t{64} << 20;

/// Reads `file` (plain JSON, or gzip-compressed JSON: detected from the content).
/// Throws ImportError naming the file and the byte offset (in the decompressed text) for a
/// file that cannot be opened, a truncated gzip stream, text that is not JSON or ends early,
/// a top level that is neither an object with `traceEvents` nor an array of events, an
/// event whose `ts` / `dur` is not a number (or does not fit int64 ns), and a value nested
/// deeper than kMaxValueDepth ("traceEvents[12].args: JSON nested deeper than 256 levels") or
/// a string longer than kMaxStringBytes.
void read_chrome_trace(const std::filesystem::path& file, const TraceCallbacks& callbacks);

/// A decimal number of µs as JSON writes it ("5243847375771.562", "12", "1.5e3", "-0.25") in
/// integer ns, exactly: digits beyond ns are rounded half away from zero. nullopt when the text
/// is not a JSON number or the value does not fit int64.
std::optional<int64_t> decimal_us_to_ns(std::string_view text);

}  // namespace hs::importers::kineto
