// Robust summaries of repeated timings, and the latency samples one run keeps.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace hs::measurement {

/// The distribution of n measurements, in their unit (ms, tokens/s, or a ratio): the median,
/// the extremes, the quartiles (linear interpolation between order statistics, as numpy's
/// default), the interquartile range q3 − q1 and the median absolute deviation
/// median(|x − median|) (unscaled).
struct Spread {
  double median = 0, min = 0, max = 0, q1 = 0, q3 = 0, iqr = 0, mad = 0;
  size_t n = 0;

  /// Throws std::invalid_argument for no samples or a non-finite one.
  static Spread of(std::vector<double> samples);
  /// {"median", "min", "max", "q1", "q3", "iqr", "mad", "n"}.
  nlohmann::json to_json() const;
  /// The object to_json writes; older documents with only median/min/max/n give q1 = min,
  /// q3 = max. std::nullopt for null or a non-object, or without a numeric median.
  static std::optional<Spread> from_json(const nlohmann::json& j);
};

/// The timings of the measured generates of one side of a run, one entry per generate, in the
/// order they ran (warm-ups excluded): `prefill_ms` = the prefill forward (step 0),
/// `decode_ms_per_token` = (end of the last step − end of the prefill) / (steps − 1), absent for
/// a one-token generate.
struct LatencySamples {
  std::vector<double> prefill_ms, decode_ms_per_token;

  bool empty() const { return prefill_ms.empty(); }
  /// The decode rate per generate: 1000 / decode_ms_per_token.
  std::vector<double> tokens_per_s() const;
};

/// Element-wise a[i] / b[i] of paired samples (the interleaved eager and compiled generates of
/// one repeat): the speed-up per pair. Pairs with a non-positive denominator are skipped.
std::vector<double> ratios(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace hs::measurement
