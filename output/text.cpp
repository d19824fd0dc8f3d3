#include "output/text.h"

#include <sstream>
#include <stdexcept>

namespace hs::output {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    out.push_back(item.substr(b, item.find_last_not_of(" \t") - b + 1));
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

namespace {
// `c` (below U+10000) as a JSON escape, "\\u00ad".
void append_json_escape(std::string& out, unsigned c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", c);
  out += buf;
}
}  // namespace

std::string json_text(const nlohmann::json& doc, int indent) {
  std::string text = doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  // DEL and the characters terminal_text escapes beyond ASCII's controls (C1, bidi controls, line
  // separators, U+FEFF) as \u escapes: the same document, which no longer acts on a terminal it is
  // printed to. They can only stand inside strings (JSON's own syntax is ASCII).
  size_t i = 0;
  while (i < text.size() && text[i] != '\x7f' && static_cast<unsigned char>(text[i]) < 0xc2) ++i;
  if (i == text.size()) return text;
  std::string out(text, 0, i);
  for (; i < text.size();) {
    if (text[i] == '\x7f') {
      append_json_escape(out, 0x7f);
      ++i;
    } else if (const auto [cp, n] = invisible_character_at(text, i); n) {
      append_json_escape(out, cp);
      i += n;
    } else {
      out += text[i++];
    }
  }
  return out;
}

void refuse_invalid_utf8(const std::string& flag, const std::string& value) {
  try {
    (void)nlohmann::json(value).dump();
  } catch (const nlohmann::json::type_error& e) {  // type_error.316: "invalid UTF-8 byte at index N: 0xFF"
    const std::string what = e.what();
    const size_t at = what.find("invalid UTF-8");
    throw std::invalid_argument(flag + ": not valid UTF-8 (" + (at == std::string::npos ? what : what.substr(at)) + ")");
  }
}

std::string cut_text(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max > 3 ? max - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;  // not inside a UTF-8 character
  std::string out(s.substr(0, cut));
  return out += "...";
}

size_t utf8_length_at(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned b = at(0);
  if (i >= s.size()) return 0;
  if (b < 0x80) return 1;
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (b >= 0xc2 && b <= 0xdf) n = 2;
  else if (b >= 0xe0 && b <= 0xef) n = 3, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  return n;
}

std::pair<unsigned, size_t> invisible_character_at(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  if (at(0) == 0xc2 && at(1) >= 0x80 && at(1) <= 0x9f) return {at(1), 2};  // C1
  if (at(0) == 0xef && at(1) == 0xbb && at(2) == 0xbf) return {0xfeff, 3};
  if (at(0) != 0xe2 || at(1) < 0x80 || at(1) > 0x81 || at(2) < 0x80 || at(2) > 0xbf) return {0, 0};
  const unsigned cp = 0x2000 + ((at(1) & 0x3f) << 6) + (at(2) & 0x3f);
  const bool hidden = cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
  return hidden ? std::pair<unsigned, size_t>{cp, 3} : std::pair<unsigned, size_t>{0, 0};
}

std::string terminal_text(std::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    if ((u < 0x20 && !(keep_lines && (u == '\n' || u == '\t'))) || u == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
      ++i;
    } else if (const auto [cp, n] = invisible_character_at(s, i); n) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
      i += n;
    } else if (const size_t len = utf8_length_at(s, i); len == 0) {  // not UTF-8: the byte's value
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

void refuse_control_characters(const std::string& flag, const std::string& value) {
  for (size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f)
      throw std::invalid_argument(flag + ": holds a control character (" + (c == '\n' ? std::string("a newline") : c == '\t' ? std::string("a tab") : "byte " + std::to_string(c)) +
                                  ") at offset " + std::to_string(i) + "; a name is one line");
  }
}
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {  // a capture's text may hold any bytes: JSON holds UTF-8, each bad byte is U+FFFD
      const size_t n = utf8_length_at(s, i);
      if (n == 0) out += "\\ufffd";
      else if (const auto [cp, len] = invisible_character_at(s, i); len) append_json_escape(out, cp);  // as json_text
      else out.append(s.substr(i, n));
      i += std::max<size_t>(n, 1) - 1;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace hs::output
