// Resolving and loading HF checkpoints: a folder, or a model id from the offline HF cache.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/causal_lm.h"
#include "models/config.h"

namespace hs::models {

class Checkpoint;

/// Thrown when a model cannot be found or its weights do not fit the architecture; the
/// message names the folder, file or tensor.
struct ModelLoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A folder path as is; otherwise an id "org/name" looked up, offline, in the HF hub cache
/// (huggingface_hub's order: `$HF_HUB_CACHE`, `$HUGGINGFACE_HUB_CACHE`, `$HF_HOME/hub`,
/// `$XDG_CACHE_HOME/huggingface/hub`, `~/.cache/huggingface/hub`):
/// `models--org--name/snapshots/<refs/main or the newest snapshot>/`.
/// Throws ModelLoadError listing where it looked.
std::filesystem::path resolve_model_path(const std::string& dir_or_id);

struct LoadOptions {
  /// Weight dtype; nullopt = float32 (CPU-friendly; pass the config's dtype to keep it).
  std::optional<c10::ScalarType> dtype;
  /// Device the weights are placed on.
  torch::Device device = torch::kCPU;
};

struct LoadedModel {
  std::filesystem::path dir;
  ModelConfig config;
  GenerationConfig generation;
  std::shared_ptr<CausalLM> model;
  /// Checkpoint tensors left out because transformers skips them too (old checkpoints'
  /// per-layer `rotary_emb.inv_freq`); any other unused tensor is an error.
  std::vector<std::string> unused_tensors;
};

/// Reads config.json, builds the module tree on `meta`, then fills every parameter from the
/// safetensors checkpoint (checked: presence, shape, loadable dtype). Same-dtype CPU tensors
/// stay zero-copy views of the private read-only mapping where the data is aligned to
/// c10::gAlignment (64 bytes) and are copied otherwise (see aligned_for_kernels). Tied embeddings are re-tied after
/// loading (lm_head.weight is model.embed_tokens.weight). Throws ConfigError, LoadError or
/// ModelLoadError; the model is never returned half-loaded.
LoadedModel load_model(const std::string& dir_or_id, const LoadOptions& options = {});

/// `t` itself when its data is where the CPU allocator would put it (c10::gAlignment, 64 bytes),
/// else a contiguous copy in allocator memory. BLAS picks its kernel partly by the address of
/// its operands (MKL's sgemm/sgemv take another path for data that is not 64-byte aligned, with
/// another summation order), so a weight read in place from a safetensors file — whose tensors
/// are only itemsize-aligned — and the same weight copied to a device by a hook would not give
/// bit-identical results. Weights loaded here always sit where a copy would put them.
torch::Tensor aligned_for_kernels(torch::Tensor t);

/// Fills `model`'s parameters from `ckpt` (see load_model). Throws ModelLoadError naming the
/// tensor (and the config) when the checkpoint misses a tensor the model needs or holds one it
/// has no place for (a config with fewer layers than the checkpoint, ...), before installing
/// anything. Returns the tensors skipped as transformers skips them (`rotary_emb.inv_freq`).
std::vector<std::string> load_weights(CausalLM& model, const Checkpoint& ckpt, c10::ScalarType dtype,
                                      torch::Device device);

}  // namespace hs::models
