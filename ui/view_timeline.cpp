// View: the timeline — lane groups per device and host thread, ruler, zoom/pan, hover and
// selection, flows, graph-break markers, range statistics.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

/// State shared by the lanes of one frame.
struct LaneCtx {
  ImDrawList* dl;
  const RunTimeline* tl;
  int slot;
  float label_x, x0, x1;  ///< label column start; time axis span (screen)
  float clip_y0, clip_y1;
  ImVec2 mouse;
  bool mouse_in;          ///< the lanes window is hovered
  const TimeView* view;
};

ImU32 darker(ImU32 c, float f) {
  const int r = static_cast<int>(((c >> IM_COL32_R_SHIFT) & 0xFF) * f);
  const int g = static_cast<int>(((c >> IM_COL32_G_SHIFT) & 0xFF) * f);
  const int b = static_cast<int>(((c >> IM_COL32_B_SHIFT) & 0xFF) * f);
  return IM_COL32(r, g, b, 255);
}

/// Tracy's "zoom in" pattern: a zig-zag across a merged block.
void zigzag(ImDrawList* dl, float x0, float x1, float y0, float y1, ImU32 c) {
  const float h = y1 - y0, step = h * 0.5f;
  ImVec2 prev(x0, y1 - 2);
  bool up = true;
  for (float x = x0 + step; x <= x1 + 0.01f; x += step) {
    ImVec2 p(std::min(x, x1), up ? y0 + 2 : y1 - 2);
    dl->AddLine(prev, p, c, 1.0f);
    prev = p;
    up = !up;
  }
}

}  // namespace

void View::DrawTimelineTab() {
  if (!m_timeline[0]) {
    ImGui::TextDisabled("This capture holds no runs.");
    return;
  }
  const float bottom_h = 150.0f;
  const float area_h = std::max(ImGui::GetContentRegionAvail().y - bottom_h, 120.0f);
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
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float full_w = ImGui::GetContentRegionAvail().x;
  const float label_x = origin.x;
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
    m_fit_pending = false;
  }
  m_hover.reset();
  m_hover_merged.reset();

  // Ruler (fixed above the scrolling lanes): drag selects a range, right-click clears it.
  ImGui::InvisibleButton("ruler", ImVec2(full_w, style::kRulerHeight),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  const bool ruler_hovered = ImGui::IsItemHovered();
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
                             m_time.x_of(static_cast<double>(m_range->first))) < 3.0f)
      m_range.reset();  // a click, not a drag
    m_range_anchor.reset();
  }
  if (ruler_hovered && ImGui::IsMouseClicked(1)) m_range.reset();
  ImDrawList* fg = ImGui::GetWindowDrawList();
  DrawRuler(fg, x0, x1, origin.y, style::kRulerHeight);
  fg->AddText(ImVec2(label_x + 4, origin.y + 5), style::kDim, "time since run start");

  // Lanes: one scrolling pane per run (two when comparing, each half the height), all on the
  // same time scale.
  const int panes = m_timeline[1] ? 2 : 1;
  const float lanes_h = std::max(height - style::kRulerHeight, 50.0f);
  bool lanes_hovered = false;
  m_layout.panes.clear();
  for (int slot = 0; slot < panes; ++slot) {
    ImGui::BeginChild(slot ? "lanes1" : "lanes0", ImVec2(full_w, panes == 2 ? lanes_h * 0.5f - 2 : lanes_h), false,
                      ImGuiWindowFlags_NoScrollWithMouse);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const ImVec2 wpos = ImGui::GetWindowPos();
    const float clip0 = wpos.y, clip1 = wpos.y + ImGui::GetWindowHeight();
    m_layout.panes.emplace_back(clip0, clip1);
    const float y = DrawRunLanes(dl, slot, x0, x1, p.y, clip0, clip1) + 8.0f;
    const float content_h = std::max(y - p.y, clip1 - clip0 - 1);

    // Range band and cursor line over every lane.
    if (m_range) {
      const float a = x0 + m_time.x_of(static_cast<double>(m_range->first));
      const float b = x0 + m_time.x_of(static_cast<double>(m_range->second));
      dl->AddRectFilled(ImVec2(std::max(a, x0), clip0), ImVec2(std::min(b, x1), clip1), style::kRange);
    }
    const bool hovered = ImGui::IsWindowHovered(ImGuiHoveredFlags_AllowWhenBlockedByActiveItem);
    lanes_hovered = lanes_hovered || hovered;
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
    // A click (no drag) selects what is under the cursor, or clears the selection.
    if (hovered && ImGui::IsMouseReleased(0)) {
      const ImVec2 d = ImGui::GetMouseDragDelta(0, 0.0f);
      if (std::fabs(d.x) < 3 && std::fabs(d.y) < 3) {
        if (m_hover)
          m_selected = m_hover;
        else if (m_hover_merged)
          m_time.fit(static_cast<double>(m_hover_merged->first), static_cast<double>(m_hover_merged->second), 0.05);
        else
          m_selected.reset();
      }
    }
    ImGui::EndChild();
  }
  m_layout.lanes_y0 = m_layout.panes.front().first;
  m_layout.lanes_y1 = m_layout.panes.back().second;
  HandleTimelineInput(x0, x1, lanes_hovered, ruler_hovered);

  m_layout.view_start_ns = m_time.start_ns;
  m_layout.view_end_ns = m_time.end_ns();

  if (m_hover && (lanes_hovered)) {
    const RunTimeline* tl = timeline(m_hover->run);
    ImGui::BeginTooltip();
    for (const auto& [k, v] : describe(*tl, m_hover->source, m_hover->row)) {
      ImGui::TextDisabled("%s", k.c_str());
      ImGui::SameLine();
      ImGui::TextUnformatted(v.c_str());
    }
    ImGui::EndTooltip();
  } else if (m_hover_merged && lanes_hovered) {
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
    if (ImGui::IsKeyPressed('W')) m_time.zoom_at(centre, 1.25);
    if (ImGui::IsKeyPressed('S')) m_time.zoom_at(centre, 1.0 / 1.25);
    if (ImGui::IsKeyPressed('A')) m_time.pan_px(0.1f * m_time.width_px);
    if (ImGui::IsKeyPressed('D')) m_time.pan_px(-0.1f * m_time.width_px);
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

float View::DrawRunLanes(ImDrawList* dl, int slot, float x0, float x1, float y, float clip0, float clip1) {
  const RunTimeline& tl = *m_timeline[slot];
  ImGuiIO& io = ImGui::GetIO();
  LaneCtx c{dl, &tl, slot, x0 - style::kLabelWidth, x0, x1, clip0, clip1, io.MousePos, ImGui::IsWindowHovered(ImGuiHoveredFlags_AllowWhenBlockedByActiveItem),
            &m_time};
  const bool clicked = c.mouse_in && ImGui::IsMouseClicked(0);
  const float run_y0 = y;
  // Layers: 0 lane bands and headers, 1 flows and break lines, 2 events and text — so the flows
  // drawn after the groups stay under the events.
  enum { kBands, kFlows, kEvents };
  dl->ChannelsSplit(3);
  dl->ChannelsSetCurrent(kEvents);
  auto band = [&](ImVec2 a, ImVec2 b, ImU32 col) {
    dl->ChannelsSetCurrent(kBands);
    dl->AddRectFilled(a, b, col);
    dl->ChannelsSetCurrent(kEvents);
  };
  // Header bars sit above the flows, so a flow never runs through a title.
  auto header_bar = [&](ImVec2 a, ImVec2 b, ImU32 col) { dl->AddRectFilled(a, b, col); };
  auto visible = [&](float a, float b) { return b >= clip0 && a <= clip1; };
  auto header = [&](float h, ImU32 bg, const std::string& text, const std::string& key, bool default_collapsed,
                    ImU32 text_color) {
    auto it = m_collapsed.find(key);
    bool collapsed = it == m_collapsed.end() ? default_collapsed : it->second;
    if (visible(y, y + h)) {
      header_bar(ImVec2(c.label_x, y), ImVec2(x1, y + h), bg);
      dl->AddText(ImVec2(c.label_x + 4, y + (h - ImGui::GetFontSize()) * 0.5f), text_color,
                  ((collapsed ? "[+] " : "[-] ") + text).c_str());
    }
    if (clicked && c.mouse.y >= y && c.mouse.y < y + h && c.mouse.x >= c.label_x && c.mouse.x < x0)
      m_collapsed[key] = collapsed = !collapsed;
    y += h;
    return collapsed;
  };

  // Run header.
  {
    const auto& r = tl.run;
    const std::string status = r.status == tracer::RunStatus::Incomplete ? "incomplete"
                               : r.status == tracer::RunStatus::Failed   ? "failed"
                                                                         : "complete";
    const std::string text = "run " + std::to_string(r.id) + ": " + r.scenario + ", " + r.policy + ", " + r.mode +
                             (r.fullgraph ? ", fullgraph" : "") + " (" + status + ", " +
                             (r.dropped_records ? std::to_string(r.dropped_records) + " records DROPPED, " : "") +
                             std::to_string(tl.event_count()) + " events, " +
                             format_duration(static_cast<double>(tl.duration_ns)) + ")";
    if (visible(y, y + style::kHeaderHeight)) {
      header_bar(ImVec2(c.label_x, y), ImVec2(x1, y + style::kHeaderHeight), IM_COL32(25, 60, 110, 255));
      dl->AddText(ImVec2(c.label_x + 4, y + 3), style::kText, text.c_str());
    }
    y += style::kHeaderHeight;
  }

  struct LaneY {
    float in = -1, out = -1;
  };
  std::vector<LaneY> lane_y(tl.groups.size());
  std::vector<float> break_xs;

  auto draw_track = [&](const Track& t, LaneY* ly, size_t row_index, const std::string* label = nullptr) {
    const bool counter = !t.counter.empty();
    const int levels = std::min<int>(static_cast<int>(t.levels.size()), style::kMaxLevels);
    const float h = counter ? style::kCounterHeight : std::max(levels, 1) * style::kLevelHeight;
    if (ly) {
      if (t.name == "transfers in") ly->in = y + h * 0.5f;
      if (t.name == "transfers out") ly->out = y + h * 0.5f;
    }
    if (!visible(y, y + h)) {
      y += h;
      return;
    }
    // Every other lane gets a lighter band; the rest shows the cleared background (under a
    // software rasteriser every full-width fill costs milliseconds).
    if (row_index % 2) band(ImVec2(c.label_x, y), ImVec2(x1, y + h), style::kLaneBgAlt);
    const ImVec4 label_clip(c.label_x, y, x0 - 4, y + h);
    dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(c.label_x + 14, y + 1), style::kDim,
                (label ? *label : t.name).c_str(), nullptr, 0, &label_clip);
    if (t.levels.size() > static_cast<size_t>(style::kMaxLevels)) {
      char more[32];
      std::snprintf(more, sizeof more, "+%zu levels", t.levels.size() - style::kMaxLevels);
      dl->AddText(ImVec2(c.label_x + 14, y + h - style::kLevelHeight), style::kWarn, more);
    }
    const TimeView& v = m_time;
    if (counter) {
      // Step plot, decimated to one column per pixel (the max inside it).
      const auto& pts = t.counter;
      const float scale = t.counter_max > 0 ? (h - 4) / static_cast<float>(t.counter_max) : 0;
      auto it = std::partition_point(pts.begin(), pts.end(), [&](const auto& q) { return q.first < v.start_ns; });
      int64_t cur = it == pts.begin() ? 0 : std::prev(it)->second;
      for (float px = 0; px < v.width_px; px += 1) {
        const double te = v.t_of(px + 1);
        int64_t mx = cur;
        while (it != pts.end() && it->first < te) {
          mx = std::max(mx, it->second);
          cur = it->second;
          ++it;
        }
        if (mx > 0)
          dl->AddRectFilled(ImVec2(x0 + px, y + h - 2 - mx * scale), ImVec2(x0 + px + 1, y + h - 2),
                            IM_COL32(200, 140, 60, 100));
        if (it == pts.end() && cur == 0) break;
      }
      dl->AddText(ImVec2(x0 + 4, y + 1), style::kText, ("peak " + format_bytes(static_cast<double>(t.counter_max))).c_str());
      if (c.mouse_in && c.mouse.y >= y && c.mouse.y < y + h && c.mouse.x >= x0 && c.mouse.x <= x1) {
        const double tm = v.t_of(c.mouse.x - x0);
        auto q = std::partition_point(pts.begin(), pts.end(), [&](const auto& p) { return p.first <= tm; });
        const int64_t val = q == pts.begin() ? 0 : std::prev(q)->second;
        ImGui::SetTooltip("%s resident at %s (peak %s)", format_bytes(static_cast<double>(val)).c_str(),
                          format_duration(tm).c_str(), format_bytes(static_cast<double>(t.counter_max)).c_str());
      }
      y += h;
      return;
    }
    if (!t.instants.empty()) {
      // Graph-break markers; markers closer than 3 px merge (count shown on hover).
      const auto& in = t.instants;
      const double slop = 3.0 * v.ns_per_px;
      auto it = std::partition_point(in.begin(), in.end(), [&](const Slice& s) { return s.start_ns < v.start_ns - slop; });
      while (it != in.end() && it->start_ns <= v.end_ns() + slop) {
        auto next = std::partition_point(it, in.end(), [&](const Slice& s) { return s.start_ns < it->start_ns + slop; });
        const float x = x0 + v.x_of(static_cast<double>(it->start_ns));
        dl->AddTriangleFilled(ImVec2(x - 5, y + 2), ImVec2(x + 5, y + 2), ImVec2(x, y + h - 2), style::kBreakMark);
        break_xs.push_back(x);
        if (c.mouse_in && std::fabs(c.mouse.x - x) <= 5 && c.mouse.y >= y && c.mouse.y < y + h)
          m_hover = Pick{c.slot, Source::Break, it->row};
        if (m_selected && m_selected->run == c.slot && m_selected->source == Source::Break) {
          for (auto s = it; s != next; ++s)
            if (s->row == m_selected->row) dl->AddRect(ImVec2(x - 7, y), ImVec2(x + 7, y + h), style::kSelect, 0, 0, 2);
        }
        ++m_layout.drawn_boxes;
        it = next;
      }
      y += h;
      return;
    }
    for (int lv = 0; lv < levels; ++lv) {
      const auto& level = t.levels[lv];
      const float ly0 = y + lv * style::kLevelHeight, ly1 = ly0 + style::kLevelHeight - 1;
      const bool mouse_row = c.mouse_in && c.mouse.y >= ly0 && c.mouse.y < ly1;
      for (const DrawBox& b : layout_level(level, v, style::kMinBoxPx)) {
        const float bx0 = x0 + b.x0, bx1 = x0 + b.x1;
        const Slice& s = level[b.first];
        ++m_layout.drawn_boxes;
        if (b.merged()) {
          ++m_layout.merged_boxes;
          const ImU32 col = darker(style::category_color(s.category), 0.55f);
          dl->AddRectFilled(ImVec2(bx0, ly0), ImVec2(bx1, ly1), col);
          zigzag(dl, bx0, bx1, ly0, ly1, style::category_color(s.category));
          if (bx1 - bx0 > 90) {
            char txt[48];
            std::snprintf(txt, sizeof txt, "%u events (zoom in)", b.count);
            const ImVec4 clip(bx0, ly0, bx1, ly1);
            dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(bx0 + 3, ly0 + 1), style::kText, txt, nullptr,
                        0, &clip);
          }
          if (mouse_row && c.mouse.x >= bx0 && c.mouse.x < bx1) {
            m_hover_merged = std::make_pair(s.start_ns, level[b.first + b.count - 1].end_ns);
            m_hover_merged_count = b.count;
          }
          continue;
        }
        dl->AddRectFilled(ImVec2(bx0, ly0), ImVec2(bx1, ly1), style::category_color(s.category));
        if (bx1 - bx0 > 24) {
          const ImVec4 clip(bx0 + 2, ly0, bx1 - 2, ly1);
          dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(bx0 + 3, ly0 + 1), style::kTextDark,
                      tl.strings[s.label].c_str(), nullptr, 0, &clip);
        }
        if (mouse_row && c.mouse.x >= bx0 - 1 && c.mouse.x < bx1 + 1) m_hover = Pick{c.slot, t.source, s.row};
        if (m_selected && m_selected->run == c.slot && m_selected->source == t.source && m_selected->row == s.row)
          dl->AddRect(ImVec2(bx0 - 1, ly0 - 1), ImVec2(bx1 + 1, ly1 + 1), style::kSelect, 0, 0, 2);
      }
    }
    y += h;
  };

  for (size_t g = 0; g < tl.groups.size(); ++g) {
    const LaneGroup& grp = tl.groups[g];
    const float gy0 = y;
    const std::string key = std::to_string(slot) + ":" + grp.title;
    const ImU32 hc = grp.host ? IM_COL32(70, 60, 90, 255) : grp.emulated ? IM_COL32(80, 70, 40, 255) : style::kGroupHeader;
    size_t events = grp.residency.size();
    for (const auto& t : grp.tracks) events += t.slice_count();
    const bool collapsed = header(style::kHeaderHeight, hc,
                                  grp.title + (grp.emulated ? "   EMULATED" : "") + (events ? "" : "   (no events in this run)"),
                                  key, /*default_collapsed=*/events == 0, style::kText);
    if (!collapsed) {
      size_t row = 0;
      for (const auto& t : grp.tracks) draw_track(t, &lane_y[g], row++);
      if (!grp.residency.empty()) {
        // Weight residency: one summary lane while collapsed, one lane per module when open.
        const std::string rkey = key + ":residency";
        auto it = m_collapsed.find(rkey);
        const bool rc = it == m_collapsed.end() ? grp.residency.size() > 6 : it->second;
        const float ry = y;
        if (rc) {
          const std::string label = "[+] weights (" + std::to_string(grp.residency.size()) + " modules)";
          draw_track(grp.residency_summary, nullptr, row++, &label);
        } else {
          header(style::kLevelHeight, style::kLaneBgAlt,
                 "weight residency per module (" + std::to_string(grp.residency.size()) + ")", rkey, false, style::kDim);
          for (const auto& t : grp.residency) draw_track(t, nullptr, row++);
        }
        if (rc && clicked && c.mouse.y >= ry && c.mouse.y < ry + style::kLevelHeight && c.mouse.x >= c.label_x &&
            c.mouse.x < x0)
          m_collapsed[rkey] = false;
      }
    }
    m_layout.groups.push_back(
        {tl.run.id, grp.device, grp.title, grp.host, grp.emulated, c.label_x, gy0, x1, y, visible(gy0, y)});
    y += 3;
  }
  const float run_y1 = y;

  // Graph breaks: faint lines through the whole run where each region ended.
  dl->ChannelsSetCurrent(kFlows);
  if (break_xs.size() <= 400)
    for (float x : break_xs) dl->AddLine(ImVec2(x, std::max(run_y0, clip0)), ImVec2(x, std::min(run_y1, clip1)), style::kBreakLine);

  // Flows: activation transfers from the source group's "out" lane to the destination's "in".
  {
    const TimeView& v = m_time;
    const double span = v.end_ns() - v.start_ns;
    auto lo = std::partition_point(tl.flows.begin(), tl.flows.end(),
                                   [&](const Flow& f) { return f.start_ns < v.start_ns - 0.25 * span; });
    auto hi = std::partition_point(lo, tl.flows.end(), [&](const Flow& f) { return f.start_ns <= v.end_ns(); });
    if (hi - lo <= 300)
      for (auto it = lo; it != hi; ++it) {
        const float ya = lane_y[it->src_group].out, yb = lane_y[it->dst_group].in;
        if (ya < 0 || yb < 0) continue;
        const float xa = x0 + v.x_of(static_cast<double>(it->start_ns)), xb = x0 + v.x_of(static_cast<double>(it->end_ns));
        if (std::max(xa, xb) < x0 || std::min(xa, xb) > x1) continue;
        const float dy = (yb - ya) * 0.4f;
        dl->AddBezierCubic(ImVec2(xa, ya), ImVec2(xa, ya + dy), ImVec2(xb, yb - dy), ImVec2(xb, yb), style::kFlow, 1.0f);
        dl->AddCircleFilled(ImVec2(xb, yb), 2.5f, style::kFlow);
      }
  }

  dl->ChannelsMerge();
  // The selected event's time as a line through the run.
  if (m_selected && m_selected->run == slot) {
    const auto [a, b] = extent(tl, m_selected->source, m_selected->row);
    if (m_selected->source != Source::Residency)
      for (int64_t t : {a, b}) {
        const float x = x0 + m_time.x_of(static_cast<double>(t));
        if (x >= x0 && x <= x1)
          dl->AddLine(ImVec2(x, std::max(run_y0, clip0)), ImVec2(x, std::min(run_y1, clip1)), IM_COL32(255, 255, 255, 110));
      }
  }
  return y;
}

void View::DrawRangeStats() {
  if (!m_range || !m_timeline[0]) {
    ImGui::PushStyleColor(ImGuiCol_Text, style::kDim);
    ImGui::TextWrapped("Range statistics: drag on the time ruler to select a range (right-click it to clear).");
    ImGui::PopStyleColor();
    return;
  }
  for (int slot = 0; slot < 2; ++slot) {
    if (!m_timeline[slot]) continue;
    if (!m_range_cache[slot] || m_range_cache[slot]->t0_ns != m_range->first ||
        m_range_cache[slot]->t1_ns != m_range->second || m_range_cache_run[slot] != m_timeline[slot]->run.id) {
      m_range_cache[slot] = range_stats(*m_timeline[slot], m_range->first, m_range->second);
      m_range_cache_run[slot] = m_timeline[slot]->run.id;
    }
    const RangeStats& st = *m_range_cache[slot];
    ImGui::Text("run %lld, range %s .. %s (%s), %lld graph breaks", static_cast<long long>(m_timeline[slot]->run.id),
                format_duration(static_cast<double>(st.t0_ns)).c_str(), format_duration(static_cast<double>(st.t1_ns)).c_str(),
                format_duration(static_cast<double>(st.t1_ns - st.t0_ns)).c_str(), static_cast<long long>(st.graph_breaks));
    char id[32];
    std::snprintf(id, sizeof id, "range_stats_%d", slot);
    if (!ImGui::BeginTable(id, 7, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV))
      continue;
    for (const char* h : {"lane group", "compute", "transfers in", "transfers out", "weight onload", "hooks",
                          "compiler-disabled"})
      ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    auto bw = [](int64_t bytes, double gbps) {
      if (!bytes) return std::string("-");
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s, %.2f GB/s", format_bytes(static_cast<double>(bytes)).c_str(), gbps);
      return std::string(buf);
    };
    for (const auto& g : st.groups) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(g.device.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(g.busy_ns[kCompute] ? format_duration(static_cast<double>(g.busy_ns[kCompute])).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bw(g.bytes_in, g.gbps_in()).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bw(g.bytes_out, g.gbps_out()).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(bw(g.onload_bytes, g.gbps_onload()).c_str());
      ImGui::TableNextColumn();
      const int64_t hooks = g.busy_ns[kPreForward] + g.busy_ns[kPostForward] + g.busy_ns[kOtherHook];
      ImGui::TextUnformatted(hooks ? format_duration(static_cast<double>(hooks)).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(g.busy_ns[kDisabled] ? format_duration(static_cast<double>(g.busy_ns[kDisabled])).c_str() : "-");
    }
    ImGui::EndTable();
  }
}

}  // namespace hs::ui
