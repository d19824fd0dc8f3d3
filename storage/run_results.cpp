#include "storage/run_results.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace hs::storage {

using json = nlohmann::json;

void check_run_results(const json& r, const CaptureReader& rd, int64_t run) {
  struct Kind {
    const char* shape;
    bool (*ok)(const json&);
    std::vector<const char*> keys;
    bool null_ok = true;  // null: not measured (the renderers read text fields as strings only)
  };
  static const std::vector<Kind> kinds = {
      {"a string", [](const json& v) { return v.is_string(); }, {"status", "error", "measurement", "scenario_note"}, false},
      {"a count (0 or more)", [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; },
       {"graph_count", "graph_break_count", "captured_regions", "disabled_scope_entries", "recompiles", "guard_recompiles",
        "frames_skipped", "recompile_limit_hits", "new_tokens", "logits_max_ulp", "warmup", "repeats"}},
      {"true or false", [](const json& v) { return v.is_boolean(); },
       {"argmax_match", "logits_identical", "params_on_meta_after"}},
      {"a number", [](const json& v) { return v.is_number(); }, {"logits_max_abs_diff", "compile_time_s"}},
      {"a spread object", [](const json& v) { return v.is_object() || v.is_number(); },
       {"prefill_ms", "decode_ms_per_token", "tokens_per_s", "eager_prefill_ms", "eager_decode_ms_per_token",
        "eager_tokens_per_s", "speedup_vs_eager"}},
      {"a list", [](const json& v) { return v.is_array(); }, {"break_reasons", "weight_devices", "diagnostics"}},
      {"an object", [](const json& v) { return v.is_object(); }, {"peak_memory_bytes", "model", "samples", "carried_log"}}};
  const auto wrong = [&](const std::string& field, const json& v, const char* shape, bool null_ok = true) {
    const std::string is = v.is_number() ? v.dump() : std::string(v.type_name());  // -5, or "string"
    return CaptureError(rd.path(), "capture " + rd.path().string() + ": run " + std::to_string(run) +
                                       ": RUNS.results field '" + field + "' is " + is + ", where hookscope writes " +
                                       shape + (null_ok ? " (or null)" : ""));
  };
  for (const Kind& k : kinds)
    for (const char* key : k.keys) {
      const auto it = r.find(key);
      if (it == r.end() || (it->is_null() && k.null_ok) || k.ok(*it)) continue;
      throw wrong(key, *it, k.shape, k.null_ok);
    }
  // A time, size or ratio: a number not below zero (-0.0 printed "-0.00") and at most `max`.
  const auto magnitude = [](const json& v, double max) {
    return v.is_number() && v.get<double>() >= 0 && !std::signbit(v.get<double>()) && v.get<double>() <= max;
  };
  // One level down: the members the renderers read as numbers or text.
  const auto members = [&](const char* key, const char* shape, bool (*ok)(const json&)) {
    const auto it = r.find(key);
    if (it == r.end() || !it->is_object()) return;
    for (const auto& [name, v] : it->items())
      if (!v.is_null() && !ok(v)) throw wrong(std::string(key) + "." + name, v, shape);
  };
  // A spread's statistics are times, rates or ratios (0 to 1e12: past 30 years in ms) and its
  // n a count of repeats; the renderers print them as they are.
  for (const char* spread : kinds[4].keys) {
    const auto it = r.find(spread);
    if (it == r.end() || !it->is_object()) continue;
    for (const auto& [name, v] : it->items()) {  // the renderers read each statistic as a number
      if (name == "n" && !(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX))
        throw wrong(std::string(spread) + ".n", v, "a count of repeats (0 to 2^31-1)", false);
      if (name != "n" && !magnitude(v, 1e12))
        throw wrong(std::string(spread) + "." + name, v, "a number from 0 to 1e12", false);
    }
  }
  members("peak_memory_bytes", "a count of bytes (0 or more)",
          [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; });
  members("samples", "a list of numbers", [](const json& v) {
    return v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); });
  });
  if (const auto m = r.find("model"); m != r.end() && m->is_object())
    for (const auto& [name, v] : m->items()) {
      const bool sized = name == "params" || name == "bytes";
      if (!v.is_null() && (sized ? !magnitude(v, 1e18) : !v.is_string() && (name == "id" || name == "dtype" ||
                                                                              name == "architecture" || name == "path")))
        throw wrong("model." + name, v, sized ? "a count from 0 to 1e18" : "a string");
    }
  if (const auto it = r.find("break_reasons"); it != r.end() && it->is_array())
    for (const auto& b : *it) {
      bool ok = b.is_object();
      for (const char* key : {"reason", "function", "module", "gb_code", "gb_type", "user_frame"})
        ok = ok && (!b.contains(key) || b[key].is_string() || b[key].is_null());
      // A count (explain's grouped reasons) is a positive integer.
      ok = ok && (!b.contains("count") || (b["count"].is_number_integer() && b["count"].get<int64_t>() > 0 &&
                                           b["count"].get<int64_t>() < (int64_t{1} << 31)));
      if (!ok)
        throw CaptureError(rd.path(), "capture " + rd.path().string() + ": run " + std::to_string(run) +
                                                   ": RUNS.results field 'break_reasons' holds " + b.dump().substr(0, 200) +
                                                   ", where hookscope writes objects with string reason/function/module/"
                                                   "gb_code/gb_type/user_frame and a positive integer count");
    }
}

}  // namespace hs::storage
