#include "importers/kineto_trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>
#include <unordered_map>
#include <string_view>

#include "importers/kineto_reader.h"
#include "importers/kineto_rows.h"
#include "storage/bounded_json.h"
#include "tracer/cupti_decode.h"
#include "tracer/kind_names.h"

namespace hs::importers {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using kineto::RawEvent;
using Element = simdjson::dom::element;
using Object = simdjson::dom::object;
using Args = std::optional<Object>;  // an event's `args` object, when it has one

namespace {

constexpr std::string_view kRegionPrefix = "Torch-Compiled Region: ";
constexpr std::string_view kHookscopePrefix = "hookscope::";
constexpr std::string_view kGraphBreakPrefix = "hookscope::graph_break";
// hookscope export's instants of Dynamo's graph-break records: skipped, the trace's
// "hookscope"."facts" carries the log's records (cli/import_command.cpp takes them).
constexpr std::string_view kDynamoBreakPrefix = "hookscope::dynamo_graph_break";
constexpr std::string_view kMemoryPrefix = "hookscope::memory";
constexpr std::string_view kModuleComputePrefix = "hookscope::module_compute";

// ---- reading fields ---------------------------------------------------------------------
Args args_of(const RawEvent& e) {
  return e.args && e.args->is_object() ? Args(e.args->get_object().value_unsafe()) : std::nullopt;
}
/// An integer that fits int64 (JSON does not say how wide its numbers are; a wider one is none).
std::optional<int64_t> int_of(const std::optional<Element>& v) {
  if (!v || !v->is_int64()) return std::nullopt;
  return v->get_int64().value_unsafe();
}
std::optional<int64_t> int_member(Object o, std::string_view key) { return int_of(kineto::member(o, key)); }
std::optional<int64_t> arg_int(const Args& a, std::string_view key) {
  return a ? int_member(*a, key) : std::nullopt;
}
std::string_view str_of(const std::optional<Element>& v) {
  return v && v->is_string() ? v->get_string().value_unsafe() : std::string_view();
}
std::string_view str_field(Object o, std::string_view key) { return str_of(kineto::member(o, key)); }
std::string_view str_field(const Args& a, std::string_view key) { return a ? str_field(*a, key) : std::string_view(); }
std::string_view str_field(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? std::string_view(it->get_ref<const std::string&>()) : std::string_view();
}
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// A string as JSON text: quoted, escaped as nlohmann and simdjson write strings. Runs of
/// bytes that need no escape are appended whole.
void append_string(std::string& out, std::string_view k) {
  out += '"';
  size_t plain = 0;  // where the run of bytes not yet appended begins
  for (size_t i = 0; i < k.size(); ++i) {
    const char c = k[i];
    if (static_cast<unsigned char>(c) >= 0x20 && c != '"' && c != '\\') continue;
    out.append(k.data() + plain, i - plain);
    plain = i + 1;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
      continue;
    }
    static constexpr char kShort[] = "btn\0fr";  // \b \t \n \f \r for 0x08 to 0x0d
    const int s = c - '\b';
    if (s >= 0 && s <= 5 && kShort[s] != '\0') {
      out += '\\';
      out += kShort[s];
    } else {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(c));
      out += u;
    }
  }
  out.append(k.data() + plain, k.size() - plain);
  out += '"';
}
/// A value as minified JSON text (numbers as simdjson writes them), into `out`.
void append_json(std::string& out, Element v) {
  char digits[24];
  switch (v.type()) {
    case simdjson::dom::element_type::STRING: append_string(out, v.get_string().value_unsafe()); break;
    case simdjson::dom::element_type::INT64: {
      const auto r = std::to_chars(digits, digits + sizeof digits, v.get_int64().value_unsafe());
      out.append(digits, r.ptr);
      break;
    }
    case simdjson::dom::element_type::UINT64: {
      const auto r = std::to_chars(digits, digits + sizeof digits, v.get_uint64().value_unsafe());
      out.append(digits, r.ptr);
      break;
    }
    case simdjson::dom::element_type::BOOL: out += v.get_bool().value_unsafe() ? "true" : "false"; break;
    case simdjson::dom::element_type::NULL_VALUE: out += "null"; break;
    case simdjson::dom::element_type::ARRAY: {
      out += '[';
      bool first = true;
      const simdjson::dom::array items = v.get_array().value_unsafe();  // named: the range outlives the result
      for (const Element x : items) {
        if (!std::exchange(first, false)) out += ',';
        append_json(out, x);
      }
      out += ']';
      break;
    }
    case simdjson::dom::element_type::OBJECT: {
      out += '{';
      bool first = true;
      const Object members = v.get_object().value_unsafe();
      for (const auto field : members) {
        if (!std::exchange(first, false)) out += ',';
        append_string(out, field.key);
        out += ':';
        append_json(out, field.value);
      }
      out += '}';
      break;
    }
    case simdjson::dom::element_type::DOUBLE: out += simdjson::to_string(v); break;
  }
}

/// A slice's args as CPU_OPS.argsId keeps them: without the ids that have columns of their own
/// (External id, Sequence number) and the per-event indexes that only number the file's events
/// (Ev Idx, Python id, Python parent id). What is left (shapes, types, strides, concrete inputs)
/// repeats across events, so the capture stores each distinct args text once. "" when empty.
/// The text is minified JSON, members in file order; a name given twice appears once, where it
/// first appears, with its last value (kineto::member). Written into `out`; `members` is scratch
/// (both reused from event to event).
using Members = std::vector<std::pair<std::string_view, Element>>;
std::string_view kept_args(const Args& a, std::string& out, Members& members) {
  static constexpr std::string_view kDropped[] = {"External id", "Sequence number", "Ev Idx", "Python id",
                                                  "Python parent id"};
  out.clear();
  if (!a) return out;
  // Each name's last value, written where the name first appears: a name repeated (rare) is
  // found through a map once an object has more than a few members.
  members.clear();
  for (const auto field : *a) members.emplace_back(field.key, field.value);
  auto dropped = [](std::string_view k) {
    return std::find(std::begin(kDropped), std::end(kDropped), k) != std::end(kDropped);
  };
  bool repeated = false;  // a name given twice (rare): then the slower paths below
  for (size_t i = 0; i < members.size() && members.size() <= 16 && !repeated; ++i)
    for (size_t k = i + 1; k < members.size() && !repeated; ++k) repeated = members[k].first == members[i].first;
  if (!repeated && members.size() <= 16) {
    for (const auto& [k, v] : members) {
      if (dropped(k)) continue;
      out += out.empty() ? '{' : ',';
      append_string(out, k);
      out += ':';
      append_json(out, v);
    }
    if (!out.empty()) out += '}';
    return out;
  }
  std::unordered_map<std::string_view, size_t> last;
  if (members.size() > 16)
    for (size_t i = 0; i < members.size(); ++i) last[members[i].first] = i;
  auto index_of_last = [&](size_t i) {
    if (members.size() > 16) return last[members[i].first];
    size_t j = i;
    for (size_t k = i + 1; k < members.size(); ++k)
      if (members[k].first == members[i].first) j = k;
    return j;
  };
  auto first_seen = [&](size_t i) {
    if (members.size() > 16) return last.count(members[i].first) && last.at(members[i].first) != SIZE_MAX;
    for (size_t k = 0; k < i; ++k)
      if (members[k].first == members[i].first) return false;
    return true;
  };
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string_view k = members[i].first;
    if (dropped(k) || !first_seen(i)) continue;
    const size_t j = index_of_last(i);
    if (members.size() > 16) last[k] = SIZE_MAX;  // written: later copies are skipped
    out += out.empty() ? '{' : ',';
    append_string(out, k);
    out += ':';
    append_json(out, members[j].second);
  }
  if (!out.empty()) out += '}';
  return out;
}

// ---- GPU record names, as libkineto writes them -------------------------------------------
/// Kineto's ten copy kinds ("HtoD", ... "PtoP"), and the Uvm ones hookscope's export writes.
tracer::MemcpyKind memcpy_kind(std::string_view s) {
  return tracer::value_named(tracer::kMemcpyKindNames, s, tracer::MemcpyKind::Unknown);
}
tracer::MemKind mem_kind(std::string_view s) {
  return tracer::value_named(tracer::kMemKindNames, s, tracer::MemKind::Unknown);
}
/// "Memcpy HtoD (Pageable -> Device)" -> {"HtoD", "Pageable", "Device"}; "Memset (Device)" -> {"", "Device", ""}.
struct GpuName {
  std::string_view kind, src, dst;
};
GpuName parse_gpu_name(std::string_view name) {
  GpuName g;
  const size_t open = name.find('('), close = name.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return g;
  std::string_view head = name.substr(0, open), inner = name.substr(open + 1, close - open - 1);
  if (const size_t sp = head.find(' '); sp != std::string_view::npos) {
    g.kind = head.substr(sp + 1);
    while (!g.kind.empty() && g.kind.back() == ' ') g.kind.remove_suffix(1);
  }
  if (const size_t arrow = inner.find(" -> "); arrow != std::string_view::npos) {
    g.src = inner.substr(0, arrow);
    g.dst = inner.substr(arrow + 4);
  } else {
    g.src = inner;
  }
  return g;
}
/// The logical device of a '[memory]' instant: "cpu", "0" (CUDA / ROCm), else "type<T>:<id>".
std::string memory_device(int64_t type, int64_t id) {
  if (type == 0) return "cpu";                           // c10::DeviceType::CPU
  if (type == 1 || type == 6) return std::to_string(id);  // CUDA, HIP
  return "type" + std::to_string(type) + ":" + std::to_string(id);
}

// ---- hookscope:: ranges ----------------------------------------------------------------------
/// "hookscope::WHAT key=value ..." split into its kind and keys (values never contain spaces).
/// Throws ImportError naming the file and the event's byte offset for a token that is not
/// key=value, and through text() / number() for a missing key or a bad number.
class RangeKeys {
 public:
  RangeKeys(const fs::path& file, const RawEvent& e, std::string_view name) : file_(file), e_(e), name_(name) {
    std::string_view rest = name.substr(kHookscopePrefix.size());
    const size_t sp = rest.find(' ');
    what_ = std::string(rest.substr(0, sp));
    rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
    while (!rest.empty()) {
      const size_t next = rest.find(' ');
      const std::string_view token = rest.substr(0, next);
      rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
      if (token.empty()) continue;
      const size_t eq = token.find('=');
      if (eq == std::string_view::npos || eq == 0)
        throw ImportError(file_, "byte " + std::to_string(e_.offset),
                          "the range '" + std::string(name_) + "': '" + std::string(token) + "' is not key=value");
      kv_[token.substr(0, eq)] = token.substr(eq + 1);
    }
  }
  const std::string& what() const { return what_; }
  /// The range's Kineto "External id" (0 when it has none).
  int64_t external_id() const { return arg_int(args_of(e_), "External id").value_or(0); }
  [[noreturn]] void fail(const std::string& message) const {
    throw ImportError(file_, "byte " + std::to_string(e_.offset), "the range 'hookscope::" + what_ + "': " + message);
  }
  std::string_view text(std::string_view key) const {
    auto it = kv_.find(key);
    if (it == kv_.end())
      throw ImportError(file_, "byte " + std::to_string(e_.offset),
                        "the range 'hookscope::" + what_ + "' has no '" + std::string(key) + "=' (docs/torch-engine.md)");
    return it->second;
  }
  int64_t number(std::string_view key) const {
    const std::string_view v = text(key);
    int64_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size())
      fail("'" + std::string(key) + "=" + std::string(v) + "' is not an integer");
    return n;
  }
  /// number(key), which must not be negative (a byte count).
  int64_t count(std::string_view key) const {
    const int64_t n = number(key);
    if (n < 0) fail("'" + std::string(key) + "=" + std::to_string(n) + "' is negative");
    return n;
  }
  bool flag(std::string_view key) const {
    auto it = kv_.find(key);
    return it != kv_.end() && (it->second == "1" || it->second == "true" || it->second == "True");
  }
  /// The `module` key, with the root module's '<root>' as ''.
  std::string_view module() const {
    const std::string_view m = text("module");
    return m == "<root>" ? std::string_view() : m;
  }

 private:
  const fs::path& file_;
  const RawEvent& e_;
  std::string_view name_;
  std::string what_;
  std::map<std::string_view, std::string_view> kv_;
};

// ---- the importer ---------------------------------------------------------------------------
class Importer {
 public:
  Importer(const fs::path& file, storage::Store& store, int64_t run, const KinetoOptions& opts, KinetoSummary& s)
      : file_(file), store_(store), s_(s), rows_(store, run, opts.batch_rows, s), shift_ns_(opts.shift_ns) {}

  void event(const RawEvent& e);
  void device(const json& d);
  void metadata(std::string_view key, const json& v);
  void finish();

 private:
  // The last GPU record or CUDA API call, for the ac2g flow that follows it.
  struct LastSlice {
    kineto::ActivityRows* rows = nullptr;
    enum class Kind { None, Kernel, Memcpy, Memset, Sync, Runtime, Driver } kind = Kind::None;
    size_t index = 0;
    int64_t pid = 0, tid = 0, start = 0, end = 0;
    std::optional<int64_t> external_id;
  };
  struct OpenRegion {
    int64_t start, end;
    int index;
    int64_t op_count = 0;
    std::string compile_id;
    int next_index = 1;  // for an outermost region: the index of the next region inside it
  };
  using ThreadKey = std::pair<int64_t, int64_t>;

  [[noreturn]] void fail(const RawEvent& e, const std::string& message) const {
    throw ImportError(file_, "byte " + std::to_string(e.offset), message);
  }
  /// "traceEvents[N] (the CAT event 'NAME')": which event, for a message about one of its fields.
  static std::string event_named(const RawEvent& e) {
    const std::string_view cat = str_of(e.cat), name = str_of(e.name);
    return "traceEvents[" + std::to_string(e.index) + "] (the " + (cat.empty() ? "" : std::string(cat) + " ") +
           "event '" + std::string(name.substr(0, 200)) + "')";
  }
  /// The event's `field` (named `key`) as an integer; fails naming the event without one.
  int64_t int_field(const RawEvent& e, const std::optional<Element>& field, const char* key) const;
  int64_t arg_count(const RawEvent& e, const char* key) const;
  int64_t absolute(const RawEvent& e, int64_t ts) const;
  void note_time(int64_t start, int64_t end);
  void not_imported(const std::string& key) { ++s_.unknown_categories[key]; }
  void begin_row() {
    last_ = {};
    rows_.maybe_flush();
  }

  bool complete(const RawEvent& e, std::string_view cat, int64_t start, int64_t end);
  void host_slice(const RawEvent& e, std::string_view cat, int64_t start, int64_t end);
  void kernel(const RawEvent& e, int64_t start, int64_t end);
  void memcpy(const RawEvent& e, int64_t start, int64_t end);
  void memset(const RawEvent& e, int64_t start, int64_t end);
  void sync(const RawEvent& e, int64_t start, int64_t end);
  void api_call(const RawEvent& e, bool driver, int64_t start, int64_t end);
  /// The event's pid, tid and args, and the device its GPU record is on.
  struct GpuEvent {
    int64_t pid, tid;
    Args args;
    int64_t device;
  };
  template <class Record>
  GpuEvent gpu_record(const RawEvent& e, Record& r, int64_t start, int64_t end, bool copy = false) const;
  template <class Record>
  void add_gpu_record(LastSlice::Kind kind, std::vector<Record>& v, const Record& r, const GpuEvent& g);
  void flow(const RawEvent& e, char ph, int64_t t);
  void memory(const RawEvent& e, int64_t t);
  void names(const RawEvent& e);
  void track_regions(std::string_view cat, std::string_view name, ThreadKey thread, int64_t start, int64_t end);
  void close_region(const OpenRegion& r, ThreadKey thread);
  void hookscope_range(const RawEvent& e, std::string_view name, ThreadKey thread, int64_t start, int64_t end);
  void weight_swap(const RangeKeys& r, ThreadKey thread, int64_t start, int64_t end);
  bool exported_range(const RangeKeys& r, ThreadKey thread, int64_t start, int64_t end);
  void graph_break(const RawEvent& e, int64_t t);
  void memory_counter(const RawEvent& e, int64_t t);

  const fs::path& file_;
  storage::Store& store_;
  KinetoSummary& s_;
  kineto::RowSink rows_;
  int64_t shift_ns_ = 0;  // KinetoOptions::shift_ns
  LastSlice last_;
  std::string last_category_;              // the category of the last event with one
  int64_t* last_category_count_ = nullptr;  // its count in s_.events_by_category
  int64_t base_ns_ = 0;
  std::set<int64_t> gpu_ids_;
  std::map<ThreadKey, std::vector<OpenRegion>> regions_;
  std::map<std::string, int64_t> unknown_ranges_;
  std::string scratch_;  // kept_args' text and members, reused
  Members members_;
};

int64_t Importer::int_field(const RawEvent& e, const std::optional<Element>& field, const char* key) const {
  const auto v = int_of(field);
  if (!v)
    fail(e, std::string("the ") + std::string(str_of(e.cat)) + " event '" +
                std::string(str_of(e.name)) + "' has no integer '" + key + "'");
  return *v;
}

// A byte count of the event's args (`bytes`, `Total Allocated`): 0 when absent, else an integer
// from 0 to 2^63 − 1, what a capture stores and every reader accepts. Anything else (-100, 2^70,
// 1.5, "x") is refused naming the event and the field, never stored as 0 or as a negative count.
int64_t Importer::arg_count(const RawEvent& e, const char* key) const {
  const Args a = args_of(e);
  if (!a) return 0;
  const auto v = kineto::member(*a, key);
  if (!v) return 0;
  if (v->is_int64() && v->get_int64().value_unsafe() >= 0) return v->get_int64().value_unsafe();
  std::string text = simdjson::to_string(*v);
  if (text.size() > 64) text = text.substr(0, 61) + "...";
  fail(e, event_named(e) + ": args '" + key + "' is " +
              (v->is_int64() ? "negative (" + text + ")" : text) +
              ": not a byte count (an integer from 0 to 2^63 - 1)");
}

int64_t Importer::absolute(const RawEvent& e, int64_t ts) const {
  int64_t t = 0;
  if (__builtin_add_overflow(base_ns_, ts, &t) || __builtin_add_overflow(t, shift_ns_, &t))
    fail(e, event_named(e) + ": baseTimeNanoseconds + ts overflows int64 ns");
  // A capture's times lie within [-2^62, 2^62) ns, so that any two subtract within int64: what
  // every reader checks (CaptureReader::check_rows).
  constexpr int64_t kLimit = int64_t{1} << 62;
  if (t < -kLimit || t >= kLimit)
    fail(e, event_named(e) + ": its time, " + std::to_string(t) +
                " ns, lies outside [-2^62, 2^62) ns (146 years either side of 0)");
  return t;
}

void Importer::note_time(int64_t start, int64_t end) {
  if (!s_.first_ns || start < *s_.first_ns) s_.first_ns = start;
  if (!s_.last_ns || end > *s_.last_ns) s_.last_ns = end;
}

void Importer::event(const RawEvent& e) {
  ++s_.events;
  const std::string_view ph = str_of(e.ph), cat = str_of(e.cat);
  if (ph.empty()) fail(e, "the event has no 'ph' (phase)");
  const std::string key = cat.empty() ? "(ph " + std::string(ph) + ")" : std::string();
  if (cat.empty()) {
    ++s_.events_by_category[key];
  } else if (cat == last_category_) {  // events come in runs of one category: no map lookup
    ++*last_category_count_;
  } else {
    last_category_count_ = &s_.events_by_category[std::string(cat)];  // a map's values stay put
    last_category_ = cat;
    ++*last_category_count_;
  }
  if (ph == "M") return names(e);
  if (!e.ts_ns) fail(e, event_named(e) + (e.ts ? ": its 'ts' is not a number" : ": it has no 'ts'"));
  const int64_t t = absolute(e, *e.ts_ns);
  if (ph == "X") {
    if (!e.dur_ns)
      fail(e, event_named(e) + (e.dur ? ": its 'dur' is not a number" : ": a complete ('X') event without 'dur'"));
    if (*e.dur_ns < 0) fail(e, event_named(e) + ": its 'dur' is negative (" + std::to_string(*e.dur_ns) + " ns)");
    int64_t end = 0;  // t lies within [-2^62, 2^62): the end must too
    if (__builtin_add_overflow(t, *e.dur_ns, &end) || end >= (int64_t{1} << 62))
      fail(e, event_named(e) + ": it ends past 2^62 ns (ts + dur): a capture's times lie within [-2^62, 2^62) ns");
    if (!complete(e, cat, t, end)) not_imported(cat.empty() ? key : std::string(cat));
  } else if ((ph == "i" || ph == "I") && cat == "cpu_instant_event" && str_of(e.name) == "[memory]") {
    memory(e, t);
  } else if ((ph == "i" || ph == "I") && starts_with(str_of(e.name), kGraphBreakPrefix)) {
    graph_break(e, t);
  } else if (ph == "C" && starts_with(str_of(e.name), kMemoryPrefix)) {
    memory_counter(e, t);
  } else if ((ph == "s" || ph == "f") && cat == "ac2g") {
    flow(e, ph[0], t);
  } else if ((ph == "i" || ph == "I") && starts_with(str_of(e.name), kDynamoBreakPrefix)) {
    // skipped (kDynamoBreakPrefix)
  } else if (!(cat.empty() && (ph == "i" || ph == "I")) && cat != "fwdbwd" && cat != "hookscope_transfer") {
    not_imported(cat.empty() ? key : std::string(cat));  // (global instants without a category mark the profiling window)
  }
}

bool Importer::complete(const RawEvent& e, std::string_view cat, int64_t start, int64_t end) {
  if (cat == "Trace" || cat == "hookscope_transfer") return true;  // the profiler's own span; export's copies of TRANSFERS
  begin_row();
  if (cat == "cpu_op" || cat == "user_annotation" || cat == "python_function" || cat == "gpu_user_annotation")
    host_slice(e, cat, start, end);
  else if (cat == "kernel")
    kernel(e, start, end);
  else if (cat == "gpu_memcpy")
    memcpy(e, start, end);
  else if (cat == "gpu_memset")
    memset(e, start, end);
  else if (cat == "cuda_sync")
    sync(e, start, end);
  else if (cat == "cuda_runtime" || cat == "cuda_driver")
    api_call(e, cat == "cuda_driver", start, end);
  else
    return false;
  note_time(start, end);
  return true;
}

void Importer::host_slice(const RawEvent& e, std::string_view cat, int64_t start, int64_t end) {
  const int64_t pid = int_field(e, e.pid, "pid"), tid = int_field(e, e.tid, "tid");
  const std::string_view name = str_of(e.name);
  // The driver enters its ranges through torch's _RecordFunctionFast, which Kineto writes as a
  // cpu_op: a hookscope:: range is an annotation, never an op (opCount, HTA's op breakdowns).
  if (cat == "cpu_op" && starts_with(name, kHookscopePrefix)) cat = "user_annotation";
  const Args a = args_of(e);
  tracer::CpuOpActivity op;
  op.os_tid = tid;
  op.name = rows_.keep(name);
  op.args = rows_.keep(kept_args(a, scratch_, members_));
  op.external_id = arg_int(a, "External id");
  op.sequence_number = arg_int(a, "Sequence number");
  op.category = rows_.keep(cat);
  op.start_ns = start;
  op.end_ns = end;
  rows_.activity(pid).cpu_ops.push_back(op);
  rows_.added();
  if (cat == "gpu_user_annotation") {  // its pid / tid are a GPU and a stream (or a device lane)
    if (starts_with(name, kModuleComputePrefix)) hookscope_range(e, name, {pid, tid}, start, end);
    return;
  }
  rows_.note_host_pid(pid);
  if (cat == "python_function") return;
  track_regions(cat, name, {pid, tid}, start, end);
  if (starts_with(name, kHookscopePrefix)) hookscope_range(e, name, {pid, tid}, start, end);
}

// What every GPU record (kernel, memcpy, memset, sync) starts with: its device, context and
// stream from the args (the event's pid and tid when absent, as Kineto lays out its GPU rows),
// its CUDA correlation id (0 until an ac2g flow names it) and its times. A copy (`copy`) may
// name its device and context `inDevice` / `inContext` instead.
template <class Record>
Importer::GpuEvent Importer::gpu_record(const RawEvent& e, Record& r, int64_t start, int64_t end, bool copy) const {
  const int64_t pid = int_field(e, e.pid, "pid"), tid = int_field(e, e.tid, "tid");
  const Args a = args_of(e);
  auto arg = [&](const char* key, const char* copy_key, int64_t otherwise) {
    return arg_int(a, key).value_or(copy ? arg_int(a, copy_key).value_or(otherwise) : otherwise);
  };
  const int64_t device = arg("device", "inDevice", pid);
  r.device_id = static_cast<uint32_t>(device);
  r.context_id = static_cast<uint32_t>(arg("context", "inContext", 0));
  r.stream_id = static_cast<uint32_t>(arg_int(a, "stream").value_or(tid));
  r.correlation_id = static_cast<uint32_t>(arg_int(a, "correlation").value_or(0));
  r.start_ns = start;
  r.end_ns = end;
  return {pid, tid, a, device};
}

// Adds the record and makes it the slice an ac2g flow that follows binds to.
template <class Record>
void Importer::add_gpu_record(LastSlice::Kind kind, std::vector<Record>& v, const Record& r, const GpuEvent& g) {
  v.push_back(r);
  rows_.added();
  last_ = {&rows_.activity(std::nullopt), kind, v.size() - 1, g.pid, g.tid, r.start_ns, r.end_ns, std::nullopt};
}

void Importer::kernel(const RawEvent& e, int64_t start, int64_t end) {
  tracer::KernelActivity k{};
  const GpuEvent g = gpu_record(e, k, start, end);
  const Args& a = g.args;
  const std::string_view name = str_of(e.name);
  auto dim3 = [&](const char* key, int i) -> int32_t {
    const auto v = a ? kineto::member(*a, key) : std::nullopt;
    Element d;
    if (!v || !v->is_array() || v->get_array().value_unsafe().at(static_cast<size_t>(i)).get(d)) return 0;
    return static_cast<int32_t>(int_of(d).value_or(0));
  };
  k.demangled_name = rows_.keep(name);
  k.short_name = rows_.keep(tracer::short_kernel_name(name));
  k.registers_per_thread = static_cast<int32_t>(arg_int(a, "registers per thread").value_or(0));
  k.grid_x = dim3("grid", 0), k.grid_y = dim3("grid", 1), k.grid_z = dim3("grid", 2);
  k.block_x = dim3("block", 0), k.block_y = dim3("block", 1), k.block_z = dim3("block", 2);
  k.static_shared_memory = arg_int(a, "shared memory").value_or(0);  // Kineto: static + dynamic
  k.graph_node_id = arg_int(a, "graph node id");
  if (k.graph_node_id == 0) k.graph_node_id.reset();
  add_gpu_record(LastSlice::Kind::Kernel, rows_.activity(std::nullopt).kernels, k, g);
  gpu_ids_.insert(k.device_id);
}

void Importer::memcpy(const RawEvent& e, int64_t start, int64_t end) {
  using K = tracer::MemcpyKind;
  tracer::MemcpyActivity m{};
  const GpuEvent g = gpu_record(e, m, start, end, /*copy=*/true);
  const Args& a = g.args;
  const GpuName n = parse_gpu_name(str_of(e.name));
  m.bytes = arg_count(e, "bytes");
  m.copy_kind = memcpy_kind(n.kind);
  m.src_kind = mem_kind(n.src);
  m.dst_kind = mem_kind(n.dst);
  const auto dev = static_cast<int32_t>(g.device);
  if (m.copy_kind == K::HtoD || m.copy_kind == K::AtoD || m.copy_kind == K::DtoD) m.dst_device_id = dev;
  if (m.copy_kind == K::DtoH || m.copy_kind == K::DtoA || m.copy_kind == K::DtoD) m.src_device_id = dev;
  if (m.copy_kind == K::PtoP) {
    if (auto from = arg_int(a, "fromDevice")) m.src_device_id = static_cast<int32_t>(*from);
    if (auto to = arg_int(a, "toDevice")) m.dst_device_id = static_cast<int32_t>(*to);
  }
  m.graph_node_id = arg_int(a, "graph node id");
  if (m.graph_node_id == 0) m.graph_node_id.reset();
  add_gpu_record(LastSlice::Kind::Memcpy, rows_.activity(std::nullopt).memcpys, m, g);
  gpu_ids_.insert(m.device_id);
}

void Importer::memset(const RawEvent& e, int64_t start, int64_t end) {
  tracer::MemsetActivity m{};
  const GpuEvent g = gpu_record(e, m, start, end);
  m.value = 0;  // Kineto does not record the value set
  m.bytes = arg_count(e, "bytes");
  m.graph_node_id = arg_int(g.args, "graph node id");
  if (m.graph_node_id == 0) m.graph_node_id.reset();
  m.mem_kind = mem_kind(parse_gpu_name(str_of(e.name)).src);
  add_gpu_record(LastSlice::Kind::Memset, rows_.activity(std::nullopt).memsets, m, g);
  gpu_ids_.insert(m.device_id);
}

void Importer::sync(const RawEvent& e, int64_t start, int64_t end) {
  tracer::SyncActivity y{};
  const GpuEvent g = gpu_record(e, y, start, end);
  const Args& a = g.args;
  std::string_view kind = str_field(a, "cuda_sync_kind");
  if (kind.empty()) kind = str_of(e.name);
  y.sync_type = tracer::value_named(tracer::kSyncTypeNames, kind, tracer::SyncType::Unknown);
  y.event_id = static_cast<uint32_t>(arg_int(a, "wait_on_cuda_event_id").value_or(arg_int(a, "event_id").value_or(0)));
  add_gpu_record(LastSlice::Kind::Sync, rows_.activity(std::nullopt).syncs, y, g);
}

void Importer::api_call(const RawEvent& e, bool driver, int64_t start, int64_t end) {
  const int64_t pid = int_field(e, e.pid, "pid"), tid = int_field(e, e.tid, "tid");
  const Args a = args_of(e);
  const auto correlation = static_cast<uint32_t>(arg_int(a, "correlation").value_or(0));
  const std::string_view name = rows_.keep(str_of(e.name));
  kineto::ActivityRows& rows = rows_.activity(pid);
  size_t index = 0;
  if (driver) {
    rows.driver_calls.push_back({tid, correlation, name, 0, start, end});
    index = rows.driver_calls.size() - 1;
  } else {
    rows.runtime_calls.push_back({tid, correlation, name, 0, start, end});
    index = rows.runtime_calls.size() - 1;
  }
  rows_.added();
  rows_.note_host_pid(pid);
  const auto external = arg_int(a, "External id");
  if (external && correlation != 0) {
    rows.external_correlations.push_back(
        {tracer::ExternalKind::Custom0, static_cast<uint64_t>(*external), correlation});
    rows_.added();
  }
  last_ = {&rows, driver ? LastSlice::Kind::Driver : LastSlice::Kind::Runtime, index, pid, tid, start, end,
           correlation == 0 ? external : std::nullopt};
}

// An ac2g flow binds to the slice it starts in (the launch, 's') or ends in (the GPU record,
// 'f'); libkineto writes it right after that slice. Its id is the CUPTI correlation id.
void Importer::flow(const RawEvent& e, char ph, int64_t t) {
  const auto id = int_of(e.id), pid = int_of(e.pid), tid = int_of(e.tid);
  if (!id || !pid || !tid) return;
  using K = LastSlice::Kind;
  const bool launch = last_.kind == K::Runtime || last_.kind == K::Driver;
  if (last_.kind == K::None || launch != (ph == 's') || *pid != last_.pid || *tid != last_.tid ||
      t < last_.start || t > last_.end)
    return;
  const auto corr = static_cast<uint32_t>(*id);
  kineto::ActivityRows& r = *last_.rows;
  auto patch = [&](auto& row) {
    if (row.correlation_id == 0) row.correlation_id = corr;
  };
  switch (last_.kind) {
    case K::Kernel: patch(r.kernels[last_.index]); break;
    case K::Memcpy: patch(r.memcpys[last_.index]); break;
    case K::Memset: patch(r.memsets[last_.index]); break;
    case K::Sync: patch(r.syncs[last_.index]); break;
    case K::Runtime: patch(r.runtime_calls[last_.index]); break;
    case K::Driver: patch(r.driver_calls[last_.index]); break;
    case K::None: break;
  }
  if (launch && last_.external_id) {
    r.external_correlations.push_back({tracer::ExternalKind::Custom0, static_cast<uint64_t>(*last_.external_id), corr});
    rows_.added();
    last_.external_id.reset();
  }
}

void Importer::memory(const RawEvent& e, int64_t t) {
  begin_row();
  const int64_t pid = int_field(e, e.pid, "pid"), tid = int_field(e, e.tid, "tid");
  const Args a = args_of(e);
  const std::string device = memory_device(arg_int(a, "Device Type").value_or(0), arg_int(a, "Device Id").value_or(-1));
  tracer::rec::MemoryCounter m{};
  m.device = rows_.str(device);
  m.bytes = arg_count(e, "Total Allocated");
  m.time_ns = t;
  rows_.host(m, pid, tid);
  rows_.note_host_pid(pid);
  note_time(t, t);
}

void Importer::names(const RawEvent& e) {
  const std::string_view what = str_of(e.name);
  const Args a = args_of(e);
  const auto pid = int_of(e.pid), tid = int_of(e.tid);
  if (!a || !pid) return;
  const std::string name(str_field(*a, "name"));
  if (what == "process_name")
    s_.process_names[*pid] = name;
  else if (what == "thread_name" && tid)
    s_.thread_names[{*pid, *tid}] = name;
}

// Compiled regions of one thread, innermost last. Events of a thread arrive in start order, so
// a region is complete once an event starts at or after its end; until then the cpu_op events
// inside it are counted.
void Importer::track_regions(std::string_view cat, std::string_view name, ThreadKey thread, int64_t start,
                             int64_t end) {
  const bool region = cat == "cpu_op" && starts_with(name, kRegionPrefix);
  auto it = regions_.find(thread);
  if (it == regions_.end()) {
    if (!region) return;
    it = regions_.try_emplace(thread).first;
  }
  std::vector<OpenRegion>& open = it->second;
  while (!open.empty() && open.back().end <= start) {
    close_region(open.back(), thread);
    open.pop_back();
  }
  if (cat == "cpu_op" && !region)
    for (OpenRegion& r : open)
      if (start >= r.start && end <= r.end) ++r.op_count;
  if (!region) return;
  const int index = open.empty() ? 0 : open.front().next_index++;
  open.push_back({start, end, index, 0, std::string(name.substr(kRegionPrefix.size())), 1});
}

void Importer::close_region(const OpenRegion& r, ThreadKey thread) {
  tracer::rec::Region rec{};
  rec.index = r.index;
  rec.op_count = r.op_count;
  rec.backend = rows_.str("");
  rec.compile_id = rows_.str(r.compile_id);
  rec.start_ns = r.start;
  rec.end_ns = r.end;
  rows_.host(rec, thread.first, thread.second);
}

// "hookscope::WHAT key=value ..." (docs/torch-engine.md): the driver's ranges around
// accelerate's hook entry points, and the ranges `hookscope export` writes, become hookscope's
// own rows.
void Importer::hookscope_range(const RawEvent& e, std::string_view name, ThreadKey thread, int64_t start,
                               int64_t end) {
  const RangeKeys r(file_, e, name);
  const auto [pid, tid] = thread;
  const std::string& what = r.what();
  if (what == "pre_forward" || what == "post_forward" || what == "init_hook" || what == "detach_hook") {
    tracer::rec::HookSpan h{};
    h.hook = rows_.str(r.text("hook"));
    h.phase = what == "pre_forward"    ? events::HookPhase::PreForward
              : what == "post_forward" ? events::HookPhase::PostForward
              : what == "init_hook"    ? events::HookPhase::InitHook
                                       : events::HookPhase::DetachHook;
    h.module = rows_.str(r.module());
    h.module_class = rows_.str("");
    h.external_id = r.external_id();
    h.start_ns = start;
    h.end_ns = end;
    rows_.host(h, pid, tid);
  } else if (what == "weight_onload" || what == "weight_offload") {
    weight_swap(r, thread, start, end);
  } else if (what == "send_to_device") {
    tracer::rec::Transfer t{};
    t.src = rows_.str(r.text("src"));
    t.dst = rows_.str(r.text("dst"));
    t.bytes = r.count("bytes");
    t.emulated = r.flag("emulated");
    t.module = rows_.str(r.module());
    t.start_ns = start;
    t.end_ns = end;
    rows_.host(t, pid, tid);
  } else if (what == "step") {
    tracer::rec::GenerationStep g{};
    g.step = r.number("step");
    g.token = r.number("token");
    g.start_ns = start;
    g.end_ns = end;
    rows_.host(g, pid, tid >= kRegionTrackBase ? tid - kRegionTrackBase : tid);
  } else if (what != "generate" && !exported_range(r, thread, start, end)) {
    ++unknown_ranges_[what];
  }
}

void Importer::weight_swap(const RangeKeys& r, ThreadKey thread, int64_t start, int64_t end) {
  tracer::rec::WeightSwap w{};
  w.onload = r.what() == "weight_onload";
  w.source = events::WeightSource::Device;
  if (w.onload) {
    const std::string_view src = r.text("source");
    if (src == "cpu")
      w.source = events::WeightSource::Cpu;
    else if (src == "disk")
      w.source = events::WeightSource::Disk;
    else if (src != "device")
      r.fail("source '" + std::string(src) + "' is not cpu, disk or device");
  }
  w.module = rows_.str(r.module());
  w.tensor = rows_.str(r.text("tensor"));
  w.bytes = r.count("bytes");
  w.dtype = rows_.str(r.text("dtype"));
  w.device = rows_.str(r.text("device"));
  w.pinned = r.flag("pinned");
  w.start_ns = start;
  w.end_ns = end;
  rows_.host(w, thread.first, thread.second);
}

// The kinds only `hookscope export` writes as ranges (a LibTorch-engine run's module compute,
// compiler-disabled scopes and captured regions). False for a kind it does not know.
bool Importer::exported_range(const RangeKeys& r, ThreadKey thread, int64_t start, int64_t end) {
  const auto [pid, tid] = thread;
  if (r.what() == "module_compute") {
    tracer::rec::ModuleCompute c{};
    c.module = rows_.str(r.module());
    c.module_class = rows_.str("");
    c.device = rows_.str(r.text("device"));
    c.external_id = r.external_id();
    c.start_ns = start;
    c.end_ns = end;
    rows_.host(c, pid, tid);
  } else if (r.what() == "disabled_scope") {
    tracer::rec::DisabledScope d{};
    d.function = rows_.str(r.text("function"));
    d.module = rows_.str(r.module());
    d.depth = static_cast<int>(r.number("depth"));
    d.start_ns = start;
    d.end_ns = end;
    rows_.host(d, pid, tid);
  } else if (r.what() == "region") {
    tracer::rec::Region g{};
    g.index = static_cast<int>(r.number("index"));
    g.op_count = r.number("op_count");
    g.backend = rows_.str(r.text("backend"));
    g.compile_id = rows_.str("");
    g.start_ns = start;
    g.end_ns = end;
    rows_.host(g, pid, tid >= kRegionTrackBase ? tid - kRegionTrackBase : tid);
  } else {
    return false;
  }
  return true;
}

// 'hookscope::graph_break function=F module=M' (ph i), its reason and module stack in args.
void Importer::graph_break(const RawEvent& e, int64_t t) {
  begin_row();
  const RangeKeys r(file_, e, str_of(e.name));
  const Args a = args_of(e);
  tracer::rec::GraphBreak b{};
  b.reason = rows_.str(str_field(a, "reason"));
  b.function = rows_.str(r.text("function"));
  b.module = rows_.str(r.module());
  b.module_stack = rows_.str(str_field(a, "module_stack"));
  b.time_ns = t;
  rows_.host(b, int_field(e, e.pid, "pid"), int_field(e, e.tid, "tid"));
  note_time(t, t);
}

// 'hookscope::memory device=D' (ph C): resident bytes, args {bytes}.
void Importer::memory_counter(const RawEvent& e, int64_t t) {
  begin_row();
  const RangeKeys r(file_, e, str_of(e.name));
  const auto tid = int_of(e.tid);
  tracer::rec::MemoryCounter m{};
  m.device = rows_.str(r.text("device"));
  m.bytes = arg_count(e, "bytes");
  m.time_ns = t;
  rows_.host(m, int_field(e, e.pid, "pid"), tid.value_or(0));
  note_time(t, t);
}

void Importer::device(const json& d) {
  if (!d.is_object()) return;
  auto num = [&](const char* key, int64_t fallback) {
    auto it = d.find(key);
    return it != d.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
  };
  storage::GpuInfo g;
  g.id = num("id", static_cast<int64_t>(s_.gpus.size()));
  g.name = std::string(str_field(d, "name"));
  g.total_memory = num("totalGlobalMem", 0);
  g.compute_major = num("computeMajor", 0);
  g.compute_minor = num("computeMinor", 0);
  g.sm_count = num("numSms", 0);
  g.threads_per_warp = num("warpSize", 32);
  g.max_shmem_per_block = num("sharedMemPerBlockOptin", num("sharedMemPerBlock", 0));
  if (g.threads_per_warp > 0) g.max_warps_per_sm = num("maxThreadsPerMultiprocessor", 0) / g.threads_per_warp;
  rows_.drain();  // the Store is the writer thread's while a batch is in flight
  store_.add_gpu(g);
  s_.gpus.push_back(std::move(g));
}

void Importer::metadata(std::string_view key, const json& v) {
  if (key == "baseTimeNanoseconds") {
    // Kineto's base time: ns since the Unix epoch, every ts µs after it.
    std::string text = v.dump();
    if (text.size() > 64) text = text.substr(0, 61) + "...";
    if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t{INT64_MAX} : v.get<int64_t>() < 0))
      throw ImportError(file_, "", "baseTimeNanoseconds is " + text + ": not ns since the Unix epoch (an integer 0 to 2^63 - 1)");
    s_.base_time_ns = v.get<int64_t>();
    if (s_.events == 0)
      base_ns_ = s_.base_time_ns;
    else
      s_.diagnostics.push_back("baseTimeNanoseconds follows traceEvents in the file: the times are µs since the "
                               "profiler's base time, not on its clock");
  } else if (key == "distributedInfo" || (key == "hookscope" && v.is_object())) {
    // Kept in RUNS.results: re-parsed bounded like every JSON read from a file (the reader
    // already refused a value nested past kineto::kMaxValueDepth).
    try {
      (key == "hookscope" ? s_.hookscope_run : s_.distributed_info) =
          storage::parse_json_bounded(v.dump(-1, ' ', false, json::error_handler_t::replace), key);
    } catch (const storage::JsonError& e) {
      throw ImportError(file_, "", e.what());
    }
  } else if (key == "ERROR" || key == "WARNING") {
    for (const json& line : v.is_array() ? v : json::array({v}))
      if (line.is_string()) {
        std::string d = "Kineto " + std::string(key) + ": " + line.get<std::string>();
        // A CUDA build of torch on a machine without a GPU says this on every trace.
        if (d.find("gpuGetDeviceCount failed") != std::string::npos)
          d += " (Kineto found no CUDA device: the trace holds host activity only)";
        s_.diagnostics.push_back(std::move(d));
      }
  }
}

void Importer::finish() {
  for (auto& [thread, open] : regions_)
    for (auto it = open.rbegin(); it != open.rend(); ++it) close_region(*it, thread);
  regions_.clear();
  rows_.finish();
  s_.gpu_count = s_.gpus.empty() ? static_cast<int64_t>(gpu_ids_.size()) : static_cast<int64_t>(s_.gpus.size());
  auto listing = [](const std::map<std::string, int64_t>& m) {
    std::string out;
    for (const auto& [k, n] : m) out += (out.empty() ? "" : ", ") + k + " (" + std::to_string(n) + ")";
    return out;
  };
  if (!s_.unknown_categories.empty())
    s_.diagnostics.push_back("events of categories hookscope does not import were skipped: " +
                             listing(s_.unknown_categories));
  if (!unknown_ranges_.empty())
    s_.diagnostics.push_back("hookscope:: ranges of unknown kinds were kept as CPU_OPS only: " +
                             listing(unknown_ranges_));
}

}  // namespace

KinetoSummary import_kineto_trace(const fs::path& trace, storage::Store& store, int64_t run_id,
                                  const KinetoOptions& opts) {
  if (opts.batch_rows == 0) throw std::invalid_argument("import_kineto_trace: KinetoOptions.batch_rows must be > 0");
  KinetoSummary summary;
  Importer importer(trace, store, run_id, opts, summary);
  kineto::TraceCallbacks cb;
  cb.event = [&](const RawEvent& e) { importer.event(e); };
  cb.device = [&](const json& d) { importer.device(d); };
  cb.metadata = [&](std::string_view key, const json& v) { importer.metadata(key, v); };
  cb.progress = opts.progress;
  kineto::read_chrome_trace(trace, cb, opts.pipeline_bytes);
  importer.finish();
  return summary;
}

}  // namespace hs::importers
