// Colours and sizes shared by the views (ImGui ABGR colours, as IM_COL32 writes them).
#pragma once

#include <cstdint>
#include <string>

#include <imgui.h>

#include "ui/run_timeline.h"
#include "ui/typography.h"

namespace hs::ui::style {

/// Whether the current font draws the report's '†', '–', '−' and '×' (ui/typography.h).
inline bool font_has_typography() {
  const ImFont* f = ImGui::GetCurrentContext() ? ImGui::GetFont() : nullptr;
  return f && f->FindGlyphNoFallback(0x2020) && f->FindGlyphNoFallback(0x2013) && f->FindGlyphNoFallback(0x2212) &&
         f->FindGlyphNoFallback(0x00D7);
}


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
inline constexpr ImU32 kLaunchFlow = IM_COL32(150, 200, 255, 140);  ///< a CUDA API call -> its GPU record
inline constexpr ImU32 kRunHeader = IM_COL32(25, 60, 110, 255);        ///< the bar naming a run above its groups
inline constexpr ImU32 kHostHeader = IM_COL32(70, 60, 90, 255);        ///< header of a host-thread group
inline constexpr ImU32 kEmulatedHeader = IM_COL32(80, 70, 40, 255);    ///< header of an emulated device's group
inline constexpr ImU32 kMemoryFill = IM_COL32(200, 140, 60, 100);      ///< the memory counter's step plot
inline constexpr ImU32 kSelectionTime = IM_COL32(255, 255, 255, 110);  ///< selected event's start/end through the run
inline constexpr ImU32 kSearchHit = IM_COL32(255, 230, 40, 255);     ///< the search's current match
inline constexpr ImU32 kMemoryGrid = IM_COL32(200, 140, 60, 90);      ///< a memory lane's top and middle lines
inline constexpr ImU32 kBarWholeHook = IM_COL32(90, 130, 210, 255);    ///< latency bars of the whole-hook policy
inline constexpr ImU32 kBarOffloadOnly = IM_COL32(80, 170, 120, 255);  ///< latency bars of the offload-only policy

inline constexpr float kLevelHeight = 17.0f;  ///< one nesting level of a lane
inline constexpr float kCounterHeight = 40.0f;  ///< tall enough for its scale: top, middle, 0
inline constexpr float kHeaderHeight = 20.0f;
inline constexpr float kLabelWidth = 190.0f;   ///< lane names left of the time axis
inline constexpr float kRulerHeight = 26.0f;
inline constexpr float kMinBoxPx = 3.0f;       ///< narrower events merge ("zoom in")
inline constexpr int kMaxLevels = 8;           ///< deeper nesting is drawn as "+N levels" (click: all)
inline constexpr int kPythonStackLevels = 2;   ///< levels of a folded Python stack lane (its top frames)
inline constexpr int kMaxOpenLevels = 64;      ///< levels of an unfolded lane
inline constexpr float kLaneLabelIndent = 14.0f;   ///< lane names, right of their group's "[-]"
inline constexpr float kGroupGap = 3.0f;           ///< space below each lane group
inline constexpr float kSliceLabelMinPx = 24.0f;   ///< narrower slices carry no label
inline constexpr double kMergedClickZoom = 4.0;   ///< a click on a view-wide merged block zooms in this much
inline constexpr float kMergedLabelMinPx = 90.0f;  ///< narrower merged blocks carry no "N events"
inline constexpr float kClickSlopPx = 3.0f;        ///< a press that moves less is a click, not a drag

/// Latency-bar colour of an offloading policy ("offload-only" or anything else: whole-hook).
inline ImU32 policy_color(const std::string& policy) {
  return policy == "offload-only" ? kBarOffloadOnly : kBarWholeHook;
}

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
    case kCpuOp: return IM_COL32(140, 170, 215, 255);
    case kUserAnnotation: return IM_COL32(225, 190, 110, 255);
    case kPythonFunction: return IM_COL32(150, 175, 150, 255);
    case kGpuAnnotation: return IM_COL32(215, 175, 105, 255);
    case kKernel: return IM_COL32(90, 180, 210, 255);
    case kMemset: return IM_COL32(210, 140, 170, 255);
    case kCudaRuntime: return IM_COL32(190, 190, 140, 255);
    case kCudaDriver: return IM_COL32(200, 160, 120, 255);
    case kPhase: return IM_COL32(85, 85, 105, 255);
    case kSwapGroup: return IM_COL32(200, 125, 85, 255);
    case kSync: return IM_COL32(205, 95, 95, 255);
    default: return IM_COL32(128, 128, 128, 255);
  }
}

}  // namespace hs::ui::style
