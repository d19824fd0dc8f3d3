// The CUPTI-free part of tracer/cupti_decode.h: clock calibration and name helpers.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "tracer/cupti_decode.h"

namespace hs::tracer {

ClockCalibration ClockCalibration::from_samples(std::span<const ClockSample> pairs) {
  if (pairs.empty()) throw std::invalid_argument("ClockCalibration: no host/GPU clock pairs");
  std::vector<int64_t> d;
  d.reserve(pairs.size());
  for (const ClockSample& p : pairs) d.push_back(p.host_ns - p.gpu_ns);
  const auto mid = d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2);
  std::nth_element(d.begin(), mid, d.end());
  int64_t median = *mid;
  if (d.size() % 2 == 0) {  // even count: the mean of the two middle values
    const int64_t lower = *std::max_element(d.begin(), mid);
    median = lower + (median - lower) / 2;
  }
  return ClockCalibration{median, pairs.size()};
}

std::string_view short_kernel_name(std::string_view full) {
  std::string_view n = full;
  int depth = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] == '<') ++depth;
    if (n[i] == '>') --depth;
    if (n[i] == '(' && depth == 0) {
      n = n.substr(0, i);
      break;
    }
  }
  while (!n.empty() && n.back() == ' ') n.remove_suffix(1);
  if (!n.empty() && n.back() == '>') {
    depth = 0;
    for (size_t i = n.size(); i-- > 0;) {
      if (n[i] == '>') ++depth;
      if (n[i] == '<' && --depth == 0) {
        n = n.substr(0, i);
        break;
      }
    }
  }
  if (const size_t p = n.find_last_of(": "); p != std::string_view::npos) n = n.substr(p + 1);
  return n.empty() ? full : n;
}

std::string_view strip_api_version(std::string_view name) {
  const size_t p = name.rfind("_v");
  if (p == std::string_view::npos || p == 0 || p + 2 == name.size()) return name;
  for (size_t i = p + 2; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return name;
  return name.substr(0, p);
}

}  // namespace hs::tracer
