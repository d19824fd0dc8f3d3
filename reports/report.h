// The PR report: Markdown tables in the shape of the reference experiment (graph breaks, fullgraph, latency before/after), rendered
// from the report JSON (schema 2, see `hookscope report --help`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hs::reports {

/// Renders `report` (the `hookscope report --json` document) as Markdown a reviewer pastes
/// into a PR: the verdict first (render_verdict_markdown), then the setup (model, size,
/// devices — emulated ones marked), then per scenario fullgraph before/after (whole-hook / offload-only), prefill
/// argmax and offload checks, latency (prefill, decode ms/token, tokens/s: median and
/// interquartile range) with the speed-up against eager and its verdict, the peak resident bytes per
/// device (each run's `peak_memory_bytes`, max over a scenario's runs), graph breaks
/// before/after, and the break sites grouped by disabled function, the settings and the figures'
/// definitions. Runs that are `incomplete` or errored are listed as such.
/// Throws std::invalid_argument when a required field is missing (naming it).
std::string render_markdown(const nlohmann::json& report);

/// The report's opening: its title and the verdict blocks (report["verdicts"],
/// facts/verdicts.h) — per engine and scenario both policies' compiled decode and their ratio,
/// each against eager, breaks and fullgraph before → after, and the diagnosis naming its runs.
/// render_markdown is this followed by render_tables_markdown. With `run_links` each run a claim
/// rests on is written `[8](#run-8)`, a link to its row of the HTML runs table (report --html).
std::string render_verdict_markdown(const nlohmann::json& report, bool run_links);

/// Everything after the verdict: setup, the tables per engine, where the time goes, the
/// settings and the figures' definitions. Throws as render_markdown.
std::string render_tables_markdown(const nlohmann::json& report);

}  // namespace hs::reports
