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

/// Throws std::invalid_argument naming the id, its position and the config file when a prompt
/// id is not in [0, vocab_size) (the embedding's rows; the loader checks they match).
void check_prompt_ids(const ModelConfig& config, const std::vector<int64_t>& ids);
/// The same against `vocab_size` read from `config_file` (any architecture: ConfigSummary).
void check_prompt_ids(int64_t vocab_size, const std::filesystem::path& config_file, const std::vector<int64_t>& ids);

/// What greedy_generate checks before it allocates anything: a non-empty prompt, max_new_tokens
/// >= 0, the prompt ids (check_prompt_ids), and for a static cache its length (prompt +
/// max_new_tokens) against max_position_embeddings and, on the CPU, its bytes against the
/// available memory. Throws std::invalid_argument naming the limit and where it comes from.
void check_generate_inputs(const ModelConfig& config, const std::vector<int64_t>& prompt_ids,
                           const GenerateOptions& options);

/// Greedy decode: prefill the prompt (batch 1), then one token per step until
/// `max_new_tokens` or an eos id. Throws what check_generate_inputs throws.
GenerateResult greedy_generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                               const GenerateOptions& options, const TokenCallback& on_token = {});

}  // namespace hs::models
