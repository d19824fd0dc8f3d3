// Fitting a label into the width of a slice: no ImGui here (the width of a string comes from a
// callback), so it is unit-tested without a window (tests/ui_timeline_test.cpp).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace hs::ui {

/// Measures the drawn width of a string in pixels (ImGui::CalcTextSize in the views).
using TextWidth = std::function<float(std::string_view)>;

/// What fits of `text` in `max_px`: the text itself when it fits; else kEllipsis and the longest
/// tail that fits, cut just after a separator (". :/,") so the tail is whole components — the
/// distinguishing part of a module FQN is its end: "model.layers.3.mlp" → "...layers.3.mlp",
/// "...3.mlp", "...mlp" as the width shrinks. A text without separators loses characters from
/// its front instead. A tail is never shorter than kMinTail characters (nor than the text's
/// last component, when that is shorter): when even that does not fit the result is "" (the
/// tooltip names the event in full).
/// Which end of a label says what it is: a module FQN's tail ("...layers.3.mlp"), or a step's
/// head ("warm-up 1 · step 0" → "warm-up 1..."), which names the generate it belongs to.
enum class Keep { Tail, Head };

std::string fit_label(std::string_view text, float max_px, const TextWidth& width, Keep keep = Keep::Tail);

inline constexpr std::string_view kEllipsis = "...";  ///< ASCII: the viewer's font has no U+2026
inline constexpr size_t kMinTail = 3;

}  // namespace hs::ui
