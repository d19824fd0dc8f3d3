// Llama / Qwen2 / Qwen3 decoder-only causal LMs on the hookable module base.
//
// The module tree mirrors transformers' modeling files exactly — same FQNs, class names,
// parameters and buffers (non-persistent `rotary_emb.inv_freq` / `original_inv_freq`
// included) — so device maps and `no_split_module_classes` written for transformers apply:
//
//   LlamaForCausalLM                       (Qwen2ForCausalLM, Qwen3ForCausalLM alike)
//   ├─ model: LlamaModel
//   │  ├─ embed_tokens: Embedding            weight [vocab, hidden]
//   │  ├─ layers: ModuleList
//   │  │  └─ N: LlamaDecoderLayer
//   │  │     ├─ self_attn: LlamaAttention   q_proj/k_proj/v_proj/o_proj: Linear
//   │  │     │                              (Qwen3: q_norm/k_norm: Qwen3RMSNorm [head_dim])
//   │  │     ├─ mlp: LlamaMLP               gate_proj/up_proj/down_proj: Linear, act_fn: SiLUActivation
//   │  │     ├─ input_layernorm: LlamaRMSNorm
//   │  │     └─ post_attention_layernorm: LlamaRMSNorm
//   │  ├─ norm: LlamaRMSNorm
//   │  └─ rotary_emb: LlamaRotaryEmbedding   buffers inv_freq, original_inv_freq (non-persistent)
//   └─ lm_head: Linear                       weight tied to embed_tokens.weight when
//                                            tie_word_embeddings (the same tensor)
//
// Calls follow transformers 5.x: the decoder layer and attention take `hidden_states`
// positionally and `attention_mask`, `position_ids`, `past_key_values`, `cache_position`,
// `position_embeddings` (a (cos, sin) tuple) as keyword arguments.
//
// Numerics follow transformers' eager path: RMSNorm in fp32 then cast back before the weight
// multiply; half-split RoPE with cos/sin computed in fp32; attention through
// `at::scaled_dot_product_attention` with `scale = head_dim^-0.5`, GQA via `enable_gqa`, and
// `is_causal` only for a multi-token query without cached keys — with a cache, an explicit
// bottom-right mask (SDPA's `is_causal` is top-left aligned, wrong for decode).
#pragma once

#include <memory>
#include <string>

#include "models/config.h"
#include "models/kv_cache.h"
#include "models/module.h"

namespace hs::models {

/// Weight elements from which a CPU float32 product goes to oneDNN (2^18: 1 MiB of float32).
inline constexpr int64_t kOneDnnMinWeight = int64_t{1} << 18;

/// y = x Wᵀ + b, as `torch::linear`: x [..., in], w [out, in], b [out] → [..., out]. A CPU float32
/// product without autograd (x at least 2-D, w at least kOneDnnMinWeight elements) goes to oneDNN's inner product
/// (`mkldnn::_linear_pointwise`, what Inductor's CPU backend calls for `nn.Linear`) where this
/// LibTorch registers it; anything else, and a LibTorch without it, goes to `torch::linear`.
/// Why: a decode step's one-row products are matrix-vector products, which ATen's linear hands
/// to MKL's sgemv; oneDNN reads the weight about twice as fast on the CPUs measured
/// (docs/performance.md). Every call takes the same path whichever placement or hook put the
/// weight there, so placements stay bit-identical to one another; against transformers (ATen's
/// linear) the sums run in another order, which the model tests bound (1e-4 on the logits).
/// Throws what the kernel throws (c10::Error) on shapes that do not fit.
torch::Tensor linear_product(const torch::Tensor& x, const torch::Tensor& w, const std::optional<torch::Tensor>& b);

/// `nn.Linear`: y = x W^T + b. weight [out_features, in_features], bias [out_features].
class Linear : public HookableModule {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, const torch::TensorOptions& opts);
  c10::IValue forward_impl(CallArgs& call) override;
  torch::Tensor operator()(const torch::Tensor& x) { return call_tensor({{x}, {}}); }
  int64_t in_features, out_features;

 private:
  size_t w_, b_ = SIZE_MAX;
};

/// `nn.Embedding`: weight [num_embeddings, embedding_dim]; input int64 ids.
class Embedding : public HookableModule {
 public:
  Embedding(int64_t num, int64_t dim, const torch::TensorOptions& opts);
  c10::IValue forward_impl(CallArgs& call) override;

 private:
  size_t w_;
};

/// `LlamaRMSNorm` / `Qwen2RMSNorm` / `Qwen3RMSNorm`: weight * (x / rms(x)) with the
/// normalisation in fp32 and the result cast back to the input dtype before the multiply.
class RMSNorm : public HookableModule {
 public:
  RMSNorm(const std::string& class_name, int64_t dim, double eps, const torch::TensorOptions& opts);
  c10::IValue forward_impl(CallArgs& call) override;
  torch::Tensor operator()(const torch::Tensor& x) { return call_tensor({{x}, {}}); }

 private:
  size_t w_;
  double eps_;
};

/// `ACT2FN["silu"]` = transformers' `SiLUActivation` (no parameters).
class SiLUActivation : public HookableModule {
 public:
  SiLUActivation() : HookableModule("SiLUActivation") {}
  c10::IValue forward_impl(CallArgs& call) override;
};

/// `LlamaRotaryEmbedding`: forward(x, position_ids [batch, seq]) -> (cos, sin), each
/// [batch, seq, rotary_dim] in x's dtype. inv_freq follows the config's rope type
/// (default, linear, llama3).
class RotaryEmbedding : public HookableModule {
 public:
  RotaryEmbedding(const std::string& class_name, const ModelConfig& config);
  c10::IValue forward_impl(CallArgs& call) override;
  /// The inverse frequencies transformers computes for `config` (fp32, [rotary_dim / 2]).
  static torch::Tensor compute_inv_freq(const ModelConfig& config);

 private:
  size_t inv_freq_;
};

class Attention : public HookableModule {
 public:
  Attention(const ModelConfig& config, int64_t layer_idx, const torch::TensorOptions& opts);
  c10::IValue forward_impl(CallArgs& call) override;

 private:
  ModelConfig config_;
  int64_t layer_idx_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<RMSNorm> q_norm_, k_norm_;  // Qwen3 only
};

class MLP : public HookableModule {
 public:
  MLP(const ModelConfig& config, const torch::TensorOptions& opts);
  c10::IValue forward_impl(CallArgs& call) override;

 private:
  std::shared_ptr<Linear> gate_proj_, up_proj_, down_proj_;
  std::shared_ptr<SiLUActivation> act_fn_;
};

class DecoderLayer : public HookableModule {
 public:
  DecoderLayer(const ModelConfig& config, int64_t layer_idx, const torch::TensorOptions& opts);
  c10::IValue forward_impl(CallArgs& call) override;

 private:
  std::shared_ptr<Attention> self_attn_;
  std::shared_ptr<MLP> mlp_;
  std::shared_ptr<RMSNorm> input_layernorm_, post_attention_layernorm_;
};

/// `LlamaModel`: forward(input_ids=[batch, seq] int64, past_key_values=KVCache|None,
/// cache_position=[seq] int64|None) -> last hidden state [batch, seq, hidden].
class DecoderModel : public HookableModule {
 public:
  DecoderModel(const ModelConfig& config, const torch::TensorOptions& opts);
  c10::IValue forward_impl(CallArgs& call) override;
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<RotaryEmbedding> rotary_emb;

 private:
  ModelConfig config_;
};

/// `LlamaForCausalLM` (and the Qwen2/Qwen3 equivalents): forward(input_ids=...,
/// past_key_values=..., cache_position=..., logits_to_keep=int) -> logits
/// [batch, seq or logits_to_keep, vocab] in the model dtype.
class CausalLM : public HookableModule {
 public:
  /// Builds the tree with parameters allocated as uninitialised tensors of `opts` (use
  /// `load_weights` to fill them). With tie_word_embeddings, lm_head.weight IS
  /// model.embed_tokens.weight.
  explicit CausalLM(ModelConfig config, const torch::TensorOptions& opts = {});
  c10::IValue forward_impl(CallArgs& call) override;

  /// One forward: logits for `input_ids` [batch, seq] given `cache` (may be null: no cache).
  /// `logits_to_keep` > 0 keeps only the last positions' logits.
  torch::Tensor forward(const torch::Tensor& input_ids, const c10::intrusive_ptr<KVCache>& cache,
                        int64_t logits_to_keep = 0);

  const ModelConfig& config() const { return config_; }
  /// `_no_split_modules` of the transformers class, e.g. {"LlamaDecoderLayer"}.
  std::vector<std::string> no_split_modules() const;
  /// `_tied_weights_keys`: {"lm_head.weight" -> "model.embed_tokens.weight"} when tied.
  std::vector<std::pair<std::string, std::string>> tied_weights() const;
  /// `_skip_keys_device_placement`.
  static std::vector<std::string> skip_keys_device_placement() { return {"past_key_values"}; }

  std::shared_ptr<DecoderModel> model;
  std::shared_ptr<Linear> lm_head;

 private:
  ModelConfig config_;
};

/// Class-name prefix of a family: "Llama", "Qwen2", "Qwen3".
std::string family_prefix(Family f);

}  // namespace hs::models
