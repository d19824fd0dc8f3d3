#include "importers/kineto_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "importers/import_error.h"
#include "storage/bounded_json.h"

namespace hs::importers::kineto {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

std::string at_byte(uint64_t offset) { return "byte " + std::to_string(offset); }

// The file in chunks through zlib (gzread passes a plain file through unchanged).
class ChunkReader {
 public:
  ChunkReader(fs::path file, std::function<void(uint64_t, uint64_t)> progress)
      : file_(std::move(file)), progress_(std::move(progress)) {
    std::error_code ec;
    total_ = fs::file_size(file_, ec);
    if (ec) throw ImportError(file_, "", "cannot read the trace: " + ec.message());
    gz_ = gzopen(file_.c_str(), "rb");
    if (!gz_) throw ImportError(file_, "", std::string("cannot open the trace: ") + std::strerror(errno));
    // Buffers sized to the file up to their usual size: a small trace (the fuzzer's, a test's)
    // does not pay for zeroing and faulting in a megabyte; a .gz that inflates past its size
    // only takes more refills.
    const auto fit = [&](uint64_t cap) {
      return static_cast<unsigned>(std::clamp<uint64_t>(total_ + 1, 4096, cap));
    };
    gzbuffer(gz_, fit(1 << 18));
    buf_.resize(fit(1 << 20));
  }
  ~ChunkReader() { gzclose(gz_); }
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  bool at_end() { return pos_ == len_ && !refill(); }
  const char& current() const { return buf_[pos_]; }
  /// Past the current byte. A run of whitespace outside strings reaches the parser as its first
  /// byte only (the rest is counted in consumed(), not handed on): nlohmann's lexer keeps every
  /// byte between two tokens, so a trace padded with gigabytes of blanks took that much memory.
  void advance() {
    const char c = buf_[pos_];
    ++pos_;
    ++consumed_;
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') in_string_ = false;
      // The lexer keeps a string whole (and the parser copies it): a bound on one string bounds
      // the memory a small .json.gz inflating to one huge string can take.
      if (in_string_ && ++string_bytes_ > kMaxStringBytes)
        throw ImportError(file_, at_byte(consumed_ - string_bytes_),
                          "a string longer than " + std::to_string(kMaxStringBytes >> 20) +
                              " MiB: not a trace torch.profiler writes (hookscope reads strings up to that size)");
      return;
    }
    if (c == '"') {
      in_string_ = true;
      string_bytes_ = 0;
    }
    if (!is_blank(c)) return;
    while (!at_end() && is_blank(current())) {
      ++pos_;
      ++consumed_;
    }
  }
  /// Bytes of JSON text read so far (handed to the parser or skipped as blanks): the offset in
  /// the (inflated) text of the next byte the parser is handed.
  uint64_t consumed() const { return consumed_; }
  /// The gzip stream ended before its end marker.
  bool truncated() const { return truncated_; }
  const fs::path& file() const { return file_; }

 private:
  bool refill() {
    if (eof_) return false;
    const int n = gzread(gz_, buf_.data(), static_cast<unsigned>(buf_.size()));
    int err = Z_OK;
    const char* msg = gzerror(gz_, &err);
    if (n < 0 || (err != Z_OK && err != Z_BUF_ERROR))
      throw ImportError(file_, at_byte(consumed_), std::string("cannot decompress the trace: ") + (msg ? msg : "?"));
    if (n == 0) {
      eof_ = true;
      truncated_ = err == Z_BUF_ERROR;
      return false;
    }
    pos_ = 0;
    len_ = static_cast<size_t>(n);
    if (progress_) progress_(static_cast<uint64_t>(gzoffset(gz_)), total_);
    return true;
  }

  static bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

  fs::path file_;
  std::function<void(uint64_t, uint64_t)> progress_;
  gzFile gz_ = nullptr;
  bool in_string_ = false, escape_ = false;  // where the bytes handed on so far end
  uint64_t string_bytes_ = 0;                 // of the string being handed on
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  uint64_t consumed_ = 0, total_ = 0;
  bool eof_ = false, truncated_ = false;
};

// An input iterator over a ChunkReader, for nlohmann's iterator input adapter. Two iterators
// compare equal when both are at the end (the parser only ever compares against `end`).
struct CharIter {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  ChunkReader* r = nullptr;
  reference operator*() const { return r->current(); }
  CharIter& operator++() {
    r->advance();
    return *this;
  }
  CharIter operator++(int) {
    CharIter old = *this;
    ++*this;
    return old;
  }
  bool done() const { return r == nullptr || r->at_end(); }
  friend bool operator==(const CharIter& a, const CharIter& b) { return a.done() == b.done(); }
};

// Builds one JSON value from SAX calls. Past `limit` values it stops building (overflow()).
class DomBuilder {
 public:
  void reset(size_t limit) {
    root_ = json();
    stack_.clear();
    nodes_ = 0;
    limit_ = limit;
    overflow_ = false;
  }
  void key(std::string k) { key_ = std::move(k); }
  void value(json&& v) { put(std::move(v)); }
  void open(json&& container) { stack_.push_back(put(std::move(container))); }
  void close() { stack_.pop_back(); }
  /// Nesting below the built value's root: 1 = directly inside it.
  size_t level() const { return stack_.size(); }
  const std::string& last_key() const { return key_; }
  bool overflow() const { return overflow_; }
  json& root() { return root_; }

 private:
  json* put(json&& v) {
    if (++nodes_ > limit_) overflow_ = true;
    if (overflow_) return nullptr;
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json* top = stack_.back();
    if (!top) return nullptr;
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    json& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }

  json root_;
  std::vector<json*> stack_;
  std::string key_;
  size_t nodes_ = 0, limit_ = 0;
  bool overflow_ = false;
};

// The SAX handler: routes the top level to the callbacks, builds one captured value at a time.
class Handler {
 public:
  Handler(ChunkReader& reader, const TraceCallbacks& cb) : reader_(reader), cb_(cb) {}

  bool null() { return scalar(json(nullptr)); }
  bool boolean(bool v) { return scalar(json(v)); }
  bool number_integer(json::number_integer_t v) {
    if (auto* t = time_slot()) *t = checked_us(static_cast<long double>(v), std::to_string(v));
    return scalar(json(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (auto* t = time_slot()) *t = checked_us(static_cast<long double>(v), std::to_string(v));
    return scalar(json(v));
  }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    if (auto* t = time_slot()) {
      const auto ns = decimal_us_to_ns(text);
      if (!ns) bad_time(text);
      *t = *ns;
    }
    return scalar(json(v));
  }
  bool string(json::string_t& v) { return scalar(json(std::move(v))); }
  bool binary(json::binary_t&) { return true; }
  bool key(json::string_t& k) {
    if (capture_ != Capture::None) {
      if (dom_.level() == 1) field_ = k;
      dom_.key(std::move(k));
    }
    else if (depth_ == 1)
      top_key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    std::string what = ex.what();
    if (auto p = what.find("syntax error"); p != std::string::npos)
      what = what.substr(p);
    else if (auto q = what.find("] "); q != std::string::npos)
      what = what.substr(q + 2);
    // At the end of the text the offset is its length; otherwise the byte that broke the syntax.
    const bool end = reader_.at_end();
    const std::string where = at_byte(end || reader_.consumed() == 0 ? reader_.consumed() : reader_.consumed() - 1);
    if (reader_.truncated())
      throw ImportError(reader_.file(), where, "the gzip stream ends early (truncated file): " + what);
    if (end && reader_.consumed() == 0) throw ImportError(reader_.file(), "", "the file is empty");
    if (end)
      throw ImportError(reader_.file(), where, "the JSON text ends early (truncated file?): " + what);
    throw ImportError(reader_.file(), where, "not valid JSON: " + what);
  }

  bool saw_events() const { return saw_events_; }

 private:
  enum class Capture { None, Event, Device, Metadata };

  [[noreturn]] void bad_time(std::string_view text) const {
    throw ImportError(reader_.file(), at_byte(event_.offset),
                      "the event's '" + std::string(dom_.last_key()) + "' is " + std::string(text) +
                          ": not a number of µs that fits int64 ns");
  }
  int64_t checked_us(long double us, std::string_view text) const {
    const long double ns = us * 1000.0L;
    if (ns > static_cast<long double>(std::numeric_limits<int64_t>::max()) ||
        ns < static_cast<long double>(std::numeric_limits<int64_t>::min()))
      bad_time(text);
    return static_cast<int64_t>(us) * 1000;
  }
  // Where an event's own `ts` / `dur` goes, when the value being read is one of them.
  std::optional<int64_t>* time_slot() {
    if (capture_ != Capture::Event || dom_.level() != 1) return nullptr;
    const std::string& k = dom_.last_key();
    if (k == "ts") return &event_.ts_ns;
    if (k == "dur") return &event_.dur_ns;
    return nullptr;
  }

  bool scalar(json&& v) {
    if (capture_ != Capture::None) {
      dom_.value(std::move(v));
    } else if (depth_ == 1 && root_object_) {
      if (cb_.metadata) cb_.metadata(top_key_, v);
    } else if (in_events_ && depth_ == events_depth_) {
      not_an_object();
    }
    return true;
  }

  bool open(json&& container) {
    ++depth_;
    if (capture_ != Capture::None) {
      // Bounded before the value is built: nlohmann copies and dumps recurse once per level.
      if (dom_.level() >= kMaxValueDepth) too_deep();
      dom_.open(std::move(container));
      return true;
    }
    const bool object = container.is_object();
    if (depth_ == 1) {
      root_object_ = object;
      if (!object) enter_events();
      return true;
    }
    if (in_events_ && depth_ == events_depth_ + 1) {
      if (!object) not_an_object();
      event_ = RawEvent{};
      event_.offset = reader_.consumed() - 1;
      event_.index = events_++;
      begin(Capture::Event, std::numeric_limits<size_t>::max(), std::move(container));
    } else if (in_devices_ && depth_ == 3) {
      ++devices_;
      begin(Capture::Device, kMaxMetadataNodes, std::move(container));
    } else if (depth_ == 2 && root_object_ && top_key_ == "traceEvents" && !object) {
      enter_events();
    } else if (depth_ == 2 && root_object_ && top_key_ == "deviceProperties" && !object) {
      in_devices_ = true;
    } else if (depth_ == 2 && root_object_) {
      begin(Capture::Metadata, kMaxMetadataNodes, std::move(container));
    }
    return true;
  }

  bool close() {
    if (capture_ != Capture::None) {
      dom_.close();
      if (depth_ == capture_depth_) finish();
    } else if (in_events_ && depth_ == events_depth_) {
      in_events_ = false;
    } else if (in_devices_ && depth_ == 2) {
      in_devices_ = false;
    }
    --depth_;
    return true;
  }

  void enter_events() {
    in_events_ = saw_events_ = true;
    events_depth_ = depth_;
  }
  void begin(Capture c, size_t limit, json&& container) {
    capture_ = c;
    field_.clear();
    capture_depth_ = depth_;
    dom_.reset(limit);
    dom_.open(std::move(container));
  }
  void finish() {
    const Capture c = capture_;
    capture_ = Capture::None;
    json& value = dom_.root();
    if (c == Capture::Event) {
      event_.obj = std::move(value);
      if (cb_.event) cb_.event(event_);
    } else if (c == Capture::Device) {
      if (cb_.device && !dom_.overflow()) cb_.device(value);
    } else if (cb_.metadata) {
      cb_.metadata(top_key_, dom_.overflow() ? json(nullptr) : value);
    }
  }
  // "traceEvents[12].args: JSON nested deeper than 256 levels", at the bracket that goes past.
  [[noreturn]] void too_deep() const {
    std::string what = capture_ == Capture::Event    ? "traceEvents[" + std::to_string(events_ - 1) + "]"
                       : capture_ == Capture::Device ? "deviceProperties[" + std::to_string(devices_ - 1) + "]"
                                                     : member_name(top_key_);
    if (!field_.empty()) what += "." + member_name(field_);
    throw ImportError(reader_.file(), at_byte(reader_.consumed() - 1),
                      what + ": " + storage::json_too_deep(kMaxValueDepth));
  }
  // A key as the message names it: printable ASCII of at most 64 bytes as it is, anything else
  // as a JSON string (cut), so a key of control bytes or megabytes cannot garble the message.
  static std::string member_name(const std::string& k) {
    const bool plain = !k.empty() && k.size() <= 64 && std::all_of(k.begin(), k.end(), [](char c) {
      return c > 0x20 && c < 0x7f && c != '"' && c != '\\';
    });
    if (plain) return k;
    std::string q = json(k.substr(0, 64)).dump(-1, ' ', true, json::error_handler_t::replace);
    return k.size() > 64 ? q.substr(0, q.size() - 1) + "...\"" : q;
  }
  [[noreturn]] void not_an_object() const {
    throw ImportError(reader_.file(), at_byte(reader_.consumed() - 1), "a traceEvents entry is not a JSON object");
  }

  ChunkReader& reader_;
  const TraceCallbacks& cb_;
  DomBuilder dom_;
  RawEvent event_;
  std::string top_key_;
  std::string field_;  // the key directly inside the value being built (an event's "args")
  size_t events_ = 0, devices_ = 0;  // traceEvents / deviceProperties entries begun
  Capture capture_ = Capture::None;
  size_t depth_ = 0, capture_depth_ = 0, events_depth_ = 0;
  bool root_object_ = false, in_events_ = false, in_devices_ = false, saw_events_ = false;
};

}  // namespace

void read_chrome_trace(const fs::path& file, const TraceCallbacks& callbacks) {
  ChunkReader reader(file, callbacks.progress);
  Handler handler(reader, callbacks);
  json::sax_parse(CharIter{&reader}, CharIter{}, &handler);
  if (reader.truncated())
    throw ImportError(file, at_byte(reader.consumed()), "the gzip stream ends early (truncated file)");
  if (!handler.saw_events())
    throw ImportError(file, "",
                      "no traceEvents array: not a Chrome trace (torch.profiler / Kineto JSON)");
}

std::optional<int64_t> decimal_us_to_ns(std::string_view s) {
  size_t i = 0;
  const bool negative = i < s.size() && s[i] == '-';
  if (negative) ++i;
  // Significant digits as one integer, and the power of ten that scales it to ns.
  __int128 digits = 0;
  int scale = 3, mantissa_digits = 0;
  bool any = false, dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any = true;
    if (digits == 0 && c == '0') {
      if (dot) --scale;
      continue;
    }
    if (++mantissa_digits > 36) return std::nullopt;
    digits = digits * 10 + (c - '0');
    if (dot) --scale;
  }
  if (!any) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool neg_exp = i < s.size() && s[i] == '-';
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    int exp = 0;
    bool exp_digits = false;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      exp_digits = true;
      if (exp < 10000) exp = exp * 10 + (s[i] - '0');
    }
    if (!exp_digits) return std::nullopt;
    scale += neg_exp ? -exp : exp;
  }
  if (i != s.size()) return std::nullopt;
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (digits == 0) return 0;
  for (; scale > 0; --scale) {
    digits *= 10;
    if (digits > kMax) return std::nullopt;
  }
  if (scale < 0) {
    if (scale < -38) return 0;  // below 0.01 ns: the significand has at most 36 digits
    __int128 div = 1;
    for (int k = 0; k < -scale; ++k) div *= 10;
    const __int128 q = digits / div, rem = digits % div;
    digits = q + (2 * rem >= div ? 1 : 0);
  }
  if (digits > kMax) return std::nullopt;
  const auto v = static_cast<int64_t>(digits);
  return negative ? -v : v;
}

}  // namespace hs::importers::kineto
