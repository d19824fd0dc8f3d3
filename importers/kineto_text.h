// Internal to the Kineto reader (kineto_reader.cpp): the streamed text and what its messages
// say. The sliding window over the (inflated) file, the scanner's bit masks, the names of
// values in errors and the bounded nlohmann parse of a value's text.
#pragma once

#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "importers/import_error.h"

namespace hs::importers::kineto::detail {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

inline std::string at_byte(uint64_t offset) { return "byte " + std::to_string(offset); }
inline bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
// The bytes the scanner acts on outside strings.
constexpr std::array<bool, 256> kStructural = [] {
  std::array<bool, 256> t{};
  for (const char c : std::string_view("\"{}[],:")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();
constexpr size_t kBlock = 64;
// Bit i set: byte i of a kBlock-byte block is a '"', a '\\', one of {}[],:.
struct Masks {
  uint64_t quote = 0, backslash = 0, structural = 0;
};
inline Masks masks(const char* block) {
  Masks m;
#if defined(__SSE2__)
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * k));
    const auto bits = [&](__m128i eq) { return static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(eq))) << (16 * k); };
    const __m128i low = _mm_or_si128(v, _mm_set1_epi8(0x20));  // '[' -> '{', ']' -> '}'
    m.quote |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')));
    m.backslash |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
    m.structural |= bits(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(low, _mm_set1_epi8('{')), _mm_cmpeq_epi8(low, _mm_set1_epi8('}'))),
                                      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(',')), _mm_cmpeq_epi8(v, _mm_set1_epi8(':')))));
  }
#else
  for (size_t i = 0; i < kBlock; ++i) {
    const char c = block[i];
    m.quote |= uint64_t{c == '"'} << i;
    m.backslash |= uint64_t{c == '\\'} << i;
    m.structural |= uint64_t{c != '"' && kStructural[static_cast<unsigned char>(c)]} << i;
  }
#endif
  return m;
}
// Bit i of the result: the xor of bits 0..i (inside a string, counting quotes from the left).
inline uint64_t prefix_xor(uint64_t x) {
  for (int shift = 1; shift < 64; shift *= 2) x ^= x << shift;
  return x;
}

// What one gzread returned, with zlib's state after it.
struct ReadResult {
  size_t n = 0;            // bytes read
  bool failed = false;     // a read or decompression error: `message` says which
  bool truncated = false;  // n == 0 because the gzip stream ends before its end marker
  std::string message;
  uint64_t offset = 0;     // gzoffset() after the read: bytes of the file consumed
};

inline ReadResult read_some(gzFile gz, char* into, size_t room) {
  ReadResult r;
  const int n = gzread(gz, into, static_cast<unsigned>(room));
  int err = Z_OK;
  const char* msg = gzerror(gz, &err);
  r.failed = n < 0 || (err != Z_OK && err != Z_BUF_ERROR);
  if (r.failed) r.message = msg ? msg : "?";
  r.n = n > 0 ? static_cast<size_t>(n) : 0;
  r.truncated = n == 0 && err == Z_BUF_ERROR;
  r.offset = static_cast<uint64_t>(gzoffset(gz));
  return r;
}

// The (inflated) text in a sliding window over the file, read through zlib (gzread passes a
// plain file through unchanged). Offsets are absolute: bytes of JSON text from its start.
// The window always has SIMDJSON_PADDING bytes allocated past its end, so a value in it can
// be handed to simdjson where it lies.
class Window {
 public:
  /// `max_kept`: the most bytes a caller keeps (the largest value it reads whole); the window
  /// grows to at most that and a megabyte more, so its memory stays bounded whatever the text.
  Window(fs::path file, std::function<void(uint64_t, uint64_t)> progress, uint64_t max_kept)
      : file_(std::move(file)), progress_(std::move(progress)), limit_(max_kept + (uint64_t{1} << 20)) {
    std::error_code ec;
    total_ = fs::file_size(file_, ec);
    if (ec) throw ImportError(file_, "", "cannot read the trace: " + ec.message());
    gz_ = gzopen(file_.c_str(), "rb");
    if (!gz_) throw ImportError(file_, "", std::string("cannot open the trace: ") + std::strerror(errno));
    // Sized to the file up to their usual size: a small trace (the fuzzer's, a test's) does
    // not pay for zeroing and faulting in a megabyte; a .gz that inflates past its size only
    // takes more refills.
    const auto fit = [&](uint64_t cap) { return static_cast<size_t>(std::clamp<uint64_t>(total_ + 1, 4096, cap)); };
    gzbuffer(gz_, static_cast<unsigned>(fit(1 << 18)));
    buf_.resize(fit(1 << 20) + simdjson::SIMDJSON_PADDING);
  }
  ~Window() { gzclose(gz_); }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  /// One past the last byte read so far.
  uint64_t end() const { return base_ + len_; }
  /// The byte at absolute offset `at` (base() <= at < end()).
  const char* ptr(uint64_t at) const { return buf_.data() + (at - base_); }
  /// Reads more text, keeping the bytes from `keep` (<= end()) on; the window grows when they
  /// fill it. False at the end of the text.
  bool more(uint64_t keep) {
    if (eof_) return false;
    const size_t drop = static_cast<size_t>(keep - base_);
    if (drop > 0) {
      std::memmove(buf_.data(), buf_.data() + drop, len_ - drop);
      len_ -= drop;
      base_ += drop;
    }
    const size_t cap = buf_.size() - simdjson::SIMDJSON_PADDING;
    if (len_ == cap) {
      // The caller refuses a value past max_kept before it asks for more, so this is a guard.
      if (cap >= limit_)
        throw ImportError(file_, at_byte(keep), "a value larger than " + std::to_string((limit_ >> 20) - 1) + " MiB of JSON text");
      buf_.resize(static_cast<size_t>(std::min<uint64_t>(2 * uint64_t{cap}, limit_)) + simdjson::SIMDJSON_PADDING);
    }
    const size_t room = std::min<size_t>(buf_.size() - simdjson::SIMDJSON_PADDING - len_, size_t{1} << 30);
    const ReadResult r = read_some(gz_, buf_.data() + len_, room);
    if (r.failed) throw ImportError(file_, at_byte(end()), "cannot decompress the trace: " + r.message);
    if (r.n == 0) {
      eof_ = true;
      truncated_ = r.truncated;
      return false;
    }
    len_ += r.n;
    if (progress_) progress_(r.offset, total_);
    return true;
  }
  /// The gzip stream ended before its end marker.
  bool truncated() const { return truncated_; }
  const fs::path& file() const { return file_; }

 private:
  fs::path file_;
  std::function<void(uint64_t, uint64_t)> progress_;
  gzFile gz_ = nullptr;
  uint64_t limit_;  // the most bytes the window holds
  std::vector<char> buf_;
  uint64_t base_ = 0;  // offset of buf_[0]
  size_t len_ = 0;
  uint64_t total_ = 0;
  bool eof_ = false, truncated_ = false;
};

// What a value is, for messages: "traceEvents[12]", "deviceProperties[0]", "distributedInfo".
struct Where {
  enum class Kind { Event, Device, Member, Root } kind;
  uint64_t index = 0;
  std::string key;  // Member: the top-level key
  explicit Where(Kind k, uint64_t i = 0, std::string name = "") : kind(k), index(i), key(std::move(name)) {}
};

/// A key as a message names it: printable ASCII of at most 64 bytes as it is, anything else as
/// a JSON string (cut), so a key of control bytes or megabytes cannot garble the message.
std::string member_name(const std::string& k);
/// nlohmann's message without its "[json.exception.parse_error.101] parse error at ..." head.
std::string syntax_message(const nlohmann::detail::exception& ex);
/// A value's name in messages: "traceEvents[12]", "deviceProperties[0]", a top-level key.
std::string where_name(const Where& w);
/// The text ends (at byte `at`) before a value it began does: throws the ImportError saying so.
[[noreturn]] void text_ends_early(const fs::path& file, uint64_t at, bool truncated, const std::string& what = "");
/// The value [begin, end) of the JSON text, its bytes at `text`, through nlohmann: its syntax
/// error, if any, names the byte; with `nodes`, values past kMaxMetadataNodes are dropped while
/// parsing (the result is then null). `at_text_end`: the value ends where the text read so far
/// ends (an error past it is the text ending early; `truncated`: in a truncated gzip stream).
json parse_text(const fs::path& file, const char* text, uint64_t begin, uint64_t end, size_t* nodes,
                const Where* where, bool at_text_end, bool truncated);

}  // namespace hs::importers::kineto::detail
