#include "reports/markdown_text.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "output/text.h"

namespace hs::reports {
namespace {

bool word_char(unsigned char c) { return std::isalnum(c) || c >= 0x80; }

/// How many bytes of `s` at `i` are a character md_text turns into a space: an ASCII control
/// character, DEL, or one of invisible_character_at's (C1, line separators, bidi controls, BOM).
size_t control_length(std::string_view s, size_t i) {
  const auto u = static_cast<unsigned char>(s[i]);
  if (u < 0x20 || u == 0x7f) return 1;
  return output::invisible_character_at(s, i).second;
}

/// Whether the `c` at `i` of the one-line text `s` needs a backslash.
bool needs_escape(std::string_view s, size_t i) {
  const char c = s[i];
  if (c != '\0' && std::strchr("\\`*[]<&|~$#", c)) return true;
  if (c == '_')  // emphasis opens or closes only at a word's edge
    return i == 0 || i + 1 == s.size() || !word_char(static_cast<unsigned char>(s[i - 1])) ||
           !word_char(static_cast<unsigned char>(s[i + 1]));
  if (i == 0 && c == '>') return true;  // a block quote
  if ((c == '-' || c == '+') && i == 0) return s.size() == 1 || s[1] == ' ';  // a list item
  if ((c == '.' || c == ')') && i > 0 && i <= 9) {  // an ordered list item: "12. "
    for (size_t k = 0; k < i; ++k)
      if (!std::isdigit(static_cast<unsigned char>(s[k]))) return false;
    return i + 1 == s.size() || s[i + 1] == ' ';
  }
  return false;
}

}  // namespace

std::string md_text(std::string_view s) {
  std::string line;
  line.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = control_length(s, i)) {
      line += ' ';
      i += n;
    } else if (const size_t len = output::utf8_length_at(s, i); len == 0) {
      line += "\xef\xbf\xbd";  // U+FFFD: a byte that is not UTF-8 (Markdown and HTML are UTF-8 text)
      ++i;
    } else {
      line.append(s.substr(i, len));
      i += len;
    }
  }
  std::string out;
  out.reserve(line.size() + line.size() / 8);
  for (size_t i = 0; i < line.size(); ++i) {
    if (needs_escape(line, i)) out += '\\';
    out += line[i];
  }
  return out;
}

std::string md_unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && std::ispunct(static_cast<unsigned char>(s[i + 1]))) ++i;
    out += s[i];
  }
  return out;
}

std::string md_shortened(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  const size_t room = max > 3 ? max - 3 : 0;
  size_t i = 0;
  while (i < s.size()) {
    const auto u = static_cast<unsigned char>(s[i]);
    const size_t n = u == '\\' ? 2 : u < 0xc0 ? 1 : u < 0xe0 ? 2 : u < 0xf0 ? 3 : 4;
    if (i + n > room) break;
    i += n;
  }
  return std::string(s.substr(0, i)) + "...";
}

nlohmann::json md_safe(const nlohmann::json& v) {
  if (v.is_string()) return md_text(v.get_ref<const std::string&>());
  if (v.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : v) out.push_back(md_safe(e));
    return out;
  }
  if (v.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, e] : v.items()) out[md_text(k)] = md_safe(e);
    return out;
  }
  return v;
}

std::string md_code(std::string_view s, MdPlace where) {
  std::string text = md_unescape(s);
  if (where == MdPlace::cell) {
    if (text.find("\\|") != std::string::npos) return std::string(s);
    for (size_t p = text.find('|'); p != std::string::npos; p = text.find('|', p + 2)) text.insert(p, 1, '\\');
  }
  size_t longest = 0;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '`') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && text[j] == '`') ++j;
    longest = std::max(longest, j - i);
    i = j;
  }
  if (text.empty()) return text;
  const std::string fence(longest + 1, '`');
  // GFM strips one space from each end of a span that has one at both ends, and a backtick at
  // an end would join the fence: padded with a space on each side then.
  const bool spaced = text.front() == ' ' && text.back() == ' ' && text.find_first_not_of(' ') != std::string::npos;
  const bool pad = text.front() == '`' || text.back() == '`' || spaced;
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

}  // namespace hs::reports
