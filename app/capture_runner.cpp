#include "app/capture_runner.h"

#include <unistd.h>

#include <cstdio>

#include "app/capture_settings.h"
#include "app/cli_util.h"
#include "storage/store.h"

namespace hs::app {

std::vector<Cell> Matrix::cells(Scenario s, bool trees) const {
  std::vector<Cell> out;
  auto add = [&](hooks::CompilePolicy policy, const std::string& tree) {
    for (auto mode : modes)
      for (bool fg : fullgraphs) {
        if (mode == compile::Mode::Eager && fg) continue;  // fullgraph only means something when capturing
        out.push_back({s, policy, mode, fg, tree});
      }
  };
  for (auto policy : policies) add(policy, "");
  if (trees)
    for (const auto& t : accelerate_trees) add(hooks::CompilePolicy::WholeHook, t);
  return out;
}

size_t Matrix::size(const std::vector<Engine*>& engines) const {
  size_t n = 0;
  for (const Engine* e : engines)
    for (auto s : scenarios) n += cells(s, e->runs_accelerate_trees()).size();
  return n;
}

namespace {

class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(isatty(STDERR_FILENO)) {}
  void line(const std::string& text) {
    ++done_;
    std::fprintf(stderr, "%s[%zu/%zu] %s\n", tty_ ? "\r\033[K" : "", done_, total_, text.c_str());
    std::fflush(stderr);
  }

 private:
  size_t total_, done_ = 0;
  bool tty_;
};

void add_devices(storage::Store& store, const std::vector<hooks::AcceleratorInfo>& accelerators) {
  bool any_emulated = false;
  for (const auto& acc : accelerators) {
    storage::DeviceInfo d;
    d.name = std::to_string(acc.index);
    d.kind = acc.emulated ? storage::DeviceKind::Emulated : storage::DeviceKind::Cuda;
    d.backing = acc.backing.str();
    d.label = acc.name;
    if (acc.total_memory > 0) d.max_memory = acc.total_memory;
    store.add_device(d);
    any_emulated |= acc.emulated;
  }
  storage::DeviceInfo cpu;
  cpu.name = "cpu";
  cpu.backing = "cpu";
  cpu.label = "host memory";
  store.add_device(cpu);
  if (any_emulated)
    store.add_diagnostic(std::nullopt, storage::Severity::Warning, "devices",
                         "accelerators are emulated in host memory: moves between them are real copies, but CPU "
                         "capture does not fuse or speed anything up");
}

// One cell: begin the run, let the engine run it, store its result and end the run.
bool run_cell(Engine& engine, const Cell& cell, storage::Store& store, tracer::HostTracer& tracer, Progress& progress) {
  const RunSetup setup = engine.setup(cell);
  tracer::RunInfo info;
  info.scenario = scenario_name(cell.scenario);
  info.policy = policy_label(cell);
  info.mode = compile::mode_name(cell.mode);
  info.fullgraph = cell.fullgraph;
  info.model = setup.model;
  info.device_map_json = setup.device_map.dump();
  info.versions_json = setup.versions.dump();
  info.engine = engine.name();
  const int64_t run = tracer.begin_run(info);
  RunContext ctx{tracer, store, run};
  RunResult r = engine.run(cell, ctx);
  nlohmann::json result = r.to_json(cell);
  result["engine"] = engine.name();
  // COMPILE_RESULTS is the LibTorch engine's explain (Dynamo's records are DYNAMO_* rows).
  if (r.outcome != RunResult::Outcome::Failed && engine.name() == "libtorch") {
    storage::CompileResult cr;
    cr.fullgraph_ok = r.outcome == RunResult::Outcome::Ok;
    if (r.outcome == RunResult::Outcome::Unsupported) cr.error = r.error;
    cr.region_count = r.captured_regions.value_or(0);
    cr.disabled_scope_entries = r.disabled_scope_entries.value_or(0);
    cr.recompiles = r.recompiles.value_or(0);
    cr.break_reasons = result["break_reasons"];
    store.add_compile_result(run, cr);
  }
  store.set_run_result(run, result);
  const bool failed = r.outcome == RunResult::Outcome::Failed;
  tracer.end_run(failed ? tracer::RunStatus::Failed : tracer::RunStatus::Complete, failed ? r.error : std::string());
  progress.line(engine.name() + " " + cell_label(cell) + ": " + r.summary());
  return !failed;
}

}  // namespace

int run_matrix(const std::vector<Engine*>& engines, const Matrix& matrix, CaptureOutput& output,
               const nlohmann::json& settings) {
  // The first scenario is prepared before the file is created: settings that do not fit the
  // model fail here and leave nothing behind.
  for (Engine* e : engines) e->prepare(matrix.scenarios.front());
  storage::Store& store = output.open();
  store.set_metadata(kCaptureSettingsKey, settings.dump());
  std::vector<hooks::AcceleratorInfo> accelerators;
  for (const Engine* e : engines)
    if (accelerators.empty()) accelerators = e->accelerators();
  add_devices(store, accelerators);
  tracer::HostTracer tracer(store);
  const size_t total = matrix.size(engines);
  Progress progress(total);
  int failures = 0;
  for (size_t i = 0; i < matrix.scenarios.size(); ++i)
    for (Engine* e : engines) {
      if (i > 0) e->prepare(matrix.scenarios[i]);
      for (const Cell& cell : matrix.cells(matrix.scenarios[i], e->runs_accelerate_trees()))
        failures += !run_cell(*e, cell, store, tracer, progress);
    }
  output.commit();
  std::fprintf(stderr, "[hookscope] wrote %s (%zu runs)\n", output.out().c_str(), total);
  std::fputs(open_hint(output.out(), total).c_str(), stderr);
  return failures;
}

}  // namespace hs::app
