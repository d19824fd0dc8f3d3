#include "facts/iterations.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>

#include "measurement/spread.h"

namespace hs::facts {

namespace {

constexpr std::string_view kProfilerStep = "ProfilerStep#";
constexpr std::string_view kHookscope = "hookscope::";
constexpr int64_t kTidBits = 0xFFFFFF;  // globalTid = pid << 24 | tid

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// torch.profiler's own steps: N from the name ("ProfilerStep#12"), as HTA reads it.
std::optional<int64_t> profiler_step_number(std::string_view name) {
  if (!starts_with(name, kProfilerStep)) return std::nullopt;
  const std::string_view digits = name.substr(kProfilerStep.size());
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end == digits.data()) return std::nullopt;
  return n;
}

// The root module's hook phase ("hookscope::pre_forward hook=H module=<root> ..."): 1 for
// pre_forward, 2 for post_forward, 0 for any other range.
int root_phase(std::string_view name) {
  if (name.find(" module=<root>") == std::string_view::npos) return 0;
  if (starts_with(name, "hookscope::pre_forward ")) return 1;
  if (starts_with(name, "hookscope::post_forward ")) return 2;
  return 0;
}

struct Op {
  int64_t start, end;
  std::string_view name;
};

// One thread's top-level calls of a dispatched model (the header's rule 3). `ops` are sorted by
// start, the longer first.
void model_calls(const std::vector<Op>& ops, int64_t pid, int64_t tid, std::vector<Iteration>& out) {
  std::vector<int64_t> open;               // ends of the enclosing ranges
  std::optional<Op> top;                   // the current top-level range
  bool holds_hook_work = false;            // a hookscope:: range inside `top`
  bool in_root_call = false;               // an uncompiled call: inside its root's hooks
  int64_t root_call_start = 0;             // its root pre_forward's start
  // A top-level range inside an uncompiled call (a compiled submodule's region) is part of it.
  auto close_top = [&] {
    if (top && holds_hook_work && !in_root_call && !starts_with(top->name, kHookscope))
      out.push_back({0, top->start, top->end, pid, tid});
    top.reset();
    holds_hook_work = false;
  };
  for (const Op& op : ops) {
    while (!open.empty() && open.back() <= op.start) open.pop_back();
    const bool hook_range = starts_with(op.name, kHookscope);
    if (open.empty()) {  // a top-level range
      close_top();
      top = op;
      if (const int phase = root_phase(op.name); phase == 1) {
        in_root_call = true;
        root_call_start = op.start;
      } else if (phase == 2 && in_root_call) {
        out.push_back({0, root_call_start, op.end, pid, tid});
        in_root_call = false;
      }
    } else if (hook_range) {
      holds_hook_work = true;
    }
    open.push_back(std::max(op.end, op.start));
  }
  close_top();
}

bool host_range(const storage::SharedCpuOpRow& op) {
  return op.category != "gpu_user_annotation" && op.category != "python_function";
}

// Rules 1 and (with `find_calls`) 3 of the header over the run's CPU ops.
Iterations from_cpu_ops(const std::vector<storage::SharedCpuOpRow>& cpu_ops, const std::vector<int64_t>& pids, bool find_calls) {
  Iterations it;
  auto pid_of = [&](size_t i) { return i < pids.size() ? pids[i] : 0; };
  bool hook_work = false;
  for (size_t i = 0; i < cpu_ops.size(); ++i) {
    const storage::SharedCpuOpRow& op = cpu_ops[i];
    if (!host_range(op)) continue;
    if (const auto n = profiler_step_number(op.name)) {
      it.source = IterationSource::ProfilerStep;
      it.steps.push_back({*n, op.start_ns, op.end_ns, pid_of(i), op.os_tid & kTidBits});
    }
    hook_work |= starts_with(op.name, kHookscope);
  }
  if (it.source == IterationSource::ProfilerStep || !find_calls || !hook_work) return it;
  std::map<std::pair<int64_t, int64_t>, std::vector<Op>> threads;
  for (size_t i = 0; i < cpu_ops.size(); ++i)
    if (host_range(cpu_ops[i]))
      threads[{pid_of(i), cpu_ops[i].os_tid & kTidBits}].push_back({cpu_ops[i].start_ns, cpu_ops[i].end_ns, cpu_ops[i].name});
  for (auto& [thread, ops] : threads) {
    std::sort(ops.begin(), ops.end(),
              [](const Op& a, const Op& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    model_calls(ops, thread.first, thread.second, it.steps);
  }
  std::sort(it.steps.begin(), it.steps.end(), [](const Iteration& a, const Iteration& b) { return a.start_ns < b.start_ns; });
  for (size_t i = 0; i < it.steps.size(); ++i) it.steps[i].number = static_cast<int64_t>(i);
  if (!it.steps.empty()) it.source = IterationSource::ModelCall;
  return it;
}

}  // namespace

std::string_view iteration_source_name(IterationSource s) {
  switch (s) {
    case IterationSource::ProfilerStep: return "ProfilerStep#N";
    case IterationSource::GenerationStep: return "generation step";
    case IterationSource::ModelCall: return "model call";
    case IterationSource::None: break;
  }
  return "none";
}

Iterations iterations(const std::vector<storage::SharedCpuOpRow>& cpu_ops, const std::vector<int64_t>& cpu_op_pids,
                      const std::vector<storage::SharedGenerationStepRow>& generation_steps) {
  Iterations it = from_cpu_ops(cpu_ops, cpu_op_pids, generation_steps.empty());
  if (it.source == IterationSource::ProfilerStep || generation_steps.empty()) {
    std::stable_sort(it.steps.begin(), it.steps.end(),
                     [](const Iteration& a, const Iteration& b) { return a.start_ns < b.start_ns; });
    return it;
  }
  it = {IterationSource::GenerationStep, {}};
  for (const auto& s : generation_steps) it.steps.push_back({0, s.start_ns, s.end_ns, -1, static_cast<int64_t>(s.thread)});
  std::stable_sort(it.steps.begin(), it.steps.end(),
                   [](const Iteration& a, const Iteration& b) { return a.start_ns < b.start_ns; });
  for (size_t i = 0; i < it.steps.size(); ++i) it.steps[i].number = static_cast<int64_t>(i);
  return it;
}

Iterations iterations(const storage::CaptureReader& reader, int64_t run) {
  storage::StringTables strings;
  return iterations(reader.shared_rows<storage::SharedCpuOpRow>(run, strings), reader.activity_pids(run, "CPU_OPS"),
                    reader.shared_rows<storage::SharedGenerationStepRow>(run, strings));
}

nlohmann::json iteration_figures(const Iterations& it) {
  std::vector<double> ms;
  for (const Iteration& s : it.steps) ms.push_back(static_cast<double>(s.end_ns - s.start_ns) / 1e6);
  return {{"source", iteration_source_name(it.source)},
          {"count", it.steps.size()},
          {"ms", ms.empty() ? nlohmann::json(nullptr) : measurement::Spread::of(ms).to_json()}};
}

}  // namespace hs::facts
