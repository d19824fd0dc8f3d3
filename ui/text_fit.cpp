#include "ui/text_fit.h"

#include <algorithm>
#include <vector>

namespace hs::ui {

namespace {

bool separator(char c) { return c == '.' || c == ' ' || c == ':' || c == '/' || c == ','; }

/// Where a tail may start, longest tail first: after each separator, or (no separator at all)
/// at every character; never leaving fewer than `min_tail` characters.
std::vector<size_t> tail_starts(std::string_view text, size_t min_tail) {
  std::vector<size_t> starts;
  const bool any = std::any_of(text.begin(), text.end(), separator);
  for (size_t i = 1; i + min_tail <= text.size(); ++i)
    if (any ? separator(text[i - 1]) && !separator(text[i]) : true) starts.push_back(i);
  return starts;
}

}  // namespace

// Keep::Head: the longest head cut before a separator that fits with the ellipsis after it.
static std::string fit_head(std::string_view text, float max_px, const TextWidth& width) {
  for (size_t end = text.size(); end-- > 1;) {
    if (!separator(text[end])) continue;
    std::string_view head = text.substr(0, end);
    while (!head.empty() && (head.back() == ' ' || head.ends_with("\u00b7")))
      head.remove_suffix(head.back() == ' ' ? 1 : std::string_view("\u00b7").size());
    if (head.size() < kMinTail) break;
    std::string out = std::string(head) + std::string(kEllipsis);
    if (width(out) <= max_px) return out;
  }
  return {};
}

std::string fit_label(std::string_view text, float max_px, const TextWidth& width, Keep keep) {
  if (text.empty() || max_px <= 0) return {};
  if (width(text) <= max_px) return std::string(text);
  if (keep == Keep::Head) return width(kEllipsis) >= max_px ? std::string() : fit_head(text, max_px, width);
  // The last component may be shorter than kMinTail ("model.layers.3" ends in "3"): it is then
  // the shortest tail allowed, since a cut inside a component says nothing.
  size_t last = text.size();
  while (last > 0 && !separator(text[last - 1])) --last;
  const size_t min_tail = std::min(kMinTail, text.size() - last == 0 ? kMinTail : text.size() - last);
  if (width(kEllipsis) >= max_px) return {};
  for (size_t start : tail_starts(text, std::max<size_t>(min_tail, 1))) {
    std::string out = std::string(kEllipsis) + std::string(text.substr(start));
    if (width(out) <= max_px) return out;
  }
  return {};
}

}  // namespace hs::ui
