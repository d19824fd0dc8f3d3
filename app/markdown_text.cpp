#include "app/markdown_text.h"

#include <algorithm>

namespace hs::app {

std::string md_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) out += ' ';
    else if (c == '|') out += "\\|";
    else if (c == '\\') {
      // GFM reads `\\|` as an escaped backslash and a cell border: backslashes right before a
      // pipe are doubled (each `\\` one backslash), then the pipe is `\|`.
      size_t j = i;
      while (j < s.size() && s[j] == '\\') ++j;
      out.append((j < s.size() && s[j] == '|' ? 2 : 1) * (j - i), '\\');
      i = j - 1;
    } else {
      out += c;
    }
  }
  return out;
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

std::string md_code(std::string_view s) {
  size_t longest = 0;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '`') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && s[j] == '`') ++j;
    longest = std::max(longest, j - i);
    i = j;
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !s.empty() && (s.front() == '`' || s.back() == '`');
  return fence + (pad ? " " : "") + std::string(s) + (pad ? " " : "") + fence;
}

}  // namespace hs::app
