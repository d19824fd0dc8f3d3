// hs::models::Tokenizer against the HuggingFace `tokenizers` package (tests/oracles/tokenizer_oracle.py):
// the real SmolLM2 tokenizer.json, and tokenizers trained/built by `tokenizers` itself during the
// test (Qwen2-style with pair and string merges, Llama-3 style, and variants that exercise every
// supported normalizer, pre-tokenizer, split behaviour, added-token flag and decoder option).
#include "models/tokenizer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/test_util.h"

namespace fs = std::filesystem;
using hs::models::Tokenizer;
using nlohmann::json;

namespace {

std::string quote(const std::string& s) {
  return json(s).dump(-1, ' ', true, json::error_handler_t::replace);
}

std::string show_ids(const std::vector<int64_t>& ids) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  os << "]";
  return os.str();
}

/// Runs every check of one oracle expectation file against `tok`; reports up to 5 mismatches of
/// each kind, each with its input string.
void check_against_oracle(const Tokenizer& tok, const json& exp, const std::string& label) {
  const auto& strings = exp.at("strings");
  ASSERT_GE(strings.size(), 200u) << label;
  int enc_bad = 0, enc_ns_bad = 0, dec_bad = 0, dec_skip_bad = 0, roundtrip_bad = 0;
  size_t hf_not_roundtrip = 0, exact_roundtrip = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string s = strings[i].get<std::string>();
    const auto want = exp["ids"][i].get<std::vector<int64_t>>();
    const auto want_ns = exp["ids_no_special"][i].get<std::vector<int64_t>>();
    std::vector<int64_t> got, got_ns;
    ASSERT_NO_THROW(got = tok.encode(s, true)) << label << " string #" << i << " " << quote(s);
    ASSERT_NO_THROW(got_ns = tok.encode(s, false)) << label << " string #" << i << " " << quote(s);
    if (got != want && ++enc_bad <= 5)
      ADD_FAILURE() << label << " encode mismatch, string #" << i << " " << quote(s) << "\n  hf:   "
                    << show_ids(want) << "\n  ours: " << show_ids(got);
    if (got_ns != want_ns && ++enc_ns_bad <= 5)
      ADD_FAILURE() << label << " encode(add_special_tokens=false) mismatch, string #" << i << " "
                    << quote(s) << "\n  hf:   " << show_ids(want_ns) << "\n  ours: " << show_ids(got_ns);
    // Decode the oracle's ids so a decode check does not depend on the encode check.
    const std::string want_dec = exp["decode"][i].get<std::string>();
    const std::string want_skip = exp["decode_skip"][i].get<std::string>();
    std::string dec = tok.decode(want, false), skip = tok.decode(want, true);
    if (dec != want_dec && ++dec_bad <= 5)
      ADD_FAILURE() << label << " decode mismatch for string #" << i << " " << quote(s)
                    << "\n  hf:   " << quote(want_dec) << "\n  ours: " << quote(dec);
    if (skip != want_skip && ++dec_skip_bad <= 5)
      ADD_FAILURE() << label << " decode(skip_special_tokens) mismatch for string #" << i << " " << quote(s)
                    << "\n  hf:   " << quote(want_skip) << "\n  ours: " << quote(skip);
    // Round trip: where HF reproduces the input, so must we (with our own ids).
    std::string rt = tok.decode(got_ns, false);
    const std::string want_rt = exp["decode_no_special"][i].get<std::string>();
    if (rt != want_rt && ++dec_bad <= 5)
      ADD_FAILURE() << label << " decode(encode(s, false)) mismatch for string #" << i << " " << quote(s)
                    << "\n  hf:   " << quote(want_rt) << "\n  ours: " << quote(rt);
    if (want_rt == s) {
      if (rt != s && ++roundtrip_bad <= 5)
        ADD_FAILURE() << label << " decode(encode(s)) != s for #" << i << " " << quote(s) << " -> " << quote(rt);
    } else {
      ++hf_not_roundtrip;
    }
    if (rt == s) ++exact_roundtrip;
  }
  EXPECT_EQ(enc_bad, 0) << label << ": strings whose ids differ from HF";
  EXPECT_EQ(enc_ns_bad, 0) << label << ": strings whose ids (no special tokens) differ from HF";
  EXPECT_EQ(dec_bad, 0) << label << ": decode mismatches";
  EXPECT_EQ(dec_skip_bad, 0) << label << ": decode(skip_special_tokens) mismatches";
  EXPECT_EQ(roundtrip_bad, 0) << label << ": round-trip failures";

  // Arbitrary id sequences (partial UTF-8 byte tokens, specials): lossy decode as HF.
  const auto& lists = exp.at("id_lists");
  int list_bad = 0;
  for (size_t i = 0; i < lists.size(); ++i) {
    auto ids = lists[i].get<std::vector<int64_t>>();
    std::string a = tok.decode(ids, false), b = tok.decode(ids, true);
    const std::string wa = exp["id_lists_decode"][i].get<std::string>();
    const std::string wb = exp["id_lists_decode_skip"][i].get<std::string>();
    if ((a != wa || b != wb) && ++list_bad <= 5)
      ADD_FAILURE() << label << " decode of ids " << show_ids(ids) << "\n  hf:   " << quote(wa) << " / "
                    << quote(wb) << "\n  ours: " << quote(a) << " / " << quote(b);
  }
  EXPECT_EQ(list_bad, 0) << label << ": id-list decode mismatches";

  // Vocabulary lookups.
  EXPECT_EQ(tok.vocab_size(), exp.at("vocab_size").get<size_t>()) << label;
  const auto& probe = exp.at("probe_ids");
  for (size_t i = 0; i < probe.size(); ++i) {
    const int64_t id = probe[i].get<int64_t>();
    const std::string want = exp["probe_tokens"][i].get<std::string>();
    EXPECT_EQ(tok.id_to_token(id), want) << label << " id_to_token(" << id << ")";
    // (For a normalized added token, id_to_token gives the normalized form, whose token_to_id
    // need not be the same id; HF answers the same way.)
    const json& want_back = exp["probe_token_ids"][i];
    auto back = tok.token_to_id(want);
    if (want_back.is_null())
      EXPECT_FALSE(back.has_value()) << label << " token_to_id(" << quote(want) << ")";
    else
      EXPECT_EQ(back, std::optional<int64_t>(want_back.get<int64_t>())) << label << " token_to_id(" << quote(want) << ")";
  }
  for (const auto& a : exp.at("added_tokens")) {
    const int64_t id = a["id"].get<int64_t>();
    EXPECT_EQ(tok.token_to_id(a["content"].get<std::string>()), std::optional<int64_t>(id)) << label;
    EXPECT_EQ(tok.is_special(id), a["special"].get<bool>()) << label << " is_special(" << id << ")";
  }
  std::cout << "[ " << label << " ] " << strings.size() << " strings, " << lists.size()
            << " id lists; exact round trips " << exact_roundtrip << ", strings HF itself does not round-trip "
            << hf_not_roundtrip << "\n";
}

/// Builds variant `name` with the oracle in a scratch dir private to this test and checks it.
void run_variant(const std::string& name) {
  fs::path dir = hs::test::scratch_dir("tokenizer_variant_" + name);
  hs::test::run_oracle("tokenizer_oracle.py", {"variant", name, "--out", dir.string()});
  Tokenizer tok = Tokenizer::from_file(dir / "tokenizer.json");
  check_against_oracle(tok, hs::test::read_json(dir / "expected.json"), name);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

/// A tiny, valid byte-level tokenizer.json (alphabet a, b, space; merge "a b").
json tiny_tokenizer() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 5, "content": "<s>", "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
              "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "\u0120": 2, "ab": 3, "\u0120a": 4},
              "merges": [["a", "b"], ["\u0120", "a"]]}
  })");
}

/// Expects from_file(p) to throw a runtime_error whose message contains every needle.
void expect_load_error(const fs::path& p, const std::vector<std::string>& needles) {
  try {
    (void)Tokenizer::from_file(p);
    ADD_FAILURE() << "no error loading " << p;
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "message " << quote(msg) << " lacks " << quote(n);
  }
}

}  // namespace

TEST(Tokenizer, SmolLM2MatchesHuggingFace) {
  fs::path tj = hs::test::sample_dir() / "tokenizer.json";
  ASSERT_TRUE(fs::exists(tj)) << "sample tokenizer not found: " << tj << " (./run test prepares it; run ./run sample)";
  fs::path dir = hs::test::scratch_dir("tokenizer_smollm2");
  hs::test::run_oracle("tokenizer_oracle.py", {"expect", "--tokenizer", tj.string(), "--out",
                                               (dir / "expected.json").string()});
  auto t0 = std::chrono::steady_clock::now();
  Tokenizer tok = Tokenizer::from_file(tj);
  auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(tok.vocab_size(), 49152u);
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), std::optional<int64_t>(1));
  EXPECT_TRUE(tok.is_special(2));
  const json exp = hs::test::read_json(dir / "expected.json");
  check_against_oracle(tok, exp, "SmolLM2");

  // Throughput on ~1 MB of mixed text (reported; bounded generously).
  std::string big;
  while (big.size() < (1u << 20))
    for (const auto& s : exp.at("strings")) big += s.get<std::string>() + " ";
  auto t2 = std::chrono::steady_clock::now();
  auto ids = tok.encode(big, false);
  auto t3 = std::chrono::steady_clock::now();
  EXPECT_EQ(tok.decode(ids).size(), big.size());
  double load_s = std::chrono::duration<double>(t1 - t0).count();
  double enc_s = std::chrono::duration<double>(t3 - t2).count();
  std::cout << "[ SmolLM2 ] load " << load_s << " s; encode " << big.size() / 1e6 << " MB -> " << ids.size()
            << " ids in " << enc_s << " s (" << big.size() / 1e6 / enc_s << " MB/s)\n";
  EXPECT_LT(enc_s, 30.0);
}

// Qwen2-style (NFC; Split(Qwen2 regex, Isolated) + ByteLevel(use_regex=false); ChatML specials)
// trained by `tokenizers` during the test; merges in the [["a","b"]] form `tokenizers` writes...
TEST(Tokenizer, QwenStylePairMergesMatchesHuggingFace) { run_variant("qwen_pairs"); }
// ...and the same file with merges rewritten to the legacy "a b" form (plus a #version line).
TEST(Tokenizer, QwenStyleStringMergesMatchesHuggingFace) { run_variant("qwen_strings"); }
// Llama-3 style: \p{N}{1,3} split, ignore_merges, post-processor Sequence[ByteLevel, Template(BOS $A)].
TEST(Tokenizer, Llama3StyleMatchesHuggingFace) { run_variant("llama3_style"); }
// Digits(individual) + ByteLevel(add_prefix_space, GPT-2 regex), Sequence[NFKD, NFC], template on both sides.
TEST(Tokenizer, Gpt2DigitsPrefixSpaceMatchesHuggingFace) { run_variant("gpt2_digits_prefix"); }
// Split with String/Regex patterns and MergedWithPrevious/MergedWithNext/Contiguous/Removed, Digits(contiguous).
TEST(Tokenizer, SplitBehaviorsMatchHuggingFace) { run_variant("split_behaviors"); }
// invert + Removed, \w \s \d classes, a pattern with empty matches (onig iteration rules), NFKC.
TEST(Tokenizer, SplitInvertAndRegexClassesMatchHuggingFace) { run_variant("split_invert_classes"); }
// Added tokens with lstrip / rstrip / single_word / normalized (NFKC-normalized content), overlaps.
TEST(Tokenizer, AddedTokenFlagsMatchHuggingFace) { run_variant("added_token_flags"); }
// Raw characters to the model: unknown ones fuse into unk_token; no decoder (tokens joined by " ").
TEST(Tokenizer, UnkTokenAndNoDecoderMatchHuggingFace) { run_variant("no_decoder_unk"); }
// Raw characters without unk_token: unknown characters are dropped, as HF does.
TEST(Tokenizer, MissingCharactersDroppedLikeHuggingFace) { run_variant("raw_dropped"); }

// The Unicode 15-17 delta table compiled into the tokenizer equals what the installed `tokenizers`
// reports (catches a `tokenizers` upgrade whose Oniguruma / Rust Unicode tables moved on).
TEST(Tokenizer, UnicodeDeltaTableMatchesInstalledTokenizers) {
  std::string out = hs::test::run_oracle(
      "tokenizer_unicode_delta.py", {"--check", (hs::test::source_dir() / "models/tokenizer.cpp").string()});
  EXPECT_NE(out.find("up to date"), std::string::npos) << out;
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  fs::path dir = hs::test::scratch_dir("tokenizer_concurrent");
  hs::test::run_oracle("tokenizer_oracle.py", {"variant", "qwen_pairs", "--out", dir.string()});
  Tokenizer tok = Tokenizer::from_file(dir / "tokenizer.json");
  json exp = hs::test::read_json(dir / "expected.json");
  std::vector<std::string> strings;
  for (const auto& s : exp["strings"]) strings.push_back(s.get<std::string>());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = 0; i < strings.size(); ++i) {
          size_t k = (i * 7 + static_cast<size_t>(t) * 13 + static_cast<size_t>(rep)) % strings.size();
          if (tok.encode(strings[k]) != exp["ids"][k].get<std::vector<int64_t>>()) ++mismatches[t];
        }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(Tokenizer, TinyTokenizerApi) {
  fs::path dir = hs::test::scratch_dir("tokenizer_tiny");
  write_file(dir / "tokenizer.json", tiny_tokenizer().dump());
  Tokenizer tok = Tokenizer::from_file(dir / "tokenizer.json");
  EXPECT_EQ(tok.vocab_size(), 6u);  // ids 0..4 + added id 5
  EXPECT_EQ(tok.encode("ab a<s>b"), (std::vector<int64_t>{3, 4, 5, 1}));
  EXPECT_EQ(tok.encode(""), std::vector<int64_t>{});
  EXPECT_EQ(tok.decode({3, 4, 5, 1}), "ab a<s>b");
  EXPECT_EQ(tok.decode({3, 4, 5, 1}, true), "ab ab");
  EXPECT_EQ(tok.decode({3, 999, -1, 1}), "abb");  // unknown ids are skipped, as HF does
  EXPECT_EQ(tok.token_to_id("\xC4\xA0" "a"), std::optional<int64_t>(4));
  EXPECT_EQ(tok.token_to_id("zz"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(5), "<s>");
  EXPECT_THROW(tok.id_to_token(6), std::out_of_range);
  EXPECT_THROW(tok.id_to_token(-1), std::out_of_range);
  EXPECT_TRUE(tok.is_special(5));
  EXPECT_FALSE(tok.is_special(3));
  EXPECT_FALSE(tok.is_special(-7));
  EXPECT_THROW(tok.encode("bad \xFF utf8"), std::invalid_argument);
  EXPECT_THROW(tok.encode("\xC3"), std::invalid_argument);
  // Characters outside the vocab (no unk_token) are dropped, as HF does.
  EXPECT_EQ(tok.encode("abc"), (std::vector<int64_t>{3}));
}

TEST(Tokenizer, BadInputNamesFileAndField) {
  fs::path dir = hs::test::scratch_dir("tokenizer_bad_input");

  expect_load_error(dir / "does_not_exist.json", {"does_not_exist.json"});

  write_file(dir / "invalid.json", "{\"model\": {\"type\": \"BPE\", ");
  expect_load_error(dir / "invalid.json", {"invalid.json", "invalid JSON"});

  write_file(dir / "not_object.json", "[1, 2, 3]");
  expect_load_error(dir / "not_object.json", {"not_object.json"});

  // A FIFO is refused at once (opening it used to wait for a writer forever); a folder is named.
  fs::remove(dir / "fifo.json");
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0644), 0);
  expect_load_error(dir / "fifo.json", {(dir / "fifo.json").string() + ": not a regular file"});
  fs::create_directories(dir / "folder.json");
  expect_load_error(dir / "folder.json", {(dir / "folder.json").string() + ": a folder, not a file"});

  auto variant = [&](const std::string& name, auto&& edit, const std::vector<std::string>& needles) {
    json j = tiny_tokenizer();
    edit(j);
    fs::path p = dir / (name + ".json");
    write_file(p, j.dump());
    std::vector<std::string> all{p.filename().string()};
    all.insert(all.end(), needles.begin(), needles.end());
    expect_load_error(p, all);
  };
  variant("wordpiece", [](json& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "WordPiece"});
  variant("unigram", [](json& j) { j["model"]["type"] = "Unigram"; }, {"model.type", "Unigram"});
  variant("no_model", [](json& j) { j.erase("model"); }, {"model"});
  variant("no_vocab", [](json& j) { j["model"].erase("vocab"); }, {"model.vocab"});
  // An empty vocab encodes every prompt to nothing: the tokenizer is named, not the prompt.
  variant("empty_vocab",
          [](json& j) {
            j["model"]["vocab"] = json::object();
            j["model"]["merges"] = json::array();
            j["added_tokens"] = json::array();
          },
          {"model.vocab", "is empty"});
  variant("metaspace", [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; },
          {"pre_tokenizer.type", "Metaspace"});
  variant("nested_pretok",
          [](json& j) {
            j["pre_tokenizer"] = {{"type", "Sequence"},
                                  {"pretokenizers", json::array({j["pre_tokenizer"], {{"type", "Whitespace"}}})}};
          },
          {"pre_tokenizer.pretokenizers[1].type", "Whitespace"});
  variant("lowercase", [](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, {"normalizer.type", "Lowercase"});
  variant("bad_regex",
          [](json& j) {
            j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                                  {"behavior", "Isolated"}, {"invert", false}};
          },
          {"pre_tokenizer.pattern.Regex"});
  variant("bad_behavior",
          [](json& j) {
            j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}},
                                  {"behavior", "Sideways"}, {"invert", false}};
          },
          {"pre_tokenizer.behavior", "Sideways"});
  variant("merge_three_parts", [](json& j) { j["model"]["merges"] = json::array({"a b", "a b c"}); },
          {"model.merges[1]"});
  variant("merge_not_pair", [](json& j) { j["model"]["merges"] = json::array({json::array({"a", "b", "c"})}); },
          {"model.merges[0]"});
  variant("merge_unknown_token", [](json& j) { j["model"]["merges"] = json::array({json::array({"a", "z"})}); },
          {"model.merges[0]", "\"z\""});
  variant("merge_result_missing", [](json& j) { j["model"]["merges"] = json::array({"b a"}); },
          {"model.merges[0]", "\"ba\""});
  variant("merges_mixed", [](json& j) { j["model"]["merges"] = json::array({"a b", json::array({"a", "b"})}); },
          {"model.merges[1]"});
  variant("bad_vocab_id", [](json& j) { j["model"]["vocab"]["a"] = "zero"; }, {"model.vocab"});
  variant("byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; }, {"model.byte_fallback"});
  variant("dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout"});
  variant("wordpiece_decoder", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, {"decoder.type", "WordPiece"});
  variant("bert_processor", [](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; },
          {"post_processor.type", "BertProcessing"});
  variant("template_missing_special",
          [](json& j) {
            j["post_processor"] = {{"type", "TemplateProcessing"},
                                   {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                                   {"special_tokens", json::object()}};
          },
          {"post_processor.single[0].SpecialToken.id", "<bos>"});
  variant("truncation", [](json& j) { j["truncation"] = {{"max_length", 8}}; }, {"truncation"});
  variant("added_no_content", [](json& j) { j["added_tokens"][0].erase("content"); },
          {"added_tokens[0].content"});
}

namespace {
/// The message of from_file(p)'s runtime_error ("" when it loads).
std::string tokenizer_load_error(const fs::path& p) {
  try {
    (void)Tokenizer::from_file(p);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// Found by a hostile try-out: a tokenizer.json that is not JSON was named with nlohmann's own text
// ("invalid JSON: [json.exception.parse_error.101] parse error at line 1, column 1: ..."). The
// file, the line and column, and the reason in plain words.
TEST(Tokenizer, InvalidJsonIsNamedInPlainWords) {
  fs::path dir = hs::test::scratch_dir("tokenizer_invalid_json");
  struct Case {
    std::string name, text, says;
  };
  const Case cases[] = {
      {"empty", "", "invalid JSON at line 1, column 1 (byte 0): the text is empty (no JSON value)"},
      {"blank", " \n", "invalid JSON at line 2, column 1 (byte 2): the text is empty (no JSON value)"},
      {"cut", "{\"model\": {\"type\": \"BPE\", ",
       "invalid JSON at line 1, column 27 (byte 26): the text ends before the JSON value is complete"},
      {"nan", "{\n  \"a\": NaN}", "invalid JSON at line 2, column 8 (byte 9): 'NaN' is not a JSON value (JSON has no "
                                   "NaN or Infinity)"},
      {"trailing", "{} x",
       "invalid JSON at line 1, column 4 (byte 3): more text after the JSON value, from 'x' (0x78)"},
      {"utf8", "{\"a\": \"\xC3(\"}",
       "invalid JSON at line 1, column 9 (byte 8): a string holds bytes that are not UTF-8"},
      {"nul", std::string("{\"a\": 1}\0 x", 11),
       "invalid JSON at line 1, column 9 (byte 8): a NUL byte (0x00): JSON text never holds one"},
      {"comma", "{\"a\": 1,}", "invalid JSON at line 1, column 9 (byte 8): found '}' in an object where a string was "
                               "expected"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path p = dir / (c.name + ".json");
    write_file(p, c.text);
    const std::string msg = tokenizer_load_error(p);
    EXPECT_EQ(msg, p.string() + ": " + c.says);
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
}

// Found by a hostile try-out: a tokenizer.json nested 1,000,000 deep and one holding a 70 MB
// string were read (the file's only bound was its 1 GiB size). Nesting past 64 levels and a
// string past 1 MiB are refused before nlohmann builds anything; a string of 1 MiB still loads.
TEST(Tokenizer, DeepNestingAndLongStringsAreRefused) {
  fs::path dir = hs::test::scratch_dir("tokenizer_bounds");
  const std::string head = R"({"x": )";
  json j = tiny_tokenizer();
  const std::string valid = j.dump();
  const std::string deep = head + std::string(1'000'000, '[') + std::string(1'000'000, ']') + ", " + valid.substr(1);
  write_file(dir / "deep.json", deep);
  EXPECT_EQ(tokenizer_load_error(dir / "deep.json"),
            (dir / "deep.json").string() + ": JSON nested deeper than 64 levels (byte " +
                std::to_string(head.size() + 63) + ")");

  for (size_t n : {size_t{1} << 20, (size_t{1} << 20) + 1, size_t{70} << 20}) {
    SCOPED_TRACE(n);
    j["x"] = std::string(n, 'a');
    const fs::path p = dir / "long_string.json";
    write_file(p, j.dump());
    const std::string msg = tokenizer_load_error(p);
    if (n == size_t{1} << 20) {
      EXPECT_EQ(msg, "");
      continue;
    }
    const size_t at = j.dump().find("\"aaa");
    EXPECT_EQ(msg, p.string() + ": a string longer than 1 MiB at line 1, column " + std::to_string(at + 1) +
                       " (byte " + std::to_string(at) + ") (hookscope reads strings up to that size)");
  }
}

// A pre-tokenizer regex that backtracks past PCRE2's match limit on some text fails naming the
// tokenizer file, the field and the pattern (it used to say only "match limit exceeded").
TEST(Tokenizer, RegexMatchLimitNamesFileAndField) {
  fs::path dir = hs::test::scratch_dir("tokenizer_match_limit");
  json j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}, {"invert", false}};
  write_file(dir / "catastrophic.json", j.dump());
  Tokenizer tok = Tokenizer::from_file(dir / "catastrophic.json");
  try {
    tok.encode(std::string(40, 'a') + "!");
    FAIL() << "expected the match limit";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    for (const std::string& part : std::vector<std::string>{(dir / "catastrophic.json").string(),
                                                            "pre_tokenizer.pattern.Regex", "(a+)+$", "limit"})
      EXPECT_NE(msg.find(part), std::string::npos) << part << " in " << msg;
  }
}

// Long single words (tens of thousands of characters in one pre-token: 20,000 x U+A66E, a random
// Latin word, a random mixed-script word, 20,000 digits, 20,000 spaces; 50,000 x 'a' with a
// merge-less byte-level tokenizer and with cascading merges a+a, aa+aa, ...; 5,000 whitespace
// added tokens with lstrip + rstrip in one run), and short cases where an rstrip token swallows
// later matches: the same ids as `tokenizers` (BPE runs a priority queue over a linked list of
// symbols, O(n log n) per word; bench/tokenizer_long_word.py measures the growth).
TEST(Tokenizer, LongWordsMatchHuggingFace) {
  fs::path tj = hs::test::sample_dir() / "tokenizer.json";
  ASSERT_TRUE(fs::exists(tj)) << "sample tokenizer not found: " << tj;
  fs::path dir = hs::test::scratch_dir("tokenizer_long_words");
  hs::test::run_oracle("tokenizer_oracle.py", {"long_words", "--tokenizer", tj.string(), "--out", dir.string()});
  const json cases = hs::test::read_json(dir / "long_words.json");
  ASSERT_GE(cases.size(), 16u);
  std::map<std::string, Tokenizer> toks;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string key = cases[i].at("tokenizer").get<std::string>();
    if (!toks.count(key)) toks.emplace(key, Tokenizer::from_file(key == "given" ? tj : dir / key));
    const std::string text = cases[i].at("text").get<std::string>();
    const auto want = cases[i].at("ids").get<std::vector<int64_t>>();
    std::vector<int64_t> got;
    ASSERT_NO_THROW(got = toks.at(key).encode(text, false)) << "case " << i;
    if (got == want) continue;
    size_t k = 0;
    while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
    ADD_FAILURE() << "case " << i << " (" << key << ", " << text.size() << " bytes starting "
                  << quote(text.substr(0, 12)) << "): " << got.size() << " ids, HF " << want.size()
                  << "; first difference at id #" << k;
  }
}
