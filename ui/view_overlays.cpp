// View: what floats over the views — the legend (which colour is which event kind, and the
// marks drawn over the lanes) and the keyboard/mouse help, and the keys that open them.
#include <iterator>
#include <string>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

// ImGui 1.86 names no function keys: the platform backend's (GLFW's) code.
constexpr int kKeyF1 = 290;  // GLFW_KEY_F1
constexpr int kKeyLegend = 'L';

struct Binding {
  const char* keys;
  const char* action;
};
/// Every binding of the viewer, as the help overlay lists them (README's `view` section too).
constexpr Binding kBindings[] = {
    {"wheel", "zoom around the cursor (Ctrl: finer, Shift: faster)"},
    {"drag (left or right button)", "pan: time sideways, lanes up and down"},
    {"W / S", "zoom in / out around the centre"},
    {"A / D", "pan left / right by a tenth of the view"},
    {"drag on the ruler", "select a time range: its statistics below; right-click the ruler clears it"},
    {"hover", "an event's fields in a tooltip (full names of shortened labels)"},
    {"click an event", "select it: its details below"},
    {"click a zoom-in block or a swap group", "zoom to it"},
    {"click empty lane space", "clear the selection"},
    {"click a group header or a lane name", "fold / unfold it"},
    {"runs list: click / Ctrl+click", "open a run / align a second run under it (click again: remove)"},
    {"tables: click / Shift+click a header", "sort by that column / by several columns"},
    {"tables: click a row", "centre and select that event on the timeline"},
    {"Ctrl+F", "find events by name or module"},
    {"Enter or F3 / Shift+Enter or Shift+F3", "next / previous match (also the < > buttons)"},
    {"L", "show / hide the legend"},
    {"? or F1", "show / hide this help"},
    {"Esc", "close the help, then the legend; then clear the search, then the selection"},
};

/// The marks the lanes draw besides the category colours.
void legend_marks(std::vector<std::string>& lines) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float h = ImGui::GetTextLineHeight();
  auto mark = [&](const char* text, auto draw) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    draw(dl, p, h);
    ImGui::Dummy(ImVec2(28, h));
    ImGui::SameLine();
    ImGui::TextUnformatted(text);
    lines.emplace_back(text);
  };
  mark("N events merged (zoom in)", [](ImDrawList* d, ImVec2 p, float hh) {
    d->AddRectFilled(p, ImVec2(p.x + 24, p.y + hh), IM_COL32(43, 77, 121, 255));
    d->AddLine(ImVec2(p.x, p.y + hh), ImVec2(p.x + 8, p.y), style::category_color(kCompute));
    d->AddLine(ImVec2(p.x + 8, p.y), ImVec2(p.x + 16, p.y + hh), style::category_color(kCompute));
    d->AddLine(ImVec2(p.x + 16, p.y + hh), ImVec2(p.x + 24, p.y), style::category_color(kCompute));
  });
  mark("graph break (and its line through the run)", [](ImDrawList* d, ImVec2 p, float hh) {
    d->AddTriangleFilled(ImVec2(p.x + 7, p.y), ImVec2(p.x + 17, p.y), ImVec2(p.x + 12, p.y + hh), style::kBreakMark);
  });
  mark("activation transfer flow", [](ImDrawList* d, ImVec2 p, float hh) {
    d->AddBezierCubic(ImVec2(p.x, p.y + 2), ImVec2(p.x + 8, p.y + 2), ImVec2(p.x + 16, p.y + hh - 2),
                      ImVec2(p.x + 24, p.y + hh - 2), style::kFlow, 1.5f);
  });
  mark("launch flow (CUDA API call -> GPU record)", [](ImDrawList* d, ImVec2 p, float hh) {
    d->AddBezierCubic(ImVec2(p.x, p.y + 2), ImVec2(p.x + 8, p.y + 2), ImVec2(p.x + 16, p.y + hh - 2),
                      ImVec2(p.x + 24, p.y + hh - 2), style::kLaunchFlow, 1.5f);
  });
  mark("memory resident (scale: peak, half, 0)", [](ImDrawList* d, ImVec2 p, float hh) {
    d->AddRectFilled(ImVec2(p.x, p.y + hh * 0.4f), ImVec2(p.x + 24, p.y + hh), style::kMemoryFill);
  });
  mark("selected event", [](ImDrawList* d, ImVec2 p, float hh) {
    d->AddRect(ImVec2(p.x + 2, p.y + 1), ImVec2(p.x + 22, p.y + hh - 1), style::kSelect, 0, 0, 2);
  });
  mark("search match", [](ImDrawList* d, ImVec2 p, float hh) {
    d->AddRect(ImVec2(p.x + 2, p.y + 1), ImVec2(p.x + 22, p.y + hh - 1), style::kSearchHit, 0, 0, 3);
  });
}

void window_rect(FrameLayout::Overlay& o) {
  const ImVec2 a = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
  o.shown = true;
  o.rect[0] = a.x, o.rect[1] = a.y, o.rect[2] = a.x + s.x, o.rect[3] = a.y + s.y;
}

}  // namespace

/// L: legend; ? or F1: help; Esc: close the help, the legend, then clear the search, then
/// the selection. None while a text field has the keyboard (the filter, the search box).
void View::HandleGlobalKeys() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  bool question = false;
  for (ImWchar c : io.InputQueueCharacters) question |= c == '?';
  if (question || ImGui::IsKeyPressed(kKeyF1, false)) m_show_help = !m_show_help;
  if (!io.KeyCtrl && ImGui::IsKeyPressed(kKeyLegend, false)) m_show_legend = !m_show_legend;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false)) {
    if (m_show_help)
      m_show_help = false;
    else if (m_show_legend)
      m_show_legend = false;
    else if (m_search[0]) {
      m_search[0] = '\0';
      UpdateSearch();
    } else {
      m_selected.reset();
    }
  }
}

/// The legend over the timeline's top right: the colour of every category the open run uses,
/// then the marks.
void View::DrawLegend() {
  if (!m_show_legend || m_tab != Tab::Timeline || !m_timeline[0]) return;
  if (m_categories_run != m_timeline[0]->run.id) {
    m_categories = categories_used(*m_timeline[0]);
    m_categories_run = m_timeline[0]->run.id;
  }
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(display.x - 16, 70), ImGuiCond_Always, ImVec2(1, 0));
  ImGui::SetNextWindowBgAlpha(0.92f);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoFocusOnAppearing |
                                 ImGuiWindowFlags_NoMove;
  if (ImGui::Begin("Legend (L)", &m_show_legend, flags)) {
    auto& lines = m_layout.legend.lines;
    ImGui::TextDisabled("event kinds in this run");
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float h = ImGui::GetTextLineHeight();
    for (uint8_t c = 0; c < kCategoryCount; ++c) {
      if (!m_categories[c] || c == kBreak) continue;
      const ImVec2 p = ImGui::GetCursorScreenPos();
      dl->AddRectFilled(ImVec2(p.x, p.y + 1), ImVec2(p.x + 24, p.y + h - 1), style::category_color(c));
      ImGui::Dummy(ImVec2(28, h));
      ImGui::SameLine();
      ImGui::TextUnformatted(category_name(c));
      lines.emplace_back(category_name(c));
    }
    ImGui::Separator();
    legend_marks(lines);
    window_rect(m_layout.legend);
  }
  ImGui::End();
}

/// The bindings, centred over the window.
void View::DrawHelp() {
  if (!m_show_help) return;
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(display.x * 0.5f, display.y * 0.5f), ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowBgAlpha(0.96f);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoMove;
  if (ImGui::Begin("Keyboard and mouse (? or F1, Esc closes)", &m_show_help, flags)) {
    if (ImGui::BeginTable("bindings", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
      for (const Binding& b : kBindings) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(style::kWarn), "%s", b.keys);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(b.action);
        m_layout.help.lines.push_back(std::string(b.keys) + ": " + b.action);
      }
      ImGui::EndTable();
    }
    window_rect(m_layout.help);
  }
  ImGui::End();
}

}  // namespace hs::ui
