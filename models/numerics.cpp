#include "models/numerics.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace hs::models {

namespace {

// Maps the bit pattern of a float of `bits` width onto integers that are ordered like the
// floats themselves and adjacent for adjacent floats (-0 and +0 both map to 0).
int64_t ordered(uint64_t pattern, int bits) {
  const uint64_t sign = uint64_t{1} << (bits - 1);
  const int64_t magnitude = static_cast<int64_t>(pattern & (sign - 1));
  return (pattern & sign) ? -magnitude : magnitude;
}

template <typename Bits>
int64_t max_ulp_of(const torch::Tensor& a, const torch::Tensor& b, int bits) {
  const auto* pa = static_cast<const Bits*>(a.data_ptr());
  const auto* pb = static_cast<const Bits*>(b.data_ptr());
  const torch::Tensor nan_a = a.isnan(), nan_b = b.isnan();
  const auto* na = nan_a.data_ptr<bool>();
  const auto* nb = nan_b.data_ptr<bool>();
  int64_t worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (na[i] || nb[i]) {
      if (na[i] != nb[i]) return -1;
      continue;
    }
    const int64_t d = std::llabs(ordered(pa[i], bits) - ordered(pb[i], bits));
    if (d > worst) worst = d;
  }
  return worst;
}

}  // namespace

LogitsDiff compare_logits(const torch::Tensor& got, const torch::Tensor& ref, c10::ScalarType dtype) {
  if (got.sizes() != ref.sizes())
    throw std::invalid_argument("compare_logits: shapes differ (" + std::to_string(got.numel()) + " vs " +
                                std::to_string(ref.numel()) + " elements)");
  if (dtype != c10::kFloat && dtype != c10::kBFloat16 && dtype != c10::kHalf)
    throw std::invalid_argument("compare_logits: dtype must be f32, bf16 or f16");
  const torch::Tensor a = got.detach().to(torch::kCPU, dtype).contiguous();
  const torch::Tensor b = ref.detach().to(torch::kCPU, dtype).contiguous();
  LogitsDiff d;
  d.identical = torch::equal(a, b);
  if (a.numel() == 0) return d;
  d.max_abs_diff = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  switch (dtype) {
    case c10::kFloat: d.max_ulp = max_ulp_of<uint32_t>(a, b, 32); break;
    case c10::kBFloat16:
    case c10::kHalf: d.max_ulp = max_ulp_of<uint16_t>(a, b, 16); break;
    default: break;
  }
  return d;
}

}  // namespace hs::models
