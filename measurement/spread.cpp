#include "measurement/spread.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace hs::measurement {

namespace {

// The p-quantile of sorted `v`, interpolating linearly between order statistics.
double quantile(const std::vector<double>& v, double p) {
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

Spread Spread::of(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("Spread::of: no samples");
  for (double x : v)
    if (!std::isfinite(x)) throw std::invalid_argument("Spread::of: a sample is not finite");
  std::sort(v.begin(), v.end());
  Spread s;
  s.n = v.size();
  s.min = v.front();
  s.max = v.back();
  s.median = quantile(v, 0.5);
  s.q1 = quantile(v, 0.25);
  s.q3 = quantile(v, 0.75);
  s.iqr = s.q3 - s.q1;
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::fabs(x - s.median));
  std::sort(dev.begin(), dev.end());
  s.mad = quantile(dev, 0.5);
  return s;
}

nlohmann::json Spread::to_json() const {
  return {{"median", median}, {"min", min}, {"max", max}, {"q1", q1},
          {"q3", q3},         {"iqr", iqr}, {"mad", mad}, {"n", n}};
}

std::optional<Spread> Spread::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto med = j.find("median");
  if (med == j.end() || !med->is_number()) return std::nullopt;
  auto num = [&](const char* k, double dflt) {
    const auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>() : dflt;
  };
  Spread s;
  s.median = med->get<double>();
  s.min = num("min", s.median);
  s.max = num("max", s.median);
  s.q1 = num("q1", s.min);
  s.q3 = num("q3", s.max);
  s.iqr = num("iqr", s.q3 - s.q1);
  s.mad = num("mad", 0);
  const auto n = j.find("n");
  s.n = n != j.end() && n->is_number_integer() && n->get<int64_t>() > 0 ? n->get<size_t>() : 0;
  return s;
}

std::vector<double> LatencySamples::tokens_per_s() const {
  std::vector<double> out;
  for (double ms : decode_ms_per_token)
    if (ms > 0) out.push_back(1000.0 / ms);
  return out;
}

std::vector<double> ratios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (b[i] > 0) out.push_back(a[i] / b[i]);
  return out;
}

}  // namespace hs::measurement
