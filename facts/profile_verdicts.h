// The verdict of a profiled program (`hookscope profile`, engine "profile"): the program ran once
// per policy, so there is no generate to time against eager; its block reads what the runs
// recorded — Dynamo's compile log (graphs, graphs − 1, break records, recompile_reasons), the
// hook time, the weight onloads, the iterations (facts/iterations.h) — and what the program did
// (its command and exit status). facts::scenario_verdicts appends these blocks after the
// generate ones and facts::diagnosis writes their claims, so every view renders them as it
// renders the others.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "facts/verdicts.h"

namespace hs::facts {

/// A profiled run's command (RUNS.results' "command", an array of words) as a shell would need
/// it typed (storage::shell_command: `python -c 'print(1)'`); "" where the run has none. Every
/// view that shows the command shows this.
std::string program_command(const nlohmann::json& run);

/// A size as a profiled program's block writes it: "520.0 KiB" (binary units), "12 B".
std::string bytes_text(int64_t bytes);

/// One block per program (RUNS.scenario: the script's file name) with a run under at least one
/// policy, the first two policies in capture order as before / after:
///   {"engine": "profile", "scenario", "scenario_note": null, "mode": "",
///    "before"/"after" (after null with one policy): {"policy", "run", "status", "command" (the
///      words joined by spaces, or null), "exit_status", "breaks" (breaks_text), "log_graphs",
///      "log_graph_break_count", "log_graph_break_records", "log_compiles", "log_recompiles",
///      "log_frames_skipped", "log_recompile_limit_hits", "break_site": {"function", "gb_code",
///      "count"} | null (the log's most frequent break naming a function), "hook_busy_ns",
///      "hook_calls", "hook_compile_ns", "weight_onloads", "weight_onload_bytes", "iterations", "iteration_source",
///      "iteration_ms" (median) — each null where the run has none},
///    "iteration_speedup": {"ratio" (before ÷ after median iteration), "verdict", "why"} | null,
///    "policy_speedup": null,
///    "left_out": [{"run", "policy"}] (the program's runs not compared: a policy's later runs),
///    "label": the runs' --label, or null where they have none (RUNS.label "NAME · POLICY"),
///    "against_hypothesis": [{"kind": "more_breaks", "before", "after"} (graphs − 1 in the log) |
///      {"kind": "slower_iterations"}]}.
/// `report` is a report document whose profile runs carry their break facts, "stats" (totals),
/// "recorded" and "iterations" (reports/report_json.cpp).
nlohmann::json profile_verdicts(const nlohmann::json& report);

/// The claims of a profiled program's block: graphs − 1 before → after, the iterations' time,
/// each policy's log (where it broke, recompiles) and hook work, the program's exit status, and
/// what went against the hypothesis.
std::vector<Claim> profile_diagnosis(const nlohmann::json& verdict, const Markup& markup);

}  // namespace hs::facts
