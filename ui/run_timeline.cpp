#include "ui/run_timeline.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string_view>

namespace hs::ui {

const char* category_name(uint8_t c) {
  static const char* names[kCategoryCount] = {
      "compute", "HtoD", "DtoH", "DtoD", "PtoP", "copy", "weight onload", "weight offload", "pre_forward",
      "post_forward", "hook", "compiler-disabled", "compiled region", "generation step", "weights on device",
      "meta (weights in cpu)", "meta (weights on disk)", "graph break"};
  return c < kCategoryCount ? names[c] : "?";
}

size_t Track::slice_count() const {
  size_t n = instants.size() + counter.size();
  for (const auto& l : levels) n += l.size();
  return n;
}

size_t RunTimeline::event_count() const {
  return compute.size() + transfers.size() + swaps.size() + hooks.size() + disabled.size() + regions.size() +
         steps.size() + breaks.size();
}

int RunTimeline::group_of(const std::string& device) const {
  for (size_t i = 0; i < groups.size(); ++i)
    if (!groups[i].host && groups[i].device == device) return static_cast<int>(i);
  return -1;
}

uint32_t RunTimeline::intern(const std::string& s) {
  auto [it, added] = ids_.try_emplace(s, static_cast<uint32_t>(strings.size()));
  if (added) strings.push_back(s);
  return it->second;
}

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

const char* copy_kind_name(tracer::MemcpyKind k) {
  switch (k) {
    case tracer::MemcpyKind::HtoD: return "HtoD";
    case tracer::MemcpyKind::DtoH: return "DtoH";
    case tracer::MemcpyKind::DtoD: return "DtoD";
    case tracer::MemcpyKind::PtoP: return "PtoP";
    case tracer::MemcpyKind::HtoH: return "HtoH";
    default: return "other";
  }
}

const char* phase_name(events::HookPhase p) {
  switch (p) {
    case events::HookPhase::PreForward: return "pre_forward";
    case events::HookPhase::PostForward: return "post_forward";
    case events::HookPhase::InitHook: return "init_hook";
    case events::HookPhase::DetachHook: return "detach_hook";
  }
  return "?";
}

const char* source_name(events::WeightSource s) {
  switch (s) {
    case events::WeightSource::Cpu: return "cpu";
    case events::WeightSource::Disk: return "disk";
    case events::WeightSource::Device: return "device";
  }
  return "?";
}

std::string module_name(const std::string& m) { return m.empty() ? "<root>" : m; }

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

bool under(const std::string& module, const std::string& key) {
  return key.empty() || module == key || (module.size() > key.size() && module.compare(0, key.size(), key) == 0 &&
                                          module[key.size()] == '.');
}

}  // namespace

RunTimeline load_run_timeline(const storage::CaptureReader& rd, int64_t run_id) {
  RunTimeline tl;
  tl.run = rd.run(run_id);
  tl.compute = rd.module_compute(run_id);
  tl.transfers = rd.transfers(run_id);
  tl.swaps = rd.weight_swaps(run_id);
  tl.hooks = rd.hook_events(run_id);
  tl.disabled = rd.disabled_scopes(run_id);
  tl.regions = rd.regions(run_id);
  tl.steps = rd.generation_steps(run_id);
  tl.breaks = rd.graph_breaks(run_id);
  const auto memory = rd.memory_counters(run_id);

  // Origin and extent over every event.
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
  const int64_t o = lo;

  // Device groups: the run's devices plus any device an event names.
  std::map<std::string, storage::DeviceInfo> infos;
  for (const auto& d : rd.devices(run_id)) infos[d.info.name] = d.info;
  std::set<std::string> names;
  for (const auto& [n, _] : infos)
    if (n != "disk") names.insert(n);  // disk holds weights, it never computes: shown only if used
  for (const auto& r : tl.compute) names.insert(r.device);
  for (const auto& r : tl.transfers) {
    names.insert(r.src);
    names.insert(r.dst);
  }
  std::map<std::string, std::string> last_onload_device;  // module → device
  for (const auto& r : tl.swaps)
    if (r.onload) names.insert(r.device);
  for (const auto& r : memory) names.insert(r.device);
  names.erase("meta");
  std::vector<std::string> order(names.begin(), names.end());
  std::sort(order.begin(), order.end(), device_less);
  for (const auto& n : order) {
    LaneGroup g;
    g.device = n;
    auto it = infos.find(n);
    if (it != infos.end() && it->second.kind == storage::DeviceKind::Emulated) {
      g.emulated = true;
      g.title = "accelerator " + n + " (emulated, " + it->second.backing + " memory)";
    } else if (it != infos.end() && it->second.kind == storage::DeviceKind::Cuda) {
      g.title = "accelerator " + n + " (" + (it->second.label.empty() ? it->second.backing : it->second.label) + ")";
    } else if (n == "cpu") {
      g.title = "cpu (host memory)";
    } else if (is_index(n)) {
      g.title = "accelerator " + n;
    } else {
      g.title = n;
    }
    if (it != infos.end() && it->second.max_memory)
      g.title += ", max_memory " + format_bytes(static_cast<double>(*it->second.max_memory));
    tl.groups.push_back(std::move(g));
  }
  const size_t n_dev = tl.groups.size();
  enum { kTrCompute, kTrIn, kTrOut, kTrSwaps, kTrResident, kTrMemory, kTrCount };  // kTrResident: summary
  std::vector<std::vector<std::vector<Slice>>> dev(n_dev, std::vector<std::vector<Slice>>(kTrCount));
  std::unordered_map<std::string, int> group_index;  // one lookup per event while loading
  for (size_t g = 0; g < n_dev; ++g) group_index.emplace(tl.groups[g].device, static_cast<int>(g));
  auto gi = [&](const std::string& d) {
    auto it = group_index.find(d);
    return it == group_index.end() ? -1 : it->second;
  };

  std::vector<uint32_t> root_compute;  // the whole model's forward: a host lane, not device work
  for (uint32_t i = 0; i < tl.compute.size(); ++i) {
    const auto& r = tl.compute[i];
    if (r.module.empty()) {
      root_compute.push_back(i);
      continue;
    }
    int g = gi(r.device);
    if (g < 0) continue;
    dev[g][kTrCompute].push_back({r.start_ns - o, r.end_ns - o, tl.intern(module_name(r.module)), i, kCompute});
  }
  for (uint32_t i = 0; i < tl.transfers.size(); ++i) {
    const auto& r = tl.transfers[i];
    const uint32_t label = tl.intern(r.src + " -> " + r.dst + (r.module.empty() ? "" : " " + r.module));
    const uint8_t cat = copy_category(r.copy_kind);
    int s = gi(r.src), d = gi(r.dst);
    if (s >= 0) dev[s][kTrOut].push_back({r.start_ns - o, r.end_ns - o, label, i, cat});
    if (d >= 0) dev[d][kTrIn].push_back({r.start_ns - o, r.end_ns - o, label, i, cat});
    if (s >= 0 && d >= 0)
      tl.flows.push_back({r.start_ns - o, r.end_ns - o, static_cast<uint32_t>(s), static_cast<uint32_t>(d), i});
  }
  std::sort(tl.flows.begin(), tl.flows.end(), [](const Flow& a, const Flow& b) { return a.start_ns < b.start_ns; });

  // Weight swaps, and residency per module from them (tensors resident: 0 → 1 starts a
  // materialised interval, 1 → 0 ends it).
  struct Residency {
    std::string device, home;
    int64_t bytes = 0, resident = 0, on_since = 0;
    std::vector<std::pair<int64_t, int64_t>> on;
  };
  std::map<std::string, Residency> res;
  for (uint32_t i = 0; i < tl.swaps.size(); ++i) {
    const auto& r = tl.swaps[i];
    Residency& u = res[r.module];
    if (r.onload) {
      u.device = r.device;
      if (u.home.empty()) u.home = source_name(r.source);
      if (u.resident++ == 0) {
        u.on_since = r.start_ns - o;
        u.bytes = 0;
      }
      u.bytes += r.bytes;
      last_onload_device[r.module] = r.device;
    } else if (u.resident > 0 && --u.resident == 0) {
      u.on.emplace_back(u.on_since, r.end_ns - o);
    }
    const std::string& where = r.onload ? r.device : last_onload_device[r.module];
    int g = gi(where);
    if (g < 0) continue;
    // Onloads say where the weights came from (cpu memory or the disk offload folder).
    const std::string label = module_name(r.module) + (r.onload ? std::string(" <- ") + source_name(r.source) : " -> meta");
    dev[g][kTrSwaps].push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern(label), i, static_cast<uint8_t>(r.onload ? kOnload : kOffload)});
  }
  // Device-map entries without swaps under them keep their weights where the map put them.
  if (tl.run.device_map.is_object())
    for (const auto& [key, value] : tl.run.device_map.items()) {
      const std::string d = json_device(value);
      bool swapped = false;
      for (const auto& [m, _] : res)
        if (under(m, key)) {
          swapped = true;
          break;
        }
      if (swapped || d == "disk" || d == "meta") continue;
      Residency& u = res[key];
      u.device = u.home = d;
      u.on.emplace_back(0, tl.duration_ns);
    }
  std::vector<std::vector<Track>> residency(n_dev);
  for (auto& [module, u] : res) {
    if (u.resident > 0) u.on.emplace_back(u.on_since, tl.duration_ns);  // still materialised at the end
    const int g = gi(u.device);
    if (g < 0) continue;
    const uint32_t row = static_cast<uint32_t>(tl.residency_units.size());
    tl.residency_units.push_back({module, u.device, u.home, u.bytes});
    const uint8_t home_cat = u.home == "disk" ? kHomeDisk : kHomeCpu;
    const uint32_t on_label = tl.intern("on " + u.device), home_label = tl.intern("meta, weights in " + u.home);
    Track t;
    t.name = module_name(module);
    t.source = Source::Residency;
    std::vector<Slice> lane;
    int64_t cursor = 0;
    for (const auto& [a, b] : u.on) {
      if (a > cursor && u.home != u.device) lane.push_back({cursor, a, home_label, row, home_cat});
      lane.push_back({a, b, on_label, row, kResidentOnDevice});
      dev[g][kTrResident].push_back({a, b, 0, row, kResidentOnDevice});
      cursor = b;
    }
    if (cursor < tl.duration_ns && u.home != u.device) lane.push_back({cursor, tl.duration_ns, home_label, row, home_cat});
    t.levels = build_levels(std::move(lane));
    residency[g].push_back(std::move(t));
  }

  std::vector<std::vector<std::pair<int64_t, int64_t>>> counters(n_dev);
  for (const auto& r : memory) {
    int g = gi(r.device);
    if (g >= 0) counters[g].emplace_back(r.time_ns - o, r.bytes);
  }

  static const char* track_names[kTrCount] = {"compute", "transfers in", "transfers out", "weight onload/offload",
                                              "weights on device", "memory"};
  static const Source track_sources[kTrCount] = {Source::Compute, Source::Transfer,   Source::Transfer,
                                                 Source::WeightSwap, Source::Residency, Source::Compute};
  for (size_t g = 0; g < n_dev; ++g) {
    LaneGroup& grp = tl.groups[g];
    for (int k = 0; k < kTrCount; ++k) {
      Track t;
      t.name = track_names[k];
      t.source = track_sources[k];
      if (k == kTrMemory) {
        std::sort(counters[g].begin(), counters[g].end());
        t.counter = std::move(counters[g]);
        for (const auto& [_, b] : t.counter) t.counter_max = std::max(t.counter_max, b);
        if (t.counter_max == 0) continue;  // nothing was ever resident: no lane
      } else if (k == kTrResident) {
        // Union of the modules' on-device intervals: one lane, labelled by what it holds.
        auto& iv = dev[g][k];
        std::sort(iv.begin(), iv.end(), [](const Slice& a, const Slice& b) { return a.start_ns < b.start_ns; });
        std::vector<Slice> merged;
        std::vector<std::set<uint32_t>> modules;  // distinct residency units per merged interval
        for (const Slice& x : iv) {
          if (!merged.empty() && x.start_ns <= merged.back().end_ns) {
            merged.back().end_ns = std::max(merged.back().end_ns, x.end_ns);
            modules.back().insert(x.row);
          } else {
            merged.push_back(x);
            modules.push_back({x.row});
          }
        }
        for (size_t i = 0; i < merged.size(); ++i)
          merged[i].label = modules[i].size() == 1
                                ? tl.intern(module_name(tl.residency_units[merged[i].row].module))
                                : tl.intern(std::to_string(modules[i].size()) + " modules");
        t.levels = build_levels(std::move(merged));
        grp.residency_summary = std::move(t);
        continue;
      } else {
        t.levels = build_levels(std::move(dev[g][k]));
        // Keep the lanes a reader expects even when empty (compute, transfers); drop an empty
        // swap lane of a device that never onloads.
        if (t.levels.empty() && k == kTrSwaps) continue;
      }
      grp.tracks.push_back(std::move(t));
    }
    grp.residency = std::move(residency[g]);
    std::stable_sort(grp.residency.begin(), grp.residency.end(),
                     [](const Track& a, const Track& b) { return natural_less(a.name, b.name); });
  }

  // Host groups, one per recording thread.
  // thread → [hooks, disabled, regions, steps, model forward]
  std::map<uint32_t, std::vector<std::vector<Slice>>> host;
  std::map<uint32_t, std::vector<Slice>> breaks;
  auto h = [&](uint32_t thread) -> std::vector<std::vector<Slice>>& {
    auto& v = host[thread];
    if (v.empty()) v.resize(5);
    return v;
  };
  for (uint32_t i : root_compute) {
    const auto& r = tl.compute[i];
    h(r.thread)[4].push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern("model forward (on " + r.device + ")"), i, kCompute});
  }
  for (uint32_t i = 0; i < tl.hooks.size(); ++i) {
    const auto& r = tl.hooks[i];
    const uint8_t cat = r.phase == events::HookPhase::PreForward    ? kPreForward
                        : r.phase == events::HookPhase::PostForward ? kPostForward
                                                                    : kOtherHook;
    h(r.thread)[0].push_back({r.start_ns - o, r.end_ns - o,
                              tl.intern(r.hook + "." + phase_name(r.phase) + " " + module_name(r.module)), i, cat});
  }
  for (uint32_t i = 0; i < tl.disabled.size(); ++i) {
    const auto& r = tl.disabled[i];
    h(r.thread)[1].push_back({r.start_ns - o, r.end_ns - o, tl.intern(r.function + " " + module_name(r.module)), i,
                              kDisabled});
  }
  for (uint32_t i = 0; i < tl.regions.size(); ++i) {
    const auto& r = tl.regions[i];
    h(r.thread)[2].push_back(
        {r.start_ns - o, r.end_ns - o, tl.intern("region " + std::to_string(r.index)), i, kRegion});
  }
  for (uint32_t i = 0; i < tl.steps.size(); ++i) {
    const auto& r = tl.steps[i];
    h(r.thread)[3].push_back({r.start_ns - o, r.end_ns - o, tl.intern("step " + std::to_string(r.step)), i, kStep});
  }
  for (uint32_t i = 0; i < tl.breaks.size(); ++i) {
    const auto& r = tl.breaks[i];
    h(r.thread);
    breaks[r.thread].push_back({r.time_ns - o, r.time_ns - o, tl.intern(r.function), i, kBreak});
  }
  std::map<uint32_t, int64_t> tids;
  for (const auto& t : rd.threads(run_id)) tids[t.thread] = t.os_tid;
  static const char* host_names[4] = {"hooks", "compiler-disabled", "compiled regions", "generation steps"};
  static const Source host_sources[4] = {Source::Hook, Source::Disabled, Source::Region, Source::Step};
  for (auto& [thread, lanes] : host) {
    LaneGroup g;
    g.host = true;
    g.device = "host";
    g.thread = thread;
    g.title = "host thread " + std::to_string(thread);
    if (tids.count(thread)) g.title += " (tid " + std::to_string(tids[thread]) + ")";
    if (!lanes[4].empty()) {
      // The root module's forward spans every device's work: shown here, not as device compute.
      Track f;
      f.name = "model forward";
      f.source = Source::Compute;
      f.levels = build_levels(std::move(lanes[4]));
      g.tracks.push_back(std::move(f));
    }
    for (int k = 0; k < 4; ++k) {
      Track t;
      t.name = host_names[k];
      t.source = host_sources[k];
      t.levels = build_levels(std::move(lanes[k]));
      if (k == 2) {  // graph breaks sit on the regions lane: where one region ends and the next begins
        Track b;
        b.name = "graph breaks";
        b.source = Source::Break;
        b.instants = std::move(breaks[thread]);
        std::sort(b.instants.begin(), b.instants.end(),
                  [](const Slice& x, const Slice& y) { return x.start_ns < y.start_ns; });
        g.tracks.push_back(std::move(t));
        g.tracks.push_back(std::move(b));
        continue;
      }
      g.tracks.push_back(std::move(t));
    }
    tl.groups.push_back(std::move(g));
  }
  return tl;
}

std::pair<int64_t, int64_t> extent(const RunTimeline& tl, Source source, uint32_t row) {
  const int64_t o = tl.origin_ns;
  switch (source) {
    case Source::Compute: return {tl.compute.at(row).start_ns - o, tl.compute.at(row).end_ns - o};
    case Source::Transfer: return {tl.transfers.at(row).start_ns - o, tl.transfers.at(row).end_ns - o};
    case Source::WeightSwap: return {tl.swaps.at(row).start_ns - o, tl.swaps.at(row).end_ns - o};
    case Source::Residency: return {0, tl.duration_ns};
    case Source::Hook: return {tl.hooks.at(row).start_ns - o, tl.hooks.at(row).end_ns - o};
    case Source::Disabled: return {tl.disabled.at(row).start_ns - o, tl.disabled.at(row).end_ns - o};
    case Source::Region: return {tl.regions.at(row).start_ns - o, tl.regions.at(row).end_ns - o};
    case Source::Step: return {tl.steps.at(row).start_ns - o, tl.steps.at(row).end_ns - o};
    case Source::Break: return {tl.breaks.at(row).time_ns - o, tl.breaks.at(row).time_ns - o};
  }
  return {0, 0};
}

std::vector<std::pair<std::string, std::string>> describe(const RunTimeline& tl, Source source, uint32_t row) {
  std::vector<std::pair<std::string, std::string>> f;
  const auto [a, b] = extent(tl, source, row);
  auto times = [&] {
    f.emplace_back("start", format_duration(static_cast<double>(a)));
    f.emplace_back("duration", format_duration(static_cast<double>(b - a)));
  };
  switch (source) {
    case Source::Compute: {
      const auto& r = tl.compute.at(row);
      f.emplace_back("module compute", module_name(r.module));
      f.emplace_back("execution_device", r.device);
      times();
      break;
    }
    case Source::Transfer: {
      const auto& r = tl.transfers.at(row);
      f.emplace_back("activation transfer", std::string(copy_kind_name(r.copy_kind)) + (r.emulated ? " (emulated)" : ""));
      f.emplace_back("src -> dst", r.src + " -> " + r.dst);
      f.emplace_back("bytes", format_bytes(static_cast<double>(r.bytes)) + " (" + std::to_string(r.bytes) + ")");
      if (!r.module.empty()) f.emplace_back("module", r.module);
      times();
      if (b > a) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f GB/s", static_cast<double>(r.bytes) / static_cast<double>(b - a));
        f.emplace_back("throughput", buf);
      }
      break;
    }
    case Source::WeightSwap: {
      const auto& r = tl.swaps.at(row);
      f.emplace_back(r.onload ? "weight onload" : "weight offload", module_name(r.module) + "." + r.tensor);
      f.emplace_back("bytes", format_bytes(static_cast<double>(r.bytes)) + " (" + std::to_string(r.bytes) + ")");
      f.emplace_back("dtype", r.dtype);
      f.emplace_back(r.onload ? "from" : "was on", source_name(r.source));
      f.emplace_back(r.onload ? "to" : "now on", r.device);
      f.emplace_back("memory", r.pinned ? "pinned" : "pageable");
      times();
      break;
    }
    case Source::Residency: {
      const auto& u = tl.residency_units.at(row);
      f.emplace_back("weights of", module_name(u.module));
      f.emplace_back("execution_device", u.device);
      f.emplace_back("home", u.home == u.device ? "resident (not offloaded)" : u.home + " (module on meta between forwards)");
      if (u.bytes) f.emplace_back("bytes per onload", format_bytes(static_cast<double>(u.bytes)));
      break;
    }
    case Source::Hook: {
      const auto& r = tl.hooks.at(row);
      f.emplace_back("hook", r.hook + "." + phase_name(r.phase));
      f.emplace_back("module", module_name(r.module));
      times();
      break;
    }
    case Source::Disabled: {
      const auto& r = tl.disabled.at(row);
      f.emplace_back("torch.compiler.disable", r.function);
      f.emplace_back("module", module_name(r.module));
      f.emplace_back("depth", std::to_string(r.depth));
      times();
      break;
    }
    case Source::Region: {
      const auto& r = tl.regions.at(row);
      f.emplace_back("compiled region", std::to_string(r.index));
      f.emplace_back("ops", std::to_string(r.op_count));
      f.emplace_back("backend", r.backend);
      times();
      break;
    }
    case Source::Step: {
      const auto& r = tl.steps.at(row);
      f.emplace_back("generation step", std::to_string(r.step));
      f.emplace_back("token", std::to_string(r.token));
      times();
      break;
    }
    case Source::Break: {
      const auto& r = tl.breaks.at(row);
      f.emplace_back("graph break", r.reason);
      f.emplace_back("function", r.function);
      f.emplace_back("module", module_name(r.module));
      f.emplace_back("module stack", r.module_stack);
      f.emplace_back("time", format_duration(static_cast<double>(a)));
      break;
    }
  }
  return f;
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
      if (t.name == "memory") continue;
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
            if (t.name == "transfers in") {
              s.bytes_in += bytes;
              s.copy_ns_in += whole;
            } else {
              s.bytes_out += bytes;
              s.copy_ns_out += whole;
            }
          } else if (t.source == Source::WeightSwap && it->category == kOnload) {
            s.onload_bytes += tl.swaps[it->row].bytes;
            s.onload_ns += whole;
          }
        }
      }
      if (t.source == Source::Break) {
        auto lo = std::lower_bound(t.instants.begin(), t.instants.end(), t0,
                                   [](const Slice& x, int64_t v) { return x.start_ns < v; });
        auto hi = std::upper_bound(t.instants.begin(), t.instants.end(), t1,
                                   [](int64_t v, const Slice& x) { return v < x.start_ns; });
        s.count[kBreak] += hi - lo;
        st.graph_breaks += hi - lo;
      }
    }
    st.groups.push_back(s);
  }
  return st;
}

}  // namespace hs::ui
