#include "facts/catalogue.h"

#include <stdexcept>
#include <string>

namespace hs::facts {

const std::vector<Fact>& catalogue() {
  static const std::vector<Fact> facts = {
      // Dynamo's own figures (torch engine): what torch._dynamo.explain and Dynamo's compile
      // metrics print for the same run.
      {"graph_count", "graphs (Dynamo, one forward)", "count", "torch._dynamo.explain",
       "graphs torch._dynamo.explain captures from one compiled forward (the prefill) of the dispatched model"},
      {"graph_break_count", "graph breaks (Dynamo, one forward)", "count", "torch._dynamo.explain",
       "Dynamo's graph_break_count: torch._dynamo.explain's breaks in one compiled forward (graph_count - 1)"},
      {"break_reasons", "break reasons (Dynamo, one forward)", "count", "torch._dynamo.explain",
       "the break reasons torch._dynamo.explain lists for that forward, identical ones grouped with a count; their "
       "sum may differ from graph_break_count (a restarted trace lists a break again; a graph split without a "
       "user-visible reason lists none)"},
      {"recompiles", "recompiles", "count", "Dynamo's compilation metrics",
       "frame compiles Dynamo started because a guard of an earlier compile failed, over the compiled run "
       "(every generate of the cell; none for an imported log, whose recompile_reasons are log_recompiles)"},
      {"frames_skipped", "frames skipped", "count", "Dynamo's compilation metrics",
       "frames Dynamo gave up compiling, which then ran eagerly (e.g. a graph break in a loop, GB7000), over the "
       "compiled run"},
      {"recompile_limit_hits", "recompile_limit hits", "count", "Dynamo's compilation metrics",
       "frames that reached torch._dynamo.config.recompile_limit and run eagerly from then on (GB0039), over the "
       "compiled run"},
      {"hooked_modules", "hooked modules", "count", "accelerate",
       "modules accelerate attached a hook to (an _hf_hook) in the scenario"},
      // The compile log (TORCH_TRACE) of the run: every compile, not one forward.
      {"log_compiles", "compiles in the log", "count", "TORCH_TRACE log",
       "compile ids (and attempts) the run's TORCH_TRACE log records: every frame Dynamo compiled over the run"},
      {"log_graphs", "graphs in the log", "count", "TORCH_TRACE log",
       "graphs handed to the backend over every compile in the run's TORCH_TRACE log (recompiles for new shapes "
       "included)"},
      {"log_graph_break_records", "graph-break records in the log", "count", "TORCH_TRACE log",
       "dynamo_graph_break_reason records in the run's TORCH_TRACE log: each break Dynamo logged while compiling "
       "any frame of the run (every frame Dynamo compiled over the run: for a generate, prefill and every decode "
       "step; restarts and recompiles), as tlparse lists them"},
      {"log_graph_break_count", "graphs − 1 in the log", "count", "TORCH_TRACE log",
       "torch._dynamo.explain's formula applied to a whole log: its graphs − 1 over every compile; one forward's "
       "graph_break_count only when the log holds exactly one forward"},
      {"log_recompiles", "recompile_reasons in the log", "count", "TORCH_TRACE log",
       "recompile_reasons records in the run's TORCH_TRACE log (an imported log or a profiled program's): every "
       "compile a failed guard started, a recompile-limit failure included; not Dynamo's recompiles counter"},
      {"log_frames_skipped", "compiles skipped or failed in the log", "count", "TORCH_TRACE log",
       "compiles of the run's TORCH_TRACE log that ended skipped or failed, whose frame then ran eagerly (a "
       "recompile-limit failure included)"},
      {"log_recompile_limit_hits", "recompile-limit failures in the log", "count", "TORCH_TRACE log",
       "compiles of the run's TORCH_TRACE log that failed on recompile_limit"},
      // The LibTorch engine's figures: its own names, marked †.
      {"disabled_scope_entries", "disabled-scope entries†", "count", "LibTorch engine",
       "compiler-disabled scopes one compiled forward entered inside a captured region, where hookscope's port cuts "
       "its regions; not Dynamo's graph_break_count (Dynamo inlines, skips frames and stops at recompile_limit)"},
      {"captured_regions", "captured regions†", "count", "LibTorch engine",
       "regions the LibTorch engine cut one compiled forward into"},
      {"guard_recompiles", "recompiles†", "count", "LibTorch engine",
       "cache entries hookscope's emulated compiler added because the guards of its earlier ones failed, over the "
       "compiled run; its stand-in for Dynamo's recompiles, not Dynamo's count"},
      {"recorded_disabled_scope_entries", "disabled-scope entries over the run†", "count", "LibTorch engine",
       "compiler-disabled scopes entered inside a captured region over the whole run (the GRAPH_BREAKS table: "
       "prefill, every decode step, warm-ups and measured generates); every entry, in regions or not, is stats' "
       "disabled_entries (DISABLED_SCOPES)"},
      // Time and latency.
      {"decode_ms_per_token", "compiled decode", "ms/token", "measured",
       "median decode time per token of the measured generates: (end of the last step − end of the prefill) / "
       "(tokens − 1)"},
      {"eager_decode_ms_per_token", "eager decode", "ms/token", "measured",
       "the same, of the eager generates measured in alternation with the compiled ones in the same cell"},
      {"vs_eager", "vs eager", "ratio", "measured",
       "eager decode ÷ compiled decode (above 1: compiling is faster), the median of the per-round ratios"},
      {"policy_speedup", "after vs before, compiled", "ratio", "measured",
       "the PR's headline: the first policy's compiled decode ÷ the second's (whole-hook ÷ offload-only; above 1: "
       "the change makes the compiled model faster); when the two cells' eager drifted apart, decided on each one's "
       "speed-up over its own eager instead"},
      {"recording_overhead", "timeline's generate vs unrecorded", "ratio", "measured",
       "the wall time of the generate a torch engine run's timeline shows (recorded: torch.profiler and the hook "
       "ranges on) ÷ the median wall time of the run's measured, unrecorded generates; the timeline's durations are "
       "about this much longer than the latency tables' (facts/recording.h)"},
      {"hook_busy_ns", "hook time", "ns", "recorded events",
       "time inside at least one hook call (pre_forward, post_forward; nesting counted once), less the time Dynamo "
       "spent compiling frames inside them (hook_compile_ns): a run's stats.totals"},
      {"hook_compile_ns", "Dynamo compiling inside hooks", "ns", "recorded events",
       "time inside hook calls during which Dynamo was compiling a frame (torch.profiler's "
       "'_compile.compile_inner (dynamo_timed)' ranges: a hook whose frame Dynamo compiled on its first calls, or "
       "a compile the hook's work started); left out of hook time: a run's stats.totals"},
      {"disabled_busy_ns", "compiler-disabled time", "ns", "recorded events",
       "time inside at least one compiler-disabled scope (nesting counted once): a run's stats.totals"},
      {"transfers", "activation transfers", "count", "recorded events",
       "send_to_device copies that moved an activation's bytes (a run's recorded and stats.totals)"},
      {"transfer_bytes", "transfer bytes", "bytes", "recorded events", "bytes those transfers moved"},
      {"empty_transfer_calls", "calls that moved nothing", "count", "recorded events",
       "send_to_device calls whose tensors were already where they go (0 bytes): counted apart, not transfers"},
      {"weight_onloads", "weight onloads", "count", "recorded events",
       "offloaded weights materialised on their execution device before a forward (a run's recorded)"},
      {"weight_onload_bytes", "weight onload bytes", "bytes", "recorded events", "bytes those onloads materialised"},
      // A profiled program (`hookscope profile`): what it ran and its iterations.
      {"command", "program", "text", "hookscope profile", "the command line hookscope profile ran, once per policy"},
      {"exit_status", "exit status", "code", "hookscope profile",
       "the program's exit status (128 + the signal when a signal ended it)"},
      {"iterations", "iterations", "count", "recorded events",
       "what torch.profiler calls steps (ProfilerStep#N), facts/iterations.h: the trace's own ProfilerStep#N, else "
       "one per generation step, else one per top-level call of a model accelerate dispatched (the outermost range "
       "holding its hook work: a Torch-Compiled Region, a record_function of the program's; uncompiled, from the "
       "root module's pre_forward to its post_forward); the export writes one ProfilerStep#N each"},
      {"iteration_ms", "iteration time", "ms", "recorded events",
       "median (interquartile range) of the iterations' durations, within the capture range"},
      {"iteration_speedup", "after vs before, iterations", "ratio", "recorded events",
       "a profiled program's first policy's median iteration ÷ the second's (above 1: the second is faster), judged on "
       "their interquartile ranges; the two runs ran one after the other, not interleaved"},
  };
  return facts;
}

const Fact& fact(std::string_view key) {
  for (const Fact& f : catalogue())
    if (f.key == key) return f;
  throw std::out_of_range("hookscope has no fact named '" + std::string(key) + "'");
}

bool applies_to(const Fact& f, const std::set<std::string>& engines) {
  const auto any = [&](std::initializer_list<const char*> of) {
    for (const char* e : of)
      if (engines.count(e)) return true;
    return false;
  };
  if (f.source == "torch._dynamo.explain" || f.source == "Dynamo's compilation metrics") return any({"torch", "import"});
  if (f.source == "LibTorch engine") return any({"libtorch", "import"});
  if (f.source == "measured" || f.source == "accelerate") return any({"torch", "libtorch"});
  if (f.source == "hookscope profile") return any({"profile"});
  return true;
}

}  // namespace hs::facts
