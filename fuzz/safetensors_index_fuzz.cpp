// model.safetensors.index.json: Checkpoint::open_dir on a folder holding the fuzzed index and
// the shards of a real sharded checkpoint (transformers' save_pretrained(max_shard_size=...),
// $HOOKSCOPE_FUZZ_SHARDS: linked into the scratch folder once), then up to 16 tensors read.
// Expected: hs::models::LoadError.
#include <cstdint>
#include <filesystem>

#include <torch/torch.h>

#include "fuzz/fuzz_util.h"
#include "models/safetensors.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const fs::path shards = hs::fuzz::required_env("HOOKSCOPE_FUZZ_SHARDS");
  const fs::path dir = hs::fuzz::scratch_dir("safetensors-index");
  int linked = 0;
  for (const auto& e : fs::directory_iterator(shards)) {
    const fs::path p = e.path();
    if (p.extension() != ".safetensors" || p.filename() == "model.safetensors") continue;
    fs::create_symlink(fs::absolute(p), dir / p.filename());
    ++linked;
  }
  std::fprintf(stderr, "safetensors_index_fuzz: %d shards from %s\n", linked, shards.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path dir = hs::fuzz::scratch_dir("safetensors-index");
  hs::fuzz::write_file(dir / "model.safetensors.index.json", data, size);
  try {
    const auto ckpt = hs::models::Checkpoint::open_dir(dir);
    size_t n = 0;
    for (const auto& name : ckpt.names()) {
      if (++n > 16) break;
      if (!ckpt.contains(name)) std::abort();
      (void)ckpt.info(name);
      (void)ckpt.file_of(name);
      (void)ckpt.get(name).clone();
    }
  } catch (const hs::models::LoadError& e) {
    hs::fuzz::expected(e);
  }
  return 0;
}
