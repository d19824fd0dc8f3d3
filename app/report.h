// The PR report: Markdown tables in the shape of the reference experiment (graph breaks, fullgraph, latency before/after), rendered
// from the report JSON (schema 2, see `hookscope report --help`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hs::app {

/// Renders `report` (the `hookscope report --json` document) as Markdown a reviewer pastes
/// into a PR: the setup (model, size, devices — emulated ones marked) and the capture's
/// settings, then per scenario fullgraph before/after (whole-hook / offload-only), prefill
/// argmax and offload checks, latency (prefill, decode ms/token, tokens/s: median and
/// interquartile range) with the speed-up against eager and its verdict, the peak resident bytes per
/// device (each run's `peak_memory_bytes`, max over a scenario's runs), graph breaks
/// before/after, and the break sites grouped by disabled function. Runs that are `incomplete` or
/// errored are listed as such.
/// Throws std::invalid_argument when a required field is missing (naming it).
std::string render_markdown(const nlohmann::json& report);

}  // namespace hs::app
