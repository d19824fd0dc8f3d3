// The report's typography in the viewer: '†' marks the LibTorch engine's figures, '–' an empty
// cell, '−' a minus, '×' a ratio ("1.27×"). ImGui's default font is ASCII, so the window merges
// these four glyphs in from DejaVu Sans (Debian's fonts-dejavu-core, which the README's setup
// installs); where that file is missing they are drawn as '*', '-', '-' and 'x' instead. Free of
// ImGui, so the tests that compare the viewer's cells with the report's can say what the viewer
// draws.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace hs::ui {

inline constexpr const char* kTypographyFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// `text` as the viewer draws it: unchanged when its font has the glyphs (`font_has_them`), else
/// with '†' → '*', '–' → '-', '−' → '-', '×' → 'x'.
inline std::string display_text(std::string text, bool font_has_them) {
  if (font_has_them) return text;
  for (auto [from, to] : {std::pair<std::string_view, std::string_view>{"†", "*"}, {"–", "-"}, {"−", "-"}, {"×", "x"}})
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at))
      text.replace(at, from.size(), to);
  return text;
}

}  // namespace hs::ui
