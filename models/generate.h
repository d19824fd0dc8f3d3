// Greedy decoding with a KV cache (transformers' `generate(do_sample=False)`).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/causal_lm.h"

namespace hs::models {

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  /// false: growing cache (DynamicCache); true: preallocated StaticCache of
  /// prompt + max_new_tokens positions.
  bool static_cache = false;
  /// Stop after emitting one of these ids (the eos token is kept in `new_ids`, as transformers
  /// does). Empty: never stop early.
  std::vector<int64_t> eos_token_ids;
  /// Device the prompt ids are placed on (the embedding's device, or where a dispatch hook
  /// expects inputs).
  torch::Device input_device = torch::kCPU;
};

struct GenerateResult {
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> new_ids;
  /// Logits of the last prompt position after prefill, [vocab], float32 on the CPU.
  torch::Tensor prefill_logits;
  int64_t prefill_ns = 0;  ///< wall time of the prefill forward (ns)
  int64_t decode_ns = 0;   ///< wall time of all decode steps after prefill (ns)
};

/// Called after each new token: (step index from 0, token id).
using TokenCallback = std::function<void(int64_t step, int64_t token)>;

/// Greedy decode: prefill the prompt (batch 1), then one token per step until
/// `max_new_tokens` or an eos id. Throws std::invalid_argument for an empty prompt or
/// max_new_tokens < 0.
GenerateResult greedy_generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                               const GenerateOptions& options, const TokenCallback& on_token = {});

}  // namespace hs::models
