// Colours and sizes shared by the views (ImGui ABGR colours, as IM_COL32 writes them).
#pragma once

#include <cstdint>

#include <imgui.h>

#include "ui/run_timeline.h"

namespace hs::ui::style {

inline constexpr ImU32 kOk = IM_COL32(110, 200, 120, 255);
inline constexpr ImU32 kWarn = IM_COL32(235, 180, 70, 255);
inline constexpr ImU32 kBad = IM_COL32(235, 90, 80, 255);
inline constexpr ImU32 kDim = IM_COL32(150, 150, 160, 255);
inline constexpr ImU32 kText = IM_COL32(235, 235, 240, 255);
inline constexpr ImU32 kTextDark = IM_COL32(20, 20, 24, 255);
inline constexpr ImU32 kGroupHeader = IM_COL32(48, 52, 64, 255);
inline constexpr ImU32 kLaneBgAlt = IM_COL32(30, 32, 39, 255);  ///< every other lane (the rest: the clear colour)
inline constexpr ImU32 kRuler = IM_COL32(60, 64, 76, 255);
inline constexpr ImU32 kRange = IM_COL32(90, 150, 255, 50);
inline constexpr ImU32 kRangeEdge = IM_COL32(90, 150, 255, 200);
inline constexpr ImU32 kSelect = IM_COL32(255, 255, 255, 255);
inline constexpr ImU32 kHoverLine = IM_COL32(255, 255, 255, 60);
inline constexpr ImU32 kBreakMark = IM_COL32(255, 70, 70, 255);
inline constexpr ImU32 kBreakLine = IM_COL32(255, 70, 70, 70);
inline constexpr ImU32 kFlow = IM_COL32(240, 200, 90, 150);

inline constexpr float kLevelHeight = 17.0f;  ///< one nesting level of a lane
inline constexpr float kCounterHeight = 28.0f;
inline constexpr float kHeaderHeight = 20.0f;
inline constexpr float kLabelWidth = 190.0f;   ///< lane names left of the time axis
inline constexpr float kRulerHeight = 26.0f;
inline constexpr float kMinBoxPx = 3.0f;       ///< narrower events merge ("zoom in")
inline constexpr int kMaxLevels = 8;           ///< deeper nesting is drawn as "+N levels"

/// Fill colour of a slice category.
inline ImU32 category_color(uint8_t c) {
  switch (c) {
    case kCompute: return IM_COL32(78, 140, 220, 255);
    case kHtoD: return IM_COL32(80, 190, 120, 255);
    case kDtoH: return IM_COL32(190, 110, 200, 255);
    case kDtoD: return IM_COL32(230, 160, 60, 255);
    case kPtoP: return IM_COL32(230, 200, 60, 255);
    case kOtherCopy: return IM_COL32(170, 170, 120, 255);
    case kOnload: return IM_COL32(220, 110, 70, 255);
    case kOffload: return IM_COL32(140, 100, 90, 255);
    case kPreForward: return IM_COL32(110, 170, 170, 255);
    case kPostForward: return IM_COL32(90, 140, 150, 255);
    case kOtherHook: return IM_COL32(120, 120, 140, 255);
    case kDisabled: return IM_COL32(200, 80, 90, 255);
    case kRegion: return IM_COL32(70, 160, 110, 255);
    case kStep: return IM_COL32(120, 110, 190, 255);
    case kResidentOnDevice: return IM_COL32(80, 170, 200, 255);
    case kHomeCpu: return IM_COL32(70, 75, 95, 255);
    case kHomeDisk: return IM_COL32(105, 80, 60, 255);
    case kBreak: return kBreakMark;
    default: return IM_COL32(128, 128, 128, 255);
  }
}

}  // namespace hs::ui::style
