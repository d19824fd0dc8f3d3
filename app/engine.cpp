#include "app/engine.h"

#include <algorithm>

namespace hs::app {

using nlohmann::json;

std::string policy_label(const Cell& c) {
  return c.accelerate_tree.empty() ? hooks::policy_name(c.policy) : c.accelerate_tree;
}

std::string cell_label(const Cell& c) {
  return scenario_name(c.scenario) + " " + policy_label(c) + " " + compile::mode_name(c.mode) +
         (c.fullgraph ? " fullgraph" : "");
}

LatencyStats LatencyStats::of(const std::vector<double>& samples_ms) {
  LatencyStats s;
  s.n = samples_ms.size();
  if (s.n == 0) return s;
  std::vector<double> v = samples_ms;
  std::sort(v.begin(), v.end());
  s.median = s.n % 2 ? v[s.n / 2] : (v[s.n / 2 - 1] + v[s.n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

namespace {

template <class T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

json RunResult::to_json(const Cell& cell) const {
  json reasons = json::array();
  for (const auto& b : break_reasons) reasons.push_back({{"reason", b.reason}, {"function", b.function}, {"module", b.module}});
  json r{{"scenario", scenario_name(cell.scenario)},
         {"policy", policy_label(cell)},
         {"mode", compile::mode_name(cell.mode)},
         {"fullgraph", cell.fullgraph},
         {"status", outcome == Outcome::Ok ? "ok" : "error"},
         {"error", outcome == Outcome::Ok ? json(nullptr) : json(error)},
         {"weight_devices", weight_devices},
         {"model", model},
         {"graph_count", or_null(graph_count)},
         {"graph_break_count", or_null(graph_break_count)},
         {"captured_regions", or_null(captured_regions)},
         {"disabled_scope_entries", or_null(disabled_scope_entries)},
         {"break_reasons", reasons},
         {"diagnostics", diagnostics},
         {"argmax_match", or_null(argmax_match)},
         {"logits_identical", logits ? json(logits->identical) : json(nullptr)},
         {"logits_max_abs_diff", logits ? json(logits->max_abs_diff) : json(nullptr)},
         {"logits_max_ulp", logits ? json(logits->max_ulp) : json(nullptr)},
         {"params_on_meta_after", or_null(params_on_meta_after)},
         {"latency_ms", latency_ms ? json{{"median", latency_ms->median},
                                          {"min", latency_ms->min},
                                          {"max", latency_ms->max},
                                          {"n", latency_ms->n}}
                                   : json(nullptr)},
         {"new_tokens", new_tokens},
         {"recompiles", or_null(recompiles)},
         {"peak_memory_bytes", peak_memory_bytes}};
  if (extra.is_object()) r.merge_patch(extra);
  return r;
}

std::string RunResult::summary() const {
  switch (outcome) {
    case Outcome::Ok:
      return "ok, " +
             (graph_break_count ? std::to_string(*graph_break_count) + " graph breaks, "
              : disabled_scope_entries ? std::to_string(*disabled_scope_entries) + " disabled-scope entries, "
                                       : std::string()) +
             std::to_string(static_cast<int>(latency_ms ? latency_ms->median : 0)) + " ms";
    case Outcome::Unsupported:
      if (!break_reasons.empty()) return "fullgraph raises at " + break_reasons.front().function;
      return "fullgraph raises: " + error.substr(0, error.find('\n'));
    case Outcome::Failed: return "error: " + error;
  }
  return "";
}

}  // namespace hs::app
