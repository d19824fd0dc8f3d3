#include "models/causal_lm.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cmath>
#include <optional>
#include <stdexcept>

namespace hs::models {

namespace {

torch::Tensor arg_tensor(const CallArgs& call, size_t i, const char* name, const HookableModule& m) {
  if (call.args.size() > i && call.args[i].isTensor()) return call.args[i].toTensor();
  if (const c10::IValue* v = call.kwarg(name); v && v->isTensor()) return v->toTensor();
  throw std::invalid_argument("module '" + m.fqn() + "' (" + m.class_name() + "): missing tensor argument '" +
                              name + "'");
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.slice(-1, 0, half);
  auto x2 = x.slice(-1, half);
  return torch::cat({-x2, x1}, -1);
}

// q, k: [batch, heads, seq, head_dim]; cos, sin: [batch, seq, rotary_dim].
std::pair<torch::Tensor, torch::Tensor> apply_rotary_pos_emb(const torch::Tensor& q, const torch::Tensor& k,
                                                             torch::Tensor cos, torch::Tensor sin) {
  cos = cos.unsqueeze(1);
  sin = sin.unsqueeze(1);
  const int64_t rot = cos.size(-1);
  if (rot == q.size(-1))
    return {q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin};
  // partial_rotary_factor < 1: rotate the first rotary_dim channels, pass the rest through.
  auto qr = q.slice(-1, 0, rot), qp = q.slice(-1, rot);
  auto kr = k.slice(-1, 0, rot), kp = k.slice(-1, rot);
  return {torch::cat({qr * cos + rotate_half(qr) * sin, qp}, -1),
          torch::cat({kr * cos + rotate_half(kr) * sin, kp}, -1)};
}

// mkldnn::_linear_pointwise — oneDNN's inner product, the kernel Inductor's CPU backend calls for
// nn.Linear — when this LibTorch has it; nullopt otherwise.
const std::optional<c10::TypedOperatorHandle<at::Tensor(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, c10::string_view,
    c10::List<std::optional<at::Scalar>>, std::optional<c10::string_view>)>>&
onednn_linear() {
  using Signature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                               c10::string_view, c10::List<std::optional<at::Scalar>>,
                               std::optional<c10::string_view>);
  static const auto op = []() -> std::optional<c10::TypedOperatorHandle<Signature>> {
    auto h = c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
    if (!h || !h->hasKernelForDispatchKey(c10::DispatchKey::CPU)) return std::nullopt;
    return h->typed<Signature>();
  }();
  return op;
}

}  // namespace

torch::Tensor linear_product(const torch::Tensor& x, const torch::Tensor& w, const std::optional<torch::Tensor>& b) {
  const auto& onednn = onednn_linear();
  const bool cpu_f32 = x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == torch::kFloat &&
                       w.scalar_type() == torch::kFloat && w.dim() == 2 && x.dim() >= 2 &&
                       x.size(-1) == w.size(1) && x.layout() == torch::kStrided && w.layout() == torch::kStrided &&
                       (!b || (b->device().is_cpu() && b->scalar_type() == torch::kFloat && b->dim() == 1 &&
                               b->size(0) == w.size(0)));
  const bool no_grad = !c10::GradMode::is_enabled() ||
                       !(x.requires_grad() || w.requires_grad() || (b && b->requires_grad()));
  // Below a MiB of weight the product is ATen's: oneDNN splits even a small one across the
  // OpenMP threads, and waking them costs more than the read it shares (kOneDnnMinWeight).
  if (!onednn || !cpu_f32 || !no_grad || w.numel() < kOneDnnMinWeight)
    return b ? torch::linear(x, w, *b) : torch::linear(x, w);
  return onednn->call(x, w, b, "none", c10::List<std::optional<at::Scalar>>(), std::nullopt);
}

std::string family_prefix(Family f) {
  switch (f) {
    case Family::Llama: return "Llama";
    case Family::Qwen2: return "Qwen2";
    case Family::Qwen3: return "Qwen3";
  }
  return "Llama";
}

// ---------------------------------------------------------------- Linear / Embedding / norms

Linear::Linear(int64_t in, int64_t out, bool bias, const torch::TensorOptions& opts)
    : HookableModule("Linear"), in_features(in), out_features(out) {
  w_ = register_param("weight", torch::empty({out, in}, opts));
  if (bias) b_ = register_param("bias", torch::empty({out}, opts));
}

c10::IValue Linear::forward_impl(CallArgs& call) {
  auto x = arg_tensor(call, 0, "input", *this);
  return b_ == SIZE_MAX ? linear_product(x, slot(w_), std::nullopt) : linear_product(x, slot(w_), slot(b_));
}

Embedding::Embedding(int64_t num, int64_t dim, const torch::TensorOptions& opts) : HookableModule("Embedding") {
  w_ = register_param("weight", torch::empty({num, dim}, opts));
}

c10::IValue Embedding::forward_impl(CallArgs& call) {
  auto ids = arg_tensor(call, 0, "input", *this);
  return torch::embedding(slot(w_), ids);
}

RMSNorm::RMSNorm(const std::string& class_name, int64_t dim, double eps, const torch::TensorOptions& opts)
    : HookableModule(class_name), eps_(eps) {
  w_ = register_param("weight", torch::ones({dim}, opts));
}

c10::IValue RMSNorm::forward_impl(CallArgs& call) {
  auto x = arg_tensor(call, 0, "hidden_states", *this);
  auto in_dtype = x.scalar_type();
  auto x32 = x.to(torch::kFloat);
  auto var = x32.pow(2).mean(-1, /*keepdim=*/true);
  x32 = x32 * torch::rsqrt(var + eps_);
  return slot(w_) * x32.to(in_dtype);
}

c10::IValue SiLUActivation::forward_impl(CallArgs& call) {
  return torch::silu(arg_tensor(call, 0, "input", *this));
}

// ---------------------------------------------------------------- rotary embedding

torch::Tensor RotaryEmbedding::compute_inv_freq(const ModelConfig& c) {
  const int64_t dim = static_cast<int64_t>(c.head_dim * c.rope.partial_rotary_factor);
  auto ar = torch::arange(0, dim, 2, torch::TensorOptions().dtype(torch::kInt64)).to(torch::kFloat);
  auto inv_freq = 1.0 / torch::pow(c.rope.theta, ar / static_cast<double>(dim));
  if (c.rope.type == "linear") {
    inv_freq = inv_freq / c.rope.factor;
  } else if (c.rope.type == "llama3") {
    // transformers `_compute_llama3_parameters`.
    const double factor = c.rope.factor, low = c.rope.low_freq_factor, high = c.rope.high_freq_factor;
    const double old_ctx = static_cast<double>(c.rope.original_max_position_embeddings);
    const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    auto wavelen = 2 * M_PI / inv_freq;
    auto inv_freq_llama = torch::where(wavelen > low_wavelen, inv_freq / factor, inv_freq);
    auto smooth = (old_ctx / wavelen - low) / (high - low);
    auto smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama;
    auto is_medium = (~(wavelen < high_wavelen)) & (~(wavelen > low_wavelen));
    inv_freq = torch::where(is_medium, smoothed, inv_freq_llama);
  }
  return inv_freq.to(torch::kFloat);
}

RotaryEmbedding::RotaryEmbedding(const std::string& class_name, const ModelConfig& config)
    : HookableModule(class_name) {
  auto inv = compute_inv_freq(config);
  inv_freq_ = register_buf("inv_freq", inv, /*persistent=*/false);
  register_buf("original_inv_freq", inv.clone(), /*persistent=*/false);
}

c10::IValue RotaryEmbedding::forward_impl(CallArgs& call) {
  auto x = arg_tensor(call, 0, "x", *this);
  auto position_ids = arg_tensor(call, 1, "position_ids", *this);
  auto inv = slot(inv_freq_).to(x.device(), torch::kFloat);
  auto freqs = position_ids.unsqueeze(-1).to(torch::kFloat) * inv;  // [b, s, d/2]
  auto emb = torch::cat({freqs, freqs}, -1);
  return c10::ivalue::Tuple::create({emb.cos().to(x.scalar_type()), emb.sin().to(x.scalar_type())});
}

// ---------------------------------------------------------------- attention / MLP / layer

Attention::Attention(const ModelConfig& c, int64_t layer_idx, const torch::TensorOptions& opts)
    : HookableModule(family_prefix(c.family) + "Attention"), config_(c), layer_idx_(layer_idx) {
  const bool qkv_bias = c.attention_bias;
  const bool o_bias = c.family == Family::Qwen2 ? false : c.attention_bias;
  q_proj_ = add_child("q_proj", std::make_shared<Linear>(c.hidden_size, c.num_attention_heads * c.head_dim, qkv_bias, opts));
  k_proj_ = add_child("k_proj", std::make_shared<Linear>(c.hidden_size, c.num_key_value_heads * c.head_dim, qkv_bias, opts));
  v_proj_ = add_child("v_proj", std::make_shared<Linear>(c.hidden_size, c.num_key_value_heads * c.head_dim, qkv_bias, opts));
  o_proj_ = add_child("o_proj", std::make_shared<Linear>(c.num_attention_heads * c.head_dim, c.hidden_size, o_bias, opts));
  if (c.family == Family::Qwen3) {
    q_norm_ = add_child("q_norm", std::make_shared<RMSNorm>("Qwen3RMSNorm", c.head_dim, c.rms_norm_eps, opts));
    k_norm_ = add_child("k_norm", std::make_shared<RMSNorm>("Qwen3RMSNorm", c.head_dim, c.rms_norm_eps, opts));
  }
}

c10::IValue Attention::forward_impl(CallArgs& call) {
  auto x = arg_tensor(call, 0, "hidden_states", *this);
  const int64_t b = x.size(0), s = x.size(1), hd = config_.head_dim;
  auto q = (*q_proj_)(x).view({b, s, -1, hd});
  auto k = (*k_proj_)(x).view({b, s, -1, hd});
  auto v = (*v_proj_)(x).view({b, s, -1, hd});
  if (q_norm_) {
    q = (*q_norm_)(q);
    k = (*k_norm_)(k);
  }
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  v = v.transpose(1, 2);

  const c10::IValue* pe = call.kwarg("position_embeddings");
  if (!pe || !pe->isTuple())
    throw std::invalid_argument("module '" + fqn() + "': missing keyword argument 'position_embeddings'");
  auto cs = pe->toTupleRef().elements();
  std::tie(q, k) = apply_rotary_pos_emb(q, k, cs[0].toTensor(), cs[1].toTensor());

  auto cache = cache_from_ivalue(call.kwarg("past_key_values"));
  bool had_past = false;
  if (cache) {
    had_past = cache->seq_length() > 0 || cache->kind() == KVCache::Kind::Static;
    auto cache_position = call.tensor_kwarg("cache_position");
    std::tie(k, v) = cache->update(layer_idx_, k, v, cache_position);
  }
  auto mask = call.tensor_kwarg("attention_mask");
  // transformers' sdpa_attention_forward: is_causal only for a multi-token query with no mask.
  const bool is_causal = !mask.defined() && s > 1 && !had_past;
  auto out = at::scaled_dot_product_attention(q, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt,
                                              0.0, is_causal, 1.0 / std::sqrt(static_cast<double>(hd)),
                                              config_.num_key_value_heads != config_.num_attention_heads);
  out = out.transpose(1, 2).reshape({b, s, -1});
  return (*o_proj_)(out);
}

MLP::MLP(const ModelConfig& c, const torch::TensorOptions& opts) : HookableModule(family_prefix(c.family) + "MLP") {
  gate_proj_ = add_child("gate_proj", std::make_shared<Linear>(c.hidden_size, c.intermediate_size, c.mlp_bias, opts));
  up_proj_ = add_child("up_proj", std::make_shared<Linear>(c.hidden_size, c.intermediate_size, c.mlp_bias, opts));
  down_proj_ = add_child("down_proj", std::make_shared<Linear>(c.intermediate_size, c.hidden_size, c.mlp_bias, opts));
  act_fn_ = add_child("act_fn", std::make_shared<SiLUActivation>());
}

c10::IValue MLP::forward_impl(CallArgs& call) {
  auto x = arg_tensor(call, 0, "x", *this);
  auto gated = act_fn_->call_tensor({{(*gate_proj_)(x)}, {}});
  return (*down_proj_)(gated * (*up_proj_)(x));
}

DecoderLayer::DecoderLayer(const ModelConfig& c, int64_t layer_idx, const torch::TensorOptions& opts)
    : HookableModule(family_prefix(c.family) + "DecoderLayer") {
  const std::string norm = family_prefix(c.family) + "RMSNorm";
  self_attn_ = add_child("self_attn", std::make_shared<Attention>(c, layer_idx, opts));
  mlp_ = add_child("mlp", std::make_shared<MLP>(c, opts));
  input_layernorm_ = add_child("input_layernorm", std::make_shared<RMSNorm>(norm, c.hidden_size, c.rms_norm_eps, opts));
  post_attention_layernorm_ =
      add_child("post_attention_layernorm", std::make_shared<RMSNorm>(norm, c.hidden_size, c.rms_norm_eps, opts));
}

c10::IValue DecoderLayer::forward_impl(CallArgs& call) {
  auto hidden = arg_tensor(call, 0, "hidden_states", *this);
  auto residual = hidden;
  hidden = (*input_layernorm_)(hidden);
  // Pass the layer's keyword arguments on to attention, as transformers does (**kwargs).
  CallArgs attn{{hidden}, call.kwargs};
  hidden = residual + self_attn_->call_tensor(std::move(attn));
  residual = hidden;
  hidden = (*post_attention_layernorm_)(hidden);
  hidden = mlp_->call_tensor({{hidden}, {}});
  return residual + hidden;
}

// ---------------------------------------------------------------- model / causal LM

DecoderModel::DecoderModel(const ModelConfig& c, const torch::TensorOptions& opts)
    : HookableModule(family_prefix(c.family) + "Model"), config_(c) {
  embed_tokens = add_child("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, opts));
  layers = add_child("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<DecoderLayer>(c, i, opts));
  norm = add_child("norm", std::make_shared<RMSNorm>(family_prefix(c.family) + "RMSNorm", c.hidden_size, c.rms_norm_eps, opts));
  rotary_emb = add_child("rotary_emb", std::make_shared<RotaryEmbedding>(family_prefix(c.family) + "RotaryEmbedding", c));
}

c10::IValue DecoderModel::forward_impl(CallArgs& call) {
  auto input_ids = arg_tensor(call, 0, "input_ids", *this);
  auto cache = cache_from_ivalue(call.kwarg("past_key_values"));
  auto hidden = embed_tokens->call_tensor({{input_ids}, {}});
  const int64_t s = input_ids.size(1);
  const int64_t past = cache ? cache->seq_length() : 0;
  auto cache_position = call.tensor_kwarg("cache_position");
  auto idx_opts = torch::TensorOptions().dtype(torch::kInt64).device(hidden.device());
  if (!cache_position.defined()) cache_position = torch::arange(past, past + s, idx_opts);
  auto position_ids = cache_position.unsqueeze(0);

  // Causal mask (transformers' create_causal_mask): none when SDPA's is_causal is exact
  // (no cached keys) or for a single-token query over a dynamic cache; otherwise a boolean
  // [1, 1, q_len, kv_len] mask, true = attend, aligned to the absolute positions.
  torch::Tensor mask;
  const bool static_cache = cache && cache->kind() == KVCache::Kind::Static;
  if (static_cache || (past > 0 && s > 1)) {
    const int64_t kv_len = cache->key_length_after(s);
    auto kv_idx = torch::arange(kv_len, idx_opts);
    mask = (kv_idx.unsqueeze(0) <= cache_position.unsqueeze(1)).unsqueeze(0).unsqueeze(0);
  }

  c10::IValue pe = rotary_emb->call({{hidden, position_ids}, {}});
  Kwargs kw{{"attention_mask", mask.defined() ? c10::IValue(mask) : c10::IValue()},
            {"position_ids", position_ids},
            {"past_key_values", cache ? cache_ivalue(cache) : c10::IValue()},
            {"cache_position", cache_position},
            {"position_embeddings", pe}};
  for (size_t i = 0; i < layers->size(); ++i) hidden = (*layers)[i]->call_tensor({{hidden}, kw});
  return (*norm)(hidden);
}

CausalLM::CausalLM(ModelConfig c, const torch::TensorOptions& opts)
    : HookableModule(c.architecture), config_(std::move(c)) {
  model = add_child("model", std::make_shared<DecoderModel>(config_, opts));
  lm_head = add_child("lm_head", std::make_shared<Linear>(config_.hidden_size, config_.vocab_size, false, opts));
  if (config_.tie_word_embeddings) lm_head->set_tensor("weight", model->embed_tokens->get_tensor("weight"));
  assign_fqns(*this);
}

c10::IValue CausalLM::forward_impl(CallArgs& call) {
  auto input_ids = arg_tensor(call, 0, "input_ids", *this);
  CallArgs inner{{}, {{"input_ids", input_ids}}};
  for (const char* k : {"past_key_values", "cache_position"})
    if (const c10::IValue* v = call.kwarg(k)) inner.kwargs.emplace_back(k, *v);
  auto hidden = model->call_tensor(std::move(inner));
  int64_t keep = 0;
  if (const c10::IValue* v = call.kwarg("logits_to_keep"); v && v->isInt()) keep = v->toInt();
  if (keep > 0 && keep < hidden.size(1)) hidden = hidden.slice(1, hidden.size(1) - keep);
  return (*lm_head)(hidden);
}

torch::Tensor CausalLM::forward(const torch::Tensor& input_ids, const c10::intrusive_ptr<KVCache>& cache,
                                int64_t logits_to_keep) {
  CallArgs args{{}, {{"input_ids", input_ids}}};
  args.kwargs.emplace_back("past_key_values", cache ? cache_ivalue(cache) : c10::IValue());
  if (logits_to_keep > 0) args.kwargs.emplace_back("logits_to_keep", logits_to_keep);
  return call_tensor(std::move(args));
}

std::vector<std::string> CausalLM::no_split_modules() const { return {family_prefix(config_.family) + "DecoderLayer"}; }

std::vector<std::pair<std::string, std::string>> CausalLM::tied_weights() const {
  if (!config_.tie_word_embeddings) return {};
  return {{"lm_head.weight", "model.embed_tokens.weight"}};
}

}  // namespace hs::models
