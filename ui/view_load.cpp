// View: what the views say while a run loads (ui/timeline_loader.h), Nsight Systems-style —
// which run, rows read of its total, the layout once every row is read, why a load failed —
// in the timeline area, its lane panes and the tables that need the rows still to come.
#include <algorithm>
#include <cstdio>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

/// 10000049 → "10,000,049".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

/// "hook_events" → "hook events".
std::string kind_words(std::string name) {
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

}  // namespace

void View::RecordLoads() {
  m_layout.loads.clear();
  for (int slot = 0; slot < 2; ++slot) {
    if (!m_slot_run[slot] || (!m_load[slot] && m_load_error[slot].empty())) continue;
    FrameLayout::Load l;
    l.slot = slot;
    l.capture = static_cast<int>(m_timeline_capture[slot]);
    l.run_id = *m_slot_run[slot];
    const std::string run = capture_prefix(m_timeline_capture[slot]) + "run " + std::to_string(l.run_id);
    if (!m_load[slot]) {
      l.failed = true;
      l.text = "cannot show " + run + ": " + m_load_error[slot];
      m_layout.loads.push_back(std::move(l));
      continue;
    }
    const TimelineLoader::Progress p = m_load[slot]->progress();
    l.rows_read = p.rows_read;
    l.rows_total = p.rows_total;
    l.laying_out = p.laying_out;
    l.preview = m_timeline[slot] != nullptr;
    l.text = "loading " + run + ": ";
    if (p.laying_out)
      l.text += "laying out the lanes of its " + grouped(p.rows_read) + " rows";
    else if (p.rows_total >= 0)
      l.text += grouped(std::min(p.rows_read, p.rows_total)) + " of " + grouped(p.rows_total) + " rows read";
    else
      l.text += grouped(p.rows_read) + " rows read";
    if (l.preview && !m_timeline[slot]->pending.empty()) {
      l.text += "; still to come:";
      for (size_t i = 0; i < m_timeline[slot]->pending.size(); ++i)
        l.text += (i ? ", " : " ") + kind_words(m_timeline[slot]->pending[i]);
    }
    m_layout.loads.push_back(std::move(l));
  }
}

bool View::DrawLoadStatus(int slot) {
  const auto it = std::find_if(m_layout.loads.begin(), m_layout.loads.end(),
                               [slot](const FrameLayout::Load& l) { return l.slot == slot; });
  if (it == m_layout.loads.end()) return false;
  ImGui::PushStyleColor(ImGuiCol_Text, it->failed ? style::kBad : style::kText);
  ImGui::TextWrapped("%s", it->text.c_str());
  ImGui::PopStyleColor();
  if (it->failed) return true;
  const float fraction = it->laying_out ? 1.0f
                         : it->rows_total > 0
                             ? std::min(1.0f, static_cast<float>(it->rows_read) / static_cast<float>(it->rows_total))
                             : 0.0f;
  char overlay[64];
  std::snprintf(overlay, sizeof overlay, "%s", it->laying_out ? "laying out" : "");
  if (!it->laying_out && it->rows_total > 0) std::snprintf(overlay, sizeof overlay, "%.0f%%", 100.0 * fraction);
  ImGui::ProgressBar(fraction, ImVec2(-1, 0), overlay);
  return true;
}

bool View::TableLoading(std::initializer_list<std::string_view> kinds) {
  const RunTimeline* tl = m_timeline[0].get();
  bool missing = tl == nullptr;
  if (tl && tl->partial)
    for (std::string_view k : kinds) missing |= std::find(tl->pending.begin(), tl->pending.end(), k) != tl->pending.end();
  if (!missing) return false;
  if (!DrawLoadStatus(0) && m_slot_run[0]) ImGui::TextDisabled("loading run %lld", static_cast<long long>(*m_slot_run[0]));
  return true;
}

}  // namespace hs::ui
