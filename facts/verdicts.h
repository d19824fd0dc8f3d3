// The verdict a reviewer needs first: per engine and scenario, the two policies' compiled
// decode and their ratio (the PR's headline), each against eager, breaks before → after,
// fullgraph before → after, and sentences of diagnosis built from those facts, each naming the
// runs that are its evidence. Report (Markdown, HTML, JSON) and the viewer render the same
// blocks; only the markup differs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hs::facts {

/// The verdict blocks of a report document (`hookscope report --json`: its runs carry the break
/// facts and each compiled run's "speedup" {vs_eager, verdict, why}). One block per engine
/// (torch first) and scenario that has a compiled mode ("default" preferred, else the first
/// compiled mode) under at least two policies; "before" is the first policy in capture order
/// (whole-hook, accelerate today), "after" the second (offload-only, the proposal):
///   {"engine", "scenario", "scenario_note" (how the scenario differs from its name on this
///    machine, as the engine noted it, or null), "mode",
///    "before"/"after": {"policy", "run", "decode_ms_per_token" (median, null if unmeasured),
///      "eager_decode_ms_per_token", "vs_eager", "verdict" (faster/slower/within noise/not
///      judged, null), "breaks" (breaks_text), "graph_break_count", "disabled_scope_entries",
///      "frames_skipped", "recompiles", "recompile_limit_hits", "hooked_modules",
///      "break_site": {"function", "gb_code", "count"} | null,
///      "fullgraph": "works" | "raises" | null, "fullgraph_run", "fullgraph_at" (function) | null},
///    "policy_speedup": {"ratio" (before ÷ after compiled decode; > 1: after is faster),
///      "judged_by": "absolute" (the two compiled decodes' spreads) | "speedup_vs_eager" (the
///      cells' eager drifted apart beyond their spread: each compiled run against its own
///      eager, per round), "normalized_ratio" (after's speed-up over eager ÷ before's, or null),
///      "verdict", "why"} | null,
///    "against_hypothesis": what went against "after has fewer breaks, compiles faster and works
///      with fullgraph": [{"kind": "more_breaks", "before", "after"} | {"kind":
///      "slower_compiled"} | {"kind": "fullgraph_regressed"}]}.
/// Then one block per profiled program (engine "profile", facts/profile_verdicts.h).
nlohmann::json scenario_verdicts(const nlohmann::json& report);

/// How a view marks up the names and run references in a diagnosis.
struct Markup {
  std::function<std::string(const std::string&)> code;  ///< a name from the capture (function, policy)
  std::function<std::string(const std::string&)> text;  ///< other text from the capture (a verdict's why)
};

/// One claim of a diagnosis: a sentence and the runs that are its evidence.
struct Claim {
  std::string text;
  std::vector<int64_t> runs;
};

/// The diagnosis of a verdict block, one claim per fact: the headline ratio, each policy's
/// compiled decode against eager with why (its breaks, frames skipped, recompile-limit hits),
/// fullgraph before → after, and what went against the hypothesis. Names go through
/// `markup.code`, a measurement's why through `markup.text`; hookscope's own words are plain
/// ASCII and typography (→ × ÷), safe in Markdown and HTML alike.
/// A profiled program's block gets profile_diagnosis' claims.
std::vector<Claim> diagnosis(const nlohmann::json& verdict, const Markup& markup);

}  // namespace hs::facts
