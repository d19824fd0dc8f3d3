// How far apart two tensors of logits are, in the terms a numerics reviewer uses: bit-identical
// (as torch.equal), the largest absolute difference, and the largest difference in units in the
// last place (ulps) of the dtype the values were computed in.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace hs::models {

struct LogitsDiff {
  bool identical = false;     ///< same shape and every element bit-equal (torch.equal; NaN != NaN)
  double max_abs_diff = 0.0;  ///< max |got - ref| over all elements, computed in float64; NaN if either holds a NaN
  /// The largest distance in ulps of `dtype` between corresponding elements: how many values
  /// representable in `dtype` lie between them (0 when equal; +0 and -0 count as equal).
  /// -1 when an element is NaN in exactly one of the two.
  int64_t max_ulp = 0;
};

/// Compares `got` with `ref` (same shape, any floating dtype, CPU or not). Both are converted to
/// `dtype` first — exact when they were computed in `dtype` and widened afterwards, which is how
/// a capture keeps its logits (float32 copies of f32 / bf16 / f16 results).
/// Throws std::invalid_argument when the shapes differ or `dtype` is not f32, bf16 or f16.
LogitsDiff compare_logits(const torch::Tensor& got, const torch::Tensor& ref, c10::ScalarType dtype);

}  // namespace hs::models
