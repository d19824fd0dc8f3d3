// load_run_timeline: one run's rows → lane groups. Device groups first (accelerators by index,
// then cpu, disk), each filled lane by lane; then one host group per thread (the tracer's
// recording threads, then threads only CPU ops or CUDA API calls name); then the flows.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <unordered_set>
#include <string_view>
#include <utility>

#include "importers/dynamo_text.h"
#include "output/text.h"
#include "tracer/kind_names.h"
#include "ui/run_timeline.h"
#include "ui/timeline_loader.h"

namespace hs::ui {

namespace {

// Per generation step, the generate it belongs to ("warm-up 1 · ", "measured 2 · "): every
// generate starts at step 0, and a capture's run records its `warmup` generates, then its
// `repeats` (RUNS.results). When the count differs (a torch-engine run holds only its profiled
// generate) the generates are numbered without that distinction.
std::vector<std::string> generate_labels(const RunTimeline& tl) {
  auto count = [&](const char* k) -> int64_t {
    const auto& res = tl.run.results;
    return res.is_object() && res.contains(k) && res[k].is_number_integer() ? res[k].get<int64_t>() : -1;
  };
  int64_t generates = 0;
  for (const auto& r : tl.generation_steps) generates += r.step == 0;
  const int64_t warmup = count("warmup"), repeats = count("repeats");
  const bool split = warmup >= 0 && repeats >= 0 && generates == warmup + repeats && generates > 1;
  std::vector<std::string> out;
  int64_t gen = 0;
  for (const auto& r : tl.generation_steps) {
    if (r.step == 0 || gen == 0) ++gen;
    if (generates <= 1) out.emplace_back();
    else if (!split) out.push_back("generate " + std::to_string(gen) + " · ");
    else if (gen <= warmup) out.push_back("warm-up " + std::to_string(gen) + " · ");
    else out.push_back("measured " + std::to_string(gen - warmup) + " · ");
  }
  return out;
}

bool keeps_empty_lanes(const storage::RunRecord& run);

/// The events of the run that start in [t0, t1) (relative ns): how many, and where the last of
/// them ends.
struct EventsIn {
  int64_t count = 0;
  int64_t last_end = 0;  ///< relative; t0 when none
};
EventsIn events_in(const RunTimeline& tl, int64_t t0, int64_t t1) {
  const int64_t a = t0 + tl.origin_ns, b = t1 + tl.origin_ns;
  EventsIn e{0, t0};
  auto see = [&](int64_t start, int64_t end) {
    if (start < a || start >= b) return;
    ++e.count;
    e.last_end = std::max(e.last_end, end - tl.origin_ns);
  };
  auto rows = [&](const auto& v) {
    for (const auto& r : v) see(r.start_ns, r.end_ns);
  };
  rows(tl.module_compute), rows(tl.transfers), rows(tl.weight_swaps), rows(tl.hook_events), rows(tl.disabled_scopes), rows(tl.regions);
  rows(tl.cpu_ops), rows(tl.kernels), rows(tl.memcpys), rows(tl.memsets), rows(tl.runtime_calls);
  rows(tl.driver_calls);
  for (const auto& r : tl.graph_breaks) see(r.time_ns, r.time_ns);
  return e;
}

/// What the run recorded before generation step 0 began ([0, end)), as the engine that recorded
/// it does it: the LibTorch engine's first call of the compiled forward (capture of its regions
/// in a compiled mode) checked against the reference — model load, dispatch and the reference
/// itself run before the run's recording starts; in a trace, what it holds before its first
/// hookscope::step range.
RunPhase pre_step_phase(const RunTimeline& tl, int64_t end, int64_t events) {
  RunPhase p;
  p.end_ns = end;
  p.events = events;
  int64_t regions = 0, breaks = 0, dynamo = 0;
  for (const auto& r : tl.regions) regions += r.start_ns - tl.origin_ns < end;
  for (const auto& r : tl.graph_breaks) breaks += r.time_ns - tl.origin_ns < end;
  for (const auto& r : tl.dynamo_graph_breaks) dynamo += *r.time_ns >= tl.origin_ns && *r.time_ns - tl.origin_ns < end;
  const std::string counts = std::to_string(events) + " events" +
                             (regions ? ", " + std::to_string(regions) + " compiled regions" : "") +
                             (breaks ? ", " + std::to_string(breaks) + " graph breaks" : "") +
                             (dynamo ? ", " + std::to_string(dynamo) + " Dynamo graph-break records" : "");
  if (!keeps_empty_lanes(tl.run)) {
    p.name = "before step 0 (not a generation step)";
    p.what = "what the trace recorded before its first hookscope::step range (" + counts + ")";

  } else if (tl.run.mode == "eager") {
    p.name = "before step 0: first forward, checked against the reference";
    p.what = "the run's first forward, its prefill argmax and logits compared with the undispatched single-device "
             "reference (" + counts + "); model load, dispatch and the reference's own forward ran before recording "
             "began";
  } else {
    p.name = "before step 0: first compiled call (capture) + reference check";
    p.what = "the first call of the compiled forward: regions cut at the compiler-disabled scopes (graph breaks) and "
             "run, its prefill argmax and logits compared with the undispatched single-device reference (" + counts +
             "); model load, dispatch and the reference's own forward ran before recording began";
  }
  return p;
}

/// The eager generate a compiled LibTorch cell runs before each compiled one (A B A B): the
/// sink is off during it, so it is a gap in the recording.
RunPhase eager_generate_phase(int64_t start, int64_t end) {
  RunPhase p;
  p.start_ns = start;
  p.end_ns = end;
  p.name = "eager generate (A B A B baseline, not recorded)";
  p.what = "the eager generate of the same dispatched model that precedes each compiled one, timed for the speed-up "
           "against eager; nothing is recorded during it";
  return p;
}

/// A compiled LibTorch run interleaves eager generates (its results carry their latency).
bool interleaved(const RunTimeline& tl) {
  const auto& r = tl.run.results;
  return keeps_empty_lanes(tl.run) && r.is_object() && r.contains("eager_decode_ms_per_token") &&
         !r["eager_decode_ms_per_token"].is_null();
}

bool is_index(const std::string& d) {
  return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// accelerate's device order: accelerators by index, then cpu, disk, then anything else.
bool device_less(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& d) { return is_index(d) ? 0 : d == "cpu" ? 1 : d == "disk" ? 2 : 3; };
  if (rank(a) != rank(b)) return rank(a) < rank(b);
  if (is_index(a)) return std::stoll(a) < std::stoll(b);
  return a < b;
}

std::string json_device(const nlohmann::json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

uint8_t copy_category(tracer::MemcpyKind k) {
  switch (k) {
    case tracer::MemcpyKind::HtoD: return kHtoD;
    case tracer::MemcpyKind::DtoH: return kDtoH;
    case tracer::MemcpyKind::DtoD: return kDtoD;
    case tracer::MemcpyKind::PtoP: return kPtoP;
    default: return kOtherCopy;
  }
}

uint8_t hook_category(events::HookPhase p) {
  return p == events::HookPhase::PreForward    ? kPreForward
         : p == events::HookPhase::PostForward ? kPostForward
                                               : kOtherHook;
}

/// "model.layers.9" < "model.layers.10": digit runs compare as numbers.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      const std::string_view na(a.data() + i, ie - i), nb(b.data() + j, je - j);
      const auto ta = na.substr(std::min(na.find_first_not_of('0'), na.size())),
                 tb = nb.substr(std::min(nb.find_first_not_of('0'), nb.size()));
      if (ta.size() != tb.size()) return ta.size() < tb.size();
      if (ta != tb) return ta < tb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

/// `module` is `key` or a submodule of it ("" is the root: everything is under it).
bool under(const std::string& module, const std::string& key) {
  return key.empty() || module == key ||
         (module.size() > key.size() && module.compare(0, key.size(), key) == 0 && module[key.size()] == '.');
}

/// A text as one part of a label: at most one byte past RunTimeline::kMaxLabelBytes of it. A
/// label of such parts is cut by intern() exactly where the whole would be, and a name of
/// megabytes is never copied once per label it is part of (per module a hook ran on, say).
std::string part(std::string_view s) { return std::string(s.substr(0, RunTimeline::kMaxLabelBytes + 1)); }
std::string module_part(std::string_view module) { return module.empty() ? "<root>" : part(module); }

/// Labels made from a few fields of a row (strings by their SharedText key, numbers as they
/// are), each made and interned once per distinct fields: a run of millions of rows names a
/// few thousand things. Open addressing, linear probing. Where the fields are mostly distinct
/// (a region index that never repeats), it stops caching and interns what `make` gives.
class LabelCache {
 public:
  explicit LabelCache(RunTimeline& tl) : tl_(tl), slots_(64) {}
  template <class Make>
  uint32_t get(uint64_t a, uint64_t b, uint64_t c, Make&& make) {
    if (bypass_) return tl_.intern(make());
    if (++gets_ == kTrial && used_ * 2 > kTrial) {
      bypass_ = true;
      slots_ = {};
      return tl_.intern(make());
    }
    const Key k{a, b, c};
    size_t i = hash(k) & (slots_.size() - 1);
    for (; slots_[i].used; i = (i + 1) & (slots_.size() - 1))
      if (slots_[i].key == k) return slots_[i].label;
    const uint32_t label = tl_.intern(make());
    slots_[i] = {k, label, true};
    if (++used_ * 2 > slots_.size()) grow();
    return label;
  }
  static uint64_t of(const storage::SharedText& t) { return reinterpret_cast<uintptr_t>(t.key()); }

 private:
  struct Key {
    uint64_t a, b, c;
    bool operator==(const Key&) const = default;
  };
  struct Slot {
    Key key{};
    uint32_t label = 0;
    bool used = false;
  };
  static size_t hash(const Key& k) {
    uint64_t h = k.a * 0x9E3779B97F4A7C15ull ^ (k.b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full ^ k.c * 0x165667B19E3779F9ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.used) {
        size_t i = hash(s.key) & (slots_.size() - 1);
        while (slots_[i].used) i = (i + 1) & (slots_.size() - 1);
        slots_[i] = s;
      }
  }
  static constexpr size_t kTrial = 1 << 16;  ///< lookups after which a cache missing half of them stops
  RunTimeline& tl_;
  std::vector<Slot> slots_;
  size_t used_ = 0, gets_ = 0;
  bool bypass_ = false;
};

bool by_start(const Slice& a, const Slice& b) { return a.start_ns < b.start_ns; }

/// A track of `lane` with its slices split into nesting levels.
Track slice_track(Lane lane, std::vector<Slice> slices) {
  Track t;
  t.name = lane_name(lane);
  t.lane = lane;
  t.source = lane_source(lane);
  t.levels = build_levels(std::move(slices));
  return t;
}

/// The slices of one device group while loading, one vector per lane.
struct DeviceLanes {
  std::vector<Slice> compute, transfers_in, transfers_out, swaps;
  std::vector<Slice> on_device;                     ///< every module's on-device intervals (→ the residency summary)
  std::vector<Track> residency;                     ///< one lane per module
  std::vector<std::pair<int64_t, int64_t>> memory;  ///< (relative ns, bytes)
  std::vector<Slice> gpu_annotations;
  std::map<uint32_t, std::vector<Slice>> streams;   ///< by CUDA stream id
};

/// The slices of one host thread while loading, one vector per lane; a lane's nesting levels
/// once the part of the layout that placed it built them (`levels`, its vector then empty).
struct HostLanes {
  std::vector<Slice> model_forward, hooks, disabled, regions, breaks, dynamo_breaks, steps;
  std::string dynamo_name;  ///< the Dynamo lane's title
  std::vector<Slice> cpu_ops, python, cuda_api;
  bool hookscope = false;  ///< the tracer recorded hookscope events on this thread
  std::map<Lane, std::vector<std::vector<Slice>>> levels;
};

/// A host group while loading: the tracer's threads first (by index), then threads only CPU ops
/// or CUDA API calls name (by OS tid).
struct HostKey {
  bool tid_only = false;
  int64_t id = 0;  ///< the tracer's thread index, or the OS tid
  bool operator<(const HostKey& o) const { return tid_only != o.tid_only ? !tid_only : id < o.id; }
};

/// A run the LibTorch engine recorded keeps its lanes even when empty (see Lane).
bool keeps_empty_lanes(const storage::RunRecord& run) { return run.engine.empty() || run.engine == "libtorch"; }

/// Where one module's weights were over the run: from its swaps (the resident tensor count
/// going 0 → 1 starts a materialised interval, 1 → 0 ends it), or from the device map.
struct ModuleResidency {
  std::string device, home;
  int64_t bytes = 0;     ///< bytes materialised by the last onload
  int64_t resident = 0;  ///< tensors materialised now
  int64_t on_since = 0;
  std::vector<std::pair<int64_t, int64_t>> on;  ///< materialised intervals (relative ns)
};
using ResidencyMap = std::map<std::string, ModuleResidency>;  ///< by module

/// Device name → index of its group in RunTimeline::groups (one lookup per event while loading).
class DeviceIndex {
 public:
  explicit DeviceIndex(const RunTimeline& tl) {
    for (size_t g = 0; g < tl.groups.size(); ++g)
      if (!tl.groups[g].host) index_.emplace(tl.groups[g].device, static_cast<int>(g));
  }
  /// −1 when no group shows `device` ("cuda:N" is accelerator "N").
  int operator()(const std::string& device) const {
    auto it = index_.find(device);
    if (it == index_.end() && device.size() > 5 && device.compare(0, 5, "cuda:") == 0)
      it = index_.find(canonical_device(device));
    return it == index_.end() ? -1 : it->second;
  }
  /// The same for a string of the capture: looked up once per string (rows name few devices).
  int operator()(const storage::SharedText& device) const {
    auto [it, added] = by_key_.try_emplace(device.key(), 0);
    if (added) it->second = (*this)(device.str());
    return it->second;
  }
  /// The group of CUDA device `id` (−1 if none).
  int gpu(uint32_t id) const { return (*this)(std::to_string(id)); }

 private:
  std::unordered_map<std::string, int> index_;
  mutable std::unordered_map<const void*, int> by_key_;
};

/// Readies the rows read into `tl` for the layout; returns its memory counters (they become
/// lanes, not rows).
std::vector<storage::SharedMemoryCounterRow> take_rows(RunTimeline& tl) {
  std::erase_if(tl.dynamo_graph_breaks, [](const storage::SharedDynamoGraphBreakRow& b) { return !b.time_ns; });
  for (uint32_t i = 0; i < tl.runtime_calls.size(); ++i)
    if (tl.runtime_calls[i].correlation_id) tl.launches.try_emplace(tl.runtime_calls[i].correlation_id, Source::Runtime, i);
  for (uint32_t i = 0; i < tl.driver_calls.size(); ++i)
    if (tl.driver_calls[i].correlation_id) tl.launches.try_emplace(tl.driver_calls[i].correlation_id, Source::Driver, i);
  return std::exchange(tl.memory_counters, {});
}

/// Origin (the earliest event) and duration (to the latest) over every event of the run, and
/// over `hint` (the extent of rows not read yet, for a preview).
void set_extent(RunTimeline& tl, const std::vector<storage::SharedMemoryCounterRow>& memory,
                const std::optional<std::pair<int64_t, int64_t>>& hint) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  if (hint) lo = hint->first, hi = hint->second;
  auto see = [&](int64_t a, int64_t b) {
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  };
  for (const auto& r : tl.module_compute) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.transfers) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.weight_swaps) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.hook_events) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.disabled_scopes) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.regions) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.generation_steps) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.graph_breaks) see(r.time_ns, r.time_ns);
  for (const auto& r : memory) see(r.time_ns, r.time_ns);
  for (const auto& r : tl.cpu_ops) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.kernels) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.memcpys) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.memsets) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.syncs) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.runtime_calls) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.driver_calls) see(r.start_ns, r.end_ns);
  if (lo > hi) {  // a run without events (e.g. killed before its first batch)
    lo = tl.run.start_ns;
    hi = tl.run.end_ns.value_or(tl.run.start_ns);
  }
  tl.origin_ns = lo;
  tl.duration_ns = std::max<int64_t>(hi - lo, 1);
}

/// The GPU each gpu_user_annotation CPU op belongs to, as (cpu_ops row, device id). Kineto
/// writes such an annotation with its GPU as pid and its stream as tid; the capture keeps only
/// the tid (the stream), so the device is the one whose records on that stream the annotation
/// covers (it spans the GPU work of a record_function range): the first record starting
/// inside it, else the nearest one before it; device 0 when no GPU record uses the stream.
std::vector<std::pair<uint32_t, uint32_t>> gpu_annotation_devices(const RunTimeline& tl) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  std::map<uint32_t, std::vector<std::pair<int64_t, uint32_t>>> by_stream;  // stream → (start, device)
  bool any = false;
  for (const auto& r : tl.cpu_ops) any |= r.category == "gpu_user_annotation";
  if (!any) return out;
  for (const auto& r : tl.kernels) by_stream[r.stream_id].emplace_back(r.start_ns, r.device_id);
  for (const auto& r : tl.memcpys) by_stream[r.stream_id].emplace_back(r.start_ns, r.device_id);
  for (const auto& r : tl.memsets) by_stream[r.stream_id].emplace_back(r.start_ns, r.device_id);
  for (auto& [_, v] : by_stream) std::sort(v.begin(), v.end());
  for (uint32_t i = 0; i < tl.cpu_ops.size(); ++i) {
    const auto& r = tl.cpu_ops[i];
    if (r.category != "gpu_user_annotation") continue;
    uint32_t device = 0;
    if (auto it = by_stream.find(static_cast<uint32_t>(r.os_tid)); it != by_stream.end()) {
      const auto& v = it->second;
      auto at = std::lower_bound(v.begin(), v.end(), std::make_pair(r.start_ns, uint32_t{0}));
      device = at != v.end() && at->first <= r.end_ns ? at->second : at != v.begin() ? std::prev(at)->second : at->second;
    }
    out.emplace_back(i, device);
  }
  return out;
}

/// The devices shown, in accelerate's order: the run's devices plus any device an event names
/// (a trace's "cuda:N" as "N"; GPU records by their device id).
std::vector<std::string> device_names(const RunTimeline& tl, const std::map<std::string, storage::DeviceInfo>& infos,
                                      const std::vector<storage::SharedMemoryCounterRow>& memory,
                                      const std::vector<std::pair<uint32_t, uint32_t>>& annotations) {
  std::set<std::string> names;
  for (const auto& [n, _] : infos)
    if (n != "disk") names.insert(n);  // disk holds weights, it never computes: shown only if used
  std::unordered_set<const void*> seen;  // each string of the capture once
  auto add = [&](const storage::SharedText& d) {
    if (seen.insert(d.key()).second) names.insert(canonical_device(d));
  };
  for (const auto& r : tl.module_compute) add(r.device);
  for (const auto& r : tl.transfers) {
    add(r.src);
    add(r.dst);
  }
  for (const auto& r : tl.weight_swaps)
    if (r.onload) add(r.device);
  for (const auto& r : memory) add(r.device);
  std::set<uint32_t> gpus;
  for (const auto& r : tl.kernels) gpus.insert(r.device_id);
  for (const auto& r : tl.memcpys) gpus.insert(r.device_id);
  for (const auto& r : tl.memsets) gpus.insert(r.device_id);
  for (const auto& [_, d] : annotations) gpus.insert(d);
  for (uint32_t g : gpus) names.insert(std::to_string(g));
  names.erase("meta");
  std::vector<std::string> order(names.begin(), names.end());
  std::sort(order.begin(), order.end(), device_less);
  return order;
}

/// An empty group for device `name`, titled with what the capture knows of it (`info`, if
/// any; `gpu`: the TARGET_INFO_GPU row of a GPU named only by its records).
LaneGroup device_group(const std::string& name, const storage::DeviceInfo* info, const storage::GpuInfo* gpu) {
  LaneGroup g;
  g.device = name;
  if (info && info->kind == storage::DeviceKind::Emulated) {
    g.emulated = true;
    g.title = "accelerator " + name + " (emulated, " + info->backing + " memory)";
  } else if (info && info->kind == storage::DeviceKind::Cuda) {
    g.title = "accelerator " + name + " (" + (info->label.empty() ? info->backing : info->label) + ")";
  } else if (name == "cpu") {
    g.title = "cpu (host memory)";
  } else if (is_index(name) && gpu) {
    g.title = "accelerator " + name + " (cuda:" + name + ", " + gpu->name +
              (gpu->total_memory ? ", " + format_bytes(static_cast<double>(gpu->total_memory)) : "") + ")";
  } else if (is_index(name)) {
    g.title = "accelerator " + name;
  } else {
    g.title = name;
  }
  if (info && info->max_memory) g.title += ", max_memory " + format_bytes(static_cast<double>(*info->max_memory));
  g.title = output::cut_text(g.title, RunTimeline::kMaxLabelBytes);  // drawn every frame
  return g;
}

/// The device groups of the run. The capture-wide DEVICES rows are the devices of the engines
/// that captured into this file; a run recorded from a trace (torch engine, import) ran
/// elsewhere, so only the rows of its own (if any) and the devices its events name are shown
/// for it: no empty lanes of accelerators it never used.
void add_device_groups(RunTimeline& tl, const std::vector<storage::DeviceRow>& devices,
                       const std::vector<storage::GpuInfo>& gpus, const std::vector<storage::SharedMemoryCounterRow>& memory,
                       const std::vector<std::pair<uint32_t, uint32_t>>& annotations) {
  std::map<std::string, storage::DeviceInfo> infos;
  const bool elsewhere = storage::recorded_from_trace(tl.run);
  for (const auto& d : devices)
    if (!elsewhere || d.info.run_id) infos[d.info.name] = d.info;
  std::map<std::string, const storage::GpuInfo*> gpu_of;
  for (const auto& g : gpus) gpu_of[std::to_string(g.id)] = &g;
  for (const auto& name : device_names(tl, infos, memory, annotations)) {
    auto it = infos.find(name);
    auto gpu = gpu_of.find(name);
    tl.groups.push_back(device_group(name, it == infos.end() ? nullptr : &it->second,
                                     gpu == gpu_of.end() ? nullptr : gpu->second));
  }
}

/// Module compute onto the devices' compute lanes. Returns the root module's compute rows: the
/// whole model's forward is host work (a lane of its thread), not device work.
std::vector<uint32_t> place_compute(RunTimeline& tl, const DeviceIndex& dev, std::vector<DeviceLanes>& lanes) {
  LabelCache labels(tl);
  std::vector<uint32_t> root_forward;
  const int64_t o = tl.origin_ns;
  std::vector<size_t> count(lanes.size());  // each lane at its size: no regrowth of millions of slices
  for (const auto& r : tl.module_compute)
    if (const int g = dev(r.device); g >= 0 && !r.module.empty()) ++count[static_cast<size_t>(g)];
  for (size_t g = 0; g < lanes.size(); ++g) lanes[g].compute.reserve(count[g]);
  for (uint32_t i = 0; i < tl.module_compute.size(); ++i) {
    const auto& r = tl.module_compute[i];
    if (r.module.empty()) {
      root_forward.push_back(i);
      continue;
    }
    const int g = dev(r.device);
    if (g < 0) continue;
    const uint32_t label = labels.get(LabelCache::of(r.module), 0, 0, [&] { return module_part(r.module); });
    lanes[g].compute.push_back({r.start_ns - o, r.end_ns - o, label, i, kCompute});
  }
  return root_forward;
}

/// Activation transfers that moved bytes onto the source's "out" and the destination's "in"
/// lane. Returns the flows between the two groups, when both are shown (their tracks are
/// resolved later).
std::vector<Flow> place_transfers(RunTimeline& tl, const DeviceIndex& dev, std::vector<DeviceLanes>& lanes) {
  LabelCache labels(tl);
  std::vector<Flow> flows;
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.transfers.size(); ++i) {
    const auto& r = tl.transfers[i];
    if (r.bytes == 0) continue;  // a send_to_device that moved nothing is not a transfer (the Transfers tab lists it)
    const uint32_t label = labels.get(LabelCache::of(r.src), LabelCache::of(r.dst), LabelCache::of(r.module),
                                      [&] { return part(r.src) + " -> " + part(r.dst) + (r.module.empty() ? "" : " " + part(r.module)); });
    const uint8_t cat = copy_category(r.copy_kind);
    const int s = dev(r.src), d = dev(r.dst);
    if (s >= 0) lanes[s].transfers_out.push_back({r.start_ns - o, r.end_ns - o, label, i, cat});
    if (d >= 0) lanes[d].transfers_in.push_back({r.start_ns - o, r.end_ns - o, label, i, cat});
    if (s >= 0 && d >= 0) {
      Flow f;
      f.start_ns = r.start_ns - o;
      f.end_ns = r.end_ns - o;
      f.src_group = static_cast<uint32_t>(s);
      f.dst_group = static_cast<uint32_t>(d);
      f.row = f.src_row = i;
      flows.push_back(f);
    }
  }
  return flows;
}

/// Kernels, memcpys ("HtoD 1.00 MiB") and memsets onto their GPU's stream lanes, and
/// gpu_user_annotation ops onto its annotations lane.
void place_gpu_rows(RunTimeline& tl, const DeviceIndex& dev,
                    const std::vector<std::pair<uint32_t, uint32_t>>& annotations, std::vector<DeviceLanes>& lanes) {
  LabelCache labels(tl);
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.kernels.size(); ++i) {
    const auto& r = tl.kernels[i];
    const int g = dev.gpu(r.device_id);
    if (g < 0) continue;
    const uint32_t label = labels.get(LabelCache::of(r.short_name), LabelCache::of(r.demangled_name), 1, [&] {
      return part(r.short_name.empty() ? r.demangled_name : r.short_name);
    });
    lanes[g].streams[r.stream_id].push_back({r.start_ns - o, r.end_ns - o, label, i, kKernel});
  }
  for (uint32_t i = 0; i < tl.memcpys.size(); ++i) {
    const auto& r = tl.memcpys[i];
    const int g = dev.gpu(r.device_id);
    if (g < 0) continue;
    const uint32_t label = labels.get(static_cast<uint64_t>(r.copy_kind), static_cast<uint64_t>(r.bytes), 2, [&] {
      return std::string(copy_kind_name(r.copy_kind)) + " " + format_bytes(static_cast<double>(r.bytes));
    });
    lanes[g].streams[r.stream_id].push_back({r.start_ns - o, r.end_ns - o, label, i, copy_category(r.copy_kind)});
  }
  for (uint32_t i = 0; i < tl.memsets.size(); ++i) {
    const auto& r = tl.memsets[i];
    const int g = dev.gpu(r.device_id);
    if (g < 0) continue;
    const uint32_t label = labels.get(static_cast<uint64_t>(r.bytes), 0, 3,
                                      [&] { return "memset " + format_bytes(static_cast<double>(r.bytes)); });
    lanes[g].streams[r.stream_id].push_back({r.start_ns - o, r.end_ns - o, label, i, kMemset});
  }
  for (uint32_t i = 0; i < tl.syncs.size(); ++i) {  // as nsys draws them: on the stream that waits
    const auto& r = tl.syncs[i];
    const int g = dev.gpu(r.device_id);
    if (g < 0) continue;
    const uint32_t label = labels.get(static_cast<uint64_t>(r.sync_type), 0, 4, [&] {
      return std::string(tracer::sync_type_name(r.sync_type, "Unknown Sync"));
    });
    lanes[g].streams[r.stream_id].push_back({r.start_ns - o, r.end_ns - o, label, i, kSync});
  }
  for (const auto& [row, device] : annotations) {
    const auto& r = tl.cpu_ops[row];
    const int g = dev.gpu(device);
    if (g >= 0)
      lanes[g].gpu_annotations.push_back({r.start_ns - o, r.end_ns - o,
                                          labels.get(LabelCache::of(r.name), 0, 5, [&] { return part(r.name); }), row,
                                          kGpuAnnotation});
  }
}

/// Weight swaps onto the swap lane of the device they onload to (offloads: of the device the
/// module last onloaded to). Returns each swapped module's residency.
ResidencyMap place_swaps(RunTimeline& tl, const DeviceIndex& dev, std::vector<DeviceLanes>& lanes) {
  LabelCache labels(tl);
  ResidencyMap res;
  std::map<std::string, std::string> last_onload_device;  // module → device
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.weight_swaps.size(); ++i) {
    const auto& r = tl.weight_swaps[i];
    ModuleResidency& u = res[r.module];
    if (r.onload) {
      u.device = r.device;
      if (u.home.empty()) u.home = weight_source_name(r.source);
      if (u.resident++ == 0) {
        u.on_since = r.start_ns - o;
        u.bytes = 0;
      }
      u.bytes += r.bytes;
      last_onload_device[r.module] = r.device;
    } else if (u.resident > 0 && --u.resident == 0) {
      u.on.emplace_back(u.on_since, r.end_ns - o);
    }
    const int g = dev(r.onload ? r.device : last_onload_device[r.module]);
    if (g < 0) continue;
    // Onloads say where the weights came from (cpu memory or the disk offload folder).
    const uint32_t label =
        // Offloads say where they went: 'meta' (accelerate drops the weights), 'cpu' or 'disk'
        // (a diffusers group).
        labels.get(LabelCache::of(r.module), r.onload,
                   r.onload ? static_cast<uint64_t>(r.source) : LabelCache::of(r.device), [&] {
                     return module_part(r.module) + (r.onload ? std::string(" <- ") + weight_source_name(r.source)
                                                              : " -> " + part(r.device));
                   });
    lanes[g].swaps.push_back({r.start_ns - o, r.end_ns - o, label, i, static_cast<uint8_t>(r.onload ? kOnload : kOffload)});
  }
  return res;
}

/// Device-map entries without swaps under them keep their weights where the map put them, for
/// the whole run.
void add_mapped_residency(const RunTimeline& tl, ResidencyMap& res) {
  if (!tl.run.device_map.is_object()) return;
  for (const auto& [key, value] : tl.run.device_map.items()) {
    const std::string d = json_device(value);
    const bool swapped = std::any_of(res.begin(), res.end(), [&](const auto& m) { return under(m.first, key); });
    if (swapped || d == "disk" || d == "meta") continue;
    ModuleResidency& u = res[key];
    u.device = u.home = d;
    u.on.emplace_back(0, tl.duration_ns);
  }
}

/// One residency lane per module on its execution device's group: on the device while
/// materialised, on meta (weights at home) in between. Records the on-device intervals for the
/// group's summary lane.
void place_residency(RunTimeline& tl, const DeviceIndex& dev, ResidencyMap& res, std::vector<DeviceLanes>& lanes) {
  for (auto& [module, u] : res) {
    if (u.resident > 0) u.on.emplace_back(u.on_since, tl.duration_ns);  // still materialised at the end
    const int g = dev(u.device);
    if (g < 0) continue;
    const uint32_t row = static_cast<uint32_t>(tl.residency_units.size());
    tl.residency_units.push_back({module, u.device, u.home, u.bytes});
    const uint8_t home_cat = u.home == "disk" ? kHomeDisk : kHomeCpu;
    const uint32_t on_label = tl.intern("on " + part(u.device)), home_label = tl.intern("meta, weights in " + part(u.home));
    const bool offloaded = u.home != u.device;
    std::vector<Slice> lane;
    int64_t cursor = 0;
    for (const auto& [a, b] : u.on) {
      if (a > cursor && offloaded) lane.push_back({cursor, a, home_label, row, home_cat});
      lane.push_back({a, b, on_label, row, kResidentOnDevice});
      lanes[g].on_device.push_back({a, b, 0, row, kResidentOnDevice});
      cursor = b;
    }
    if (cursor < tl.duration_ns && offloaded) lane.push_back({cursor, tl.duration_ns, home_label, row, home_cat});
    Track t = slice_track(Lane::Residency, std::move(lane));
    t.name = output::cut_text(module_label(module), RunTimeline::kMaxLabelBytes);  // drawn every frame
    lanes[g].residency.push_back(std::move(t));
  }
}

void place_memory(const RunTimeline& tl, const std::vector<storage::SharedMemoryCounterRow>& memory, const DeviceIndex& dev,
                  std::vector<DeviceLanes>& lanes) {
  for (const auto& r : memory) {
    const int g = dev(r.device);
    if (g >= 0) lanes[g].memory.emplace_back(r.time_ns - tl.origin_ns, r.bytes);
  }
}

/// The union of the modules' on-device intervals in one lane, each merged interval labelled
/// with its module when it holds one, else "N modules".
Track residency_summary(RunTimeline& tl, std::vector<Slice> on_device) {
  std::sort(on_device.begin(), on_device.end(), by_start);
  std::vector<Slice> merged;
  std::vector<std::set<uint32_t>> modules;  // distinct residency units per merged interval
  for (const Slice& x : on_device) {
    if (!merged.empty() && x.start_ns <= merged.back().end_ns) {
      merged.back().end_ns = std::max(merged.back().end_ns, x.end_ns);
      modules.back().insert(x.row);
    } else {
      merged.push_back(x);
      modules.push_back({x.row});
    }
  }
  for (size_t i = 0; i < merged.size(); ++i)
    merged[i].label = modules[i].size() == 1 ? tl.intern(module_part(tl.residency_units[merged[i].row].module))
                                             : tl.intern(std::to_string(modules[i].size()) + " modules");
  return slice_track(Lane::ResidencySummary, std::move(merged));
}

Track memory_track(std::vector<std::pair<int64_t, int64_t>> points) {
  Track t;
  t.name = lane_name(Lane::Memory);
  t.lane = Lane::Memory;
  t.source = lane_source(Lane::Memory);
  std::sort(points.begin(), points.end());
  t.counter = std::move(points);
  for (const auto& [_, b] : t.counter) t.counter_max = std::max(t.counter_max, b);
  return t;
}

/// A device's weight swaps as one block per generation step (and per stretch between steps):
/// the aggregate of its swaps lane, rows appended to tl.swap_groups. `swaps` are the lane's
/// slices; empty when the run has no steps to group by.
std::vector<Slice> swap_groups(RunTimeline& tl, const std::string& device, const std::vector<Slice>& swaps) {
  std::vector<Slice> out;
  if (tl.generation_steps.empty() || swaps.empty()) return out;
  std::vector<std::pair<int64_t, int64_t>> steps;  // relative (start, end), by start
  for (const auto& r : tl.generation_steps) steps.emplace_back(r.start_ns - tl.origin_ns, r.end_ns - tl.origin_ns);
  std::vector<uint32_t> step_row(steps.size());
  for (uint32_t i = 0; i < step_row.size(); ++i) step_row[i] = i;
  std::stable_sort(step_row.begin(), step_row.end(), [&](uint32_t a, uint32_t b) { return steps[a] < steps[b]; });
  std::vector<Slice> sorted = swaps;
  std::stable_sort(sorted.begin(), sorted.end(), by_start);
  // Key of a swap: 2k+1 inside the k-th step (by start), 2k+2 after it, 0 before the first.
  auto key_of = [&](int64_t t) -> int64_t {
    const auto it = std::partition_point(step_row.begin(), step_row.end(), [&](uint32_t r) { return steps[r].first <= t; });
    if (it == step_row.begin()) return 0;
    const int64_t k = (it - step_row.begin()) - 1;
    return t < steps[step_row[k]].second ? 2 * k + 1 : 2 * k + 2;
  };
  std::set<std::string> modules;
  int64_t key = -1, prev_end = std::numeric_limits<int64_t>::min();
  auto close = [&] {
    SwapGroup& g = tl.swap_groups.back();
    g.modules = static_cast<int64_t>(modules.size());
    std::string label = std::to_string(g.onloads) + (g.onloads == 1 ? " onload, " : " onloads, ") +
                        format_bytes(static_cast<double>(g.onload_bytes));
    if (!g.onloads) label = std::to_string(g.offloads) + " offloads";
    out.back().label = tl.intern(label);
    prev_end = out.back().end_ns;
  };
  for (const Slice& x : sorted) {
    const int64_t k = key_of(x.start_ns);
    if (k != key) {
      if (key >= 0) close();
      key = k;
      modules.clear();
      SwapGroup g;
      g.device = device;
      g.start_ns = std::max(x.start_ns, prev_end);  // the aggregate stays free of overlaps
      g.step = k % 2 ? static_cast<int64_t>(step_row[static_cast<size_t>(k / 2)]) : -1;
      g.first_swap = x.row;
      out.push_back({g.start_ns, x.end_ns, 0, static_cast<uint32_t>(tl.swap_groups.size()), kSwapGroup});
      tl.swap_groups.push_back(g);
    }
    SwapGroup& g = tl.swap_groups.back();
    const auto& r = tl.weight_swaps[x.row];
    (r.onload ? g.onloads : g.offloads) += 1;
    if (r.onload) g.onload_bytes += r.bytes;
    modules.insert(r.module);
    g.last_swap = x.row;
    g.end_ns = out.back().end_ns = std::max(out.back().end_ns, x.end_ns);
  }
  close();
  return out;
}

/// Turns a device group's lanes into its tracks (in Lane order) and residency lanes.
void finish_device_group(RunTimeline& tl, LaneGroup& grp, DeviceLanes&& lanes, bool keep_empty) {
  // A LibTorch run keeps the lanes a reader expects even when empty (compute, transfers).
  for (auto [lane, slices] : {std::pair{Lane::Compute, &lanes.compute}, std::pair{Lane::TransfersIn, &lanes.transfers_in},
                              std::pair{Lane::TransfersOut, &lanes.transfers_out}})
    if (keep_empty || !slices->empty()) grp.tracks.push_back(slice_track(lane, std::move(*slices)));
  // A device that never onloads or offloads has no swap lane.
  std::vector<Slice> aggregate = swap_groups(tl, grp.device, lanes.swaps);
  if (Track swaps = slice_track(Lane::WeightSwaps, std::move(lanes.swaps)); !swaps.levels.empty()) {
    swaps.aggregate = std::move(aggregate);
    grp.tracks.push_back(std::move(swaps));
  }
  grp.residency_summary = residency_summary(tl, std::move(lanes.on_device));
  // Nothing ever resident: no memory lane.
  if (Track memory = memory_track(std::move(lanes.memory)); memory.counter_max != 0)
    grp.tracks.push_back(std::move(memory));
  if (!lanes.gpu_annotations.empty())
    grp.tracks.push_back(slice_track(Lane::GpuAnnotations, std::move(lanes.gpu_annotations)));
  for (auto& [stream, slices] : lanes.streams) {
    Track t = slice_track(Lane::Stream, std::move(slices));
    t.name = "stream " + std::to_string(stream);
    t.stream = stream;
    grp.tracks.push_back(std::move(t));
  }
  grp.residency = std::move(lanes.residency);
  std::stable_sort(grp.residency.begin(), grp.residency.end(),
                   [](const Track& a, const Track& b) { return natural_less(a.name, b.name); });
}

/// Finds the host group of a thread while loading: a tracer thread by its index; an OS tid
/// (CPU ops, CUDA API calls) as the tracer thread THREADS gives that tid, else on its own.
class HostIndex {
 public:
  explicit HostIndex(const std::vector<storage::ThreadRow>& threads) {
    for (const auto& t : threads) {
      tid_of_.emplace(t.thread, t.os_tid);
      thread_of_.emplace(t.os_tid, t.thread);  // the first tracer thread with that tid
    }
  }
  HostKey thread(uint32_t index) const { return {false, index}; }
  HostKey tid(int64_t os_tid) const {
    auto it = thread_of_.find(os_tid);
    return it == thread_of_.end() ? HostKey{true, os_tid} : HostKey{false, it->second};
  }
  std::optional<int64_t> os_tid(const HostKey& k) const {
    if (k.tid_only) return k.id;
    auto it = tid_of_.find(static_cast<uint32_t>(k.id));
    return it == tid_of_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }

 private:
  std::unordered_map<uint32_t, int64_t> tid_of_;
  std::unordered_map<int64_t, uint32_t> thread_of_;
};

/// CPU ops onto their thread's CPU ops or Python stack lane (gpu_user_annotation ones are on
/// their GPU's lanes), CUDA API calls onto its CUDA API lane.
void place_host_activity(const RunTimeline& tl, RunTimeline& out, const HostIndex& hi,
                         std::map<HostKey, HostLanes>& host) {
  LabelCache names(out);  // CPU ops and CUDA calls: by name
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.cpu_ops.size(); ++i) {
    const auto& r = tl.cpu_ops[i];
    if (r.category == "gpu_user_annotation") continue;
    HostLanes& l = host[hi.tid(r.os_tid)];
    const Slice s{r.start_ns - o, r.end_ns - o, names.get(LabelCache::of(r.name), 0, 0, [&] { return part(r.name); }), i,
                  kCpuOp};
    if (r.category == "python_function") {
      l.python.push_back(s);
      l.python.back().category = kPythonFunction;
    } else {
      l.cpu_ops.push_back(s);
      if (r.category == "user_annotation") l.cpu_ops.back().category = kUserAnnotation;
    }
  }
  for (uint32_t i = 0; i < tl.runtime_calls.size(); ++i) {
    const auto& r = tl.runtime_calls[i];
    const uint32_t label = names.get(LabelCache::of(r.name), 0, 0, [&] { return part(r.name); });
    host[hi.tid(r.os_tid)].cuda_api.push_back({r.start_ns - o, r.end_ns - o, label, i, kCudaRuntime});
  }
  for (uint32_t i = 0; i < tl.driver_calls.size(); ++i) {
    const auto& r = tl.driver_calls[i];
    const uint32_t label = names.get(LabelCache::of(r.name), 0, 0, [&] { return part(r.name); });
    host[hi.tid(r.os_tid)].cuda_api.push_back({r.start_ns - o, r.end_ns - o, label, i, kCudaDriver});
  }
}

/// The parts of the run outside its generation steps onto the steps lane `steps` (of the
/// thread that ran the steps): what came before step 0 and, in an interleaved run, each eager
/// generate (a gap in the recording) before a compiled one. Labels and phases into `out`.
void place_phases(const RunTimeline& tl, RunTimeline& out, std::vector<Slice>& steps) {
  std::vector<uint32_t> order(tl.generation_steps.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return tl.generation_steps[a].start_ns < tl.generation_steps[b].start_ns; });
  auto add = [&](RunPhase p) {
    steps.push_back({p.start_ns, p.end_ns, out.intern(p.name), static_cast<uint32_t>(out.phases.size()), kPhase});
    out.phases.push_back(std::move(p));
  };
  const int64_t o = tl.origin_ns, first = tl.generation_steps[order[0]].start_ns - o;
  const bool eager_gaps = interleaved(tl);
  if (first > 0) {
    const EventsIn before = events_in(tl, 0, first);
    const int64_t end = std::min(before.last_end, first);
    if (before.count > 0 && end > 0) add(pre_step_phase(tl, end, before.count));
    if (eager_gaps && first > end) add(eager_generate_phase(end, first));
  }
  if (!eager_gaps) return;
  for (size_t i = 1; i < order.size(); ++i) {
    const auto &prev = tl.generation_steps[order[i - 1]], &next = tl.generation_steps[order[i]];
    if (next.step == 0 && next.start_ns > prev.end_ns) add(eager_generate_phase(prev.end_ns - o, next.start_ns - o));
  }
}

/// Dynamo's graph-break records onto the thread that compiled: the one that ran the generation
/// steps (Dynamo compiles on the thread calling the model), else the thread with the most CPU
/// ops. Kept as a lane only when something was logged.
void place_dynamo_breaks(const RunTimeline& tl, RunTimeline& out, const HostIndex& hi,
                         std::map<HostKey, HostLanes>& host) {
  LabelCache labels(out);
  if (tl.dynamo_graph_breaks.empty()) return;
  HostLanes* lanes = nullptr;
  if (!tl.generation_steps.empty()) {
    lanes = &host[hi.thread(tl.generation_steps.front().thread)];
    lanes->hookscope = true;
  } else {
    std::map<int64_t, int64_t> ops;
    for (const auto& r : tl.cpu_ops) ++ops[r.os_tid];
    if (ops.empty()) return;  // nothing on the run's timeline to place them beside
    const auto most = std::max_element(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second < b.second; });
    lanes = &host[hi.tid(most->first)];
  }
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.dynamo_graph_breaks.size(); ++i) {
    const auto& b = tl.dynamo_graph_breaks[i];
    const int64_t t = *b.time_ns - o;
    const uint32_t label = labels.get(LabelCache::of(b.gb_code), LabelCache::of(b.gb_type), LabelCache::of(b.reason),
                                      [&] { return importers::break_label(b.gb_code, b.gb_type, b.reason); });
    lanes->dynamo_breaks.push_back({t, t, label, i, kBreak});
    out.dynamo_breaks_before += t < 0;
  }
  // Most are logged while Dynamo compiles (the first generate), before the recorded one: at
  // negative times, left of where the view opens.
  lanes->dynamo_name = lane_name(Lane::DynamoBreaks);
  if (out.dynamo_breaks_before)
    lanes->dynamo_name = "Dynamo breaks (" + std::to_string(out.dynamo_breaks_before) + " < 0 s)";
}

/// The thread of `thread` in `host`, marked as one the tracer recorded hookscope events on.
HostLanes& tracer_thread(std::map<HostKey, HostLanes>& host, const HostIndex& hi, uint32_t thread) {
  HostLanes& l = host[hi.thread(thread)];
  l.hookscope = true;
  return l;
}

/// Splits lanes `lanes` of every thread of `host` into their nesting levels.
void level_lanes(std::map<HostKey, HostLanes>& host,
                 std::initializer_list<std::pair<Lane, std::vector<Slice> HostLanes::*>> lanes) {
  for (auto& [_, l] : host)
    for (const auto& [lane, slices] : lanes)
      if (!(l.*slices).empty()) l.levels[lane] = build_levels(std::exchange(l.*slices, {}));
}

/// The first part of the host rows onto their threads' lanes (labels into `tl`): the root
/// module's forward (`root_forward`: its compute rows) and the hooks.
std::map<HostKey, HostLanes> place_host_hooks(RunTimeline& tl, const HostIndex& hi,
                                              const std::vector<uint32_t>& root_forward) {
  LabelCache labels(tl);
  std::map<HostKey, HostLanes> host;
  const int64_t o = tl.origin_ns;
  for (uint32_t i : root_forward) {
    const auto& r = tl.module_compute[i];
    const uint32_t label =
        labels.get(LabelCache::of(r.device), 0, 0, [&] { return "model forward (on " + part(r.device) + ")"; });
    tracer_thread(host, hi, r.thread).model_forward.push_back({r.start_ns - o, r.end_ns - o, label, i, kCompute});
  }
  if (!tl.hook_events.empty())  // most runs record on one thread (capacity past what is used is never touched)
    tracer_thread(host, hi, tl.hook_events.front().thread).hooks.reserve(tl.hook_events.size());
  for (uint32_t i = 0; i < tl.hook_events.size(); ++i) {
    const auto& r = tl.hook_events[i];
    const uint32_t label = labels.get(LabelCache::of(r.hook), LabelCache::of(r.module), static_cast<uint64_t>(r.phase) + 1, [&] {
      return part(r.hook) + "." + hook_phase_name(r.phase) + " " + module_part(r.module);
    });
    tracer_thread(host, hi, r.thread).hooks.push_back({r.start_ns - o, r.end_ns - o, label, i, hook_category(r.phase)});
  }
  level_lanes(host, {{Lane::ModelForward, &HostLanes::model_forward}, {Lane::Hooks, &HostLanes::hooks}});
  return host;
}

/// The rest of the host rows onto their threads' lanes, after the hooks' (labels, phases and
/// the Dynamo count into `out`, the run's rows read from `tl` only: this part runs beside the
/// one that writes `tl`): compiler-disabled scopes, regions, steps, graph breaks, the phases,
/// Dynamo's breaks, CPU ops and CUDA calls.
std::map<HostKey, HostLanes> place_host_rest(const RunTimeline& tl, RunTimeline& out, const HostIndex& hi) {
  LabelCache labels(out);
  std::map<HostKey, HostLanes> host;
  const int64_t o = tl.origin_ns;
  auto on = [&](uint32_t thread) -> HostLanes& { return tracer_thread(host, hi, thread); };
  // Most runs record on one thread: its lanes at their sizes (capacity not used is never touched).
  if (!tl.disabled_scopes.empty()) on(tl.disabled_scopes.front().thread).disabled.reserve(tl.disabled_scopes.size());
  if (!tl.regions.empty()) on(tl.regions.front().thread).regions.reserve(tl.regions.size());
  if (!tl.graph_breaks.empty()) on(tl.graph_breaks.front().thread).breaks.reserve(tl.graph_breaks.size());
  for (uint32_t i = 0; i < tl.disabled_scopes.size(); ++i) {
    const auto& r = tl.disabled_scopes[i];
    const uint32_t label = labels.get(LabelCache::of(r.function), LabelCache::of(r.module), 1 << 8,
                                      [&] { return part(r.function) + " " + module_part(r.module); });
    on(r.thread).disabled.push_back({r.start_ns - o, r.end_ns - o, label, i, kDisabled});
  }
  for (uint32_t i = 0; i < tl.regions.size(); ++i) {
    const auto& r = tl.regions[i];
    // An imported 'Torch-Compiled Region: F/C' is named by its compile id.
    const uint32_t label =
        labels.get(LabelCache::of(r.compile_id), static_cast<uint64_t>(r.index), 2 << 8, [&] {
          return r.compile_id.empty() ? "region " + std::to_string(r.index) : "region " + part(r.compile_id);
        });
    on(r.thread).regions.push_back({r.start_ns - o, r.end_ns - o, label, i, kRegion});
  }
  const std::vector<std::string> gens = generate_labels(tl);
  for (uint32_t i = 0; i < tl.generation_steps.size(); ++i) {
    const auto& r = tl.generation_steps[i];
    on(r.thread).steps.push_back(
        {r.start_ns - o, r.end_ns - o, out.intern(gens[i] + "step " + std::to_string(r.step)), i, kStep});
  }
  for (uint32_t i = 0; i < tl.graph_breaks.size(); ++i) {
    const auto& r = tl.graph_breaks[i];
    const uint32_t label = labels.get(LabelCache::of(r.function), 0, 3 << 8, [&] { return part(r.function); });
    on(r.thread).breaks.push_back({r.time_ns - o, r.time_ns - o, label, i, kBreak});
  }
  if (!tl.generation_steps.empty()) place_phases(tl, out, on(tl.generation_steps.front().thread).steps);
  place_dynamo_breaks(tl, out, hi, host);
  place_host_activity(tl, out, hi, host);
  level_lanes(host, {{Lane::CompilerDisabled, &HostLanes::disabled},
                     {Lane::Regions, &HostLanes::regions},
                     {Lane::Steps, &HostLanes::steps},
                     {Lane::CpuOps, &HostLanes::cpu_ops},
                     {Lane::PythonStack, &HostLanes::python},
                     {Lane::CudaApi, &HostLanes::cuda_api}});
  return host;
}

/// Labels of `host` renumbered (`remap`: a label's index in the table it was made in → in the run's).
void relabel(std::map<HostKey, HostLanes>& host, const std::vector<uint32_t>& remap) {
  auto apply = [&](std::vector<Slice>& v) {
    for (Slice& x : v) x.label = remap[x.label];
  };
  for (auto& [_, l] : host) {
    for (auto* v : {&l.model_forward, &l.hooks, &l.disabled, &l.regions, &l.breaks, &l.dynamo_breaks, &l.steps,
                    &l.cpu_ops, &l.python, &l.cuda_api})
      apply(*v);
    for (auto& [lane, levels] : l.levels)
      for (auto& level : levels) apply(level);
  }
}

/// `rest`'s lanes added to `host`'s thread by thread (each lane was placed in one of them).
void merge_host_lanes(std::map<HostKey, HostLanes>& host, std::map<HostKey, HostLanes>&& rest) {
  for (auto& [key, b] : rest) {
    HostLanes& a = host[key];
    a.hookscope = a.hookscope || b.hookscope;
    a.disabled = std::move(b.disabled);
    a.regions = std::move(b.regions);
    a.breaks = std::move(b.breaks);
    a.dynamo_breaks = std::move(b.dynamo_breaks);
    a.dynamo_name = std::move(b.dynamo_name);
    a.steps = std::move(b.steps);
    a.cpu_ops = std::move(b.cpu_ops);
    a.python = std::move(b.python);
    a.cuda_api = std::move(b.cuda_api);
    for (auto& [lane, levels] : b.levels) a.levels[lane] = std::move(levels);
  }
}

/// An instants lane of `g` (sorted by time), when it has any.
void add_instants(LaneGroup& g, Lane lane, std::vector<Slice> instants, const std::string& name) {
  if (instants.empty()) return;
  Track t;
  t.name = name;
  t.lane = lane;
  t.source = lane_source(lane);
  t.instants = std::move(instants);
  std::stable_sort(t.instants.begin(), t.instants.end(), by_start);
  g.tracks.push_back(std::move(t));
}

/// The group of a host thread (`key`, OS thread id `os_tid` when known).
LaneGroup host_group(const HostKey& key, std::optional<int64_t> os_tid, HostLanes&& lanes, bool keep_empty) {
  LaneGroup g;
  g.host = true;
  g.device = "host";
  g.thread = key.tid_only ? 0 : static_cast<uint32_t>(key.id);
  g.os_tid = os_tid;
  g.title = key.tid_only ? "host thread" : "host thread " + std::to_string(key.id);
  if (os_tid) g.title += " (tid " + std::to_string(*os_tid) + ")";
  auto add = [&](Lane lane, std::vector<Slice>& slices, bool always) {
    auto built = lanes.levels.find(lane);
    if (built != lanes.levels.end()) {  // levels built where the lane was placed
      Track t;
      t.name = lane_name(lane);
      t.lane = lane;
      t.source = lane_source(lane);
      t.levels = std::move(built->second);
      g.tracks.push_back(std::move(t));
    } else if (always || !slices.empty()) {
      g.tracks.push_back(slice_track(lane, std::move(slices)));
    }
  };
  if (lanes.hookscope) {
    const bool always = keep_empty;
    // The root module's forward spans every device's work: shown here, not as device compute.
    add(Lane::ModelForward, lanes.model_forward, false);
    add(Lane::Hooks, lanes.hooks, always);
    add(Lane::CompilerDisabled, lanes.disabled, always);
    add(Lane::Regions, lanes.regions, always);
    // Graph breaks sit under the regions lane: where one region ends and the next begins.
    if (always || !lanes.breaks.empty()) {
      Track breaks;
      breaks.name = lane_name(Lane::GraphBreaks);
      breaks.lane = Lane::GraphBreaks;
      breaks.source = lane_source(Lane::GraphBreaks);
      breaks.instants = std::move(lanes.breaks);
      std::sort(breaks.instants.begin(), breaks.instants.end(), by_start);
      g.tracks.push_back(std::move(breaks));
    }
    add_instants(g, Lane::DynamoBreaks, std::move(lanes.dynamo_breaks), lanes.dynamo_name);
    add(Lane::Steps, lanes.steps, always);
  } else {
    add_instants(g, Lane::DynamoBreaks, std::move(lanes.dynamo_breaks), lanes.dynamo_name);
  }
  add(Lane::CpuOps, lanes.cpu_ops, false);
  add(Lane::PythonStack, lanes.python, false);
  add(Lane::CudaApi, lanes.cuda_api, false);
  return g;
}

/// The nesting level of the slice of source `src` and row `row` starting at `start` in `t`
/// (0 when not found).
uint16_t level_of(const Track& t, int64_t start, uint32_t row, Source src) {
  for (size_t lv = 0; lv < t.levels.size(); ++lv) {
    const auto& level = t.levels[lv];
    auto it = std::partition_point(level.begin(), level.end(), [&](const Slice& x) { return x.start_ns < start; });
    for (; it != level.end() && it->start_ns == start; ++it)
      if (it->row == row && slice_source(t, *it) == src) return static_cast<uint16_t>(lv);
  }
  return 0;
}

/// Index of the first track of `g` on `lane` (and `stream`, for stream lanes); −1 if none.
int track_of(const LaneGroup& g, Lane lane, int64_t stream = -1) {
  for (size_t i = 0; i < g.tracks.size(); ++i)
    if (g.tracks[i].lane == lane && (lane != Lane::Stream || g.tracks[i].stream == stream)) return static_cast<int>(i);
  return -1;
}

/// Sets a flow's tracks and levels (its destination slice starts at `dst_start`); false when
/// either end has no track.
bool attach(const RunTimeline& tl, Flow& f, Lane src_lane, Lane dst_lane, int64_t dst_start, int64_t stream = -1) {
  const LaneGroup &sg = tl.groups[f.src_group], &dg = tl.groups[f.dst_group];
  const int st = track_of(sg, src_lane), dt = track_of(dg, dst_lane, stream);
  if (st < 0 || dt < 0) return false;
  f.src_track = static_cast<uint16_t>(st);
  f.dst_track = static_cast<uint16_t>(dt);
  f.src_level = level_of(sg.tracks[st], f.start_ns, f.src_row, f.src);
  f.dst_level = level_of(dg.tracks[dt], dst_start, f.row, f.dst);
  return true;
}

/// The flows of the run, sorted by start: `transfers` (from place_transfers) and a launch flow
/// per GPU record whose correlationId names a CUDA API call; `api_group`: the host group of
/// each tid with CUDA API calls.
void add_flows(RunTimeline& tl, std::vector<Flow> transfers, const DeviceIndex& dev,
               const std::unordered_map<int64_t, uint32_t>& api_group) {
  // A transfer flow runs from its slice in the "out" lane to the same one in the "in" lane.
  for (Flow& f : transfers)
    if (attach(tl, f, Lane::TransfersOut, Lane::TransfersIn, f.start_ns)) tl.flows.push_back(f);
  auto launch = [&](Source dst, uint32_t row, uint32_t correlation, uint32_t device, uint32_t stream, int64_t start) {
    auto it = correlation ? tl.launches.find(correlation) : tl.launches.end();
    const int g = dev.gpu(device);
    if (it == tl.launches.end() || g < 0) return;
    const auto [src, src_row] = it->second;
    const auto& call = src == Source::Driver ? tl.driver_calls[src_row].start_ns : tl.runtime_calls[src_row].start_ns;
    const int64_t tid = src == Source::Driver ? tl.driver_calls[src_row].os_tid : tl.runtime_calls[src_row].os_tid;
    auto host = api_group.find(tid);
    if (host == api_group.end()) return;
    Flow f;
    f.start_ns = call - tl.origin_ns;
    f.end_ns = start - tl.origin_ns;
    f.src_group = host->second;
    f.dst_group = static_cast<uint32_t>(g);
    f.row = row;
    f.src_row = src_row;
    f.dst = dst;
    f.src = src;
    if (attach(tl, f, Lane::CudaApi, Lane::Stream, f.end_ns, stream)) tl.flows.push_back(f);
  };
  for (uint32_t i = 0; i < tl.kernels.size(); ++i) {
    const auto& r = tl.kernels[i];
    launch(Source::Kernel, i, r.correlation_id, r.device_id, r.stream_id, r.start_ns);
  }
  for (uint32_t i = 0; i < tl.memcpys.size(); ++i) {
    const auto& r = tl.memcpys[i];
    launch(Source::Memcpy, i, r.correlation_id, r.device_id, r.stream_id, r.start_ns);
  }
  for (uint32_t i = 0; i < tl.memsets.size(); ++i) {
    const auto& r = tl.memsets[i];
    launch(Source::Memset, i, r.correlation_id, r.device_id, r.stream_id, r.start_ns);
  }
  std::sort(tl.flows.begin(), tl.flows.end(), [](const Flow& a, const Flow& b) { return a.start_ns < b.start_ns; });
}

}  // namespace

namespace {

/// The host rows after the hooks' (place_host_rest), laid out on a thread of their own beside
/// the rest of the layout when `beside`, else when finished.
class HostRest {
 public:
  HostRest(const RunTimeline& tl, const HostIndex& hi, bool beside) : tl_(tl), hi_(hi) {
    if (beside) thread_ = std::thread([this] { run(); });
  }
  ~HostRest() {
    if (thread_.joinable()) thread_.join();
  }
  HostRest(const HostRest&) = delete;
  HostRest& operator=(const HostRest&) = delete;
  /// Its lanes with their labels numbered in `tl`'s table (after every label made so far),
  /// its phases and Dynamo count moved into `tl`.
  std::map<HostKey, HostLanes> finish(RunTimeline& tl) {
    if (thread_.joinable())
      thread_.join();
    else
      run();
    if (error_) std::rethrow_exception(error_);
    relabel(lanes_, tl.merge_strings(out_));
    tl.phases = std::move(out_.phases);
    tl.dynamo_breaks_before = out_.dynamo_breaks_before;
    return std::move(lanes_);
  }

 private:
  void run() {
    try {
      lanes_ = place_host_rest(tl_, out_, hi_);
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  const RunTimeline& tl_;
  const HostIndex& hi_;
  RunTimeline out_;  ///< its labels, phases and Dynamo count
  std::map<HostKey, HostLanes> lanes_;
  std::exception_ptr error_;
  std::thread thread_;
};

/// What the device groups' layout leaves for the host groups and the flows.
struct DeviceLayout {
  std::vector<uint32_t> root_forward;  ///< the root module's compute rows
  std::vector<Flow> transfer_flows;
};

/// The device groups of the run, each lane filled (labels into `tl`).
DeviceLayout lay_out_devices(RunTimeline& tl, const std::vector<storage::SharedMemoryCounterRow>& memory,
                             const DeviceIndex& dev,
                             const std::vector<std::pair<uint32_t, uint32_t>>& annotations, bool keep_empty,
                             const std::function<void()>& check) {
  DeviceLayout out;
  std::vector<DeviceLanes> lanes(tl.groups.size());
  out.root_forward = place_compute(tl, dev, lanes);
  out.transfer_flows = place_transfers(tl, dev, lanes);
  ResidencyMap residency = place_swaps(tl, dev, lanes);
  add_mapped_residency(tl, residency);
  place_residency(tl, dev, residency, lanes);
  place_memory(tl, memory, dev, lanes);
  place_gpu_rows(tl, dev, annotations, lanes);
  check();
  for (size_t g = 0; g < lanes.size(); ++g) finish_device_group(tl, tl.groups[g], std::move(lanes[g]), keep_empty);
  return out;
}

/// One group per host thread of `host` after the device groups; returns each CUDA-calling
/// tid's group.
std::unordered_map<int64_t, uint32_t> add_host_groups(RunTimeline& tl, const HostIndex& hi,
                                                      std::map<HostKey, HostLanes>&& host, bool keep_empty) {
  std::map<HostKey, uint32_t> group_of_key;
  for (auto& [key, host_lanes] : host) {
    group_of_key[key] = static_cast<uint32_t>(tl.groups.size());
    tl.groups.push_back(host_group(key, hi.os_tid(key), std::move(host_lanes), keep_empty));
  }
  std::unordered_map<int64_t, uint32_t> api_group;  // tid → its host group
  for (const auto& r : tl.runtime_calls) api_group.try_emplace(r.os_tid, group_of_key.at(hi.tid(r.os_tid)));
  for (const auto& r : tl.driver_calls) api_group.try_emplace(r.os_tid, group_of_key.at(hi.tid(r.os_tid)));
  return api_group;
}

}  // namespace

RunTimeline lay_out_run(storage::SharedRunRows rows, const RunContext& context, const std::atomic<bool>* cancel,
                        const std::optional<std::pair<int64_t, int64_t>>& extent_hint, int threads) {
  const std::function<void()> check = [cancel] {
    if (cancel && cancel->load(std::memory_order_relaxed)) throw storage::ReadCancelled("layout cancelled");
  };
  RunTimeline tl;
  static_cast<storage::SharedRunRows&>(tl) = std::move(rows);
  const auto memory = take_rows(tl);
  set_extent(tl, memory, extent_hint);
  const bool keep_empty = keeps_empty_lanes(tl.run);
  const HostIndex hi(context.threads);
  // The host rows after the hooks' are laid out beside the devices' and the hooks', with labels
  // of their own merged after (so that they number as one pass in that order numbers them).
  HostRest rest(tl, hi, threads > 1);

  const auto annotations = gpu_annotation_devices(tl);
  add_device_groups(tl, context.devices, context.gpus, memory, annotations);
  const DeviceIndex dev(tl);
  DeviceLayout devices = lay_out_devices(tl, memory, dev, annotations, keep_empty, check);
  check();
  std::map<HostKey, HostLanes> host = place_host_hooks(tl, hi, devices.root_forward);
  merge_host_lanes(host, rest.finish(tl));
  check();
  const auto api_group = add_host_groups(tl, hi, std::move(host), keep_empty);
  check();
  add_flows(tl, std::move(devices.transfer_flows), dev, api_group);
  return tl;
}

RunTimeline load_run_timeline(const storage::CaptureReader& rd, int64_t run_id) {
  return load_timeline(rd, run_id, LoadControl{});
}

}  // namespace hs::ui
