// The emulated compiler: hookscope's honest stand-in for torch.compile / Dynamo.
//
//   auto cf = hs::compile::compile(fn, {.mode = Mode::Default});
//   c10::IValue out = cf({input_ids});          // runs fn, traced as regions
//   std::cout << cf.explain().str();             // like torch._dynamo.explain
//
// A compiled call in mode `default` or `reduce-overhead` needs a hooks::Runtime installed on the
// calling thread (hooks/runtime.h): the scopes it observes, the devices its guards compare and
// the sink its regions and breaks are recorded to are the runtime's. What such a call does:
//  - Guards (compile/guards.h) pick the cache entry for the inputs' signature. A new signature
//    "compiles" a new entry; every entry after the first is a recompile, recorded with
//    Dynamo's guard-failure text. With `cache_size_limit` entries already cached, a new
//    signature runs eagerly (uncaptured) and the engine records Dynamo's recompile-limit
//    warning; under `fullgraph` it throws FailOnRecompileLimitHit instead, as Dynamo does.
//  - The call is cut into *regions*. Region 0 opens at call entry. Entering an outermost
//    `hooks::CompilerDisabledScope` (depth 1) while a region is open is a **graph break**:
//    the region ends, the scope's code runs eagerly, and leaving the scope opens the next
//    region. Nested scopes (depth > 1) run inside the outer one and count once.
//  - Ops: a thread-local `RecordFunction` callback (scope FUNCTION) counts the *top-level*
//    ATen ops the calling thread dispatches while a region is open — ops called by other ops
//    (aten::linear -> aten::addmm) are not counted again, the closest analogue of Dynamo's
//    `op_count` (call_function nodes of the FX graph). Ops inside disabled scopes are counted
//    separately (`ops_outside_regions`): they run eagerly between graphs.
//  - Counts, decided to match what torch._dynamo.explain reports:
//      region_count      = breaks + 1 (every region, empty ones included);
//      graph_count       = regions that ran >= 1 op (Dynamo never compiles an empty graph);
//      graph_break_count = number of breaks (Dynamo's counters["graph_break"]); it equals
//                          explain's `graph_count - 1` whenever no region is empty.
//  - Backends (compile/backend.h): `eager` runs regions as they are — on CPU that is
//    structure and timing only, no fusion, no speed-up, and every result says so.
//    `reduce-overhead` (or backend "cudagraphs") asks for CUDA graphs; with CPU inputs it
//    falls back to eager and records "skipping cudagraphs due to cpu device (args[0])".
//
// Mode `eager` captures nothing: the call runs plainly and only its wall time is recorded.
//
// Cost of capture: while capturing, every ATen call on the thread goes through the
// RecordFunction slow path and one callback; region and wall times include that overhead.
// So on CPU a captured call is never faster than eager — compare modes knowing this.
//
// Dynamo behaviour mirrored / not mirrored:
//  - break reason: Dynamo's gb_type "Skip calling `torch.compiler.disable()`d function"
//    (GB0098), with its explanation and hint texts; fullgraph raises `Unsupported` carrying
//    `format_graph_break_message`'s text.
//  - Dynamo raises Unsupported while *tracing*, before any of the frame runs. hookscope has no
//    tracer: it raises when the break is *reached*, so ops before it have already run. The
//    engine restores what it owns (scope observer, RecordFunction callback, the runtime's
//    execution-device stack — a hook whose pre_forward pushed a device but whose
//    post_forward never ran would otherwise leave it behind); it cannot undo other side effects
//    of the interrupted code. With accelerate's hooks the first break comes before any weight
//    is onloaded, so a later call starts clean.
//  - A call made while the thread is inside a compiler-disabled scope runs eagerly
//    (torch.compiler.disable is recursive); a compiled call made from inside another compiled
//    call on the same thread is inlined into the outer capture (as Dynamo inlines).
//  - Threads: a capture lives in the calling thread's runtime (its `scopes().observer`) and in
//    a thread-local ATen callback, so threads that each drive their own runtime capture at the
//    same time. What is shared is the compiled function (its copies share one cache, the
//    entries' region backends, the recompile log and the last result): its captured calls are
//    serialised by the function's own lock, held for the whole call. A runtime is driven by
//    one thread at a time; scope entries from another thread are not part of the capture.
//    The engine's observer replaces the runtime's `scopes().observer` only for the call and
//    forwards every entry and exit to the one it replaced (chained), then restores it.
//  - Frame ids ("0" of "0/1") number compiled functions in the order they first compile in a
//    runtime (`Runtime::next_compile_frame`), as Dynamo numbers frames at their first compile.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <torch/torch.h>

#include "compile/backend.h"
#include "compile/guards.h"

namespace hs::compile {

enum class Mode { Eager, Default, ReduceOverhead };

/// "eager", "default", "reduce-overhead".
std::string mode_name(Mode m);
/// Parses the names above; throws std::invalid_argument naming the value.
Mode parse_mode(const std::string& s);

struct CompileOptions {
  Mode mode = Mode::Default;
  /// Dynamo's fullgraph: the first graph break throws Unsupported.
  bool fullgraph = false;
  /// Region backend for mode `default`: "eager" or "cudagraphs". `reduce-overhead` always asks
  /// for "cudagraphs" (Inductor's cudagraph trees). Validated by `compile` (invalid_argument).
  std::string backend = "eager";
  /// Dynamo's `recompile_limit` (formerly `cache_size_limit`): cache entries per function.
  /// Must be >= 1 (`compile` throws std::invalid_argument otherwise).
  int cache_size_limit = 8;
  /// The function's name in messages ("Recompiling function forward", "function: 'forward'").
  std::string name = "fn";
  /// The GPU implementation of backend "cudagraphs" for this function's cache entries (see
  /// compile/backend.h); empty: none (this build has none), so cudagraphs requests fall back to
  /// the eager backend and say why.
  CudaGraphsBackendFactory cudagraphs_backend = {};
};

/// Dynamo's graph-break type for a call into a compiler-disabled function (registry GB0098).
inline constexpr std::string_view kDisabledCallBreak = "Skip calling `torch.compiler.disable()`d function";
inline constexpr std::string_view kDisabledCallHint = "Remove the `torch.compiler.disable` call";
inline constexpr std::string_view kDisabledCallDocs =
    "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0098.html";

/// One graph break: an outermost compiler-disabled scope entered inside a region.
struct BreakRecord {
  std::string reason;       ///< Dynamo's gb_type: kDisabledCallBreak
  std::string explanation;  ///< "Skip calling function `F` since it was wrapped with `torch.compiler.disable` (reason: None)"
  std::string function;     ///< the scope's name, e.g. "AlignDevicesHook.pre_forward"
  std::string module;       ///< FQN the scope named ("" = the root module)
  std::vector<std::string> module_stack;    ///< FQNs of the running modules, outermost first
  std::vector<std::string> module_classes;  ///< their class names, same order
  int64_t time_ns = 0;      ///< host steady clock (events::now_ns)
  int region_index = 0;     ///< the region this break ended

  /// Dynamo's `format_graph_break_message` text (gb_type, Explanation, Hint, Developer debug
  /// context "F (module M)", documentation link).
  std::string message() const;
  /// The "user stack": one line per running module, then the disabled function.
  std::vector<std::string> user_stack() const;
};

/// One region of one call.
struct RegionRecord {
  int index = 0;            ///< 0-based within the call
  int64_t start_ns = 0, end_ns = 0;
  int64_t op_count = 0;     ///< top-level ATen ops while the region was open
  std::string backend;      ///< "eager", "cudagraphs"
  int64_t duration_ns() const { return end_ns - start_ns; }
};

/// Why an entry was recompiled.
struct RecompileRecord {
  int entry = 0;            ///< the new cache entry's index
  std::string reason;       ///< the newest entry's guard failure, e.g. "tensor 'args[0]' size mismatch at index 1. expected 5, actual 1"
  /// Every failing entry, newest first, as Dynamo's recompiles log: "0/1: tensor ...".
  std::vector<std::string> guard_failures;
  /// Dynamo's recompiles log text for `function`:
  /// "Recompiling function fn\n    triggered by the following guard failure(s):\n    - 0/0: ...".
  std::string log(const std::string& function = "fn") const;
};

/// What one call of a compiled function did.
struct CompileResult {
  Mode mode = Mode::Default;
  bool fullgraph = false;
  std::string backend;      ///< backend that ran the regions ("" when nothing was captured)
  bool captured = false;    ///< regions were traced (false: eager mode or an eager fallback)
  bool compiled = false;    ///< this call created its cache entry
  int cache_entry = -1;     ///< entry used (-1: none)
  std::string frame;        ///< Dynamo's "[frame/entry]" id, e.g. "0/1" ("" when none)
  std::vector<RegionRecord> regions;
  std::vector<BreakRecord> breaks;
  int64_t ops_outside_regions = 0;  ///< top-level ATen ops run inside disabled scopes
  /// Fallbacks and skips that applied to this call, in Dynamo's / Inductor's words.
  std::vector<std::string> diagnostics;
  int64_t start_ns = 0, end_ns = 0;  ///< the whole call (host steady clock)
  bool failed = false;      ///< the call threw (error holds what())
  std::string error;

  int64_t wall_ns() const { return end_ns - start_ns; }
  int region_count() const { return static_cast<int>(regions.size()); }
  int graph_count() const;  ///< regions with >= 1 op
  int graph_break_count() const { return static_cast<int>(breaks.size()); }
  int64_t op_count() const;  ///< summed over regions
};

/// torch._dynamo.explain's output, for one call, plus hookscope's extras.
struct ExplainOutput {
  int graph_count = 0;
  int graph_break_count = 0;
  std::vector<BreakRecord> break_reasons;
  int64_t op_count = 0;
  std::vector<int64_t> ops_per_graph;  ///< op count of each non-empty region, in order
  int recompiles = 0;                  ///< of the function so far (cache entries - 1)
  std::vector<std::string> recompile_reasons;
  // hookscope extras
  int region_count = 0;
  int64_t ops_outside_regions = 0;
  std::string backend;
  std::vector<std::string> diagnostics;
  int64_t wall_ns = 0;

  /// As torch._dynamo.explain prints it ("Graph Count: N\nGraph Break Count: N\nOp Count: N\n
  /// Break Reasons:\n  Break Reason 1:\n    Reason: ...\n    User Stack:\n      ...\nOps per
  /// Graph:\n  Ops 1: N\n"), then hookscope's lines: recompiles, diagnostics and the backend
  /// note (CPU capture fuses nothing).
  std::string str() const;
};

/// torch._dynamo.exc.Unsupported: a graph break under fullgraph=true. what() is the graph-break
/// message followed by "from user code:" and the module stack.
class Unsupported : public std::runtime_error {
 public:
  explicit Unsupported(BreakRecord record);
  const BreakRecord& record() const { return record_; }

 private:
  BreakRecord record_;
};

/// torch._dynamo.exc.FailOnRecompileLimitHit: a new signature beyond cache_size_limit under
/// fullgraph=true. Thrown before the function runs.
class FailOnRecompileLimitHit : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The wrapped function: positional inputs -> output.
using Function = std::function<c10::IValue(const std::vector<c10::IValue>& inputs)>;

/// A compiled function (copies share one cache, as one torch.compile'd callable would).
/// Its captured calls (modes default and reduce-overhead), from any thread and any copy, are
/// serialised by the function's own lock; calls that capture nothing (mode eager, a call
/// inlined into an enclosing capture or made inside a disabled scope) take no lock, so make
/// those from one thread at a time.
class CompiledFunction {
 public:
  CompiledFunction(Function fn, CompileOptions options);

  /// Runs the function under the options (see the top of this header). Rethrows whatever the
  /// function throws, and Unsupported / FailOnRecompileLimitHit under fullgraph; the result of
  /// a failed call is still recorded (last_result().failed).
  c10::IValue operator()(const std::vector<c10::IValue>& inputs);
  /// operator() whose output must be a tensor (std::runtime_error naming the function if not).
  torch::Tensor call_tensor(const std::vector<c10::IValue>& inputs);

  const CompileOptions& options() const;
  /// The most recent call (a default CompileResult before the first call).
  const CompileResult& last_result() const;
  /// explain() of the most recent call.
  ExplainOutput explain() const;
  /// Number of cache entries / recompiles (entries - 1, never negative) so far.
  int cache_entries() const;
  int recompiles() const;
  const std::vector<RecompileRecord>& recompile_log() const;
  /// Every diagnostic emitted so far, once per occurrence (backend fallbacks at compile time,
  /// recompile-limit hits, eager runs inside disabled scopes).
  const std::vector<std::string>& diagnostics() const;
  /// Drops the cache, counters and diagnostics (torch._dynamo.reset for this function; its
  /// frame id stays). Must not be called from inside a call of this function (it waits for the
  /// function's lock).
  void reset();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// `torch.compile(fn, mode=..., fullgraph=..., backend=...)`. Throws std::invalid_argument for
/// an unknown backend or cache_size_limit < 1.
CompiledFunction compile(Function fn, CompileOptions options = {});

/// `torch._dynamo.explain(fn)(*inputs)`: compiles `fn` afresh, runs it once on `inputs` and
/// returns that call's explain(). As Dynamo's explain, it collects breaks instead of raising:
/// `fullgraph` is ignored, and mode `eager` is treated as `default`. Rethrows what fn throws.
ExplainOutput explain(Function fn, const std::vector<c10::IValue>& inputs, CompileOptions options = {});

}  // namespace hs::compile
