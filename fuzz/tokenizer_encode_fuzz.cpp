// The tokenizer on arbitrary text: the tokenizer.json files under $HOOKSCOPE_FUZZ_TOKENIZERS
// (written by `tokenizers` itself: fuzz/make_seeds.py) are loaded once; each input is
//   byte 0      which tokenizer (modulo their count)
//   byte 1      flags: bit 0 add_special_tokens, bit 1 skip_special_tokens in decode
//   bytes 2..   the text.
// Expected: std::invalid_argument from encode for text that is not valid UTF-8; nothing else.
// Checked: every id encode returns is in the vocabulary (id_to_token does not throw), and
// decode of arbitrary ids (the text's bytes read as int32) never throws.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "models/tokenizer.h"

namespace fs = std::filesystem;

namespace {
std::vector<hs::models::Tokenizer>* tokenizers = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const fs::path dir = hs::fuzz::required_env("HOOKSCOPE_FUZZ_TOKENIZERS");
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() == "tokenizer.json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  tokenizers = new std::vector<hs::models::Tokenizer>();
  for (const auto& f : files) tokenizers->push_back(hs::models::Tokenizer::from_file(f));
  if (tokenizers->empty()) {
    std::fprintf(stderr, "no tokenizer.json under %s\n", dir.c_str());
    std::abort();
  }
  std::fprintf(stderr, "tokenizer_encode_fuzz: %zu tokenizers from %s\n", tokenizers->size(), dir.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const hs::models::Tokenizer& tok = (*tokenizers)[data[0] % tokenizers->size()];
  const bool add_special = data[1] & 1, skip_special = data[1] & 2;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    const std::vector<int64_t> ids = tok.encode(text, add_special);
    for (int64_t id : ids) (void)tok.id_to_token(id);  // std::out_of_range here is a finding
    (void)tok.decode(ids, skip_special);
  } catch (const std::invalid_argument&) {
  }
  std::vector<int64_t> raw((size - 2) / 4);
  for (size_t i = 0; i < raw.size(); ++i) {
    int32_t v;
    std::memcpy(&v, data + 2 + 4 * i, 4);
    raw[i] = v;
  }
  (void)tok.decode(raw, skip_special);
  return 0;
}
