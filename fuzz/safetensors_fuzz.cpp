// .safetensors files: SafetensorsFile::open on arbitrary bytes, then every tensor (up to 64)
// made; each must hold exactly its data_offsets bytes of the file.
// Expected: hs::models::LoadError ("names the file and the tensor or field"), from open() and
// from tensor() (unsupported dtype, BOOL bytes other than 0/1).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <torch/torch.h>

#include "fuzz/fuzz_util.h"
#include "models/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = hs::fuzz::scratch_dir("safetensors");
  const std::filesystem::path file = dir / "fuzz.safetensors";
  hs::fuzz::write_file(file, data, size);
  std::shared_ptr<hs::models::SafetensorsFile> f;
  try {
    f = hs::models::SafetensorsFile::open(file);
  } catch (const hs::models::LoadError& e) {
    hs::fuzz::expected(e);
    return 0;
  }
  (void)f->metadata();
  size_t n = 0;
  for (const auto& info : f->tensors()) {
    if (++n > 64) break;
    if (f->find(info.name) != &info) std::abort();  // the index names each entry
    try {
      const torch::Tensor t = f->tensor(info.name).contiguous();
      if (static_cast<uint64_t>(t.numel()) != info.numel()) std::abort();
      // The tensor holds exactly the bytes [8 + N + begin, 8 + N + end) of the file.
      const uint64_t at = 8 + f->header_size() + info.begin;
      if (static_cast<uint64_t>(t.nbytes()) != info.nbytes() || at + info.nbytes() > size ||
          (info.nbytes() && std::memcmp(t.data_ptr(), data + at, info.nbytes()) != 0))
        std::abort();
    } catch (const hs::models::LoadError&) {
    }
  }
  return 0;
}
