// View: frame layout, runs list, diagnostics strip, details pane.
#include "ui/view.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string_view>

#include <imgui.h>

#include "facts/breaks.h"
#include "ui/view_style.h"

namespace hs::ui {

Tab parse_tab(const std::string& s) {
  for (Tab t : {Tab::Timeline, Tab::Compare, Tab::Breaks, Tab::Transfers, Tab::Swaps})
    if (s == tab_name(t)) return t;
  throw std::invalid_argument("--view: unknown view '" + s + "' (timeline, compare, breaks, transfers, swaps)");
}

const char* tab_name(Tab t) {
  switch (t) {
    case Tab::Timeline: return "timeline";
    case Tab::Compare: return "compare";
    case Tab::Breaks: return "breaks";
    case Tab::Transfers: return "transfers";
    case Tab::Swaps: return "swaps";
  }
  return "?";
}

nlohmann::json FrameLayout::to_json() const {
  nlohmann::json j{{"tab", tab_name(tab)},
                   {"canvas", {canvas_x0, canvas_x1}},
                   {"ruler", {ruler_y0, ruler_y1}},
                   {"lanes", {lanes_y0, lanes_y1}},
                   {"panes", panes},
                   {"view_ns", {view_start_ns, view_end_ns}},
                   {"merged_boxes", merged_boxes},
                   {"drawn_boxes", drawn_boxes},
                   {"drawn_flows", drawn_flows},
                   {"groups", nlohmann::json::array()},
                   {"compare_rows", nlohmann::json::array()},
                   {"table_title", table_title}};
  for (const auto& g : groups)
    j["groups"].push_back({{"run", g.run_id},
                           {"capture", g.capture},
                           {"device", g.device},
                           {"title", g.title},
                           {"host", g.host},
                           {"emulated", g.emulated},
                           {"visible", g.visible},
                           {"rect", {g.x0, g.y0, g.x1, g.y1}}});
  j["table_rows"] = static_cast<int64_t>(table_rows.size());
  j["table_headers"] = nlohmann::json::array();
  for (const auto& h : table_headers) j["table_headers"].push_back({{"name", h.name}, {"rect", {h.x0, h.y0, h.x1, h.y1}}});
  j["run_headers"] = run_headers;
  j["diagnostic_lines"] = diagnostic_lines;
  j["merged_samples"] = nlohmann::json::array();
  for (const auto& m : merged_samples)
    j["merged_samples"].push_back(
        {{"span_ns", {m.start_ns, m.end_ns}}, {"count", m.count}, {"rect", {m.x0, m.y0, m.x1, m.y1}}});
  j["aggregated_boxes"] = aggregated_boxes;
  j["elided_labels"] = elided_labels;
  j["elided_samples"] = elided_samples;
  j["search"] = {{"query", search.query},
                 {"matches", search.matches},
                 {"current", search.current},
                 {"match_ns", {search.start_ns, search.end_ns}},
                 {"highlighted", search.highlighted},
                 {"rect", search.rect},
                 {"box", search.box}};
  for (const auto& [name, o] : {std::pair{"legend", &legend}, std::pair{"help", &help}})
    j[name] = {{"shown", o->shown}, {"rect", o->rect}, {"lines", o->lines}};
  j["empty_message"] = empty_message;
  j["memory_axes"] = nlohmann::json::array();
  for (const auto& a : memory_axes)
    j["memory_axes"].push_back(
        {{"run", a.run_id}, {"device", a.device}, {"top_bytes", a.top_bytes}, {"labels", a.labels}, {"y", {a.y0, a.y1}}});
  j["run_filter"] = run_filter;
  j["loads"] = nlohmann::json::array();
  for (const auto& l : loads)
    j["loads"].push_back({{"slot", l.slot},
                          {"capture", l.capture},
                          {"run", l.run_id},
                          {"rows_read", l.rows_read},
                          {"rows_total", l.rows_total},
                          {"laying_out", l.laying_out},
                          {"preview", l.preview},
                          {"failed", l.failed},
                          {"text", l.text}});
  j["compare_programs"] = nlohmann::json::array();
  for (const auto& p : compare_programs) {
    nlohmann::json runs = nlohmann::json::array(), figures = nlohmann::json::array();
    for (const auto& r : p.runs)
      runs.push_back({{"run", r.run_id}, {"policy", r.policy}, {"rect", {r.x0, r.y0, r.x1, r.y1}}});
    for (const auto& f : p.figures)
      figures.push_back(
          {{"key", f.key}, {"label", f.label}, {"values", f.values}, {"cells", f.cells}, {"y", {f.y0, f.y1}}});
    j["compare_programs"].push_back({{"capture", p.capture},
                                     {"program", p.program},
                                     {"headers", p.headers},
                                     {"runs", runs},
                                     {"figures", figures},
                                     {"speedup", p.speedup},
                                     {"speedup_text", p.speedup_text},
                                     {"claims", p.claims}});
  }
  j["run_rows"] = nlohmann::json::array();
  for (const auto& r : run_rows) j["run_rows"].push_back({{"capture", r.capture}, {"run", r.run_id}, {"y", {r.y0, r.y1}}});
  for (const auto& r : compare_rows)
    j["compare_rows"].push_back({{"run", r.run_id},
                                 {"capture", r.capture},
                                 {"scenario", r.scenario},
                                 {"policy", r.policy},
                                 {"mode", r.mode},
                                 {"fullgraph", r.fullgraph},
                                 {"breaks", r.breaks},
                                 {"y", {r.y0, r.y1}}});
  return j;
}

View::View(std::shared_ptr<const storage::CaptureReader> reader, ViewOptions options)
    : View(std::vector<std::shared_ptr<const storage::CaptureReader>>{std::move(reader)}, {}, std::move(options)) {}

View::View(std::vector<std::shared_ptr<const storage::CaptureReader>> readers, std::vector<std::string> labels,
           ViewOptions options)
    : m_options(std::move(options)) {
  if (!m_options.background) m_options.load.preview = false;  // nothing is drawn before the whole run
  if (readers.empty()) throw std::invalid_argument("View: no capture to show");
  if (!labels.empty() && labels.size() != readers.size())
    throw std::invalid_argument("View: " + std::to_string(labels.size()) + " labels for " +
                                std::to_string(readers.size()) + " captures");
  for (size_t i = 0; i < readers.size(); ++i) {
    Capture c;
    c.reader = std::move(readers[i]);
    c.label = labels.empty() ? c.reader->path().stem().string() : labels[i];
    c.runs = c.reader->runs();
    for (auto& r : c.runs)  // one definition of every break figure, shared with report and explain
      if (r.results.is_object()) {
        nlohmann::json f = facts::break_facts(*c.reader, r);
        for (auto& [k, v] : f.items()) r.results[k] = std::move(v);
      }
    c.diagnostics = c.reader->diagnostics();
    c.devices = c.reader->devices();
    m_captures.push_back(std::move(c));
  }
  OpenDefaultRuns();
}

View::~View() {
  // Every load stops first (each at its next few thousand rows), then each is waited for: no
  // thread outlives the View, none reads a reader the View let go.
  for (auto& l : m_load)
    if (l) l->cancel();
  for (auto& l : m_retired) l->cancel();
  for (auto& l : m_load) l.reset();
  m_retired.clear();
}

/// Opens the first capture's first compiled run (torch engine first: regions and graph breaks
/// to show), else its
/// first without fullgraph (a fullgraph run that raised has few events), else its first; with
/// a second capture, aligns under it that capture's run of the same cell, if it has one.
void View::OpenDefaultRuns() {
  const auto& runs = m_captures.front().runs;
  const storage::RunRecord* pick = nullptr;
  for (const char* engine : {"torch", ""})  // the real torch.compile's run first
    for (const auto& r : runs)
      if (!pick && !r.fullgraph && r.mode != "eager" && (!*engine || r.engine == engine)) pick = &r;
  for (const auto& r : runs)
    if (!pick && !r.fullgraph) pick = &r;
  if (!pick && !runs.empty()) pick = &runs.front();
  if (!pick) return;
  LoadRun(0, 0, pick->id);
  if (m_captures.size() < 2) return;
  if (const auto match = MatchingRun(1)) LoadRun(1, 1, *match);
}

std::optional<int64_t> View::MatchingRun(size_t capture) const {
  const storage::RunRecord* p = primary_run();
  if (!p) return std::nullopt;
  for (const auto& r : capture_at(capture).runs)
    if (r.engine == p->engine && r.scenario == p->scenario && r.policy == p->policy && r.mode == p->mode &&
        r.fullgraph == p->fullgraph && !(capture == m_timeline_capture[0] && r.id == p->id))
      return r.id;
  return std::nullopt;
}

const storage::RunRecord* View::primary_run() const {
  if (!m_slot_run[0]) return nullptr;
  for (const auto& r : capture_at(m_timeline_capture[0]).runs)
    if (r.id == *m_slot_run[0]) return &r;
  return nullptr;
}

const View::Capture& View::capture_at(size_t capture) const {
  if (capture >= m_captures.size())
    throw std::out_of_range("capture " + std::to_string(capture) + ": the viewer holds " +
                            std::to_string(m_captures.size()) + " captures");
  return m_captures[capture];
}

std::string View::capture_prefix(size_t capture) const {
  return m_captures.size() > 1 ? capture_at(capture).label + ": " : std::string();
}

void View::LoadRun(int slot, size_t capture, int64_t run_id) {
  if (m_load[slot]) {  // superseded: it stops on its own thread, the frames go on
    m_load[slot]->cancel();
    m_retired.push_back(std::move(m_load[slot]));
  }
  m_slot_run[slot] = run_id;
  m_timeline_capture[slot] = capture;
  std::shared_ptr<const RunTimeline> shown = std::move(m_timeline[slot]);  // freed by the next load's thread
  m_load_error[slot].clear();
  m_range_cache_run[slot] = -1;  // run ids repeat across captures: recompute for the new run
  if (slot == 0) {
    for (auto& t : m_table_run) t = -1;
    m_categories_run = m_search_run = -1;  // run ids repeat across captures
    m_match.reset();
    m_selected.reset();
    m_range.reset();
  } else if (m_selected && m_selected->run == 1) {
    m_selected.reset();
  }
  m_hover.reset();
  m_fit_pending = true;
  m_load[slot] = std::make_unique<TimelineLoader>(capture_at(capture).reader, run_id, m_options.load, std::move(shown));
  if (m_options.background) return;
  m_load[slot]->wait();
  const std::exception_ptr error = m_load[slot]->error();
  PollLoads();
  if (error) std::rethrow_exception(error);
}

void View::PollLoads() {
  for (int slot = 0; slot < 2; ++slot) {
    if (!m_load[slot]) continue;
    if (auto tl = m_load[slot]->take()) AdoptTimeline(slot, std::move(tl));
    if (!m_load[slot]->done()) continue;
    if (auto tl = m_load[slot]->take()) AdoptTimeline(slot, std::move(tl));  // published just before done
    if (const std::exception_ptr e = m_load[slot]->error()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        m_load_error[slot] = x.what();
      } catch (...) {
        m_load_error[slot] = "unknown error";
      }
    }
    m_load[slot].reset();
  }
  std::erase_if(m_retired, [](const std::unique_ptr<TimelineLoader>& l) { return l->done(); });
}

/// A slot's next timeline (a preview, then the whole run) replaces its last: what was computed
/// from the last is recomputed, the view is refitted unless the user moved it since its fit,
/// and a selection of a row the new timeline also has is kept.
void View::AdoptTimeline(int slot, std::shared_ptr<const RunTimeline> tl) {
  const bool had = m_timeline[slot] != nullptr;
  m_timeline[slot] = std::move(tl);
  m_range_cache_run[slot] = -1;
  if (slot == 0) {
    for (auto& t : m_table_run) t = -1;
    m_categories_run = m_search_run = -1;
    m_match.reset();
  }
  m_hover.reset();
  if (m_selected && m_selected->run == slot) {
    try {
      (void)extent(*m_timeline[slot], m_selected->source, m_selected->row);
    } catch (const std::out_of_range&) {
      m_selected.reset();
    }
  }
  if (had && m_auto_fit && m_time.start_ns == m_auto_fit->first && m_time.ns_per_px == m_auto_fit->second)
    m_fit_pending = true;
}

bool View::loading(int slot) const { return (slot == 0 || slot == 1) && m_load[slot] != nullptr; }

std::optional<TimelineLoader::Progress> View::load_progress(int slot) const {
  if (!loading(slot)) return std::nullopt;
  return m_load[slot]->progress();
}

const std::string& View::load_error(int slot) const {
  static const std::string none;
  return slot == 0 || slot == 1 ? m_load_error[slot] : none;
}

void View::WaitForLoads() {
  for (auto& l : m_load)
    if (l) l->wait();
  PollLoads();
}

void View::SelectRun(int64_t run_id, size_t capture) {
  (void)capture_at(capture).reader->run(run_id);  // throws std::out_of_range naming the file and run
  if (m_slot_run[0] == run_id && m_timeline_capture[0] == capture) return;
  LoadRun(0, capture, run_id);
}

void View::SetCompareRun(std::optional<int64_t> run_id, size_t capture) {
  if (!run_id) {
    if (m_load[1]) {
      m_load[1]->cancel();
      m_retired.push_back(std::move(m_load[1]));
    }
    m_slot_run[1].reset();
    m_timeline[1].reset();
    m_load_error[1].clear();
    if (m_selected && m_selected->run == 1) m_selected.reset();
    m_hover.reset();
    m_fit_pending = true;
    return;
  }
  (void)capture_at(capture).reader->run(*run_id);
  LoadRun(1, capture, *run_id);
}

void View::SetTab(Tab t) {
  m_tab = t;
  m_tab_request = true;
}

std::optional<int64_t> View::run_id() const { return m_slot_run[0]; }

std::optional<size_t> View::run_capture(int slot) const {
  if ((slot != 0 && slot != 1) || !m_slot_run[slot]) return std::nullopt;
  return m_timeline_capture[slot];
}

const RunTimeline* View::timeline(int i) const { return (i == 0 || i == 1) ? m_timeline[i].get() : nullptr; }

void View::Focus(int run, Source source, uint32_t row) {
  const RunTimeline* tl = timeline(run);
  if (!tl) return;
  auto [a, b] = extent(*tl, source, row);
  m_selected = Pick{run, source, row};
  const double span = static_cast<double>(b - a);
  if (span > 0.8 * (m_time.end_ns() - m_time.start_ns))
    m_time.fit(static_cast<double>(a), static_cast<double>(b), 0.1);
  else
    m_time.center_on(0.5 * static_cast<double>(a + b));
  m_fit_pending = false;
  SetTab(Tab::Timeline);
}

// ------------------------------------------------------------------ frame

void View::Frame(float width, float height) {
  m_layout.groups.clear();
  m_layout.compare_rows.clear();
  m_layout.compare_programs.clear();
  m_layout.table_rows.clear();
  m_layout.table_headers.clear();
  m_layout.diagnostic_lines.clear();
  m_layout.run_headers.clear();
  m_layout.merged_samples.clear();
  m_layout.run_rows.clear();
  m_layout.merged_boxes = m_layout.drawn_boxes = m_layout.drawn_flows = 0;
  m_layout.aggregated_boxes = m_layout.elided_labels = 0;
  m_layout.elided_samples.clear();
  m_layout.legend = {};
  m_layout.help = {};
  m_layout.empty_message.clear();
  m_layout.table_title.clear();
  m_layout.memory_axes.clear();
  m_layout.search.highlighted = false;
  m_layout.tab = m_tab;
  PollLoads();
  RecordLoads();
  HandleGlobalKeys();

  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(width, height));
  ImGui::Begin("hookscope", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoBackground);  // the GL clear paints it
  for (size_t i = 0; i < m_captures.size(); ++i) {
    const Capture& c = m_captures[i];
    if (i) ImGui::SameLine();
    ImGui::TextUnformatted(((i ? "   vs  " : "hookscope  ") + c.reader->path().filename().string()).c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("%zu runs, schema %d%s", c.runs.size(), c.reader->schema_version(),
                        c.reader->finalized() ? "" : ", not finalized (capture interrupted or still running)");
  }
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float diag_h = line * 4 + 6;
  const float body_h = std::max(ImGui::GetContentRegionAvail().y - diag_h, 100.0f);
  const float runs_w = std::clamp(width * 0.28f, std::min(340.0f, width * 0.4f), 460.0f);

  ImGui::BeginChild("runs", ImVec2(runs_w, body_h), true);
  DrawRuns(runs_w, body_h);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("main", ImVec2(0, body_h), false);
  if (ImGui::BeginTabBar("views")) {
    struct Item {
      Tab tab;
      const char* label;
    };
    const Item items[] = {{Tab::Timeline, "Timeline"},
                          {Tab::Compare, "Compare"},
                          {Tab::Breaks, "Graph breaks"},
                          {Tab::Transfers, "Transfers"},
                          {Tab::Swaps, "Weight swaps"}};
    const bool request = m_tab_request;
    m_tab_request = false;  // a view may ask for another tab while it draws (Focus): next frame
    for (const auto& it : items) {
      ImGuiTabItemFlags flags = (request && m_tab == it.tab) ? ImGuiTabItemFlags_SetSelected : 0;
      if (ImGui::BeginTabItem(it.label, nullptr, flags)) {
        if (!request) m_tab = it.tab;
        m_layout.tab = it.tab;
        switch (it.tab) {
          case Tab::Timeline: DrawTimelineTab(); break;
          case Tab::Compare: DrawCompareTab(); break;
          case Tab::Breaks: DrawBreaksTab(); break;
          case Tab::Transfers: DrawTransfersTab(); break;
          case Tab::Swaps: DrawSwapsTab(); break;
        }
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  DrawDiagnostics(diag_h);
  ImGui::End();
  DrawLegend();
  DrawHelp();
}

// ------------------------------------------------------------------ runs

void View::DrawRuns(float, float) {
  ImGui::TextUnformatted("Runs");
  ImGui::SameLine();
  ImGui::TextDisabled("(click: open, ctrl+click: compare)");
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##filter", "filter: label engine scenario policy mode status", m_filter, sizeof m_filter);
  {
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    m_layout.run_filter[0] = a.x, m_layout.run_filter[1] = a.y, m_layout.run_filter[2] = b.x, m_layout.run_filter[3] = b.y;
  }
  ImGuiTextFilter filter;
  std::snprintf(filter.InputBuf, sizeof filter.InputBuf, "%s", m_filter);
  filter.Build();
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
  // The label column only when some run has one (a LibTorch capture's runs have none); the
  // file column only when several captures are open.
  bool labels = false;
  for (const auto& c : m_captures)
    labels |= std::any_of(c.runs.begin(), c.runs.end(), [](const auto& r) { return !r.label.empty(); });
  const bool files = m_captures.size() > 1;
  if (!ImGui::BeginTable("runs_table", 6 + labels + files, flags)) return;
  ImGui::TableSetupScrollFreeze(files ? 3 : 2, 1);  // id and status (and file) stay in view when scrolled sideways
  for (const char* c : {"file", "id", "status", "label", "engine", "scenario", "policy", "mode"})
    if ((labels || std::string_view(c) != "label") && (files || std::string_view(c) != "file"))
      ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < m_captures.size(); ++i) DrawRunRows(i, filter, labels);
  ImGui::EndTable();
}

/// The runs list's rows of one capture.
void View::DrawRunRows(size_t capture, const ImGuiTextFilter& filter, bool labels) {
  const bool files = m_captures.size() > 1;
  const Capture& cap = m_captures[capture];
  auto shown = [&](int slot, int64_t id) { return m_slot_run[slot] == id && m_timeline_capture[slot] == capture; };
  ImGui::PushID(static_cast<int>(capture));
  for (const auto& r : cap.runs) {
    const std::string status = r.status == tracer::RunStatus::Incomplete ? "incomplete"
                               : r.status == tracer::RunStatus::Failed   ? "failed"
                               : (r.results.is_object() && r.results.value("status", nlohmann::json()) == "error")
                                   ? (r.fullgraph ? "raises" : "error")
                                   : "ok";
    const std::string mode = r.mode + (r.fullgraph ? " fullgraph" : "");
    const std::string text = (files ? cap.label + " " : std::string()) + std::to_string(r.id) + " " + r.label + " " +
                             r.engine + " " + r.scenario + " " + r.policy + " " + mode + " " + status;
    if (!filter.PassFilter(text.c_str())) continue;
    ImGui::TableNextRow();
    const float y0 = ImGui::GetCursorScreenPos().y;
    if (files) {
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(cap.label.c_str());
    }
    ImGui::TableNextColumn();
    const bool primary = shown(0, r.id);
    char id[32];
    std::snprintf(id, sizeof id, "%lld", static_cast<long long>(r.id));
    if (ImGui::Selectable(id, primary || shown(1, r.id), ImGuiSelectableFlags_SpanAllColumns)) {
      if (ImGui::GetIO().KeyCtrl && !primary)
        SetCompareRun(shown(1, r.id) ? std::nullopt : std::optional<int64_t>(r.id), capture);
      else
        SelectRun(r.id, capture);
    }
    if (ImGui::IsItemHovered() && r.results.is_object() && r.results.value("error", nlohmann::json()).is_string())
      ImGui::SetTooltip("%s", r.results["error"].get<std::string>().c_str());
    ImGui::TableNextColumn();
    const ImU32 c = status == "ok" ? style::kOk : status == "incomplete" ? style::kWarn : style::kBad;
    ImGui::PushStyleColor(ImGuiCol_Text, c);
    ImGui::TextUnformatted(status.c_str());
    ImGui::PopStyleColor();
    for (const std::string* cell : {&r.label, &r.engine, &r.scenario, &r.policy, &mode}) {
      if (cell == &r.label && !labels) continue;
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(cell->c_str());
    }
    m_layout.run_rows.push_back({static_cast<int>(capture), r.id, y0, ImGui::GetCursorScreenPos().y});
  }
  ImGui::PopID();
}

// ------------------------------------------------------------------ diagnostics strip

void View::DrawDiagnostics(float height) {
  ImGui::BeginChild("diagnostics", ImVec2(0, height), true);
  auto line = [this](ImU32 color, const char* tag, const std::string& text) {
    m_layout.diagnostic_lines.push_back(std::string(tag) + " " + text);
    ImGui::PushStyleColor(ImGuiCol_Text, color);
    ImGui::TextUnformatted(tag);
    ImGui::PopStyleColor();
    ImGui::SameLine();
    ImGui::TextUnformatted(text.c_str());
  };
  for (size_t i = 0; i < m_captures.size(); ++i) {
    const Capture& cap = m_captures[i];
    const std::string prefix = capture_prefix(i);
    std::string emulated;
    for (const auto& d : cap.devices)
      if (d.info.kind == storage::DeviceKind::Emulated && !d.info.run_id)
        emulated += (emulated.empty() ? "" : ", ") + d.info.name;
    const bool said = std::any_of(cap.diagnostics.begin(), cap.diagnostics.end(),
                                  [](const storage::DiagnosticRow& d) { return d.source == "devices"; });
    if (!emulated.empty() && !said)  // the capture's own "devices" diagnostic says it otherwise
      line(style::kWarn, "[emulated]",
           prefix + "accelerators " + emulated +
               " are emulated in host memory: moves between them are real copies, but a CPU capture does not fuse "
               "or speed anything up");
    for (const auto& r : cap.runs) {
      const std::string what = prefix + "run " + std::to_string(r.id) + " (" + r.scenario + " " + r.policy + " " +
                               r.mode + (r.fullgraph ? " fullgraph" : "") + ")";
      if (r.status == tracer::RunStatus::Incomplete)
        line(style::kWarn, "[incomplete]", what + ": the capture stopped before this run ended");
      else if (r.status == tracer::RunStatus::Failed)
        line(style::kBad, "[failed]", what + ": " + r.error);
      if (r.dropped_records > 0)
        line(style::kWarn, "[dropped]", what + ": " + std::to_string(r.dropped_records) + " records dropped by the tracer");
    }
    for (const auto& d : cap.diagnostics) {
      const char* tag = d.severity == storage::Severity::Error     ? "[error]"
                        : d.severity == storage::Severity::Warning ? "[warning]"
                                                                   : "[info]";
      const ImU32 c = d.severity == storage::Severity::Error     ? style::kBad
                      : d.severity == storage::Severity::Warning ? style::kWarn
                                                                 : style::kDim;
      line(c, tag, prefix + (d.run_id ? "run " + std::to_string(*d.run_id) + ": " : std::string()) + d.source + ": " + d.text);
    }
  }
  ImGui::EndChild();
}

// ------------------------------------------------------------------ details of the selection

void View::DrawDetails() {
  if (!m_selected) {
    ImGui::PushStyleColor(ImGuiCol_Text, style::kDim);
    ImGui::TextWrapped("Click an event for its details; drag on the ruler for range statistics.");
    ImGui::PopStyleColor();
    return;
  }
  const RunTimeline* tl = timeline(m_selected->run);
  if (!tl) return;
  if (ImGui::BeginTable("details", 2, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
    for (const auto& [k, v] : describe(*tl, m_selected->source, m_selected->row)) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", k.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(v.c_str());
    }
    ImGui::EndTable();
  }
}

}  // namespace hs::ui
