// Summary statistics of a capture's runs (reports/stats.h): the reports' rows from the reader's
// typed rows, and their tables and JSON.
#include "reports/stats.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <utility>

#include "output/text.h"
#include "facts/breaks.h"
#include "importers/dynamo_summary.h"
#include "storage/run_results.h"
#include "tracer/kind_names.h"

namespace hs::reports {

using nlohmann::json;

const std::vector<std::string>& stats_report_names() {
  static const std::vector<std::string> names{"hook_time",    "hook_time_by_device", "device_compute",   "transfers",
                                              "weight_swaps", "compiler_disabled",   "graph_breaks",     "gpu_by_caller"};
  return names;
}

namespace {

using Span = std::pair<int64_t, int64_t>;

// The range torch.profiler records around each of Dynamo's frame compiles (torch/_dynamo:
// dynamo_timed("_compile.compile_inner") through compile_time_record_function).
constexpr std::string_view kDynamoCompileRange = "_compile.compile_inner (dynamo_timed)";

DurationStats duration_stats(std::vector<int64_t> ns) {
  DurationStats d;
  if (ns.empty()) return d;
  std::sort(ns.begin(), ns.end());
  d.count = static_cast<int64_t>(ns.size());
  for (int64_t v : ns) d.total_ns += v;
  d.min_ns = ns.front();
  d.max_ns = ns.back();
  d.mean_ns = static_cast<double>(d.total_ns) / static_cast<double>(d.count);
  const size_t mid = ns.size() / 2;
  d.median_ns = ns.size() % 2 ? static_cast<double>(ns[mid]) : (static_cast<double>(ns[mid - 1]) + ns[mid]) / 2.0;
  return d;
}

/// Length of the union of the spans: time inside at least one of them.
int64_t union_ns(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  int64_t busy = 0, open_start = 0, open_end = 0;
  bool open = false;
  for (const auto& [s, e] : spans) {
    if (open && s <= open_end) {
      open_end = std::max(open_end, e);
      continue;
    }
    if (open) busy += open_end - open_start;
    open = true;
    open_start = s;
    open_end = e;
  }
  return open ? busy + open_end - open_start : busy;
}

double gb_per_s(int64_t bytes, int64_t ns) { return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0; }

std::string phase_name(events::HookPhase p) { return std::string(tracer::hook_phase_name(p, "unknown")); }

std::string copy_kind_name(tracer::MemcpyKind k) { return std::string(tracer::copy_kind_name(k, "Unknown")); }

// A text as the rows hold it: cut to kMaxStatsCell bytes (a copy of at most that many, however
// long the name the capture holds), as every view shows it. Rows are grouped by whole names.
std::string shown(std::string_view text) { return output::cut_text(text, kMaxStatsCell); }

std::string module_name(std::string_view fqn) { return shown(fqn.empty() ? std::string_view("<root>") : fqn); }

std::string cell_of(const storage::RunRecord& r) {
  if (!r.label.empty()) return r.label;
  std::string cell;
  for (const std::string* part : {&r.scenario, &r.policy, &r.mode})
    if (!part->empty()) cell += (cell.empty() ? "" : "/") + *part;
  if (r.fullgraph) cell += cell.empty() ? "fullgraph" : "/fullgraph";
  return cell;
}

// The value of `key=` in a "hookscope::WHAT key=value ..." range name ("" when absent).
std::string range_value(std::string_view name, std::string_view key) {
  size_t at = 0;
  while ((at = name.find(key, at)) != std::string_view::npos) {
    if (at > 0 && name[at - 1] == ' ' && at + key.size() < name.size() && name[at + key.size()] == '=') {
      const size_t b = at + key.size() + 1, e = name.find(' ', b);
      return std::string(name.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    }
    at += key.size();
  }
  return "";
}

/// What the reports of one run read, each kind read once.
struct RunData {
  /// The run's rows of kind `Row` (a Shared...Row), their strings shared through `tables`.
  template <class Row>
  std::vector<Row> rows() const {
    return rd.shared_rows<Row>(run, tables);
  }
  const storage::CaptureReader& rd;
  int64_t run;
  /// The string tables the rows below and those of `rows` point into: each name is held once,
  /// however many rows name it.
  mutable storage::StringTables tables;
  std::vector<storage::SharedHookEventRow> hooks;
  std::vector<storage::SharedModuleComputeRow> compute;
  std::map<std::string, std::string, std::less<>> device_of;  ///< module FQN → execution device
  std::vector<Span> compiling;  ///< Dynamo's frame compiles (kDynamoCompileRange), merged: sorted, disjoint
};

// `spans` merged into sorted, disjoint spans.
std::vector<Span> merged(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Span> out;
  for (const Span& x : spans)
    if (!out.empty() && x.first <= out.back().second) out.back().second = std::max(out.back().second, x.second);
    else out.push_back(x);
  return out;
}

// The time of [a, b] during which Dynamo was compiling (d.compiling).
int64_t compiling_within(const RunData& d, int64_t a, int64_t b) {
  int64_t ns = 0;
  auto it = std::lower_bound(d.compiling.begin(), d.compiling.end(), a,
                             [](const Span& s, int64_t t) { return s.second <= t; });
  for (; it != d.compiling.end() && it->first < b; ++it) ns += std::min(b, it->second) - std::max(a, it->first);
  return ns;
}

// Execution devices of the run's hooked modules (see compute_stats).
void find_devices(RunData& d) {
  for (const auto& c : d.compute) d.device_of.try_emplace(c.module, c.device);
  std::set<std::string_view, std::less<>> missing;  // views into d.tables
  for (const auto& h : d.hooks)
    if (!d.device_of.count(h.module.view())) missing.insert(h.module.view());
  if (missing.empty()) return;
  for (const auto& op : d.rows<storage::SharedCpuOpRow>()) {
    const std::string_view name = op.name;
    if (name.rfind("hookscope::pre_forward ", 0) != 0 && name.rfind("hookscope::post_forward ", 0) != 0) continue;
    std::string module = range_value(name, "module"), device = range_value(name, "device");
    if (module == "<root>") module.clear();
    if (device.empty() || device == "none" || !missing.count(module)) continue;
    d.device_of.try_emplace(module, device);
  }
  for (const auto& w : d.rows<storage::SharedWeightSwapRow>())
    if (w.onload) d.device_of.try_emplace(w.module, w.device);
}

std::string_view device_of(const RunData& d, std::string_view module) {
  const auto it = d.device_of.find(module);
  return it == d.device_of.end() ? std::string_view() : std::string_view(it->second);
}

template <class Row>
void sort_by_total(std::vector<Row>& rows, auto key) {
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {  // ties keep the whole names' order
    if (a.time.total_ns != b.time.total_ns) return a.time.total_ns > b.time.total_ns;
    return key(a) < key(b);
  });
}

void hook_reports(const RunData& d, RunStats& s, bool per_module, bool per_device) {
  // Grouped by the string tables' entries of hook and module (SharedText::key, a pointer: a name
  // of megabytes is neither compared nor copied per hook call) and by device, then put in the
  // order of the whole names; a name is copied, cut, once per row of the result.
  struct Group {
    std::string_view hook, module;  // module: the device's name in `by_device`
    int phase = 0;
    std::map<const void*, std::string_view> modules;  // by table entry: the module's name
    std::vector<int64_t> ns;
  };
  std::map<std::tuple<const void*, int, const void*>, Group> by_module;
  std::map<std::tuple<const void*, int, std::string_view>, Group> by_device;
  for (const auto& h : d.hooks) {
    const int64_t ns = h.end_ns - h.start_ns - compiling_within(d, h.start_ns, h.end_ns);  // hook time's definition
    const int phase = static_cast<int>(h.phase);
    if (per_module) {
      Group& g = by_module[{h.hook.key(), phase, h.module.key()}];
      if (g.ns.empty()) g.hook = h.hook, g.module = h.module, g.phase = phase;
      g.ns.push_back(ns);
    }
    if (per_device) {
      const std::string_view device = device_of(d, h.module);
      Group& g = by_device[{h.hook.key(), phase, device}];
      if (g.ns.empty()) g.hook = h.hook, g.module = device, g.phase = phase;
      g.modules.try_emplace(h.module.key(), h.module.view());
      g.ns.push_back(ns);
    }
  }
  // The groups in the order of the whole names, those of equal names merged (an edited file may
  // hold one text under two ids).
  auto by_names = [](auto& groups) {
    std::vector<Group*> sorted, out;
    for (auto& [k, g] : groups) sorted.push_back(&g);
    // One table entry is one text: equal without reading its bytes.
    auto compare = [](std::string_view x, std::string_view y) { return x.data() == y.data() ? 0 : x.compare(y); };
    auto order = [&](const Group* a, const Group* b) {
      if (const int c = compare(a->hook, b->hook)) return c;
      if (a->phase != b->phase) return a->phase < b->phase ? -1 : 1;
      return compare(a->module, b->module);
    };
    std::sort(sorted.begin(), sorted.end(), [&](const Group* a, const Group* b) { return order(a, b) < 0; });
    for (Group* g : sorted) {
      if (out.empty() || order(out.back(), g) != 0) {
        out.push_back(g);
        continue;
      }
      out.back()->ns.insert(out.back()->ns.end(), g->ns.begin(), g->ns.end());
      out.back()->modules.insert(g->modules.begin(), g->modules.end());
    }
    return out;
  };
  for (Group* g : by_names(by_module))
    s.hook_time.push_back({shown(g->hook), phase_name(static_cast<events::HookPhase>(g->phase)), module_name(g->module),
                           shown(device_of(d, g->module)), duration_stats(std::move(g->ns))});
  for (Group* g : by_names(by_device)) {
    std::set<std::string_view> modules;  // distinct names
    for (const auto& [entry, name] : g->modules) modules.insert(name);
    s.hook_time_by_device.push_back({shown(g->hook), phase_name(static_cast<events::HookPhase>(g->phase)),
                                     shown(g->module), static_cast<int64_t>(modules.size()),
                                     duration_stats(std::move(g->ns))});
  }
  sort_by_total(s.hook_time, [](const HookTimeRow& r) { return std::tie(r.hook, r.phase, r.module); });
  sort_by_total(s.hook_time_by_device, [](const HookDeviceRow& r) { return std::tie(r.hook, r.phase, r.device); });
}

void device_compute(const RunData& d, RunStats& s) {
  struct Acc {
    std::set<std::string_view> modules;
    std::vector<Span> spans;
  };
  std::map<std::string_view, Acc> by_device;  // views into the run's string tables
  for (const auto& c : d.compute) {
    if (c.module.empty()) continue;  // the root's forward spans every device
    Acc& a = by_device[c.device.view()];
    a.modules.insert(c.module.view());
    a.spans.emplace_back(c.start_ns, c.end_ns);
  }
  for (auto& [device, a] : by_device)
    s.device_compute.push_back({shown(device), static_cast<int64_t>(a.modules.size()), static_cast<int64_t>(a.spans.size()),
                                union_ns(std::move(a.spans))});
}

// Copies grouped by (kind, src, dst, emulated): views of static names and of the run's string
// tables, so that a name is copied once per row of the result, never per copy.
using CopyGroups = std::map<std::tuple<std::string_view, std::string_view, std::string_view, bool>, CopyRow>;

void add_copy(CopyGroups& groups, std::string_view kind, std::string_view src, std::string_view dst, bool emulated,
              int64_t bytes, int64_t ns) {
  CopyRow& r = groups[{kind, src, dst, emulated}];
  if (r.count == 0) {
    r.kind = std::string(kind);
    r.src = shown(src);
    r.dst = shown(dst);
    r.emulated = emulated;
  }
  ++r.count;
  r.bytes += bytes;
  r.total_ns += ns;
}

std::vector<CopyRow> copy_rows(CopyGroups& groups) {
  std::vector<CopyRow> out;
  for (auto& [k, r] : groups) {
    r.gb_per_s = gb_per_s(r.bytes, r.total_ns);
    out.push_back(std::move(r));
  }
  return out;
}

void copy_reports(const RunData& d, RunStats& s, bool transfers, bool swaps) {
  CopyGroups groups;
  if (transfers) {
    for (const auto& t : d.rows<storage::SharedTransferRow>())
      if (t.bytes > 0)  // a call that moved nothing is not a transfer (totals count it apart)
        add_copy(groups, tracer::copy_kind_name(t.copy_kind, "Unknown"), t.src, t.dst, t.emulated, t.bytes,
                 t.end_ns - t.start_ns);
    s.transfers = copy_rows(groups);
    groups.clear();
  }
  if (swaps) {
    for (const auto& w : d.rows<storage::SharedWeightSwapRow>())
      add_copy(groups, w.onload ? "onload" : "offload", tracer::weight_source_name(w.source, "device"), w.device, false,
               w.bytes, w.end_ns - w.start_ns);
    s.weight_swaps = copy_rows(groups);
    // Onloads first: the bytes that moved.
    std::stable_sort(s.weight_swaps.begin(), s.weight_swaps.end(),
                     [](const CopyRow& a, const CopyRow& b) { return a.kind == "onload" && b.kind != "onload"; });
  }
}

// Who launched GPU work: a hook call or module forward by its external id, else (a torch
// profiler trace, whose kernels name the aten op that launched them) the innermost hook call or
// module forward running when that op began.
class GpuCallers {
 public:
  /// A launcher, one per distinct (hook, phase, module): "HOOK.PHASE" or "forward", and the
  /// module's whole name (a view into the run's string tables).
  struct Caller {
    std::string caller;
    std::string_view module;
  };
  explicit GpuCallers(const RunData& d) {
    for (const auto& h : d.hooks) add(h.external_id, intern(h.hook, phase_name(h.phase), h.module), h.start_ns, h.end_ns);
    for (const auto& c : d.compute) add(c.external_id, intern({}, "forward", c.module), c.start_ns, c.end_ns);
    std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    for (const auto& e : d.rows<storage::SharedExternalCorrelationRow>())  // hookscope's own (CUSTOM1) first
      if (e.kind == tracer::ExternalKind::Custom1 || !external_of_.count(e.correlation_id))
        external_of_[e.correlation_id] = e.external_id;
    for (const auto& op : d.rows<storage::SharedCpuOpRow>())
      if (op.external_id) op_start_.try_emplace(static_cast<uint64_t>(*op.external_id), op.start_ns);
  }
  /// The launcher of the record with `correlation`; "(unattributed)" when unknown.
  const Caller* of(uint32_t correlation) const {
    const auto e = external_of_.find(correlation);
    if (correlation == 0 || e == external_of_.end()) return &unattributed_;
    if (const auto c = by_id_.find(e->second); c != by_id_.end()) return c->second;
    const auto op = op_start_.find(e->second);
    if (op == op_start_.end()) return &unattributed_;
    // The innermost span holding the op's start: the latest-starting one that still covers it.
    auto it = std::upper_bound(spans_.begin(), spans_.end(), op->second, [](int64_t t, const Span& s) { return t < s.start; });
    while (it != spans_.begin()) {
      --it;
      if (it->end >= op->second) return it->caller;
    }
    return &unattributed_;
  }

 private:
  struct Span {
    int64_t start, end;
    const Caller* caller;
  };
  // Looked up by the strings' table entries (SharedText::key), so a long name is never compared
  // or copied per row.
  const Caller* intern(const storage::SharedText& hook, const std::string& phase, const storage::SharedText& module) {
    auto [it, fresh] = callers_.try_emplace({hook.key(), phase, module.key()});
    if (fresh) it->second = {hook.empty() ? phase : hook + "." + phase, module.view()};
    return &it->second;
  }
  void add(int64_t id, const Caller* caller, int64_t start, int64_t end) {
    if (id > 0) by_id_[static_cast<uint64_t>(id)] = caller;
    spans_.push_back({start, end, caller});
  }
  std::map<std::tuple<const void*, std::string, const void*>, Caller> callers_;
  const Caller unattributed_{"(unattributed)", {}};
  std::map<uint64_t, const Caller*> by_id_;
  std::vector<Span> spans_;
  std::map<uint32_t, uint64_t> external_of_;  // correlationId -> external id
  std::map<uint64_t, int64_t> op_start_;      // a CPU op's external id -> its start
};

void gpu_caller_report(const RunData& d, RunStats& s) {
  const auto kernels = d.rows<storage::SharedKernelRow>();
  const auto memcpys = d.rows<storage::SharedMemcpyRow>();
  const auto memsets = d.rows<storage::SharedMemsetRow>();
  if (kernels.empty() && memcpys.empty() && memsets.empty()) return;  // a CPU run: nothing to join
  const GpuCallers callers(d);
  using Caller = GpuCallers::Caller;
  std::map<std::tuple<const Caller*, std::string, int64_t>, GpuCallerRow> groups;
  auto add = [&](uint32_t correlation, std::string kind, uint32_t device, int64_t ns, int64_t bytes) {
    const Caller* c = callers.of(correlation);
    GpuCallerRow& r = groups[{c, kind, device}];
    if (r.count == 0) r.caller = shown(c->caller), r.module = module_name(c->module), r.kind = kind, r.device = device;
    ++r.count;
    r.total_ns += ns;
    r.bytes += bytes;
  };
  using storage::gpu_duration_ns;
  for (const auto& k : kernels) add(k.correlation_id, "kernel", k.device_id, gpu_duration_ns(k.start_ns, k.end_ns), 0);
  for (const auto& m : memcpys)
    add(m.correlation_id, "memcpy " + copy_kind_name(m.copy_kind), m.device_id, gpu_duration_ns(m.start_ns, m.end_ns),
        m.bytes);
  for (const auto& m : memsets)
    add(m.correlation_id, "memset", m.device_id, gpu_duration_ns(m.start_ns, m.end_ns), m.bytes);
  // In the order of the whole names (caller, module, kind, device), equal ones merged (an edited
  // file may hold one text under two ids), then most time first.
  std::vector<std::pair<std::tuple<std::string_view, std::string_view, std::string_view, int64_t>, GpuCallerRow*>> order;
  for (auto& [k, r] : groups) order.push_back({{std::get<0>(k)->caller, std::get<0>(k)->module, std::get<1>(k), r.device}, &r});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < order.size(); ++i) {
    GpuCallerRow& r = *order[i].second;
    if (i > 0 && order[i].first == order[i - 1].first) {
      GpuCallerRow& first = s.gpu_by_caller.back();
      first.count += r.count, first.total_ns += r.total_ns, first.bytes += r.bytes;
      continue;
    }
    s.gpu_by_caller.push_back(std::move(r));
  }
  std::stable_sort(s.gpu_by_caller.begin(), s.gpu_by_caller.end(),
                   [](const GpuCallerRow& a, const GpuCallerRow& b) { return a.total_ns > b.total_ns; });
}

void disabled_report(const std::vector<storage::SharedDisabledScopeRow>& scopes, RunStats& s) {
  std::map<std::string_view, std::pair<int64_t, std::vector<int64_t>>> by_function;  // views into the string tables
  for (const auto& x : scopes) {
    auto& g = by_function[x.function.view()];
    g.first += x.depth > 1;
    g.second.push_back(x.end_ns - x.start_ns);
  }
  std::vector<std::pair<std::string_view, DisabledScopeRow>> rows;
  for (auto& [function, g] : by_function)
    rows.push_back({function, {shown(function), g.first, duration_stats(std::move(g.second))}});
  // Most time first; ties in the order of the whole names.
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.time.total_ns > b.second.time.total_ns;
  });
  for (auto& [function, r] : rows) s.compiler_disabled.push_back(std::move(r));
}

void break_report(const RunData& d, RunStats& s) {
  // Keyed by views into the rows' string tables: a name is copied once per break site, never per
  // graph break.
  std::map<std::tuple<std::string_view, std::string_view, std::string_view>, BreakSiteRow> groups;
  const auto breaks = d.rows<storage::SharedGraphBreakRow>();
  for (const auto& b : breaks) {
    const std::string_view module = b.module.empty() ? std::string_view("<root>") : b.module.view();
    BreakSiteRow& r = groups[{"libtorch", b.function.view(), module}];
    if (r.count == 0) r = {"libtorch", shown(b.function), shown(module), shown(b.reason), 0};
    ++r.count;
  }
  // The log's break records by gb code and user frame, whole texts (views into the rows' string
  // tables); each site named by the gb type most of its records have (the first seen on a tie).
  std::map<std::tuple<std::string_view, std::string_view>, std::vector<std::pair<std::string_view, int64_t>>> types;
  for (const auto& b : d.rows<storage::SharedDynamoGraphBreakRow>()) {
    BreakSiteRow& r = groups[{"log", b.gb_code.view(), b.user_frame.view()}];
    if (r.count == 0) r = {"log", shown(b.gb_code), shown(b.user_frame), "", 0};
    ++r.count;
    auto& seen = types[{b.gb_code.view(), b.user_frame.view()}];
    auto t = std::find_if(seen.begin(), seen.end(), [&](const auto& x) { return x.first == b.gb_type.view(); });
    if (t == seen.end()) seen.push_back({b.gb_type.view(), 1});
    else ++t->second;
  }
  for (const auto& [site, seen] : types) {
    const auto most = std::max_element(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    groups[{"log", std::get<0>(site), std::get<1>(site)}].reason = shown(most->first);
  }
  for (auto& [k, r] : groups) s.graph_breaks.push_back(std::move(r));
  std::stable_sort(s.graph_breaks.begin(), s.graph_breaks.end(), [](const BreakSiteRow& a, const BreakSiteRow& b) {
    if (a.count != b.count) return a.count > b.count;
    return std::tie(a.site, a.where) < std::tie(b.site, b.where);
  });
}

void totals(const RunData& d, const std::vector<storage::SharedDisabledScopeRow>& scopes, StatsTotals& t) {
  std::vector<Span> spans;
  for (const auto& h : d.hooks) spans.emplace_back(h.start_ns, h.end_ns);
  t.hook_calls = static_cast<int64_t>(d.hooks.size());
  const int64_t in_hooks = union_ns(spans);
  // Dynamo compiling inside a hook call: the overlap of the two unions, |H| + |C| − |H ∪ C|.
  if (!d.compiling.empty()) {
    const int64_t compiling = union_ns(d.compiling);
    spans.insert(spans.end(), d.compiling.begin(), d.compiling.end());
    t.hook_compile_ns = in_hooks + compiling - union_ns(std::move(spans));
  }
  t.hook_busy_ns = in_hooks - t.hook_compile_ns;
  spans.clear();
  for (const auto& x : scopes) spans.emplace_back(x.start_ns, x.end_ns);
  t.disabled_entries = static_cast<int64_t>(scopes.size());
  t.disabled_busy_ns = union_ns(std::move(spans));
  for (const auto& x : d.rd.transfer_sums(d.run)) {
    t.transfers += x.count;
    t.transfer_bytes += x.bytes;
    t.transfer_ns += x.total_ns;
  }
  std::tie(t.empty_transfer_calls, t.empty_transfer_ns) = d.rd.empty_transfers(d.run);
  for (const auto& w : d.rd.weight_swap_sums(d.run)) {
    (w.onload ? t.onloads : t.offloads) += w.count;
    (w.onload ? t.onload_bytes : t.offload_bytes) += w.bytes;
    (w.onload ? t.onload_ns : t.offload_ns) += w.total_ns;
  }
  t.recorded_disabled_scope_entries = d.rd.count("GRAPH_BREAKS", d.run);
  // The run's break facts' figure (facts/breaks.h): the log's rows, or for an imported export
  // the count its trace carried — what report and explain say for the same run.
  const nlohmann::json f = facts::break_facts(d.rd, d.rd.run(d.run));
  t.log_graph_break_records = f["log_graph_break_records"].is_number() ? f["log_graph_break_records"].get<int64_t>() : 0;
}

RunStats run_stats(const storage::CaptureReader& rd, const storage::RunRecord& rec, const std::set<std::string>& want) {
  rd.check_rows(rec.id);  // no sum or duration over rows no capture writes
  storage::check_run_results(rec.results, rd, rec.id);
  RunStats s;
  s.run = rec.id;
  s.engine = rec.engine;
  s.cell = cell_of(rec);
  s.scenario = rec.scenario;
  s.policy = rec.policy;
  s.mode = rec.mode;
  s.fullgraph = rec.fullgraph;
  s.status = std::string(tracer::to_string(rec.status));
  RunData d{rd, rec.id, {}, {}, {}, {}, {}};
  d.hooks = d.rows<storage::SharedHookEventRow>();
  d.compute = d.rows<storage::SharedModuleComputeRow>();
  if (!d.hooks.empty()) d.compiling = merged(rd.cpu_op_spans(rec.id, kDynamoCompileRange));
  if (want.count("hook_time_by_device") || want.count("hook_time")) find_devices(d);
  hook_reports(d, s, want.count("hook_time") > 0, want.count("hook_time_by_device") > 0);
  if (want.count("device_compute")) device_compute(d, s);
  copy_reports(d, s, want.count("transfers") > 0, want.count("weight_swaps") > 0);
  const auto scopes = d.rows<storage::SharedDisabledScopeRow>();
  if (want.count("compiler_disabled")) disabled_report(scopes, s);
  if (want.count("graph_breaks")) break_report(d, s);
  if (want.count("gpu_by_caller")) gpu_caller_report(d, s);
  totals(d, scopes, s.totals);
  return s;
}

}  // namespace

std::vector<RunStats> compute_stats(const storage::CaptureReader& reader, const StatsOptions& options) {
  const auto& names = stats_report_names();
  std::set<std::string> want(options.reports.begin(), options.reports.end());
  for (const auto& r : want)
    if (std::find(names.begin(), names.end(), r) == names.end())
      throw std::invalid_argument("unknown stats report '" + r + "' (reports: " + output::join(names, ", ") + ")");
  if (want.empty()) want.insert(names.begin(), names.end());
  std::vector<RunStats> out;
  if (options.run) {
    out.push_back(run_stats(reader, reader.run(*options.run), want));
    return out;
  }
  for (const auto& rec : reader.runs())
    if (rec.status == tracer::RunStatus::Complete) out.push_back(run_stats(reader, rec, want));
  return out;
}

// ---- tables and JSON -----------------------------------------------------------------------

namespace {

using Cells = std::vector<json>;

const std::vector<std::string> kDurationColumns{"count", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns"};

void add_duration(Cells& c, const DurationStats& d) {
  for (json v : {json(d.count), json(d.total_ns), json(d.mean_ns), json(d.median_ns), json(d.min_ns), json(d.max_ns)})
    c.push_back(std::move(v));
}

std::vector<std::string> with_durations(std::vector<std::string> columns) {
  columns.insert(columns.end(), kDurationColumns.begin(), kDurationColumns.end());
  return columns;
}

Cells copy_cells(const CopyRow& r) {
  return {r.kind, r.src, r.dst, r.emulated, r.count, r.bytes, r.total_ns, r.gb_per_s};
}

/// A report: its title, its own columns and its rows of one run.
struct ReportSpec {
  std::string name, title;
  std::string empty;  // what no rows means
  std::vector<std::string> columns;
  std::function<std::vector<Cells>(const RunStats&)> rows;
};

template <class Row, class F>
std::vector<Cells> map_rows(const std::vector<Row>& rows, F cells) {
  std::vector<Cells> out;
  for (const auto& r : rows) out.push_back(cells(r));
  return out;
}

const std::vector<ReportSpec>& specs() {
  static const std::vector<ReportSpec> s{
      {"hook_time", "Hook time by hook class, phase and module",
       "no hook calls recorded (hooks Dynamo traced into a compiled graph run inside it, without ranges of their own)",
       with_durations({"hook", "phase", "module", "device"}),
       [](const RunStats& st) {
         return map_rows(st.hook_time, [](const HookTimeRow& r) {
           Cells c{r.hook, r.phase, r.module, r.device};
           add_duration(c, r.time);
           return c;
         });
       }},
      {"hook_time_by_device", "Hook time by hook class, phase and execution device",
       "no hook calls recorded (hooks Dynamo traced into a compiled graph run inside it, without ranges of their own)",
       with_durations({"hook", "phase", "device", "modules"}),
       [](const RunStats& st) {
         return map_rows(st.hook_time_by_device, [](const HookDeviceRow& r) {
           Cells c{r.hook, r.phase, r.device, r.modules};
           add_duration(c, r.time);
           return c;
         });
       }},
      {"device_compute", "Module compute per execution device, busy = union of the module spans",
       "no module compute recorded (MODULE_COMPUTE: LibTorch engine runs)",
       {"device", "modules", "calls", "busy_ns"},
       [](const RunStats& st) {
         return map_rows(st.device_compute,
                         [](const DeviceComputeRow& r) { return Cells{r.device, r.modules, r.calls, r.busy_ns}; });
       }},
      {"transfers", "Activation transfers by copy kind and device pair (calls that moved nothing left out)",
       "no activation moved between devices",
       {"kind", "src", "dst", "emulated", "count", "bytes", "total_ns", "gb_per_s"},
       [](const RunStats& st) { return map_rows(st.transfers, copy_cells); }},
      {"weight_swaps", "Weight onloads and offloads by source and device",
       "no weight onloaded or offloaded (nothing of the model is offloaded)",
       {"kind", "src", "dst", "emulated", "count", "bytes", "total_ns", "gb_per_s"},
       [](const RunStats& st) { return map_rows(st.weight_swaps, copy_cells); }},
      {"compiler_disabled", "Time inside compiler-disabled scopes by function, each entry inclusive",
       "no compiler-disabled scope entered (DISABLED_SCOPES: LibTorch engine runs)",
       with_durations({"function", "nested"}),
       [](const RunStats& st) {
         return map_rows(st.compiler_disabled, [](const DisabledScopeRow& r) {
           Cells c{r.function, r.nested};
           add_duration(c, r.time);
           return c;
         });
       }},
      {"graph_breaks",
       "Graph-break records of the compile log (source log: gb code, user frame) and disabled-scope entries recorded "
       "(source libtorch: function, module), by site, over the whole run",
       "no graph-break records in this file (no compile log; an imported hookscope export carries only their "
       "grouped summary, which report and explain list) and no disabled-scope entries recorded",
       {"source", "site", "where", "count", "reason"},
       [](const RunStats& st) {
         return map_rows(st.graph_breaks,
                         [](const BreakSiteRow& r) { return Cells{r.source, r.site, r.where, r.count, r.reason}; });
       }},
      {"gpu_by_caller", "GPU work by the hook call or module forward that launched it (CUPTI external correlation)",
       "no GPU activity recorded (no CUPTI kernel, memcpy or memset rows: captured without a GPU or without CUPTI)",
       {"caller", "module", "kind", "device", "count", "total_ns", "bytes"},
       [](const RunStats& st) {
         return map_rows(st.gpu_by_caller, [](const GpuCallerRow& r) {
           return Cells{r.caller, r.module, r.kind, r.device, r.count, r.total_ns, r.bytes};
         });
       }},
  };
  return s;
}

}  // namespace

json stats_totals_json(const StatsTotals& t) {
  return {{"hook_calls", t.hook_calls},
          {"hook_busy_ns", t.hook_busy_ns},
          {"hook_compile_ns", t.hook_compile_ns},
          {"disabled_entries", t.disabled_entries},
          {"disabled_busy_ns", t.disabled_busy_ns},
          {"transfers", t.transfers},
          {"transfer_bytes", t.transfer_bytes},
          {"transfer_ns", t.transfer_ns},
          {"empty_transfer_calls", t.empty_transfer_calls},
          {"empty_transfer_ns", t.empty_transfer_ns},
          {"onloads", t.onloads},
          {"onload_bytes", t.onload_bytes},
          {"onload_ns", t.onload_ns},
          {"offloads", t.offloads},
          {"offload_bytes", t.offload_bytes},
          {"offload_ns", t.offload_ns},
          {"recorded_disabled_scope_entries", t.recorded_disabled_scope_entries},
          {"log_graph_break_records", t.log_graph_break_records}};
}

std::string shortened_text(std::string s, size_t max) { return s.size() <= max ? s : output::cut_text(s, max); }

namespace {
/// A report's rows with each text cut to kMaxStatsCell bytes: a module, hook or caller name of
/// megabytes (an edited capture, an imported trace) is shown once per row, never copied whole.
std::vector<Cells> shortened_rows(std::vector<Cells> rows) {
  for (Cells& c : rows)
    for (json& v : c)
      if (v.is_string() && v.get_ref<const std::string&>().size() > kMaxStatsCell)
        v = shortened_text(v.get<std::string>(), kMaxStatsCell);
  return rows;
}
}  // namespace

std::vector<StatsTable> stats_tables(const std::vector<RunStats>& runs, const std::vector<std::string>& reports) {
  std::vector<StatsTable> out;
  for (const ReportSpec& spec : specs()) {
    if (!reports.empty() && std::find(reports.begin(), reports.end(), spec.name) == reports.end()) continue;
    StatsTable t{spec.name, spec.title, spec.empty, {"run", "engine", "cell"}, {}};
    t.columns.insert(t.columns.end(), spec.columns.begin(), spec.columns.end());
    for (const RunStats& r : runs) {
      // Every row repeats its run's cell: a label of megabytes is cut here, once per run, not
      // copied whole into each row (the JSON document names the whole label once, in "runs").
      const json run = r.run, engine = shortened_text(r.engine, kMaxStatsCell), cell = shortened_text(r.cell, kMaxStatsCell);
      for (Cells& c : shortened_rows(spec.rows(r))) {
        c.insert(c.begin(), {run, engine, cell});
        t.rows.push_back(std::move(c));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

json stats_json(const RunStats& run, const std::vector<std::string>& reports) {
  json j{{"units", {{"time", "ns"}, {"size", "bytes"}, {"rate", "GB/s (1e9 bytes/s)"}}}, {"totals", stats_totals_json(run.totals)}};
  for (const ReportSpec& spec : specs()) {
    if (!reports.empty() && std::find(reports.begin(), reports.end(), spec.name) == reports.end()) continue;
    json rows = json::array();
    for (const Cells& c : shortened_rows(spec.rows(run))) {
      json row = json::object();
      for (size_t i = 0; i < c.size(); ++i) row[spec.columns[i]] = c[i];
      rows.push_back(std::move(row));
    }
    j[spec.name] = std::move(rows);
  }
  return j;
}

}  // namespace hs::reports
