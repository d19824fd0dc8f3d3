// View: the compile-mode comparison — per scenario, the policy × mode matrix with latency bars
// (median, min–max whiskers), speed-up against eager, graph-break counts, fullgraph ok/raises
// (error text on hover) and the correctness checks; per profiled program (`hookscope profile`),
// its verdict block's figures per policy; two runs' timelines aligned below it.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <imgui.h>

#include "ui/view.h"
#include "ui/view_style.h"
#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/profile_verdicts.h"
#include "facts/verdicts.h"
#include "measurement/verdict.h"
#include "reports/report_json.h"

namespace hs::ui {

namespace {

using nlohmann::json;

const json* field(const storage::RunRecord* r, const char* k) {
  if (!r || !r->results.is_object() || !r->results.contains(k)) return nullptr;
  const json& v = r->results[k];
  return v.is_null() ? nullptr : &v;
}

// A statistic (median, q1, q3, min, max, n) of the run's decode ms/token.
std::optional<double> latency(const storage::RunRecord* r, const char* k) {
  const json* l = field(r, "decode_ms_per_token");
  if (!l || !l->is_object() || !l->contains(k) || !(*l)[k].is_number()) return std::nullopt;
  return (*l)[k].get<double>();
}

/// An empty cell as the report writes it ('–'), or '-' where the font lacks the dash.
const std::string& empty_cell() {
  static const std::string with = "–", without = "-";
  return style::font_has_typography() ? with : without;
}

void check_cell(const storage::RunRecord* r, const char* k) {
  const json* v = field(r, k);
  if (!v || !v->is_boolean()) {
    ImGui::TextDisabled("%s", empty_cell().c_str());
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

bool succeeded(const storage::RunRecord* r) {
  const json* st = field(r, "status");
  return st && st->is_string() && st->get<std::string>() == "ok";
}

/// The matrix' columns, in order.
enum Column : int {
  kPolicy,
  kMode,
  kGraphBreaks,
  kFullgraph,
  kLatency,
  kVsEager,
  kArgmax,
  kLogitsIdentical,
  kParamsOnMeta,
  kRunIds,
  kColumnCount
};
constexpr const char* kColumnNames[kColumnCount] = {"policy",         "mode",     "graph breaks / entries†", "fullgraph",
                                                    "decode ms/token", "vs eager", "argmax",       "logits identical",
                                                    "params on meta", "runs"};

}  // namespace

/// A row of the comparison matrix: one scenario × policy × mode. Rows sort as the capture's
/// matrix runs: scenarios in order of first appearance, whole-hook before offload-only, eager
/// before default before reduce-overhead (names outside those after them, by name).
struct MatrixKey {
  int scenario_order;  ///< index into CompareMatrix::scenarios
  std::string scenario;
  int engine_order;    ///< torch, libtorch, then others
  std::string engine;
  int policy_order;
  std::string policy;
  int mode_order;
  std::string mode;
  auto operator<=>(const MatrixKey&) const = default;
};

/// The runs of a row: the one without fullgraph and the one with it (either may be missing).
struct MatrixRow {
  const storage::RunRecord* run = nullptr;
  const storage::RunRecord* fullgraph = nullptr;
  /// The run that clicking the row opens.
  const storage::RunRecord* any() const { return run ? run : fullgraph; }
  /// The run whose measurements the row shows: the one without fullgraph, else a fullgraph run
  /// that worked (in a capture of fullgraph runs only).
  const storage::RunRecord* measured() const { return run ? run : succeeded(fullgraph) ? fullgraph : nullptr; }
};

/// Every run of a capture as rows of the matrix.
struct CompareMatrix {
  size_t capture = 0;                  ///< the View's index of the capture
  std::vector<std::string> scenarios;  ///< in order of first appearance
  std::map<MatrixKey, MatrixRow> rows;
  /// ms: the slowest max of the capture (of all captures shown), shared by every latency bar
  double latency_scale = 0;

  explicit CompareMatrix(const std::vector<storage::RunRecord>& runs, size_t capture_ = 0) : capture(capture_) {
    for (const auto& r : runs) {
      if (r.engine == "profile") continue;  // a profiled program's runs: View::DrawComparePrograms
      auto s = std::find(scenarios.begin(), scenarios.end(), r.scenario);
      if (s == scenarios.end()) s = scenarios.insert(s, r.scenario);
      const MatrixKey key{static_cast<int>(s - scenarios.begin()),
                          r.scenario,
                          rank(r.engine, {"torch", "libtorch"}),
                          r.engine,
                          rank(r.policy, {"whole-hook", "offload-only"}),
                          r.policy,
                          rank(r.mode, {"eager", "default", "reduce-overhead"}),
                          r.mode};
      (r.fullgraph ? rows[key].fullgraph : rows[key].run) = &r;
    }
    for (const auto& [k, row] : rows)
      latency_scale = std::max(latency_scale, latency(row.measured(), "max").value_or(0));
    std::vector<const json*> results;
    for (const auto& r : runs) results.push_back(&r.results);
    const auto judged = measurement::judge_runs(results);
    for (size_t i = 0; i < runs.size(); ++i)
      if (judged[i]) verdicts[&runs[i]] = *judged[i];
  }
  /// Each compiled run's speed-up against eager and what may be concluded (measurement/verdict.h).
  std::map<const storage::RunRecord*, measurement::Judgement> verdicts;
  /// The eager row of `key`'s scenario and policy, if the capture ran one.
  const MatrixRow* eager_of(const MatrixKey& key) const {
    auto it = rows.find(MatrixKey{key.scenario_order, key.scenario, key.engine_order, key.engine, key.policy_order,
                                  key.policy, 0, "eager"});
    return it == rows.end() ? nullptr : &it->second;
  }
};

namespace {

/// A compiled run's breaks as every view writes them (facts::breaks_text: Dynamo's
/// graph_break_count with its recompiles, the LibTorch engine's disabled-scope entries marked,
/// a run with only a compile log its graph-break records, named so).
std::string graph_breaks_cell(const storage::RunRecord* m) {
  const json* source = field(m, "breaks_source");
  const std::string from = source && source->is_string() ? source->get<std::string>() : "none";
  const std::string report_text = m ? facts::breaks_text(m->results) : "–";
  const std::string text = display_text(report_text, style::font_has_typography());
  if (report_text == "–") {
    ImGui::TextDisabled("%s", text.c_str());
  } else {
    const bool none = report_text == "0" || report_text.rfind("0 ", 0) == 0 || report_text.rfind("0†", 0) == 0;
    ImGui::PushStyleColor(ImGuiCol_Text, none ? style::kOk : style::kWarn);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopStyleColor();
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("%s", display_text(from == "dynamo" ? "graph breaks of one compiled forward (Dynamo's "
                                                            "graph_break_count from torch._dynamo.explain, torch "
                                                            "engine), with the recompiles over the run"
                                         : from == "log" ? "graph-break records of the run's compile log over every "
                                                           "compile it holds, as tlparse lists them: not one forward's "
                                                           "graph_break_count"
                                                         : "† LibTorch engine: compiler-disabled scopes entered inside "
                                                           "a captured region of one compiled forward, not Dynamo's "
                                                           "graph_break_count; the Breaks tab lists every one recorded "
                                                           "over all forwards of the run",
                                         style::font_has_typography()).c_str());
  return text;
}

/// Whether torch.compile(fullgraph=True) captured the model: ok / raises (the error on hover) /
/// incomplete.
void fullgraph_cell(const storage::RunRecord* fullgraph) {
  if (!fullgraph) {
    ImGui::TextDisabled("%s", empty_cell().c_str());
    return;
  }
  const bool incomplete = fullgraph->status == tracer::RunStatus::Incomplete;
  const bool ok = !incomplete && succeeded(fullgraph);
  ImGui::PushStyleColor(ImGuiCol_Text, incomplete ? style::kWarn : ok ? style::kOk : style::kBad);
  ImGui::TextUnformatted(incomplete ? "incomplete" : ok ? "ok" : "raises");
  ImGui::PopStyleColor();
  if (!ImGui::IsItemHovered()) return;
  const json* e = field(fullgraph, "error");
  ImGui::BeginTooltip();
  ImGui::PushTextWrapPos(600);
  ImGui::TextUnformatted(e && e->is_string() ? e->get<std::string>().c_str()
                         : ok                ? "torch.compile(fullgraph=True) captured one graph"
                                             : "the run did not finish");
  ImGui::PopTextWrapPos();
  ImGui::EndTooltip();
}

/// Decode ms/token as a bar (median) with the interquartile range as whiskers, on the matrix'
/// one scale.
void latency_cell(const CompareMatrix& matrix, const MatrixKey& key, const MatrixRow& row) {
  const storage::RunRecord* m = row.measured();
  const auto med = latency(m, "median"), lo = latency(m, "q1"), hi = latency(m, "q3");
  const bool failed = m && m->status == tracer::RunStatus::Failed;
  const float line_h = ImGui::GetTextLineHeight();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float w = std::max(ImGui::GetContentRegionAvail().x, 120.0f);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (failed) {
    dl->AddText(p, style::kBad, ("failed: " + m->error).c_str());
  } else if (med && matrix.latency_scale > 0) {
    const float bar_w = w - 90;  // the rest: the median as text
    auto xs = [&](double v) { return p.x + static_cast<float>(v / matrix.latency_scale) * bar_w; };
    dl->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(xs(*med), p.y + line_h - 1), style::policy_color(key.policy));
    if (lo && hi) {
      const float ym = p.y + line_h * 0.5f + 0.5f;
      dl->AddLine(ImVec2(xs(*lo), ym), ImVec2(xs(*hi), ym), style::kText, 1.5f);
      dl->AddLine(ImVec2(xs(*lo), p.y + 3), ImVec2(xs(*lo), p.y + line_h - 2), style::kText);
      dl->AddLine(ImVec2(xs(*hi), p.y + 3), ImVec2(xs(*hi), p.y + line_h - 2), style::kText);
    }
    char txt[48];
    std::snprintf(txt, sizeof txt, "%.2f ms/tok", *med);
    dl->AddText(ImVec2(p.x + bar_w + 6, p.y), style::kText, txt);
  } else if (row.any()->status == tracer::RunStatus::Incomplete) {
    dl->AddText(p, style::kWarn, "incomplete");
  } else {
    dl->AddText(p, style::kDim, empty_cell().c_str());
  }
  ImGui::Dummy(ImVec2(w, line_h));
  if (ImGui::IsItemHovered() && med && !failed)
    ImGui::SetTooltip("decode %.3f ms/token median, interquartile range %.3f-%.3f, min %.3f, max %.3f over %lld "
                      "measured generates%s",
                      *med, lo.value_or(0), hi.value_or(0), latency(m, "min").value_or(0),
                      latency(m, "max").value_or(0), static_cast<long long>(latency(m, "n").value_or(0)),
                      m == row.fullgraph ? " (the fullgraph run)" : "");
}

/// Speed-up against eager (the interleaved eager generates of the same cell, else the eager run
/// of the same scenario and policy), coloured only when the verdict is faster or slower.
void speedup_cell(const CompareMatrix& matrix, const MatrixRow& row) {
  const storage::RunRecord* m = row.measured();
  const auto it = m ? matrix.verdicts.find(m) : matrix.verdicts.end();
  if (it == matrix.verdicts.end() || m->status == tracer::RunStatus::Failed) {
    ImGui::TextDisabled("%s", empty_cell().c_str());
    return;
  }
  const measurement::Judgement& j = it->second;
  const bool decided = j.verdict == measurement::Verdict::Faster || j.verdict == measurement::Verdict::Slower;
  ImGui::PushStyleColor(ImGuiCol_Text, !decided ? style::kDim
                                       : j.verdict == measurement::Verdict::Faster ? style::kOk
                                                                                   : style::kBad);
  ImGui::Text("%.2fx %s", j.speedup, measurement::verdict_name(j.verdict));
  ImGui::PopStyleColor();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", j.why.c_str());
}

/// "4, 5 (fullgraph)": the runs of a row.
void run_ids_cell(const MatrixRow& row) {
  std::string ids;
  if (row.run) ids += std::to_string(row.run->id);
  if (row.fullgraph) ids += (ids.empty() ? "" : ", ") + std::to_string(row.fullgraph->id) + " (fullgraph)";
  ImGui::TextDisabled("%s", ids.c_str());
}

}  // namespace

namespace {

/// The verdict blocks of a capture's profiled programs as `hookscope report` makes them: each
/// profile run as report.json has it (reports::report_run), then facts::profile_verdicts.
/// Throws what the reader throws.
nlohmann::json compute_profile_verdicts(const storage::CaptureReader& rd, const std::vector<storage::RunRecord>& runs) {
  json report{{"runs", json::array()}};
  // Each run as the report has it (reports::report_run, from the stored record: the View's
  // copies carry the break facts merged in).
  for (const auto& rec : runs)
    if (rec.engine == "profile") report["runs"].push_back(reports::report_run(rd, rd.run(rec.id)));
  return facts::profile_verdicts(report);
}

}  // namespace

void View::DrawCompareTab() {
  for (auto& c : m_captures)
    if (!c.profile_verdicts) try {
        c.profile_verdicts = compute_profile_verdicts(*c.reader, c.runs);
      } catch (const std::exception& e) {
        c.profile_verdicts = json::array();
        c.profile_error = e.what();
      }
  const bool aligned = m_slot_run[0] && m_slot_run[1];
  const float matrix_h = aligned ? ImGui::GetContentRegionAvail().y * 0.45f : 0.0f;
  ImGui::BeginChild("matrix", ImVec2(0, matrix_h), false);
  // One matrix per capture, every latency bar on one scale.
  std::vector<CompareMatrix> matrices;
  double scale = 0;
  for (size_t i = 0; i < m_captures.size(); ++i) {
    matrices.emplace_back(m_captures[i].runs, i);
    scale = std::max(scale, matrices.back().latency_scale);
  }
  for (auto& m : matrices) {
    m.latency_scale = scale;
    DrawCompareCapture(m);
  }
  if (!aligned) {
    ImGui::Spacing();
    ImGui::TextDisabled(m_captures.size() > 1
                            ? "Ctrl+click a run of the other capture (here or in Runs) to see both timelines aligned "
                              "on one time scale."
                            : "Ctrl+click a second run (here or in Runs) to see both timelines aligned on one time scale.");
  }
  ImGui::EndChild();
  if (aligned) {
    ImGui::Separator();
    ImGui::Text("Aligned timelines: %srun %lld above %srun %lld, same time scale from each run's start",
                capture_prefix(m_timeline_capture[0]).c_str(), static_cast<long long>(*m_slot_run[0]),
                capture_prefix(m_timeline_capture[1]).c_str(), static_cast<long long>(*m_slot_run[1]));
    DrawTimelineArea(ImGui::GetContentRegionAvail().y);
  }
}

/// The matrices of one capture, under its file's name when several captures are open.
void View::DrawCompareCapture(const CompareMatrix& matrix) {
  if (m_captures.size() > 1) {
    const Capture& c = m_captures[matrix.capture];
    ImGui::Spacing();
    ImGui::PushStyleColor(ImGuiCol_Text, style::kText);
    ImGui::Text("%s", c.label.c_str());
    ImGui::PopStyleColor();
    ImGui::SameLine();
    ImGui::TextDisabled("(%s, %zu runs)", c.reader->path().filename().c_str(), c.runs.size());
    ImGui::Separator();
  }
  ImGui::PushID(static_cast<int>(matrix.capture));
  for (size_t si = 0; si < matrix.scenarios.size(); ++si) DrawCompareScenario(matrix, si);
  DrawComparePrograms(matrix.capture);
  ImGui::PopID();
}

namespace {

std::string fmt(double v, const char* f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}


std::string count_text(const json& v) { return v.is_number() ? std::to_string(v.get<int64_t>()) : "–"; }

/// The figures of a profiled program's table, in the report's order, each a field of the verdict
/// block's sides (facts/profile_verdicts.h) and a fact of facts/catalogue.h; `cell` writes a
/// side's value as the report does.
struct ProgramFigure {
  const char* key;
  std::string (*cell)(const json& side);
};
const std::vector<ProgramFigure>& program_figures() {
  static const std::vector<ProgramFigure> f = {
      {"command", [](const json& s) { return s["command"].is_string() ? s["command"].get<std::string>() : "–"; }},
      {"exit_status",  // as the report's: the status the program exited with, and whether its run is incomplete
       [](const json& s) {
         if (s["status"] != "incomplete") return count_text(s["exit_status"]);
         return s["exit_status"].is_number() ? count_text(s["exit_status"]) + " (incomplete)" : std::string("incomplete");
       }},
      {"log_graphs", [](const json& s) { return count_text(s["log_graphs"]); }},
      {"log_graph_break_count", [](const json& s) { return count_text(s["log_graph_break_count"]); }},
      {"log_graph_break_records", [](const json& s) { return count_text(s["log_graph_break_records"]); }},
      {"log_recompiles", [](const json& s) { return count_text(s["log_recompiles"]); }},
      {"log_frames_skipped", [](const json& s) { return count_text(s["log_frames_skipped"]); }},
      {"log_recompile_limit_hits", [](const json& s) { return count_text(s["log_recompile_limit_hits"]); }},
      {"hook_busy_ns",
       [](const json& s) {
         if (!s["hook_calls"].is_number() || s["hook_calls"].get<int64_t>() == 0 || !s["hook_busy_ns"].is_number())
           return std::string("–");
         const int64_t calls = s["hook_calls"].get<int64_t>();
         return fmt(s["hook_busy_ns"].get<double>() / 1e6, "%.1f") + " ms (" + std::to_string(calls) +
                (calls == 1 ? " call)" : " calls)");
       }},
      {"hook_compile_ns",
       [](const json& s) {
         return s["hook_compile_ns"].is_number() ? fmt(s["hook_compile_ns"].get<double>() / 1e6, "%.1f") + " ms"
                                                 : std::string("–");
       }},
      {"weight_onloads", [](const json& s) { return count_text(s["weight_onloads"]); }},
      {"weight_onload_bytes",
       [](const json& s) {
         return s["weight_onload_bytes"].is_number() ? facts::bytes_text(s["weight_onload_bytes"].get<int64_t>()) : std::string("–");
       }},
      {"iterations",
       [](const json& s) {
         return count_text(s["iterations"]) +
                (s["iteration_source"].is_string() ? " (" + s["iteration_source"].get<std::string>() + ")" : "");
       }},
      {"iteration_ms",
       [](const json& s) {
         return s["iteration_ms"].is_number() ? fmt(s["iteration_ms"].get<double>(), "%.2f") + " ms (median)"
                                              : std::string("–");
       }},
  };
  return f;
}

}  // namespace

/// Each profiled program of the capture: a table of its verdict block's figures, a row per
/// figure (its catalogue label, its definition on hover), a column per policy (before, after),
/// the policies' runs in the first row; the block's iteration_speedup under it.
void View::DrawComparePrograms(size_t capture) {
  const Capture& c = m_captures[capture];
  const bool typo = style::font_has_typography();
  if (!c.profile_error.empty()) {
    ImGui::Spacing();
    ImGui::PushStyleColor(ImGuiCol_Text, style::kBad);
    ImGui::TextWrapped("profiled programs: %s", c.profile_error.c_str());
    ImGui::PopStyleColor();
  }
  if (!c.profile_verdicts) return;
  const int64_t primary = m_slot_run[0] && m_timeline_capture[0] == capture ? *m_slot_run[0] : -1;
  for (const json& v : *c.profile_verdicts) {
    const std::string program = v.value("scenario", "");
    // Headed as the report heads it: the runs' label, with the program.
    const std::string heading = v.contains("label") && v["label"].is_string()
                                    ? v["label"].get<std::string>() + " (" + program + ")"
                                    : program;
    std::vector<const json*> sides{&v["before"]};
    if (v["after"].is_object()) sides.push_back(&v["after"]);
    FrameLayout::CompareProgram lay{static_cast<int>(capture), program, {}, {}, {}, v["iteration_speedup"], "", {}};
    ImGui::Spacing();
    ImGui::Text("%s", heading.c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("%s", display_text("(a profiled program, hookscope profile: run once per policy, one after the "
                                           "other; the figures of hookscope report's verdict block)",
                                           typo).c_str());
    const ImGuiTableFlags flags =
        ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable(("program_" + program).c_str(), static_cast<int>(sides.size()) + 1, flags)) continue;
    lay.headers.push_back("figure");
    for (size_t i = 0; i < sides.size(); ++i)
      lay.headers.push_back((*sides[i]).value("policy", "") +
                            (sides.size() > 1 ? i ? " (after)" : " (before)" : ""));
    for (const auto& h : lay.headers) ImGui::TableSetupColumn(display_text(h, typo).c_str());
    ImGui::TableHeadersRow();
    // The runs: click opens one, Ctrl+click aligns it under the one shown.
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("run");
    for (const json* s : sides) {
      ImGui::TableNextColumn();
      const int64_t id = (*s)["run"].is_number() ? (*s)["run"].get<int64_t>() : -1;
      const ImVec2 p0 = ImGui::GetCursorScreenPos();
      if (ImGui::Selectable(("run " + std::to_string(id) + "##" + program).c_str(), id == primary) && id >= 0) {
        if (ImGui::GetIO().KeyCtrl && id != primary)
          SetCompareRun(id, capture);
        else
          SelectRun(id, capture);
      }
      const ImVec2 p1 = ImGui::GetItemRectMax();
      lay.runs.push_back({id, s->value("policy", ""), p0.x, p0.y, p1.x, p1.y});
      for (const auto& r : c.runs)
        if (r.id == id)
          m_layout.compare_rows.push_back({r.id, static_cast<int>(capture), r.scenario, r.policy, r.mode, r.fullgraph,
                                           display_text(s->value("breaks", "–"), typo), p0.y, p1.y});
    }
    for (const ProgramFigure& f : program_figures()) {
      // As the report: the recompile-limit row only where a policy hit the limit.
      if (std::string_view(f.key) == "log_recompile_limit_hits" &&
          std::none_of(sides.begin(), sides.end(), [](const json* s) {
            return (*s)["log_recompile_limit_hits"].is_number() && (*s)["log_recompile_limit_hits"].get<int64_t>() > 0;
          }))
        continue;
      const facts::Fact& fact = facts::fact(f.key);
      FrameLayout::CompareProgram::Figure fig{std::string(f.key), std::string(fact.label), {}, {}, 0, 0};
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      fig.y0 = ImGui::GetCursorScreenPos().y;
      ImGui::TextUnformatted(display_text(std::string(fact.label), typo).c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", display_text(std::string(fact.definition), typo).c_str());
      for (const json* s : sides) {
        ImGui::TableNextColumn();
        const json value = s->contains(f.key) ? (*s)[f.key] : json(nullptr);
        const std::string cell = display_text(f.cell(*s), typo);
        if (cell == empty_cell() || value.is_null())
          ImGui::TextDisabled("%s", cell.c_str());
        else
          ImGui::TextUnformatted(cell.c_str());
        fig.values.push_back(value);
        fig.cells.push_back(cell);
      }
      fig.y1 = ImGui::GetCursorScreenPos().y;
      lay.figures.push_back(std::move(fig));
    }
    ImGui::EndTable();
    // The block's verdict on the iterations: coloured only when decided.
    const json& x = v["iteration_speedup"];
    const std::string label(facts::fact("iteration_speedup").label);
    if (x.is_object() && x["ratio"].is_number()) {
      const std::string verdict = x.value("verdict", "");
      lay.speedup_text = display_text(label + ": " + fmt(x["ratio"].get<double>(), "%.2f") + "× " + verdict, typo);
      ImGui::PushStyleColor(ImGuiCol_Text, verdict == "faster" ? style::kOk : verdict == "slower" ? style::kBad : style::kDim);
      ImGui::TextUnformatted(lay.speedup_text.c_str());
      ImGui::PopStyleColor();
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s", display_text(x.value("why", "") + "\n" + std::string(facts::fact("iteration_speedup").definition),
                                             typo).c_str());
    } else {
      ImGui::TextDisabled("%s", display_text(label + ": – (" +
                                                 (sides.size() < 2 ? "one policy ran this program"
                                                                   : "a policy's run has no iterations") + ")",
                                             typo).c_str());
    }
    // The diagnosis, as the report writes it under the block (facts::diagnosis).
    const facts::Markup plain{[](const std::string& x) { return x; }, [](const std::string& x) { return x; }};
    for (const auto& claim : facts::diagnosis(v, plain)) {
      lay.claims.push_back(display_text(claim.text, typo));
      ImGui::TextWrapped("- %s", lay.claims.back().c_str());
    }
    m_layout.compare_programs.push_back(std::move(lay));
  }
  // Runs the blocks leave out (a policy's later runs, a third policy): listed, as the report's
  // runs table lists them.
  std::string others;
  for (const auto& r : c.runs) {
    if (r.engine != "profile") continue;
    bool shown = false;
    for (const auto& p : m_layout.compare_programs)
      if (p.capture == static_cast<int>(capture))
        for (const auto& rc : p.runs) shown = shown || rc.run_id == r.id;
    if (!shown) others += (others.empty() ? "" : ", ") + std::to_string(r.id) + " (" + r.scenario + ", " + r.policy + ")";
  }
  if (!others.empty())
    ImGui::TextDisabled("also profiled, not in a verdict (each program's first run of its first two policies is): runs %s",
                        others.c_str());
}

/// The matrix of one scenario: a row per policy × mode.
void View::DrawCompareScenario(const CompareMatrix& matrix, size_t si) {
  const std::string& sc = matrix.scenarios[si];
  ImGui::Spacing();
  ImGui::Text("%s", sc.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled(
      "(decode ms/token: median, interquartile-range whiskers, one scale for all scenarios; speed-up vs the "
      "eager generates interleaved with the run, coloured only when its spreads are apart)");
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable(("compare_" + sc).c_str(), kColumnCount, flags)) return;
  for (int c = 0; c < kColumnCount; ++c)
    ImGui::TableSetupColumn(display_text(kColumnNames[c], style::font_has_typography()).c_str(),
                            c == kLatency ? ImGuiTableColumnFlags_WidthStretch : 0);
  ImGui::TableHeadersRow();
  for (const auto& [key, row] : matrix.rows)
    if (key.scenario_order == static_cast<int>(si)) DrawCompareRow(matrix, key, row);
  ImGui::EndTable();
}

/// One row, cell by cell in Column order; clicking it opens its run (ctrl+click: compares it).
void View::DrawCompareRow(const CompareMatrix& matrix, const MatrixKey& key, const MatrixRow& row) {
  const storage::RunRecord* m = row.measured();
  const int64_t primary = m_slot_run[0] && m_timeline_capture[0] == matrix.capture ? *m_slot_run[0] : -1;
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  const float y0 = ImGui::GetCursorScreenPos().y;
  const bool selected = (row.run && row.run->id == primary) || (row.fullgraph && row.fullgraph->id == primary);
  const std::string label = (key.engine.empty() ? "" : key.engine + " ") + key.policy;
  if (ImGui::Selectable((label + "##" + key.scenario + key.mode).c_str(), selected,
                        ImGuiSelectableFlags_SpanAllColumns)) {
    const int64_t id = row.any()->id;
    if (ImGui::GetIO().KeyCtrl && id != primary)
      SetCompareRun(id, matrix.capture);
    else
      SelectRun(id, matrix.capture);
  }
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(key.mode.c_str());
  ImGui::TableNextColumn();
  const std::string breaks = graph_breaks_cell(m);
  ImGui::TableNextColumn();
  fullgraph_cell(row.fullgraph);
  ImGui::TableNextColumn();
  latency_cell(matrix, key, row);
  ImGui::TableNextColumn();
  speedup_cell(matrix, row);
  ImGui::TableNextColumn();
  check_cell(m, "argmax_match");
  ImGui::TableNextColumn();
  check_cell(m, "logits_identical");
  ImGui::TableNextColumn();
  check_cell(m, "params_on_meta_after");
  ImGui::TableNextColumn();
  run_ids_cell(row);
  const float y1 = ImGui::GetCursorScreenPos().y;
  for (const storage::RunRecord* r : {row.run, row.fullgraph})
    if (r)
      m_layout.compare_rows.push_back(
          {r->id, static_cast<int>(matrix.capture), r->scenario, r->policy, r->mode, r->fullgraph, breaks, y0, y1});
}

}  // namespace hs::ui
