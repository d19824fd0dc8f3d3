// The report's pictures as standalone SVG: the compare chart, run timelines (laid out with the
// viewer's model: ui::load_run_timeline, ui::layout_level), and --assets files.
#include "reports/report_svg.h"
#include "output/paths.h"
#include "output/text.h"
#include "reports/markdown_text.h"
#include "reports/stats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

#include "ui/time_axis.h"

namespace hs::reports {

using nlohmann::json;

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {  // XML and HTML are UTF-8 text: a byte that is not is U+FFFD
      const size_t n = output::utf8_length_at(s, i);
      out += n ? s.substr(i, n) : std::string_view("\xef\xbf\xbd");
      i += std::max<size_t>(n, 1) - 1;
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:  // XML 1.0 has no C0 controls but tab, LF and CR, nor does a name need those: spaces
        out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;
    }
  }
  return out;
}

namespace {

// A coordinate with one decimal ("12.5", "40").
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  std::string s = b;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

std::string fmt(double v, const char* f) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// `ms` with as many decimals as a tick step of `step_ms` needs.
std::string ms_label(double ms, double step_ms) {
  return fmt(ms, step_ms >= 1 ? "%.0f" : step_ms >= 0.1 ? "%.1f" : step_ms >= 0.01 ? "%.2f" : "%.3f");
}

// `s` cut to about `width_px` at ~6 px per character of the 10 px font, "…" marking a cut
// (never inside a UTF-8 sequence).
std::string fit_text(const std::string& s, double width_px) {
  const size_t room = width_px > 0 ? static_cast<size_t>(width_px / 6.2) : 0;
  if (s.size() <= room) return s;
  if (room < 3) return "";
  size_t n = room - 1;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "…";
}

// An SVG body under construction, counting its elements.
struct SvgDoc {
  std::ostringstream body;
  size_t elements = 0;

  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view title = {},
            std::string_view extra = {}) {
    body << "<rect x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(std::max(w, 0.1)) << "\" height=\""
         << num(h) << "\" fill=\"" << fill << '"';
    if (!extra.empty()) body << ' ' << extra;
    ++elements;
    if (title.empty()) {
      body << "/>";
    } else {
      body << "><title>" << xml_escape(shown(title)) << "</title></rect>";
      ++elements;
    }
    body << '\n';
  }
  // A title or text as the picture shows it: at most kMaxSvgText bytes, ending in "..." when cut
  // (a module's name of megabytes, in an edited capture, is not repeated per slice).
  static std::string shown(std::string_view s) {
    constexpr size_t kMaxSvgText = 1000;
    return s.size() <= kMaxSvgText ? std::string(s) : shortened_text(std::string(s), kMaxSvgText);
  }
  void text(double x, double y, std::string_view t, std::string_view attrs = {}) {
    body << "<text x=\"" << num(x) << "\" y=\"" << num(y) << '"';
    if (!attrs.empty()) body << ' ' << attrs;
    body << '>' << xml_escape(shown(t)) << "</text>\n";
    ++elements;
  }
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, std::string_view extra = {}) {
    body << "<line x1=\"" << num(x1) << "\" y1=\"" << num(y1) << "\" x2=\"" << num(x2) << "\" y2=\"" << num(y2)
         << "\" stroke=\"" << stroke << '"';
    if (!extra.empty()) body << ' ' << extra;
    body << "/>\n";
    ++elements;
  }
  std::string finish(double w, double h, std::string_view label) const {
    std::ostringstream s;
    s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(w) << "\" height=\"" << num(h) << "\" viewBox=\"0 0 "
      << num(w) << ' ' << num(h) << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"10\" "
      << "role=\"img\" aria-label=\"" << xml_escape(label) << "\">\n<rect width=\"" << num(w) << "\" height=\"" << num(h)
      << "\" fill=\"#ffffff\"/>\n"
      << body.str() << "</svg>\n";
    return s.str();
  }
};

// ---- compare chart ---------------------------------------------------------------------------

struct Stats {
  double median = -1, min = 0, max = 0;
  bool ok() const { return median >= 0; }
};

Stats stats_of(const json& r, const std::string& key) {
  const auto it = r.find(key);
  if (it == r.end() || !it->is_object() || !it->contains("median") || !(*it)["median"].is_number()) return {};
  const double m = (*it)["median"].get<double>();
  return {m, it->value("min", m), it->value("max", m)};
}

struct Bar {
  std::string policy;
  const json* run = nullptr;
  Stats s;
  std::string note;       ///< "12.3 ms (11.9–13.0) · 2.00× faster"
  std::string note_fill;  ///< its colour
};
struct BarGroup {
  std::string scenario, mode;
  std::vector<Bar> bars;
};
struct Panel {
  std::string engine, metric, unit;
  std::vector<BarGroup> groups;
  double max = 0;
};

bool is_ok(const json& r) { return r.value("status", "") == "ok"; }

// The note beside a bar: its numbers and, for a compiled mode, the speed-up against eager with
// the verdict the report gives it (run["speedup"], measurement/verdict.h), so that chart and
// tables never disagree.
void annotate(Bar& b) {
  if (!b.s.ok()) {
    b.note = b.run ? b.run->value("status", "?") : "not run";
    b.note_fill = "#8a8f99";
    return;
  }
  b.note = fmt(b.s.median, "%.2f") + " (" + fmt(b.s.min, "%.2f") + "–" + fmt(b.s.max, "%.2f") + ")";
  b.note_fill = "#30343c";
  const json sp = b.run->value("speedup", json());
  if (!sp.is_object() || !sp.value("vs_eager", json()).is_number()) return;
  const double s = sp["vs_eager"].get<double>();
  const std::string verdict = sp.value("verdict", json()).is_string() ? sp["verdict"].get<std::string>() : "not judged";
  // Two decimals, three where two would round a real difference to "1.00".
  const std::string ratio = fmt(s, std::fabs(s - 1) < 0.005 ? "%.3f" : "%.2f");
  b.note += " · " + ratio + "× " + verdict;
  b.note_fill = verdict == "faster" ? "#1f8a3b" : verdict == "slower" ? "#c0392b" : "#8a8f99";
}

std::vector<Panel> chart_panels(const json& report) {
  std::map<std::string, std::vector<const json*>> by_engine;
  std::vector<std::string> engines;
  for (const auto& r : report.at("runs")) {
    const std::string e = r.value("engine", "");
    if (!by_engine.count(e)) engines.push_back(e);
    by_engine[e].push_back(&r);
  }
  std::stable_sort(engines.begin(), engines.end(), [](const std::string& a, const std::string& b) {
    auto rank = [](const std::string& e) { return e == "torch" ? 0 : e == "libtorch" ? 1 : 2; };
    return rank(a) < rank(b);
  });
  std::vector<Panel> panels;
  for (const auto& e : engines) {
    const auto& runs = by_engine[e];
    Panel p{e, "decode_ms_per_token", "decode ms per token", {}, 0};
    std::vector<std::string> policies;
    for (const json* r : runs)
      if (std::find(policies.begin(), policies.end(), r->value("policy", "")) == policies.end())
        policies.push_back(r->value("policy", ""));
    for (const json* r : runs) {
      if (r->value("fullgraph", false)) continue;
      const std::string sc = r->value("scenario", ""), mode = r->value("mode", "");
      auto g = std::find_if(p.groups.begin(), p.groups.end(), [&](const BarGroup& x) { return x.scenario == sc && x.mode == mode; });
      if (g == p.groups.end()) {
        p.groups.push_back({sc, mode, {}});
        for (const auto& pol : policies) p.groups.back().bars.push_back({pol, nullptr, {}, "", ""});
        g = p.groups.end() - 1;
      }
      for (auto& b : g->bars)
        if (b.policy == r->value("policy", "") && !b.run) b.run = r, b.s = is_ok(*r) ? stats_of(*r, p.metric) : Stats{};
    }
    for (auto& g : p.groups) {
      g.bars.erase(std::remove_if(g.bars.begin(), g.bars.end(), [](const Bar& b) { return !b.run; }), g.bars.end());
      for (auto& b : g.bars) {
        annotate(b);
        if (b.s.ok()) p.max = std::max(p.max, b.s.max);
      }
    }
    if (p.max > 0) panels.push_back(std::move(p));
  }
  return panels;
}

// The fill of a policy's bars: whole-hook blue, offload-only green, other trees from a palette.
std::string policy_fill(const std::string& policy, const std::vector<std::string>& seen) {
  if (policy == "whole-hook") return "#5a82d2";
  if (policy == "offload-only") return "#50aa78";
  static const char* other[] = {"#d08c3c", "#9b6fc4", "#c45c6f", "#4fa3b5"};
  const auto i = std::find(seen.begin(), seen.end(), policy) - seen.begin();
  return other[static_cast<size_t>(i) % 4];
}

constexpr double kChartW = 1000, kChartLabelW = 200, kChartPlotX = 210, kChartPlotW = 470, kChartNoteX = 695;

// One engine's panel from `y`; returns the y below it.
double draw_panel(SvgDoc& d, const Panel& p, double y) {
  d.text(8, y + 14, (p.engine.empty() ? std::string("runs") : p.engine + " engine") + ": " + p.unit +
                        ", median with min–max whiskers",
         "font-size=\"12\" font-weight=\"bold\"");
  y += 24;
  const double scale = kChartPlotW / (p.max * 1.08);
  // The value axis first (under the bars): ms ticks below, faint lines through the rows.
  double bottom = y;
  for (const auto& g : p.groups) bottom += 21 + 15.0 * g.bars.size();
  const double step_ns = ui::tick_step_ns(1e6 / scale, 70), step = step_ns / 1e6;
  for (double v = 0; v <= p.max * 1.08 + 1e-12; v += step) {
    const double x = kChartPlotX + v * scale;
    d.line(x, y, x, bottom, "#dde1e8");
    d.text(x, bottom + 12, ms_label(v, step), "text-anchor=\"middle\" fill=\"#555b66\"");
  }
  d.text(kChartPlotX + kChartPlotW, bottom + 24, "ms", "text-anchor=\"end\" fill=\"#555b66\"");
  std::vector<std::string> other_policies;
  for (const auto& g : p.groups) {
    d.text(8, y + 12, g.scenario + " · " + g.mode, "font-weight=\"bold\"");
    y += 17;
    for (const auto& b : g.bars) {
      if (b.policy != "whole-hook" && b.policy != "offload-only" &&
          std::find(other_policies.begin(), other_policies.end(), b.policy) == other_policies.end())
        other_policies.push_back(b.policy);
      d.text(20, y + 10, fit_text(b.policy.empty() ? "(no policy)" : b.policy, kChartLabelW - 24));
      if (b.s.ok()) {
        const double cy = y + 6;
        d.rect(kChartPlotX, y + 1, b.s.median * scale, 10, policy_fill(b.policy, other_policies),
               b.policy + " " + g.scenario + " " + g.mode + ": median " + fmt(b.s.median, "%.3f") + " ms");
        d.line(kChartPlotX + b.s.min * scale, cy, kChartPlotX + b.s.max * scale, cy, "#222222");
        d.line(kChartPlotX + b.s.min * scale, cy - 4, kChartPlotX + b.s.min * scale, cy + 4, "#222222");
        d.line(kChartPlotX + b.s.max * scale, cy - 4, kChartPlotX + b.s.max * scale, cy + 4, "#222222");
      }
      d.text(kChartNoteX, y + 10, b.note, "fill=\"" + b.note_fill + "\"");
      y += 15;
    }
    y += 4;
  }
  return bottom + 34;
}

}  // namespace

std::string compare_chart_svg(const json& report) {
  const std::vector<Panel> panels = chart_panels(report);
  if (panels.empty()) return "";
  SvgDoc d;
  double y = 6;
  for (const auto& p : panels) y = draw_panel(d, p, y);
  return d.finish(kChartW, y, "decode latency per scenario, mode and policy");
}

namespace {

// ---- timeline --------------------------------------------------------------------------------

constexpr double kTlW = 1240, kTlLabelW = 210, kTlPlotW = 1010, kTlTitleH = 24, kTlAxisH = 20;
constexpr double kTlGroupH = 18, kTlLevelH = 13, kTlCounterH = 24, kTlGap = 4;
constexpr size_t kTlMaxLevels = 3;

// Fills of ui::Category, the viewer's hues.
const char* category_fill(uint8_t c) {
  static constexpr const char* fills[] = {
      "#4e8cdc", "#50be78", "#be6ec8", "#e6a03c", "#e6c83c", "#aaaa78", "#dc6e46", "#8c645a", "#6eaaaa",
      "#5a8c96", "#78788c", "#c8505a", "#46a06e", "#786ebe", "#50aac8", "#464b5f", "#69503c", "#e04646",
      "#8caad7", "#e1be6e", "#96af96", "#d7af69", "#5ab4d2", "#d28caa", "#bebe8c", "#c8a078",
      "#555569", "#c87d55", "#cd5f5f"};
  static_assert(std::size(fills) == ui::kCategoryCount, "one fill per ui::Category");
  return c < ui::kCategoryCount ? fills[c] : "#808080";
}

// One row of the picture: a group's header (track == nullptr) or one of its tracks laid out.
struct TlRow {
  const ui::LaneGroup* group = nullptr;
  const ui::Track* track = nullptr;
  double y = 0, h = 0;
  std::vector<std::vector<ui::DrawBox>> levels;
  std::vector<std::pair<float, uint32_t>> marks;  ///< instants: x, how many merged there
};

bool group_empty(const ui::LaneGroup& g) {
  for (const auto& t : g.tracks)
    if (t.slice_count() > 0) return false;
  return true;
}

// Every row at merge width `min_px`, with the number of SVG elements they will take.
std::vector<TlRow> plan_rows(const ui::RunTimeline& tl, const ui::TimeView& view, float min_px, size_t& elements) {
  std::vector<TlRow> rows;
  double y = kTlTitleH + kTlAxisH;
  elements = 0;
  for (const auto& g : tl.groups) {
    if (!g.host && group_empty(g)) continue;
    rows.push_back({&g, nullptr, y, kTlGroupH, {}, {}});
    y += kTlGroupH;
    elements += 2;
    for (const auto& t : g.tracks) {
      TlRow r{&g, &t, y, kTlLevelH, {}, {}};
      for (size_t l = 0; l < t.levels.size() && l < kTlMaxLevels; ++l) {
        r.levels.push_back(ui::layout_level(t.levels[l], view, min_px));
        for (const auto& b : r.levels.back()) elements += 2 + (b.x1 - b.x0 >= 30 ? 1 : 0);
      }
      for (const auto& s : t.instants) {
        // An instant outside the drawn time range (a Dynamo break logged before the profiled
        // generate) is not drawn: a static picture cannot be zoomed out to it.
        if (s.start_ns < view.start_ns || s.start_ns > view.end_ns()) continue;
        const float x = view.x_of(static_cast<double>(s.start_ns));
        if (!r.marks.empty() && x - r.marks.back().first < min_px) ++r.marks.back().second;
        else r.marks.push_back({x, 1});
      }
      elements += 2 * r.marks.size() + 3;
      if (t.lane == ui::Lane::Memory) r.h = kTlCounterH;
      else r.h = kTlLevelH * static_cast<double>(std::max<size_t>(1, r.levels.size()));
      y += r.h + 1;
      rows.push_back(std::move(r));
    }
    y += kTlGap;
  }
  return rows;
}

// The memory counter as one filled step path: per pixel column the largest value held there.
void draw_counter(SvgDoc& d, const ui::Track& t, const ui::TimeView& view, double y, double h) {
  if (t.counter.empty() || t.counter_max <= 0) return;
  const size_t cols = static_cast<size_t>(view.width_px) + 1;
  std::vector<int64_t> peak(cols, -1);
  auto col = [&](double ns) { return std::min(cols - 1, static_cast<size_t>(std::max(0.0f, view.x_of(ns)))); };
  for (size_t i = 0; i < t.counter.size(); ++i) {
    const auto [ns, bytes] = t.counter[i];
    const double until = i + 1 < t.counter.size() ? static_cast<double>(t.counter[i + 1].first) : view.end_ns();
    for (size_t c = col(static_cast<double>(ns)); c <= col(until); ++c) peak[c] = std::max(peak[c], bytes);
  }
  std::ostringstream p;
  const double base = y + h - 1, x0 = kTlLabelW;
  p << "M" << num(x0) << ' ' << num(base);
  for (size_t c = 0; c < cols; ++c) {
    const double v = peak[c] < 0 ? 0 : static_cast<double>(peak[c]) / static_cast<double>(t.counter_max);
    p << " L" << num(x0 + c) << ' ' << num(base - v * (h - 3)) << " L" << num(x0 + c + 1) << ' ' << num(base - v * (h - 3));
  }
  p << " L" << num(x0 + cols) << ' ' << num(base) << " Z";
  d.body << "<path d=\"" << p.str() << "\" fill=\"#e0a050\" fill-opacity=\"0.55\" stroke=\"#b87830\" stroke-width=\"0.6\"><title>"
         << xml_escape("resident bytes, peak " + ui::format_bytes(static_cast<double>(t.counter_max))) << "</title></path>\n";
  d.elements += 2;
}

// One track's slices, graph-break marks and counter.
void draw_track(SvgDoc& d, const ui::RunTimeline& tl, const TlRow& r, const ui::TimeView& view, size_t index) {
  const ui::Track& t = *r.track;
  if (index % 2) d.rect(0, r.y, kTlW, r.h, "#f4f6f9");
  d.text(22, r.y + 10, fit_text(t.name, kTlLabelW - 28), "fill=\"#30343c\"");
  if (t.lane == ui::Lane::Memory) return draw_counter(d, t, view, r.y, r.h);
  for (size_t l = 0; l < r.levels.size(); ++l) {
    const auto& level = t.levels[l];
    const double y = r.y + 1 + kTlLevelH * static_cast<double>(l);
    for (const auto& b : r.levels[l]) {
      const ui::Slice& s = level[b.first];
      const double w = b.x1 - b.x0, x = kTlLabelW + b.x0;
      if (b.merged()) {
        const ui::Slice& last = level[b.first + b.count - 1];
        d.rect(x, y, w, kTlLevelH - 2, category_fill(s.category),
               std::to_string(b.count) + " events, " + ui::format_duration(static_cast<double>(last.end_ns - s.start_ns)),
               "fill-opacity=\"0.55\"");
        if (w >= 30) d.text(x + 2, y + 9, fit_text(std::to_string(b.count) + " events", w - 4), "fill=\"#1e2026\"");
        continue;
      }
      const std::string& name = tl.strings[s.label];
      d.rect(x, y, w, kTlLevelH - 2, category_fill(s.category),
             name + " (" + ui::category_name(s.category) + "), " + ui::format_duration(static_cast<double>(s.end_ns - s.start_ns)));
      if (w >= 30) d.text(x + 2, y + 9, fit_text(name, w - 4), "fill=\"#101216\"");
    }
  }
  for (const auto& [x, n] : r.marks) {
    d.body << "<path d=\"M" << num(kTlLabelW + x) << ' ' << num(r.y + 1) << " l-4 10 h8 Z\" fill=\"#e04646\"><title>"
           << (n == 1 ? std::string("graph break") : std::to_string(n) + " graph breaks") << "</title></path>\n";
    d.elements += 2;
  }
}

// The time axis: ms ticks over the plot and faint lines down through every lane.
void draw_axis(SvgDoc& d, const ui::TimeView& view, double bottom) {
  const double step = ui::tick_step_ns(view.ns_per_px, 80);
  for (double t = 0; t <= view.end_ns(); t += step) {
    const double x = kTlLabelW + view.x_of(t);
    d.line(x, kTlTitleH + 4, x, bottom, "#e3e6ec");
    if (x + 50 < kTlW) d.text(x + 2, kTlTitleH + 13, ms_label(t / 1e6, step / 1e6) + " ms", "fill=\"#555b66\"");
  }
  d.line(kTlLabelW, kTlTitleH + kTlAxisH - 1, kTlW, kTlTitleH + kTlAxisH - 1, "#9aa0ab");
}

std::string run_title(const storage::RunRecord& r) {
  const auto cut = [](const std::string& t) { return shortened_text(t, kMaxStatsCell); };  // as the report's tables
  std::string s = "run " + std::to_string(r.id) + ": " + cut(r.scenario) + " " + cut(r.policy) + " " + cut(r.mode);
  if (r.fullgraph) s += " fullgraph";
  if (!r.engine.empty()) s += " (" + cut(r.engine) + ")";
  if (!r.label.empty()) s += " \u2014 " + cut(r.label);
  return s;
}

// The lanes `tl` draws in its device groups (host = false) or its host-thread groups, titled as
// the timeline titles them ("compute, transfers in, ..."), in lane order; "" when none.
std::string lanes_drawn(const ui::RunTimeline& tl, bool host) {
  std::vector<bool> seen(static_cast<size_t>(ui::Lane::Stream) + 1, false);
  for (const auto& g : tl.groups) {
    if (g.host != host) continue;
    for (const auto& t : g.tracks) seen[static_cast<size_t>(t.lane)] = true;
    if (!g.residency.empty()) seen[static_cast<size_t>(ui::Lane::Residency)] = true;
  }
  std::string out;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) continue;
    const auto lane = static_cast<ui::Lane>(i);
    const char* name = lane == ui::Lane::Stream      ? "CUDA streams"
                       : lane == ui::Lane::Residency ? "weights per module"
                                                     : ui::lane_name(lane);
    out += (out.empty() ? "" : ", ") + std::string(name);
    if (lane == ui::Lane::GraphBreaks) out += " ▼";
  }
  return out;
}

// "Lane groups per device (…) and per host thread (…): ": what this run's timeline draws.
std::string timeline_caption(const ui::RunTimeline& tl) {
  const std::string dev = lanes_drawn(tl, false), host = lanes_drawn(tl, true);
  std::string out = "Lane groups";
  if (!dev.empty()) out += " per device (" + dev + ")";
  if (!dev.empty() && !host.empty()) out += " and";
  if (!host.empty()) out += " per host thread (" + host + ")";
  if (dev.empty() && host.empty()) out = "No lanes (the run recorded no events)";
  return out + ": ";
}

}  // namespace

std::string timeline_svg(const ui::RunTimeline& tl, int64_t span_ns, size_t max_elements) {
  ui::TimeView view;
  view.width_px = static_cast<float>(kTlPlotW);
  view.start_ns = 0;
  view.ns_per_px = static_cast<double>(std::max<int64_t>({span_ns, tl.duration_ns, 1})) / kTlPlotW;
  // Merge wider and wider until the picture fits its element budget.
  float min_px = 1;
  size_t elements = 0;
  std::vector<TlRow> rows = plan_rows(tl, view, min_px, elements);
  while (elements + 64 > max_elements && min_px < 256) rows = plan_rows(tl, view, min_px *= 2, elements);
  const double bottom = rows.empty() ? kTlTitleH + kTlAxisH : rows.back().y + rows.back().h + kTlGap;
  SvgDoc d;
  d.rect(0, 0, kTlW, kTlTitleH - 2, "#1f3c6e");
  d.text(8, 15, run_title(tl.run), "fill=\"#ffffff\" font-size=\"12\" font-weight=\"bold\"");
  d.text(kTlW - 8, 15,
         ui::format_duration(static_cast<double>(tl.duration_ns)) + " · " + std::to_string(tl.event_count()) +
             " events · narrower than " + ui::format_duration(view.ns_per_px * min_px) + " merged",
         "fill=\"#dfe6f2\" text-anchor=\"end\"");
  draw_axis(d, view, bottom);
  size_t index = 0;
  for (const auto& r : rows) {
    if (r.track) {
      draw_track(d, tl, r, view, index++);
      continue;
    }
    d.rect(0, r.y, kTlW, kTlGroupH - 1, r.group->host ? "#e9e3f1" : r.group->emulated ? "#f1ead8" : "#e2e8f2");
    d.text(6, r.y + 12, r.group->title, "font-weight=\"bold\" fill=\"#22252b\"");
    index = 0;
  }
  return d.finish(kTlW, bottom, run_title(tl.run));
}

std::vector<int64_t> default_timeline_runs(const json& report) {
  const json& runs = report.at("runs");
  if (runs.empty()) return {};
  // The first verdict's two compiled runs (torch engine first): before above after.
  if (report.contains("verdicts") && report["verdicts"].is_array() && !report["verdicts"].empty()) {
    const json& v = report["verdicts"][0];
    if (v["before"]["run"].is_number() && v["after"].is_object() && v["after"]["run"].is_number())
      return {v["before"]["run"].get<int64_t>(), v["after"]["run"].get<int64_t>()};
  }
  const std::string scenario = runs[0].value("scenario", "");
  auto compiled = [&](const json& r) {
    return r.value("scenario", "") == scenario && r.value("mode", "") != "eager" && !r.value("fullgraph", false);
  };
  std::string engine;
  bool found = false;
  for (const auto& r : runs)
    if (compiled(r) && !found) engine = r.value("engine", ""), found = true;
  if (!found) return {runs[0].value("id", int64_t{0})};
  // One per policy: the first completed compiled run, else the first compiled one.
  std::vector<std::string> policies;
  std::vector<int64_t> ids;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& r : runs) {
      if (!compiled(r) || r.value("engine", "") != engine || (pass == 0 && r.value("status", "") != "ok")) continue;
      const std::string p = r.value("policy", "");
      if (std::find(policies.begin(), policies.end(), p) != policies.end()) continue;
      policies.push_back(p);
      ids.push_back(r.value("id", int64_t{0}));
    }
  return ids;
}

std::vector<ReportPicture> report_pictures(const storage::CaptureReader& rd, const json& report, std::vector<int64_t> runs) {
  std::vector<ReportPicture> out;
  if (std::string chart = compare_chart_svg(report); !chart.empty())
    out.push_back({"compare.svg", "decode latency per scenario, mode and policy",
                   "Bars: median over the measured generates; whiskers: min–max. Beside each compiled mode: its speed-up "
                   "against eager under the same policy and the latency table's verdict (faster / slower only when the "
                   "interquartile ranges are apart and every round agrees; else within noise or, under 3 repeats, not "
                   "judged).",
                   std::move(chart)});
  if (runs.empty()) runs = default_timeline_runs(report);
  // Each run once, in the order given: a repeated id was drawn (and its asset written) again.
  std::vector<int64_t> once;
  for (int64_t id : runs)
    if (std::find(once.begin(), once.end(), id) == once.end()) once.push_back(id);
  runs = std::move(once);
  for (int64_t id : runs) {
    const bool known = std::any_of(report.at("runs").begin(), report.at("runs").end(),
                                   [&](const json& r) { return r.value("id", int64_t{-1}) == id; });
    if (!known) throw std::invalid_argument("--timeline-runs: the capture has no run " + std::to_string(id));
  }
  std::vector<ui::RunTimeline> timelines;
  int64_t longest = 1, shortest = std::numeric_limits<int64_t>::max();
  for (int64_t id : runs) {
    timelines.push_back(ui::load_run_timeline(rd, id));
    longest = std::max(longest, timelines.back().duration_ns);
    shortest = std::min(shortest, std::max<int64_t>(1, timelines.back().duration_ns));
  }
  // One time scale while it leaves every run readable (within 4× of each other); else each its own.
  const bool shared = longest <= 4 * shortest;
  for (const auto& tl : timelines)
    out.push_back({"timeline-run-" + std::to_string(tl.run.id) + ".svg", run_title(tl.run),
                   timeline_caption(tl) +
                       std::string(timelines.size() == 1 ? ""
                                   : shared ? "on the same time scale as the other timelines; "
                                            : "on its own time scale (the runs' lengths differ by more than 4×: "
                                              "compare the ms axes); ") +
                       (tl.groups.empty() ? std::string("nothing to draw; ")
                                          : "faded blocks merge events too narrow to draw; hover for names and "
                                            "durations; ") +
                       "open the run in `hookscope view --run " + std::to_string(tl.run.id) + "`.",
                   timeline_svg(tl, shared ? longest : tl.duration_ns)});
  return out;
}

std::string write_picture_assets(const std::vector<ReportPicture>& pictures, const std::string& dir,
                                 const std::string& markdown_path, const std::string& capture_path,
                                 const std::vector<std::filesystem::path>& models) {
  namespace fs = std::filesystem;
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw std::invalid_argument("--assets: " + dir + " exists and is not a folder");
  output::refuse_output_in_model_folder("--assets", dir, models, "a run of " + capture_path + " was made from it");
  for (const auto& p : pictures) {
    const fs::path f = fs::path(dir) / p.file;
    output::refuse_overwriting_input("--assets", f, capture_path, "reported", models, /*folder_made=*/true);
  }
  fs::create_directories(dir);
  const fs::path md_dir = markdown_path.empty() ? fs::path() : fs::path(markdown_path).parent_path();
  const fs::path base = fs::absolute(md_dir.empty() ? fs::path(".") : md_dir);  // "report.md": this folder
  std::string md = pictures.empty() ? "" : "\n## pictures\n";
  for (const auto& p : pictures) {
    const fs::path f = fs::path(dir) / p.file;
    output::write_output_file(f, p.svg);
    // The link's destination percent-encoded (RFC 3986): any folder name stays one path.
    std::string rel;
    for (const unsigned char c : fs::relative(fs::absolute(f), base).generic_string()) {
      if (std::isalnum(c) || (c != 0 && std::strchr("/-._~", c))) {
        rel += static_cast<char>(c);
      } else {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", c);
        rel += hex;
      }
    }
    // The title names the run (scenario, policy, mode): literal text on one line, its brackets
    // escaped (md_text), so the alt text ends where the picture's link begins.
    const std::string title = md_text(p.title);
    md += "\n### " + title + "\n\n![" + title + "](" + rel + ")\n\n" + p.caption + "\n";  // hookscope's own words
  }
  return md;
}

}  // namespace hs::reports
