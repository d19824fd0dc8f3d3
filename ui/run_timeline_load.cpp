// load_run_timeline: one run's rows → lane groups. Device groups first (accelerators by index,
// then cpu, disk), each filled lane by lane; then one host group per recording thread.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "ui/run_timeline.h"

namespace hs::ui {

namespace {

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
};

/// The slices of one host thread while loading, one vector per lane.
struct HostLanes {
  std::vector<Slice> model_forward, hooks, disabled, regions, breaks, steps;
};

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
    for (size_t g = 0; g < tl.groups.size(); ++g) index_.emplace(tl.groups[g].device, static_cast<int>(g));
  }
  /// −1 when no group shows `device`.
  int operator()(const std::string& device) const {
    auto it = index_.find(device);
    return it == index_.end() ? -1 : it->second;
  }

 private:
  std::unordered_map<std::string, int> index_;
};

/// Reads the run's rows into `tl`; returns its memory counters (they become lanes, not rows).
std::vector<storage::MemoryCounterRow> read_rows(const storage::CaptureReader& rd, int64_t run_id, RunTimeline& tl) {
  tl.run = rd.run(run_id);
  tl.compute = rd.module_compute(run_id);
  tl.transfers = rd.transfers(run_id);
  tl.swaps = rd.weight_swaps(run_id);
  tl.hooks = rd.hook_events(run_id);
  tl.disabled = rd.disabled_scopes(run_id);
  tl.regions = rd.regions(run_id);
  tl.steps = rd.generation_steps(run_id);
  tl.breaks = rd.graph_breaks(run_id);
  return rd.memory_counters(run_id);
}

/// Origin (the earliest event) and duration (to the latest) over every event of the run.
void set_extent(RunTimeline& tl, const std::vector<storage::MemoryCounterRow>& memory) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  auto see = [&](int64_t a, int64_t b) {
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  };
  for (const auto& r : tl.compute) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.transfers) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.swaps) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.hooks) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.disabled) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.regions) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.steps) see(r.start_ns, r.end_ns);
  for (const auto& r : tl.breaks) see(r.time_ns, r.time_ns);
  for (const auto& r : memory) see(r.time_ns, r.time_ns);
  if (lo > hi) {  // a run without events (e.g. killed before its first batch)
    lo = tl.run.start_ns;
    hi = tl.run.end_ns.value_or(tl.run.start_ns);
  }
  tl.origin_ns = lo;
  tl.duration_ns = std::max<int64_t>(hi - lo, 1);
}

/// The devices shown, in accelerate's order: the run's devices plus any device an event names.
std::vector<std::string> device_names(const RunTimeline& tl, const std::map<std::string, storage::DeviceInfo>& infos,
                                      const std::vector<storage::MemoryCounterRow>& memory) {
  std::set<std::string> names;
  for (const auto& [n, _] : infos)
    if (n != "disk") names.insert(n);  // disk holds weights, it never computes: shown only if used
  for (const auto& r : tl.compute) names.insert(r.device);
  for (const auto& r : tl.transfers) {
    names.insert(r.src);
    names.insert(r.dst);
  }
  for (const auto& r : tl.swaps)
    if (r.onload) names.insert(r.device);
  for (const auto& r : memory) names.insert(r.device);
  names.erase("meta");
  std::vector<std::string> order(names.begin(), names.end());
  std::sort(order.begin(), order.end(), device_less);
  return order;
}

/// An empty group for device `name`, titled with what the capture knows of it (`info`, if any).
LaneGroup device_group(const std::string& name, const storage::DeviceInfo* info) {
  LaneGroup g;
  g.device = name;
  if (info && info->kind == storage::DeviceKind::Emulated) {
    g.emulated = true;
    g.title = "accelerator " + name + " (emulated, " + info->backing + " memory)";
  } else if (info && info->kind == storage::DeviceKind::Cuda) {
    g.title = "accelerator " + name + " (" + (info->label.empty() ? info->backing : info->label) + ")";
  } else if (name == "cpu") {
    g.title = "cpu (host memory)";
  } else if (is_index(name)) {
    g.title = "accelerator " + name;
  } else {
    g.title = name;
  }
  if (info && info->max_memory) g.title += ", max_memory " + format_bytes(static_cast<double>(*info->max_memory));
  return g;
}

void add_device_groups(RunTimeline& tl, const std::vector<storage::DeviceRow>& devices,
                       const std::vector<storage::MemoryCounterRow>& memory) {
  std::map<std::string, storage::DeviceInfo> infos;
  for (const auto& d : devices) infos[d.info.name] = d.info;
  for (const auto& name : device_names(tl, infos, memory)) {
    auto it = infos.find(name);
    tl.groups.push_back(device_group(name, it == infos.end() ? nullptr : &it->second));
  }
}

/// Module compute onto the devices' compute lanes. Returns the root module's compute rows: the
/// whole model's forward is host work (a lane of its thread), not device work.
std::vector<uint32_t> place_compute(RunTimeline& tl, const DeviceIndex& dev, std::vector<DeviceLanes>& lanes) {
  std::vector<uint32_t> root_forward;
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.compute.size(); ++i) {
    const auto& r = tl.compute[i];
    if (r.module.empty()) {
      root_forward.push_back(i);
      continue;
    }
    const int g = dev(r.device);
    if (g < 0) continue;
    lanes[g].compute.push_back({r.start_ns - o, r.end_ns - o, tl.intern(module_label(r.module)), i, kCompute});
  }
  return root_forward;
}

/// Activation transfers onto the source's "out" and the destination's "in" lane, and a flow
/// between the two groups when both are shown.
void place_transfers(RunTimeline& tl, const DeviceIndex& dev, std::vector<DeviceLanes>& lanes) {
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.transfers.size(); ++i) {
    const auto& r = tl.transfers[i];
    const uint32_t label = tl.intern(r.src + " -> " + r.dst + (r.module.empty() ? "" : " " + r.module));
    const uint8_t cat = copy_category(r.copy_kind);
    const int s = dev(r.src), d = dev(r.dst);
    if (s >= 0) lanes[s].transfers_out.push_back({r.start_ns - o, r.end_ns - o, label, i, cat});
    if (d >= 0) lanes[d].transfers_in.push_back({r.start_ns - o, r.end_ns - o, label, i, cat});
    if (s >= 0 && d >= 0)
      tl.flows.push_back({r.start_ns - o, r.end_ns - o, static_cast<uint32_t>(s), static_cast<uint32_t>(d), i});
  }
  std::sort(tl.flows.begin(), tl.flows.end(), [](const Flow& a, const Flow& b) { return a.start_ns < b.start_ns; });
}

/// Weight swaps onto the swap lane of the device they onload to (offloads: of the device the
/// module last onloaded to). Returns each swapped module's residency.
ResidencyMap place_swaps(RunTimeline& tl, const DeviceIndex& dev, std::vector<DeviceLanes>& lanes) {
  ResidencyMap res;
  std::map<std::string, std::string> last_onload_device;  // module → device
  const int64_t o = tl.origin_ns;
  for (uint32_t i = 0; i < tl.swaps.size(); ++i) {
    const auto& r = tl.swaps[i];
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
    const std::string label =
        module_label(r.module) + (r.onload ? std::string(" <- ") + weight_source_name(r.source) : " -> meta");
    lanes[g].swaps.push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern(label), i, static_cast<uint8_t>(r.onload ? kOnload : kOffload)});
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
    const uint32_t on_label = tl.intern("on " + u.device), home_label = tl.intern("meta, weights in " + u.home);
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
    t.name = module_label(module);
    lanes[g].residency.push_back(std::move(t));
  }
}

void place_memory(const RunTimeline& tl, const std::vector<storage::MemoryCounterRow>& memory, const DeviceIndex& dev,
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
    merged[i].label = modules[i].size() == 1 ? tl.intern(module_label(tl.residency_units[merged[i].row].module))
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

/// Turns a device group's lanes into its tracks (in Lane order) and residency lanes.
void finish_device_group(RunTimeline& tl, LaneGroup& grp, DeviceLanes&& lanes) {
  // Keep the lanes a reader expects even when empty (compute, transfers).
  grp.tracks.push_back(slice_track(Lane::Compute, std::move(lanes.compute)));
  grp.tracks.push_back(slice_track(Lane::TransfersIn, std::move(lanes.transfers_in)));
  grp.tracks.push_back(slice_track(Lane::TransfersOut, std::move(lanes.transfers_out)));
  // A device that never onloads or offloads has no swap lane.
  if (Track swaps = slice_track(Lane::WeightSwaps, std::move(lanes.swaps)); !swaps.levels.empty())
    grp.tracks.push_back(std::move(swaps));
  grp.residency_summary = residency_summary(tl, std::move(lanes.on_device));
  // Nothing ever resident: no memory lane.
  if (Track memory = memory_track(std::move(lanes.memory)); memory.counter_max != 0)
    grp.tracks.push_back(std::move(memory));
  grp.residency = std::move(lanes.residency);
  std::stable_sort(grp.residency.begin(), grp.residency.end(),
                   [](const Track& a, const Track& b) { return natural_less(a.name, b.name); });
}

/// The host rows sorted onto their recording threads' lanes; `root_forward` are the root
/// module's compute rows.
std::map<uint32_t, HostLanes> place_host_rows(RunTimeline& tl, const std::vector<uint32_t>& root_forward) {
  std::map<uint32_t, HostLanes> host;  // by thread
  const int64_t o = tl.origin_ns;
  for (uint32_t i : root_forward) {
    const auto& r = tl.compute[i];
    host[r.thread].model_forward.push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern("model forward (on " + r.device + ")"), i, kCompute});
  }
  for (uint32_t i = 0; i < tl.hooks.size(); ++i) {
    const auto& r = tl.hooks[i];
    const uint32_t label = tl.intern(r.hook + "." + hook_phase_name(r.phase) + " " + module_label(r.module));
    host[r.thread].hooks.push_back({r.start_ns - o, r.end_ns - o, label, i, hook_category(r.phase)});
  }
  for (uint32_t i = 0; i < tl.disabled.size(); ++i) {
    const auto& r = tl.disabled[i];
    host[r.thread].disabled.push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern(r.function + " " + module_label(r.module)), i, kDisabled});
  }
  for (uint32_t i = 0; i < tl.regions.size(); ++i) {
    const auto& r = tl.regions[i];
    host[r.thread].regions.push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern("region " + std::to_string(r.index)), i, kRegion});
  }
  for (uint32_t i = 0; i < tl.steps.size(); ++i) {
    const auto& r = tl.steps[i];
    host[r.thread].steps.push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern("step " + std::to_string(r.step)), i, kStep});
  }
  for (uint32_t i = 0; i < tl.breaks.size(); ++i) {
    const auto& r = tl.breaks[i];
    host[r.thread].breaks.push_back({r.time_ns - o, r.time_ns - o, tl.intern(r.function), i, kBreak});
  }
  return host;
}

/// The group of recording thread `thread` (`os_tid`: its OS thread id, when recorded).
LaneGroup host_group(uint32_t thread, std::optional<int64_t> os_tid, HostLanes&& lanes) {
  LaneGroup g;
  g.host = true;
  g.device = "host";
  g.thread = thread;
  g.title = "host thread " + std::to_string(thread);
  if (os_tid) g.title += " (tid " + std::to_string(*os_tid) + ")";
  // The root module's forward spans every device's work: shown here, not as device compute.
  if (!lanes.model_forward.empty()) g.tracks.push_back(slice_track(Lane::ModelForward, std::move(lanes.model_forward)));
  g.tracks.push_back(slice_track(Lane::Hooks, std::move(lanes.hooks)));
  g.tracks.push_back(slice_track(Lane::CompilerDisabled, std::move(lanes.disabled)));
  g.tracks.push_back(slice_track(Lane::Regions, std::move(lanes.regions)));
  // Graph breaks sit under the regions lane: where one region ends and the next begins.
  Track breaks;
  breaks.name = lane_name(Lane::GraphBreaks);
  breaks.lane = Lane::GraphBreaks;
  breaks.source = lane_source(Lane::GraphBreaks);
  breaks.instants = std::move(lanes.breaks);
  std::sort(breaks.instants.begin(), breaks.instants.end(), by_start);
  g.tracks.push_back(std::move(breaks));
  g.tracks.push_back(slice_track(Lane::Steps, std::move(lanes.steps)));
  return g;
}

}  // namespace

RunTimeline load_run_timeline(const storage::CaptureReader& rd, int64_t run_id) {
  RunTimeline tl;
  const auto memory = read_rows(rd, run_id, tl);
  set_extent(tl, memory);

  add_device_groups(tl, rd.devices(run_id), memory);
  const DeviceIndex dev(tl);
  std::vector<DeviceLanes> lanes(tl.groups.size());
  const std::vector<uint32_t> root_forward = place_compute(tl, dev, lanes);
  place_transfers(tl, dev, lanes);
  ResidencyMap residency = place_swaps(tl, dev, lanes);
  add_mapped_residency(tl, residency);
  place_residency(tl, dev, residency, lanes);
  place_memory(tl, memory, dev, lanes);
  for (size_t g = 0; g < lanes.size(); ++g) finish_device_group(tl, tl.groups[g], std::move(lanes[g]));

  std::map<uint32_t, int64_t> tids;
  for (const auto& t : rd.threads(run_id)) tids[t.thread] = t.os_tid;
  for (auto& [thread, host_lanes] : place_host_rows(tl, root_forward)) {
    auto tid = tids.find(thread);
    tl.groups.push_back(host_group(thread, tid == tids.end() ? std::nullopt : std::optional<int64_t>(tid->second),
                                   std::move(host_lanes)));
  }
  return tl;
}

}  // namespace hs::ui
