#include "models/generate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

namespace hs::models {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t available_memory_bytes() {
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : std::numeric_limits<int64_t>::max();
}

}  // namespace

void check_prompt_ids(const ModelConfig& config, const std::vector<int64_t>& ids) {
  check_prompt_ids(config.vocab_size, config.path, ids);
}

void check_prompt_ids(int64_t vocab_size, const std::filesystem::path& config_file, const std::vector<int64_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw std::invalid_argument("prompt token id " + std::to_string(ids[i]) + " (position " + std::to_string(i) +
                                  ") is outside the model's vocabulary and embedding: ids go from 0 to " +
                                  std::to_string(vocab_size - 1) + " (vocab_size in " + config_file.string() + ")");
}

void check_generate_inputs(const ModelConfig& config, const std::vector<int64_t>& prompt_ids,
                           const GenerateOptions& options) {
  if (prompt_ids.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
  if (options.max_new_tokens < 0) throw std::invalid_argument("generate: max_new_tokens must be >= 0");
  check_prompt_ids(config, prompt_ids);
  if (!options.static_cache) return;
  const int64_t len = static_cast<int64_t>(prompt_ids.size()) + std::max<int64_t>(options.max_new_tokens, 1);
  const std::string what = "a static cache of " + std::to_string(len) + " positions (" +
                           std::to_string(prompt_ids.size()) + " prompt tokens + max_new_tokens " +
                           std::to_string(options.max_new_tokens) + ")";
  if (len > config.max_position_embeddings)
    throw std::invalid_argument(what + " is longer than max_position_embeddings " +
                                std::to_string(config.max_position_embeddings) + " of " + config.path.string());
  // keys + values, per layer: [1, kv_heads, len, head_dim] in the weights' dtype (at most 4 bytes)
  const double bytes = 2.0 * 4.0 * static_cast<double>(config.num_hidden_layers) *
                       static_cast<double>(config.num_key_value_heads) * static_cast<double>(len) *
                       static_cast<double>(config.head_dim);
  if (options.input_device.is_cpu() && bytes > static_cast<double>(available_memory_bytes()))
    throw std::invalid_argument(what + " needs up to " + std::to_string(static_cast<int64_t>(bytes)) +
                                " bytes, more than the memory available (" + std::to_string(available_memory_bytes()) +
                                " bytes)");
}

GenerateResult greedy_generate(CausalLM& model, const std::vector<int64_t>& prompt_ids,
                               const GenerateOptions& options, const TokenCallback& on_token) {
  check_generate_inputs(model.config(), prompt_ids, options);
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
