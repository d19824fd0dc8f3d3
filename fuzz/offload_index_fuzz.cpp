// The offload folder's index.json: read_offload_index on a folder holding the fuzzed index and
// the .dat files (and a data.safetensors) accelerate itself wrote ($HOOKSCOPE_FUZZ_OFFLOAD,
// copied into the scratch folder once); then every entry (up to 32) sized and loaded through
// OffloadedWeightsLoader. Safetensors entries are loaded only when they name
// "data.safetensors" (the copy in the scratch folder, made absolute for the loader), so the
// fuzzer never opens files outside it.
// Expected: hs::hooks::OffloadError ("names the file and the key").
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <filesystem>

#include <torch/torch.h>

#include "fuzz/fuzz_util.h"
#include "hooks/offload.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const fs::path src = hs::fuzz::required_env("HOOKSCOPE_FUZZ_OFFLOAD");
  const fs::path dir = hs::fuzz::scratch_dir("offload");
  int copied = 0;
  for (const auto& e : fs::directory_iterator(src)) {
    const fs::path p = e.path();
    if (p.extension() != ".dat" && p.filename() != "data.safetensors") continue;
    fs::copy_file(p, dir / p.filename(), fs::copy_options::overwrite_existing);
    ++copied;
  }
  std::fprintf(stderr, "offload_index_fuzz: %d data files from %s\n", copied, src.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path dir = hs::fuzz::scratch_dir("offload");
  hs::fuzz::write_file(dir / "index.json", data, size);
  hs::hooks::OffloadIndex index;
  try {
    index = hs::hooks::read_offload_index(dir);
  } catch (const hs::hooks::OffloadError& e) {
    hs::fuzz::expected(e);
    return 0;
  }
  // The index the loader gets: safetensors entries other than data.safetensors left out.
  hs::hooks::OffloadIndex loadable;
  for (const auto& [key, entry] : index) {
    if (!entry.is_safetensors()) {
      loadable.insert_or_assign(key, entry);
    } else if (*entry.safetensors_file == "data.safetensors") {
      hs::hooks::OffloadIndexEntry e = entry;
      e.safetensors_file = (dir / "data.safetensors").string();
      loadable.insert_or_assign(key, e);
    }
  }
  try {
    hs::hooks::OffloadedWeightsLoader loader(std::nullopt, dir, loadable);
    size_t n = 0;
    for (const auto& [key, entry] : loadable) {
      if (++n > 32) break;
      if (!loader.contains(key)) std::abort();
      try {
        if (!entry.is_safetensors()) {
          (void)hs::hooks::dat_file_bytes(entry, key);
          std::error_code ec;
          if (!fs::is_regular_file(dir / (key + ".dat"), ec)) continue;
        }
        const torch::Tensor t = loader.get(key).contiguous();
        if (!entry.is_safetensors()) {
          // A .dat entry loads as its shape, holding exactly the file's bytes.
          if (t.sizes().vec() != entry.shape) std::abort();
          std::ifstream in(dir / (key + ".dat"), std::ios::binary);
          const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          const size_t n = static_cast<size_t>(t.nbytes());
          if (n && (bytes.size() != n || std::memcmp(bytes.data(), t.data_ptr(), n) != 0)) std::abort();
        }
      } catch (const hs::hooks::OffloadError&) {
      }
    }
  } catch (const hs::hooks::OffloadError& e) {
    hs::fuzz::expected(e);
  }
  return 0;
}
