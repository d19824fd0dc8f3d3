// tokenizer.json: Tokenizer::from_json_string on arbitrary bytes, then encode / decode / vocab
// lookups on every tokenizer that loads. Expected: std::runtime_error from loading (the
// header's "message names the file and the offending field"), std::invalid_argument from
// encode (text not UTF-8), std::runtime_error from encode when a file's Split regex fails to
// match (PCRE2 match limit), std::out_of_range from id_to_token.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "models/tokenizer.h"

namespace {
const char* const kTexts[] = {
    "Hello world! It's 2024, isn't it?  Tabs\tand\nnewlines\r\n",
    "<|endoftext|><|im_start|>user\nhi<|im_end|> ünïcödé 日本語 🤗 1234567",
    "   leading spaces and trailing   ",
    "",
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::optional<hs::models::Tokenizer> tok;
  try {
    tok.emplace(hs::models::Tokenizer::from_json_string(input, "fuzz/tokenizer.json"));
  } catch (const std::runtime_error& e) {
    hs::fuzz::expected(e);
    return 0;
  }
  const size_t vocab = tok->vocab_size();
  std::vector<std::string_view> texts(std::begin(kTexts), std::end(kTexts));
  texts.push_back(input);  // arbitrary text too (invalid UTF-8 is refused)
  for (std::string_view text : texts) {
    for (bool special : {true, false}) {
      std::vector<int64_t> ids;
      try {
        ids = tok->encode(text, special);
      } catch (const std::invalid_argument&) {
        continue;
      } catch (const std::runtime_error&) {
        continue;
      }
      (void)tok->decode(ids, false);
      (void)tok->decode(ids, true);
    }
  }
  for (size_t id = 0; id < vocab && id < 512; ++id) {
    try {
      const std::string t = tok->id_to_token(static_cast<int64_t>(id));
      (void)tok->token_to_id(t);
      (void)tok->is_special(static_cast<int64_t>(id));
    } catch (const std::out_of_range&) {
    }
  }
  (void)tok->decode({-1, 0, 1, static_cast<int64_t>(vocab), INT64_MAX, INT64_MIN}, true);
  return 0;
}
