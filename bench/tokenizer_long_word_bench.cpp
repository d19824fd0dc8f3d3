// Tokenizer encode time of one text (bench/tokenizer_long_word.py gives it long single words at
// 1x and 4x their length, next to Hugging Face `tokenizers` on the same text).
//   bench_tokenizer_long_word --tokenizer TOKENIZER.json --text FILE [--repeats N] [--ids-out FILE]
// Prints {"seconds": best of N encodes (add_special_tokens=false), "ids": count} and, with
// --ids-out, writes the ids as a JSON array (the driver checks them against `tokenizers`).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/tokenizer.h"

int main(int argc, char** argv) {
  std::string tokenizer, text_file, ids_out;
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--tokenizer") && has_value) tokenizer = argv[++i];
    else if (!std::strcmp(argv[i], "--text") && has_value) text_file = argv[++i];
    else if (!std::strcmp(argv[i], "--ids-out") && has_value) ids_out = argv[++i];
    else if (!std::strcmp(argv[i], "--repeats") && has_value) repeats = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s --tokenizer TOKENIZER.json --text FILE [--repeats N] [--ids-out FILE]\n", argv[0]);
      return 2;
    }
  }
  if (tokenizer.empty() || text_file.empty()) {
    std::fprintf(stderr, "--tokenizer and --text are required\n");
    return 2;
  }
  std::ifstream f(text_file, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", text_file.c_str());
    return 1;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const auto tok = hs::models::Tokenizer::from_file(tokenizer);

  std::vector<int64_t> ids;
  double best = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    ids = tok.encode(text, false);
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  if (!ids_out.empty()) {
    std::ofstream o(ids_out, std::ios::binary);
    o << '[';
    for (size_t i = 0; i < ids.size(); ++i) o << (i ? "," : "") << ids[i];
    o << "]\n";
  }
  std::printf("{\"seconds\": %.6f, \"ids\": %zu}\n", best, ids.size());
  return 0;
}
