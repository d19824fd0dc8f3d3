#include "exports/export_chrome.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "output/text.h"
#include "output/output_file.h"
#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/iterations.h"
#include "facts/recording.h"
#include "importers/dynamo_text.h"
#include "importers/kineto_trace.h"
#include "tracer/kind_names.h"

namespace hs::exports {

namespace fs = std::filesystem;
using namespace storage;

namespace {

// `ns` as µs with exactly three decimals ("1234.567"): ns precision, no double.
void append_us(std::string& out, int64_t ns) {
  // |ns| as unsigned, so INT64_MIN has a magnitude too.
  const uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%s%llu.%03llu", ns < 0 ? "-" : "",
                              static_cast<unsigned long long>(mag / 1000), static_cast<unsigned long long>(mag % 1000));
  out.append(buf, static_cast<size_t>(n));
}

// Track numbering: accelerators keep their index as pid (Kineto's GPU pids); other logical
// devices get pids above any Linux pid; a device's own lanes get tids above any CUDA stream id
// that fits nsys' 24-bit tid field.
constexpr int64_t kOtherDevicePid = int64_t{1} << 30;
constexpr int64_t kLaneCompute = 0xFFFF01, kLaneIn = 0xFFFF02, kLaneOut = 0xFFFF03;
// The host track of thread T's compiled regions (LibTorch engine): kRegionLane + T.
constexpr int64_t kRegionLane = importers::kRegionTrackBase;
constexpr int64_t kTidBits = 0xFFFFFF;
constexpr std::string_view kRegionPrefix = "Torch-Compiled Region: ";

// A text of the capture as one event shows it: at most kMaxTraceText bytes, cut between UTF-8
// characters and ending in "...". An edited or imported capture's text can be megabytes (a
// module's name), which the trace would otherwise repeat in every event that names it.
constexpr size_t kMaxTraceText = 4096;
void append_text(std::string& out, std::string_view v) {
  if (v.size() <= kMaxTraceText) return output::append_json_string(out, v);
  output::append_json_string(out, output::cut_text(v, kMaxTraceText));
}

// `parts` joined as far as a trace text shows them (kMaxTraceText + 1 bytes; append_text cuts
// the rest): a name of megabytes is never copied whole per event.
std::string shown_join(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (const std::string_view p : parts) s.append(p.substr(0, kMaxTraceText + 1 - std::min(s.size(), kMaxTraceText + 1)));
  return s;
}

// The members of a JSON object, written as text.
class Fields {
 public:
  Fields& str(std::string_view k, std::string_view v) {
    key(k);
    append_text(s_, v);
    return *this;
  }
  Fields& num(std::string_view k, int64_t v) {
    key(k);
    s_ += std::to_string(v);
    return *this;
  }
  Fields& raw(std::string_view k, std::string_view json) {
    key(k);
    s_ += json;
    return *this;
  }
  /// The members of `object` — the text of a JSON object as the capture stores it ("{...}").
  Fields& members_of(std::string_view object) {
    if (object.size() < 2 || object.front() != '{' || object.back() != '}') return *this;
    const std::string_view inner = object.substr(1, object.size() - 2);
    if (inner.find_first_not_of(" \n\t") == std::string_view::npos) return *this;
    if (!s_.empty()) s_ += ", ";
    s_ += inner;
    return *this;
  }
  bool empty() const { return s_.empty(); }
  const std::string& inner() const { return s_; }

 private:
  void key(std::string_view k) {
    if (!s_.empty()) s_ += ", ";
    output::append_json_string(s_, k);
    s_ += ": ";
  }
  std::string s_;
};

// "hookscope::WHAT key=value ..." as the Kineto importer parses it: values never hold spaces.
class RangeName {
 public:
  explicit RangeName(std::string_view what) : s_("hookscope::") { s_ += what; }
  RangeName& kv(std::string_view k, std::string_view v) {
    if (s_.size() > kMaxTraceText) return *this;  // append_text cuts what follows: never copied
    s_ += ' ';
    s_ += k;
    s_ += '=';
    for (const char c : v.substr(0, kMaxTraceText + 1 - std::min(s_.size(), kMaxTraceText + 1))) s_ += c == ' ' ? '_' : c;
    return *this;
  }
  RangeName& kv(std::string_view k, int64_t v) { return kv(k, std::string_view(std::to_string(v))); }
  RangeName& module(std::string_view m) { return kv("module", m.empty() ? std::string_view("<root>") : m); }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

// traceEvents entries, one per line.
class TraceWriter {
 public:
  TraceWriter(output::OutputFile& file, int64_t base_ns, ChromeExportSummary& summary)
      : file_(file), base_ns_(base_ns), summary_(summary) {}

  void slice(std::string_view cat, std::string_view name, int64_t pid, int64_t tid, int64_t start, int64_t end,
             const Fields& args = {}) {
    begin("X", cat, name, pid, tid, start);
    line_ += ", \"dur\": ";
    append_us(line_, std::max<int64_t>(0, end - start));
    finish(args, cat);
  }
  void instant(std::string_view cat, std::string_view name, int64_t pid, int64_t tid, int64_t t, const Fields& args) {
    begin("i", cat, name, pid, tid, t);
    line_ += ", \"s\": \"t\"";
    finish(args, cat);
  }
  void counter(std::string_view name, int64_t pid, int64_t t, const Fields& args) {
    begin("C", {}, name, pid, std::nullopt, t);
    finish(args, "(ph C)");
  }
  /// A flow start ('s') or end ('f', bound to the enclosing slice) with `id` at time t.
  void flow(char ph, std::string_view cat, int64_t id, int64_t pid, int64_t tid, int64_t t) {
    begin(ph == 's' ? "s" : "f", cat, cat, pid, tid, t);
    line_ += ", \"id\": " + std::to_string(id);
    if (ph == 'f') line_ += ", \"bp\": \"e\"";
    finish({}, ph == 's' ? "(ph s)" : "(ph f)");
  }
  /// A metadata event: process_name, process_sort_index, thread_name, thread_sort_index.
  void meta(std::string_view what, int64_t pid, std::optional<int64_t> tid, const Fields& args) {
    begin("M", {}, what, pid, tid, std::nullopt);
    finish(args, "(ph M)");
  }

 private:
  void begin(std::string_view ph, std::string_view cat, std::string_view name, int64_t pid, std::optional<int64_t> tid,
             std::optional<int64_t> t) {
    line_.assign(summary_.events ? ",\n{\"ph\": \"" : "\n{\"ph\": \"");
    line_ += ph;
    line_ += '"';
    if (!cat.empty()) {
      line_ += ", \"cat\": ";
      append_text(line_, cat);
    }
    line_ += ", \"name\": ";
    append_text(line_, name);
    line_ += ", \"pid\": " + std::to_string(pid);
    if (tid) line_ += ", \"tid\": " + std::to_string(*tid);
    if (t) {
      line_ += ", \"ts\": ";
      append_us(line_, *t - base_ns_);
    }
  }
  void finish(const Fields& args, std::string_view category) {
    if (!args.empty()) line_ += ", \"args\": {" + args.inner() + "}";
    line_ += '}';
    file_.write(line_);
    ++summary_.events;
    ++summary_.by_category[std::string(category)];
  }

  output::OutputFile& file_;
  int64_t base_ns_;
  ChromeExportSummary& summary_;
  std::string line_;
};

// Everything one run exports, read once.
// The run's rows (its Dynamo graph breaks only those with a time; each name held once however
// many rows repeat it) and what the trace needs besides.
struct ExportRows : storage::SharedRunRows {
  // The process of each CPU op / runtime / driver call (globalTid >> 24), index for index.
  std::vector<int64_t> cpu_op_pids, runtime_pids, driver_pids;
  std::map<uint32_t, int64_t> os_tid;  // THREADS: recording thread -> Linux tid
  std::vector<DeviceRow> devices;
  std::vector<GpuInfo> gpus;
};

ExportRows read_run(const CaptureReader& r, int64_t run) {
  r.check_rows(run);
  ExportRows d;
  static_cast<storage::SharedRunRows&>(d) = r.shared_run_rows(run);
  std::erase_if(d.dynamo_graph_breaks, [](const storage::SharedDynamoGraphBreakRow& b) { return !b.time_ns; });
  d.cpu_op_pids = r.activity_pids(run, "CPU_OPS");
  d.runtime_pids = r.activity_pids(run, "CUPTI_ACTIVITY_KIND_RUNTIME");
  d.driver_pids = r.activity_pids(run, "CUPTI_ACTIVITY_KIND_DRIVER");
  for (const ThreadRow& t : r.threads(run)) d.os_tid[t.thread] = t.os_tid;
  // A run from a trace: its own devices and those its events name, not the capture's others.
  for (DeviceRow& dev : r.devices(run))
    if (!storage::recorded_from_trace(d.run) || dev.info.run_id) d.devices.push_back(std::move(dev));
  d.gpus = r.gpus();
  return d;
}

// The earliest time of the run's events, in whole µs (the file's baseTimeNanoseconds).
int64_t base_time(const ExportRows& d) {
  int64_t t = std::numeric_limits<int64_t>::max();
  auto take = [&](const auto& rows) {
    for (const auto& row : rows) {
      if constexpr (requires { row.start_ns; }) t = std::min(t, row.start_ns);
      else t = std::min(t, row.time_ns);
    }
  };
  take(d.hook_events), take(d.weight_swaps), take(d.transfers), take(d.disabled_scopes);
  take(d.module_compute), take(d.regions), take(d.graph_breaks), take(d.generation_steps);
  take(d.memory_counters), take(d.kernels), take(d.memcpys), take(d.memsets), take(d.syncs);
  take(d.runtime_calls), take(d.driver_calls), take(d.cpu_ops);
  for (const auto& b : d.dynamo_graph_breaks) t = std::min(t, *b.time_ns);
  if (t == std::numeric_limits<int64_t>::max()) t = d.run.start_ns;
  return t >= 0 ? t / 1000 * 1000 : -((-t + 999) / 1000 * 1000);
}

std::string_view memcpy_kind_name(tracer::MemcpyKind k) { return tracer::copy_kind_name(k, "Unknown"); }
std::string_view mem_kind_name(tracer::MemKind k) { return tracer::mem_kind_name(k, "Unknown"); }
std::string_view sync_name(tracer::SyncType s) { return tracer::sync_type_name(s, "Unknown Sync"); }
std::string_view phase_name(events::HookPhase p) { return tracer::hook_phase_name(p, "pre_forward"); }
std::string_view source_name(events::WeightSource s) { return tracer::weight_source_name(s, "device"); }

class ChromeExporter {
 public:
  ChromeExporter(ExportRows rows, TraceWriter& w) : d_(std::move(rows)), w_(w) { index(); }

  void host_events();
  void profiler_steps();
  void regions_and_breaks();
  void dynamo_breaks();
  void device_lanes();
  void gpu_records();
  void api_calls();
  void cpu_ops();
  void metadata();

 private:
  void index();
  bool carried(std::string_view what) const { return carried_.count(std::string(what)) > 0; }
  int64_t device_pid(const std::string& device);
  int64_t host_tid(uint32_t thread) {
    auto it = d_.os_tid.find(thread);
    const int64_t tid = it != d_.os_tid.end() ? it->second : thread;
    tracks_.try_emplace({host_pid_, tid}, "thread " + std::to_string(tid));
    return tid;
  }
  void range(std::string_view cat, const RangeName& name, uint32_t thread, int64_t start, int64_t end,
             int64_t external_id = 0) {
    w_.slice(cat, name.str(), host_pid_, host_tid(thread), start, end, external_args(external_id));
  }
  // A span's external correlation id as Kineto writes it ("External id"), when it has one.
  static Fields external_args(int64_t external_id) {
    Fields f;
    if (external_id > 0) f.num("External id", external_id);
    return f;
  }
  void lane(int64_t pid, int64_t tid) {
    static constexpr std::pair<int64_t, const char*> kLanes[] = {
        {kLaneCompute, "compute"}, {kLaneIn, "transfers in"}, {kLaneOut, "transfers out"}};
    for (const auto& [id, name] : kLanes)
      if (id == tid) tracks_.try_emplace({pid, tid}, name);
  }
  void gpu_args(Fields& f, uint32_t device, uint32_t context, uint32_t stream, uint32_t correlation) const {
    f.num("device", device).num("context", context).num("stream", stream).num("correlation", correlation);
  }
  void gpu_done(uint32_t device, uint32_t stream, uint32_t correlation, int64_t start);

  ExportRows d_;
  TraceWriter& w_;
  int64_t host_pid_ = 1;
  std::set<std::string> carried_;        // hookscope:: kinds already among CPU_OPS
  std::map<std::string, int64_t> device_pids_;
  int64_t other_device_pids_ = 0;                             // pids given from kOtherDevicePid on
  std::map<std::string, const DeviceRow*, std::less<>> device_rows_;  // DEVICES by name (the last row)
  std::map<int64_t, std::string> processes_;                  // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> tracks_;  // (pid, tid) -> name
  std::set<uint32_t> launched_, recorded_;  // correlation ids of API calls / of GPU records
  std::map<uint32_t, uint64_t> external_of_;
};

void ChromeExporter::index() {
  for (const storage::SharedCpuOpRow& op : d_.cpu_ops) {
    const std::string_view n = op.name;
    if (n.substr(0, 11) == "hookscope::") {
      const size_t sp = n.find(' ');
      carried_.insert(std::string(n.substr(11, sp == std::string_view::npos ? sp : sp - 11)));
    }
    if (n.substr(0, kRegionPrefix.size()) == kRegionPrefix) carried_.insert("Torch-Compiled Region");
  }
  // The traced process: from the recorded CPU ops or CUDA calls, else the main thread (its tid
  // is the process id), else 1.
  // (A GPU annotation's pid is its device's, never the host's.)
  std::optional<int64_t> traced;
  for (size_t i = 0; i < d_.cpu_ops.size() && !traced; ++i)
    if (d_.cpu_ops[i].category != "gpu_user_annotation") traced = d_.cpu_op_pids.at(i);
  if (traced) host_pid_ = *traced;
  else if (!d_.runtime_pids.empty()) host_pid_ = d_.runtime_pids.front();
  else if (!d_.driver_pids.empty()) host_pid_ = d_.driver_pids.front();
  else if (!d_.os_tid.empty())
    host_pid_ = std::min_element(d_.os_tid.begin(), d_.os_tid.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->second;
  std::string cell;  // scenario/policy/mode, without the parts an imported run leaves empty
  for (const std::string* part : {&d_.run.scenario, &d_.run.policy, &d_.run.mode})
    if (!part->empty()) cell += (cell.empty() ? "" : "/") + *part;
  processes_[host_pid_] = "host: run " + std::to_string(d_.run.id) + " " + cell + (d_.run.fullgraph ? " fullgraph" : "") +
                          " (" + d_.run.engine + ")";
  for (const auto& r : d_.runtime_calls) launched_.insert(r.correlation_id);
  for (const auto& r : d_.driver_calls) launched_.insert(r.correlation_id);
  for (const auto& r : d_.kernels) recorded_.insert(r.correlation_id);
  for (const auto& r : d_.memcpys) recorded_.insert(r.correlation_id);
  for (const auto& r : d_.memsets) recorded_.insert(r.correlation_id);
  for (const auto& r : d_.syncs) recorded_.insert(r.correlation_id);
  for (const auto& e : d_.external_correlations)
    if (e.kind == tracer::ExternalKind::Custom0 || !external_of_.count(e.correlation_id))
      external_of_[e.correlation_id] = e.external_id;
  for (const DeviceRow& dev : d_.devices) device_rows_[dev.info.name] = &dev;
  for (const DeviceRow& dev : d_.devices) device_pid(dev.info.name);
}

int64_t ChromeExporter::device_pid(const std::string& device) {
  if (auto it = device_pids_.find(device); it != device_pids_.end()) return it->second;
  const bool index = !device.empty() && device.size() < 7 && device.find_first_not_of("0123456789") == std::string::npos;
  const int64_t pid = index ? std::stoll(device) : kOtherDevicePid + other_device_pids_++;
  device_pids_[device] = pid;
  std::string label = (index ? "device " : "device '") + device + (index ? "" : "'");
  if (auto it = device_rows_.find(device); it != device_rows_.end()) {
    const DeviceRow& dev = *it->second;
    if (dev.info.kind == DeviceKind::Cuda) label = "GPU " + device;
    if (!dev.info.label.empty()) label += " (" + dev.info.label + ")";
  }
  processes_[pid] = label;
  return pid;
}

void ChromeExporter::host_events() {
  for (const auto& h : d_.hook_events)
    if (!carried(phase_name(h.phase)))
      range("user_annotation", RangeName(phase_name(h.phase)).kv("hook", h.hook).module(h.module), h.thread, h.start_ns,
            h.end_ns, h.external_id);
  for (const auto& s : d_.weight_swaps) {
    const std::string_view what = s.onload ? "weight_onload" : "weight_offload";
    if (carried(what)) continue;
    RangeName n(what);
    n.module(s.module).kv("tensor", s.tensor).kv("bytes", s.bytes).kv("dtype", s.dtype);
    if (s.onload) n.kv("source", source_name(s.source));
    n.kv("device", s.device);
    if (s.pinned) n.kv("pinned", 1);
    range("user_annotation", n, s.thread, s.start_ns, s.end_ns);
  }
  for (const auto& t : d_.transfers) {
    if (carried("send_to_device")) break;
    RangeName n("send_to_device");
    n.module(t.module).kv("bytes", t.bytes).kv("src", t.src).kv("dst", t.dst);
    if (t.emulated) n.kv("emulated", 1);
    range("user_annotation", n, t.thread, t.start_ns, t.end_ns);
  }
  for (const auto& s : d_.disabled_scopes)
    if (!carried("disabled_scope"))
      range("user_annotation", RangeName("disabled_scope").kv("function", s.function).module(s.module).kv("depth", s.depth),
            s.thread, s.start_ns, s.end_ns);
  for (const auto& s : d_.generation_steps)
    if (!carried("step"))
      range("user_annotation", RangeName("step").kv("step", s.step).kv("token", s.token), s.thread, s.start_ns, s.end_ns);
}

// One `ProfilerStep#N` per iteration of the run (facts/iterations.h), shaped as torch.profiler
// writes it (a user_annotation on the host thread), so that HTA finds the iterations. A run whose
// CPU_OPS hold torch.profiler's own steps has them written already, through CPU_OPS.
void ChromeExporter::profiler_steps() {
  const facts::Iterations it = facts::iterations(d_.cpu_ops, d_.cpu_op_pids, d_.generation_steps);
  if (it.source == facts::IterationSource::ProfilerStep) return;
  for (const facts::Iteration& s : it.steps) {
    const bool host_thread = s.pid < 0;  // a generation step: on its recording thread
    const int64_t pid = host_thread ? host_pid_ : s.pid;
    const int64_t tid = host_thread ? host_tid(static_cast<uint32_t>(s.tid)) : s.tid;
    if (!host_thread) tracks_.try_emplace({pid, tid}, "thread " + std::to_string(tid));
    w_.slice("user_annotation", "ProfilerStep#" + std::to_string(s.number), pid, tid, s.start_ns, s.end_ns);
  }
}

void ChromeExporter::regions_and_breaks() {
  for (const auto& r : d_.regions) {
    if (!r.compile_id.empty()) {
      if (carried("Torch-Compiled Region")) continue;
      Fields args;
      args.num("region index", r.index).num("op count", r.op_count);
      w_.slice("cpu_op", std::string(kRegionPrefix) + r.compile_id, host_pid_, host_tid(r.thread), r.start_ns, r.end_ns, args);
    } else if (!carried("region")) {
      // The LibTorch engine's regions end where a hook's disabled scope begins, inside the
      // hook's span: on the thread's own track they would cross it, which Perfetto and
      // chrome://tracing cannot nest. They get a track of their own beside the thread's.
      const int64_t tid = host_tid(r.thread), lane = kRegionLane + tid;
      tracks_.try_emplace({host_pid_, lane}, "compiled regions (thread " + std::to_string(tid) + ")");
      w_.slice("user_annotation",
               RangeName("region").kv("index", r.index).kv("backend", r.backend).kv("op_count", r.op_count).str(),
               host_pid_, lane, r.start_ns, r.end_ns);
    }
  }
  for (const auto& b : d_.graph_breaks) {
    Fields args;
    args.str("reason", b.reason).str("module_stack", b.module_stack);
    w_.instant("cpu_instant_event", RangeName("graph_break").kv("function", b.function).module(b.module).str(), host_pid_,
               host_tid(b.thread), b.time_ns, args);
  }
  dynamo_breaks();
}

// Dynamo's graph-break records of the run's compile log, at the time Dynamo logged each, on the
// thread that compiled: the one that ran the generation steps (else the one with the most CPU
// ops). Most precede the recorded generate: Dynamo compiles during the first one.
void ChromeExporter::dynamo_breaks() {
  if (d_.dynamo_graph_breaks.empty()) return;
  int64_t pid = host_pid_, tid = 0;
  if (!d_.generation_steps.empty()) {
    tid = host_tid(d_.generation_steps.front().thread);
  } else if (!d_.cpu_ops.empty()) {
    std::map<std::pair<int64_t, int64_t>, int64_t> ops;
    for (size_t i = 0; i < d_.cpu_ops.size(); ++i) ++ops[{d_.cpu_op_pids.at(i), d_.cpu_ops[i].os_tid & kTidBits}];
    const auto most = std::max_element(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second < b.second; });
    std::tie(pid, tid) = most->first;
  } else {
    tid = host_tid(0);
  }
  for (const auto& b : d_.dynamo_graph_breaks) {
    Fields args;
    args.str("gb_code", b.gb_code).str("gb_type", b.gb_type).str("reason", b.reason).str("user_frame", b.user_frame);
    args.str("compile_id", b.compile_id).num("attempt", b.attempt).raw("frame_skipped", b.frame_skipped ? "true" : "false");
    args.num("log_line", b.log_line);
    RangeName name("dynamo_graph_break");
    name.kv("gb_code", b.gb_code.empty() ? std::string_view("-") : std::string_view(b.gb_code));
    if (const std::string f = importers::named_function(b.reason); !f.empty()) name.kv("function", f);
    w_.instant("cpu_instant_event", name.str(), pid, tid, *b.time_ns, args);
  }
}

// Per logical device: the modules computed there, transfers leaving and arriving (joined by a
// flow), resident memory.
void ChromeExporter::device_lanes() {
  for (const auto& c : d_.module_compute) {
    const int64_t pid = device_pid(c.device);
    lane(pid, kLaneCompute);
    if (!carried("module_compute"))
      w_.slice("gpu_user_annotation", RangeName("module_compute").module(c.module).kv("device", c.device).str(), pid,
               kLaneCompute, c.start_ns, c.end_ns, external_args(c.external_id));
  }
  int64_t flow_id = 0;
  for (const auto& t : d_.transfers) {
    if (t.bytes <= 0 || t.src == t.dst) continue;
    const int64_t src = device_pid(t.src), dst = device_pid(t.dst);
    lane(src, kLaneOut);
    lane(dst, kLaneIn);
    Fields args;
    args.str("module", t.module).num("bytes", t.bytes).str("src", t.src).str("dst", t.dst);
    const std::string name = shown_join({t.src, " -> ", t.dst, t.module.empty() ? "" : " ", t.module});
    w_.slice("hookscope_transfer", name, src, kLaneOut, t.start_ns, t.end_ns, args);
    w_.flow('s', "hookscope_transfer", ++flow_id, src, kLaneOut, t.start_ns);
    w_.slice("hookscope_transfer", name, dst, kLaneIn, t.start_ns, t.end_ns, args);
    w_.flow('f', "hookscope_transfer", flow_id, dst, kLaneIn, t.start_ns);
  }
  for (const auto& m : d_.memory_counters) {
    Fields args;
    args.num("bytes", m.bytes);
    w_.counter(RangeName("memory").kv("device", m.device).str(), device_pid(m.device), m.time_ns, args);
  }
}

void ChromeExporter::gpu_done(uint32_t device, uint32_t stream, uint32_t correlation, int64_t start) {
  const int64_t pid = device_pid(std::to_string(device));
  tracks_.try_emplace({pid, stream}, "stream " + std::to_string(stream));
  if (correlation && launched_.count(correlation)) w_.flow('f', "ac2g", correlation, pid, stream, start);
}

void ChromeExporter::gpu_records() {
  for (const auto& k : d_.kernels) {
    Fields f;
    gpu_args(f, k.device_id, k.context_id, k.stream_id, k.correlation_id);
    f.num("registers per thread", k.registers_per_thread).num("shared memory", k.static_shared_memory + k.dynamic_shared_memory);
    f.raw("grid", "[" + std::to_string(k.grid_x) + ", " + std::to_string(k.grid_y) + ", " + std::to_string(k.grid_z) + "]");
    f.raw("block", "[" + std::to_string(k.block_x) + ", " + std::to_string(k.block_y) + ", " + std::to_string(k.block_z) + "]");
    if (k.graph_node_id) f.num("graph node id", *k.graph_node_id);
    w_.slice("kernel", k.demangled_name, device_pid(std::to_string(k.device_id)), k.stream_id, k.start_ns, k.end_ns, f);
    gpu_done(k.device_id, k.stream_id, k.correlation_id, k.start_ns);
  }
  for (const auto& m : d_.memcpys) {
    Fields f;
    gpu_args(f, m.device_id, m.context_id, m.stream_id, m.correlation_id);
    f.num("bytes", m.bytes);
    if (m.copy_kind == tracer::MemcpyKind::PtoP) {
      if (m.src_device_id) f.num("fromDevice", *m.src_device_id);
      if (m.dst_device_id) f.num("toDevice", *m.dst_device_id);
    }
    const std::string name = "Memcpy " + std::string(memcpy_kind_name(m.copy_kind)) + " (" +
                             std::string(mem_kind_name(m.src_kind)) + " -> " + std::string(mem_kind_name(m.dst_kind)) + ")";
    w_.slice("gpu_memcpy", name, device_pid(std::to_string(m.device_id)), m.stream_id, m.start_ns, m.end_ns, f);
    gpu_done(m.device_id, m.stream_id, m.correlation_id, m.start_ns);
  }
  for (const auto& m : d_.memsets) {
    Fields f;
    gpu_args(f, m.device_id, m.context_id, m.stream_id, m.correlation_id);
    f.num("bytes", m.bytes);
    w_.slice("gpu_memset", "Memset (" + std::string(mem_kind_name(m.mem_kind)) + ")", device_pid(std::to_string(m.device_id)),
             m.stream_id, m.start_ns, m.end_ns, f);
    gpu_done(m.device_id, m.stream_id, m.correlation_id, m.start_ns);
  }
  for (const auto& s : d_.syncs) {
    Fields f;
    gpu_args(f, s.device_id, s.context_id, s.stream_id, s.correlation_id);
    f.str("cuda_sync_kind", sync_name(s.sync_type)).num("event_id", s.event_id);
    w_.slice("cuda_sync", sync_name(s.sync_type), device_pid(std::to_string(s.device_id)), s.stream_id, s.start_ns, s.end_ns, f);
    gpu_done(s.device_id, s.stream_id, s.correlation_id, s.start_ns);
  }
}

void ChromeExporter::api_calls() {
  auto call = [&](std::string_view cat, const auto& r, int64_t pid) {
    const int64_t tid = r.os_tid & kTidBits;
    Fields f;
    f.num("correlation", r.correlation_id);
    if (auto it = external_of_.find(r.correlation_id); r.correlation_id && it != external_of_.end())
      f.num("External id", static_cast<int64_t>(it->second));
    tracks_.try_emplace({pid, tid}, "thread " + std::to_string(tid));
    w_.slice(cat, r.name, pid, tid, r.start_ns, r.end_ns, f);
    if (r.correlation_id && recorded_.count(r.correlation_id)) w_.flow('s', "ac2g", r.correlation_id, pid, tid, r.start_ns);
  };
  for (size_t i = 0; i < d_.runtime_calls.size(); ++i) call("cuda_runtime", d_.runtime_calls[i], d_.runtime_pids.at(i));
  for (size_t i = 0; i < d_.driver_calls.size(); ++i) call("cuda_driver", d_.driver_calls[i], d_.driver_pids.at(i));
}

void ChromeExporter::cpu_ops() {
  for (size_t i = 0; i < d_.cpu_ops.size(); ++i) {
    const storage::SharedCpuOpRow& op = d_.cpu_ops[i];
    const int64_t pid = d_.cpu_op_pids.at(i), tid = op.os_tid & kTidBits;
    Fields f;
    f.members_of(op.args);
    if (op.external_id) f.num("External id", *op.external_id);
    if (op.sequence_number) f.num("Sequence number", *op.sequence_number);
    if (op.category == "gpu_user_annotation") lane(pid, tid);
    tracks_.try_emplace({pid, tid}, (op.category == "gpu_user_annotation" ? "stream " : "thread ") + std::to_string(tid));
    w_.slice(op.category, op.name, pid, tid, op.start_ns, op.end_ns, f);
  }
}

void ChromeExporter::metadata() {
  int64_t order = 0;
  for (const auto& [pid, name] : processes_) {
    w_.meta("process_name", pid, 0, Fields().str("name", name));
    // The host first, then accelerators by index, then the other devices.
    w_.meta("process_sort_index", pid, 0, Fields().num("sort_index", pid == host_pid_ ? 0 : ++order));
  }
  for (const auto& [track, name] : tracks_) {
    const auto [pid, tid] = track;
    if (!processes_.count(pid)) {
      processes_[pid] = "process " + std::to_string(pid);
      w_.meta("process_name", pid, 0, Fields().str("name", processes_[pid]));
    }
    w_.meta("thread_name", pid, tid, Fields().str("name", name));
    // Threads by id, each thread's region track after every thread, device lanes in their order.
    const int64_t sort = tid >= kRegionLane ? tid : tid >= kLaneCompute ? tid - kLaneCompute : tid;
    w_.meta("thread_sort_index", pid, tid, Fields().num("sort_index", sort));
  }
}

// The run's recording_overhead as the export writes it: {ratio, text, label, profiled_ms,
// unrecorded_median_ms, unrecorded_n}, or null.
std::string recording_overhead_json(const nlohmann::json& results) {
  const auto o = facts::recording_overhead(results);
  if (!o) return "null";
  const nlohmann::json j{{"ratio", o->ratio},
                         {"text", facts::recording_overhead_text(*o)},
                         {"label", std::string(facts::fact("recording_overhead").label)},
                         {"profiled_ms", o->profiled_ms},
                         {"unrecorded_median_ms", o->unrecorded_median_ms},
                         {"unrecorded_n", o->unrecorded_n}};
  return output::json_text(j, -1);
}

std::string header(const ExportRows& d, const CaptureReader& reader, int64_t base_ns, const ChromeExportOptions& o) {
  std::string h = "{\n\"schemaVersion\": 1,\n\"deviceProperties\": [";
  for (size_t i = 0; i < d.gpus.size(); ++i) {
    const GpuInfo& g = d.gpus[i];
    Fields f;
    f.num("id", g.id).str("name", g.name).num("totalGlobalMem", g.total_memory).num("computeMajor", g.compute_major);
    f.num("computeMinor", g.compute_minor).num("numSms", g.sm_count).num("warpSize", g.threads_per_warp);
    f.num("sharedMemPerBlockOptin", g.max_shmem_per_block).num("maxThreadsPerMultiprocessor", g.max_warps_per_sm * g.threads_per_warp);
    h += (i ? ", {" : "\n  {") + f.inner() + "}";
  }
  // HTA finds a file's rank with the pattern `"rank":\s+N`: the space matters.
  h += "],\n\"distributedInfo\": {\"backend\": \"none\", \"rank\": " + std::to_string(o.rank) +
       ", \"world_size\": " + std::to_string(o.world_size) + "},\n";
  Fields hs;
  hs.str("capture", reader.path().string()).num("run", d.run.id).str("engine", d.run.engine).str("scenario", d.run.scenario);
  hs.str("policy", d.run.policy).str("mode", d.run.mode).raw("fullgraph", d.run.fullgraph ? "true" : "false");
  hs.str("model", d.run.model).str("label", d.run.label).str("status", std::string(tracer::to_string(d.run.status)));
  // The model as the run's engine described it (id, path, dtype, params, bytes, architecture):
  // what `report` shows for the run once the trace is imported.
  if (const auto m = d.run.results.find("model"); d.run.results.is_object() && m != d.run.results.end() && m->is_object())
    hs.raw("model_info", output::json_text(*m, -1));
  // The run's break facts (facts/breaks.h), the figures report and explain show: what `import`
  // gives the run back, so a round trip keeps Dynamo's counts and the log's records.
  hs.raw("facts", output::json_text(facts::break_facts(reader, d.run), -1));
  // What recording cost this timeline (facts/recording.h): a torch engine run's profiled generate
  // over its unrecorded ones, as report.json has it; null where nothing ran unrecorded beside it.
  hs.raw("recording_overhead", recording_overhead_json(d.run.results));
  h += "\"hookscope\": {" + hs.inner() + "},\n";
  h += "\"displayTimeUnit\": \"ms\",\n\"baseTimeNanoseconds\": " + std::to_string(base_ns) + ",\n\"traceEvents\": [";
  return h;
}

}  // namespace

ChromeExportSummary export_chrome_trace(const CaptureReader& reader, int64_t run, const fs::path& out,
                                        const ChromeExportOptions& options) {
  ExportRows rows = read_run(reader, run);
  const int64_t base_ns = base_time(rows);
  output::OutputFile file(out, options.gzip);
  file.write(header(rows, reader, base_ns, options));
  ChromeExportSummary summary;
  TraceWriter writer(file, base_ns, summary);
  ChromeExporter exporter(std::move(rows), writer);
  exporter.profiler_steps();
  exporter.cpu_ops();
  exporter.host_events();
  exporter.regions_and_breaks();
  exporter.device_lanes();
  exporter.api_calls();
  exporter.gpu_records();
  exporter.metadata();
  file.write("\n]\n}\n");
  summary.bytes = file.bytes();
  file.commit();
  return summary;
}

}  // namespace hs::exports
