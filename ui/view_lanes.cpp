// View: one run's lanes — the run's header bar, a foldable lane group per device and host
// thread (tracks of slices nested in levels, graph-break markers, the memory counter, weight
// residency per module), then what runs across groups: graph-break lines, the flows (transfers
// from a device's "transfers out" lane to another's "transfers in", launches from a thread's
// CUDA API lane to a GPU stream), the selection's time.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "facts/catalogue.h"
#include "facts/recording.h"
#include "ui/text_fit.h"
#include "ui/view.h"
#include "ui/view_style.h"

namespace hs::ui {

/// One run's lanes being drawn in one frame: where the next row goes, what the mouse does, and
/// what the groups leave for the overlays drawn after them.
struct LanePass {
  /// Lanes of `tl` from height `y` down, time axis from x0 to x1, in the current ImGui window
  /// (its hover state and the mouse are read once here).
  LanePass(ImDrawList* dl, const RunTimeline& tl, int slot, float x0, float x1, float clip_y0, float clip_y1, float y);

  ImDrawList* dl;
  const RunTimeline& tl;
  int slot;               ///< 0 = the primary run, 1 = the compared one
  std::string capture_prefix;  ///< "main: " when several captures are open, else ""
  float label_x, x0, x1;  ///< label column start; time axis span (screen)
  float clip_y0, clip_y1;
  ImVec2 mouse;
  bool mouse_in;          ///< the lanes pane is hovered
  bool clicked;           ///< ... and the left button went down this frame
  float y;                ///< top of the next row (screen)
  size_t group = 0;       ///< the group being drawn
  size_t lane_index = 0;  ///< lanes drawn so far in that group (every other one gets a band)
  /// Per group, per track: where the track was laid out — its top (−1: not laid out, e.g. its
  /// group is folded) and the levels shown — for the flows that start and end on it.
  struct TrackAt {
    float y = -1;
    int levels = 0;
  };
  std::vector<std::vector<TrackAt>> tracks_at;
  int track = -1;  ///< index of the group's track being drawn (−1: a residency lane)
  std::vector<float> break_xs;  ///< x of every graph-break marker drawn

  bool visible(float a, float b) const { return b >= clip_y0 && a <= clip_y1; }
  /// The mouse is in the label column between heights a and b.
  bool mouse_in_labels(float a, float b) const {
    return mouse.y >= a && mouse.y < b && mouse.x >= label_x && mouse.x < x0;
  }
  /// Fills a lane's band under everything else (flows included).
  void band(ImVec2 a, ImVec2 b, ImU32 col) const;
};

namespace {

/// Draw-list layers: lane bands under the flows and break lines, those under the events (and
/// the headers), so a flow never runs over an event or a title.
enum Layer : int { kBandLayer, kFlowLayer, kEventLayer, kLayerCount };

constexpr size_t kFoldResidencyAbove = 6;  ///< more modules than this: residency starts folded
constexpr size_t kMaxBreakLines = 400;     ///< more graph breaks in view: markers only, no lines
constexpr size_t kMaxFlows = 300;          ///< more flows in view: none drawn (they would be noise)
constexpr double kFlowLookBack = 0.25;     ///< flows starting this much of the view before it still show
constexpr float kBreakMarkerHalfWidth = 5.0f;
constexpr size_t kElidedSamples = 32;      ///< shortened labels the layout lists

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

/// "run 3: sharded, whole-hook, default (complete, 1234 events, 5.20 ms)" across the lanes;
/// a run from a trace adds its label and engine: "run 5 'pr.json': imported [import] (...)";
/// with several captures open, the capture's name comes first: "pr: run 3: ...". A torch engine
/// run ends with what recording cost its timeline (facts/recording.h) under the catalogue's
/// label, "timeline's generate vs unrecorded 1.27×" (hover: its definition and times), or "...
/// not measured" when it holds none. Returns the text as drawn.
std::string draw_run_header(LanePass& p) {
  const auto& r = p.tl.run;
  const std::string status = r.status == tracer::RunStatus::Incomplete ? "incomplete"
                             : r.status == tracer::RunStatus::Failed   ? "failed"
                                                                       : "complete";
  std::string what;
  for (const std::string* part : {&r.scenario, &r.policy, &r.mode})
    if (!part->empty()) what += (what.empty() ? "" : ", ") + *part;
  if (r.fullgraph) what += what.empty() ? "fullgraph" : ", fullgraph";
  std::string text = p.capture_prefix + "run " + std::to_string(r.id) + (r.label.empty() ? "" : " '" + r.label + "'") + ": " + what +
                     (r.engine.empty() || r.engine == "libtorch" ? "" : " [" + r.engine + "]") + " (" + status + ", " +
                     (r.dropped_records ? std::to_string(r.dropped_records) + " records DROPPED, " : "") +
                     std::to_string(p.tl.event_count()) + " events, " +
                     format_duration(static_cast<double>(p.tl.duration_ns)) + ")";
  const facts::Fact& fact = facts::fact("recording_overhead");
  const auto overhead = facts::recording_overhead(r.results);
  if (overhead || r.engine == "torch")
    text += "    " + std::string(fact.label) + " " + (overhead ? facts::recording_overhead_text(*overhead) : "not measured");
  text = display_text(std::move(text), style::font_has_typography());
  if (p.visible(p.y, p.y + style::kHeaderHeight)) {
    p.dl->AddRectFilled(ImVec2(p.label_x, p.y), ImVec2(p.x1, p.y + style::kHeaderHeight), style::kRunHeader);
    p.dl->AddText(ImVec2(p.label_x + 4, p.y + 3), style::kText, text.c_str());
    if (overhead && p.mouse_in && p.mouse.y >= p.y && p.mouse.y < p.y + style::kHeaderHeight && p.mouse.x >= p.label_x &&
        p.mouse.x < p.x1)
      ImGui::SetTooltip("%s", display_text(std::string(fact.label) + ": " + facts::recording_overhead_text(*overhead) +
                                               " (" + facts::recording_overhead_detail(*overhead) + ")\n" +
                                               std::string(fact.definition),
                                           style::font_has_typography())
                                  .c_str());
  }
  p.y += style::kHeaderHeight;
  return text;
}

/// A lane's band (every other lane: the rest shows the cleared background, since under a
/// software rasteriser every full-width fill costs milliseconds), its name, and "+N levels"
/// when it nests deeper than the `levels` drawn.
void draw_lane_label(const LanePass& p, const Track& t, size_t index, float h, const std::string& label, int levels) {
  if (index % 2) p.band(ImVec2(p.label_x, p.y), ImVec2(p.x1, p.y + h), style::kLaneBgAlt);
  const ImVec4 clip(p.label_x, p.y, p.x0 - 4, p.y + h);
  p.dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(p.label_x + style::kLaneLabelIndent, p.y + 1),
                style::kDim, label.c_str(), nullptr, 0, &clip);
  if (t.levels.size() > static_cast<size_t>(std::max(levels, 1))) {
    char more[32];
    std::snprintf(more, sizeof more, "+%zu levels", t.levels.size() - std::max(levels, 1));
    p.dl->AddText(ImVec2(p.label_x + style::kLaneLabelIndent, p.y + h - style::kLevelHeight), style::kWarn, more);
  }
}

/// A memory lane's scale, right-aligned in its label column: the peak at the top, half of it
/// in the middle (both with a faint line across the plot), 0 at the bottom. Returns the labels.
std::vector<std::string> draw_memory_scale(const LanePass& p, const Track& t, float h) {
  const float top = p.y + 2, bottom = p.y + h - 2, mid = 0.5f * (top + bottom);
  const std::vector<std::string> labels = {format_bytes(static_cast<double>(t.counter_max)),
                                           format_bytes(static_cast<double>(t.counter_max) / 2), "0"};
  const float fh = ImGui::GetFontSize();
  const float ys[] = {top - 1, mid - 0.5f * fh, bottom - fh + 1};
  for (size_t i = 0; i < labels.size(); ++i) {
    const float w = ImGui::CalcTextSize(labels[i].c_str()).x;
    p.dl->AddText(ImVec2(p.x0 - 6 - w, ys[i]), style::kDim, labels[i].c_str());
    p.dl->AddLine(ImVec2(p.x0 - 4, i == 0 ? top : i == 1 ? mid : bottom), ImVec2(p.x0, i == 0 ? top : i == 1 ? mid : bottom),
                  style::kDim);
  }
  p.dl->AddLine(ImVec2(p.x0, top), ImVec2(p.x1, top), style::kMemoryGrid);
  p.dl->AddLine(ImVec2(p.x0, mid), ImVec2(p.x1, mid), style::kMemoryGrid);
  return labels;
}

/// The memory counter as a step plot, decimated to one column per pixel (the max inside it),
/// on its scale (draw_memory_scale); hovering shows the value at the cursor.
std::vector<std::string> draw_counter(const LanePass& p, const Track& t, float h, const TimeView& v) {
  const auto& pts = t.counter;
  const float y = p.y;
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
      p.dl->AddRectFilled(ImVec2(p.x0 + px, y + h - 2 - mx * scale), ImVec2(p.x0 + px + 1, y + h - 2),
                          style::kMemoryFill);
    if (it == pts.end() && cur == 0) break;
  }
  const std::vector<std::string> labels = draw_memory_scale(p, t, h);
  if (p.mouse_in && p.mouse.y >= y && p.mouse.y < y + h && p.mouse.x >= p.x0 && p.mouse.x <= p.x1) {
    const double tm = v.t_of(p.mouse.x - p.x0);
    auto q = std::partition_point(pts.begin(), pts.end(), [&](const auto& pt) { return pt.first <= tm; });
    const int64_t val = q == pts.begin() ? 0 : std::prev(q)->second;
    ImGui::SetTooltip("%s resident at %s (peak %s)", format_bytes(static_cast<double>(val)).c_str(),
                      format_duration(tm).c_str(), format_bytes(static_cast<double>(t.counter_max)).c_str());
  }
  return labels;
}

/// Dark text on light fills, light text on dark ones.
ImU32 label_color(ImU32 fill) {
  const float r = static_cast<float>((fill >> IM_COL32_R_SHIFT) & 0xFF), g = static_cast<float>((fill >> IM_COL32_G_SHIFT) & 0xFF),
              b = static_cast<float>((fill >> IM_COL32_B_SHIFT) & 0xFF);
  return 0.299f * r + 0.587f * g + 0.114f * b > 110 ? style::kTextDark : style::kText;
}

/// The middle of level `level` of a group's track (its deepest drawn level when deeper), or −1
/// when the track was not laid out.
float flow_end_y(const LanePass& p, uint32_t group, uint16_t track, uint16_t level) {
  const auto& at = p.tracks_at[group];
  if (track >= at.size() || at[track].y < 0) return -1;
  return at[track].y + (std::min<int>(level, std::max(at[track].levels - 1, 0)) + 0.5f) * style::kLevelHeight;
}

/// Graph breaks: faint lines through the whole run where each region ended.
void draw_break_lines(const LanePass& p, float run_y0, float run_y1) {
  if (p.break_xs.size() > kMaxBreakLines) return;
  for (float x : p.break_xs)
    p.dl->AddLine(ImVec2(x, std::max(run_y0, p.clip_y0)), ImVec2(x, std::min(run_y1, p.clip_y1)), style::kBreakLine);
}

/// Flows: activation transfers from the source group's "out" lane to the destination's "in",
/// launches from a CUDA API call to its GPU record; each from / to the level of its slice.
/// Returns how many were drawn.
int64_t draw_flows(const LanePass& p, const TimeView& v) {
  const auto& flows = p.tl.flows;
  const double span = v.end_ns() - v.start_ns;
  auto lo = std::partition_point(flows.begin(), flows.end(),
                                 [&](const Flow& f) { return f.start_ns < v.start_ns - kFlowLookBack * span; });
  auto hi = std::partition_point(lo, flows.end(), [&](const Flow& f) { return f.start_ns <= v.end_ns(); });
  if (static_cast<size_t>(hi - lo) > kMaxFlows) return 0;
  int64_t drawn = 0;
  for (auto it = lo; it != hi; ++it) {
    const float ya = flow_end_y(p, it->src_group, it->src_track, it->src_level),
                yb = flow_end_y(p, it->dst_group, it->dst_track, it->dst_level);
    if (ya < 0 || yb < 0) continue;
    const float xa = p.x0 + v.x_of(static_cast<double>(it->start_ns)),
                xb = p.x0 + v.x_of(static_cast<double>(it->end_ns));
    if (std::max(xa, xb) < p.x0 || std::min(xa, xb) > p.x1) continue;
    const float dy = (yb - ya) * 0.4f;
    const ImU32 c = it->launch() ? style::kLaunchFlow : style::kFlow;
    p.dl->AddBezierCubic(ImVec2(xa, ya), ImVec2(xa, ya + dy), ImVec2(xb, yb - dy), ImVec2(xb, yb), c, 1.0f);
    p.dl->AddCircleFilled(ImVec2(xb, yb), 2.5f, c);
    ++drawn;
  }
  return drawn;
}

}  // namespace

LanePass::LanePass(ImDrawList* dl_, const RunTimeline& tl_, int slot_, float x0_, float x1_, float clip_y0_,
                   float clip_y1_, float y_)
    : dl(dl_),
      tl(tl_),
      slot(slot_),
      label_x(x0_ - style::kLabelWidth),
      x0(x0_),
      x1(x1_),
      clip_y0(clip_y0_),
      clip_y1(clip_y1_),
      mouse(ImGui::GetIO().MousePos),
      mouse_in(ImGui::IsWindowHovered(ImGuiHoveredFlags_AllowWhenBlockedByActiveItem)),
      clicked(mouse_in && ImGui::IsMouseClicked(0)),
      y(y_),
      tracks_at(tl_.groups.size()) {}

void LanePass::band(ImVec2 a, ImVec2 b, ImU32 col) const {
  dl->ChannelsSetCurrent(kBandLayer);
  dl->AddRectFilled(a, b, col);
  dl->ChannelsSetCurrent(kEventLayer);
}

float View::DrawRunLanes(ImDrawList* dl, int slot, float x0, float x1, float y, float clip0, float clip1) {
  const RunTimeline& tl = *m_timeline[slot];
  LanePass p(dl, tl, slot, x0, x1, clip0, clip1, y);
  p.capture_prefix = capture_prefix(m_timeline_capture[slot]);
  const float run_y0 = y;
  dl->ChannelsSplit(kLayerCount);
  dl->ChannelsSetCurrent(kEventLayer);
  m_layout.run_headers.push_back(draw_run_header(p));
  for (size_t g = 0; g < tl.groups.size(); ++g) DrawLaneGroup(p, g);
  const float run_y1 = p.y;
  dl->ChannelsSetCurrent(kFlowLayer);
  draw_break_lines(p, run_y0, run_y1);
  m_layout.drawn_flows += draw_flows(p, m_time);
  dl->ChannelsMerge();
  DrawSelectionTime(p, run_y0, run_y1);
  DrawSearchHighlight(p);
  return p.y;
}

bool View::IsCollapsed(const std::string& key, bool by_default) const {
  auto it = m_collapsed.find(key);
  return it == m_collapsed.end() ? by_default : it->second;
}

bool View::DrawFoldHeader(LanePass& p, float h, uint32_t bg, const std::string& text, const std::string& key,
                          bool default_collapsed, uint32_t text_color) {
  bool collapsed = IsCollapsed(key, default_collapsed);
  if (p.visible(p.y, p.y + h)) {
    // On the event layer: a flow passes under a title, not over it.
    p.dl->AddRectFilled(ImVec2(p.label_x, p.y), ImVec2(p.x1, p.y + h), bg);
    p.dl->AddText(ImVec2(p.label_x + 4, p.y + (h - ImGui::GetFontSize()) * 0.5f), text_color,
                  ((collapsed ? "[+] " : "[-] ") + text).c_str());
  }
  if (p.clicked && p.mouse_in_labels(p.y, p.y + h)) m_collapsed[key] = collapsed = !collapsed;
  p.y += h;
  return collapsed;
}

/// A device's or host thread's group: its header (folded by default when the run left it
/// empty), its tracks, its weight residency.
void View::DrawLaneGroup(LanePass& p, size_t g) {
  const LaneGroup& grp = p.tl.groups[g];
  const float gy0 = p.y;
  const std::string key = std::to_string(p.slot) + ":" + grp.title;
  const ImU32 bg = grp.host ? style::kHostHeader : grp.emulated ? style::kEmulatedHeader : style::kGroupHeader;
  size_t events = grp.residency.size();
  for (const auto& t : grp.tracks) events += t.slice_count();
  const std::string title =
      grp.title + (grp.emulated ? "   EMULATED" : "") + (events ? "" : "   (no events in this run)");
  if (!DrawFoldHeader(p, style::kHeaderHeight, bg, title, key, /*default_collapsed=*/events == 0, style::kText)) {
    p.group = g;
    p.lane_index = 0;
    p.tracks_at[g].assign(grp.tracks.size(), {});
    for (size_t i = 0; i < grp.tracks.size(); ++i) {
      p.track = static_cast<int>(i);
      DrawTrack(p, grp.tracks[i]);
    }
    p.track = -1;
    if (!grp.residency.empty()) DrawResidency(p, grp, key + ":residency");
  }
  m_layout.groups.push_back({p.tl.run.id, static_cast<int>(m_timeline_capture[p.slot]), grp.device, grp.title, grp.host,
                             grp.emulated, p.label_x, gy0, p.x1, p.y, p.visible(gy0, p.y)});
  p.y += style::kGroupGap;
}

/// Weight residency: one summary lane while folded (its label unfolds it), one lane per module
/// under a header when open.
void View::DrawResidency(LanePass& p, const LaneGroup& grp, const std::string& key) {
  const std::string modules = std::to_string(grp.residency.size());
  const float top = p.y;
  if (IsCollapsed(key, grp.residency.size() > kFoldResidencyAbove)) {
    const std::string label = "[+] weights (" + modules + " modules)";
    DrawTrack(p, grp.residency_summary, &label);
    if (p.clicked && p.mouse_in_labels(top, top + style::kLevelHeight)) m_collapsed[key] = false;
    return;
  }
  DrawFoldHeader(p, style::kLevelHeight, style::kLaneBgAlt, "weight residency per module (" + modules + ")", key, false,
                 style::kDim);
  for (const auto& t : grp.residency) DrawTrack(p, t);
}

/// One track at p.y, titled `label` (default: its name); moves p.y below it. Off-screen tracks
/// only take their height. A track nesting deeper than it shows folded (kMaxLevels; the Python
/// stack: its top kPythonStackLevels frames) unfolds to all its levels when its label is
/// clicked, and folds again on the next click.
void View::DrawTrack(LanePass& p, const Track& t, const std::string* label) {
  const size_t index = p.lane_index++;
  const bool counter = !t.counter.empty();
  const int depth = static_cast<int>(t.levels.size());
  const int folded_levels = t.lane == Lane::PythonStack ? style::kPythonStackLevels : style::kMaxLevels;
  const bool foldable = depth > folded_levels;
  const std::string key = foldable ? std::to_string(p.slot) + ":" + p.tl.groups[p.group].title + ":" + t.name : "";
  const bool folded = foldable && IsCollapsed(key, true);
  const int levels = std::min(depth, folded ? folded_levels : style::kMaxOpenLevels);
  const float h = counter ? style::kCounterHeight : std::max(levels, 1) * style::kLevelHeight;
  if (p.track >= 0) p.tracks_at[p.group][p.track] = {p.y, levels};
  if (foldable && p.clicked && p.mouse_in_labels(p.y, p.y + h)) m_collapsed[key] = !folded;
  if (p.visible(p.y, p.y + h)) {
    const std::string& name = label ? *label : t.name;
    draw_lane_label(p, t, index, h, foldable ? (folded ? "[+] " : "[-] ") + name : name, levels);
    if (counter)
      m_layout.memory_axes.push_back({p.tl.run.id, p.tl.groups[p.group].device, t.counter_max,
                                      draw_counter(p, t, h, m_time), p.y, p.y + h});
    else if (!t.instants.empty())
      DrawInstants(p, t, h);
    else
      DrawSliceLevels(p, t, levels);
  }
  p.y += h;
}

/// Graph-break markers (the LibTorch engine's, or Dynamo's records); markers closer than 3 px
/// merge into one (the first is hovered).
void View::DrawInstants(LanePass& p, const Track& t, float h) {
  const TimeView& v = m_time;
  const auto& in = t.instants;
  const float y = p.y, hw = kBreakMarkerHalfWidth;
  const double slop = 3.0 * v.ns_per_px;
  auto it = std::partition_point(in.begin(), in.end(), [&](const Slice& s) { return s.start_ns < v.start_ns - slop; });
  while (it != in.end() && it->start_ns <= v.end_ns() + slop) {
    auto next = std::partition_point(it, in.end(), [&](const Slice& s) { return s.start_ns < it->start_ns + slop; });
    const float x = p.x0 + v.x_of(static_cast<double>(it->start_ns));
    p.dl->AddTriangleFilled(ImVec2(x - hw, y + 2), ImVec2(x + hw, y + 2), ImVec2(x, y + h - 2), style::kBreakMark);
    p.break_xs.push_back(x);
    if (p.mouse_in && std::fabs(p.mouse.x - x) <= hw && p.mouse.y >= y && p.mouse.y < y + h)
      m_hover = Pick{p.slot, t.source, it->row};
    if (m_selected && m_selected->run == p.slot && m_selected->source == t.source) {
      for (auto s = it; s != next; ++s)
        if (s->row == m_selected->row)
          p.dl->AddRect(ImVec2(x - hw - 2, y), ImVec2(x + hw + 2, y + h), style::kSelect, 0, 0, 2);
    }
    ++m_layout.drawn_boxes;
    it = next;
  }
}

/// A slice's label inside [bx0, bx1] at height y: whole when it fits, else its tail
/// (fit_label: "...layers.3.mlp") or, for steps, its head ("warm-up 1..."), else none — the
/// tooltip has it in full.
void View::DrawSliceLabel(LanePass& p, const std::string& text, float bx0, float bx1, float y, ImU32 color, Keep keep) {
  const TextWidth measure = [](std::string_view s) { return ImGui::CalcTextSize(s.data(), s.data() + s.size()).x; };
  const std::string fit = fit_label(text, bx1 - bx0 - 5, measure, keep);
  if (fit.empty()) return;
  if (fit != text) {
    ++m_layout.elided_labels;
    if (m_layout.elided_samples.size() < kElidedSamples) m_layout.elided_samples.push_back(fit);
  }
  const ImVec4 clip(bx0 + 2, y, bx1 - 2, y + style::kLevelHeight);
  p.dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(bx0 + 3, y + 1), color, fit.c_str(), nullptr, 0, &clip);
}

/// A merged block: the zig-zag, "N events (zoom in)" when wide enough; hovering it offers the
/// zoom.
void View::DrawMergedBox(LanePass& p, const std::vector<Slice>& level, const DrawBox& b, float ly0, float ly1,
                         bool mouse_row) {
  const float bx0 = p.x0 + b.x0, bx1 = p.x0 + b.x1;
  const Slice& s = level[b.first];
  const ImU32 fill = style::category_color(s.category);
  ++m_layout.merged_boxes;
  if (m_layout.merged_samples.size() < FrameLayout::kMergedSamples)
    m_layout.merged_samples.push_back({static_cast<double>(s.start_ns),
                                       static_cast<double>(level[b.first + b.count - 1].end_ns), b.count, bx0, ly0, bx1,
                                       ly1});
  p.dl->AddRectFilled(ImVec2(bx0, ly0), ImVec2(bx1, ly1), darker(fill, 0.55f));
  zigzag(p.dl, bx0, bx1, ly0, ly1, fill);
  if (bx1 - bx0 > style::kMergedLabelMinPx) {
    char txt[48];
    std::snprintf(txt, sizeof txt, "%u events (zoom in)", b.count);
    const ImVec4 clip(bx0, ly0, bx1, ly1);
    p.dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(bx0 + 3, ly0 + 1), style::kText, txt, nullptr, 0, &clip);
  }
  if (mouse_row && p.mouse.x >= bx0 && p.mouse.x < bx1) {
    m_hover_merged = std::make_pair(s.start_ns, level[b.first + b.count - 1].end_ns);
    m_hover_merged_count = b.count;
  }
}

/// The slices of a track, level by level: each as a box labelled when wide enough, runs of
/// slices too narrow to see merged into one zig-zag "zoom in" block — except on a swaps lane
/// with an aggregate, whose dense swaps are drawn as one labelled block per step.
void View::DrawSliceLevels(LanePass& p, const Track& t, int levels) {
  if (!t.aggregate.empty() && DrawSwapGroups(p, t)) return;
  for (int lv = 0; lv < levels; ++lv) {
    const auto& level = t.levels[lv];
    const float ly0 = p.y + lv * style::kLevelHeight, ly1 = ly0 + style::kLevelHeight - 1;
    const bool mouse_row = p.mouse_in && p.mouse.y >= ly0 && p.mouse.y < ly1;
    for (const DrawBox& b : layout_level(level, m_time, style::kMinBoxPx)) {
      ++m_layout.drawn_boxes;
      if (b.merged()) {
        DrawMergedBox(p, level, b, ly0, ly1, mouse_row);
        continue;
      }
      const float bx0 = p.x0 + b.x0, bx1 = p.x0 + b.x1;
      const Slice& s = level[b.first];
      const ImU32 fill = style::category_color(s.category);
      p.dl->AddRectFilled(ImVec2(bx0, ly0), ImVec2(bx1, ly1), fill);
      // A step's label begins with its generate ("warm-up 1 · step 0"): keep that end.
      const Keep keep = s.category == kStep || s.category == kPhase ? Keep::Head : Keep::Tail;
      if (bx1 - bx0 > style::kSliceLabelMinPx)
        DrawSliceLabel(p, p.tl.strings[s.label], bx0, bx1, ly0, label_color(fill), keep);
      const Source src = slice_source(t, s);
      if (mouse_row && p.mouse.x >= bx0 - 1 && p.mouse.x < bx1 + 1) m_hover = Pick{p.slot, src, s.row};
      if (m_selected && m_selected->run == p.slot && m_selected->source == src && m_selected->row == s.row)
        p.dl->AddRect(ImVec2(bx0 - 1, ly0 - 1), ImVec2(bx1 + 1, ly1 + 1), style::kSelect, 0, 0, 2);
    }
  }
}

bool View::DrawSwapGroups(LanePass& p, const Track& t) {
  // The swaps themselves while most of what they draw is single swaps; their groups once merged
  // "zoom in" blocks outnumber those.
  const auto boxes = layout_level(t.levels.front(), m_time, style::kMinBoxPx);
  const auto merged = std::count_if(boxes.begin(), boxes.end(), [](const DrawBox& b) { return b.merged(); });
  if (merged <= static_cast<std::ptrdiff_t>(boxes.size()) - merged) return false;
  const float ly0 = p.y, ly1 = ly0 + style::kLevelHeight - 1;
  const bool mouse_row = p.mouse_in && p.mouse.y >= ly0 && p.mouse.y < ly1;
  for (const DrawBox& b : layout_level(t.aggregate, m_time, style::kMinBoxPx)) {
    ++m_layout.drawn_boxes;
    if (b.merged()) {  // groups too narrow themselves (zoomed far out)
      DrawMergedBox(p, t.aggregate, b, ly0, ly1, mouse_row);
      continue;
    }
    ++m_layout.aggregated_boxes;
    const float bx0 = p.x0 + b.x0, bx1 = p.x0 + b.x1;
    const Slice& s = t.aggregate[b.first];
    const ImU32 fill = style::category_color(s.category);
    p.dl->AddRectFilled(ImVec2(bx0, ly0), ImVec2(bx1, ly1), fill);
    p.dl->AddRect(ImVec2(bx0, ly0), ImVec2(bx1, ly1), darker(fill, 0.6f));
    if (bx1 - bx0 > style::kSliceLabelMinPx) {
      // "144 onloads, 576 MiB", else "144 onloads", else "144": the count is what tells groups apart.
      const SwapGroup& sg = p.tl.swap_groups[s.row];
      const std::string& full = p.tl.strings[s.label];
      const int64_t n = sg.onloads ? sg.onloads : sg.offloads;
      const std::string shorter = std::to_string(n) + (sg.onloads ? " onloads" : " offloads");
      const float room = bx1 - bx0 - 5;
      const std::string& text = ImGui::CalcTextSize(full.c_str()).x <= room      ? full
                                : ImGui::CalcTextSize(shorter.c_str()).x <= room ? shorter
                                                                                 : std::to_string(n);
      DrawSliceLabel(p, text, bx0, bx1, ly0, label_color(fill));
    }
    if (mouse_row && p.mouse.x >= bx0 - 1 && p.mouse.x < bx1 + 1) m_hover = Pick{p.slot, Source::SwapGroup, s.row};
  }
  return true;
}

/// The current match's outline, over the primary run's lanes.
void View::DrawSearchHighlight(LanePass& p) {
  m_layout.search.highlighted = false;
  if (!m_match || p.slot != 0) return;
  const SearchMatch& m = m_matches.at(*m_match);
  const auto& at = p.tracks_at.at(m.group);
  if (m.track >= at.size() || at[m.track].y < 0) return;
  const int level = std::min<int>(m.level, std::max(at[m.track].levels - 1, 0));
  const float y0 = at[m.track].y + level * style::kLevelHeight, y1 = y0 + style::kLevelHeight - 1;
  float x0 = p.x0 + m_time.x_of(static_cast<double>(m.start_ns)), x1 = p.x0 + m_time.x_of(static_cast<double>(m.end_ns));
  if (x1 - x0 < 6) {
    const float c = 0.5f * (x0 + x1);
    x0 = c - 3, x1 = c + 3;
  }
  x0 = std::max(x0, p.x0 - 2), x1 = std::min(x1, p.x1 + 2);
  if (x1 <= x0) return;
  if (m_scroll_to_match) {  // out of the pane: bring it to the middle (drawn there next frame)
    if (y0 < p.clip_y0 || y1 > p.clip_y1)
      ImGui::SetScrollY(std::max(0.0f, ImGui::GetScrollY() + 0.5f * (y0 + y1) - 0.5f * (p.clip_y0 + p.clip_y1)));
    m_scroll_to_match = false;
  }
  if (!p.visible(y0, y1)) return;
  p.dl->AddRect(ImVec2(x0 - 2, y0 - 2), ImVec2(x1 + 2, y1 + 2), style::kSearchHit, 0, 0, 3);
  const float cx = 0.5f * (x0 + x1);
  p.dl->AddTriangleFilled(ImVec2(cx - 6, y0 - 10), ImVec2(cx + 6, y0 - 10), ImVec2(cx, y0 - 3), style::kSearchHit);
  auto& s = m_layout.search;
  s.highlighted = true;
  s.rect[0] = x0, s.rect[1] = y0, s.rect[2] = x1, s.rect[3] = y1;
}

/// The selected event's start and end as lines through the whole run.
void View::DrawSelectionTime(LanePass& p, float run_y0, float run_y1) {
  if (!m_selected || m_selected->run != p.slot || m_selected->source == Source::Residency) return;
  const auto [a, b] = extent(p.tl, m_selected->source, m_selected->row);
  for (int64_t t : {a, b}) {
    const float x = p.x0 + m_time.x_of(static_cast<double>(t));
    if (x >= p.x0 && x <= p.x1)
      p.dl->AddLine(ImVec2(x, std::max(run_y0, p.clip_y0)), ImVec2(x, std::min(run_y1, p.clip_y1)),
                    style::kSelectionTime);
  }
}

}  // namespace hs::ui
