// View: the timeline's toolbar — the search box (Tracy's "find zone": events by name or module,
// "match k of n", Enter / F3 next, Shift+Enter / Shift+F3 previous, each match centred and
// highlighted) and the legend and help buttons.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

// ImGui 1.86 names no function keys: these are the platform backend's (GLFW's) codes.
constexpr int kKeyF3 = 292;  // GLFW_KEY_F3
constexpr int kKeyF = 'F';
constexpr float kSearchWidth = 320.0f;
/// A match narrower than this (px) at the current zoom is zoomed to kMatchZoomShare of the view.
constexpr float kMatchMinPx = 12.0f;
constexpr double kMatchZoomShare = 0.05;

void item_rect(float (&r)[4]) {
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  r[0] = a.x, r[1] = a.y, r[2] = b.x, r[3] = b.y;
}

}  // namespace

std::optional<size_t> View::search_current() const { return m_match; }

/// One row above the ruler: the search box, its buttons and count, the legend and help buttons.
void View::DrawTimelineToolbar() {
  DrawSearchBox();
  ImGui::SameLine();
  const ImGuiStyle& st = ImGui::GetStyle();
  const float buttons = ImGui::CalcTextSize("Legend (L)").x + ImGui::CalcTextSize("Help (?)").x +
                        4 * st.FramePadding.x + st.ItemSpacing.x;
  ImGui::SetCursorPosX(std::max(ImGui::GetCursorPosX(), ImGui::GetContentRegionMax().x - buttons - st.ScrollbarSize));
  if (ImGui::SmallButton("Legend (L)")) m_show_legend = !m_show_legend;
  item_rect(m_layout.legend_button);
  ImGui::SameLine();
  if (ImGui::SmallButton("Help (?)")) m_show_help = !m_show_help;
  item_rect(m_layout.help_button);
}

void View::DrawSearchBox() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.KeyCtrl && ImGui::IsKeyPressed(kKeyF, false)) m_search_focus = true;
  if (m_search_focus) {
    ImGui::SetKeyboardFocusHere();
    m_search_focus = false;
  }
  ImGui::SetNextItemWidth(kSearchWidth);
  const bool enter = ImGui::InputTextWithHint("##search", "find: event or module name (Ctrl+F)", m_search,
                                              sizeof m_search, ImGuiInputTextFlags_EnterReturnsTrue);
  item_rect(m_layout.search.box);
  UpdateSearch();
  if (enter) {
    StepSearch(io.KeyShift ? -1 : 1);
    m_search_focus = true;  // Enter again steps on
  } else if (!m_matches.empty() && ImGui::IsKeyPressed(kKeyF3)) {
    StepSearch(io.KeyShift ? -1 : 1);
  }
  ImGui::SameLine();
  if (ImGui::ArrowButton("##prev", ImGuiDir_Left)) StepSearch(-1);
  ImGui::SameLine();
  if (ImGui::ArrowButton("##next", ImGuiDir_Right)) StepSearch(1);
  ImGui::SameLine();
  if (m_search_query.empty())
    ImGui::TextDisabled("Enter / F3: next match, Shift: previous");
  else if (m_matches.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(style::kWarn), "no match");
  else if (!m_match)
    ImGui::Text("%zu matches (Enter: first)", m_matches.size());
  else
    ImGui::Text("match %zu of %zu", *m_match + 1, m_matches.size());
  auto& s = m_layout.search;
  s.query = m_search_query;
  s.matches = static_cast<int64_t>(m_matches.size());
  s.current = m_match ? static_cast<int64_t>(*m_match + 1) : 0;
  if (m_match) {
    s.start_ns = static_cast<double>(m_matches[*m_match].start_ns);
    s.end_ns = static_cast<double>(m_matches[*m_match].end_ns);
  }
}

/// Finds the matches again when the query or the run changed.
void View::UpdateSearch() {
  const int64_t run = m_timeline[0] ? m_timeline[0]->run.id : -1;
  if (m_search_query == m_search && m_search_run == run) return;
  m_search_query = m_search;
  m_search_run = run;
  m_matches = m_timeline[0] ? find_events(*m_timeline[0], m_search_query) : std::vector<SearchMatch>{};
  m_match.reset();
}

void View::StepSearch(int direction) {
  UpdateSearch();
  if (m_matches.empty()) return;
  const size_t n = m_matches.size();
  size_t i = 0;
  if (m_match)
    i = (*m_match + n + static_cast<size_t>(direction > 0 ? 1 : n - 1)) % n;
  else if (direction < 0)
    i = n - 1;
  GoToMatch(i);
}

/// Centres the view on match `index` (zooming in when it would be too narrow to see, out when
/// it is wider than the view), unfolds its group and scrolls it into view.
void View::GoToMatch(size_t index) {
  m_match = index;
  const SearchMatch& m = m_matches.at(index);
  const double a = static_cast<double>(m.start_ns), b = static_cast<double>(m.end_ns), span = b - a;
  const double view = m_time.end_ns() - m_time.start_ns;
  if (span > 0.8 * view)
    m_time.fit(a, b, 0.1);
  else if (span < kMatchMinPx * m_time.ns_per_px && span > 0)
    m_time.fit(0.5 * (a + b) - 0.5 * span / kMatchZoomShare, 0.5 * (a + b) + 0.5 * span / kMatchZoomShare, 0);
  m_time.center_on(0.5 * (a + b));
  m_fit_pending = false;
  m_collapsed[std::to_string(0) + ":" + m_timeline[0]->groups.at(m.group).title] = false;
  m_scroll_to_match = true;
}

}  // namespace hs::ui
