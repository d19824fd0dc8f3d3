// View: graph breaks, transfers and weight swaps of the open run as sortable tables; clicking a
// row centres and highlights that event on the timeline.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <numeric>

#include <imgui.h>

#include "facts/catalogue.h"
#include "importers/dynamo_text.h"
#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

namespace {

template <class T>
int cmp3(const T& a, const T& b) {
  return a < b ? -1 : b < a ? 1 : 0;
}

struct Column {
  const char* name;
  /// Three-way comparison of two rows by this column.
  std::function<int(uint32_t, uint32_t)> cmp;
  /// Draws the cell of a row.
  std::function<void(uint32_t)> cell;
};

/// A sortable table over `n` rows with ImGui's clipper (only visible rows are drawn). Returns
/// the row clicked this frame, if any.
std::optional<uint32_t> event_table(const char* id, size_t n, std::vector<uint32_t>& order, bool& reset,
                                    const std::vector<Column>& cols, std::optional<uint32_t> selected,
                                    std::vector<FrameLayout::TableRow>& drawn,
                                    std::vector<FrameLayout::TableHeader>& headers) {
  std::optional<uint32_t> clicked;
  if (order.size() != n || reset) {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0u);
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_SortMulti | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable(id, static_cast<int>(cols.size()), flags)) return clicked;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (size_t c = 0; c < cols.size(); ++c)
    ImGui::TableSetupColumn(cols[c].name, c == 0 ? ImGuiTableColumnFlags_DefaultSort : 0);
  // TableHeadersRow, one header at a time so the layout can say where each was drawn.
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (size_t c = 0; c < cols.size(); ++c) {
    if (!ImGui::TableSetColumnIndex(static_cast<int>(c))) continue;
    ImGui::TableHeader(cols[c].name);
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    headers.push_back({cols[c].name, a.x, a.y, b.x, b.y});
  }
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && (specs->SpecsDirty || reset)) {
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      for (int i = 0; i < specs->SpecsCount; ++i) {
        const auto& s = specs->Specs[i];
        int r = cols[s.ColumnIndex].cmp(a, b);
        if (r) return s.SortDirection == ImGuiSortDirection_Ascending ? r < 0 : r > 0;
      }
      return a < b;
    });
    specs->SpecsDirty = false;
  }
  reset = false;
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(order.size()));
  while (clipper.Step())
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const uint32_t row = order[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(static_cast<int>(row));
      const float y0 = ImGui::GetCursorScreenPos().y;
      if (ImGui::Selectable("##row", selected && *selected == row,
                            ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap))
        clicked = row;
      ImGui::SameLine();
      cols[0].cell(row);
      for (size_t c = 1; c < cols.size(); ++c) {
        ImGui::TableNextColumn();
        cols[c].cell(row);
      }
      drawn.push_back({row, y0, y0 + ImGui::GetTextLineHeightWithSpacing()});
      ImGui::PopID();
    }
  ImGui::EndTable();
  return clicked;
}

void text(const std::string& s) { ImGui::TextUnformatted(s.c_str()); }

// Columns shared by the tables of copies (rows with start_ns, end_ns, bytes).
template <class Rows>
int64_t duration_of(const Rows& rows, uint32_t r) {
  return rows[r].end_ns - rows[r].start_ns;
}
template <class Rows>
double gbps_of(const Rows& rows, uint32_t r) {
  const int64_t d = duration_of(rows, r);
  return d > 0 ? static_cast<double>(rows[r].bytes) / static_cast<double>(d) : 0.0;
}
/// time (from the run's origin `o`), duration, bytes, GB/s — the last only for rows where
/// `moves` holds (an offload to meta frees memory, it moves nothing).
template <class Rows>
std::vector<Column> copy_columns(const Rows& rows, int64_t o, std::function<bool(uint32_t)> moves = nullptr) {
  return {
      {"time", [&rows](uint32_t a, uint32_t b) { return cmp3(rows[a].start_ns, rows[b].start_ns); },
       [&rows, o](uint32_t r) { text(format_duration(static_cast<double>(rows[r].start_ns - o))); }},
      {"duration", [&rows](uint32_t a, uint32_t b) { return cmp3(duration_of(rows, a), duration_of(rows, b)); },
       [&rows](uint32_t r) { text(format_duration(static_cast<double>(duration_of(rows, r)))); }},
      {"bytes", [&rows](uint32_t a, uint32_t b) { return cmp3(rows[a].bytes, rows[b].bytes); },
       [&rows](uint32_t r) { text(format_bytes(static_cast<double>(rows[r].bytes))); }},
      {"GB/s",
       [&rows, moves](uint32_t a, uint32_t b) {
         return cmp3(!moves || moves(a) ? gbps_of(rows, a) : -1.0, !moves || moves(b) ? gbps_of(rows, b) : -1.0);
       },
       [&rows, moves](uint32_t r) {
         if (moves && !moves(r)) return text("-");
         char buf[32];
         std::snprintf(buf, sizeof buf, "%.2f", gbps_of(rows, r));
         text(buf);
       }},
  };
}

/// How many devices the run's groups show computing (accelerators and the cpu with compute).
size_t compute_devices(const RunTimeline& tl) {
  size_t n = 0;
  for (const auto& g : tl.groups)
    if (!g.host)
      for (const auto& t : g.tracks) n += t.lane == Lane::Compute && t.slice_count() > 0;
  return n;
}

bool from_trace(const RunTimeline& tl) {
  return tl.run.engine == "torch" || tl.run.engine == "import" || tl.run.engine == "profile";
}

/// Why a run has no weight swaps.
std::string no_swaps_reason(const RunTimeline& tl) {
  const std::string& sc = tl.run.scenario;
  if (from_trace(tl) && sc != "cpu-offload" && sc != "disk-offload" && sc != "mixed")
    return "no weight swaps in this run: its trace holds no hookscope::weight_onload / weight_offload ranges";
  if (sc == "sharded")
    return "this run offloads nothing (scenario sharded: every weight stays on its execution device)";
  if (tl.run.status != tracer::RunStatus::Complete)
    return "no weight swaps recorded: the run did not complete (" + tl.run.error + ")";
  return "no weight swaps recorded in this run (scenario " + (sc.empty() ? std::string("unknown") : sc) +
         "): no module's weights were onloaded or offloaded while it was recorded";
}

/// Why a run has no activation transfers.
std::string no_transfers_reason(const RunTimeline& tl) {
  if (from_trace(tl)) return "no activation transfers in this run: its trace holds no hookscope::send_to_device ranges";
  if (compute_devices(tl) <= 1)
    return "no activation transfers: every module ran on one device, so no hook moved an activation between devices";
  return "no activation transfers recorded in this run: the hooks moved no activation between devices";
}

/// Why a LibTorch run recorded no disabled-scope entries.
std::string no_breaks_reason(const RunTimeline& tl) {
  const auto& res = tl.run.results;
  const bool error = res.is_object() && res.value("status", nlohmann::json()) == "error";
  if (tl.run.mode == "eager") return "no disabled-scope entries recorded in this run: eager runs compile nothing";
  if (tl.run.fullgraph && error)
    return "no disabled-scope entries recorded: fullgraph=True raised at the first one (" +
           (res.value("error", nlohmann::json()).is_string() ? res["error"].get<std::string>() : std::string("?")) + ")";
  if (tl.run.fullgraph) return "no disabled-scope entries recorded in this run: fullgraph=True compiled each forward as one graph";
  if (from_trace(tl))
    return "no disabled-scope entries on this run's timeline and no compile log: hookscope explain says what it holds";
  return "no disabled-scope entries recorded in this run: each compiled forward ran as one region";
}

/// The message of a tab with no rows.
void empty_note(const std::string& why, std::string& layout) {
  layout = why;
  ImGui::Spacing();
  ImGui::PushStyleColor(ImGuiCol_Text, style::kDim);
  ImGui::TextWrapped("%s", why.c_str());
  ImGui::PopStyleColor();
}

std::optional<uint32_t> selected_row(const std::optional<Pick>& p, Source s) {
  if (p && p->run == 0 && p->source == s) return p->row;
  return std::nullopt;
}

}  // namespace

namespace {

/// One group of Dynamo's graph-break records of the run's compile log
/// (importers::dynamo_summary's break_reasons: the same groups explain prints).
struct LogBreak {
  std::string gb_code, function, gb_type, reason, user_frame;
  std::string group_reason;  ///< the group's whole reason (addresses written "0x…"): its key
  std::string module_calls;  ///< "self.embed_tokens ×8 (modeling_llama.py:370 in forward), ..., +4 more"
  int64_t count = 0, frames_skipped = 0;
};

/// A group's hooked module calls (importers::module_call), most first.
std::string module_calls_text(const nlohmann::json& g) {
  if (!g.contains("module_calls") || !g["module_calls"].is_array()) return "";
  std::vector<std::pair<int64_t, std::string>> calls;
  for (const auto& m : g["module_calls"]) {
    if (!m.is_object()) continue;
    const auto str = [&](const char* k) { return m.contains(k) && m[k].is_string() ? m[k].get<std::string>() : ""; };
    const int64_t n = m.contains("count") && m["count"].is_number_integer() ? m["count"].get<int64_t>() : 0;
    calls.emplace_back(n, str("callee") + " \u00d7" + std::to_string(n) + " (" + str("site") + ")");
  }
  std::stable_sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;  // the two most frequent (the column stays narrow enough for the reason); the rest counted
  for (size_t i = 0; i < calls.size() && i < 2; ++i) out += (out.empty() ? "" : ", ") + calls[i].second;
  if (calls.size() > 2) out += ", +" + std::to_string(calls.size() - 2) + " more";
  return out;
}

std::vector<LogBreak> log_breaks(const nlohmann::json& results) {
  std::vector<LogBreak> out;
  const auto str = [](const nlohmann::json& g, const char* k) {
    return g.contains(k) && g[k].is_string() ? g[k].get<std::string>() : std::string();
  };
  if (results.contains("log_break_reasons") && results["log_break_reasons"].is_array())
    for (const auto& g : results["log_break_reasons"]) {
      const std::string reason = str(g, "reason");
      out.push_back({str(g, "gb_code"), importers::named_function(reason), str(g, "gb_type"), reason.substr(0, reason.find('\n')),
                     str(g, "user_frame"), reason, module_calls_text(g), g.value("count", int64_t{0}),
                     g.value("frame_skipped", int64_t{0})});
    }
  return out;
}

}  // namespace

/// Dynamo's graph-break records of a torch run's compile log (what explain and stats list),
/// headed by the run's graph_break_count of one forward.
void View::DrawLogBreaks(const storage::RunRecord& run) {
  const nlohmann::json& res = run.results;
  const std::vector<LogBreak> rows = log_breaks(res);  // a handful of groups: made each frame
  const auto num = [&](const char* k) {
    return res.contains(k) && res[k].is_number() ? std::to_string(res[k].get<int64_t>()) : std::string("-");
  };
  // Each figure under its catalogue name (facts/catalogue.h), as report and explain print it. A
  // torch engine run (or its export imported back) has Dynamo's count of one forward; a profiled
  // program or an imported log only the log's, over every compile of the run.
  const auto figure = [&](const char* k) { return std::string(facts::fact(k).label) + ": " + num(k); };
  const bool one_forward = res.contains("graph_break_count") && res["graph_break_count"].is_number();
  m_layout.table_title =
      (one_forward ? figure("graph_break_count") : figure("log_graphs") + "    " + figure("log_graph_break_count")) +
      "    " + figure("log_graph_break_records") + " (every compile of run " + std::to_string(run.id) +
      (one_forward ? ": prefill, decode steps, restarts)    " + figure("recompiles") + "    " + figure("frames_skipped") +
                         "    " + figure("recompile_limit_hits")
                   : ")    " + figure("log_recompiles") + "    " + figure("log_frames_skipped") + "    " +
                         figure("log_recompile_limit_hits"));
  text(m_layout.table_title);
  if (rows.empty())
    return empty_note(run.mode == "eager" ? "no graph breaks: eager runs compile nothing"
                                          : "no graph-break records in this run's compile log: Dynamo traced every "
                                            "frame it compiled without a break",
                      m_layout.empty_message);
  std::vector<Column> cols = {
      {"gb code", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].gb_code, rows[b].gb_code); },
       [&](uint32_t r) { text(rows[r].gb_code.empty() ? "-" : rows[r].gb_code); }},
      {"records", [&](uint32_t a, uint32_t b) { return cmp3(rows[b].count, rows[a].count); },
       [&](uint32_t r) { text(std::to_string(rows[r].count)); }},
      {"function", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].function, rows[b].function); },
       [&](uint32_t r) { text(rows[r].function.empty() ? "-" : rows[r].function); }},
      {"hooked module call", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].module_calls, rows[b].module_calls); },
       [&](uint32_t r) { text(rows[r].module_calls.empty() ? "-" : rows[r].module_calls); }},
      {"frames skipped", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].frames_skipped, rows[b].frames_skipped); },
       [&](uint32_t r) { text(std::to_string(rows[r].frames_skipped)); }},
      {"type", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].gb_type, rows[b].gb_type); },
       [&](uint32_t r) { text(rows[r].gb_type); }},
      {"user frame", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].user_frame, rows[b].user_frame); },
       [&](uint32_t r) { text(rows[r].user_frame); }},
      {"reason", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].reason, rows[b].reason); },
       [&](uint32_t r) { text(rows[r].reason); }},
  };
  bool reset = m_table_run[0] != run.id;
  m_table_run[0] = run.id;
  const auto clicked = event_table("log breaks", rows.size(), m_break_order, reset, cols, std::nullopt,
                                   m_layout.table_rows, m_layout.table_headers);
  if (!clicked || !m_timeline[0]) return;
  // A group's first record with a time: the timeline, centred on that instant.
  const LogBreak& g = rows[*clicked];
  const auto& records = m_timeline[0]->dynamo_graph_breaks;
  for (uint32_t i = 0; i < records.size(); ++i)
    if (records[i].gb_code == g.gb_code && records[i].user_frame == g.user_frame && records[i].gb_type == g.gb_type &&
        importers::without_addresses(records[i].reason) == g.group_reason) {
      Focus(0, Source::DynamoBreak, i);
      return;
    }
}

void View::DrawBreaksTab() {
  if (TableLoading({"graph_breaks", "dynamo_graph_breaks"})) return;
  const RunTimeline& tl = *m_timeline[0];
  // A torch run, or one with a compile log: Dynamo's records. Otherwise the LibTorch engine's.
  if (const storage::RunRecord* run = primary_run();
      run && run->results.is_object() && tl.graph_breaks.empty() &&
      (run->engine == "torch" || (run->results.contains("log_compiles") && !run->results["log_compiles"].is_null())))
    return DrawLogBreaks(*run);
  const auto& rows = tl.graph_breaks;
  const storage::RunRecord* run = primary_run();
  const nlohmann::json* one = run && run->results.is_object() && run->results.contains("disabled_scope_entries") &&
                                      run->results["disabled_scope_entries"].is_number()
                                  ? &run->results["disabled_scope_entries"]
                                  : nullptr;
  m_layout.table_title = display_text(std::to_string(rows.size()) + " disabled-scope entries† recorded in run " +
                                          std::to_string(tl.run.id) +
                                          " (every compiled forward: prefill, decode steps, warm-ups and repeats; the "
                                          "LibTorch engine's region cuts, not Dynamo's graph breaks)" +
                                          (one ? "; one forward: " + one->dump() + "†" : std::string()),
                                      style::font_has_typography());
  text(m_layout.table_title);
  if (rows.empty()) return empty_note(no_breaks_reason(tl), m_layout.empty_message);
  const int64_t o = tl.origin_ns;
  std::vector<Column> cols = {
      {"time", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].time_ns, rows[b].time_ns); },
       [&](uint32_t r) { text(format_duration(static_cast<double>(rows[r].time_ns - o))); }},
      {"function", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].function, rows[b].function); },
       [&](uint32_t r) { text(rows[r].function); }},
      {"module", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].module, rows[b].module); },
       [&](uint32_t r) { text(module_label(rows[r].module)); }},
      {"reason", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].reason, rows[b].reason); },
       [&](uint32_t r) { text(rows[r].reason); }},
      {"module stack", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].module_stack, rows[b].module_stack); },
       [&](uint32_t r) { text(rows[r].module_stack); }},
  };
  bool reset = m_table_run[0] != tl.run.id;
  m_table_run[0] = tl.run.id;
  if (auto r = event_table("breaks", rows.size(), m_break_order, reset, cols, selected_row(m_selected, Source::Break),
                           m_layout.table_rows, m_layout.table_headers))
    Focus(0, Source::Break, *r);
}

void View::DrawTransfersTab() {
  if (TableLoading({"transfers"})) return;
  const RunTimeline& tl = *m_timeline[0];
  const auto& rows = tl.transfers;
  int64_t bytes = 0, moved = 0;
  for (const auto& r : rows) {
    bytes += r.bytes;
    moved += r.bytes > 0;
  }
  // A call that moved nothing (a send_to_device of tensors already in place) is listed, not counted.
  m_layout.table_title = std::to_string(moved) + " activation transfers in run " + std::to_string(tl.run.id) + ", " +
                         format_bytes(static_cast<double>(bytes)) +
                         (moved < static_cast<int64_t>(rows.size())
                              ? " (and " + std::to_string(rows.size() - static_cast<size_t>(moved)) +
                                    " send_to_device calls that moved nothing, 0 B)"
                              : std::string());
  text(m_layout.table_title);
  if (rows.empty()) return empty_note(no_transfers_reason(tl), m_layout.empty_message);
  auto kind = [&](uint32_t r) {
    return std::string(copy_kind_name(rows[r].copy_kind)) + (rows[r].emulated ? " (emulated)" : "");
  };
  const auto copy = copy_columns(rows, tl.origin_ns);
  std::vector<Column> cols = {
      copy[0],
      copy[1],
      {"src -> dst",
       [&](uint32_t a, uint32_t b) { return cmp3(rows[a].src + rows[a].dst, rows[b].src + rows[b].dst); },
       [&](uint32_t r) { text(rows[r].src + " -> " + rows[r].dst); }},
      {"copyKind", [&](uint32_t a, uint32_t b) { return cmp3(kind(a), kind(b)); }, [&](uint32_t r) { text(kind(r)); }},
      copy[2],
      copy[3],
      {"module", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].module, rows[b].module); },
       [&](uint32_t r) { text(rows[r].module); }},
  };
  bool reset = m_table_run[1] != tl.run.id;
  m_table_run[1] = tl.run.id;
  if (auto r = event_table("transfers", rows.size(), m_transfer_order, reset, cols,
                           selected_row(m_selected, Source::Transfer), m_layout.table_rows, m_layout.table_headers))
    Focus(0, Source::Transfer, *r);
}

void View::DrawSwapsTab() {
  if (TableLoading({"weight_swaps"})) return;
  const RunTimeline& tl = *m_timeline[0];
  const auto& rows = tl.weight_swaps;
  int64_t bytes = 0, onloads = 0;
  for (const auto& r : rows)
    if (r.onload) {
      bytes += r.bytes;
      ++onloads;
    }
  ImGui::Text("%zu weight swaps in run %lld: %lld onloads moving %s", rows.size(), static_cast<long long>(tl.run.id),
              static_cast<long long>(onloads), format_bytes(static_cast<double>(bytes)).c_str());
  if (rows.empty()) return empty_note(no_swaps_reason(tl), m_layout.empty_message);
  auto src = [&](uint32_t r) { return std::string(weight_source_name(rows[r].source)); };
  const auto copy = copy_columns(rows, tl.origin_ns, [&rows](uint32_t r) { return rows[r].onload; });
  std::vector<Column> cols = {
      copy[0],
      copy[1],
      {"kind", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].onload, rows[b].onload); },
       [&](uint32_t r) { text(rows[r].onload ? "onload" : "offload"); }},
      {"module", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].module, rows[b].module); },
       [&](uint32_t r) { text(module_label(rows[r].module)); }},
      {"tensor", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].tensor, rows[b].tensor); },
       [&](uint32_t r) { text(rows[r].tensor); }},
      copy[2],
      copy[3],
      {"from -> to", [&](uint32_t a, uint32_t b) { return cmp3(src(a) + rows[a].device, src(b) + rows[b].device); },
       [&](uint32_t r) { text(src(r) + " -> " + rows[r].device); }},
      {"dtype", [&](uint32_t a, uint32_t b) { return cmp3(rows[a].dtype, rows[b].dtype); },
       [&](uint32_t r) { text(rows[r].dtype + (rows[r].pinned ? ", pinned" : "")); }},
  };
  bool reset = m_table_run[2] != tl.run.id;
  m_table_run[2] = tl.run.id;
  if (auto r = event_table("swaps", rows.size(), m_swap_order, reset, cols, selected_row(m_selected, Source::WeightSwap),
                           m_layout.table_rows, m_layout.table_headers))
    Focus(0, Source::WeightSwap, *r);
}

}  // namespace hs::ui
