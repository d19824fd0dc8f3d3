// The run model's vocabulary (categories, lanes, labels), what a slice says about its source
// row, and the statistics of a time range. The loader is in run_timeline_load.cpp.
#include "ui/run_timeline.h"

#include <algorithm>
#include <cstdio>

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

const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::Compute: return "compute";
    case Lane::TransfersIn: return "transfers in";
    case Lane::TransfersOut: return "transfers out";
    case Lane::WeightSwaps: return "weight onload/offload";
    case Lane::Memory: return "memory";
    case Lane::ResidencySummary: return "weights on device";
    case Lane::Residency: return "weights";
    case Lane::ModelForward: return "model forward";
    case Lane::Hooks: return "hooks";
    case Lane::CompilerDisabled: return "compiler-disabled";
    case Lane::Regions: return "compiled regions";
    case Lane::GraphBreaks: return "graph breaks";
    case Lane::Steps: return "generation steps";
  }
  return "?";
}

Source lane_source(Lane lane) {
  switch (lane) {
    case Lane::Compute: return Source::Compute;
    case Lane::TransfersIn: return Source::Transfer;
    case Lane::TransfersOut: return Source::Transfer;
    case Lane::WeightSwaps: return Source::WeightSwap;
    case Lane::Memory: return Source::Compute;  // a counter: no slices index anything
    case Lane::ResidencySummary: return Source::Residency;
    case Lane::Residency: return Source::Residency;
    case Lane::ModelForward: return Source::Compute;
    case Lane::Hooks: return Source::Hook;
    case Lane::CompilerDisabled: return Source::Disabled;
    case Lane::Regions: return Source::Region;
    case Lane::GraphBreaks: return Source::Break;
    case Lane::Steps: return Source::Step;
  }
  return Source::Compute;
}

std::string module_label(const std::string& module) { return module.empty() ? "<root>" : module; }

const char* weight_source_name(events::WeightSource s) {
  switch (s) {
    case events::WeightSource::Cpu: return "cpu";
    case events::WeightSource::Disk: return "disk";
    case events::WeightSource::Device: return "device";
  }
  return "?";
}

const char* hook_phase_name(events::HookPhase p) {
  switch (p) {
    case events::HookPhase::PreForward: return "pre_forward";
    case events::HookPhase::PostForward: return "post_forward";
    case events::HookPhase::InitHook: return "init_hook";
    case events::HookPhase::DetachHook: return "detach_hook";
  }
  return "?";
}

namespace {

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

}  // namespace

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
      f.emplace_back("module compute", module_label(r.module));
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
      f.emplace_back(r.onload ? "weight onload" : "weight offload", module_label(r.module) + "." + r.tensor);
      f.emplace_back("bytes", format_bytes(static_cast<double>(r.bytes)) + " (" + std::to_string(r.bytes) + ")");
      f.emplace_back("dtype", r.dtype);
      f.emplace_back(r.onload ? "from" : "was on", weight_source_name(r.source));
      f.emplace_back(r.onload ? "to" : "now on", r.device);
      f.emplace_back("memory", r.pinned ? "pinned" : "pageable");
      times();
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
      const auto& r = tl.hooks.at(row);
      f.emplace_back("hook", r.hook + "." + hook_phase_name(r.phase));
      f.emplace_back("module", module_label(r.module));
      times();
      break;
    }
    case Source::Disabled: {
      const auto& r = tl.disabled.at(row);
      f.emplace_back("torch.compiler.disable", r.function);
      f.emplace_back("module", module_label(r.module));
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
      f.emplace_back("module", module_label(r.module));
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
