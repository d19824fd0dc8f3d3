#include "compile/compile.h"

#include <ATen/record_function.h>

#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "hooks/compiler_disable.h"
#include "hooks/runtime.h"
#include "models/module.h"
#include "tracer/events.h"

namespace hs::compile {

using events::now_ns;
using hooks::DeviceId;

// ------------------------------------------------------------------ modes

std::string mode_name(Mode m) {
  switch (m) {
    case Mode::Eager: return "eager";
    case Mode::Default: return "default";
    case Mode::ReduceOverhead: return "reduce-overhead";
  }
  return "default";
}

Mode parse_mode(const std::string& s) {
  if (s == "eager") return Mode::Eager;
  if (s == "default") return Mode::Default;
  if (s == "reduce-overhead") return Mode::ReduceOverhead;
  throw std::invalid_argument("unknown compile mode '" + s + "' (expected eager, default or reduce-overhead)");
}

// ------------------------------------------------------------------ records

namespace {

std::string module_label(const std::string& fqn) { return fqn.empty() ? "<root>" : fqn; }

std::string join_stack(const std::vector<std::string>& fqns) {
  std::string s;
  for (size_t i = 0; i < fqns.size(); ++i) s += (i ? " > " : "") + module_label(fqns[i]);
  return s;
}

}  // namespace

std::string BreakRecord::message() const {
  // torch/_dynamo/exc.py::format_graph_break_message (one-line fields need no re-indenting).
  std::string m = reason;
  m += "\n  Explanation: " + explanation;
  m += "\n  Hint: " + std::string(kDisabledCallHint);
  m += "\n\n  Developer debug context: " + function + " (module " + module_label(module) + ")";
  m += "\n\n For more details about this graph break, please visit: " + std::string(kDisabledCallDocs);
  return m;
}

std::vector<std::string> BreakRecord::user_stack() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < module_stack.size(); ++i)
    out.push_back("<module " + module_label(module_stack[i]) +
                  (i < module_classes.size() ? " (" + module_classes[i] + ")" : std::string()) + ">");
  out.push_back("<disabled function " + function + " on " + module_label(module) + ">");
  return out;
}

int CompileResult::graph_count() const {
  int n = 0;
  for (const auto& r : regions) n += r.op_count > 0;
  return n;
}

int64_t CompileResult::op_count() const {
  int64_t n = 0;
  for (const auto& r : regions) n += r.op_count;
  return n;
}

std::string RecompileRecord::log(const std::string& function) const {
  std::string s = "Recompiling function " + function + "\n    triggered by the following guard failure(s):";
  for (const auto& f : guard_failures) s += "\n    - " + f;
  return s;
}

namespace {
std::string unsupported_text(const BreakRecord& r) {
  std::string s = r.message() + "\n\nfrom user code:";
  for (const auto& line : r.user_stack()) s += "\n   " + line;
  return s;
}
}  // namespace

Unsupported::Unsupported(BreakRecord record)
    : std::runtime_error(unsupported_text(record)), record_(std::move(record)) {}

std::string ExplainOutput::str() const {
  std::ostringstream o;
  o << "Graph Count: " << graph_count << "\n";
  o << "Graph Break Count: " << graph_break_count << "\n";
  o << "Op Count: " << op_count << "\n";
  o << "Break Reasons:\n";
  for (size_t i = 0; i < break_reasons.size(); ++i) {
    const auto& b = break_reasons[i];
    o << "  Break Reason " << i + 1 << ":\n";
    o << "    Reason: " << b.reason << "\n";
    o << "    User Stack:\n";
    for (const auto& f : b.user_stack()) o << "      " << f << "\n";
  }
  o << "Ops per Graph:\n";
  for (size_t i = 0; i < ops_per_graph.size(); ++i) o << "  Ops " << i + 1 << ": " << ops_per_graph[i] << "\n";
  // hookscope's lines (not in Dynamo's output).
  o << "Regions: " << region_count << " (empty regions are not graphs)\n";
  o << "Ops outside graphs (compiler-disabled scopes, run eagerly): " << ops_outside_regions << "\n";
  o << "Recompiles: " << recompiles << "\n";
  for (size_t i = 0; i < recompile_reasons.size(); ++i)
    o << "  Recompile Reason " << i + 1 << ": " << recompile_reasons[i] << "\n";
  if (!diagnostics.empty()) {
    o << "Diagnostics:\n";
    for (const auto& d : diagnostics) o << "  " << d << "\n";
  }
  if (backend == "eager")
    o << "Backend: " << kEagerBackendNote << "\n";
  else if (backend.empty())
    o << "Backend: none (nothing was captured)\n";
  else
    o << "Backend: " << backend << "\n";
  o << "Wall time: " << wall_ns << " ns\n";
  return o.str();
}

// ------------------------------------------------------------------ the capture of one call

namespace {

// Receives scope entries/exits and ATen op starts for one compiled call; writes into `result`.
// While the call runs it is the runtime's scope observer, which is how the ATen callbacks
// (plain function pointers) find it.
class Capture final : public hooks::DisabledScopeObserver {
 public:
  Capture(hooks::Runtime& runtime, CompileResult& result, RegionBackend& backend, bool fullgraph,
          hooks::DisabledScopeObserver* previous)
      : runtime_(runtime),
        result_(result),
        backend_(backend),
        fullgraph_(fullgraph),
        previous_(previous),
        thread_(std::this_thread::get_id()) {}

  void open_region(int64_t t) {
    open_ = true;
    start_ = t;
    ops_ = 0;
    backend_.begin_region(static_cast<int>(result_.regions.size()));
  }

  void close_region(int64_t t) noexcept {
    if (!open_) return;
    open_ = false;
    RegionRecord r;
    r.index = static_cast<int>(result_.regions.size());
    r.start_ns = start_;
    r.end_ns = t;
    r.op_count = ops_;
    r.backend = std::string(backend_.name());
    try {
      result_.regions.push_back(r);
    } catch (...) {
      return;  // out of memory: drop the record rather than throw from here
    }
    backend_.end_region(r);
    if (auto* s = runtime_.sink()) s->region({r.index, r.op_count, backend_.name(), {}, r.start_ns, r.end_ns});
  }

  void on_enter(std::string_view function, std::string_view module, int depth) override {
    record_enter(function, module, depth);
    // The observer installed before the capture keeps receiving every scope that opens.
    if (previous_) previous_->on_enter(function, module, depth);
  }

  void on_exit(std::string_view function, std::string_view module, int depth) override {
    if (std::this_thread::get_id() == thread_ && depth == 1 && !open_) open_region(now_ns());
    if (previous_) previous_->on_exit(function, module, depth);
  }

  // An ATen op started / ended on the capturing thread; only top-level ones count.
  void op_started() {
    if (op_depth_++ > 0) return;
    if (runtime_.scopes().depth > 0)
      ++result_.ops_outside_regions;
    else if (open_)
      ++ops_;
  }
  void op_ended() {
    if (op_depth_ > 0) --op_depth_;
  }

 private:
  void record_enter(std::string_view function, std::string_view module, int depth) {
    // A runtime is driven by one thread at a time: a scope another thread opens in it is not
    // part of this capture.
    if (std::this_thread::get_id() != thread_ || depth != 1 || !open_) return;
    const int64_t t = now_ns();
    BreakRecord b;
    b.reason = std::string(kDisabledCallBreak);
    b.explanation = "Skip calling function `" + std::string(function) +
                    "` since it was wrapped with `torch.compiler.disable` (reason: None)";
    b.function = std::string(function);
    b.module = std::string(module);
    for (const auto* m : runtime_.call_stack()) {
      b.module_stack.push_back(m->fqn());
      b.module_classes.push_back(m->class_name());
    }
    b.time_ns = t;
    b.region_index = static_cast<int>(result_.regions.size());
    close_region(t);
    result_.breaks.push_back(b);
    if (auto* s = runtime_.sink()) {
      // The reason, function and module as the scope holds them (stable addresses: the tracer's
      // string cache hits); the joined stack is made per event.
      const std::string stack = join_stack(b.module_stack);
      s->graph_break({kDisabledCallBreak, function, module, stack, t});
    }
    // Dynamo raises Unsupported from the break; CompilerDisabledScope's constructor rethrows
    // it with its depth already undone, so the scope never opens.
    if (fullgraph_) throw Unsupported(std::move(b));
  }

  hooks::Runtime& runtime_;
  CompileResult& result_;
  RegionBackend& backend_;
  bool fullgraph_;
  hooks::DisabledScopeObserver* previous_;
  std::thread::id thread_;
  bool open_ = false;
  int64_t start_ = 0;
  int64_t ops_ = 0;
  int op_depth_ = 0;  // RecordFunction nesting
};

// The capture in progress in `runtime` (its scope observer, see Capture), or nullptr.
Capture* capture_in(hooks::Runtime* runtime) {
  return runtime ? dynamic_cast<Capture*>(runtime->scopes().observer) : nullptr;
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction&) {
  if (Capture* c = capture_in(hooks::Runtime::current_or_null())) c->op_started();
  return nullptr;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext*) {
  if (Capture* c = capture_in(hooks::Runtime::current_or_null())) c->op_ended();
}

// Installs the capture as the runtime's scope observer, with the ATen callback, for the
// duration of a call, and removes both again, also on unwinding.
class CaptureInstall {
 public:
  CaptureInstall(hooks::Runtime& runtime, Capture& c) : scopes_(runtime.scopes()), previous_(scopes_.observer) {
    scopes_.observer = &c;
    try {
      handle_ = at::addThreadLocalCallback(
          at::RecordFunctionCallback(on_op_start, on_op_end).scopes({at::RecordScope::FUNCTION}));
    } catch (...) {
      scopes_.observer = previous_;
      throw;
    }
  }
  ~CaptureInstall() {
    at::removeCallback(handle_);
    scopes_.observer = previous_;
  }
  CaptureInstall(const CaptureInstall&) = delete;
  CaptureInstall& operator=(const CaptureInstall&) = delete;

 private:
  hooks::DisabledScopes& scopes_;
  hooks::DisabledScopeObserver* previous_;
  at::CallbackHandle handle_ = 0;
};

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

// ------------------------------------------------------------------ CompiledFunction

struct CompiledFunction::State {
  struct Entry {
    InputSignature signature;
    std::shared_ptr<RegionBackend> backend;
    std::vector<std::string> backend_diagnostics;
  };
  // Held for the whole of a captured call (and by reset()): the copies of one compiled
  // function, on any thread, share what follows, including each entry's region backend.
  std::mutex mu;
  Function fn;
  CompileOptions options;
  int frame_id = -1;  // from the runtime of the first compile (Runtime::next_compile_frame)
  std::vector<Entry> entries;
  std::vector<RecompileRecord> recompiles;
  std::vector<std::string> diagnostics;
  CompileResult last;

  std::string frame(int entry) const { return std::to_string(frame_id) + "/" + std::to_string(entry); }
  std::string requested_backend() const {
    return options.mode == Mode::ReduceOverhead ? std::string("cudagraphs") : options.backend;
  }

  // Guards, newest entry first as Dynamo's cache lookup: the entry whose guards `sig` passes, or
  // -1, with each failed entry's "frame: reason" (newest first) in `failures`.
  int find_entry(const InputSignature& sig, std::vector<std::string>& failures) const {
    for (int i = static_cast<int>(entries.size()) - 1; i >= 0; --i) {
      auto f = guard_failure(entries[i].signature, sig);
      if (!f) return i;
      failures.push_back(frame(i) + ": " + *f);
    }
    return -1;
  }

  // A new cache entry for `sig` (its backend chosen for `inputs`); past the first, a recompile
  // whose reason is the newest entry's guard failure.
  int add_entry(hooks::Runtime& rt, const InputSignature& sig, const std::vector<c10::IValue>& inputs,
                const std::vector<std::string>& failures) {
    if (frame_id < 0) frame_id = rt.next_compile_frame();
    BackendChoice choice = select_backend(requested_backend(), inputs, options.cudagraphs_backend);
    entries.push_back({sig, choice.backend, choice.diagnostics});
    for (const auto& d : choice.diagnostics) diagnostics.push_back(d);
    const int entry = static_cast<int>(entries.size()) - 1;
    if (entry > 0) {
      RecompileRecord rec;
      rec.entry = entry;
      const std::string& newest = failures.front();
      rec.reason = newest.substr(newest.find(": ") + 2);
      rec.guard_failures = failures;
      recompiles.push_back(std::move(rec));
    }
    return entry;
  }

  // Dynamo's words when a frame reaches `recompile_limit` (cache_size_limit): the error under
  // fullgraph=True, else the warning (the call then runs eagerly).
  std::string recompile_limit_message(const std::string& last_reason) const {
    const std::string limit = std::to_string(options.cache_size_limit);
    if (options.fullgraph)
      return "recompile_limit reached with fullgraph=True. Excessive recompilations can degrade performance due to "
             "the compilation overhead of each recompilation. To monitor recompilations, enable "
             "TORCH_LOGS=recompiles. If recompilations are expected, consider increasing "
             "torch._dynamo.config.cache_size_limit to an appropriate value. (hookscope: cache_size_limit " +
             limit + ", last reason: " + last_reason + ")";
    return "torch._dynamo hit config.recompile_limit (" + limit + ")\n   function: '" + options.name +
           "'\n   last reason: " + last_reason + "\n   (hookscope: this call runs eagerly, uncaptured)";
  }
};

CompiledFunction::CompiledFunction(Function fn, CompileOptions options) : state_(std::make_shared<State>()) {
  if (!fn) throw std::invalid_argument("compile: empty function");
  if (options.backend != "eager" && options.backend != "cudagraphs")
    throw std::invalid_argument("unknown compile backend '" + options.backend + "' (expected eager or cudagraphs)");
  if (options.cache_size_limit < 1)
    throw std::invalid_argument("cache_size_limit must be >= 1, got " + std::to_string(options.cache_size_limit));
  state_->fn = std::move(fn);
  state_->options = std::move(options);
}

c10::IValue CompiledFunction::operator()(const std::vector<c10::IValue>& inputs) {
  State& st = *state_;
  CompileResult r;
  r.mode = st.options.mode;
  r.fullgraph = st.options.fullgraph;
  r.start_ns = now_ns();

  // Runs the function uncaptured, recording the result either way.
  auto run_plain = [&]() -> c10::IValue {
    try {
      c10::IValue out = st.fn(inputs);
      r.end_ns = now_ns();
      st.last = r;
      return out;
    } catch (...) {
      r.end_ns = now_ns();
      r.failed = true;
      r.error = what_of(std::current_exception());
      st.last = r;
      throw;
    }
  };

  if (st.options.mode == Mode::Eager) return run_plain();
  hooks::Runtime& rt = hooks::Runtime::current();
  if (capture_in(&rt)) {
    r.diagnostics.push_back("inlined into the enclosing compiled call (its ops and graph breaks count there)");
    return run_plain();
  }
  if (rt.scopes().depth > 0) {
    r.diagnostics.push_back(
        "ran eagerly: called inside a compiler-disabled scope (torch.compiler.disable is recursive)");
    return run_plain();
  }

  std::lock_guard<std::mutex> lock(st.mu);

  const InputSignature sig = signature_of(inputs);
  std::vector<std::string> failures;
  int entry = st.find_entry(sig, failures);
  const bool created = entry < 0;
  if (created) {
    if (static_cast<int>(st.entries.size()) >= st.options.cache_size_limit) {
      const std::string message = st.recompile_limit_message(failures.front());
      if (st.options.fullgraph) {
        r.end_ns = now_ns();
        r.failed = true;
        r.error = message;
        st.last = r;
        throw FailOnRecompileLimitHit(r.error);
      }
      r.diagnostics.push_back(message);
      st.diagnostics.push_back(message);
      return run_plain();
    }
    entry = st.add_entry(rt, sig, inputs, failures);
  }

  State::Entry& e = st.entries[entry];
  std::shared_ptr<RegionBackend> backend = e.backend;  // keeps it alive if reset() runs inside fn
  r.compiled = created;
  r.cache_entry = entry;
  r.frame = st.frame(entry);
  r.backend = std::string(backend->name());
  r.captured = true;
  for (const auto& d : e.backend_diagnostics) r.diagnostics.push_back(d);

  const std::vector<DeviceId> exec_stack = rt.devices().execution_stack();
  Capture capture(rt, r, *backend, st.options.fullgraph, rt.scopes().observer);
  c10::IValue out;
  std::exception_ptr error;
  {
    CaptureInstall install(rt, capture);
    capture.open_region(now_ns());
    try {
      out = st.fn(inputs);
    } catch (...) {
      error = std::current_exception();
    }
    capture.close_region(now_ns());
  }
  r.end_ns = now_ns();
  if (error) {
    // Hooks whose pre_forward ran but whose post_forward never will may have left execution
    // devices pushed; put the stack back as it was at entry.
    rt.devices().restore_execution_stack(exec_stack);
    r.failed = true;
    r.error = what_of(error);
    if (created) {
      // Dynamo caches nothing for a frame whose compilation failed.
      st.entries.pop_back();
      if (!st.recompiles.empty() && st.recompiles.back().entry == entry) st.recompiles.pop_back();
    }
    st.last = std::move(r);
    std::rethrow_exception(error);
  }
  st.last = std::move(r);
  return out;
}

torch::Tensor CompiledFunction::call_tensor(const std::vector<c10::IValue>& inputs) {
  c10::IValue out = (*this)(inputs);
  if (!out.isTensor())
    throw std::runtime_error("compiled function '" + state_->options.name + "' returned a " + out.tagKind() +
                             ", not a tensor");
  return out.toTensor();
}

const CompileOptions& CompiledFunction::options() const { return state_->options; }
const CompileResult& CompiledFunction::last_result() const { return state_->last; }
int CompiledFunction::cache_entries() const { return static_cast<int>(state_->entries.size()); }
int CompiledFunction::recompiles() const { return static_cast<int>(state_->recompiles.size()); }
const std::vector<RecompileRecord>& CompiledFunction::recompile_log() const { return state_->recompiles; }
const std::vector<std::string>& CompiledFunction::diagnostics() const { return state_->diagnostics; }

void CompiledFunction::reset() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->entries.clear();
  state_->recompiles.clear();
  state_->diagnostics.clear();
  state_->last = CompileResult{};
}

ExplainOutput CompiledFunction::explain() const {
  const CompileResult& r = state_->last;
  ExplainOutput e;
  e.graph_count = r.graph_count();
  e.graph_break_count = r.graph_break_count();
  e.break_reasons = r.breaks;
  e.op_count = r.op_count();
  for (const auto& reg : r.regions)
    if (reg.op_count > 0) e.ops_per_graph.push_back(reg.op_count);
  e.recompiles = recompiles();
  for (const auto& rec : state_->recompiles) e.recompile_reasons.push_back(rec.reason);
  e.region_count = r.region_count();
  e.ops_outside_regions = r.ops_outside_regions;
  e.backend = r.backend;
  e.diagnostics = r.diagnostics;
  e.wall_ns = r.wall_ns();
  return e;
}

CompiledFunction compile(Function fn, CompileOptions options) { return CompiledFunction(std::move(fn), std::move(options)); }

ExplainOutput explain(Function fn, const std::vector<c10::IValue>& inputs, CompileOptions options) {
  options.fullgraph = false;
  if (options.mode == Mode::Eager) options.mode = Mode::Default;
  CompiledFunction cf(std::move(fn), std::move(options));
  cf(inputs);
  return cf.explain();
}

}  // namespace hs::compile
