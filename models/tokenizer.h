// Byte-level BPE tokenizer read from a HuggingFace `tokenizer.json` (GPT-2, SmolLM2, Qwen2/2.5/3,
// Llama-3 style files).
//
// It mirrors the encode/decode pipeline of huggingface/tokenizers (the Rust crate behind the Python
// `tokenizers` package, checked against 0.23.x), step by step:
//
//  1. Added tokens (`added_tokens`) are split out of the raw text first: leftmost-longest,
//     non-overlapping matching (HF: Aho-Corasick `LeftmostLongest`), with `single_word` (the match
//     must not touch a word character on either side; a rejected match is dropped, not retried
//     shorter), `lstrip`/`rstrip` (the match swallows neighbouring whitespace) as in
//     `AddedVocabulary::find_matches`. Tokens with `normalized:false` are matched on the raw text;
//     tokens with `normalized:true` are matched afterwards, on each normalized remaining piece,
//     against their normalized content. An added token whose content is already in the model vocab
//     keeps that id; others get ids from the model vocab size upwards (HF ignores the `id` field).
//  2. Normalizer, applied per remaining piece: none, `NFC`/`NFD`/`NFKC`/`NFKD`, or a `Sequence`
//     of those. ICU `Normalizer2` filtered to characters assigned by Unicode 9.0, because HF's
//     normalizer crate has Unicode 9.0 tables (newer characters pass through unchanged there).
//  3. Pre-tokenizer: `ByteLevel` (`add_prefix_space`, `use_regex` = the GPT-2 regex; then every
//     byte becomes its `bytes_to_unicode` character), `Split` (`{"Regex": ...}` or
//     `{"String": ...}` pattern, `behavior` Removed / Isolated / MergedWithPrevious /
//     MergedWithNext / Contiguous, `invert`), `Digits` (`individual_digits`, Rust's
//     `char::is_numeric`), or a `Sequence` of those; empty pieces are dropped.
//     HF's regexes are Oniguruma (Ruby syntax); they run here on PCRE2 (UTF + UCP) after a
//     rewrite that gives \w \s \d \h \b and \p{<general category>} Oniguruma's meaning, including
//     its newer Unicode tables (a generated table of code points assigned after Unicode 14, see
//     tests/oracles/tokenizer_unicode_delta.py), and are iterated with the empty-match rule of
//     the `onig` crate's find_iter. Not rewritten (PCRE2 semantics): negated shorthands inside
//     a character class, script properties, POSIX brackets, nested classes.
//  4. Model `BPE`: merges as `"a b"` strings (`#version` lines skipped) or `[["a","b"]]` pairs;
//     rank = list index; the lowest-rank pair merges first, leftmost on ties (HF `Word::merge_all`).
//     `ignore_merges` emits a whole pre-token that is itself in the vocab directly; characters
//     missing from the vocab become `unk_token` (fused when `fuse_unk`), or are dropped when there
//     is no `unk_token`, as HF does. `dropout`, `byte_fallback`, `continuing_subword_prefix` and
//     `end_of_word_suffix` are rejected when set (byte-level files do not use them).
//     Results for pre-tokens shorter than 256 bytes are cached (10000 entries, as HF).
//  5. Post-processor (only with `add_special_tokens`): `TemplateProcessing` (the `single`
//     template: `SpecialToken` and `Sequence` pieces), `ByteLevel` (no-op for ids), `Sequence`.
//  6. Decoder: `ByteLevel` (inverse byte map per token — a token with a character outside the
//     map contributes its raw UTF-8 — then `String::from_utf8_lossy`: each maximal invalid UTF-8
//     subsequence becomes one U+FFFD), a `Sequence` holding one ByteLevel, or no decoder (tokens
//     joined with " ", as HF). Normalized added tokens decode from their normalized form, as HF.
//  `truncation` must be null, `padding` null or BatchLongest (a no-op for one sequence): both are
//  rejected otherwise rather than silently ignored.
//
// Thread-safety: all const methods may be called concurrently (the BPE cache has a mutex).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hs::models {

class Tokenizer {
 public:
  /// Loads `tokenizer.json`. Throws std::runtime_error whose message names the file and the
  /// offending field (e.g. "model.type", "pre_tokenizer.pretokenizers[1].type", "model.merges[7]")
  /// when the file is missing or unreadable, no regular file (a FIFO or a folder: refused at once),
  /// over 1 GiB, is not valid JSON, the model is not BPE (WordPiece,
  /// Unigram, WordLevel), a normalizer / pre-tokenizer / post-processor / decoder type is not
  /// supported, a Split regex does not compile, or a merge is malformed or names a token (or a
  /// merged token) that is not in the vocab.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  /// Same, from the JSON text; `origin` names the source in error messages.
  static Tokenizer from_json_string(std::string_view json_text, const std::string& origin);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Token ids of `text` (valid UTF-8; throws std::invalid_argument otherwise). With
  /// `add_special_tokens`, the post-processor adds its template tokens (e.g. a BOS id); special
  /// tokens written in the text are always recognised (HF's default, encode_special_tokens=false).
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const;
  /// Text of `ids`. Ids that are not in the vocabulary are skipped, as HF does. With
  /// `skip_special_tokens`, tokens whose text is a special added token are left out.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;
  /// Id of a token string (added tokens first, then the model vocab); byte-level form, e.g. "Ġthe".
  std::optional<int64_t> token_to_id(std::string_view token) const;
  /// Token string of an id (byte-level form). Throws std::out_of_range for ids not in the vocab.
  std::string id_to_token(int64_t id) const;
  /// Max id + 1 over the model vocab and the added tokens.
  size_t vocab_size() const;
  /// Whether `id` is an added token marked `special` (skipped by decode(..., true)).
  bool is_special(int64_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hs::models
