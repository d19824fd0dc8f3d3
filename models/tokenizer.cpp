// Byte-level BPE tokenizer, a port of the huggingface/tokenizers pipeline (see tokenizer.h).
// Rust sources mirrored: tokenizer/added_vocabulary.rs, tokenizer/normalizer.rs (split
// behaviours), tokenizer/pattern.rs, pre_tokenizers/{byte_level,split,digits,sequence}.rs,
// models/bpe/{model,word,serialization}.rs, processors/template.rs, decoders (ByteLevel);
// onig's FindMatches for regex iteration.
#include "models/tokenizer.h"
#include "models/regular_file.h"
#include "storage/bounded_json.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <fstream>
#include <functional>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

namespace hs::models {
namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Errors: every load error names the source and the JSON field.

struct Origin {
  std::string name;
  /// The field and the message are cut at 1,000 bytes each: they quote the file's strings
  /// (up to 1 MiB each), and an error message stays short.
  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    auto cut = [](const std::string& s) { return s.size() > 1000 ? s.substr(0, 997) + "..." : s; };
    throw std::runtime_error(name + ": " + cut(field) + ": " + cut(msg));
  }
};

const json& require(const Origin& o, const json& obj, const std::string& path, const char* key) {
  if (!obj.is_object()) o.fail(path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) o.fail(path + "." + key, "missing");
  return *it;
}

std::string get_string(const Origin& o, const json& obj, const std::string& path, const char* key) {
  const json& v = require(o, obj, path, key);
  if (!v.is_string()) o.fail(path + "." + key, "expected a string");
  return v.get<std::string>();
}

bool get_bool(const Origin& o, const json& obj, const std::string& path, const char* key,
              bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) o.fail(path + "." + key, "expected a boolean");
  return it->get<bool>();
}

std::string type_of(const Origin& o, const json& obj, const std::string& path) {
  if (!obj.is_object()) o.fail(path, "expected an object");
  return get_string(o, obj, path, "type");
}

// ---------------------------------------------------------------------------------------------
// UTF-8 helpers. Text reaching these is valid UTF-8 (checked once in encode()).

inline size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  return 4;
}

inline char32_t decode_at(std::string_view s, size_t i, size_t* len_out) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  size_t n = utf8_len(b(0));
  char32_t c;
  switch (n) {
    case 1: c = b(0); break;
    case 2: c = ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu); break;
    case 3: c = ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu); break;
    default:
      c = ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
  }
  if (len_out) *len_out = n;
  return c;
}

/// Code point ending at byte offset `end` (> 0).
inline char32_t decode_before(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return decode_at(s, i, nullptr);
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

/// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid. When invalid,
/// `*bad_len` receives the length of the maximal invalid prefix that one U+FFFD replaces (the
/// rule of Rust's `String::from_utf8_lossy` / `Utf8Chunks`).
size_t valid_seq_len(std::string_view s, size_t i, size_t* bad_len) {
  auto at = [&](size_t k) -> int {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : -1;
  };
  int b0 = at(0);
  auto in = [](int v, int lo, int hi) { return v >= lo && v <= hi; };
  size_t need;
  int lo1 = 0x80, hi1 = 0xBF;
  if (b0 < 0x80) return 1;
  if (in(b0, 0xC2, 0xDF)) {
    need = 2;
  } else if (b0 == 0xE0) {
    need = 3, lo1 = 0xA0;
  } else if (in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) {
    need = 3;
  } else if (b0 == 0xED) {
    need = 3, hi1 = 0x9F;
  } else if (b0 == 0xF0) {
    need = 4, lo1 = 0x90;
  } else if (in(b0, 0xF1, 0xF3)) {
    need = 4;
  } else if (b0 == 0xF4) {
    need = 4, hi1 = 0x8F;
  } else {
    *bad_len = 1;
    return 0;
  }
  if (!in(at(1), lo1, hi1)) {
    *bad_len = 1;
    return 0;
  }
  for (size_t k = 2; k < need; ++k) {
    if (!in(at(k), 0x80, 0xBF)) {
      *bad_len = k;
      return 0;
    }
  }
  return need;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    size_t n = valid_seq_len(s, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// Rust's String::from_utf8_lossy.
std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    size_t n = valid_seq_len(s, i, &bad);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// ---------------------------------------------------------------------------------------------
// Unicode-version gap. HF's Oniguruma knows Unicode 16 and the Rust std of its build Unicode 17;
// Debian's PCRE2 10.42 knows Unicode 14 and ICU 72 Unicode 15. kUnicodeDelta lists, by general
// category, the code points unassigned in Unicode 14 that HF's Oniguruma classifies; they are
// added to the rewritten regex classes and (as the nearest available measurement) to the Rust
// regex `\w` used for single_word. kRustNumericDelta does the same for char::is_numeric.

struct UnicodeDelta {
  const char* category;  // two-letter general category
  char32_t first, last;
};

// BEGIN generated by tests/oracles/tokenizer_unicode_delta.py (do not edit)
// Code points unassigned in Unicode 14.0 (PCRE2 10.42) by the general category that
// HF tokenizers' Oniguruma gives them.
constexpr UnicodeDelta kUnicodeDelta[] = {
    {"Lu", 0x1C89, 0x1C89},
    {"Lu", 0xA7CB, 0xA7CC},
    {"Lu", 0xA7DA, 0xA7DA},
    {"Lu", 0xA7DC, 0xA7DC},
    {"Lu", 0x10D50, 0x10D65},
    {"Ll", 0x1C8A, 0x1C8A},
    {"Ll", 0xA7CD, 0xA7CD},
    {"Ll", 0xA7DB, 0xA7DB},
    {"Ll", 0x10D70, 0x10D85},
    {"Ll", 0x1DF25, 0x1DF2A},
    {"Lm", 0x10D4E, 0x10D4E},
    {"Lm", 0x10D6F, 0x10D6F},
    {"Lm", 0x16D40, 0x16D42},
    {"Lm", 0x16D6B, 0x16D6C},
    {"Lm", 0x1E030, 0x1E06D},
    {"Lm", 0x1E4EB, 0x1E4EB},
    {"Lo", 0x105C0, 0x105F3},
    {"Lo", 0x10D4A, 0x10D4D},
    {"Lo", 0x10D4F, 0x10D4F},
    {"Lo", 0x10EC2, 0x10EC4},
    {"Lo", 0x1123F, 0x11240},
    {"Lo", 0x11380, 0x11389},
    {"Lo", 0x1138B, 0x1138B},
    {"Lo", 0x1138E, 0x1138E},
    {"Lo", 0x11390, 0x113B5},
    {"Lo", 0x113B7, 0x113B7},
    {"Lo", 0x113D1, 0x113D1},
    {"Lo", 0x113D3, 0x113D3},
    {"Lo", 0x11BC0, 0x11BE0},
    {"Lo", 0x11F02, 0x11F02},
    {"Lo", 0x11F04, 0x11F10},
    {"Lo", 0x11F12, 0x11F33},
    {"Lo", 0x1342F, 0x1342F},
    {"Lo", 0x13441, 0x13446},
    {"Lo", 0x13460, 0x143FA},
    {"Lo", 0x16100, 0x1611D},
    {"Lo", 0x16D43, 0x16D6A},
    {"Lo", 0x18CFF, 0x18CFF},
    {"Lo", 0x1B132, 0x1B132},
    {"Lo", 0x1B155, 0x1B155},
    {"Lo", 0x1E4D0, 0x1E4EA},
    {"Lo", 0x1E5D0, 0x1E5ED},
    {"Lo", 0x1E5F0, 0x1E5F0},
    {"Lo", 0x2B739, 0x2B739},
    {"Lo", 0x2EBF0, 0x2EE5D},
    {"Lo", 0x31350, 0x323AF},
    {"Mn", 0x897, 0x897},
    {"Mn", 0xECE, 0xECE},
    {"Mn", 0x10D69, 0x10D6D},
    {"Mn", 0x10EFC, 0x10EFF},
    {"Mn", 0x11241, 0x11241},
    {"Mn", 0x113BB, 0x113C0},
    {"Mn", 0x113CE, 0x113CE},
    {"Mn", 0x113D0, 0x113D0},
    {"Mn", 0x113D2, 0x113D2},
    {"Mn", 0x113E1, 0x113E2},
    {"Mn", 0x11F00, 0x11F01},
    {"Mn", 0x11F36, 0x11F3A},
    {"Mn", 0x11F40, 0x11F40},
    {"Mn", 0x11F42, 0x11F42},
    {"Mn", 0x11F5A, 0x11F5A},
    {"Mn", 0x13440, 0x13440},
    {"Mn", 0x13447, 0x13455},
    {"Mn", 0x1611E, 0x16129},
    {"Mn", 0x1612D, 0x1612F},
    {"Mn", 0x1E08F, 0x1E08F},
    {"Mn", 0x1E4EC, 0x1E4EF},
    {"Mn", 0x1E5EE, 0x1E5EF},
    {"Mc", 0xCF3, 0xCF3},
    {"Mc", 0x113B8, 0x113BA},
    {"Mc", 0x113C2, 0x113C2},
    {"Mc", 0x113C5, 0x113C5},
    {"Mc", 0x113C7, 0x113CA},
    {"Mc", 0x113CC, 0x113CD},
    {"Mc", 0x113CF, 0x113CF},
    {"Mc", 0x11F03, 0x11F03},
    {"Mc", 0x11F34, 0x11F35},
    {"Mc", 0x11F3E, 0x11F3F},
    {"Mc", 0x11F41, 0x11F41},
    {"Mc", 0x1612A, 0x1612C},
    {"Nd", 0x10D40, 0x10D49},
    {"Nd", 0x116D0, 0x116E3},
    {"Nd", 0x11BF0, 0x11BF9},
    {"Nd", 0x11F50, 0x11F59},
    {"Nd", 0x16130, 0x16139},
    {"Nd", 0x16D70, 0x16D79},
    {"Nd", 0x1CCF0, 0x1CCF9},
    {"Nd", 0x1E4F0, 0x1E4F9},
    {"Nd", 0x1E5F1, 0x1E5FA},
    {"No", 0x1D2C0, 0x1D2D3},
    {"Pd", 0x10D6E, 0x10D6E},
    {"Po", 0x1B4E, 0x1B4F},
    {"Po", 0x1B7F, 0x1B7F},
    {"Po", 0x113D4, 0x113D5},
    {"Po", 0x113D7, 0x113D8},
    {"Po", 0x11B00, 0x11B09},
    {"Po", 0x11BE1, 0x11BE1},
    {"Po", 0x11F43, 0x11F4F},
    {"Po", 0x16D6D, 0x16D6F},
    {"Po", 0x1E5FF, 0x1E5FF},
    {"Sm", 0x10D8E, 0x10D8F},
    {"So", 0x2427, 0x2429},
    {"So", 0x2FFC, 0x2FFF},
    {"So", 0x31E4, 0x31E5},
    {"So", 0x31EF, 0x31EF},
    {"So", 0x1CC00, 0x1CCEF},
    {"So", 0x1CD00, 0x1CEB3},
    {"So", 0x1F6DC, 0x1F6DC},
    {"So", 0x1F774, 0x1F776},
    {"So", 0x1F77B, 0x1F77F},
    {"So", 0x1F7D9, 0x1F7D9},
    {"So", 0x1F8B2, 0x1F8BB},
    {"So", 0x1F8C0, 0x1F8C1},
    {"So", 0x1FA75, 0x1FA77},
    {"So", 0x1FA87, 0x1FA89},
    {"So", 0x1FA8F, 0x1FA8F},
    {"So", 0x1FAAD, 0x1FAAF},
    {"So", 0x1FABB, 0x1FABF},
    {"So", 0x1FAC6, 0x1FAC6},
    {"So", 0x1FACE, 0x1FACF},
    {"So", 0x1FADA, 0x1FADC},
    {"So", 0x1FADF, 0x1FADF},
    {"So", 0x1FAE8, 0x1FAE9},
    {"So", 0x1FAF7, 0x1FAF8},
    {"So", 0x1FBCB, 0x1FBEF},
    {"Cf", 0x13439, 0x1343F},
};

// Code points unassigned in Unicode 14.0 that Rust's char::is_numeric (HF's Digits
// pre-tokenizer) accepts; Rust's std tables can be newer than Oniguruma's.
constexpr std::pair<char32_t, char32_t> kRustNumericDelta[] = {
    {0x10D40, 0x10D49},
    {0x116D0, 0x116E3},
    {0x11BF0, 0x11BF9},
    {0x11DE0, 0x11DE9},
    {0x11F50, 0x11F59},
    {0x16130, 0x16139},
    {0x16D70, 0x16D79},
    {0x16FF4, 0x16FF6},
    {0x1CCF0, 0x1CCF9},
    {0x1D2C0, 0x1D2D3},
    {0x1E4F0, 0x1E4F9},
    {0x1E5F1, 0x1E5FA},
};
// END generated

/// PCRE2 class text (ranges) of the delta code points whose category starts with one of
/// `prefixes` (one-letter prefixes select a whole major class).
std::string delta_ranges(std::initializer_list<std::string_view> prefixes) {
  std::string out;
  char buf[48];
  for (const UnicodeDelta& d : kUnicodeDelta) {
    std::string_view cat = d.category;
    bool take = std::any_of(prefixes.begin(), prefixes.end(),
                            [&](std::string_view p) { return cat.substr(0, p.size()) == p; });
    if (!take) continue;
    std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", static_cast<unsigned>(d.first), static_cast<unsigned>(d.last));
    out += buf;
  }
  return out;
}

/// Whether `c`, unknown to ICU, is in the delta under one of `prefixes`.
bool in_delta(char32_t c, std::initializer_list<std::string_view> prefixes) {
  if (u_charType(static_cast<UChar32>(c)) != U_UNASSIGNED) return false;
  for (const UnicodeDelta& d : kUnicodeDelta) {
    if (c < d.first || c > d.last) continue;
    std::string_view cat = d.category;
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&](std::string_view p) { return cat.substr(0, p.size()) == p; });
  }
  return false;
}

/// Whether `s` holds a code point of kUnicodeDelta (all are >= U+0800, i.e. 3- or 4-byte UTF-8).
/// Text without one matches the same under the plain and the delta-augmented regex.
bool has_delta_chars(std::string_view s) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = [] {
    std::vector<std::pair<char32_t, char32_t>> r;
    for (const UnicodeDelta& d : kUnicodeDelta) r.emplace_back(d.first, d.last);
    std::sort(r.begin(), r.end());
    return r;
  }();
  for (size_t i = 0; i < s.size();) {
    auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0xE0) {
      i += lead < 0x80 ? 1 : 2;
      continue;
    }
    size_t n = 0;
    char32_t c = decode_at(s, i, &n);
    i += n;
    auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(c, char32_t(0x10FFFF)));
    if (it != ranges.begin() && c <= std::prev(it)->second) return true;
  }
  return false;
}

bool is_general_category(std::string_view name) {
  static const std::string_view kNames[] = {
      "L", "M", "N", "P", "S", "Z", "C", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
      "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cs", "Cn"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// ---------------------------------------------------------------------------------------------
// Character classes of the Rust side. Rust `regex` `\s` = White_Space; `\w` = Alphabetic, M,
// Nd, Pc, Join_Control. `char::is_numeric` = Nd, Nl, No.
bool is_rust_whitespace(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }
bool is_rust_word(char32_t c) {
  auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) return true;
  switch (u_charType(u)) {
    case U_NON_SPACING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_DECIMAL_DIGIT_NUMBER:
    case U_CONNECTOR_PUNCTUATION:
      return true;
    case U_UNASSIGNED:
      return in_delta(c, {"L", "M", "Nd", "Nl", "Pc"});
    default:
      return false;
  }
}
bool is_rust_numeric(char32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return true;
    case U_UNASSIGNED:
      return std::any_of(std::begin(kRustNumericDelta), std::end(kRustNumericDelta),
                         [c](const auto& r) { return c >= r.first && c <= r.second; });
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// bytes_to_unicode (pre_tokenizers/byte_level.rs `bytes_char`).

struct ByteMap {
  std::array<std::string, 256> byte_to_utf8;  ///< UTF-8 of the char standing for each byte
  std::array<int16_t, 512> char_to_byte;       ///< code point (< 512) -> byte, -1 if none
  ByteMap() {
    char_to_byte.fill(-1);
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      char32_t c = direct[b] ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(byte_to_utf8[b], c);
      char_to_byte[c] = static_cast<int16_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

// ---------------------------------------------------------------------------------------------
// Regex on PCRE2, iterated like the `onig` crate's FindMatches (HF's SysRegex).

struct Span {
  size_t begin, end;
  bool is_match;
};

// Oniguruma's Unicode shorthand classes (the regex engine behind HF's SysRegex), measured
// against `tokenizers`: \w = Alphabetic, marks, Nd, Pc, plus the Latin-1 No characters
// ² ³ ¹ ¼ ½ ¾ (onig's ISO-8859-1 ctype table); \s = \t \n \v \f \r U+0085 and Z* (PCRE2's
// \s also has U+180E); \h = hex digit (PCRE2: horizontal space). \d is \p{Nd} in both.
constexpr const char* kOnigWord = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";
constexpr const char* kOnigSpace = R"(\t\n\x0B\f\r\x{85}\p{Z})";
constexpr const char* kOnigHex = "0-9a-fA-F";

/// Rewrites an Oniguruma (Ruby syntax) pattern for PCRE2 (UTF + UCP) so that \w \W \s \S \d
/// \D \h \H \b \B, general-category classes \p{L} \p{Nd} \P{N} ... and \uHHHH mean what
/// they mean in HF's Oniguruma (its Unicode 16 tables included, see kUnicodeDelta). Inside a
/// character class the negated forms (\W, \S, \D, \H, \P{..}) keep PCRE2's meaning, and POSIX
/// brackets, script properties, nested classes and && intersections follow PCRE2 (no
/// tokenizer.json we know of uses them).
/// With `with_delta` false the kUnicodeDelta ranges are left out: the result is then only valid
/// for text without such code points (see has_delta_chars), and is faster to match.
std::string onig_to_pcre2(const std::string& p, bool with_delta) {
  auto delta = [with_delta](std::initializer_list<std::string_view> cats) {
    return with_delta ? delta_ranges(cats) : std::string();
  };
  const std::string word = kOnigWord + delta({"L", "M", "Nd", "Nl", "Pc"});
  const std::string space = kOnigSpace + delta({"Z"});
  const std::string digit = R"(\p{Nd})" + delta({"Nd"});
  const std::string hex = kOnigHex;
  const std::string w = "[" + word + "]";
  std::string out;
  out.reserve(p.size() * 2);
  bool in_class = false;
  for (size_t i = 0; i < p.size();) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char d = p[i + 1];
      const std::string* set = (d == 'w' || d == 'W') ? &word : (d == 's' || d == 'S') ? &space
                               : (d == 'h' || d == 'H') ? &hex : (d == 'd' || d == 'D') ? &digit : nullptr;
      bool negated = d == 'W' || d == 'S' || d == 'H' || d == 'D';
      if (set) {
        if (!in_class) out += (negated ? "[^" : "[") + *set + "]";
        else if (!negated) out += *set;
        else out.append(p, i, 2);
        i += 2;
        continue;
      }
      if (!in_class && (d == 'b' || d == 'B')) {
        out += d == 'b' ? "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
                        : "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
        i += 2;
        continue;
      }
      if (d == 'u' && i + 6 <= p.size() &&
          std::all_of(p.begin() + static_cast<std::ptrdiff_t>(i + 2), p.begin() + static_cast<std::ptrdiff_t>(i + 6),
                      [](char h) { return std::isxdigit(static_cast<unsigned char>(h)) != 0; })) {
        out += "\\x{" + p.substr(i + 2, 4) + "}";
        i += 6;
        continue;
      }
      if ((d == 'p' || d == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        size_t e = p.find('}', i + 3);
        if (e != std::string::npos) {
          std::string_view name(p.data() + i + 3, e - i - 3);
          bool negated = d == 'P';
          if (!name.empty() && name.front() == '^') {
            negated = !negated;
            name.remove_prefix(1);
          }
          if (is_general_category(name)) {
            std::string body = "\\p{" + std::string(name) + "}" + delta({name});
            if (!in_class) out += (negated ? "[^" : "[") + body + "]";
            else if (!negated) out += body;
            else out.append(p, i, e + 1 - i);
            i = e + 1;
            continue;
          }
        }
      }
      out += c;
      out += d;
      i += 2;
      if ((d == 'p' || d == 'P' || d == 'x' || d == 'k' || d == 'g') && i < p.size() && p[i] == '{') {
        size_t e = p.find('}', i);
        e = e == std::string::npos ? p.size() : e + 1;
        out.append(p, i, e - i);
        i = e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];  // a leading ']' is literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX bracket
      size_t e = p.find(":]", i + 2);
      if (e != std::string::npos) {
        out.append(p, i, e + 2 - i);
        i = e + 2;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
    ++i;
  }
  return out;
}

class Regex {
 public:
  /// `onig_pattern` is Oniguruma syntax (rewritten for PCRE2), or a literal string. Two programs
  /// are compiled when the rewrite involves kUnicodeDelta: the plain one serves text without
  /// such code points (nearly all text), the augmented one the rest.
  Regex(const std::string& onig_pattern, bool literal, const Origin& o, const std::string& field)
      : where_(o.name + ": " + field + ": regex " + json(onig_pattern).dump()) {
    if (literal) {
      code_ = compile(onig_pattern, onig_pattern, PCRE2_UTF | PCRE2_LITERAL, o, field);  // no UCP with LITERAL
      return;
    }
    const std::string full = onig_to_pcre2(onig_pattern, true);
    const std::string plain = onig_to_pcre2(onig_pattern, false);
    code_ = compile(onig_pattern, full, PCRE2_UTF | PCRE2_UCP, o, field);
    if (plain != full) {
      try {
        code_plain_ = compile(onig_pattern, plain, PCRE2_UTF | PCRE2_UCP, o, field);
      } catch (...) {
        pcre2_code_free(code_);
        throw;
      }
    }
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() {
    pcre2_code_free(code_);
    pcre2_code_free(code_plain_);
  }

  /// Non-overlapping matches (begin, end) of the pattern in `s`, iterated like onig's
  /// FindMatches (rust-onig >= 6.1): an empty match ending where the previous match ended is
  /// skipped and the search moves on by one character.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const {
    pcre2_code* code = code_plain_ && !has_delta_chars(s) ? code_plain_ : code_;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    std::vector<std::pair<size_t, size_t>> out;
    auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t last_end = 0;
    std::optional<size_t> last_match_end;
    while (last_end <= s.size()) {
      int rc = pcre2_match(code, subject, s.size(), last_end, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code, subject, s.size(), last_end, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                         md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        std::array<PCRE2_UCHAR, 256> buf{};
        pcre2_get_error_message(rc, buf.data(), buf.size());
        throw std::runtime_error(where_ + ": matching it on a " + std::to_string(s.size()) +
                                 "-byte piece of the text failed (PCRE2: " +
                                 reinterpret_cast<const char*>(buf.data()) + ")");
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      size_t b = ov[0], e = ov[1];
      if (e < b) e = b;  // \K oddities
      if (e == b && last_match_end == e) {
        last_end += last_end < s.size() ? utf8_len(static_cast<unsigned char>(s[last_end])) : 1;
        continue;
      }
      last_end = e;
      last_match_end = e;
      out.emplace_back(b, e);
    }
    return out;
  }

  /// pattern.rs `find_matches`: the whole string as match / non-match spans.
  std::vector<Span> find_matches(std::string_view s) const {
    std::vector<Span> spans;
    if (s.empty()) {
      spans.push_back({0, 0, false});
      return spans;
    }
    size_t prev = 0;
    for (auto [b, e] : find_all(s)) {
      if (prev != b) spans.push_back({prev, b, false});
      spans.push_back({b, e, true});
      prev = e;
    }
    if (prev != s.size()) spans.push_back({prev, s.size(), false});
    return spans;
  }

 private:
  static pcre2_code* compile(const std::string& source, const std::string& pattern, uint32_t opts,
                             const Origin& o, const std::string& field) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts,
                                     &err, &err_off, nullptr);
    if (!code) {
      std::array<PCRE2_UCHAR, 256> buf{};
      pcre2_get_error_message(err, buf.data(), buf.size());
      o.fail(field, "regex " + json(source).dump() + " does not compile (PCRE2, offset " +
                        std::to_string(err_off) + " of " + json(pattern).dump() + "): " +
                        reinterpret_cast<const char*>(buf.data()));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort; the interpreter is the fallback
    return code;
  }

  std::string where_;                 // "FILE: FIELD: regex PATTERN", for match errors
  pcre2_code* code_ = nullptr;        // full rewrite (with kUnicodeDelta)
  pcre2_code* code_plain_ = nullptr;  // without kUnicodeDelta; null when identical
};

/// pattern.rs `impl Pattern for Fn(char) -> bool`.
template <class Pred>
std::vector<Span> find_char_matches(std::string_view s, Pred pred) {
  std::vector<Span> spans;
  if (s.empty()) {
    spans.push_back({0, 0, false});
    return spans;
  }
  size_t last_offset = 0, last_seen = 0;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    char32_t c = decode_at(s, i, &n);
    last_seen = i + n;
    if (pred(c)) {
      if (last_offset < i) spans.push_back({last_offset, i, false});
      spans.push_back({i, i + n, true});
      last_offset = i + n;
    }
    i += n;
  }
  if (last_seen > last_offset) spans.push_back({last_offset, last_seen, false});
  return spans;
}

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// normalizer.rs `NormalizedString::split`: applies the delimiter behaviour to the spans and
/// appends the resulting non-empty pieces to `out` (empty pieces are dropped by
/// PreTokenizedString::split).
void split_by_behavior(std::string_view s, std::vector<Span> spans, Behavior behavior,
                       std::vector<std::string>& out) {
  struct Part {
    size_t b, e;
    bool remove;
  };
  std::vector<Part> parts;
  parts.reserve(spans.size());
  switch (behavior) {
    case Behavior::Isolated:
      for (auto& sp : spans) parts.push_back({sp.begin, sp.end, false});
      break;
    case Behavior::Removed:
      for (auto& sp : spans) parts.push_back({sp.begin, sp.end, sp.is_match});
      break;
    case Behavior::Contiguous: {
      bool prev_match = false;
      for (auto& sp : spans) {
        if (sp.is_match == prev_match && !parts.empty())
          parts.back().e = sp.end;
        else
          parts.push_back({sp.begin, sp.end, false});
        prev_match = sp.is_match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool prev_match = false;
      for (auto& sp : spans) {
        if (sp.is_match && !prev_match && !parts.empty())
          parts.back().e = sp.end;
        else
          parts.push_back({sp.begin, sp.end, false});
        prev_match = sp.is_match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !prev_match && !parts.empty())
          parts.back().b = it->begin;
        else
          parts.push_back({it->begin, it->end, false});
        prev_match = it->is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
  }
  for (auto& p : parts)
    if (!p.remove && p.e > p.b) out.emplace_back(s.substr(p.b, p.e - p.b));
}

// ---------------------------------------------------------------------------------------------
// Normalizers.

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

/// HF normalizes with the `unicode-normalization-alignments` crate, whose tables are Unicode 9.0
/// (measured: every character with a decomposition or a non-zero combining class assigned up to
/// 9.0 normalizes as in ICU, none assigned later does). ICU's FilteredNormalizer2 restricted to
/// [:age=9.0:] reproduces that: later characters pass through unchanged and, like a character
/// unknown to HF's tables (a starter), block reordering and composition across them.
const icu::UnicodeSet& hf_normalization_set() {
  static const icu::UnicodeSet* set = [] {
    UErrorCode st = U_ZERO_ERROR;
    auto* s = new icu::UnicodeSet(icu::UnicodeString(u"[:age=9.0:]"), st);
    if (U_FAILURE(st)) throw std::runtime_error(std::string("ICU UnicodeSet [:age=9.0:]: ") + u_errorName(st));
    s->freeze();
    return s;
  }();
  return *set;
}

class IcuNormalizer final : public Normalizer {
 public:
  IcuNormalizer(const std::string& form, const Origin& o, const std::string& field) {
    UErrorCode st = U_ZERO_ERROR;
    const icu::Normalizer2* base;
    if (form == "NFC") base = icu::Normalizer2::getNFCInstance(st);
    else if (form == "NFD") base = icu::Normalizer2::getNFDInstance(st);
    else if (form == "NFKC") base = icu::Normalizer2::getNFKCInstance(st);
    else base = icu::Normalizer2::getNFKDInstance(st);
    if (U_FAILURE(st) || !base) o.fail(field, std::string("ICU normalizer unavailable: ") + u_errorName(st));
    n_ = std::make_unique<icu::FilteredNormalizer2>(*base, hf_normalization_set());
  }
  std::string normalize(std::string s) const override {
    if (is_ascii(s)) return s;  // every normalization form leaves ASCII unchanged
    std::string out;
    out.reserve(s.size() + 8);
    icu::StringByteSink<std::string> sink(&out);
    UErrorCode st = U_ZERO_ERROR;
    n_->normalizeUTF8(0, icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), sink, nullptr, st);
    if (U_FAILURE(st)) throw std::runtime_error(std::string("ICU normalization failed: ") + u_errorName(st));
    return out;
  }

 private:
  std::unique_ptr<icu::FilteredNormalizer2> n_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string s) const override {
    for (auto& p : parts_) s = p->normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

std::unique_ptr<Normalizer> make_normalizer(const Origin& o, const json& j, const std::string& path) {
  std::string type = type_of(o, j, path);
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<IcuNormalizer>(type, o, path);
  if (type == "Sequence") {
    const json& list = require(o, j, path, "normalizers");
    if (!list.is_array()) o.fail(path + ".normalizers", "expected an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i)
      parts.push_back(make_normalizer(o, list[i], path + ".normalizers[" + std::to_string(i) + "]"));
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  o.fail(path + ".type", "unsupported normalizer type \"" + type +
                             "\" (supported: NFC, NFD, NFKC, NFKD, Sequence)");
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers. Each maps one piece of text to its sub-pieces (non-empty), appended to `out`.

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void split(std::string_view piece, std::vector<std::string>& out) const = 0;
};

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const Origin& o, const std::string& field)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern, false, o, field);
  }
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    std::string with_prefix;
    if (add_prefix_space_ && (piece.empty() || piece.front() != ' ')) {
      with_prefix.reserve(piece.size() + 1);
      with_prefix.push_back(' ');
      with_prefix.append(piece);
      piece = with_prefix;
    }
    if (piece.empty()) return;
    const ByteMap& bm = byte_map();
    auto emit = [&](std::string_view s) {
      std::string mapped;
      mapped.reserve(s.size() * 2);
      for (unsigned char b : s) mapped += bm.byte_to_utf8[b];
      out.push_back(std::move(mapped));
    };
    if (!regex_) {
      emit(piece);
      return;
    }
    // Isolated split: every span (match or not) is its own piece.
    for (const Span& sp : regex_->find_matches(piece))
      if (sp.end > sp.begin) emit(piece.substr(sp.begin, sp.end - sp.begin));
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

Behavior parse_behavior(const Origin& o, const std::string& field, const std::string& s) {
  if (s == "Removed") return Behavior::Removed;
  if (s == "Isolated") return Behavior::Isolated;
  if (s == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::MergedWithNext;
  if (s == "Contiguous") return Behavior::Contiguous;
  o.fail(field, "unknown split behavior \"" + s + "\"");
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    std::vector<Span> spans;
    if (regex_) {
      spans = regex_->find_matches(piece);
    } else {  // empty String pattern: nothing matches
      spans.push_back({0, piece.size(), false});
    }
    if (invert_)
      for (auto& sp : spans) sp.is_match = !sp.is_match;
    split_by_behavior(piece, std::move(spans), behavior_, out);
  }

 private:
  std::unique_ptr<Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    split_by_behavior(piece, find_char_matches(piece, is_rust_numeric),
                      individual_ ? Behavior::Isolated : Behavior::Contiguous, out);
  }

 private:
  bool individual_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    std::vector<std::string> cur{std::string(piece)};
    std::vector<std::string> next;
    for (auto& p : parts_) {
      next.clear();
      for (auto& s : cur) p->split(s, next);
      std::swap(cur, next);
    }
    for (auto& s : cur) out.push_back(std::move(s));
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Origin& o, const json& j, const std::string& path) {
  std::string type = type_of(o, j, path);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(get_bool(o, j, path, "add_prefix_space", true),
                                                   get_bool(o, j, path, "use_regex", true), o, path);
  }
  if (type == "Split") {
    const json& pat = require(o, j, path, "pattern");
    std::string ppath = path + ".pattern";
    if (!pat.is_object() || pat.size() != 1) o.fail(ppath, "expected {\"Regex\": ...} or {\"String\": ...}");
    std::unique_ptr<Regex> regex;
    if (auto it = pat.find("Regex"); it != pat.end()) {
      if (!it->is_string()) o.fail(ppath + ".Regex", "expected a string");
      regex = std::make_unique<Regex>(it->get<std::string>(), false, o, ppath + ".Regex");
    } else if (auto it2 = pat.find("String"); it2 != pat.end()) {
      if (!it2->is_string()) o.fail(ppath + ".String", "expected a string");
      std::string lit = it2->get<std::string>();
      if (!lit.empty()) regex = std::make_unique<Regex>(lit, true, o, ppath + ".String");
    } else {
      o.fail(ppath, "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    Behavior b = parse_behavior(o, path + ".behavior", get_string(o, j, path, "behavior"));
    return std::make_unique<SplitPreTokenizer>(std::move(regex), b, get_bool(o, j, path, "invert", false));
  }
  if (type == "Digits")
    return std::make_unique<DigitsPreTokenizer>(get_bool(o, j, path, "individual_digits", false));
  if (type == "Sequence") {
    const json& list = require(o, j, path, "pretokenizers");
    if (!list.is_array()) o.fail(path + ".pretokenizers", "expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i)
      parts.push_back(make_pre_tokenizer(o, list[i], path + ".pretokenizers[" + std::to_string(i) + "]"));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  o.fail(path + ".type", "unsupported pre_tokenizer type \"" + type +
                             "\" (supported: ByteLevel, Split, Digits, Sequence)");
}

// ---------------------------------------------------------------------------------------------
// BPE model (models/bpe/model.rs, word.rs).

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using StrMap = std::unordered_map<std::string, uint32_t, SvHash, std::equal_to<>>;

struct PairHash {
  size_t operator()(uint64_t x) const noexcept {  // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<size_t>(x);
  }
};

inline uint64_t pair_key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

class Bpe {
 public:
  Bpe(const Origin& o, const json& m) {
    const std::string path = "model";
    // vocab
    const json& v = require(o, m, path, "vocab");
    if (!v.is_object()) o.fail("model.vocab", "expected an object of token -> id");
    if (v.empty()) o.fail("model.vocab", "is empty: the tokenizer has no tokens to encode any text with");
    vocab_.reserve(v.size());
    vocab_r_.reserve(v.size());
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > UINT32_MAX)
        o.fail("model.vocab[\"" + it.key() + "\"]", "expected an integer id from 0 to 4294967295");
      auto id = static_cast<uint32_t>(it->get<int64_t>());
      vocab_[it.key()] = id;
      vocab_r_[id] = it.key();
    }
    // options
    if (auto it = m.find("dropout"); it != m.end() && !it->is_null()) {
      if (!it->is_number()) o.fail("model.dropout", "expected a number or null");
      if (it->get<double>() != 0.0) o.fail("model.dropout", "BPE dropout is not supported");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (auto it = m.find(key); it != m.end() && !it->is_null()) {
        if (!it->is_string()) o.fail(std::string("model.") + key, "expected a string or null");
        if (!it->get<std::string>().empty())
          o.fail(std::string("model.") + key, "non-empty value is not supported");
      }
    }
    if (get_bool(o, m, path, "byte_fallback", false)) o.fail("model.byte_fallback", "byte_fallback is not supported");
    ignore_merges_ = get_bool(o, m, path, "ignore_merges", false);
    fuse_unk_ = get_bool(o, m, path, "fuse_unk", false);
    if (auto it = m.find("unk_token"); it != m.end() && !it->is_null()) {
      if (!it->is_string()) o.fail("model.unk_token", "expected a string or null");
      unk_token_ = it->get<std::string>();
    }
    // merges: ["a b", ...] (legacy, "#version" lines skipped) or [["a", "b"], ...]
    const json& ms = require(o, m, path, "merges");
    if (!ms.is_array()) o.fail("model.merges", "expected an array");
    merges_.reserve(ms.size());
    bool legacy = !ms.empty() && ms.front().is_string();
    uint32_t rank = 0;
    for (size_t i = 0; i < ms.size(); ++i) {
      const json& e = ms[i];
      std::string field = "model.merges[" + std::to_string(i) + "]";
      std::string a, b;
      if (legacy) {
        if (!e.is_string()) o.fail(field, "expected a \"a b\" string like the other merges");
        std::string line = e.get<std::string>();
        if (line.rfind("#version", 0) == 0) continue;
        size_t sp = line.find(' ');
        if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
          o.fail(field, "malformed merge \"" + line + "\" (expected two tokens separated by one space)");
        a = line.substr(0, sp);
        b = line.substr(sp + 1);
      } else {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string())
          o.fail(field, "malformed merge (expected a pair of strings)");
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      }
      auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(a + b);
      if (ia == vocab_.end()) o.fail(field, "merge token \"" + a + "\" is not in the vocab");
      if (ib == vocab_.end()) o.fail(field, "merge token \"" + b + "\" is not in the vocab");
      if (iab == vocab_.end()) o.fail(field, "merged token \"" + a + b + "\" is not in the vocab");
      merges_[pair_key(ia->second, ib->second)] = Merge{rank, iab->second};
      ++rank;
    }
    if (unk_token_) {
      // HF errors on use (UnkTokenOutOfVocabulary); failing at load is earlier and clearer.
      auto it = vocab_.find(*unk_token_);
      if (it == vocab_.end()) o.fail("model.unk_token", "\"" + *unk_token_ + "\" is not in the vocab");
      unk_id_ = it->second;
    }
  }

  size_t size() const { return vocab_.size(); }
  std::optional<uint32_t> token_to_id(std::string_view t) const {
    auto it = vocab_.find(t);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* id_to_token(uint32_t id) const {
    auto it = vocab_r_.find(id);
    return it == vocab_r_.end() ? nullptr : &it->second;
  }
  uint32_t max_id() const {
    uint32_t m = 0;
    for (auto& [id, _] : vocab_r_) m = std::max(m, id);
    return m;
  }

  /// BPE::tokenize for one pre-token (with the word cache).
  void tokenize(std::string_view word, std::vector<int64_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
      if (auto it = vocab_.find(word); it != vocab_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    bool cacheable = word.size() < kMaxCachedLength;
    if (cacheable) {
      std::shared_lock lock(cache_mu_);
      if (auto it = cache_.find(word); it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<uint32_t> ids = merge_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (cacheable) {
      std::unique_lock lock(cache_mu_);
      if (cache_.size() < kCacheCapacity) cache_.try_emplace(std::string(word), std::move(ids));
    }
  }

 private:
  static constexpr size_t kCacheCapacity = 10000;  // utils/cache.rs DEFAULT_CACHE_CAPACITY
  static constexpr size_t kMaxCachedLength = 256;  // utils/cache.rs MAX_LENGTH

  struct Merge {
    uint32_t rank;
    uint32_t new_id;
  };
  struct Symbol {
    uint32_t c;
    int64_t prev, next;
    size_t len;
  };

  const Merge* find_merge(uint32_t a, uint32_t b) const {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  /// BPE::merge_word + Word::merge_all (dropout off).
  std::vector<uint32_t> merge_word(std::string_view w) const {
    std::vector<Symbol> syms;
    syms.reserve(w.size());
    auto add = [&](uint32_t c, size_t len) {
      int64_t n = static_cast<int64_t>(syms.size());
      if (!syms.empty()) syms.back().next = n;
      syms.push_back({c, n - 1, -1, len});
    };
    // A pending unk symbol (HF keeps it aside to fuse consecutive unknown characters).
    bool has_unk = false;
    size_t unk_len = 0;
    for (size_t i = 0; i < w.size();) {
      size_t n = utf8_len(static_cast<unsigned char>(w[i]));
      std::string_view ch = w.substr(i, n);
      i += n;
      if (auto it = vocab_.find(ch); it != vocab_.end()) {
        if (has_unk) {
          add(unk_id_, unk_len);
          has_unk = false;
        }
        add(it->second, n);
      } else if (unk_token_) {
        if (has_unk && fuse_unk_) {
          unk_len += n;
        } else {
          if (has_unk) add(unk_id_, unk_len);
          has_unk = true;
          unk_len = n;
        }
      }
      // else: HF drops characters that are neither in the vocab nor covered by an unk token.
    }
    if (has_unk) add(unk_id_, unk_len);

    struct Cand {
      size_t pos;
      uint32_t rank, new_id;
    };
    auto worse = [](const Cand& x, const Cand& y) {  // min-heap on (rank, pos)
      return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
    };
    // A priority queue of candidate merges over the linked list of symbols; entries made stale
    // by a neighbour's merge are skipped when popped: O(n log n) in the word's length. The
    // initial candidates are heapified at once (O(n)); (rank, pos) orders them totally.
    std::vector<Cand> initial;
    initial.reserve(syms.size());
    for (size_t i = 0; i + 1 < syms.size(); ++i)
      if (const Merge* m = find_merge(syms[i].c, syms[i + 1].c)) initial.push_back({i, m->rank, m->new_id});
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> queue(worse, std::move(initial));

    while (!queue.empty()) {
      Cand top = queue.top();
      queue.pop();
      Symbol& cur = syms[top.pos];
      if (cur.len == 0 || cur.next == -1) continue;
      auto next_pos = static_cast<size_t>(cur.next);
      Symbol right = syms[next_pos];
      const Merge* m = find_merge(cur.c, right.c);
      if (!m || m->new_id != top.new_id) continue;
      cur.c = top.new_id;
      cur.len += right.len;
      cur.next = right.next;
      syms[next_pos].len = 0;
      if (right.next > -1 && static_cast<size_t>(right.next) < syms.size())
        syms[static_cast<size_t>(right.next)].prev = static_cast<int64_t>(top.pos);
      if (cur.prev >= 0) {
        auto prev = static_cast<size_t>(cur.prev);
        if (const Merge* pm = find_merge(syms[prev].c, cur.c)) queue.push({prev, pm->rank, pm->new_id});
      }
      if (cur.next >= 0 && static_cast<size_t>(cur.next) < syms.size()) {
        auto nx = static_cast<size_t>(cur.next);
        if (const Merge* nm = find_merge(cur.c, syms[nx].c)) queue.push({top.pos, nm->rank, nm->new_id});
      }
    }
    std::vector<uint32_t> ids;
    ids.reserve(syms.size());
    for (auto& s : syms)
      if (s.len != 0) ids.push_back(s.c);
    return ids;
  }

  StrMap vocab_;
  std::unordered_map<uint32_t, std::string> vocab_r_;
  std::unordered_map<uint64_t, Merge, PairHash> merges_;
  std::optional<std::string> unk_token_;
  uint32_t unk_id_ = 0;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>, SvHash, std::equal_to<>> cache_;
};

// ---------------------------------------------------------------------------------------------
// Added tokens (tokenizer/added_vocabulary.rs).

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
  std::optional<std::string> normalized_form;  ///< normalizer(content) when it differs
};

/// Byte trie giving leftmost-longest, non-overlapping matches (daachorse LeftmostLongest).
class MatchTrie {
 public:
  void add(std::string_view pattern, size_t token_index) {
    if (pattern.empty()) return;
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
    int32_t node = 0;
    for (unsigned char b : pattern) {
      uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        terminal_.push_back(-1);
        it = edges_.emplace(key, static_cast<int32_t>(terminal_.size() - 1)).first;
      }
      node = it->second;
    }
    if (terminal_[static_cast<size_t>(node)] < 0) terminal_[static_cast<size_t>(node)] = static_cast<int64_t>(token_index);
  }
  bool empty() const { return terminal_.size() <= 1; }

  struct Match {
    size_t begin, end, token_index;
  };
  std::vector<Match> find_all(std::string_view s) const {
    std::vector<Match> out;
    size_t pos = 0;
    while (pos < s.size()) {
      if (!first_byte_[static_cast<unsigned char>(s[pos])]) {
        ++pos;
        continue;
      }
      int32_t node = 0;
      int64_t best_tok = -1;
      size_t best_end = 0;
      for (size_t i = pos; i < s.size(); ++i) {
        auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(s[i]));
        if (it == edges_.end()) break;
        node = it->second;
        if (terminal_[static_cast<size_t>(node)] >= 0) {
          best_tok = terminal_[static_cast<size_t>(node)];
          best_end = i + 1;
        }
      }
      if (best_tok >= 0) {
        out.push_back({pos, best_end, static_cast<size_t>(best_tok)});
        pos = best_end;
      } else {
        ++pos;
      }
    }
    return out;
  }

 private:
  std::unordered_map<uint64_t, int32_t, PairHash> edges_;
  std::vector<int64_t> terminal_{-1};  // node 0 = root
  std::array<bool, 256> first_byte_{};
};

/// A piece of the input during encoding: text still to tokenize, or a resolved added token.
struct Piece {
  std::string text;
  int64_t id = -1;
};

// ---------------------------------------------------------------------------------------------
// Post-processor and decoder.

struct TemplatePiece {
  bool is_sequence;
  std::vector<int64_t> ids;  // special token ids
};

}  // namespace

// =============================================================================================

struct Tokenizer::Impl {
  Origin origin;
  std::unique_ptr<Bpe> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  // Post-processing: the chain of TemplateProcessing single templates (ByteLevel is a no-op).
  std::vector<std::vector<TemplatePiece>> templates;
  // Decoding: a ByteLevel decoder, or none (tokens joined with " ").
  bool has_decoder = false;

  std::vector<AddedToken> added;                  // in insertion order
  StrMap added_by_content;                        // content -> id
  std::unordered_map<uint32_t, size_t> added_by_id;  // id -> index in `added`
  std::unordered_set<std::string> special_contents;
  MatchTrie raw_trie, normalized_trie;
  size_t vocab_size = 0;

  void load(const json& j);
  void load_added_tokens(const json& list);
  void load_post_processor(const json& j, const std::string& path);
  void load_decoder(const json& j, const std::string& path);

  /// AddedVocabulary::find_matches + split_with_indices for one piece.
  void split_added(const std::string& sentence, const MatchTrie& trie, std::vector<Piece>& out) const;

  /// Added-vocabulary form of an id (normalized form for normalized tokens), else model vocab.
  const std::string* token_text(int64_t id) const {
    if (id < 0 || id > UINT32_MAX) return nullptr;
    auto uid = static_cast<uint32_t>(id);
    if (auto it = added_by_id.find(uid); it != added_by_id.end()) {
      const AddedToken& t = added[it->second];
      return t.normalized_form ? &*t.normalized_form : &t.content;
    }
    return model->id_to_token(uid);
  }
};

void Tokenizer::Impl::load(const json& j) {
  const Origin& o = origin;
  if (!j.is_object()) o.fail("(root)", "expected a JSON object");
  if (auto it = j.find("version"); it != j.end() && !(it->is_string() && it->get<std::string>() == "1.0"))
    o.fail("version", "unknown tokenizer version " + it->dump());
  if (auto it = j.find("truncation"); it != j.end() && !it->is_null())
    o.fail("truncation", "truncation is not supported (must be null)");
  if (auto it = j.find("padding"); it != j.end() && !it->is_null()) {
    // Padding to the longest of a batch does nothing to a single encoding; fixed padding would.
    const json& strat = it->is_object() && it->contains("strategy") ? (*it)["strategy"] : json();
    if (!(strat.is_string() && strat.get<std::string>() == "BatchLongest"))
      o.fail("padding", "only null or BatchLongest padding is supported");
  }

  const json& m = require(o, j, "(root)", "model");
  if (!m.is_object()) o.fail("model", "expected an object");
  std::string mtype;
  if (auto it = m.find("type"); it != m.end()) {
    if (!it->is_string()) o.fail("model.type", "expected a string");
    mtype = it->get<std::string>();
  } else if (m.contains("merges")) {
    mtype = "BPE";
  }
  if (mtype != "BPE")
    o.fail("model.type", "unsupported model type \"" + mtype + "\" (only byte-level BPE is supported)");
  model = std::make_unique<Bpe>(o, m);

  if (auto it = j.find("normalizer"); it != j.end() && !it->is_null())
    normalizer = make_normalizer(o, *it, "normalizer");
  if (auto it = j.find("pre_tokenizer"); it != j.end() && !it->is_null())
    pre_tokenizer = make_pre_tokenizer(o, *it, "pre_tokenizer");
  if (auto it = j.find("post_processor"); it != j.end() && !it->is_null())
    load_post_processor(*it, "post_processor");
  if (auto it = j.find("decoder"); it != j.end() && !it->is_null()) load_decoder(*it, "decoder");
  if (auto it = j.find("added_tokens"); it != j.end() && !it->is_null()) load_added_tokens(*it);

  size_t max_plus_one = model->size() ? static_cast<size_t>(model->max_id()) + 1 : 0;
  for (auto& t : added) max_plus_one = std::max(max_plus_one, static_cast<size_t>(t.id) + 1);
  vocab_size = max_plus_one;
}

void Tokenizer::Impl::load_added_tokens(const json& list) {
  const Origin& o = origin;
  if (!list.is_array()) o.fail("added_tokens", "expected an array");
  // AddedVocabulary::add_tokens: ids come from the vocab (added first, then model) when the
  // content is known, else are assigned from the model vocab size upwards.
  auto next_id = static_cast<uint32_t>(model->size());
  for (size_t i = 0; i < list.size(); ++i) {
    std::string path = "added_tokens[" + std::to_string(i) + "]";
    const json& e = list[i];
    AddedToken t;
    t.content = get_string(o, e, path, "content");
    t.single_word = get_bool(o, e, path, "single_word", false);
    t.lstrip = get_bool(o, e, path, "lstrip", false);
    t.rstrip = get_bool(o, e, path, "rstrip", false);
    t.normalized = get_bool(o, e, path, "normalized", true);
    t.special = get_bool(o, e, path, "special", false);
    if (t.content.empty()) continue;
    if (!is_valid_utf8(t.content)) o.fail(path + ".content", "not valid UTF-8");
    uint32_t id;
    if (auto it = added_by_content.find(t.content); it != added_by_content.end()) {
      id = it->second;
    } else if (auto mid = model->token_to_id(t.content)) {
      id = *mid;
    } else {
      id = next_id++;
    }
    t.id = id;
    if (t.normalized && normalizer) {
      std::string n = normalizer->normalize(t.content);
      if (n != t.content) t.normalized_form = std::move(n);
    }
    added_by_content[t.content] = id;
    if (t.special) special_contents.insert(t.content);
    if (auto it = added_by_id.find(id); it != added_by_id.end()) {
      added[it->second] = std::move(t);
    } else {
      added_by_id[id] = added.size();
      added.push_back(std::move(t));
    }
  }
  for (size_t k = 0; k < added.size(); ++k) {
    const AddedToken& t = added[k];
    if (t.normalized)
      normalized_trie.add(t.normalized_form ? *t.normalized_form : t.content, k);
    else
      raw_trie.add(t.content, k);
  }
}

void Tokenizer::Impl::load_post_processor(const json& j, const std::string& path) {
  const Origin& o = origin;
  std::string type = type_of(o, j, path);
  if (type == "ByteLevel") return;  // trims offsets only; ids unchanged
  if (type == "Sequence") {
    const json& list = require(o, j, path, "processors");
    if (!list.is_array()) o.fail(path + ".processors", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      load_post_processor(list[i], path + ".processors[" + std::to_string(i) + "]");
    return;
  }
  if (type != "TemplateProcessing")
    o.fail(path + ".type", "unsupported post_processor type \"" + type +
                               "\" (supported: TemplateProcessing, ByteLevel, Sequence)");
  const json& specials = require(o, j, path, "special_tokens");
  if (!specials.is_object()) o.fail(path + ".special_tokens", "expected an object");
  const json& single = require(o, j, path, "single");
  if (!single.is_array()) o.fail(path + ".single", "expected an array of pieces");
  std::vector<TemplatePiece> pieces;
  for (size_t i = 0; i < single.size(); ++i) {
    std::string ppath = path + ".single[" + std::to_string(i) + "]";
    const json& p = single[i];
    if (!p.is_object() || p.size() != 1) o.fail(ppath, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    if (auto it = p.find("Sequence"); it != p.end()) {
      std::string id = get_string(o, *it, ppath + ".Sequence", "id");
      if (id != "A") o.fail(ppath + ".Sequence.id", "a single-sequence template can only use sequence A");
      pieces.push_back({true, {}});
    } else if (auto it2 = p.find("SpecialToken"); it2 != p.end()) {
      std::string id = get_string(o, *it2, ppath + ".SpecialToken", "id");
      auto st = specials.find(id);
      if (st == specials.end()) o.fail(ppath + ".SpecialToken.id", "\"" + id + "\" is not in special_tokens");
      const json& ids = require(o, *st, path + ".special_tokens[\"" + id + "\"]", "ids");
      if (!ids.is_array()) o.fail(path + ".special_tokens[\"" + id + "\"].ids", "expected an array");
      TemplatePiece tp{false, {}};
      for (const json& x : ids) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0)
          o.fail(path + ".special_tokens[\"" + id + "\"].ids", "expected non-negative integers");
        tp.ids.push_back(x.get<int64_t>());
      }
      pieces.push_back(std::move(tp));
    } else {
      o.fail(ppath, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  templates.push_back(std::move(pieces));
}

void Tokenizer::Impl::load_decoder(const json& j, const std::string& path) {
  const Origin& o = origin;
  std::string type = type_of(o, j, path);
  if (type == "ByteLevel") {
    has_decoder = true;
    return;
  }
  if (type == "Sequence") {
    const json& list = require(o, j, path, "decoders");
    if (!list.is_array()) o.fail(path + ".decoders", "expected an array");
    if (list.empty()) o.fail(path + ".decoders", "empty decoder sequence is not supported");
    for (size_t i = 0; i < list.size(); ++i) {
      std::string p = path + ".decoders[" + std::to_string(i) + "]";
      if (type_of(o, list[i], p) != "ByteLevel")
        o.fail(p + ".type", "unsupported decoder type \"" + type_of(o, list[i], p) + "\" (supported: ByteLevel)");
    }
    // Applying ByteLevel again to its own output is not the identity in general; only a
    // single ByteLevel stage is supported.
    if (list.size() != 1) o.fail(path + ".decoders", "only one ByteLevel decoder is supported");
    has_decoder = true;
    return;
  }
  o.fail(path + ".type", "unsupported decoder type \"" + type + "\" (supported: ByteLevel, Sequence)");
}

void Tokenizer::Impl::split_added(const std::string& sentence, const MatchTrie& trie,
                                  std::vector<Piece>& out) const {
  auto push_text = [&](size_t b, size_t e) {
    if (e > b) out.push_back({sentence.substr(b, e - b), -1});
  };
  if (trie.empty()) {
    push_text(0, sentence.size());
    return;
  }
  size_t start_offset = 0;
  // [ws_run_begin, ws_run_end): whitespace up to the end of its run (the last rstrip walk), so
  // a run of whitespace tokens with rstrip is walked once, not once per token.
  size_t ws_run_begin = 0, ws_run_end = 0;
  for (const auto& mat : trie.find_all(sentence)) {
    size_t start = mat.begin, stop = mat.end;
    const AddedToken& tok = added[mat.token_index];
    if (tok.single_word) {
      bool start_space = start == 0 || !is_rust_word(decode_before(sentence, start));
      bool stop_space = stop == sentence.size() || !is_rust_word(decode_at(sentence, stop, nullptr));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      // Whitespace before start_offset is clamped off below: not walking past it keeps a run of
      // whitespace matches (an lstrip token that is itself whitespace) linear.
      size_t newstart = start;
      while (newstart > start_offset) {
        size_t p = newstart - 1;
        while (p > 0 && (static_cast<unsigned char>(sentence[p]) & 0xC0) == 0x80) --p;
        if (!is_rust_whitespace(decode_at(sentence, p, nullptr))) break;
        newstart = p;
      }
      start = std::max(newstart, start_offset);
    }
    if (tok.rstrip) {
      if (stop >= ws_run_begin && stop < ws_run_end) {
        stop = ws_run_end;  // inside the whitespace run an earlier rstrip walked to its end
      } else {
        const size_t from = stop;
        while (stop < sentence.size()) {
          size_t n = 0;
          char32_t c = decode_at(sentence, stop, &n);
          if (!is_rust_whitespace(c)) break;
          stop += n;
        }
        ws_run_begin = from;
        ws_run_end = stop;
      }
    }
    if (start_offset < start) push_text(start_offset, start);
    // As HF: a token whose span came out empty (an earlier rstrip swallowed it) is dropped with
    // the other empty pieces (PreTokenizedString::split), and the next text starts at this
    // token's stop even when an earlier rstrip reached further (that whitespace is encoded
    // again). HF panics ("AddedVocabulary bad split") where start > stop; here it is dropped.
    if (stop > start) out.push_back({sentence.substr(start, stop - start), static_cast<int64_t>(tok.id)});
    start_offset = stop;
  }
  if (start_offset < sentence.size()) push_text(start_offset, sentence.size());
}

// =============================================================================================

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {
/// tokenizer.json's JSON: real files nest under 10 levels; their strings (vocab and merges
/// entries, regexes, a SentencePiece normalizer's precompiled_charsmap of some 100 KB) are short.
constexpr storage::JsonLimits kTokenizerJsonLimits{
    .max_depth = 64, .max_bytes = size_t{1} << 30, .max_string_bytes = size_t{1} << 20};
}  // namespace

Tokenizer Tokenizer::from_json_string(std::string_view json_text, const std::string& origin) {
  auto impl = std::make_unique<Impl>();
  impl->origin.name = origin;
  json j;
  try {  // bounded before nlohmann builds anything (storage/bounded_json.h)
    j = storage::parse_json_bounded(json_text, origin, kTokenizerJsonLimits);
  } catch (const storage::JsonError& e) {  // parse errors, numbers too large for a double, bounds
    if (e.kind() == storage::JsonError::Kind::Invalid)
      throw std::runtime_error(origin + ": invalid JSON " + e.invalid_at());
    throw std::runtime_error(e.what());
  }
  try {
    impl->load(j);
  } catch (const json::exception& e) {  // type errors deep inside nlohmann accessors
    std::string why = e.what();  // without nlohmann's "[json.exception.type_error.302] "
    if (const size_t p = why.find("] "); why.rfind("[json.exception.", 0) == 0 && p != std::string::npos)
      why = why.substr(p + 2);
    throw std::runtime_error(origin + ": malformed tokenizer: " + why);
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  // A FIFO or a folder there is refused, not waited on; the largest real tokenizer.json files
  // are tens of MB.
  constexpr uint64_t kMaxTokenizerBytes = uint64_t{1} << 30;
  return from_json_string(read_regular_file(tokenizer_json, kMaxTokenizerBytes), tokenizer_json.string());
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& im = *impl_;
  if (!is_valid_utf8(text)) throw std::invalid_argument("Tokenizer::encode: text is not valid UTF-8");

  // 1. Non-normalized added tokens on the raw text.
  std::vector<Piece> pieces;
  im.split_added(std::string(text), im.raw_trie, pieces);
  // 2. Normalize the remaining pieces, then split out normalized added tokens.
  std::vector<Piece> normalized;
  normalized.reserve(pieces.size());
  for (Piece& p : pieces) {
    if (p.id >= 0) {
      normalized.push_back(std::move(p));
      continue;
    }
    std::string s = im.normalizer ? im.normalizer->normalize(std::move(p.text)) : std::move(p.text);
    im.split_added(s, im.normalized_trie, normalized);
  }
  // 3 + 4. Pre-tokenize and run the model on each remaining piece.
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<std::string> words;
  for (const Piece& p : normalized) {
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    if (!im.pre_tokenizer) {
      im.model->tokenize(p.text, ids);
      continue;
    }
    words.clear();
    im.pre_tokenizer->split(p.text, words);
    for (const std::string& w : words) im.model->tokenize(w, ids);
  }
  // 5. Post-processor.
  if (add_special_tokens) {
    for (const auto& tmpl : im.templates) {
      std::vector<int64_t> next;
      next.reserve(ids.size() + 4);
      for (const TemplatePiece& tp : tmpl) {
        if (tp.is_sequence)
          next.insert(next.end(), ids.begin(), ids.end());
        else
          next.insert(next.end(), tp.ids.begin(), tp.ids.end());
      }
      ids = std::move(next);
    }
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::vector<const std::string*> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const std::string* t = im.token_text(id);
    if (!t) continue;
    if (skip_special_tokens && im.special_contents.count(*t)) continue;
    tokens.push_back(t);
  }
  if (!im.has_decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out.push_back(' ');
      out += *tokens[i];
    }
    return out;
  }
  // ByteLevel decoder: chars -> bytes per token (raw UTF-8 if any char is outside the map).
  const ByteMap& bm = byte_map();
  std::string bytes;
  for (const std::string* t : tokens) {
    size_t mark = bytes.size();
    bool all_mapped = true;
    for (size_t i = 0; i < t->size();) {
      size_t n = 0;
      char32_t c = decode_at(*t, i, &n);
      i += n;
      int b = c < bm.char_to_byte.size() ? bm.char_to_byte[c] : -1;
      if (b < 0) {
        all_mapped = false;
        break;
      }
      bytes.push_back(static_cast<char>(b));
    }
    if (!all_mapped) {
      bytes.resize(mark);
      bytes += *t;
    }
  }
  return utf8_lossy(bytes);
}

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  if (auto id = impl_->model->token_to_id(token)) return *id;
  return std::nullopt;
}

std::string Tokenizer::id_to_token(int64_t id) const {
  const std::string* t = impl_->token_text(id);
  if (!t) throw std::out_of_range("Tokenizer::id_to_token: id " + std::to_string(id) + " is not in the vocabulary");
  return *t;
}

size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int64_t id) const {
  if (id < 0 || id > UINT32_MAX) return false;
  auto it = impl_->added_by_id.find(static_cast<uint32_t>(id));
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

}  // namespace hs::models
