// config.json (and generation_config.json): ModelConfig::from_file and GenerationConfig::load
// on arbitrary bytes; a config that validates gets its rotary inverse frequencies computed
// (the first thing a model sizes from it); summarize_config (capture's reading of any
// architecture's config.json) on the same bytes.
// Expected: hs::models::ConfigError ("names the file and the field"). Checked: a config that
// validates gives finite, positive inverse frequencies of head_dim * partial_rotary_factor / 2
// entries, and its summary says it is ported, with its vocab_size.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <torch/torch.h>

#include "fuzz/fuzz_util.h"
#include "models/causal_lm.h"
#include "models/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = hs::fuzz::scratch_dir("config");
  const std::filesystem::path file = dir / "config.json";
  hs::fuzz::write_file(file, data, size);
  hs::models::ModelConfig fallback;
  try {
    (void)hs::models::GenerationConfig::load(file, fallback);
  } catch (const hs::models::ConfigError&) {
  }
  std::optional<hs::models::ConfigSummary> summary;  // what capture reads of any architecture's config
  try {
    summary = hs::models::summarize_config(file);
  } catch (const hs::models::ConfigError& e) {
    hs::fuzz::expected(e);
  }
  hs::models::ModelConfig c;
  try {
    c = hs::models::ModelConfig::from_file(file);
  } catch (const hs::models::ConfigError& e) {
    hs::fuzz::expected(e);
    return 0;
  }
  if (!summary || !summary->ported || summary->vocab_size != c.vocab_size) {
    std::fprintf(stderr, "config_fuzz: a validated config is summarized %s\n",
                 !summary ? "as unreadable" : !summary->ported ? "as not ported" : "with another vocab_size");
    std::abort();
  }
  const torch::Tensor inv = hs::models::RotaryEmbedding::compute_inv_freq(c);
  if (inv.numel() == 0 || !torch::isfinite(inv).all().item<bool>() || !(inv > 0).all().item<bool>()) {
    std::fprintf(stderr, "config_fuzz: a validated config gives inv_freq %s (head_dim %lld, rope %s)\n",
                 inv.numel() ? "with non-finite or non-positive values" : "with no entries",
                 static_cast<long long>(c.head_dim), c.rope.type.c_str());
    std::abort();
  }
  return 0;
}
