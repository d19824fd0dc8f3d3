#include "models/kv_cache.h"

#include <stdexcept>
#include <string>

namespace hs::models {

namespace {
// Registration makes KVCache storable in a c10::IValue.
const auto kRegistration = torch::class_<KVCache>("hookscope", "KVCache");
}  // namespace

KVCache::KVCache(Kind kind, int64_t num_layers, int64_t max_len)
    : kind_(kind), max_len_(max_len), keys_(num_layers), values_(num_layers) {}

c10::intrusive_ptr<KVCache> KVCache::dynamic_cache(int64_t num_layers) {
  return c10::make_intrusive<KVCache>(KVCache(Kind::Dynamic, num_layers, -1));
}

c10::intrusive_ptr<KVCache> KVCache::static_cache(int64_t num_layers, int64_t max_cache_len) {
  if (max_cache_len < 1) throw std::invalid_argument("static cache needs max_cache_len >= 1");
  return c10::make_intrusive<KVCache>(KVCache(Kind::Static, num_layers, max_cache_len));
}

std::pair<torch::Tensor, torch::Tensor> KVCache::update(int64_t layer, const torch::Tensor& key,
                                                        const torch::Tensor& value,
                                                        const torch::Tensor& cache_position) {
  if (layer < 0 || layer >= num_layers())
    throw std::out_of_range("KVCache: layer " + std::to_string(layer) + " out of range");
  const int64_t q_len = key.size(2);
  auto& k = keys_[layer];
  auto& v = values_[layer];
  if (kind_ == Kind::Dynamic) {
    if (!k.defined()) {
      k = key;
      v = value;
    } else {
      k = torch::cat({k, key}, 2);
      v = torch::cat({v, value}, 2);
    }
  } else {
    if (!k.defined()) {
      k = torch::zeros({key.size(0), key.size(1), max_len_, key.size(3)}, key.options());
      v = torch::zeros({value.size(0), value.size(1), max_len_, value.size(3)}, value.options());
    }
    // Bounds are checked on the host-side counter; the positions themselves stay on device.
    if (layer == 0 && seen_ + q_len > max_len_)
      throw std::out_of_range("static KV cache overflow: " + std::to_string(seen_ + q_len) +
                              " positions > max_cache_len " + std::to_string(max_len_));
    auto pos = cache_position.to(k.device());
    k.index_copy_(2, pos, key.to(k.dtype()));
    v.index_copy_(2, pos, value.to(v.dtype()));
  }
  if (layer == num_layers() - 1) seen_ += q_len;
  return {k, v};
}

void KVCache::reset() {
  seen_ = 0;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (kind_ == Kind::Static) {
      if (keys_[i].defined()) keys_[i].zero_();
      if (values_[i].defined()) values_[i].zero_();
    } else {
      keys_[i] = torch::Tensor();
      values_[i] = torch::Tensor();
    }
  }
}

int64_t KVCache::nbytes() const {
  int64_t n = 0;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i].defined()) n += keys_[i].nbytes();
    if (values_[i].defined()) n += values_[i].nbytes();
  }
  return n;
}

c10::IValue cache_ivalue(const c10::intrusive_ptr<KVCache>& cache) { return c10::IValue(cache); }

c10::intrusive_ptr<KVCache> cache_from_ivalue(const c10::IValue* v) {
  if (!v || v->isNone()) return {};
  return v->toCustomClass<KVCache>();
}

}  // namespace hs::models
