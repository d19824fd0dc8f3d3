#include "engines/engine.h"

#include <algorithm>
#include <cstdio>

namespace hs::engines {

using nlohmann::json;

std::string policy_label(const Cell& c) {
  return c.accelerate_tree.empty() ? hooks::policy_name(c.policy) : c.accelerate_tree;
}

std::string cell_label(const Cell& c) {
  return scenario_name(c.scenario) + " " + policy_label(c) + " " + compile::mode_name(c.mode) +
         (c.fullgraph ? " fullgraph" : "");
}

namespace {

template <class T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string fmt2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

json spread_or_null(const std::vector<double>& v) {
  return v.empty() ? json(nullptr) : measurement::Spread::of(v).to_json();
}

// The latency fields of the run result document (see RunResult::to_json).
void latency_json(const RunResult& r, json& out) {
  const auto& l = r.latency;
  const auto& e = r.eager_latency;
  out["prefill_ms"] = spread_or_null(l.prefill_ms);
  out["decode_ms_per_token"] = spread_or_null(l.decode_ms_per_token);
  out["tokens_per_s"] = spread_or_null(l.tokens_per_s());
  out["warmup"] = r.warmup;
  out["repeats"] = r.repeats;
  json samples{{"prefill_ms", l.prefill_ms}, {"decode_ms_per_token", l.decode_ms_per_token}};
  if (!e.empty()) {
    out["eager_prefill_ms"] = spread_or_null(e.prefill_ms);
    out["eager_decode_ms_per_token"] = spread_or_null(e.decode_ms_per_token);
    out["eager_tokens_per_s"] = spread_or_null(e.tokens_per_s());
    out["speedup_vs_eager"] = spread_or_null(measurement::ratios(e.decode_ms_per_token, l.decode_ms_per_token));
    samples["eager_prefill_ms"] = e.prefill_ms;
    samples["eager_decode_ms_per_token"] = e.decode_ms_per_token;
  }
  out["samples"] = samples;
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
         {"dtype", dtype.empty() ? json(nullptr) : json(dtype)},
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
         {"new_tokens", new_tokens},
         {"recompiles", or_null(recompiles)},
         {"guard_recompiles", or_null(guard_recompiles)},
         {"peak_memory_bytes", peak_memory_bytes}};
  latency_json(*this, r);
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
             (latency.decode_ms_per_token.empty()
                  ? std::string("no decode measured")
                  : fmt2(measurement::Spread::of(latency.decode_ms_per_token).median) + " ms/token");
    case Outcome::Unsupported:
      if (!break_reasons.empty()) return "fullgraph raises at " + break_reasons.front().function;
      return "fullgraph raises: " + error.substr(0, error.find('\n'));
    case Outcome::Failed: return "error: " + error;
  }
  return "";
}

}  // namespace hs::engines
