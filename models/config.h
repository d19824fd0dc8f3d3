// config.json of an HF causal-LM checkpoint, in the transformers 4.x and 5.x forms.
//
// 4.x writes `rope_theta` / `rope_scaling` / `torch_dtype` at the top level; 5.x writes
// `rope_parameters: {rope_theta, rope_type, ...}` and `dtype`. Both are read; when both are
// present the 5.x field wins (as transformers 5 does when it upgrades an old config).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

namespace hs::models {

/// Thrown for any unreadable or invalid config.json; the message names the file and the field.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Rotary embedding parameters (transformers `rope_parameters` / `rope_scaling`).
struct RopeConfig {
  std::string type = "default";   ///< "default", "linear" or "llama3" (others: ConfigError)
  double theta = 10000.0;         ///< `rope_theta`
  double factor = 1.0;            ///< linear / llama3
  double low_freq_factor = 1.0;   ///< llama3
  double high_freq_factor = 4.0;  ///< llama3
  int64_t original_max_position_embeddings = 0;  ///< llama3
  double partial_rotary_factor = 1.0;
};

/// Which transformers modeling file a checkpoint follows.
enum class Family { Llama, Qwen2, Qwen3 };

struct ModelConfig {
  std::filesystem::path path;  ///< the config.json read (for messages)
  std::string architecture;    ///< "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"
  std::string model_type;      ///< "llama", "qwen2", "qwen3"
  Family family = Family::Llama;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  ///< defaults to num_attention_heads (no GQA)
  int64_t head_dim = 0;             ///< explicit `head_dim`, else hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
  bool attention_bias = false;  ///< q/k/v(/o for Llama) bias; always true for Qwen2's q/k/v
  bool mlp_bias = false;
  RopeConfig rope;
  std::optional<c10::ScalarType> dtype;  ///< `dtype` / `torch_dtype`, if given
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;    ///< `eos_token_id`: int or list
  std::optional<int64_t> pad_token_id;

  /// Reads and validates `file`: types, and ranges before anything is sized from them (sizes,
  /// layer and head counts >= 1 and bounded far above any released model; head_dim even;
  /// num_key_value_heads dividing num_attention_heads; rms_norm_eps in (0, 1]; rope_theta in
  /// [1, 1e18] and the rope factors in [1e-3, 1e6], where float32 inverse frequencies stay finite
  /// and > 0; partial_rotary_factor giving an even number >= 2 of rotary channels). Throws ConfigError naming the file and the field, or the
  /// file and why it cannot be read (missing, a FIFO or folder — refused, never waited on — or
  /// over 100 MB).
  static ModelConfig from_file(const std::filesystem::path& file);
  /// Validates an already-parsed config; `origin` is used in messages.
  static ModelConfig from_json(const nlohmann::json& j, const std::filesystem::path& origin);
};

/// What config.json says a checkpoint is, read without the port's validation: enough to choose an
/// engine for any transformers causal LM and to check token ids against its embedding.
struct ConfigSummary {
  std::string architecture;           ///< `architectures[0]`, else `model_type`; "" when it has neither
  std::optional<int64_t> vocab_size;  ///< `vocab_size`, else `text_config.vocab_size`
  bool ported = false;                ///< ModelConfig (the LibTorch port) reads this architecture
};

/// Reads `file` (bounded as ModelConfig::from_file). Throws ConfigError naming the file when it
/// cannot be read or is not a JSON object, or when a vocab_size it has is out of range.
ConfigSummary summarize_config(const std::filesystem::path& file);
/// The architectures the LibTorch port reads, for messages: "LlamaForCausalLM, Qwen2ForCausalLM, ...".
std::string ported_architectures();

/// Generation defaults from generation_config.json (eos ids override the model config's).
struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  /// Reads `file` when it exists; otherwise returns the config's ids. Throws ConfigError on
  /// invalid JSON.
  static GenerationConfig load(const std::filesystem::path& file, const ModelConfig& fallback);
};

/// "float32" / "bfloat16" / "float16" (also "f32", "bf16", "f16", "fp32", ...) to a dtype.
/// Throws ConfigError for anything else, quoting `what` in the message.
c10::ScalarType parse_dtype(const std::string& name, const std::string& what);
/// "f32" / "bf16" / "f16".
std::string dtype_short_name(c10::ScalarType t);

}  // namespace hs::models
