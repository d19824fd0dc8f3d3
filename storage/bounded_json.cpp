#include "storage/bounded_json.h"

#include <cstdio>

namespace hs::storage {

namespace {

std::string mib(size_t bytes) {
  return bytes % (size_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

/// One byte of untrusted text, for a message: "'x' (0x78)", "the byte 0xC3", "a NUL byte (0x00)".
std::string byte_name(unsigned char c) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", c);
  if (c == 0) return "a NUL byte (0x00)";
  if (c < 0x20 || c >= 0x7F) return std::string("the byte ") + hex;
  return std::string("'") + static_cast<char>(c) + "' (" + hex + ")";
}

bool literal_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
         c == '.' || c == '_';
}

/// nlohmann's name of a token ("string literal", "'['", "end of input") in plain words.
std::string token_words(std::string_view t) {
  if (t == "string literal") return "a string";
  if (t == "number literal") return "a number";
  if (t == "true literal") return "'true'";
  if (t == "false literal") return "'false'";
  if (t == "null literal") return "'null'";
  if (t == "end of input") return "the end of the text";
  if (t == "'[', '{', or a literal" || t == "'[', '{', or literal" || t == "literal" || t == "value")
    return "a value";
  if (t == "<parse error>") return "a malformed token";
  return std::string(t);
}

/// The SAX pass of find_json_syntax_error: builds nothing, notes whether a whole value was read
/// and the first error.
struct FirstError {
  size_t depth = 0;
  bool complete = false;
  std::optional<JsonSyntaxError> error;
  std::string_view text;

  bool value() {
    if (depth == 0) complete = true;
    return true;
  }
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(nlohmann::json::number_integer_t) { return value(); }
  bool number_unsigned(nlohmann::json::number_unsigned_t) { return value(); }
  bool number_float(nlohmann::json::number_float_t, const nlohmann::json::string_t&) { return value(); }
  bool string(nlohmann::json::string_t&) { return value(); }
  bool binary(nlohmann::json::binary_t&) { return value(); }
  bool start_object(std::size_t) {
    ++depth;
    return true;
  }
  bool key(nlohmann::json::string_t&) { return true; }
  bool end_object() {
    --depth;
    return value();
  }
  bool start_array(std::size_t) {
    ++depth;
    return true;
  }
  bool end_array() {
    --depth;
    return value();
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::json::exception& e) {
    error = json_syntax_error(text, position, last_token, e, complete);
    return false;
  }
};

template <class Json>
Json parse_bounded(std::string_view text, std::string_view what, const JsonLimits& limits) {
  check_json_bounds(text, what, limits);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception&) {  // parse errors, and numbers past a double
    const std::optional<JsonSyntaxError> e = find_json_syntax_error(text);
    throw JsonError(JsonError::Kind::Invalid, what,
                    "not valid JSON " + (e ? describe_json_error(text, *e) : std::string("(no detail)")));
  }
}

}  // namespace

std::string json_too_deep(size_t max_depth) {
  return "JSON nested deeper than " + std::to_string(max_depth) + " levels";
}

size_t json_depth_exceeded_at(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

std::string json_position(std::string_view text, size_t byte) {
  if (byte > text.size()) byte = text.size();
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < byte; ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return "line " + std::to_string(line) + ", column " + std::to_string(byte - line_start + 1) + " (byte " +
         std::to_string(byte) + ")";
}

JsonSyntaxError json_syntax_error(std::string_view text, size_t position, const std::string& last_token,
                                  const nlohmann::json::exception& e, bool complete) {
  JsonSyntaxError out;
  // nlohmann counts the byte it failed on (the end of the text counts as one): 0-based, less one.
  out.byte = position == 0 ? 0 : position - 1;
  if (out.byte > text.size()) out.byte = text.size();
  const unsigned char at = out.byte < text.size() ? static_cast<unsigned char>(text[out.byte]) : 0;
  if (e.id == 406) {  // out_of_range.406: "number overflow parsing 'TOKEN'"
    out.number_overflow = true;
    std::string number = last_token.size() > 40 ? last_token.substr(0, 37) + "..." : last_token;
    out.byte = position >= last_token.size() ? position - last_token.size() : 0;
    out.reason = "number overflow: " + number + " is past a double's range";
    return out;
  }
  // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while parsing
  // CONTEXT - WHAT; last read: 'TOKEN'": keep CONTEXT and WHAT, in plain words.
  std::string_view m = e.what();
  std::string context;
  if (const size_t s = m.find("syntax error while parsing "); s != std::string_view::npos) {
    m.remove_prefix(s + std::string_view("syntax error while parsing ").size());
    const size_t dash = m.find(" - ");
    if (dash != std::string_view::npos) {
      context = std::string(m.substr(0, dash));
      m.remove_prefix(dash + 3);
    }
  } else if (const size_t b = m.find("] "); starts_with(m, "[json.exception.") && b != std::string_view::npos) {
    m.remove_prefix(b + 2);
  }
  if (const size_t lr = m.find("; last read: "); lr != std::string_view::npos) m = m.substr(0, lr);
  const std::string where = starts_with(context, "object") ? " in an object" : context == "array" ? " in an array" : "";

  if (starts_with(m, "unexpected end of input") || (starts_with(m, "invalid string: missing closing quote") &&
                                                    out.byte >= text.size())) {
    bool blank = true;
    for (char c : text) blank = blank && (c == ' ' || c == '\t' || c == '\n' || c == '\r');
    out.reason = blank ? "the text is empty (no JSON value)" : "the text ends before the JSON value is complete";
    out.byte = text.size();
    return out;
  }
  if (complete) {  // the value was whole: what follows it is not JSON
    size_t from = out.byte;
    while (from > 0 && literal_char(static_cast<unsigned char>(text[from - 1]))) --from;
    out.byte = from;
    out.reason = "more text after the JSON value, from " +
                 byte_name(from < text.size() ? static_cast<unsigned char>(text[from]) : 0);
    return out;
  }
  if (m == "invalid literal") {  // a word that is not true, false or null, or a byte no token starts with
    size_t from = out.byte;
    while (from > 0 && literal_char(static_cast<unsigned char>(text[from - 1]))) --from;
    size_t to = from;
    while (to < text.size() && to - from < 24 && literal_char(static_cast<unsigned char>(text[to]))) ++to;
    out.byte = from;
    if (to == from) {
      out.reason = "unexpected " + byte_name(at) + where;
    } else {
      const std::string word(text.substr(from, to - from));
      const bool cut = to < text.size() && literal_char(static_cast<unsigned char>(text[to]));
      out.reason = "'" + word + (cut ? "...'" : "'") + " is not a JSON value" +
                   (word == "NaN" || word == "Infinity" || word == "-Infinity" ? " (JSON has no NaN or Infinity)"
                                                                              : " (a string needs double quotes)");
    }
    return out;
  }
  if (starts_with(m, "invalid string: ")) {
    const std::string_view what = m.substr(std::string_view("invalid string: ").size());
    char control[96];
    std::snprintf(control, sizeof control,
                  "a string holds the control character 0x%02X unescaped (escape it as \\u%04X)", at, at);
    if (starts_with(what, "ill-formed UTF-8")) out.reason = "a string holds bytes that are not UTF-8";
    else if (starts_with(what, "control character")) out.reason = control;
    else if (starts_with(what, "missing closing quote")) out.reason = "a string has no closing quote";
    else out.reason = "a malformed string: " + std::string(what);
    return out;
  }
  if (starts_with(m, "invalid number")) {  // "invalid number; expected digit after '-'"
    const size_t semi = m.find("; ");
    out.reason = "a malformed number" + where;
    if (semi != std::string_view::npos) out.reason += ": " + std::string(m.substr(semi + 2));
    return out;
  }
  if (starts_with(m, "unexpected ")) {  // "unexpected ','; expected string literal"
    std::string_view found = m.substr(std::string_view("unexpected ").size()), expected;
    if (const size_t semi = found.find("; expected "); semi != std::string_view::npos) {
      expected = found.substr(semi + std::string_view("; expected ").size());
      found = found.substr(0, semi);
    }
    out.reason = "found " + token_words(found) + where +
                 (expected.empty() ? std::string() : " where " + token_words(expected) + " was expected");
    return out;
  }
  if (starts_with(m, "invalid BOM")) {
    out.reason = "the text starts with bytes that are not UTF-8's byte order mark";
    return out;
  }
  out.reason = std::string(m);  // a message of a later nlohmann, as it words it
  return out;
}

std::optional<JsonSyntaxError> find_json_syntax_error(std::string_view text) {
  FirstError h;
  h.text = text;
  try {
    nlohmann::json::sax_parse(text.begin(), text.end(), &h, nlohmann::json::input_format_t::json, /*strict=*/true,
                              /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {  // not expected from a SAX pass; worded all the same
    if (!h.error) h.error = json_syntax_error(text, 0, "", e, h.complete);
  }
  return h.error;
}

std::string describe_json_error(std::string_view text, const JsonSyntaxError& e) {
  return "at " + json_position(text, e.byte) + ": " + e.reason;
}

void check_json_bounds(std::string_view text, std::string_view what, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    throw JsonError(JsonError::Kind::TooLarge, what,
                    "JSON text of " + std::to_string(text.size()) + " bytes, more than the " + mib(limits.max_bytes) +
                        " hookscope reads in one value");
  size_t depth = 0, string_start = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0')
      throw JsonError(JsonError::Kind::Invalid, what,
                      "not valid JSON at " + json_position(text, i) + ": a NUL byte (0x00): JSON text never holds one");
    if (in_string) {
      if (i - string_start > limits.max_string_bytes)
        throw JsonError(JsonError::Kind::StringTooLong, what,
                        "a string longer than " + mib(limits.max_string_bytes) + " at " +
                            json_position(text, string_start - 1) + " (hookscope reads strings up to that size)");
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      string_start = i + 1;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_depth)
        throw JsonError(JsonError::Kind::TooDeep, what,
                        json_too_deep(limits.max_depth) + " (byte " + std::to_string(i) + ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, const JsonLimits& limits) {
  return parse_bounded<nlohmann::json>(text, what, limits);
}

nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, std::string_view what,
                                                  const JsonLimits& limits) {
  return parse_bounded<nlohmann::ordered_json>(text, what, limits);
}

}  // namespace hs::storage
