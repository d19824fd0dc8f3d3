#include "models/generate.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace hs::models {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

GenerateResult greedy_generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                               const GenerateOptions& options, const TokenCallback& on_token) {
  if (prompt_ids.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
  if (options.max_new_tokens < 0) throw std::invalid_argument("generate: max_new_tokens must be >= 0");
  c10::InferenceMode inference;
  GenerateResult r;
  r.prompt_ids = prompt_ids;
  const int64_t n_layers = model.config().num_hidden_layers;
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  auto cache = options.static_cache
                   ? KVCache::static_cache(n_layers, prompt_len + std::max<int64_t>(options.max_new_tokens, 1))
                   : KVCache::dynamic_cache(n_layers);
  auto ids_opts = torch::TensorOptions().dtype(torch::kInt64);
  auto input = torch::tensor(prompt_ids, ids_opts).unsqueeze(0).to(options.input_device);

  int64_t t0 = now_ns();
  auto logits = model.forward(input, cache, /*logits_to_keep=*/1);
  auto last = logits.select(1, -1).select(0, 0).to(torch::kCPU, torch::kFloat);
  r.prefill_logits = last;
  r.prefill_ns = now_ns() - t0;
  if (options.max_new_tokens == 0) return r;

  int64_t t1 = now_ns();
  int64_t token = last.argmax().item<int64_t>();
  auto is_eos = [&](int64_t t) {
    return std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), t) != options.eos_token_ids.end();
  };
  for (int64_t step = 0;; ++step) {
    r.new_ids.push_back(token);
    if (on_token) on_token(step, token);
    if (is_eos(token) || static_cast<int64_t>(r.new_ids.size()) >= options.max_new_tokens) break;
    auto next = torch::full({1, 1}, token, ids_opts).to(options.input_device);
    logits = model.forward(next, cache, 1);
    token = logits.select(1, -1).select(0, 0).argmax().item<int64_t>();
  }
  r.decode_ns = now_ns() - t1;
  return r;
}

}  // namespace hs::models
