// The run model's vocabulary (categories, lanes, labels), what a slice says about its source
// row, and the statistics of a time range. The loader is in run_timeline_load.cpp.
#include "ui/run_timeline.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <tuple>
#include <string_view>

#include "output/text.h"
#include "storage/bounded_json.h"
#include "tracer/kind_names.h"

namespace hs::ui {

const char* category_name(uint8_t c) {
  static constexpr const char* names[] = {
      "compute", "HtoD", "DtoH", "DtoD", "PtoP", "copy", "weight onload", "weight offload", "pre_forward",
      "post_forward", "hook", "compiler-disabled", "compiled region", "generation step", "weights on device",
      "meta (weights in cpu)", "meta (weights on disk)", "graph break", "CPU op", "user annotation",
      "python function", "GPU annotation", "kernel", "memset", "CUDA runtime", "CUDA driver",
      "before step 0 (not a generation step)", "weight swaps of a step (aggregated)", "CUDA sync"};
  static_assert(std::size(names) == kCategoryCount, "one name per Category");
  return c < kCategoryCount ? names[c] : "?";
}

size_t Track::slice_count() const {
  size_t n = instants.size() + counter.size();
  for (const auto& l : levels) n += l.size();
  return n;
}

size_t RunTimeline::event_count() const {
  return module_compute.size() + transfers.size() + weight_swaps.size() + hook_events.size() +
         disabled_scopes.size() + regions.size() + generation_steps.size() + graph_breaks.size() +
         dynamo_graph_breaks.size() + cpu_ops.size() + kernels.size() + memcpys.size() + memsets.size() +
         syncs.size() + runtime_calls.size() + driver_calls.size();
}

int RunTimeline::group_of(const std::string& device) const {
  for (size_t i = 0; i < groups.size(); ++i)
    if (!groups[i].host && groups[i].device == device) return static_cast<int>(i);
  return -1;
}

uint32_t RunTimeline::intern(const std::string& s) {
  // A box's label is measured and fitted every frame: one of megabytes (a hand-made capture's
  // name) would stall each frame, and kept whole once per label it would multiply. Past
  // kMaxLabelBytes it ends in "..." (the tables show it whole); labels equal that far are one.
  if (s.size() > kMaxLabelBytes) return intern(output::cut_text(s, kMaxLabelBytes));
  if (slots_.empty()) slots_.resize(256);
  const uint64_t h = std::hash<std::string_view>{}(s);
  size_t i = h & (slots_.size() - 1);
  for (; slots_[i].second; i = (i + 1) & (slots_.size() - 1))
    if (slots_[i].first == h && strings[slots_[i].second - 1] == s) return slots_[i].second - 1;
  const auto id = static_cast<uint32_t>(strings.size());
  strings.push_back(s);
  slots_[i] = {h, id + 1};
  if (++used_ * 2 > slots_.size()) {  // grow: every short label again, by its hash
    std::vector<std::pair<uint64_t, uint32_t>> old(slots_.size() * 2);
    old.swap(slots_);
    for (const auto& [hash, k] : old)
      if (k) {
        size_t j = hash & (slots_.size() - 1);
        while (slots_[j].second) j = (j + 1) & (slots_.size() - 1);
        slots_[j] = {hash, k};
      }
  }
  return id;
}

std::vector<uint32_t> RunTimeline::merge_strings(const RunTimeline& other) {
  // The table at its final size at once: no regrowth while millions of labels come in.
  size_t want = 256;
  while (want < 2 * (used_ + other.used_ + 1)) want *= 2;
  if (want > slots_.size()) {
    std::vector<std::pair<uint64_t, uint32_t>> old(want);
    old.swap(slots_);
    for (const auto& [hash, k] : old)
      if (k) {
        size_t j = hash & (slots_.size() - 1);
        while (slots_[j].second) j = (j + 1) & (slots_.size() - 1);
        slots_[j] = {hash, k};
      }
  }
  strings.reserve(strings.size() + other.strings.size());
  std::vector<uint32_t> remap(other.strings.size());
  for (size_t i = 0; i < other.strings.size(); ++i) remap[i] = intern(other.strings[i]);
  return remap;
}

namespace {
/// A lane's name and the source its slices index.
struct LaneInfo {
  const char* name;
  Source source;
};
LaneInfo lane_info(Lane lane) {
  switch (lane) {
    case Lane::Compute: return {"compute", Source::Compute};
    case Lane::TransfersIn: return {"transfers in", Source::Transfer};
    case Lane::TransfersOut: return {"transfers out", Source::Transfer};
    case Lane::WeightSwaps: return {"weight onload/offload", Source::WeightSwap};
    case Lane::Memory: return {"memory", Source::Compute};  // a counter: no slices index anything
    case Lane::ResidencySummary: return {"weights on device", Source::Residency};
    case Lane::Residency: return {"weights", Source::Residency};
    case Lane::ModelForward: return {"model forward", Source::Compute};
    case Lane::Hooks: return {"hooks", Source::Hook};
    case Lane::CompilerDisabled: return {"compiler-disabled", Source::Disabled};
    case Lane::Regions: return {"compiled regions", Source::Region};
    case Lane::GraphBreaks: return {"graph breaks", Source::Break};
    case Lane::DynamoBreaks: return {"Dynamo graph breaks", Source::DynamoBreak};
    case Lane::Steps: return {"generation steps", Source::Step};
    case Lane::CpuOps: return {"CPU ops", Source::CpuOp};
    case Lane::PythonStack: return {"Python stack", Source::CpuOp};
    case Lane::CudaApi: return {"CUDA API", Source::Runtime};
    case Lane::GpuAnnotations: return {"GPU annotations", Source::CpuOp};
    case Lane::Stream: return {"stream", Source::Kernel};
  }
  return {"?", Source::Compute};
}
}  // namespace

const char* lane_name(Lane lane) { return lane_info(lane).name; }

Source lane_source(Lane lane) { return lane_info(lane).source; }

Source slice_source(const Track& t, const Slice& s) {
  if (t.lane == Lane::Stream) {
    if (s.category == kKernel) return Source::Kernel;
    if (s.category == kSync) return Source::Sync;
    return s.category == kMemset ? Source::Memset : Source::Memcpy;
  }
  if (t.lane == Lane::CudaApi) return s.category == kCudaDriver ? Source::Driver : Source::Runtime;
  if (s.category == kPhase) return Source::Phase;
  if (s.category == kSwapGroup) return Source::SwapGroup;
  return t.source;
}

std::string module_label(const std::string& module) { return module.empty() ? "<root>" : module; }

// The names are string literals (tracer/kind_names.h), so their data() is NUL-terminated.
const char* weight_source_name(events::WeightSource s) { return tracer::weight_source_name(s, "?").data(); }

const char* hook_phase_name(events::HookPhase p) { return tracer::hook_phase_name(p, "?").data(); }

const char* copy_kind_name(tracer::MemcpyKind k) { return tracer::copy_kind_name(k, "?").data(); }

std::string canonical_device(const std::string& device) {
  constexpr std::string_view kCuda = "cuda:";
  if (device.size() > kCuda.size() && device.compare(0, kCuda.size(), kCuda) == 0 &&
      std::all_of(device.begin() + kCuda.size(), device.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return device.substr(kCuda.size());
  return device;
}

namespace {

template <class Row>
std::pair<int64_t, int64_t> span_of(const std::vector<Row>& rows, uint32_t row, int64_t origin) {
  const Row& r = rows.at(row);
  return {r.start_ns - origin, r.end_ns - origin};
}

std::string bytes_text(int64_t bytes) {
  return format_bytes(static_cast<double>(bytes)) + " (" + std::to_string(bytes) + ")";
}

std::string rate_text(int64_t bytes, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB/s", static_cast<double>(bytes) / static_cast<double>(ns));
  return buf;
}

using Fields = std::vector<std::pair<std::string, std::string>>;

/// A step's weight swaps on one device, aggregated.
void describe_swap_group(const RunTimeline& tl, uint32_t row, Fields& f) {
  const auto& g = tl.swap_groups.at(row);
  std::string when = "no generation step (before step 0, or between generates)";
  if (g.step >= 0) {
    const auto& st = tl.generation_steps.at(static_cast<size_t>(g.step));
    when = "generation step " + std::to_string(st.step);
  }
  f.emplace_back("weight swaps of", when + " on " + g.device);
  f.emplace_back("onloads", std::to_string(g.onloads) + " moving " + bytes_text(g.onload_bytes));
  f.emplace_back("offloads", std::to_string(g.offloads));
  f.emplace_back("modules", std::to_string(g.modules) + " (" + module_label(tl.weight_swaps.at(g.first_swap).module) +
                                " ... " + module_label(tl.weight_swaps.at(g.last_swap).module) + ")");
  f.emplace_back("zoom in", "click or wheel: the swaps one by one");
}

/// hookscope's own rows: what the hooks, the engine and the emulated compiler recorded (or the
/// importer made of the driver's hookscope:: ranges).
void describe_hookscope(const RunTimeline& tl, Source source, uint32_t row, Fields& f) {
  switch (source) {
    case Source::Compute: {
      const auto& r = tl.module_compute.at(row);
      f.emplace_back("module compute", module_label(r.module));
      f.emplace_back("execution_device", r.device);
      break;
    }
    case Source::Transfer: {
      const auto& r = tl.transfers.at(row);
      f.emplace_back("activation transfer", std::string(copy_kind_name(r.copy_kind)) + (r.emulated ? " (emulated)" : ""));
      f.emplace_back("src -> dst", r.src + " -> " + r.dst);
      f.emplace_back("bytes", bytes_text(r.bytes));
      if (!r.module.empty()) f.emplace_back("module", r.module);
      break;
    }
    case Source::WeightSwap: {
      const auto& r = tl.weight_swaps.at(row);
      f.emplace_back(r.onload ? "weight onload" : "weight offload", module_label(r.module) + "." + r.tensor);
      f.emplace_back("bytes", bytes_text(r.bytes));
      f.emplace_back("dtype", r.dtype);
      f.emplace_back(r.onload ? "from" : "was on", weight_source_name(r.source));
      f.emplace_back(r.onload ? "to" : "now on", r.device);
      f.emplace_back("memory", r.pinned ? "pinned" : "pageable");
      break;
    }
    case Source::Residency: {
      const auto& u = tl.residency_units.at(row);
      f.emplace_back("weights of", module_label(u.module));
      f.emplace_back("execution_device", u.device);
      f.emplace_back("home", u.home == u.device ? "resident (not offloaded)" : u.home + " (module on meta between forwards)");
      if (u.bytes) f.emplace_back("bytes per onload", format_bytes(static_cast<double>(u.bytes)));
      break;
    }
    case Source::Hook: {
      const auto& r = tl.hook_events.at(row);
      f.emplace_back("hook", r.hook + "." + hook_phase_name(r.phase));
      f.emplace_back("module", module_label(r.module));
      break;
    }
    case Source::Disabled: {
      const auto& r = tl.disabled_scopes.at(row);
      f.emplace_back("torch.compiler.disable", r.function);
      f.emplace_back("module", module_label(r.module));
      f.emplace_back("depth", std::to_string(r.depth));
      break;
    }
    case Source::Region: {
      const auto& r = tl.regions.at(row);
      if (!r.compile_id.empty()) f.emplace_back("Torch-Compiled Region", r.compile_id);
      f.emplace_back("compiled region", std::to_string(r.index));
      f.emplace_back("ops", std::to_string(r.op_count));
      f.emplace_back("backend", r.backend.empty() ? std::string("(not in the trace)") : r.backend.str());
      break;
    }
    case Source::Step: {
      const auto& r = tl.generation_steps.at(row);
      f.emplace_back("generation step", std::to_string(r.step));
      f.emplace_back("token", std::to_string(r.token));
      break;
    }
    case Source::Break: {
      const auto& r = tl.graph_breaks.at(row);
      f.emplace_back("graph break", r.reason);
      f.emplace_back("function", r.function);
      f.emplace_back("module", module_label(r.module));
      f.emplace_back("module stack", r.module_stack);
      break;
    }
    case Source::DynamoBreak: {
      const auto& r = tl.dynamo_graph_breaks.at(row);
      f.emplace_back("Dynamo graph break", (r.gb_code.empty() ? "" : r.gb_code + " ") + r.gb_type);
      f.emplace_back("reason", r.reason.substr(0, r.reason.find('\n')));
      f.emplace_back("user frame", r.user_frame);
      f.emplace_back("compile id", r.compile_id + (r.attempt ? " (attempt " + std::to_string(r.attempt) + ")" : ""));
      f.emplace_back("frame skipped", r.frame_skipped ? "yes: Dynamo gave up on the frame, which runs eagerly" : "no");
      f.emplace_back("log line", std::to_string(r.log_line));
      break;
    }
    case Source::Phase: {
      const auto& p = tl.phases.at(row);
      f.emplace_back("run phase", p.name);
      f.emplace_back("what", p.what);
      f.emplace_back("events", std::to_string(p.events));
      break;
    }
    case Source::SwapGroup: describe_swap_group(tl, row, f); break;
    default: break;
  }
}

/// A CPU op's args as Kineto recorded them ('Input Dims', 'Input type', ...): one field each,
/// long values cut.
void describe_args(const std::string& args, Fields& f) {
  if (args.empty()) return;
  nlohmann::json j;
  try {  // a capture's column: bounded (storage/bounded_json.h)
    j = storage::parse_json_bounded(args, "CPU_OPS.argsId");
  } catch (const storage::JsonError&) {
    j = nullptr;  // shown as text
  }
  if (!j.is_object()) {
    f.emplace_back("args", args.substr(0, 200));
    return;
  }
  for (const auto& [k, v] : j.items()) {
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (text.size() > 200) text = text.substr(0, 197) + "...";
    f.emplace_back(k, text);
  }
}

/// The CUDA API call that launched a GPU record (by correlationId), if the run has it.
void describe_launch(const RunTimeline& tl, uint32_t correlation, Fields& f) {
  if (!correlation) return;
  f.emplace_back("correlationId", std::to_string(correlation));
  auto it = tl.launches.find(correlation);
  if (it == tl.launches.end()) return;
  const auto [src, row] = it->second;
  const auto& name = src == Source::Driver ? tl.driver_calls.at(row).name : tl.runtime_calls.at(row).name;
  const int64_t tid = src == Source::Driver ? tl.driver_calls.at(row).os_tid : tl.runtime_calls.at(row).os_tid;
  f.emplace_back("launched by", name + " (tid " + std::to_string(tid) + ")");
}

/// What torch.profiler / CUPTI recorded: CPU ops, GPU records, CUDA API calls.
void describe_activity(const RunTimeline& tl, Source source, uint32_t row, Fields& f) {
  switch (source) {
    case Source::CpuOp: {
      const auto& r = tl.cpu_ops.at(row);
      f.emplace_back(r.category, r.name);
      f.emplace_back(r.category == "gpu_user_annotation" ? "stream" : "tid", std::to_string(r.os_tid));
      if (r.external_id) f.emplace_back("External id", std::to_string(*r.external_id));
      if (r.sequence_number) f.emplace_back("Sequence number", std::to_string(*r.sequence_number));
      describe_args(r.args, f);
      break;
    }
    case Source::Kernel: {
      const auto& r = tl.kernels.at(row);
      f.emplace_back("kernel", r.demangled_name);
      f.emplace_back("device, stream", std::to_string(r.device_id) + ", stream " + std::to_string(r.stream_id));
      f.emplace_back("grid", std::to_string(r.grid_x) + " x " + std::to_string(r.grid_y) + " x " + std::to_string(r.grid_z));
      f.emplace_back("block",
                     std::to_string(r.block_x) + " x " + std::to_string(r.block_y) + " x " + std::to_string(r.block_z));
      f.emplace_back("registers per thread", std::to_string(r.registers_per_thread));
      f.emplace_back("shared memory", format_bytes(static_cast<double>(r.static_shared_memory)) + " static, " +
                                          format_bytes(static_cast<double>(r.dynamic_shared_memory)) + " dynamic");
      describe_launch(tl, r.correlation_id, f);
      break;
    }
    case Source::Memcpy: {
      const auto& r = tl.memcpys.at(row);
      f.emplace_back("memcpy", copy_kind_name(r.copy_kind));
      f.emplace_back("bytes", bytes_text(r.bytes));
      f.emplace_back("device, stream", std::to_string(r.device_id) + ", stream " + std::to_string(r.stream_id));
      if (r.src_device_id || r.dst_device_id)
        f.emplace_back("src -> dst", (r.src_device_id ? std::to_string(*r.src_device_id) : "host") + " -> " +
                                         (r.dst_device_id ? std::to_string(*r.dst_device_id) : "host"));
      describe_launch(tl, r.correlation_id, f);
      break;
    }
    case Source::Memset: {
      const auto& r = tl.memsets.at(row);
      f.emplace_back("memset", bytes_text(r.bytes));
      f.emplace_back("value", std::to_string(r.value));
      f.emplace_back("device, stream", std::to_string(r.device_id) + ", stream " + std::to_string(r.stream_id));
      describe_launch(tl, r.correlation_id, f);
      break;
    }
    case Source::Sync: {
      const auto& r = tl.syncs.at(row);
      f.emplace_back("CUDA sync", std::string(tracer::sync_type_name(r.sync_type, "Unknown Sync")));
      f.emplace_back("device, stream", std::to_string(r.device_id) + ", stream " + std::to_string(r.stream_id));
      if (r.event_id) f.emplace_back("event", std::to_string(r.event_id));
      describe_launch(tl, r.correlation_id, f);
      break;
    }
    case Source::Runtime:
    case Source::Driver: {
      const bool driver = source == Source::Driver;
      const auto& name = driver ? tl.driver_calls.at(row).name : tl.runtime_calls.at(row).name;
      f.emplace_back(driver ? "CUDA driver API" : "CUDA runtime API", name);
      f.emplace_back("tid", std::to_string(driver ? tl.driver_calls.at(row).os_tid : tl.runtime_calls.at(row).os_tid));
      const uint32_t corr = driver ? tl.driver_calls.at(row).correlation_id : tl.runtime_calls.at(row).correlation_id;
      if (corr) f.emplace_back("correlationId", std::to_string(corr));
      const int32_t rv = driver ? tl.driver_calls.at(row).return_value : tl.runtime_calls.at(row).return_value;
      if (rv) f.emplace_back("return value", std::to_string(rv));
      break;
    }
    default: break;
  }
}

}  // namespace

std::pair<int64_t, int64_t> extent(const RunTimeline& tl, Source source, uint32_t row) {
  const int64_t o = tl.origin_ns;
  switch (source) {
    case Source::Compute: return span_of(tl.module_compute, row, o);
    case Source::Transfer: return span_of(tl.transfers, row, o);
    case Source::WeightSwap: return span_of(tl.weight_swaps, row, o);
    case Source::Residency: return {0, tl.duration_ns};
    case Source::Hook: return span_of(tl.hook_events, row, o);
    case Source::Disabled: return span_of(tl.disabled_scopes, row, o);
    case Source::Region: return span_of(tl.regions, row, o);
    case Source::Step: return span_of(tl.generation_steps, row, o);
    case Source::Break: return {tl.graph_breaks.at(row).time_ns - o, tl.graph_breaks.at(row).time_ns - o};
    case Source::DynamoBreak: {
      const int64_t t = tl.dynamo_graph_breaks.at(row).time_ns.value_or(o) - o;
      return {t, t};
    }
    case Source::CpuOp: return span_of(tl.cpu_ops, row, o);
    case Source::Kernel: return span_of(tl.kernels, row, o);
    case Source::Memcpy: return span_of(tl.memcpys, row, o);
    case Source::Memset: return span_of(tl.memsets, row, o);
    case Source::Sync: return span_of(tl.syncs, row, o);
    case Source::Runtime: return span_of(tl.runtime_calls, row, o);
    case Source::Driver: return span_of(tl.driver_calls, row, o);
    case Source::Phase: return {tl.phases.at(row).start_ns, tl.phases.at(row).end_ns};
    case Source::SwapGroup: return {tl.swap_groups.at(row).start_ns, tl.swap_groups.at(row).end_ns};
  }
  return {0, 0};
}

std::vector<std::pair<std::string, std::string>> describe(const RunTimeline& tl, Source source, uint32_t row) {
  Fields f;
  const auto [a, b] = extent(tl, source, row);
  switch (source) {
    case Source::CpuOp:
    case Source::Kernel:
    case Source::Memcpy:
    case Source::Memset:
    case Source::Sync:
    case Source::Runtime:
    case Source::Driver: describe_activity(tl, source, row, f); break;
    default: describe_hookscope(tl, source, row, f); break;
  }
  if (source == Source::Break || source == Source::DynamoBreak) {
    f.emplace_back("time", format_duration(static_cast<double>(a)));
  } else if (source != Source::Residency) {
    f.emplace_back("start", format_duration(static_cast<double>(a)));
    f.emplace_back("duration", format_duration(static_cast<double>(b - a)));
  }
  if (source == Source::Transfer && b > a) f.emplace_back("throughput", rate_text(tl.transfers.at(row).bytes, b - a));
  if (source == Source::Memcpy && b > a) f.emplace_back("throughput", rate_text(tl.memcpys.at(row).bytes, b - a));
  return f;
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<SearchMatch> find_events(const RunTimeline& tl, std::string_view query) {
  std::vector<SearchMatch> out;
  const size_t a = query.find_first_not_of(" \t"), b = query.find_last_not_of(" \t");
  if (a == std::string_view::npos) return out;
  const std::string q = lower(query.substr(a, b - a + 1));
  // Each interned label is tested once, not once per slice.
  std::vector<bool> hit(tl.strings.size());
  for (size_t i = 0; i < tl.strings.size(); ++i) hit[i] = lower(tl.strings[i]).find(q) != std::string::npos;
  for (uint32_t g = 0; g < tl.groups.size(); ++g) {
    const auto& tracks = tl.groups[g].tracks;
    for (uint16_t t = 0; t < tracks.size(); ++t) {
      const Track& tr = tracks[t];
      auto take = [&](const Slice& s, uint16_t level) {
        const Source src = slice_source(tr, s);
        bool match = hit[s.label];
        if (!match && src == Source::Break) match = lower(tl.graph_breaks[s.row].module).find(q) != std::string::npos;
        // A transfer is on two lanes: found on its source's, unless that device has no group.
        if (match && tr.lane == Lane::TransfersIn && tl.group_of(canonical_device(tl.transfers[s.row].src)) >= 0)
          match = false;
        if (!match) return;
        out.push_back({src, s.row, s.start_ns, s.end_ns, g, t, level});
      };
      for (uint16_t lv = 0; lv < tr.levels.size(); ++lv)
        for (const Slice& s : tr.levels[lv]) take(s, lv);
      for (const Slice& s : tr.instants) take(s, 0);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const SearchMatch& x, const SearchMatch& y) {
    return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : std::tie(x.group, x.track) < std::tie(y.group, y.track);
  });
  return out;
}

std::vector<bool> categories_used(const RunTimeline& tl) {
  std::vector<bool> used(kCategoryCount, false);
  auto see = [&](const Track& t) {
    for (const auto& level : t.levels)
      for (const Slice& s : level) used[s.category] = true;
    for (const Slice& s : t.instants) used[s.category] = true;
    for (const Slice& s : t.aggregate) used[s.category] = true;
  };
  for (const auto& g : tl.groups) {
    for (const auto& t : g.tracks) see(t);
    for (const auto& t : g.residency) see(t);
    see(g.residency_summary);
  }
  return used;
}

RangeStats range_stats(const RunTimeline& tl, int64_t t0, int64_t t1) {
  RangeStats st;
  if (t1 < t0) std::swap(t0, t1);
  st.t0_ns = t0;
  st.t1_ns = t1;
  for (const auto& g : tl.groups) {
    GroupRangeStats s;
    s.device = g.host ? g.title : g.device;
    for (const auto& t : g.tracks) {
      if (t.lane == Lane::Memory) continue;
      for (size_t lv = 0; lv < t.levels.size(); ++lv) {
        const auto& level = t.levels[lv];
        auto it = std::partition_point(level.begin(), level.end(), [&](const Slice& x) { return x.end_ns <= t0; });
        for (; it != level.end() && it->start_ns < t1; ++it) {
          if (it->end_ns <= t0 && it->start_ns < t0) continue;
          const int64_t clipped = std::min(it->end_ns, t1) - std::max(it->start_ns, t0);
          if (lv == 0) s.busy_ns[it->category] += clipped;  // nested slices are inside their parent's time
          ++s.count[it->category];
          const int64_t whole = it->end_ns - it->start_ns;
          if (t.source == Source::Transfer) {
            const int64_t bytes = tl.transfers[it->row].bytes;
            if (t.lane == Lane::TransfersIn) {
              s.bytes_in += bytes;
              s.copy_ns_in += whole;
            } else {
              s.bytes_out += bytes;
              s.copy_ns_out += whole;
            }
          } else if (t.source == Source::WeightSwap && it->category == kOnload) {
            s.onload_bytes += tl.weight_swaps[it->row].bytes;
            s.onload_ns += whole;
          }
        }
      }
      if (t.source == Source::Break || t.source == Source::DynamoBreak) {
        auto lo = std::lower_bound(t.instants.begin(), t.instants.end(), t0,
                                   [](const Slice& x, int64_t v) { return x.start_ns < v; });
        auto hi = std::upper_bound(t.instants.begin(), t.instants.end(), t1,
                                   [](int64_t v, const Slice& x) { return v < x.start_ns; });
        s.count[kBreak] += hi - lo;
        (t.source == Source::Break ? st.graph_breaks : st.dynamo_break_records) += hi - lo;
      }
    }
    st.groups.push_back(s);
  }
  return st;
}

}  // namespace hs::ui
