// View: the compile-mode comparison — per scenario, the policy × mode matrix with latency bars
// (median, min–max whiskers), speed-up against eager, graph-break counts, fullgraph ok/raises
// (error text on hover) and the correctness checks; two runs' timelines aligned below it.
#include <algorithm>
#include <cstdio>
#include <map>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

using nlohmann::json;

const json* field(const storage::RunRecord* r, const char* k) {
  if (!r || !r->results.is_object() || !r->results.contains(k)) return nullptr;
  const json& v = r->results[k];
  return v.is_null() ? nullptr : &v;
}

std::optional<double> latency(const storage::RunRecord* r, const char* k) {
  const json* l = field(r, "latency_ms");
  if (!l || !l->is_object() || !l->contains(k) || !(*l)[k].is_number()) return std::nullopt;
  return (*l)[k].get<double>();
}

void check_cell(const storage::RunRecord* r, const char* k) {
  const json* v = field(r, k);
  if (!v || !v->is_boolean()) {
    ImGui::TextDisabled("-");
    return;
  }
  ImGui::PushStyleColor(ImGuiCol_Text, v->get<bool>() ? style::kOk : style::kBad);
  ImGui::TextUnformatted(v->get<bool>() ? "yes" : "NO");
  ImGui::PopStyleColor();
}

int rank(const std::string& s, std::initializer_list<const char*> order) {
  int i = 0;
  for (const char* o : order) {
    if (s == o) return i;
    ++i;
  }
  return i;
}

}  // namespace

void View::DrawCompareTab() {
  const bool aligned = m_timeline[0] && m_timeline[1];
  const float matrix_h = aligned ? ImGui::GetContentRegionAvail().y * 0.45f : 0.0f;
  ImGui::BeginChild("matrix", ImVec2(0, matrix_h), false);

  // Rows: (scenario, policy, mode) → the run without fullgraph and the one with it.
  struct Row {
    const storage::RunRecord* run = nullptr;
    const storage::RunRecord* fullgraph = nullptr;
  };
  using Key = std::tuple<int, std::string, int, std::string, int, std::string>;
  std::map<Key, Row> rows;
  std::vector<std::string> scenarios;
  for (const auto& r : m_runs) {
    if (std::find(scenarios.begin(), scenarios.end(), r.scenario) == scenarios.end()) scenarios.push_back(r.scenario);
    const int si = static_cast<int>(std::find(scenarios.begin(), scenarios.end(), r.scenario) - scenarios.begin());
    Key k{si, r.scenario, rank(r.policy, {"whole-hook", "offload-only"}), r.policy,
          rank(r.mode, {"eager", "default", "reduce-overhead"}), r.mode};
    (r.fullgraph ? rows[k].fullgraph : rows[k].run) = &r;
  }
  const int64_t primary = m_timeline[0] ? m_timeline[0]->run.id : -1;
  const float line_h = ImGui::GetTextLineHeight();
  // The measured run of a row: the one without fullgraph, else a fullgraph run that worked (a
  // capture of fullgraph runs only).
  auto measured = [](const Row& row) -> const storage::RunRecord* {
    if (row.run) return row.run;
    const json* st = field(row.fullgraph, "status");
    return st && st->is_string() && st->get<std::string>() == "ok" ? row.fullgraph : nullptr;
  };
  // Every latency bar shares one scale: the slowest max of the capture.
  double scale = 0;
  for (const auto& [k, row] : rows) scale = std::max(scale, latency(measured(row), "max").value_or(0));

  for (size_t si = 0; si < scenarios.size(); ++si) {
    const std::string& sc = scenarios[si];
    ImGui::Spacing();
    ImGui::Text("%s", sc.c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("(decode latency of the new tokens: median, min-max whiskers, one scale for all scenarios; "
                        "speed-up vs eager of the same policy)");
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable(("compare_" + sc).c_str(), 10, flags)) continue;
    for (const char* h : {"policy", "mode", "graph breaks", "fullgraph", "decode latency", "vs eager", "argmax",
                          "logits identical", "params on meta", "runs"})
      ImGui::TableSetupColumn(h, std::string(h) == "decode latency" ? ImGuiTableColumnFlags_WidthStretch : 0);
    ImGui::TableHeadersRow();
    for (const auto& [k, row] : rows) {
      if (std::get<0>(k) != static_cast<int>(si)) continue;
      const storage::RunRecord* any = row.run ? row.run : row.fullgraph;
      const storage::RunRecord* m = measured(row);
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const float y0 = ImGui::GetCursorScreenPos().y;
      const bool selected = (row.run && row.run->id == primary) || (row.fullgraph && row.fullgraph->id == primary);
      if (ImGui::Selectable((std::get<3>(k) + "##" + sc + std::get<5>(k)).c_str(), selected,
                            ImGuiSelectableFlags_SpanAllColumns)) {
        const int64_t id = any->id;
        if (ImGui::GetIO().KeyCtrl && id != primary)
          SetCompareRun(id);
        else
          SelectRun(id);
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(std::get<5>(k).c_str());
      // graph breaks
      ImGui::TableNextColumn();
      if (const json* b = field(m, "graph_break_count"); b && b->is_number()) {
        ImGui::PushStyleColor(ImGuiCol_Text, b->get<int64_t>() ? style::kWarn : style::kOk);
        ImGui::Text("%lld", static_cast<long long>(b->get<int64_t>()));
        ImGui::PopStyleColor();
      } else {
        ImGui::TextDisabled("-");
      }
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("graph breaks of one compiled forward (Dynamo's graph_break_count); the Graph breaks "
                          "tab lists every break recorded over all forwards of the run");
      // fullgraph
      ImGui::TableNextColumn();
      if (row.fullgraph) {
        const bool incomplete = row.fullgraph->status == tracer::RunStatus::Incomplete;
        const json* st = field(row.fullgraph, "status");
        const bool ok = !incomplete && st && st->is_string() && st->get<std::string>() == "ok";
        ImGui::PushStyleColor(ImGuiCol_Text, incomplete ? style::kWarn : ok ? style::kOk : style::kBad);
        ImGui::TextUnformatted(incomplete ? "incomplete" : ok ? "ok" : "raises");
        ImGui::PopStyleColor();
        if (ImGui::IsItemHovered()) {
          const json* e = field(row.fullgraph, "error");
          ImGui::BeginTooltip();
          ImGui::PushTextWrapPos(600);
          ImGui::TextUnformatted(e && e->is_string() ? e->get<std::string>().c_str()
                                                     : ok ? "torch.compile(fullgraph=True) captured one graph"
                                                          : "the run did not finish");
          ImGui::PopTextWrapPos();
          ImGui::EndTooltip();
        }
      } else {
        ImGui::TextDisabled("-");
      }
      // latency bar
      ImGui::TableNextColumn();
      {
        const auto med = latency(m, "median"), lo = latency(m, "min"), hi = latency(m, "max");
        const bool failed = m && m->status == tracer::RunStatus::Failed;
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float w = std::max(ImGui::GetContentRegionAvail().x, 120.0f);
        ImDrawList* dl = ImGui::GetWindowDrawList();
        if (failed) {
          dl->AddText(p, style::kBad, ("failed: " + m->error).c_str());
        } else if (med && scale > 0) {
          const float bar_w = w - 90;
          auto xs = [&](double v) { return p.x + static_cast<float>(v / scale) * bar_w; };
          dl->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(xs(*med), p.y + line_h - 1),
                            std::get<3>(k) == "offload-only" ? IM_COL32(80, 170, 120, 255) : IM_COL32(90, 130, 210, 255));
          if (lo && hi) {
            const float ym = p.y + line_h * 0.5f + 0.5f;
            dl->AddLine(ImVec2(xs(*lo), ym), ImVec2(xs(*hi), ym), style::kText, 1.5f);
            dl->AddLine(ImVec2(xs(*lo), p.y + 3), ImVec2(xs(*lo), p.y + line_h - 2), style::kText);
            dl->AddLine(ImVec2(xs(*hi), p.y + 3), ImVec2(xs(*hi), p.y + line_h - 2), style::kText);
          }
          char txt[48];
          std::snprintf(txt, sizeof txt, "%.1f ms", *med);
          dl->AddText(ImVec2(p.x + bar_w + 6, p.y), style::kText, txt);
        } else if (any->status == tracer::RunStatus::Incomplete) {
          dl->AddText(p, style::kWarn, "incomplete");
        } else {
          dl->AddText(p, style::kDim, "-");
        }
        ImGui::Dummy(ImVec2(w, line_h));
        if (ImGui::IsItemHovered() && med && !failed)
          ImGui::SetTooltip("median %.2f ms, min %.2f, max %.2f over %lld repeats%s", *med, lo.value_or(0),
                            hi.value_or(0), static_cast<long long>(field(m, "latency_ms")->value("n", 0)),
                            m == row.fullgraph ? " (the fullgraph run)" : "");
      }
      // speed-up vs the eager run of the same scenario and policy
      ImGui::TableNextColumn();
      {
        const auto eager = rows.find(Key{std::get<0>(k), sc, std::get<2>(k), std::get<3>(k), 0, "eager"});
        const auto med = latency(m, "median");
        const auto base = eager != rows.end() ? latency(measured(eager->second), "median") : std::nullopt;
        if (med && base && *med > 0 && !(m && m->status == tracer::RunStatus::Failed)) {
          const double s = *base / *med;
          ImGui::PushStyleColor(ImGuiCol_Text, s >= 1.05 ? style::kOk : s <= 0.95 ? style::kBad : style::kText);
          ImGui::Text("%.2fx", s);
          ImGui::PopStyleColor();
        } else {
          ImGui::TextDisabled("-");
        }
      }
      ImGui::TableNextColumn();
      check_cell(m, "argmax_match");
      ImGui::TableNextColumn();
      check_cell(m, "logits_identical");
      ImGui::TableNextColumn();
      check_cell(m, "params_on_meta_after");
      ImGui::TableNextColumn();
      std::string ids;
      if (row.run) ids += std::to_string(row.run->id);
      if (row.fullgraph) ids += (ids.empty() ? "" : ", ") + std::to_string(row.fullgraph->id) + " (fullgraph)";
      ImGui::TextDisabled("%s", ids.c_str());
      const float y1 = ImGui::GetCursorScreenPos().y;
      for (const storage::RunRecord* r : {row.run, row.fullgraph})
        if (r) m_layout.compare_rows.push_back({r->id, r->scenario, r->policy, r->mode, r->fullgraph, y0, y1});
    }
    ImGui::EndTable();
  }
  if (!aligned) {
    ImGui::Spacing();
    ImGui::TextDisabled("Ctrl+click a second run (here or in Runs) to see both timelines aligned on one time scale.");
  }
  ImGui::EndChild();
  if (aligned) {
    ImGui::Separator();
    ImGui::Text("Aligned timelines: run %lld above run %lld, same time scale from each run's start",
                static_cast<long long>(m_timeline[0]->run.id), static_cast<long long>(m_timeline[1]->run.id));
    DrawTimelineArea(ImGui::GetContentRegionAvail().y);
  }
}

}  // namespace hs::ui
