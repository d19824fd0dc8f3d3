#include "importers/kineto_reader.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "importers/import_error.h"
#include "importers/kineto_text.h"
#include "storage/bounded_json.h"

namespace hs::importers::kineto {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace detail;

namespace {

// Where one value lies in the text. For an event, also its own `ts` / `dur` number texts
// (the last of each, as member() takes them).
struct Extent {
  uint64_t begin = 0, end = 0;
  uint64_t ts_begin = 0, ts_end = 0, dur_begin = 0, dur_end = 0;
};

// One traceEvents entry's text as the scanner found it: where it lies in memory (the window,
// or a batch of the Pipeline; SIMDJSON_PADDING readable bytes follow it either way) and where
// in the trace.
struct EventText {
  const char* text = nullptr;  // its '{'
  uint64_t size = 0;
  uint64_t offset = 0;  // of its '{' in the JSON text
  uint64_t index = 0;   // its position in traceEvents
  uint64_t ts_begin = 0, ts_end = 0, dur_begin = 0, dur_end = 0;  // its ts / dur number texts, from `text`; begin == end: none seen
  std::optional<int64_t> ts_ns, dur_ns;  // decimal_us_to_ns of those texts (nullopt: not a number of µs in int64 ns)
  bool at_text_end = false;  // it ends where the text read so far ended
  bool truncated = false;    // the gzip stream was found truncated by then
};

// Parses events' texts with simdjson into a reused DOM and hands each to the callback.
class EventParser {
 public:
  explicit EventParser(const fs::path& file) : file_(file) {}

  /// Parses the event and hands it to the callback.
  void parse(const EventText& t, const TraceCallbacks& cb) {
    simdjson::dom::element root;
    if (parser_.parse(t.text, t.size, false).get(root)) root = reparsed(t, Where(Where::Kind::Event, t.index));
    deliver(root, t, cb);
  }
  /// Hands the event, parsed as `root` (an object), to the callback.
  void deliver(simdjson::dom::element root, const EventText& t, const TraceCallbacks& cb) const {
    RawEvent e;
    e.obj = root.get_object().value_unsafe();
    e.offset = t.offset;
    e.index = t.index;
    for (const auto field : e.obj)
      if (auto* slot = slot_of(e, field.key)) *slot = field.value;
    e.ts_ns = time(e, e.ts, "ts", t, t.ts_begin, t.ts_end, t.ts_ns);
    e.dur_ns = time(e, e.dur, "dur", t, t.dur_begin, t.dur_end, t.dur_ns);
    if (cb.event) cb.event(e);
  }

 private:
  // The member of `e` a key of the event fills; nullptr for the others. By length first: this
  // runs for every member of every event.
  static std::optional<simdjson::dom::element>* slot_of(RawEvent& e, std::string_view k) {
    switch (k.size()) {
      case 2: return k == "ph" ? &e.ph : k == "ts" ? &e.ts : k == "id" ? &e.id : nullptr;
      case 3: return k == "cat" ? &e.cat : k == "pid" ? &e.pid : k == "tid" ? &e.tid : k == "dur" ? &e.dur : nullptr;
      case 4: return k == "name" ? &e.name : k == "args" ? &e.args : nullptr;
      default: return nullptr;
    }
  }

  // An event simdjson refuses: not valid JSON (nlohmann names the byte and what is wrong), or
  // an integer past 64 bits, which simdjson does not read and JSON allows: such an event is
  // read as nlohmann reads it (the integer as the nearest double) and written back for simdjson.
  simdjson::dom::element reparsed(const EventText& t, const Where& where) {
    const json v = parse_text(file_, t.text, t.offset, t.offset + t.size, nullptr, &where, t.at_text_end, t.truncated);
    reparsed_ = simdjson::padded_string(v.dump(-1, ' ', false, json::error_handler_t::replace));
    simdjson::dom::element root;
    if (const auto err = parser_.parse(reparsed_).get(root))
      throw ImportError(file_, at_byte(t.offset),
                        where_name(where) + ": a value hookscope's JSON parser (simdjson) refuses: " +
                            simdjson::error_message(err));
    return root;
  }

  // The event's `key` in ns from the number's own text (the scanner's, converted as it found
  // it: `scanned`); nullopt when absent or not a number.
  std::optional<int64_t> time(const RawEvent& e, const std::optional<simdjson::dom::element>& v, std::string_view key,
                              const EventText& t, uint64_t begin, uint64_t end,
                              std::optional<int64_t> scanned) const {
    if (!v || !v->is_number()) return std::nullopt;
    std::string_view text;
    char digits[64];
    if (begin < end) {
      if (scanned) return scanned;
      text = std::string_view(t.text + begin, end - begin);
    } else {  // not seen by the scanner (an event reparsed()): the parsed number, as its shortest text
      const auto r = v->is_int64()    ? std::to_chars(digits, digits + sizeof digits, v->get_int64().value_unsafe())
                     : v->is_uint64() ? std::to_chars(digits, digits + sizeof digits, v->get_uint64().value_unsafe())
                                      : std::to_chars(digits, digits + sizeof digits, v->get_double().value_unsafe());
      text = std::string_view(digits, static_cast<size_t>(r.ptr - digits));
    }
    const auto ns = decimal_us_to_ns(text);
    if (!ns)
      throw ImportError(file_, at_byte(e.offset),
                        "the event's '" + std::string(key) + "' is " + std::string(text.substr(0, 64)) +
                            ": not a number of µs that fits int64 ns");
    return ns;
  }

  const fs::path& file_;
  simdjson::dom::parser parser_;
  simdjson::padded_string reparsed_;  // the text of the last event reparsed()
};

// A large trace is read in two stages on two threads: the Reader (reading, inflating,
// scanning) on a thread of its own, handing over batches of about kBatchBytes of events with
// the other top-level values and the progress in their places among them; the caller's thread
// runs the callbacks, in file order. The reading thread also parses each batch: its events'
// texts, copied back to back as the entries of one JSON array, in one simdjson call into the
// batch's own document; a batch simdjson refuses as a whole (an event that is not valid JSON,
// an integer past 64 bits) is parsed event by event on the caller's thread instead, where
// each event's error is raised in its place. At most kInFlight batches wait, so memory stays
// a few batches. What the reading thread throws reaches the caller after every event before
// it, as where it would have thrown in one stage.
class Pipeline {
 public:
  static constexpr size_t kBatchBytes = size_t{256} << 10;
  static constexpr size_t kInFlight = 3;
  struct Stopped {};  // thrown on the reading thread once the caller has stopped

  // ---- the reading thread ----
  void event(const EventText& t) {
    Batch& b = *cur_;
    b.reserve(t.size + 2);
    b.text[b.used++] = b.events.empty() ? '[' : ',';
    std::memcpy(b.text.get() + b.used, t.text, t.size);
    b.at.push_back(b.used);
    b.events.push_back(t);
    b.used += t.size;
    if (b.used >= kBatchBytes) push(false);
  }
  void device(json v) { cur_->others.push_back({cur_->events.size(), Other::Kind::Device, "", std::move(v), 0, 0}); }
  void metadata(std::string key, json v) {
    cur_->others.push_back({cur_->events.size(), Other::Kind::Metadata, std::move(key), std::move(v), 0, 0});
  }
  void progress(uint64_t done, uint64_t total) {
    cur_->others.push_back({cur_->events.size(), Other::Kind::Progress, "", json(), done, total});
  }
  /// Runs the Reader of `file` to its end, then hands over the last batch (with what it threw).
  void produce(const fs::path& file, const TraceCallbacks& cb);

  // ---- the caller's thread ----
  /// Parses and delivers every batch until the last; rethrows the reading thread's error in its place.
  void consume(const fs::path& file, const TraceCallbacks& cb);
  /// Makes the reading thread stop at its next hand-over.
  void stop() {
    {
      std::lock_guard lk(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }

 private:
  struct Other {
    size_t before;  // delivered before the batch's event of this index
    enum class Kind : uint8_t { Device, Metadata, Progress } kind;
    std::string key;
    json value;
    uint64_t done, total;
  };
  struct Batch {
    std::unique_ptr<char[]> text;  // the events' texts, back to back, SIMDJSON_PADDING bytes spare
    size_t cap = 0, used = 0;
    std::vector<size_t> at;          // where each event's text begins in `text`
    std::vector<EventText> events;   // their `text` pointers are set when delivered
    std::vector<Other> others;
    std::exception_ptr error;
    bool last = false;
    simdjson::dom::document doc;  // `text` as one array, when `parsed`
    bool parsed = false;
    void reserve(size_t more) {
      if (used + more + simdjson::SIMDJSON_PADDING <= cap) return;
      const size_t n = std::max({2 * cap, used + more + simdjson::SIMDJSON_PADDING, kBatchBytes + simdjson::SIMDJSON_PADDING});
      auto bigger = std::make_unique_for_overwrite<char[]>(n);
      if (used) std::memcpy(bigger.get(), text.get(), used);
      text = std::move(bigger);
      cap = n;
    }
    void clear() {
      used = 0;
      at.clear();
      events.clear();
      others.clear();
      parsed = false;
      // A batch that held one huge event (up to kMaxValueBytes) gives that memory back: its
      // text, and its document (simdjson's tape takes several bytes per byte of text).
      if (cap > 4 * kBatchBytes) text.reset(), cap = 0;
      if (doc.capacity() > 4 * kBatchBytes) doc = simdjson::dom::document();
    }
    // Closes the array and parses it into `doc` (parsed: simdjson took it, one entry per event).
    void parse(simdjson::dom::parser& parser) {
      if (events.empty()) return;
      text[used++] = ']';
      simdjson::dom::element root;
      simdjson::dom::array entries;
      parsed = !parser.parse_into_document(doc, text.get(), used, false).get(root) && !root.get_array().get(entries) &&
               entries.size() == events.size();
    }
  };

  void push(bool last) {
    cur_->parse(parser_);
    if (parser_.capacity() > 4 * kBatchBytes) parser_ = simdjson::dom::parser();  // as Batch::clear()
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stopped_ || full_.size() < kInFlight; });
    if (stopped_) throw Stopped{};
    cur_->last = last;
    full_.push_back(std::move(cur_));
    if (!free_.empty()) {
      cur_ = std::move(free_.back());
      free_.pop_back();
    }
    lk.unlock();
    cv_.notify_all();
    if (!cur_ && !last) cur_ = std::make_unique<Batch>();
  }

  std::unique_ptr<Batch> cur_ = std::make_unique<Batch>();  // the reading thread's
  simdjson::dom::parser parser_;                              // the reading thread's
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> full_;   // handed over, in order
  std::vector<std::unique_ptr<Batch>> free_;  // delivered, for reuse
  bool stopped_ = false;
};

class Reader {
 public:
  /// `pipe`: hand the events, other values and progress to it (on the Pipeline's reading
  /// thread); nullptr: parse the events here and run the callbacks.
  Reader(const fs::path& file, const TraceCallbacks& cb, Pipeline* pipe)
      : w_(file, pipe ? [pipe](uint64_t done, uint64_t total) { pipe->progress(done, total); } : cb.progress,
           kMaxValueBytes),
        cb_(cb),
        pipe_(pipe),
        events_parser_(w_.file()) {}

  void run() {
    const int c = peek();
    if (c < 0) ends_early();
    if (c == 0xEF && pos_ == 0 && (w_.end() >= 3 || w_.more(0)) && w_.end() >= 3 &&
        std::string_view(w_.ptr(0), 3) == "\xEF\xBB\xBF")
      throw ImportError(w_.file(), at_byte(0),
                        "the file begins with a UTF-8 byte-order mark, which JSON text may not (RFC 8259 "
                        "section 8.1; Python's json.load refuses it too): save it without one");
    if (c == '{') {
      top_object();
    } else if (c == '[') {
      events_array();
    } else {  // a scalar: valid JSON is still no trace
      const Extent x = scan(Where(Where::Kind::Root), false);
      (void)parse_nlohmann(x, nullptr);
    }
    if (peek() >= 0) syntax(pos_, "text after the end of the top-level value");
    if (w_.truncated()) throw ImportError(w_.file(), at_byte(pos_), "the gzip stream ends early (truncated file)");
    if (!saw_events_)
      throw ImportError(w_.file(), "", "no traceEvents array: not a Chrome trace (torch.profiler / Kineto JSON)");
  }

 private:
  // ---- the top level ----------------------------------------------------------------------
  void top_object() {
    ++pos_;  // '{'
    int c = peek();
    if (c == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      if (c < 0) ends_early();
      if (c != '"') syntax(pos_, "a member name (a string) was expected");
      const std::string key = parse_nlohmann(scan(Where(Where::Kind::Root), false), nullptr).get<std::string>();
      c = peek();
      if (c < 0) ends_early();
      if (c != ':') syntax(pos_, "':' was expected after the member name");
      ++pos_;
      c = peek();
      if (c < 0) ends_early();
      if (key == "traceEvents" && c == '[')
        events_array();
      else if (key == "deviceProperties" && c == '[')
        devices_array();
      else
        metadata(key);
      c = peek();
      if (c == ',') {
        ++pos_;
        c = peek();
        continue;
      }
      if (c == '}') {
        ++pos_;
        return;
      }
      if (c < 0) ends_early();
      syntax(pos_, "',' or '}' was expected after the member's value");
    }
  }

  // `[` entry, ... `]` with pos_ at the '['; `entry` reads one (pos_ at its first byte).
  template <class Entry>
  void array(Entry&& entry) {
    ++pos_;  // '['
    int c = peek();
    if (c == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      if (c < 0) ends_early();
      entry(c);
      c = peek();
      if (c == ',') {
        ++pos_;
        c = peek();
        if (c == ']') syntax(pos_, "a value was expected after ','");
        continue;
      }
      if (c == ']') {
        ++pos_;
        return;
      }
      if (c < 0) ends_early();
      syntax(pos_, "',' or ']' was expected after the entry");
    }
  }

  void events_array() {
    saw_events_ = true;
    array([&](int c) {
      const Where where(Where::Kind::Event, events_++);
      if (c != '{') {  // not valid JSON, or valid and not an object
        const Extent x = scan(where, false);
        (void)parse_nlohmann(x, nullptr, &where);
        throw ImportError(w_.file(), at_byte(x.begin), "a traceEvents entry is not a JSON object");
      }
      event(where);
    });
  }

  void devices_array() {
    array([&](int) {
      const Where where(Where::Kind::Device, devices_++);
      json v = bounded(scan(where, false), where);
      if (v.is_null()) return;
      if (pipe_)
        pipe_->device(std::move(v));
      else if (cb_.device)
        cb_.device(v);
    });
  }

  void metadata(const std::string& key) {
    const Where where(Where::Kind::Member, 0, key);
    json v = bounded(scan(where, false), where);
    if (pipe_)
      pipe_->metadata(key, std::move(v));
    else if (cb_.metadata)
      cb_.metadata(key, v);
  }

  // ---- one event ----------------------------------------------------------------------------
  void event(const Where& where) {
    const Extent x = scan(where, true);
    EventText t;
    t.text = w_.ptr(x.begin);
    t.size = x.end - x.begin;
    t.offset = x.begin;
    t.index = where.index;
    if (x.ts_begin < x.ts_end) {
      t.ts_begin = x.ts_begin - x.begin, t.ts_end = x.ts_end - x.begin;
      t.ts_ns = decimal_us_to_ns(std::string_view(w_.ptr(x.ts_begin), x.ts_end - x.ts_begin));
    }
    if (x.dur_begin < x.dur_end) {
      t.dur_begin = x.dur_begin - x.begin, t.dur_end = x.dur_end - x.begin;
      t.dur_ns = decimal_us_to_ns(std::string_view(w_.ptr(x.dur_begin), x.dur_end - x.dur_begin));
    }
    t.at_text_end = x.end == w_.end();
    t.truncated = w_.truncated();
    if (pipe_)
      pipe_->event(t);
    else
      events_parser_.parse(t, cb_);
  }

  // ---- scanning -------------------------------------------------------------------------------
  // The next non-blank byte (pos_ moves to it); -1 at the end of the text.
  int peek() {
    for (;;) {
      for (; pos_ < w_.end(); ++pos_) {
        const char c = *w_.ptr(pos_);
        if (!is_blank(c)) return static_cast<unsigned char>(c);
      }
      if (!w_.more(pos_)) return -1;
    }
  }

  // Finds the end of the value that begins at pos_ (a non-blank byte) and moves pos_ past it;
  // the window keeps it whole. Brackets are counted, not matched: the parser that reads the
  // value checks the rest. Nesting past kMaxValueDepth, a string past kMaxStringBytes and a
  // value past kMaxValueBytes are refused here, before anything holds or builds them.
  // `times`: note the first level's `ts` / `dur` number texts.
  Extent scan(const Where& where, bool times) {
    Extent x;
    x.begin = pos_;
    const char first = *w_.ptr(pos_);
    if (first != '{' && first != '[' && first != '"') return scan_scalar(where, x);
    Scan st(where, x, times);
    uint64_t p = pos_;
    for (;;) {
      if (p == w_.end()) {
        if (st.in_string && p - st.string_begin > kMaxStringBytes) too_long_string(st.string_begin);
        if (p - x.begin > kMaxValueBytes) too_large(where, x.begin);
        if (!w_.more(x.begin)) ends_early();
      }
      p = scan_blocks(st, p);
      if (!st.done) p = scan_bytes(st, p, std::min<uint64_t>(w_.end(), p + kBlock));
      if (st.done) {
        if (p - x.begin > kMaxValueBytes) too_large(where, x.begin);
        return finish(x, p);
      }
    }
  }

  // One scan's state: nesting, strings, the first level's member names.
  struct Scan {
    Scan(const Where& w, Extent& e, bool t) : where(w), x(e), times(t) {}
    const Where& where;
    Extent& x;
    bool times;
    size_t depth = 0;
    bool in_string = false, escape = false, object = false, name_next = false, done = false;
    uint64_t string_begin = 0, name_begin = 0, name_end = 0;
    std::string decoded;       // the last first-level name when it has escapes ("t\u0073" -> "ts")
    bool escaped = false;
    uint64_t* slot = nullptr;  // x.ts_end / x.dur_end while a first-level ts / dur value is read
  };

  // A '"' that is not escaped, at `at`.
  void quote(Scan& st, uint64_t at) {
    if (!st.in_string) {
      st.in_string = true;
      st.string_begin = at;
      return;
    }
    st.in_string = false;
    if (at - st.string_begin - 1 > kMaxStringBytes) too_long_string(st.string_begin);
    if (st.depth == 0) st.done = true;  // the value is one string
    if (st.depth != 1 || !st.name_next) return;
    st.name_begin = st.string_begin + 1;
    st.name_end = at;
    st.name_next = false;
    st.escaped = std::memchr(w_.ptr(st.name_begin), '\\', st.name_end - st.name_begin) != nullptr;
    if (st.escaped) st.decoded = depth_name(st.name_begin, st.name_end, true);
  }

  // One of {}[],: outside strings, at `at`.
  void structural(Scan& st, char c, uint64_t at) {
    if (c == '{' || c == '[') {
      if (st.depth == kMaxValueDepth) too_deep(st.where, depth_name(st.name_begin, st.name_end, st.object), at);
      if (++st.depth == 1) st.name_next = st.object = c == '{';
    } else if (c == '}' || c == ']') {
      if (st.depth == 1 && st.slot) *std::exchange(st.slot, nullptr) = at;
      if (--st.depth == 0) st.done = true;
    } else if (c == ',' && st.depth == 1) {
      if (st.slot) *std::exchange(st.slot, nullptr) = at;
      st.name_next = st.object;
    } else if (c == ':' && st.depth == 1 && st.object && !st.name_next && st.times && !st.slot) {
      // The colon after this object's last name (a ':' in an array, or before any name, is bad
      // JSON that the parser names: there is no name to look at, and the offsets of none would
      // point before the window: the kineto_trace fuzz target's UBSan finding).
      const std::string_view n =
          st.escaped ? std::string_view(st.decoded) : std::string_view(w_.ptr(st.name_begin), st.name_end - st.name_begin);
      uint64_t* begin = n == "ts" ? &st.x.ts_begin : n == "dur" ? &st.x.dur_begin : nullptr;
      if (!begin) return;
      *begin = at + 1;
      st.slot = n == "ts" ? &st.x.ts_end : &st.x.dur_end;
    }
  }

  // Byte by byte from `p` to `end` (or the value's end): returns where it stopped.
  uint64_t scan_bytes(Scan& st, uint64_t p, uint64_t end) {
    for (; p < end && !st.done; ++p) {
      const char c = *w_.ptr(p);
      if (st.in_string) {
        if (st.escape)
          st.escape = false;
        else if (c == '\\')
          st.escape = true;
        else if (c == '"')
          quote(st, p);
      } else if (c == '"') {
        quote(st, p);
      } else if (kStructural[static_cast<unsigned char>(c)]) {
        structural(st, c, p);
      }
    }
    return p;
  }

  // kBlock bytes at a time while whole blocks are in the window and hold no backslash (the
  // bytes after one are left to scan_bytes): the block's quotes and the structural bytes
  // outside its strings, found as bit masks, are the only bytes looked at.
  uint64_t scan_blocks(Scan& st, uint64_t p) {
    while (!st.escape && w_.end() - p >= kBlock) {
      const Masks m = masks(w_.ptr(p));
      if (m.backslash) return p;
      const uint64_t inside = prefix_xor(m.quote) ^ (st.in_string ? ~uint64_t{0} : 0);
      for (uint64_t bits = m.quote | (m.structural & ~inside); bits; bits &= bits - 1) {
        const int i = __builtin_ctzll(bits);
        const char c = w_.ptr(p)[i];
        if (c == '"') {
          // A string that is no first-level name and closes in this block (no backslash here:
          // its closing quote is the next one) is shorter than a block: both quotes at once.
          const uint64_t after = i == 63 ? 0 : m.quote & (~uint64_t{0} << (i + 1));
          if (!st.in_string && after && (st.depth >= 2 || (st.depth == 1 && !st.name_next))) {
            bits &= ~(after & -after);
            continue;
          }
          quote(st, p + i);
        } else {
          structural(st, c, p + i);
        }
        if (st.done) return p + i + 1;
      }
      p += kBlock;
    }
    return p;
  }

  // A scalar (a number, true, false, null) runs while its bytes can be one's: letters, digits,
  // '+', '-', '.'. The parser judges what it holds; a byte no value may begin with is named here.
  Extent scan_scalar(const Where& where, Extent& x) {
    uint64_t p = pos_;
    for (;;) {
      for (; p < w_.end(); ++p) {
        const auto c = static_cast<unsigned char>(*w_.ptr(p));
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
            c == '.')
          continue;
        if (p == x.begin) syntax(p, not_a_value_start(c));
        if (p - x.begin > kMaxValueBytes) too_large(where, x.begin);
        return finish(x, p);
      }
      if (p - x.begin > kMaxValueBytes) too_large(where, x.begin);
      if (!w_.more(x.begin)) return finish(x, p);
    }
  }

  Extent finish(Extent& x, uint64_t end) {
    x.end = end;
    pos_ = end;
    // A first-level number's text without the blanks around it.
    auto trim = [&](uint64_t& b, uint64_t& e) {
      while (b < e && is_blank(*w_.ptr(b))) ++b;
      while (e > b && is_blank(*w_.ptr(e - 1))) --e;
    };
    trim(x.ts_begin, x.ts_end);
    trim(x.dur_begin, x.dur_end);
    return x;
  }

  // ---- parsing the small values ---------------------------------------------------------------
  json parse_nlohmann(const Extent& x, size_t* nodes, const Where* where = nullptr) const {
    return parse_text(w_.file(), w_.ptr(x.begin), x.begin, x.end, nodes, where, x.end == w_.end(), w_.truncated());
  }
  json bounded(const Extent& x, const Where& where) const {
    size_t nodes = 0;
    json v = parse_nlohmann(x, &nodes, &where);
    return nodes > kMaxMetadataNodes ? json(nullptr) : v;
  }

  // ---- errors -----------------------------------------------------------------------------------
  // The first-level member a too-deep value lies in ("args"), "" in an array.
  std::string depth_name(uint64_t begin, uint64_t end, bool object) const {
    if (!object || begin == end) return "";
    const std::string raw(w_.ptr(begin), end - begin);
    if (raw.find('\\') == std::string::npos) return raw;
    try {
      return json::parse("\"" + raw + "\"").get<std::string>();
    } catch (const json::exception&) {
      return raw;
    }
  }
  [[noreturn]] void too_deep(const Where& where, const std::string& field, uint64_t at) const {
    const std::string what = where_name(where) + (field.empty() ? "" : "." + member_name(field));
    throw ImportError(w_.file(), at_byte(at), what + ": " + storage::json_too_deep(kMaxValueDepth));
  }
  [[noreturn]] void too_long_string(uint64_t at) const {
    throw ImportError(w_.file(), at_byte(at),
                      "a string longer than " + std::to_string(kMaxStringBytes >> 20) +
                          " MiB: not a trace torch.profiler writes (hookscope reads strings up to that size)");
  }
  [[noreturn]] void too_large(const Where& where, uint64_t at) const {
    throw ImportError(w_.file(), at_byte(at),
                      where_name(where) + " is larger than " + std::to_string(kMaxValueBytes >> 20) +
                          " MiB of JSON text: not a trace torch.profiler writes");
  }
  static std::string not_a_value_start(unsigned char c) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", c);
    const std::string byte = c == 0 ? "a NUL byte (0x00)"
                             : (c < 0x20 || c >= 0x7F) ? std::string("the byte ") + hex
                                                       : std::string("'") + static_cast<char>(c) + "' (" + hex + ")";
    return byte + " where a value should begin" + (c == 0 ? ": not JSON text (a file of zeros or a binary file?)" : "");
  }
  [[noreturn]] void syntax(uint64_t at, const std::string& what) const {
    throw ImportError(w_.file(), at_byte(at), "not valid JSON: syntax error: " + what);
  }
  [[noreturn]] void ends_early() const { text_ends_early(w_.file(), w_.end(), w_.truncated()); }

  Window w_;
  const TraceCallbacks& cb_;
  Pipeline* pipe_;
  EventParser events_parser_;  // unused with a Pipeline
  uint64_t pos_ = 0;                  // offset of the next byte to read
  uint64_t events_ = 0, devices_ = 0;  // traceEvents / deviceProperties entries begun
  bool saw_events_ = false;
};

}  // namespace


namespace {
void Pipeline::produce(const fs::path& file, const TraceCallbacks& cb) {
  std::exception_ptr error;
  try {
    Reader(file, cb, this).run();
  } catch (const Stopped&) {
    return;
  } catch (...) {
    error = std::current_exception();
  }
  try {
    cur_->error = error;
    push(true);
  } catch (const Stopped&) {
  }
}

void Pipeline::consume(const fs::path& file, const TraceCallbacks& cb) {
  EventParser parser(file);
  for (;;) {
    std::unique_ptr<Batch> b;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return !full_.empty(); });
      b = std::move(full_.front());
      full_.pop_front();
    }
    cv_.notify_all();
    size_t o = 0;
    auto others_before = [&](size_t i) {
      for (; o < b->others.size() && b->others[o].before <= i; ++o) {
        const Other& x = b->others[o];
        if (x.kind == Other::Kind::Device && cb.device) cb.device(x.value);
        if (x.kind == Other::Kind::Metadata && cb.metadata) cb.metadata(x.key, x.value);
        if (x.kind == Other::Kind::Progress && cb.progress) cb.progress(x.done, x.total);
      }
    };
    std::optional<simdjson::dom::array::iterator> entry;  // the batch's array, when parsed
    if (b->parsed) entry = b->doc.root().get_array().value_unsafe().begin();
    for (size_t i = 0; i < b->events.size(); ++i) {
      others_before(i);
      EventText& t = b->events[i];
      t.text = b->text.get() + b->at[i];
      if (entry)
        parser.deliver(*(*entry)++, t, cb);
      else
        parser.parse(t, cb);
    }
    others_before(b->events.size());
    if (b->error) std::rethrow_exception(b->error);
    if (b->last) return;
    b->clear();
    {
      std::lock_guard lk(mu_);
      free_.push_back(std::move(b));
    }
  }
}
}  // namespace

void read_chrome_trace(const fs::path& file, const TraceCallbacks& callbacks, uint64_t pipeline_bytes) {
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec || size <= pipeline_bytes) {  // (a file that cannot be read: the Reader says why)
    Reader(file, callbacks, nullptr).run();
    return;
  }
  Pipeline pipe;
  std::thread reading([&] { pipe.produce(file, callbacks); });
  struct Join {
    Pipeline& pipe;
    std::thread& thread;
    ~Join() {
      pipe.stop();
      thread.join();
    }
  } join{pipe, reading};
  pipe.consume(file, callbacks);
}


}  // namespace hs::importers::kineto
