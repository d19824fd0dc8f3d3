// Key/value caches for greedy decoding, mirroring transformers' DynamicCache and StaticCache.
//
// A cache travels through module calls as the keyword argument `past_key_values` (a custom
// class inside a c10::IValue), which the hooks skip when moving inputs between devices
// (transformers' `_skip_keys_device_placement = ["past_key_values"]`): each layer's keys and
// values stay on the device of that layer.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/custom_class.h>
#include <torch/torch.h>

namespace hs::models {

class KVCache : public torch::CustomClassHolder {
 public:
  enum class Kind { Dynamic, Static };

  /// A growing cache: each update concatenates along the sequence axis (transformers'
  /// DynamicCache).
  static c10::intrusive_ptr<KVCache> dynamic_cache(int64_t num_layers);
  /// A preallocated cache of `max_cache_len` positions per layer (transformers' StaticCache):
  /// layer buffers are allocated lazily at the first update, on that layer's device and dtype,
  /// shape [batch, num_kv_heads, max_cache_len, head_dim]; updates write in place with
  /// `index_copy_` at `cache_position`, so tensor addresses never change (what CUDA graph
  /// replay needs). Attention then spans all `max_cache_len` positions under a mask.
  static c10::intrusive_ptr<KVCache> static_cache(int64_t num_layers, int64_t max_cache_len);

  Kind kind() const { return kind_; }
  int64_t num_layers() const { return static_cast<int64_t>(keys_.size()); }
  /// Positions seen so far (layer 0).
  int64_t seq_length() const { return seen_; }
  /// Static: capacity; dynamic: -1.
  int64_t max_cache_len() const { return max_len_; }

  /// Stores `key`/`value` ([batch, kv_heads, q_len, head_dim]) of `layer` at `cache_position`
  /// ([q_len] int64) and returns the keys/values attention should see: dynamic — everything
  /// so far, [.., seen + q_len, ..]; static — the whole buffer, [.., max_cache_len, ..].
  /// Throws std::out_of_range when a static cache would overflow.
  std::pair<torch::Tensor, torch::Tensor> update(int64_t layer, const torch::Tensor& key,
                                                 const torch::Tensor& value,
                                                 const torch::Tensor& cache_position);

  /// Key length attention will see after `q_len` more tokens.
  int64_t key_length_after(int64_t q_len) const {
    return kind_ == Kind::Static ? max_len_ : seen_ + q_len;
  }
  /// Drops all cached state (static buffers are kept and zeroed).
  void reset();
  /// Total bytes held by the cache.
  int64_t nbytes() const;

 private:
  KVCache(Kind kind, int64_t num_layers, int64_t max_len);
  Kind kind_;
  int64_t max_len_;
  int64_t seen_ = 0;
  std::vector<torch::Tensor> keys_, values_;
};

/// Wraps a cache as the IValue passed in `past_key_values`.
c10::IValue cache_ivalue(const c10::intrusive_ptr<KVCache>& cache);
/// The cache inside `past_key_values`, or nullptr when it is absent/None.
c10::intrusive_ptr<KVCache> cache_from_ivalue(const c10::IValue* v);

}  // namespace hs::models
