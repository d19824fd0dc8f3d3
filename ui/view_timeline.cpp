// View: the timeline tab — the ruler (range picking), one scrolling lane pane per run shown,
// zoom/pan by wheel, drag and keys, hover tooltips and click selection. The lanes themselves
// are drawn in view_lanes.cpp, the range statistics in view_range.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

constexpr float kBottomPaneHeight = 150.0f;  ///< details and range statistics, under the lanes
constexpr float kLanesBottomPad = 8.0f;      ///< space under a run's last group

// Tracy's keys. ImGui 1.86 indexes keys by the platform backend's key codes; for letters those
// are their ASCII upper case (GLFW, Win32), so the views need not know the backend.
constexpr int kKeyZoomIn = 'W', kKeyZoomOut = 'S', kKeyPanLeft = 'A', kKeyPanRight = 'D';

}  // namespace

void View::DrawTimelineTab() {
  if (!m_slot_run[0]) {
    ImGui::TextDisabled("This capture holds no runs.");
    return;
  }
  if (!m_timeline[0]) {  // nothing read yet (or the run failed): what it loads, how far
    DrawLoadStatus(0);
    return;
  }
  DrawLoadStatus(0);  // a preview is drawn: the rest still loads
  DrawTimelineToolbar();
  const float area_h = std::max(ImGui::GetContentRegionAvail().y - kBottomPaneHeight, 120.0f);
  DrawTimelineArea(area_h);
  ImGui::BeginChild("bottom", ImVec2(0, 0), true);
  if (ImGui::BeginTable("bottom_split", 2, ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableSetupColumn("details", ImGuiTableColumnFlags_WidthStretch, 0.4f);
    ImGui::TableSetupColumn("range", ImGuiTableColumnFlags_WidthStretch, 0.6f);
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    DrawDetails();
    ImGui::TableNextColumn();
    DrawRangeStats();
    ImGui::EndTable();
  }
  ImGui::EndChild();
}

void View::DrawTimelineArea(float height) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float full_w = ImGui::GetContentRegionAvail().x;
  const float x0 = origin.x + style::kLabelWidth;
  const float x1 = origin.x + full_w - ImGui::GetStyle().ScrollbarSize;
  m_time.width_px = std::max(x1 - x0, 10.0f);
  m_layout.canvas_x0 = x0;
  m_layout.canvas_x1 = x1;
  if (m_fit_pending) {
    int64_t dur = 0;
    for (const auto& t : m_timeline)
      if (t) dur = std::max(dur, t->duration_ns);
    m_time.fit(0, static_cast<double>(dur));
    m_auto_fit = std::make_pair(m_time.start_ns, m_time.ns_per_px);
    m_fit_pending = false;
  }
  m_hover.reset();
  m_hover_merged.reset();

  const bool ruler_hovered = DrawRulerStrip(origin, full_w, x0, x1);
  // Lanes: one scrolling pane per run (two when comparing, each half the height), all on the
  // same time scale.
  const int panes = m_slot_run[1] ? 2 : 1;
  const float lanes_h = std::max(height - style::kRulerHeight, 50.0f);
  bool lanes_hovered = false;
  m_layout.panes.clear();
  for (int slot = 0; slot < panes; ++slot)
    lanes_hovered = DrawLanePane(slot, panes, full_w, lanes_h, x0, x1) || lanes_hovered;
  m_layout.lanes_y0 = m_layout.panes.front().first;
  m_layout.lanes_y1 = m_layout.panes.back().second;
  HandleTimelineInput(x0, x1, lanes_hovered, ruler_hovered);

  m_layout.view_start_ns = m_time.start_ns;
  m_layout.view_end_ns = m_time.end_ns();
  if (lanes_hovered) DrawHoverTooltip();
}

/// The ruler, fixed above the scrolling lanes: drag selects a range, right-click clears it.
/// Returns whether it is hovered.
bool View::DrawRulerStrip(const ImVec2& origin, float full_w, float x0, float x1) {
  ImGuiIO& io = ImGui::GetIO();
  ImGui::InvisibleButton("ruler", ImVec2(full_w, style::kRulerHeight),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  const bool hovered = ImGui::IsItemHovered();
  m_layout.ruler_y0 = origin.y;
  m_layout.ruler_y1 = origin.y + style::kRulerHeight;
  if (ImGui::IsItemActivated() && ImGui::IsMouseClicked(0)) m_range_anchor = m_time.t_of(io.MousePos.x - x0);
  if (ImGui::IsItemActive() && m_range_anchor && ImGui::IsMouseDown(0)) {
    const double t = m_time.t_of(io.MousePos.x - x0);
    m_range = std::make_pair(static_cast<int64_t>(std::min(*m_range_anchor, t)),
                             static_cast<int64_t>(std::max(*m_range_anchor, t)));
  }
  if (ImGui::IsItemDeactivated() && m_range_anchor) {
    if (m_range && std::fabs(m_time.x_of(static_cast<double>(m_range->second)) -
                             m_time.x_of(static_cast<double>(m_range->first))) < style::kClickSlopPx)
      m_range.reset();  // a click, not a drag
    m_range_anchor.reset();
  }
  if (hovered && ImGui::IsMouseClicked(1)) m_range.reset();
  ImDrawList* fg = ImGui::GetWindowDrawList();
  DrawRuler(fg, x0, x1, origin.y, style::kRulerHeight);
  fg->AddText(ImVec2(origin.x + 4, origin.y + 5), style::kDim, "time since run start");
  return hovered;
}

/// A click on a merged block: the view fits the block's events (5% margin) when they cover at
/// most half of it; a block running across most of the view (a dense lane) would leave the
/// view as it is, so the click zooms in kMergedClickZoom× around the cursor instead.
void View::ExpandMerged(std::pair<int64_t, int64_t> block, float cursor_px) {
  const double a = std::max(static_cast<double>(block.first), m_time.start_ns);
  const double b = std::min(static_cast<double>(block.second), m_time.end_ns());
  if (b - a <= 0.5 * (m_time.end_ns() - m_time.start_ns))
    m_time.fit(static_cast<double>(block.first), static_cast<double>(block.second), 0.05);
  else
    m_time.zoom_at(cursor_px, style::kMergedClickZoom);
}

/// The scrolling pane of run `slot` (of `panes`): its lanes, the range band and the cursor line
/// over them; dragging pans, a click selects. Returns whether the pane is hovered.
bool View::DrawLanePane(int slot, int panes, float full_w, float lanes_h, float x0, float x1) {
  ImGuiIO& io = ImGui::GetIO();
  ImGui::BeginChild(slot ? "lanes1" : "lanes0", ImVec2(full_w, panes == 2 ? lanes_h * 0.5f - 2 : lanes_h), false,
                    ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 wpos = ImGui::GetWindowPos();
  const float clip0 = wpos.y, clip1 = wpos.y + ImGui::GetWindowHeight();
  m_layout.panes.emplace_back(clip0, clip1);
  if (!m_timeline[slot]) {  // the compared run is loading (or failed): say so in its pane
    if (!DrawLoadStatus(slot)) ImGui::TextDisabled("loading");
    ImGui::EndChild();
    return false;
  }
  if (slot == 1) DrawLoadStatus(1);  // its preview is drawn under the status
  const float y = DrawRunLanes(dl, slot, x0, x1, ImGui::GetCursorScreenPos().y, clip0, clip1) + kLanesBottomPad;
  const float content_h = std::max(y - p.y, clip1 - clip0 - 1);

  // Range band and cursor line over every lane.
  if (m_range) {
    const float a = x0 + m_time.x_of(static_cast<double>(m_range->first));
    const float b = x0 + m_time.x_of(static_cast<double>(m_range->second));
    dl->AddRectFilled(ImVec2(std::max(a, x0), clip0), ImVec2(std::min(b, x1), clip1), style::kRange);
  }
  const bool hovered = ImGui::IsWindowHovered(ImGuiHoveredFlags_AllowWhenBlockedByActiveItem);
  if (io.MousePos.x >= x0 && io.MousePos.x <= x1 && io.MousePos.y >= m_layout.ruler_y0 &&
      io.MousePos.y <= wpos.y + lanes_h + style::kRulerHeight)
    dl->AddLine(ImVec2(io.MousePos.x, clip0), ImVec2(io.MousePos.x, clip1), style::kHoverLine);

  ImGui::SetCursorScreenPos(p);
  ImGui::InvisibleButton("canvas", ImVec2(full_w - ImGui::GetStyle().ScrollbarSize, content_h),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  // Drag (left or right) pans in both axes, as in Tracy.
  if (ImGui::IsItemActive() && (ImGui::IsMouseDragging(0, 1.0f) || ImGui::IsMouseDragging(1, 1.0f))) {
    m_time.pan_px(io.MouseDelta.x);
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
  }
  // A click (no drag) selects what is under the cursor, expands a merged block, or clears the
  // selection.
  if (hovered && ImGui::IsMouseReleased(0)) {
    const ImVec2 d = ImGui::GetMouseDragDelta(0, 0.0f);
    if (std::fabs(d.x) < style::kClickSlopPx && std::fabs(d.y) < style::kClickSlopPx) {
      if (m_hover && m_hover->source == Source::SwapGroup) {  // a step's swaps: zoom to them
        const auto [a, b] = extent(*timeline(m_hover->run), m_hover->source, m_hover->row);
        m_time.fit(static_cast<double>(a), static_cast<double>(b), 0.05);
      } else if (m_hover)
        m_selected = m_hover;
      else if (m_hover_merged)
        ExpandMerged(*m_hover_merged, io.MousePos.x - x0);
      else
        m_selected.reset();
    }
  }
  ImGui::EndChild();
  return hovered;
}

/// What the cursor is over in the lanes: the event's fields, or how many events a merged
/// block holds.
void View::DrawHoverTooltip() {
  if (m_hover) {
    const RunTimeline* tl = timeline(m_hover->run);
    if (!tl) return;
    ImGui::BeginTooltip();
    for (const auto& [k, v] : describe(*tl, m_hover->source, m_hover->row)) {
      ImGui::TextDisabled("%s", k.c_str());
      ImGui::SameLine();
      ImGui::TextUnformatted(v.c_str());
    }
    ImGui::EndTooltip();
  } else if (m_hover_merged) {
    ImGui::SetTooltip("%lld events merged over %s: zoom in (wheel, W) or click to expand",
                      static_cast<long long>(m_hover_merged_count),
                      format_duration(static_cast<double>(m_hover_merged->second - m_hover_merged->first)).c_str());
  }
}

void View::HandleTimelineInput(float x0, float x1, bool lanes_hovered, bool ruler_hovered) {
  ImGuiIO& io = ImGui::GetIO();
  // Wheel zooms around the cursor (Ctrl: finer, Shift: faster).
  if ((lanes_hovered || ruler_hovered) && io.MouseWheel != 0.0f) {
    const double base = io.KeyCtrl ? 1.05 : io.KeyShift ? 2.0 : 1.25;
    const float x = std::clamp(io.MousePos.x, x0, x1) - x0;
    m_time.zoom_at(x, std::pow(base, static_cast<double>(io.MouseWheel)));
  }
  // W/S zoom around the centre, A/D pan by a tenth of the view (Tracy's keys).
  if (!io.WantTextInput) {
    const float centre = 0.5f * m_time.width_px;
    if (ImGui::IsKeyPressed(kKeyZoomIn)) m_time.zoom_at(centre, 1.25);
    if (ImGui::IsKeyPressed(kKeyZoomOut)) m_time.zoom_at(centre, 1.0 / 1.25);
    if (ImGui::IsKeyPressed(kKeyPanLeft)) m_time.pan_px(0.1f * m_time.width_px);
    if (ImGui::IsKeyPressed(kKeyPanRight)) m_time.pan_px(-0.1f * m_time.width_px);
  }
}

void View::DrawRuler(ImDrawList* dl, float x0, float x1, float y, float h) {
  dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + h), style::kRuler);
  const double step = tick_step_ns(m_time.ns_per_px);
  const double minor = step / 5;
  const double first = std::floor(m_time.start_ns / minor) * minor;
  for (double t = first; t <= m_time.end_ns(); t += minor) {
    const float x = x0 + m_time.x_of(t);
    if (x < x0) continue;
    const bool major = std::fabs(std::remainder(t, step)) < minor * 0.01;
    dl->AddLine(ImVec2(x, y + h - (major ? 10 : 4)), ImVec2(x, y + h), style::kText);
    if (major) dl->AddText(ImVec2(x + 3, y + 2), style::kText, format_duration(t).c_str());
  }
  if (m_range) {
    const float a = std::max(x0, x0 + m_time.x_of(static_cast<double>(m_range->first)));
    const float b = std::min(x1, x0 + m_time.x_of(static_cast<double>(m_range->second)));
    if (b > a) {
      dl->AddRectFilled(ImVec2(a, y), ImVec2(b, y + h), style::kRange);
      dl->AddLine(ImVec2(a, y), ImVec2(a, y + h), style::kRangeEdge, 2);
      dl->AddLine(ImVec2(b, y), ImVec2(b, y + h), style::kRangeEdge, 2);
    }
  }
}

}  // namespace hs::ui
