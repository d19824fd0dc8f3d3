#include "importers/torch_trace_log.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "importers/dynamo_text.h"
#include "importers/import_error.h"
#include "importers/md5.h"
#include "storage/bounded_json.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hs::importers {

namespace {

constexpr std::string_view kLogPrefix = "dedicated_log_torch_trace_";

// ---- lines ----------------------------------------------------------------------------------

/// Reads a file line by line through a fixed buffer; a line longer than `max_line` throws.
class LineReader {
 public:
  LineReader(const fs::path& file, size_t max_line) : file_(file), max_line_(max_line) {
    // The buffer is sized to the file, up to 1 MiB: a small log (a test's, the fuzzer's) does
    // not pay for zeroing and faulting in a megabyte per read.
    // Opened without blocking and checked to be a regular file: a FIFO in a log's place would
    // otherwise wait for a writer forever (with the capture's lock held).
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) throw ImportError(file, "", std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw ImportError(file, "", "not a regular file (a FIFO, device or socket)");
    }
    buf_.resize(static_cast<size_t>(std::clamp<uintmax_t>(static_cast<uintmax_t>(st.st_size) + 1, 4096, kMaxBuffer)));
    f_ = ::fdopen(fd, "rb");
    if (!f_) {
      const int err = errno;
      ::close(fd);
      throw ImportError(file, "", std::string("cannot open: ") + std::strerror(err));
    }
  }
  ~LineReader() { std::fclose(f_); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// The next line without its '\n' into `line`; false at the end of the file.
  bool next(std::string& line) {
    line.clear();
    while (true) {
      if (pos_ == end_ && !refill()) {
        if (line.empty() && !partial_) return false;
        partial_ = false;
        ++number_;
        return true;
      }
      const char* start = buf_.data() + pos_;
      const void* nl = std::memchr(start, '\n', end_ - pos_);
      const size_t n = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : end_ - pos_;
      if (line.size() + n > max_line_)
        throw ImportError(file_, "line " + std::to_string(number_ + 1),
                          "longer than " + std::to_string(max_line_) + " bytes, the most hookscope reads of one line of a "
                          "TORCH_TRACE log: the log is damaged or is no such log");
      line.append(start, n);
      pos_ += n + (nl ? 1 : 0);
      partial_ = !nl;
      if (nl) {
        ++number_;
        return true;
      }
    }
  }
  int64_t number() const { return number_; }

 private:
  bool refill() {
    pos_ = 0;
    end_ = std::fread(buf_.data(), 1, buf_.size(), f_);
    if (std::ferror(f_)) throw ImportError(file_, "line " + std::to_string(number_ + 1), "read error");
    return end_ > 0;
  }
  static constexpr size_t kMaxBuffer = size_t{1} << 20;
  fs::path file_;
  size_t max_line_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  bool partial_ = false;  // the line so far has no '\n' yet
  int64_t number_ = 0;
  std::FILE* f_ = nullptr;
};

/// Where the JSON object of a record line starts, after its glog prefix
/// "V1201 04:54:56.531000 32543 /path/file.py:276] " (an optional "[rankN]:" before it), or
/// npos when the line has no such prefix.
size_t json_start(std::string_view line) {
  size_t i = 0;
  if (!line.empty() && line[0] == '[') {  // "[rank0]:"
    const size_t close = line.find("]:");
    if (close == std::string_view::npos) return std::string_view::npos;
    i = close + 2;
  }
  auto digits = [&](size_t n) {
    for (size_t k = 0; k < n; ++k, ++i)
      if (i >= line.size() || !std::isdigit(static_cast<unsigned char>(line[i]))) return false;
    return true;
  };
  auto ch = [&](char c) { return i < line.size() && line[i++] == c; };
  if (i >= line.size() || !std::strchr("VIWEC", line[i++])) return std::string_view::npos;
  if (!digits(4) || !ch(' ') || !digits(2) || !ch(':') || !digits(2) || !ch(':') || !digits(2) || !ch('.') ||
      !digits(6) || !ch(' '))
    return std::string_view::npos;
  // The logging call's "FILE:LINE]": the first "] " preceded by ":<digits>".
  for (size_t close = line.find("] ", i); close != std::string_view::npos; close = line.find("] ", close + 1)) {
    size_t d = close;
    while (d > i && std::isdigit(static_cast<unsigned char>(line[d - 1]))) --d;
    if (d == close || d == i || line[d - 1] != ':') continue;
    size_t j = close + 2;
    while (j < line.size() && line[j] == ' ') ++j;
    return j < line.size() && line[j] == '{' ? j : std::string_view::npos;
  }
  return std::string_view::npos;
}

/// The glog prefix's time of day ("V1201 04:54:56.531000 ..."), µs since local midnight; none
/// when the line has no such prefix. (The prefix has no year and no time zone: a time is dated
/// by the start_time of its compile, see LogReader::place_breaks.)
std::optional<int64_t> glog_time_of_day_us(std::string_view line) {
  size_t i = 0;
  if (!line.empty() && line[0] == '[') {
    const size_t close = line.find("]:");
    if (close == std::string_view::npos) return std::nullopt;
    i = close + 2;
  }
  // "V" "MMDD" " " then HH:MM:SS.ffffff at i + 6 (json_start has checked the digits)
  if (line.size() < i + 21) return std::nullopt;
  auto num = [&](size_t at, size_t n) {
    int64_t v = 0;
    for (size_t k = 0; k < n; ++k) v = v * 10 + (line[at + k] - '0');
    return v;
  };
  const size_t t = i + 6;
  const int64_t h = num(t, 2), m = num(t + 3, 2), sec = num(t + 6, 2), us = num(t + 9, 6);
  if (h > 23 || m > 59 || sec > 60) return std::nullopt;
  return ((h * 60 + m) * 60 + sec) * 1'000'000 + us;
}

// ---- record types ---------------------------------------------------------------------------

/// Keys of a record that are not its type (tlparse's Envelope fields besides the types).
bool is_envelope_key(std::string_view k) {
  static const std::set<std::string_view> keys = {"rank",    "compiled_autograd_id", "frame_id", "frame_compile_id",
                                                  "attempt", "has_payload",          "stack"};
  return keys.count(k) > 0;
}

/// The record types tlparse (0.4) knows; any other is counted as unknown.
bool is_known_type(std::string_view k) {
  static const std::set<std::string_view> types = {
      "dynamo_start", "str", "dynamo_output_graph", "optimize_ddp_split_graph", "optimize_ddp_split_child",
      "compiled_autograd_graph", "dynamo_guards", "aot_forward_graph", "aot_backward_graph",
      "aot_inference_graph", "aot_joint_graph", "inductor_pre_grad_graph", "inductor_post_grad_graph",
      "dynamo_cpp_guards_str", "inductor_output_code", "compilation_metrics", "bwd_compilation_metrics",
      "aot_autograd_backward_compilation_metrics", "graph_dump", "link", "symbolic_shape_specialization",
      "propagate_real_tensors_provenance", "guard_added", "create_unbacked_symbol", "expression_created",
      "missing_fake_kernel", "mismatched_fake_kernel", "artifact", "describe_storage", "describe_tensor",
      "describe_source", "dump_file", "chromium_event", "guard_added_fast", "exported_program"};
  return types.count(k) > 0;
}

std::optional<int64_t> opt_int(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  if (!it->is_number_float()) return it->get<int64_t>();
  const double v = it->get<double>();  // a float past int64's range is no value (casting it is UB)
  if (!(v >= -9.2e18 && v <= 9.2e18)) return std::nullopt;
  return static_cast<int64_t>(v);
}
std::optional<int64_t> opt_seconds_ns(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double ns = it->get<double>() * 1e9;
  if (!(ns >= -9.2e18 && ns <= 9.2e18)) return std::nullopt;  // past int64 ns: no value
  return static_cast<int64_t>(std::llround(ns));
}
std::string str_or_empty(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// ---- the reader -----------------------------------------------------------------------------

/// A compile row's identity in the log: its ids and attempt ("ca/f/c/a", '-' for absent).
struct CompileKey {
  std::optional<int64_t> autograd, frame, frame_compile;
  int32_t attempt = 0;
  bool any() const { return autograd || frame || frame_compile; }
  std::string compile_id() const {
    auto part = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("-"); };
    return (autograd ? "!" + std::to_string(*autograd) + "/" : std::string()) + part(frame) + "/" + part(frame_compile);
  }
  std::string map_key() const { return compile_id() + "_" + std::to_string(attempt); }
};

/// What the reader keeps about a compile row besides the row itself.
struct CompileState {
  std::string base;   ///< "<segment>|<compile id>": the compile, whatever its attempt
  std::string frame;  ///< "<segment>|[!A/]F": its code object
  bool started = false, has_metrics = false, nothing_traced = false;
  std::optional<int64_t> start_tod_us;  ///< glog time of day of its dynamo_start (else first) record
};

/// A record whose payload lines are being read.
struct Pending {
  int64_t line = 0;
  std::optional<int64_t> tod_us;  ///< the glog prefix's time of day
  json meta;
  std::string type;
  std::string expect_md5;  ///< "" = no payload
  bool keep = false;       ///< keep the payload's text (else only hash it)
  std::string payload;
  std::unique_ptr<Md5> md5;
  int64_t payload_lines = 0;
  size_t payload_bytes = 0;
};

class LogReader {
 public:
  LogReader(const TorchTraceOptions& o, TorchTraceSummary& s) : opt_(o), sum_(s) {}

  void read_file(const fs::path& file);
  TorchTraceLog finish();

 private:
  void on_line(const std::string& line);
  void start_record(const std::string& line, size_t at);
  void end_record();
  void dispatch(Pending& r);
  void on_cell_marker(const Pending& r);
  void count(const Pending& r);
  size_t compile_row(const CompileKey& key, std::string_view type, int64_t line);
  /// An id of the record's envelope (frame_id, frame_compile_id, attempt, compiled_autograd_id):
  /// none when absent or null; an ImportError naming the line when not an id from 0 to 2^31-1.
  std::optional<int64_t> envelope_id(const Pending& r, const char* key) const;
  void on_dynamo_start(size_t row, const json& start);
  void on_metrics(size_t row, const json& m, int64_t line);
  std::optional<int64_t> metric(const json& m, const char* key, bool seconds, int64_t line) const;
  void on_graph_break(const CompileKey& key, const Pending& r);
  void on_recompile_reasons(const CompileKey& key, const Pending& r);
  void settle_statuses();
  void fill_code_names();
  void place_breaks();
  ImportError error(int64_t line, const std::string& message) const {
    return ImportError(file_, "line " + std::to_string(line), message);
  }

  const TorchTraceOptions& opt_;
  TorchTraceSummary& sum_;
  fs::path file_;
  int64_t line_ = 0;  // of file_
  std::optional<Pending> pending_;
  bool selected_ = false;
  bool cell_found_ = false;
  int64_t segment_ = 0;  // files and cell markers cut the log into segments: ids restart in each
  std::unordered_map<int64_t, std::string> strings_;  // `str` records: interned file names
  std::unordered_map<std::string, size_t> current_;   // map_key -> the latest row of that compile
  TorchTraceLog out_;
  std::vector<CompileState> state_;  // parallel to out_.compiles
  /// Parallel to out_.graph_breaks: the compile row it broke in (none: no compile id) and the
  /// glog time of day of its artifact.
  std::vector<std::pair<std::optional<size_t>, std::optional<int64_t>>> break_at_;
};

void LogReader::read_file(const fs::path& file) {
  file_ = file;
  selected_ = opt_.cell.empty();
  current_.clear();
  ++segment_;
  LineReader lines(file, opt_.max_line_bytes);
  std::string line;
  // A log converted to CRLF line endings (copied through Windows): its first line (a glog record,
  // never ending in \r itself) says so, and then every line's final \r is the conversion's,
  // dropped before the record is read and its payload checked against its MD5.
  std::optional<bool> crlf;
  while (lines.next(line)) {
    ++sum_.lines;
    line_ = lines.number();
    if (!crlf && !line.empty()) crlf = line.back() == '\r';
    if (crlf.value_or(false) && !line.empty() && line.back() == '\r') line.pop_back();
    on_line(line);
  }
  end_record();
}

void LogReader::on_line(const std::string& line) {
  const int64_t number = line_;
  if (!line.empty() && line[0] == '\t') {
    if (!pending_ || pending_->expect_md5.empty())
      throw error(number, "a payload line (starting with a tab) where no record announced a payload");
    Pending& p = *pending_;
    const std::string_view text = std::string_view(line).substr(1);
    if (p.payload_lines++ > 0) p.md5->update("\n");
    p.md5->update(text);
    p.payload_bytes += text.size() + (p.payload_lines > 1 ? 1 : 0);
    if (p.keep) {
      if (p.payload_bytes > opt_.max_payload_bytes)
        throw error(p.line, "payload longer than " + std::to_string(opt_.max_payload_bytes) +
                                " bytes, the most hookscope keeps of one record's payload");
      if (p.payload_lines > 1) p.payload += '\n';
      p.payload += text;
    }
    return;
  }
  end_record();
  if (line.empty()) return;  // tlparse skips blank lines too
  const size_t at = json_start(line);
  if (at == std::string::npos)
    throw error(number, "not a TORCH_TRACE record: no glog prefix ('V1201 04:54:56.531000 PID FILE:LINE] {...}')");
  start_record(line, at);
}

void LogReader::start_record(const std::string& line, size_t at) {
  Pending p;
  p.line = line_;
  p.tod_us = glog_time_of_day_us(line);
  try {  // bounded: a log from anyone may nest a record 100,000 deep (storage/bounded_json.h)
    p.meta = storage::parse_json_bounded(std::string_view(line).substr(at), "the record");
  } catch (const storage::JsonError& e) {  // parse errors, too deep, numbers past a double
    throw error(p.line, std::string("not a JSON object after the glog prefix: ") + e.what());
  }
  if (!p.meta.is_object()) throw error(p.line, "not a JSON object after the glog prefix");
  for (const auto& [k, v] : p.meta.items())
    if (!is_envelope_key(k)) {
      p.type = k;
      break;
    }
  if (p.type.empty()) throw error(p.line, "a record without a type (only envelope keys)");
  if (const auto it = p.meta.find("has_payload"); it != p.meta.end()) {
    if (!it->is_string() || it->get<std::string>().size() != 32)
      throw error(p.line, "has_payload is not an MD5 hex digest");
    p.expect_md5 = it->get<std::string>();
    p.md5 = std::make_unique<Md5>();
    const std::string name = p.type == "artifact" ? str_or_empty(p.meta["artifact"], "name") : "";
    p.keep = name == "hookscope_cell" || name == "dynamo_graph_break_reason" || name == "recompile_reasons";
  }
  pending_ = std::move(p);
  if (pending_->expect_md5.empty()) end_record();
}

void LogReader::end_record() {
  if (!pending_) return;
  Pending p = std::move(*pending_);
  pending_.reset();
  if (!p.expect_md5.empty()) {
    if (p.payload_lines == 0)
      throw error(p.line, "the record announces a payload (has_payload) but no payload line follows: truncated log");
    if (p.md5->hex() != p.expect_md5)
      throw error(p.line, "the record's payload does not match its has_payload MD5: truncated or damaged log");
  }
  try {
    dispatch(p);
  } catch (const json::exception& e) {
    throw error(p.line, std::string("malformed ") + p.type + " record: " + e.what());
  }
}

void LogReader::dispatch(Pending& r) {
  if (r.type == "str") {
    const json& s = r.meta["str"];
    if (!s.is_array() || s.size() != 2 || !s[0].is_string() || !s[1].is_number_integer())
      throw error(r.line, "a str record is not [text, id]");
    strings_[s[1].get<int64_t>()] = s[0].get<std::string>();
    return;
  }
  const std::string artifact = r.type == "artifact" ? str_or_empty(r.meta["artifact"], "name") : "";
  if (artifact == "hookscope_cell") return on_cell_marker(r);
  if (!selected_) return;
  count(r);
  CompileKey key{envelope_id(r, "compiled_autograd_id"), envelope_id(r, "frame_id"),
                 envelope_id(r, "frame_compile_id"), static_cast<int32_t>(envelope_id(r, "attempt").value_or(0))};
  if (!key.any()) key.attempt = 0;
  if (key.any()) {
    const size_t row = compile_row(key, r.type, r.line);
    if (!state_[row].start_tod_us || r.type == "dynamo_start") state_[row].start_tod_us = r.tod_us;
    if (r.type == "dynamo_start") on_dynamo_start(row, r.meta["dynamo_start"]);
    if (r.type == "compilation_metrics") on_metrics(row, r.meta["compilation_metrics"], r.line);
    if (r.type == "dynamo_output_graph") ++out_.compiles[row].graphs;
  }
  if (artifact == "dynamo_graph_break_reason") on_graph_break(key, r);
  if (artifact == "recompile_reasons") on_recompile_reasons(key, r);
}

std::optional<int64_t> LogReader::envelope_id(const Pending& r, const char* key) const {
  const auto it = r.meta.find(key);
  if (it == r.meta.end() || it->is_null()) return std::nullopt;
  // tlparse reads these as unsigned 32-bit ids; hookscope keeps them in int32 columns.
  if (it->is_number_integer() && !it->is_number_float()) {
    const bool negative = it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0;
    if (!negative && it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      return it->get<int64_t>();
  }
  std::string shown = it->dump();
  if (shown.size() > 64) shown = shown.substr(0, 61) + "...";
  throw error(r.line, std::string("the record's \"") + key + "\" is " + shown +
                          ": not an id from 0 to 2147483647 (the log is damaged or was not written by torch)");
}

void LogReader::on_cell_marker(const Pending& r) {
  json payload;
  try {
    payload = storage::parse_json_bounded(r.payload, "the hookscope_cell payload");
  } catch (const storage::JsonError&) {  // parse errors, too deep, numbers past a double
    throw error(r.line, "a hookscope_cell marker whose payload is not JSON");
  }
  if (!payload.is_object() || !payload.contains("cell") || !payload["cell"].is_string())
    throw error(r.line, "a hookscope_cell marker without a string \"cell\"");
  const std::string cell = payload["cell"].get<std::string>();
  ++sum_.cell_markers;
  sum_.cells.push_back(cell);
  selected_ = opt_.cell.empty() || cell == opt_.cell;
  cell_found_ = cell_found_ || cell == opt_.cell;
  current_.clear();  // the driver resets Dynamo between cells: compile ids start again
  ++segment_;
}

void LogReader::count(const Pending& r) {
  ++sum_.records;
  ++sum_.record_types[r.type];
  for (const auto& [k, v] : r.meta.items())
    if (!is_envelope_key(k) && !is_known_type(k)) {
      ++sum_.unknown_records;
      ++sum_.unknown_types[k];
    }
}

size_t LogReader::compile_row(const CompileKey& key, std::string_view type, int64_t line) {
  const std::string k = key.map_key();
  if (const auto it = current_.find(k); it != current_.end()) {
    const CompileState& s = state_[it->second];
    if (type == "dynamo_start" && s.started) {  // Dynamo was reset (no cell marker): a new segment
      ++segment_;
      current_.clear();
    } else if (!(type == "compilation_metrics" && s.has_metrics)) {
      return it->second;
    }
  }
  storage::DynamoCompileRow& row = out_.compiles.emplace_back();
  row.compile_id = key.compile_id();
  row.frame_id = key.frame;
  row.frame_compile_id = key.frame_compile;
  row.attempt = key.attempt;
  row.compiled_autograd_id = key.autograd;
  row.log_line = line;
  const std::string seg = std::to_string(segment_) + "|";
  const std::string frame = key.autograd ? "!" + std::to_string(*key.autograd) + "/" : "";
  CompileState& st = state_.emplace_back();
  st.base = seg + row.compile_id;
  st.frame = seg + frame + (key.frame ? std::to_string(*key.frame) : "-");
  return current_[k] = out_.compiles.size() - 1;
}

void LogReader::on_dynamo_start(size_t i, const json& start) {
  state_[i].started = true;
  const auto stack = start.find("stack");
  if (stack == start.end() || !stack->is_array() || stack->empty()) return;
  const json& top = stack->back();  // the frame being compiled
  storage::DynamoCompileRow& row = out_.compiles[i];
  if (row.code_name.empty()) row.code_name = str_or_empty(top, "name");
  if (row.file.empty())
    if (const auto f = opt_int(top, "filename"); f && strings_.count(*f)) row.file = strings_[*f];
  if (!row.line) row.line = opt_int(top, "line");
}

// A count or a time (seconds, to ns) of compilation_metrics: absent or null is no value; a
// negative one, or one past int64 ns, is no metric Dynamo writes: the log is refused naming it.
std::optional<int64_t> LogReader::metric(const json& m, const char* key, bool seconds, int64_t line) const {
  const auto it = m.find(key);
  if (it == m.end() || it->is_null()) return std::nullopt;
  std::string text = it->dump();
  if (text.size() > 64) text = text.substr(0, 61) + "...";
  const std::string what = std::string("compilation_metrics.") + key + " = " + text;
  if (!it->is_number()) throw error(line, what + ": not a number");
  if (!seconds && !it->is_number_integer()) {  // a whole number past uint64 parses as a double
    const double d = it->get<double>();
    throw error(line, what + (std::floor(d) == d && std::fabs(d) >= 9.2e18 ? ": out of range" : ": not an integer"));
  }
  if (it->get<double>() < 0) throw error(line, what + ": negative");
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) throw error(line, what + ": out of range");
  const std::optional<int64_t> v = seconds ? opt_seconds_ns(m, key) : opt_int(m, key);
  if (!v) throw error(line, what + ": out of range");
  return v;
}

void LogReader::on_metrics(size_t i, const json& m, int64_t line) {
  CompileState& s = state_[i];
  storage::DynamoCompileRow& row = out_.compiles[i];
  s.has_metrics = true;
  if (const std::string v = str_or_empty(m, "co_name"); !v.empty()) row.code_name = v;
  if (const std::string v = str_or_empty(m, "co_filename"); !v.empty()) row.file = v;
  if (const auto v = metric(m, "co_firstlineno", false, line)) row.line = v;
  row.guard_count = metric(m, "guard_count", false, line);
  row.graph_op_count = metric(m, "graph_op_count", false, line);
  row.graph_node_count = metric(m, "graph_node_count", false, line);
  s.nothing_traced = !row.guard_count && !row.graph_op_count;
  row.start_utc_ns = metric(m, "start_time", true, line);
  row.compile_ns = metric(m, "entire_frame_compile_time_s", true, line);
  row.backend_compile_ns = metric(m, "backend_compile_time_s", true, line);
  row.inductor_compile_ns = metric(m, "inductor_compile_time_s", true, line);
  row.code_gen_ns = metric(m, "code_gen_time_s", true, line);
  row.before_restart_ns = metric(m, "dynamo_time_before_restart_s", true, line);
  row.fail_type = str_or_empty(m, "fail_type");
  row.fail_reason = str_or_empty(m, "fail_reason");
  const std::vector<std::string> codes = graph_break_codes(row.fail_reason);
  row.fail_gb_code = codes.empty() ? "" : codes.back();
  const std::string fail_file = str_or_empty(m, "fail_user_frame_filename");
  const auto fail_line = opt_int(m, "fail_user_frame_lineno");
  row.fail_user_frame = fail_file.empty() ? "" : fail_file + (fail_line ? ":" + std::to_string(*fail_line) : "");
  const auto restarts = m.find("restart_reasons");
  row.restart_reasons = restarts != m.end() && restarts->is_array() && !restarts->empty() ? restarts->dump() : "";
  row.recompile_reason = str_or_empty(m, "recompile_reason");
}

void LogReader::on_graph_break(const CompileKey& key, const Pending& r) {
  const GraphBreakReport report = parse_graph_break_report(r.payload);
  storage::DynamoGraphBreakRow& b = out_.graph_breaks.emplace_back();
  b.compile_id = key.compile_id();
  b.attempt = key.attempt;
  const GraphBreakMessage& first = report.messages.front();
  b.gb_code = first.gb_code;
  b.gb_type = first.gb_type;
  b.explanation = first.explanation;
  for (const std::string& h : first.hints) b.hints += (b.hints.empty() ? "" : "\n") + h;
  b.context = first.context;
  b.reason = report.reason;
  b.instruction = report.instruction;
  b.user_frame = report.user_frame;
  b.user_stack = report.user_stack;
  for (size_t i = 1; i < report.messages.size(); ++i)
    if (!report.messages[i].gb_code.empty())
      b.chained_gb_codes += (b.chained_gb_codes.empty() ? "" : ",") + report.messages[i].gb_code;
  b.frame_skipped = report.frame_skipped;
  b.log_line = r.line;
  const auto row = key.any() ? current_.find(key.map_key()) : current_.end();
  break_at_.emplace_back(row == current_.end() ? std::nullopt : std::optional<size_t>(row->second), r.tod_us);
}

// A break's time: its compile's start_time (ns since the epoch) plus how far the break's glog
// time of day is from the compile's dynamo_start record's (across midnight: the nearer day),
// shifted onto the capture's clock as the run's trace is (TorchTraceOptions::shift_ns). A
// compile Dynamo restarted writes one compilation_metrics, on its last attempt, and one
// dynamo_start, on its first: the anchor pairs the two across the attempts of a compile id.
void LogReader::place_breaks() {
  constexpr int64_t kDayUs = int64_t{86'400} * 1'000'000;
  struct Anchor {
    std::optional<int64_t> utc_ns, tod_us;
    bool from_start = false;  // tod_us is a dynamo_start record's
  };
  std::unordered_map<std::string, Anchor> anchors;  // by CompileState::base
  for (size_t r = 0; r < out_.compiles.size(); ++r) {
    Anchor& a = anchors[state_[r].base];
    if (out_.compiles[r].start_utc_ns && !a.utc_ns) a.utc_ns = out_.compiles[r].start_utc_ns;
    if (state_[r].start_tod_us && (!a.tod_us || (state_[r].started && !a.from_start))) {
      a.tod_us = state_[r].start_tod_us;
      a.from_start = state_[r].started;
    }
  }
  for (size_t i = 0; i < out_.graph_breaks.size(); ++i) {
    const auto& [row, tod] = break_at_[i];
    if (!row || !tod) continue;
    const Anchor& a = anchors[state_[*row].base];
    if (!a.utc_ns || !a.tod_us) continue;
    int64_t d = (*tod - *a.tod_us) % kDayUs;
    if (d > kDayUs / 2) d -= kDayUs;
    if (d < -kDayUs / 2) d += kDayUs;
    int64_t t = 0;
    if (__builtin_add_overflow(*a.utc_ns, d * 1000, &t) || __builtin_add_overflow(t, opt_.shift_ns, &t)) continue;
    out_.graph_breaks[i].time_ns = t;
  }
}

void LogReader::on_recompile_reasons(const CompileKey& key, const Pending& r) {
  // One reason is written as its text, several as a JSON list of strings.
  std::vector<std::string> reasons;
  if (!r.payload.empty() && r.payload.front() == '[') {
    json list;
    try {
      list = storage::parse_json_bounded(r.payload, "the recompile_reasons payload");
    } catch (const storage::JsonError&) {  // parse errors, too deep, numbers past a double
      throw error(r.line, "a recompile_reasons payload that starts like a JSON list but is not one");
    }
    for (const json& s : list) {
      if (!s.is_string()) throw error(r.line, "a recompile_reasons list with a non-string reason");
      reasons.push_back(s.get<std::string>());
    }
  } else {
    reasons.push_back(r.payload);
  }
  for (const std::string& text : reasons) {
    const RecompileReason parsed = parse_recompile_reason(text);
    storage::DynamoRecompileRow& row = out_.recompiles.emplace_back();
    row.compile_id = key.compile_id();
    row.guard_compile_id = parsed.guard_compile_id;
    row.guard = parsed.guard;
    row.reason = text;
    row.log_line = r.line;
  }
}

/// A compile without metrics was restarted when a later attempt of it follows.
void LogReader::settle_statuses() {
  std::unordered_map<std::string, int32_t> later_attempt;  // base -> highest attempt after the row
  for (size_t i = out_.compiles.size(); i-- > 0;) {
    const CompileState& s = state_[i];
    storage::DynamoCompileRow& row = out_.compiles[i];
    const auto later = later_attempt.find(s.base);
    if (s.has_metrics)
      row.status = !row.fail_type.empty() ? "failed" : s.nothing_traced ? "skipped" : "compiled";
    else
      row.status = later != later_attempt.end() && later->second > row.attempt ? "restarted" : "incomplete";
    if (later == later_attempt.end() || row.attempt > later->second) later_attempt[s.base] = row.attempt;
  }
}

/// Code names come with a compile's first attempt (dynamo_start) or its last
/// (compilation_metrics); a recompile-limit failure has neither: it takes its frame's.
void LogReader::fill_code_names() {
  auto& rows = out_.compiles;
  std::unordered_map<std::string, size_t> named;  // base, then frame -> a row with a code name
  for (size_t i = 0; i < rows.size(); ++i)
    if (!rows[i].code_name.empty()) {
      named.try_emplace(state_[i].base, i);
      named.try_emplace(state_[i].frame, i);
    }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].code_name.empty()) continue;
    auto from = named.find(state_[i].base);
    if (from == named.end()) from = named.find(state_[i].frame);
    if (from == named.end()) continue;
    rows[i].code_name = rows[from->second].code_name;
    rows[i].file = rows[from->second].file;
    rows[i].line = rows[from->second].line;
  }
}

TorchTraceLog LogReader::finish() {
  if (!opt_.cell.empty() && !cell_found_) {
    std::string cells;
    for (const std::string& c : sum_.cells)  // quoted as JSON: a name's commas and newlines stay in it
      cells += (cells.empty() ? "" : ", ") + json(c).dump(-1, ' ', false, json::error_handler_t::replace);
    throw ImportError(sum_.files.empty() ? fs::path() : sum_.files.front(), "",
                      "no hookscope_cell marker for cell '" + opt_.cell + "' (cells: " +
                          (cells.empty() ? "none" : cells) + ")");
  }
  settle_statuses();
  fill_code_names();
  place_breaks();
  sum_.compiles = static_cast<int64_t>(out_.compiles.size());
  sum_.graph_breaks = static_cast<int64_t>(out_.graph_breaks.size());
  sum_.recompile_guards = static_cast<int64_t>(out_.recompiles.size());
  std::set<int64_t> recompile_lines;  // one artifact per recompilation
  for (const storage::DynamoRecompileRow& r : out_.recompiles) recompile_lines.insert(r.log_line);
  sum_.recompiles = static_cast<int64_t>(recompile_lines.size());
  for (const storage::DynamoCompileRow& c : out_.compiles) {
    sum_.frames_skipped += c.status == "skipped" || c.status == "failed";
    sum_.recompile_limit_hits += is_recompile_limit(c.fail_gb_code, c.fail_reason);
    sum_.graph_count += c.graphs;
  }
  sum_.graph_break_count = std::max<int64_t>(sum_.graph_count - 1, 0);
  return std::move(out_);
}

/// A row of the reader's form as the form the Store writes (strings viewed, not copied).
template <class Emitted, class Row>
Emitted as_emitted(const Row& r) {
  Emitted e;
  Emitted::columns([&](auto tag, std::string_view, std::string_view, auto field) {
    using Tag = typename decltype(tag)::type;
    if constexpr (kinds::has_column<Tag> && !kinds::is_column_only<Tag>) field(e) = field(r);
  });
  return e;
}

template <class Emitted, class Row>
std::vector<Emitted> as_emitted(const std::vector<Row>& rows) {
  std::vector<Emitted> out;
  out.reserve(rows.size());
  for (const Row& r : rows) out.push_back(as_emitted<Emitted>(r));
  return out;
}

}  // namespace

std::vector<fs::path> torch_trace_files(const fs::path& dir_or_file) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir_or_file, ec);
  if (!fs::exists(st)) throw ImportError(dir_or_file, "", "no such file or directory");
  if (!fs::is_directory(st)) return {dir_or_file};
  std::vector<fs::path> ranked0, unranked;
  bool any_ranked = false;
  // Only the logs matter: anything else in the folder (a loop of links, a file we cannot stat)
  // is skipped, never a reason to refuse the import.
  fs::directory_iterator it(dir_or_file, ec);
  if (ec) throw ImportError(dir_or_file, "", "cannot list the folder: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw ImportError(dir_or_file, "", "cannot list the folder: " + ec.message());
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    if (name.rfind(kLogPrefix, 0) != 0 || e.path().extension() != ".log") continue;
    std::error_code fec;
    if (!e.is_regular_file(fec)) continue;
    const std::string rest = name.substr(kLogPrefix.size());
    if (rest.rfind("rank_", 0) == 0) {
      any_ranked = true;
      if (rest.rfind("rank_0_", 0) == 0) ranked0.push_back(e.path());
    } else {
      unranked.push_back(e.path());
    }
  }
  std::vector<fs::path> logs = any_ranked ? ranked0 : unranked;
  if (logs.empty())
    throw ImportError(dir_or_file, "",
                      any_ranked ? "no rank-0 TORCH_TRACE log (dedicated_log_torch_trace_rank_0_*.log) in it"
                                 : "no TORCH_TRACE log (dedicated_log_torch_trace_*.log) in it");
  std::sort(logs.begin(), logs.end(), [](const fs::path& a, const fs::path& b) {
    std::error_code e1, e2;
    const auto ta = fs::last_write_time(a, e1), tb = fs::last_write_time(b, e2);
    return ta != tb ? ta < tb : a < b;
  });
  return logs;
}

TorchTraceLog read_torch_trace(const fs::path& dir_or_file, const TorchTraceOptions& options,
                               TorchTraceSummary* summary) {
  TorchTraceSummary local;
  TorchTraceSummary& sum = summary ? *summary : local;
  sum = TorchTraceSummary{};
  sum.files = torch_trace_files(dir_or_file);
  LogReader reader(options, sum);
  bool any = false;  // a log with no line at all: a torch that died before logging, or a wrong file
  for (const fs::path& f : sum.files) {
    std::error_code ec;
    any = any || fs::file_size(f, ec) > 0 || ec;
    reader.read_file(f);
  }
  if (!any)
    throw ImportError(sum.files.size() == 1 ? sum.files.front() : dir_or_file, "",
                      "empty: no TORCH_TRACE records to import (was the log written by a run that compiled?)");
  return reader.finish();
}

TorchTraceSummary import_torch_trace(const fs::path& dir_or_file, storage::Store& store, int64_t run_id,
                                     const TorchTraceOptions& options) {
  TorchTraceSummary sum;
  const TorchTraceLog log = read_torch_trace(dir_or_file, options, &sum);
  const auto compiles = as_emitted<tracer::DynamoCompile>(log.compiles);
  const auto breaks = as_emitted<tracer::DynamoGraphBreak>(log.graph_breaks);
  const auto recompiles = as_emitted<tracer::DynamoRecompile>(log.recompiles);
  tracer::ActivityBatch batch;
  batch.run_id = run_id;
  batch.dynamo_compiles = compiles;
  batch.dynamo_graph_breaks = breaks;
  batch.dynamo_recompiles = recompiles;
  store.write_activity(batch);
  if (sum.unknown_records > 0) {
    std::string types;
    for (const auto& [type, n] : sum.unknown_types) types += (types.empty() ? "" : ", ") + type + " x" + std::to_string(n);
    store.add_diagnostic(run_id, storage::Severity::Info, "torch_trace",
                         std::to_string(sum.unknown_records) + " record(s) of types hookscope does not read, as tlparse 0.4 "
                             "does not (" + types + ") in " + sum.files.front().string() +
                             ": counted, not imported (a newer torch may write more kinds)");
  }
  return sum;
}

}  // namespace hs::importers
