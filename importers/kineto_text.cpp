#include "importers/kineto_text.h"

#include <charconv>
#include <limits>
#include <optional>

#include "importers/kineto_reader.h"

namespace hs::importers::kineto {

namespace detail {

// A key as a message names it: printable ASCII of at most 64 bytes as it is, anything else as
// a JSON string (cut), so a key of control bytes or megabytes cannot garble the message.
std::string member_name(const std::string& k) {
  const bool plain = !k.empty() && k.size() <= 64 && std::all_of(k.begin(), k.end(), [](char c) {
    return c > 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) return k;
  std::string q = json(k.substr(0, 64)).dump(-1, ' ', true, json::error_handler_t::replace);
  return k.size() > 64 ? q.substr(0, q.size() - 1) + "...\"" : q;
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at ..." head.
std::string syntax_message(const nlohmann::detail::exception& ex) {
  std::string what = ex.what();
  if (auto p = what.find("syntax error"); p != std::string::npos) return what.substr(p);
  if (auto q = what.find("] "); q != std::string::npos) return what.substr(q + 2);
  return what;
}

// A value's name in messages: "traceEvents[12]", "deviceProperties[0]", a top-level key.
std::string where_name(const Where& w) {
  switch (w.kind) {
    case Where::Kind::Event: return "traceEvents[" + std::to_string(w.index) + "]";
    case Where::Kind::Device: return "deviceProperties[" + std::to_string(w.index) + "]";
    case Where::Kind::Member: return member_name(w.key);
    case Where::Kind::Root: break;
  }
  return "the top-level value";
}

// The text ends (at byte `at`) before a value it began does.
[[noreturn]] void text_ends_early(const fs::path& file, uint64_t at, bool truncated, const std::string& what) {
  if (truncated) throw ImportError(file, at_byte(at), "the gzip stream ends early (truncated file)");
  if (at == 0) throw ImportError(file, "", "the file is empty");
  throw ImportError(file, at_byte(at), "the JSON text ends early (truncated file?)" + (what.empty() ? "" : ": " + what));
}

// The value [begin, end) of the JSON text, its bytes at `text`, through nlohmann: its syntax
// error, if any, names the byte; with `nodes`, values past it are dropped while parsing (the
// result is then null). `at_text_end`: the value ends where the text read so far ends (an
// error past it is the text ending early; `truncated`: in a truncated gzip stream).
json parse_text(const fs::path& file, const char* text, uint64_t begin, uint64_t end, size_t* nodes,
                const Where* where, bool at_text_end, bool truncated) {
  json::parser_callback_t count = nullptr;
  if (nodes)
    count = [nodes](int, json::parse_event_t ev, json&) {
      if (ev == json::parse_event_t::key || ev == json::parse_event_t::object_end ||
          ev == json::parse_event_t::array_end)
        return *nodes <= kMaxMetadataNodes;
      return ++*nodes <= kMaxMetadataNodes;
    };
  try {
    return json::parse(text, text + (end - begin), count);
  } catch (const json::exception& ex) {  // parse_error, or out_of_range: a number past double
    const auto* parse = dynamic_cast<const json::parse_error*>(&ex);
    const uint64_t at = begin + (parse && parse->byte > 0 ? parse->byte - 1 : 0);
    const std::string what = syntax_message(ex);
    if (at >= end && at_text_end) text_ends_early(file, end, truncated, what);
    throw ImportError(file, at_byte(at),
                      std::string("not valid JSON") + (where ? " (" + where_name(*where) + ")" : "") + ": " + what);
  }
}

}  // namespace detail

std::optional<simdjson::dom::element> member(simdjson::dom::object o, std::string_view key) {
  std::optional<simdjson::dom::element> found;
  for (const auto field : o)
    if (field.key == key) found = field.value;
  return found;
}

namespace {
// decimal_us_to_ns of what Kineto writes ("5243847375771.562": up to 15 integer digits and up
// to 3 after the dot, no exponent), which needs no rounding and fits int64 ns; nullopt for any
// other text (decimal_us_to_ns's general path then reads it).
std::optional<int64_t> plain_us_to_ns(std::string_view s) {
  size_t i = s.size() > 0 && s[0] == '-';
  int64_t us = 0, frac = 0;
  size_t int_digits = 0, frac_digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (++int_digits > 15) return std::nullopt;
    us = us * 10 + (s[i] - '0');
  }
  if (int_digits == 0) return std::nullopt;
  if (i < s.size()) {
    if (s[i] != '.') return std::nullopt;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (++frac_digits > 3) return std::nullopt;
      frac = frac * 10 + (s[i] - '0');
    }
    if (frac_digits == 0 || i != s.size()) return std::nullopt;
  }
  for (size_t d = frac_digits; d < 3; ++d) frac *= 10;
  const int64_t ns = us * 1000 + frac;
  return s[0] == '-' ? -ns : ns;
}
}  // namespace

std::optional<int64_t> decimal_us_to_ns(std::string_view s) {
  if (const auto ns = plain_us_to_ns(s)) return ns;
  size_t i = 0;
  const bool negative = i < s.size() && s[i] == '-';
  if (negative) ++i;
  // Significant digits as one integer, and the power of ten that scales it to ns.
  __int128 digits = 0;
  int scale = 3, mantissa_digits = 0;
  bool any = false, dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any = true;
    if (digits == 0 && c == '0') {
      if (dot) --scale;
      continue;
    }
    // Past 36 significant digits: in the integer part the value is past int64 ns; after the
    // dot the digit lies 1e-17 ns or further below the ns and cannot change the rounding to it.
    if (mantissa_digits == 36) {
      if (!dot) return std::nullopt;
      continue;
    }
    ++mantissa_digits;
    digits = digits * 10 + (c - '0');
    if (dot) --scale;
  }
  if (!any) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool neg_exp = i < s.size() && s[i] == '-';
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    int exp = 0;
    bool exp_digits = false;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      exp_digits = true;
      if (exp < 10000) exp = exp * 10 + (s[i] - '0');
    }
    if (!exp_digits) return std::nullopt;
    scale += neg_exp ? -exp : exp;
  }
  if (i != s.size()) return std::nullopt;
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (digits == 0) return 0;
  for (; scale > 0; --scale) {
    digits *= 10;
    if (digits > kMax) return std::nullopt;
  }
  if (scale < 0) {
    if (scale < -38) return 0;  // below 0.01 ns: the significand has at most 36 digits
    __int128 div = 1;
    for (int k = 0; k < -scale; ++k) div *= 10;
    const __int128 q = digits / div, rem = digits % div;
    digits = q + (2 * rem >= div ? 1 : 0);
  }
  if (digits > kMax) return std::nullopt;
  const auto v = static_cast<int64_t>(digits);
  return negative ? -v : v;
}

}  // namespace hs::importers::kineto
