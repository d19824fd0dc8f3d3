#include "facts/recording.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace hs::facts {

std::optional<RecordingOverhead> recording_overhead(const nlohmann::json& results) {
  if (!results.is_object()) return std::nullopt;
  const auto profiled = results.find("profiled_run");
  const auto measured = results.find("generate_ms");
  if (profiled == results.end() || !profiled->is_object() || measured == results.end() || !measured->is_array())
    return std::nullopt;
  const auto p = profiled->find("generate_ms");
  if (p == profiled->end() || !p->is_number()) return std::nullopt;
  std::vector<double> v;
  for (const auto& m : *measured)
    if (m.is_number() && std::isfinite(m.get<double>()) && m.get<double>() > 0) v.push_back(m.get<double>());
  const double profiled_ms = p->get<double>();
  if (v.empty() || !std::isfinite(profiled_ms) || profiled_ms <= 0) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return RecordingOverhead{profiled_ms, median, static_cast<int64_t>(n), profiled_ms / median};
}

std::string recording_overhead_text(const RecordingOverhead& o) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f×", o.ratio);
  return buf;
}

std::string recording_overhead_detail(const RecordingOverhead& o) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.2f ms recorded ÷ %.2f ms, the median of %lld unrecorded generate%s", o.profiled_ms,
                o.unrecorded_median_ms, static_cast<long long>(o.unrecorded_n), o.unrecorded_n == 1 ? "" : "s");
  return buf;
}

}  // namespace hs::facts
