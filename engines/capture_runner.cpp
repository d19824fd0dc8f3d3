#include "engines/capture_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "output/capture_output.h"
#include "output/text.h"
#include "storage/capture_settings.h"
#include "storage/store.h"
#include "tracer/cupti_tracer.h"

namespace hs::engines {

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

// The capture's progress on stderr. Always one line per finished run; on a terminal also a
// status line redrawn in place (at each generate, else at most 10 times a second): the cell, which generate and
// decode step it is in, the time since the matrix began and an estimate of what is left
// (from the finished cells' mean). Quiet — no status line, no control characters — when
// stderr is not a terminal.
class Progress {
 public:
  Progress(size_t total, bool live) : total_(total), live_(live), t0_(Clock::now()) {}

  void begin(const std::string& label) {
    label_ = label;
    cell_t0_ = Clock::now();
    state_ = "starting";
    phase_.clear();
    redraw(true);
  }
  void tick(const CellProgress& p) {
    if (!p.note.empty()) {
      print_line("  " + p.note);
      return;
    }
    if (!live_) return;
    const bool next_generate = p.phase != phase_;
    phase_ = p.phase;
    state_ = p.phase + (p.steps > 0 ? ", step " + std::to_string(p.step + 1) + "/" + std::to_string(p.steps) : "");
    redraw(next_generate);
  }
  void end(const std::string& text) {
    ++done_;
    cell_seconds_ += seconds(cell_t0_);
    label_.clear();  // no status line until the next run begins
    print_line("[" + std::to_string(done_) + "/" + std::to_string(total_) + "] " + text);
  }
  ~Progress() {
    if (live_ && drawn_) std::fputs("\r\033[K", stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds(Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  }
  static std::string duration(double s) {
    const long t = std::lround(std::max(0.0, s));
    char b[32];
    if (t >= 3600) std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
    else std::snprintf(b, sizeof b, "%lds", t);
    return b;
  }
  // What is left: the finished cells' mean per cell times the cells not finished, less the
  // time the current cell has already run.
  std::string eta() const {
    if (done_ == 0) return "ETA after the first run";
    const double mean = cell_seconds_ / static_cast<double>(done_);
    return "ETA ~" + duration(mean * static_cast<double>(total_ - done_) - seconds(cell_t0_));
  }
  void print_line(const std::string& line) {
    // Run errors and notes quote the drivers' and libraries' text: shown, never acted on.
    std::fprintf(stderr, "%s%s\n", live_ && drawn_ ? "\r\033[K" : "", output::terminal_text(line).c_str());
    drawn_ = false;
    redraw(true);
  }
  void redraw(bool now) {
    if (!live_ || label_.empty() || done_ >= total_) return;
    const auto t = Clock::now();
    if (!now && t - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = t;
    std::fprintf(stderr, "\r\033[K[%zu/%zu] %s: %s | %s elapsed, %s", done_ + 1, total_, label_.c_str(),
                 output::terminal_text(state_, false).c_str(), duration(seconds(t0_)).c_str(), eta().c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  size_t total_, done_ = 0;
  bool live_, drawn_ = false;
  Clock::time_point t0_, cell_t0_, last_draw_{};
  double cell_seconds_ = 0;
  std::string label_, state_, phase_;
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

// The CUPTI tracer when the capture runs on real GPUs (nullptr on CPU machines: no CUPTI call,
// no banner). When CUPTI cannot trace, the capture says so once and stays host-only.
std::unique_ptr<tracer::CuptiTracer> gpu_tracer(storage::Store& store,
                                                const std::vector<hooks::AcceleratorInfo>& accelerators) {
  if (std::none_of(accelerators.begin(), accelerators.end(), [](const auto& a) { return !a.emulated; }))
    return nullptr;
  std::unique_ptr<tracer::CuptiTracer> t = tracer::make_cupti_tracer();
  if (t->available()) return t;
  store.add_diagnostic(std::nullopt, storage::Severity::Warning, "cupti", "GPU activity not traced: " + t->status());
  return nullptr;
}

// GPU activity of one run: started when CUPTI can, else a warning and host-only from then on.
// Returns whether it started.
bool start_gpu_tracing(std::unique_ptr<tracer::CuptiTracer>& cupti, storage::Store& store, int64_t run) {
  if (!cupti) return false;
  try {
    cupti->start(run, {}, store);
    return true;
  } catch (const tracer::CuptiUnavailable& e) {
    store.add_diagnostic(std::nullopt, storage::Severity::Warning, "cupti",
                         std::string("GPU activity not traced: ") + e.what());
    cupti.reset();
    return false;
  }
}

void stop_gpu_tracing(tracer::CuptiTracer& cupti, storage::Store& store, int64_t run) noexcept {
  try {
    cupti.stop();
  } catch (const std::exception& e) {
    try {
      store.add_diagnostic(run, storage::Severity::Warning, "cupti", std::string("GPU activity incomplete: ") + e.what());
    } catch (...) {
    }
  }
}

// One cell: begin the run, let the engine run it, store its result and end the run.
bool run_cell(Engine& engine, const Cell& cell, storage::Store& store, tracer::HostTracer& tracer,
              std::unique_ptr<tracer::CuptiTracer>& cupti, Progress& progress) {
  const RunSetup setup = engine.setup(cell);
  tracer::RunInfo info;
  info.scenario = scenario_name(cell.scenario);
  info.policy = policy_label(cell);
  info.mode = compile::mode_name(cell.mode);
  info.fullgraph = cell.fullgraph;
  // A folder as an absolute path: readers find the model's files from it (outputs are kept off
  // them) wherever they run. A hub id stays as given.
  std::error_code ec;
  info.model = std::filesystem::is_directory(setup.model, ec) ? std::filesystem::absolute(setup.model).string() : setup.model;
  info.device_map_json = setup.device_map.dump();
  info.versions_json = setup.versions.dump();
  info.engine = engine.name();
  const int64_t run = tracer.begin_run(info);
  progress.begin(engine.name() + " " + cell_label(cell));
  RunContext ctx{tracer, store, run, [&progress](const CellProgress& p) { progress.tick(p); }};
  struct GpuRun {  // GPU activity of the engine's run: stopped when it returns or throws
    tracer::CuptiTracer* cupti;
    storage::Store& store;
    int64_t run;
    ~GpuRun() {
      if (cupti) stop_gpu_tracing(*cupti, store, run);
    }
  };
  RunResult r = [&] {
    GpuRun gpu{start_gpu_tracing(cupti, store, run) ? cupti.get() : nullptr, store, run};
    ctx.cupti = gpu.cupti;
    return engine.run(cell, ctx);
  }();
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
  progress.end(engine.name() + " " + cell_label(cell) + ": " + r.summary());
  return !failed;
}

}  // namespace

int run_matrix(const std::vector<Engine*>& engines, const Matrix& matrix, output::CaptureOutput& capture,
               const nlohmann::json& settings) {
  // The first scenario is prepared before the file is created: settings that do not fit the
  // model fail here and leave nothing behind.
  for (Engine* e : engines) e->prepare(matrix.scenarios.front());
  storage::Store& store = capture.open();
  // A path or prompt that is not UTF-8 (Linux allows any bytes in a folder name) is stored with
  // U+FFFD in its place: the settings are JSON text, and every report prints them.
  store.set_metadata(storage::kCaptureSettingsKey, settings.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  std::vector<hooks::AcceleratorInfo> accelerators;
  for (const Engine* e : engines)
    if (accelerators.empty()) accelerators = e->accelerators();
  add_devices(store, accelerators);
  std::unique_ptr<tracer::CuptiTracer> cupti = gpu_tracer(store, accelerators);
  tracer::HostTracer tracer(store);
  const size_t total = matrix.size(engines);
  Progress progress(total, ::isatty(STDERR_FILENO) != 0);
  int failures = 0;
  for (size_t i = 0; i < matrix.scenarios.size(); ++i)
    for (Engine* e : engines) {
      if (i > 0) e->prepare(matrix.scenarios[i]);
      for (const Cell& cell : matrix.cells(matrix.scenarios[i], e->runs_accelerate_trees()))
        failures += !run_cell(*e, cell, store, tracer, cupti, progress);
    }
  capture.commit();
  std::fprintf(stderr, "[hookscope] wrote %s (%zu runs)\n", capture.out().c_str(), total);
  std::fputs(output::open_hint(capture.out(), total).c_str(), stderr);
  return failures;
}

}  // namespace hs::engines
