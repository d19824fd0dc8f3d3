// `hookscope report A.sqlite B.sqlite`: two report JSONs matched cell by cell, with deltas and a
// noise verdict, and their Markdown.
#include "reports/report_diff.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "measurement/verdict.h"
#include "reports/markdown_text.h"
#include "output/labels.h"
#include "output/paths.h"
#include "output/text.h"
#include "reports/report_json.h"
#include "reports/report_html.h"

namespace hs::reports {

using nlohmann::json;

namespace {

/// The latency objects a run may carry: decode per token (what the tables show and judge),
/// the prefill, and a compiled run's interleaved eager decode (what tells whether eager moved).
constexpr const char* kLatencyMetrics[] = {"decode_ms_per_token", "prefill_ms", "eager_decode_ms_per_token"};

/// What the hooks cost, compared per cell beside latency, each read where the report JSON holds
/// it: a run's `stats.totals` (reports/stats.h) for hook and compiler-disabled time and transfers, the
/// run itself for its graph breaks (Dynamo's, or the LibTorch engine's disabled-scope entries).
constexpr const char* kStatsTotals[] = {"hook_busy_ns",     "hook_calls", "disabled_busy_ns",
                                        "disabled_entries", "transfers",  "transfer_bytes"};
constexpr const char* kRunBreaks[] = {"graph_break_count", "disabled_scope_entries"};

std::string fmt(double v, const char* f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_array()) {
    std::vector<std::string> items;
    for (const auto& e : v) items.push_back(text_of(e));
    return output::join(items, ", ");
  }
  return v.dump();
}

/// Distinct non-empty values in the order first seen, shown comma-separated.
struct Distinct {
  std::vector<std::string> values;
  void add(const std::string& s) {
    if (!s.empty() && std::find(values.begin(), values.end(), s) == values.end()) values.push_back(s);
  }
  std::string str() const { return output::join(values, ", "); }
};

/// Settings that differ between any two captures by nature: when and how the capture was run.
bool volatile_setting(std::string leaf) {
  std::transform(leaf.begin(), leaf.end(), leaf.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* s : {"date", "timestamp", "started", "finished", "command", "argv", "cmdline"})
    if (leaf.find(s) != std::string::npos) return true;
  return leaf == "time" || leaf == "out" || leaf == "output";
}

void flatten(const json& obj, const std::string& prefix, json& out) {
  for (const auto& [k, v] : obj.items()) {
    if (volatile_setting(k)) continue;
    if (v.is_object())
      flatten(v, prefix + "." + k, out);
    else
      out[prefix + "." + k] = text_of(v);
  }
}

/// What identifies a cell of the matrix; `occurrence` tells apart runs of the same cell in one
/// file (imports appended), matched in run order.
struct CellKey {
  std::string engine, scenario, policy, mode;
  bool fullgraph = false;
  int occurrence = 0;
  auto operator<=>(const CellKey&) const = default;
};

CellKey key_of(const json& r) {
  return {r.value("engine", ""), r.value("scenario", ""), r.value("policy", ""), r.value("mode", ""),
          r.value("fullgraph", false), 0};
}

/// The run's keys in run order, each with its occurrence among the runs of the same cell.
std::vector<std::pair<CellKey, const json*>> keyed_runs(const json& runs) {
  std::vector<std::pair<CellKey, const json*>> out;
  std::map<CellKey, int> seen;
  for (const auto& r : runs) {
    CellKey k = key_of(r);
    k.occurrence = seen[k]++;
    out.emplace_back(k, &r);
  }
  return out;
}

json cell_json(const CellKey& k) {
  json c{{"engine", k.engine}, {"scenario", k.scenario}, {"policy", k.policy}, {"mode", k.mode}, {"fullgraph", k.fullgraph}};
  if (k.occurrence) c["occurrence"] = k.occurrence;
  return c;
}

/// "ok" / "error" for a run without fullgraph, "works" / "raises" for a fullgraph run,
/// "incomplete" for a run the capture never finished.
std::string outcome_of(const json& r) {
  const std::string st = r.value("status", "");
  if (st == "incomplete") return "incomplete";
  if (st == "ok") return r.value("fullgraph", false) ? "works" : "ok";
  return r.value("fullgraph", false) ? "raises" : "error";
}

json number_or_null(const json& r, const char* k) {
  const auto it = r.find(k);
  return it != r.end() && it->is_number() ? *it : json(nullptr);
}

/// One side of a matched cell: the run, its outcome, its break counts.
json side_of(const json& r) {
  json s{{"run", r.value("id", json(nullptr))},
         {"status", r.value("status", "")},
         {"outcome", outcome_of(r)},
         {"graph_break_count", number_or_null(r, "graph_break_count")},
         {"disabled_scope_entries", number_or_null(r, "disabled_scope_entries")}};
  if (r.contains("error") && r["error"].is_string()) {
    const std::string e = r["error"].get<std::string>();
    s["error"] = e.substr(0, e.find('\n'));
  }
  return s;
}

/// The count the report shows for a side: Dynamo's, else the LibTorch engine's (marked †).
std::string breaks_text(const json& s) {
  if (s["graph_break_count"].is_number()) return std::to_string(s["graph_break_count"].get<int64_t>());
  if (s["disabled_scope_entries"].is_number()) return std::to_string(s["disabled_scope_entries"].get<int64_t>()) + "†";
  return "–";
}

/// A run's `stats.totals` as build_report stored it (null when the run has none).
json totals_of(const json& r) {
  const auto s = r.find("stats");
  if (s == r.end() || !s->is_object()) return nullptr;
  const auto t = s->find("totals");
  return t != s->end() && t->is_object() ? *t : json(nullptr);
}

/// One figure on both sides: {"a", "b", "delta" (B − A), "delta_pct" (null when A is 0)}.
json compare_figure(const json& a, const json& b) {
  json d{{"a", a}, {"b", b}, {"delta", nullptr}, {"delta_pct", nullptr}};
  if (a.is_number() && b.is_number()) {
    if (a.is_number_integer() && b.is_number_integer())
      d["delta"] = b.get<int64_t>() - a.get<int64_t>();
    else
      d["delta"] = b.get<double>() - a.get<double>();
    if (a.get<double>() != 0) d["delta_pct"] = (b.get<double>() - a.get<double>()) / a.get<double>() * 100;
  }
  return d;
}

/// The cell's costs (kStatsTotals, kRunBreaks), each compared; null on a side that lacks it.
json compare_costs(const json& ra, const json& rb) {
  const json ta = totals_of(ra), tb = totals_of(rb);
  json out = json::object();
  for (const char* k : kStatsTotals)
    out[k] = compare_figure(ta.is_object() ? number_or_null(ta, k) : json(), tb.is_object() ? number_or_null(tb, k) : json());
  for (const char* k : kRunBreaks) out[k] = compare_figure(number_or_null(ra, k), number_or_null(rb, k));
  return out;
}

/// B's speed-up over its own eager (the runs' `speedup_vs_eager`: eager ÷ compiled decode per
/// measured round) against A's, by compare_latency's rule with the sense turned round: a higher
/// speed-up is faster.
json compare_speedup(const json& a, const json& b) {
  json v = compare_latency(a, b);
  if (v["verdict"] == "faster")
    v["verdict"] = "slower";
  else if (v["verdict"] == "slower")
    v["verdict"] = "faster";
  return v;
}

json matched_cell(const CellKey& k, const json& ra, const json& rb) {
  json c = cell_json(k);
  c["a"] = side_of(ra);
  c["b"] = side_of(rb);
  c["latency"] = json::object();
  for (const char* m : kLatencyMetrics) {
    const json la = ra.value(m, json()), lb = rb.value(m, json());
    if (la.is_object() || lb.is_object()) c["latency"][m] = compare_latency(la, lb);
  }
  if (k.mode != "eager")
    c["speedup_vs_eager"] = compare_speedup(ra.value("speedup_vs_eager", json()), rb.value("speedup_vs_eager", json()));
  c["costs"] = compare_costs(ra, rb);
  c["breaks_changed"] = breaks_text(c["a"]) != breaks_text(c["b"]);
  c["outcome_changed"] = c["a"]["outcome"] != c["b"]["outcome"];
  return c;
}

json only_cell(const CellKey& k, const json& r) {
  json c = cell_json(k);
  c["run"] = r.value("id", json(nullptr));
  c["outcome"] = outcome_of(r);
  return c;
}

const json& runs_of(const DiffSide& s) {
  if (!s.report.is_object() || !s.report.contains("runs") || !s.report["runs"].is_array())
    throw std::invalid_argument("report diff: the report of '" + s.label + "' has no 'runs'");
  return s.report["runs"];
}

/// Settings whose text differs between the sides (absent on one side: null there).
json settings_differ(const json& a, const json& b) {
  json out = json::array();
  json keys = json::object();
  for (const json* s : {&a, &b})
    if (s->is_object())
      for (const auto& [k, v] : s->items()) keys[k] = true;
  for (const auto& [k, unused] : keys.items()) {
    const json va = a.is_object() ? a.value(k, json()) : json(), vb = b.is_object() ? b.value(k, json()) : json();
    if (va != vb) out.push_back({{"setting", k}, {"a", va}, {"b", vb}});
  }
  return out;
}

/// A matched cell's comparison of its eager measurement: an eager cell's own decode latency, a
/// compiled cell's interleaved eager; nullptr when it has none.
const json* eager_comparison(const json& c) {
  const char* m = c.value("mode", "") == "eager" ? "decode_ms_per_token" : "eager_decode_ms_per_token";
  const auto it = c["latency"].find(m);
  return it != c["latency"].end() && it->is_object() ? &*it : nullptr;
}

bool apart(const json& comparison) {
  const json& v = comparison["verdict"];
  return v == "faster" || v == "slower";
}

/// Per engine and scenario, where an eager measurement moved between the captures beyond its
/// spread (compare_latency's rule: A's and B's spreads apart), the one that moved furthest: of
/// the eager cells first, of the compiled cells' interleaved eager when no eager cell moved.
json eager_moves(const json& cells) {
  std::map<std::pair<std::string, std::string>, json> furthest;
  auto rank = [](bool eager_cell, double factor) { return std::make_pair(eager_cell, std::fabs(std::log(factor))); };
  for (const auto& c : cells) {
    const json* e = eager_comparison(c);
    if (!e || !apart(*e)) continue;
    const double factor = (*e)["ratio"].get<double>();
    const bool eager_cell = c.value("mode", "") == "eager";
    json& f = furthest[{c.value("engine", ""), c.value("scenario", "")}];
    if (f.is_object() &&
        rank(f["measurement"] == "eager run", f["factor"].get<double>()) >= rank(eager_cell, factor))
      continue;
    f = {{"engine", c["engine"]},
         {"scenario", c["scenario"]},
         {"policy", c["policy"]},
         {"mode", c["mode"]},
         {"fullgraph", c["fullgraph"]},
         {"measurement", eager_cell ? "eager run" : "interleaved eager"},
         {"factor", factor},
         {"a_ms_per_token", (*e)["a"]["median"]},
         {"b_ms_per_token", (*e)["b"]["median"]}};
  }
  json out = json::array();
  for (auto& [scope, f] : furthest) out.push_back(std::move(f));
  return out;
}

/// How far eager moved (an entry of eager_moves) as measurement's Drift: the factor (> 1) and
/// one sentence naming it.
measurement::Drift drift_of(const json& move) {
  const double f = move["factor"].get<double>();
  return {std::max(f, 1 / f), "eager decode moved " + fmt(f, "%.2f") + "× between the captures (" +
                                  fmt(move["a_ms_per_token"].get<double>(), "%.2f") + " → " +
                                  fmt(move["b_ms_per_token"].get<double>(), "%.2f") +
                                  " ms/token, beyond its spread): the machine changed"};
}

measurement::Verdict verdict_of(const json& name) {
  using measurement::Verdict;
  for (const Verdict v : {Verdict::Faster, Verdict::Slower, Verdict::WithinNoise})
    if (name == measurement::verdict_name(v)) return v;
  return Verdict::NotJudged;
}

/// A compiled cell where eager moved: B's speed-up over its own eager against A's (compare_speedup),
/// a change standing only when it is larger than how far eager moved (measurement::against_drift).
measurement::Judgement judge_by_speedup(const json& speedups, const json& move) {
  measurement::Judgement j;
  j.verdict = verdict_of(speedups["verdict"]);
  j.speedup = speedups["ratio"].get<double>();
  j.why = "speed-up vs eager " + fmt(speedups["a"]["median"].get<double>(), "%.2f") + "× → " +
          fmt(speedups["b"]["median"].get<double>(), "%.2f") + "× (" + fmt(j.speedup, "%.2f") + "×)";
  return measurement::against_drift(j, drift_of(move), "eager move between the captures");
}

/// Each cell's verdict on its decode time, and why. Where eager did not move: the absolute
/// latency's (why null). Where it moved (the cell's engine and scenario is in `moves`): an eager
/// cell whose latency moved reads "machine drift", a compiled cell is judged by its speed-up over
/// its own file's eager (judge_by_speedup; "not judged" without one on a side).
void judge_cells(json& cells, const json& moves) {
  std::map<std::pair<std::string, std::string>, const json*> moved;
  for (const auto& m : moves) moved[{m.value("engine", ""), m.value("scenario", "")}] = &m;
  for (auto& c : cells) {
    const json lat = c["latency"].value("decode_ms_per_token", json());
    const json absolute = lat.is_object() ? lat["verdict"] : json();
    c["judged_by"] = "absolute";
    c["verdict"] = absolute;
    c["why"] = nullptr;
    const auto m = moved.find({c.value("engine", ""), c.value("scenario", "")});
    if (m == moved.end()) continue;
    if (c.value("mode", "") == "eager") {
      if (lat.is_object() && apart(lat)) {
        c["verdict"] = "machine drift";
        c["why"] = drift_of(*m->second).why;
      }
      continue;
    }
    c["judged_by"] = "speedup_vs_eager";
    const json& speedups = c["speedup_vs_eager"];
    if (speedups["verdict"].is_null()) {
      c["verdict"] = absolute.is_null() ? json() : json("not judged");
      c["why"] = "eager moved and a side has no speed-up vs eager";
      continue;
    }
    const auto j = judge_by_speedup(speedups, *m->second);
    c["verdict"] = measurement::verdict_name(j.verdict);
    c["why"] = j.why;
  }
}

}  // namespace

json capture_settings(const json& report, const storage::CaptureReader& rd) {
  json s = json::object();
  const json model = report.value("model", json::object());
  // A local folder is named by its last component: two checkouts keep the same model apart.
  std::string id = text_of(model.value("id", json("?")));
  if (!id.empty() && (id[0] == '/' || id[0] == '.' || id[0] == '~')) {
    while (id.size() > 1 && id.back() == '/') id.pop_back();
    id = std::filesystem::path(id).lexically_normal().filename().string();
  }
  s["model"] = id;
  s["architecture"] = text_of(model.value("architecture", json()));
  s["dtype"] = text_of(model.value("dtype", json("?")));
  s["params"] = text_of(model.value("params", json()));
  Distinct devices, engines, tokens, repeats;
  for (const auto& d : report.value("devices", json::array()))
    devices.add(text_of(d.value("id", json("?"))) + " (" + d.value("kind", "?") + ")");
  for (const auto& r : report.value("runs", json::array())) {
    engines.add(r.value("engine", ""));
    if (r.value("status", "") != "ok") continue;  // a failed run's token count says nothing
    tokens.add(text_of(r.value("new_tokens", json())));
    if (r.contains("decode_ms_per_token") && r["decode_ms_per_token"].is_object())
      repeats.add(text_of(r["decode_ms_per_token"].value("n", json())));
  }
  s["devices"] = devices.str();
  s["engines"] = engines.str();
  s["new tokens"] = tokens.str();
  s["repeats"] = repeats.str();
  std::map<std::string, Distinct> versions;
  for (const auto& rec : rd.runs())
    if (rec.versions.is_object())
      for (const auto& [k, v] : rec.versions.items())
        versions["versions." + k + " [" + (rec.engine.empty() ? "?" : rec.engine) + "]"].add(text_of(v));
  for (const auto& [k, v] : versions) s[k] = v.str();
  if (report.contains("settings") && report["settings"].is_object()) flatten(report["settings"], "settings", s);
  return s;
}

json compare_latency(const json& a, const json& b) {
  json out{{"a", a.is_object() ? a : json(nullptr)}, {"b", b.is_object() ? b : json(nullptr)}, {"ratio", nullptr},
           {"delta_pct", nullptr}, {"spread", nullptr}, {"verdict", nullptr}};
  auto num = [](const json& o, const char* k) -> std::optional<double> {
    if (!o.is_object() || !o.contains(k) || !o[k].is_number()) return std::nullopt;
    return o[k].get<double>();
  };
  const auto am = num(a, "median"), bm = num(b, "median");
  if (!am || !bm || *am <= 0 || *bm <= 0) return out;
  out["ratio"] = *bm / *am;
  out["delta_pct"] = (*bm - *am) / *am * 100;
  const bool iqr = num(a, "q1") && num(a, "q3") && num(b, "q1") && num(b, "q3");
  out["spread"] = iqr ? "iqr" : "min-max";
  // The rule report and viewer apply to compiled vs eager (measurement/verdict.h), B against A;
  // a side without quartiles spreads over min–max.
  auto sa = measurement::Spread::from_json(a), sb = measurement::Spread::from_json(b);
  if (!iqr)  // compare like with like: both over min–max
    for (auto* s : {&*sa, &*sb}) s->q1 = s->min, s->q3 = s->max;
  out["verdict"] = measurement::verdict_name(measurement::judge(*sb, *sa, {}).verdict);
  return out;
}

json build_report_diff(const DiffSide& a, const DiffSide& b) {
  const auto runs_a = keyed_runs(runs_of(a)), runs_b = keyed_runs(runs_of(b));
  std::map<CellKey, const json*> index_b;
  for (const auto& [k, r] : runs_b) index_b[k] = r;
  json cells = json::array(), only_a = json::array(), only_b = json::array();
  for (const auto& [k, ra] : runs_a) {
    const auto it = index_b.find(k);
    if (it == index_b.end()) {
      only_a.push_back(only_cell(k, *ra));
      continue;
    }
    cells.push_back(matched_cell(k, *ra, *it->second));
    index_b.erase(it);
  }
  const json moves = eager_moves(cells);
  judge_cells(cells, moves);
  json counts{{"matched", cells.size()}, {"faster", 0}, {"slower", 0}, {"within noise", 0}, {"machine drift", 0}};
  for (const auto& c : cells) {
    const json& v = c["verdict"];
    if (v.is_string() && counts.contains(v.get<std::string>()))
      counts[v.get<std::string>()] = counts[v.get<std::string>()].get<int>() + 1;
  }
  for (const auto& [k, rb] : runs_b)
    if (index_b.count(k)) only_b.push_back(only_cell(k, *rb));
  auto side = [](const DiffSide& s) {
    return json{{"label", s.label}, {"file", s.file}, {"runs", s.report["runs"].size()},
                {"model", s.report.contains("model") ? s.report["model"].value("id", json("?")) : json("?")}};
  };
  return {{"schema", 1},         {"kind", "report-diff"},          {"a", side(a)},
          {"b", side(b)},        {"settings_differ", settings_differ(a.settings, b.settings)},
          {"eager_moved", moves}, {"counts", counts},              {"cells", cells},
          {"only_in_a", only_a}, {"only_in_b", only_b}};
}

namespace {

/// A setting's value in a table cell (render_diff_markdown leaves them raw: text_of may dump JSON).
std::string cell_text(const std::string& s) { return s.empty() ? "–" : md_text(s); }

/// "12.3 (11.9–13.0)": median and the spread the verdict used.
std::string latency_text(const json& l, const json& spread) {
  if (!l.is_object() || !l.contains("median")) return "–";
  const bool iqr = spread == "iqr";
  return fmt(l.value("median", 0.0), "%.1f") + " (" + fmt(l.value(iqr ? "q1" : "min", 0.0), "%.1f") + "–" +
         fmt(l.value(iqr ? "q3" : "max", 0.0), "%.1f") + ")";
}

std::string verdict_text(const json& v) {
  if (!v.is_string()) return "–";
  const std::string s = v.get<std::string>();
  if (s == "faster" || s == "slower") return "**" + s + "**";
  if (s == "not judged") return "not judged (< 3 repeats)";
  return s;
}

/// The cell's verdict, saying so when it rests on the speed-up over eager rather than on time.
std::string cell_verdict_text(const json& c) {
  const json& v = c.value("verdict", json());
  if (c.value("judged_by", "") != "speedup_vs_eager") return verdict_text(v);
  const bool side_without = c.value("speedup_vs_eager", json::object()).value("verdict", json()).is_null();
  if (v == "not judged") return side_without ? "not judged (no speed-up vs eager on a side)" : "not judged (< 3 repeats)";
  return v.is_string() ? verdict_text(v) + " (by speed-up vs eager)" : "–";
}

/// "1.05× (1.02–1.08)": a speed-up object's median and interquartile range.
std::string speedup_text(const json& s) {
  if (!s.is_object() || !s.contains("median")) return "–";
  return fmt(s.value("median", 0.0), "%.2f") + "× (" + fmt(s.value("q1", s.value("min", 0.0)), "%.2f") + "–" +
         fmt(s.value("q3", s.value("max", 0.0)), "%.2f") + ")";
}

/// Where eager moved between the captures (diff["eager_moved"]): the note at the top.
void write_eager_moves(std::ostringstream& md, const json& moves, const std::string& ca, const std::string& cb) {
  if (moves.empty()) return;
  md << "> **The machine changed between the captures.** Eager runs nothing the compiler touches, so a change to where "
        "the compiler is disabled leaves its time as it was; it is compared per engine and scenario, and where it moved "
        "beyond its spread the machine's speed moved (or the change altered eager itself: capture both again on a quiet "
        "machine to tell).\n\n";
  for (const auto& m : moves) {
    const std::string source = m.value("policy", "") + " " + m.value("mode", "") +
                               (m.value("fullgraph", false) ? " fullgraph" : "") +
                               (m.value("measurement", "") == "eager run" ? "" : "'s interleaved eager");
    md << "- " << m.value("engine", "") << " " << m.value("scenario", "") << ": eager decode moved "
       << fmt(m.value("factor", 0.0), "%.2f") << "× (" << source << ": " << ca << " "
       << fmt(m.value("a_ms_per_token", 0.0), "%.2f") << " → " << cb << " " << fmt(m.value("b_ms_per_token", 0.0), "%.2f")
       << " ms/token, beyond its spread): the machine changed between the captures; compiled cells are judged by "
          "their ratio to their own file's eager.\n";
  }
  md << "\n";
}

std::string mode_text(const json& c) {
  return c.value("mode", "") + (c.value("fullgraph", false) ? " fullgraph" : "") +
         (c.contains("occurrence") ? " #" + std::to_string(c["occurrence"].get<int>() + 1) : "");
}

void write_settings(std::ostringstream& md, const json& diff, const std::string& la, const std::string& lb) {
  const json& diffs = diff.at("settings_differ");
  if (diffs.empty()) return;
  md << "> **Settings differ between the two captures**: a delta below may come from these, not from the change.\n\n"
     << "| setting | " << la << " | " << lb << " |\n|---|---|---|\n";
  for (const auto& d : diffs)
    md << "| " << d.value("setting", "") << " | " << cell_text(text_of(d["a"])) << " | " << cell_text(text_of(d["b"]))
       << " |\n";
  md << "\n";
}

std::string bytes_text(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  for (; b >= 1024 && i < 4; ++i) b /= 1024;
  return fmt(b, i ? "%.1f" : "%.0f") + " " + unit[i];
}

/// One figure of a cell's `costs` as "A → B (Δ)", or A alone when B is the same; "–" without either.
/// `kind`: 't' a time in ns (shown in ms), 'b' bytes, 'n' a count; `mark` follows each count.
std::string cost_text(const json& d, char kind, const std::string& mark = "") {
  if (!d.is_object()) return "–";
  auto one = [kind, &mark](const json& v) -> std::string {
    if (!v.is_number()) return "–";
    const double x = v.get<double>();
    return kind == 't' ? fmt(x / 1e6, "%.1f") : kind == 'b' ? bytes_text(x) : fmt(x, "%.0f") + mark;
  };
  const json &a = d["a"], &b = d["b"];
  if (a.is_null() && b.is_null()) return "–";
  if (a == b) return one(a);
  std::string t = one(a) + " → " + one(b);
  if (kind == 'n' && d["delta"].is_number()) t += " (" + fmt(d["delta"].get<double>(), "%+.0f") + ")";
  else if (d["delta_pct"].is_number()) t += " (" + fmt(d["delta_pct"].get<double>(), "%+.1f") + "%)";
  return t;
}

/// The graph breaks of a cell's costs: Dynamo's count, else the LibTorch engine's (marked †).
std::string breaks_cost_text(const json& t) {
  const json& dynamo = t["graph_break_count"];
  if (!dynamo["a"].is_null() || !dynamo["b"].is_null()) return cost_text(dynamo, 'n');
  return cost_text(t["disabled_scope_entries"], 'n', "†");
}

/// What the hooks cost in each matched run of the engine (its `costs`), A → B.
void write_engine_costs(std::ostringstream& md, const json& cells, const std::string& engine, const std::string& la,
                        const std::string& lb) {
  bool header = false;
  for (const auto& c : cells) {
    const json& t = c.value("costs", json());
    if (c.value("engine", "") != engine || !t.is_object()) continue;
    bool any = false;
    for (const auto& [k, d] : t.items()) any |= !d["a"].is_null() || !d["b"].is_null();
    if (!any) continue;
    if (!header)
      md << "What the hooks cost, " << la << " → " << lb << " (hook and compiler-disabled time and transfers as each "
            "run's \"where the time goes\" sums them: a libtorch run over all its generates, a torch run over its "
            "profiled one; times are wall-clock and move with the machine; graph breaks per compiled forward, as in "
            "the table above):\n\n"
            "| scenario | policy | mode | hook time, ms | hook calls | compiler-disabled, ms | disabled entries | "
            "graph breaks | transfers | transfer bytes |\n|---|---|---|---|---|---|---|---|---|---|\n";
    header = true;
    md << "| " << c.value("scenario", "") << " | " << c.value("policy", "") << " | " << mode_text(c) << " | "
       << cost_text(t["hook_busy_ns"], 't') << " | " << cost_text(t["hook_calls"], 'n') << " | "
       << cost_text(t["disabled_busy_ns"], 't') << " | " << cost_text(t["disabled_entries"], 'n') << " | "
       << breaks_cost_text(t) << " | " << cost_text(t["transfers"], 'n') << " | " << cost_text(t["transfer_bytes"], 'b')
       << " |\n";
  }
  if (header) md << "\n";
}

/// One matched cell's row of the latency table; `speedups`: with the speed-up over eager of both sides.
void write_cell_row(std::ostringstream& md, const json& c, bool speedups) {
  const json& a = c["a"];
  const json& b = c["b"];
  const json lat = c["latency"].value("decode_ms_per_token", json());
  const bool has = lat.is_object();
  const auto bold = [](const std::string& s, bool changed) { return changed ? "**" + s + "**" : s; };
  md << "| " << c.value("scenario", "") << " | " << c.value("policy", "") << " | " << mode_text(c) << " | "
     << breaks_text(a) << " | " << bold(breaks_text(b), c.value("breaks_changed", false)) << " | "
     << a.value("outcome", "") << " | " << bold(b.value("outcome", ""), c.value("outcome_changed", false)) << " | "
     << (has ? latency_text(lat["a"], lat["spread"]) : "–") << " | " << (has ? latency_text(lat["b"], lat["spread"]) : "–")
     << " | " << (has && lat["ratio"].is_number() ? fmt(lat["ratio"].get<double>(), "%.2f") + "×" : "–") << " | "
     << (has && lat["delta_pct"].is_number() ? fmt(lat["delta_pct"].get<double>(), "%+.1f") + "%" : "–") << " | ";
  if (speedups) {
    const json sv = c.value("speedup_vs_eager", json());
    md << (sv.is_object() ? speedup_text(sv["a"]) : "–") << " | " << (sv.is_object() ? speedup_text(sv["b"]) : "–")
       << " | ";
  }
  md << cell_verdict_text(c) << " |\n";
}

/// The engine's latency table; where its eager moved, with each side's speed-up over its own eager.
void write_engine_cells(std::ostringstream& md, const json& cells, const std::string& engine, const std::string& la,
                        const std::string& lb) {
  const std::string unit = "decode ms/token";
  bool speedups = false;
  for (const auto& c : cells)
    speedups |= c.value("engine", "") == engine && c.value("judged_by", "") == "speedup_vs_eager";
  md << "### " << (engine.empty() ? "runs" : engine + " engine") << "\n\n"
     << "| scenario | policy | mode | breaks " << la << " | breaks " << lb << " | outcome " << la << " | outcome " << lb
     << " | " << unit << " " << la << " | " << unit << " " << lb << " | " << lb << "/" << la << " | Δ | "
     << (speedups ? "vs eager " + la + " | vs eager " + lb + " | " : "") << "verdict |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|" << (speedups ? "---|---|" : "") << "---|\n";
  for (const auto& c : cells)
    if (c.value("engine", "") == engine) write_cell_row(md, c, speedups);
  md << "\n";
  write_engine_costs(md, cells, engine, la, lb);
}

void write_only_in(std::ostringstream& md, const json& only, const std::string& label) {
  if (only.empty()) return;
  md << "### only in " << md_code(label, MdPlace::line) << " (" << only.size() << ")\n\n| engine | scenario | policy | mode | run | outcome |\n"
     << "|---|---|---|---|---|---|\n";
  for (const auto& c : only)
    md << "| " << c.value("engine", "") << " | " << c.value("scenario", "") << " | " << c.value("policy", "") << " | "
       << mode_text(c) << " | " << text_of(c.value("run", json())) << " | " << c.value("outcome", "") << " |\n";
  md << "\n";
}

}  // namespace

std::string render_diff_markdown(const json& original) {
  for (const char* k : {"a", "b", "settings_differ", "cells", "only_in_a", "only_in_b"})
    if (!original.is_object() || !original.contains(k))
      throw std::invalid_argument("report diff: missing field '" + std::string(k) + "'");
  // Labels, names and files kept on their line and in their cell; the settings' values stay
  // raw for cell_text (a value may be JSON, dumped after this).
  json diff = md_safe(original);
  diff["settings_differ"] = original["settings_differ"];
  for (auto& d : diff["settings_differ"])
    if (d.is_object() && d.contains("setting")) d["setting"] = md_safe(d["setting"]);
  const std::string la = diff["a"].value("label", "A"), lb = diff["b"].value("label", "B");
  const std::string ca = md_code(la, MdPlace::line), cb = md_code(lb, MdPlace::line);
  std::ostringstream md;
  md << "## hookscope: before/after, " << ca << " → " << cb << "\n\n"
     << ca << " = " << diff["a"].value("file", "") << " (" << text_of(diff["a"].value("runs", json())) << " runs), "
     << cb << " = " << diff["b"].value("file", "") << " (" << text_of(diff["b"].value("runs", json())) << " runs)\n\n";
  write_settings(md, diff, la, lb);
  write_eager_moves(md, diff.value("eager_moved", json::array()), ca, cb);
  const json& cells = diff["cells"];
  if (cells.empty()) {
    md << "No cell of " << ca << " is in " << cb << ": the two captures ran different matrices.\n\n";
  } else {
    std::vector<std::string> engines;
    bool dagger = false;
    for (const auto& c : cells) {
      if (std::find(engines.begin(), engines.end(), c.value("engine", "")) == engines.end())
        engines.push_back(c.value("engine", ""));
      dagger |= breaks_text(c["a"]).ends_with("†") || breaks_text(c["b"]).ends_with("†");
    }
    for (const auto& e : engines) write_engine_cells(md, cells, e, la, lb);
    md << "Latency: median (spread) over the measured repeats; the spread is min–max, or q1–q3 where both captures "
          "record quartiles. **within noise**: the two spreads overlap, so the difference is no evidence of a change; "
          "faster/slower: " << cb << " against " << ca << " with disjoint spreads; " << lb << "/" << la
       << " < 1 is faster.";
    if (!diff.value("eager_moved", json::array()).empty())
      md << " Where eager moved: an eager cell whose time moved reads **machine drift** (the machine, not the change); "
            "a compiled cell is judged by its speed-up over its own file's eager (vs eager: eager ÷ compiled decode "
            "ms/token per measured round, median (q1–q3)): **faster** when " << cb << "'s compiled gained on its eager "
            "beyond the spread and by a factor larger than eager moved (a machine that moved that far may have slowed "
            "compiled and eager unevenly).";
    md << "\n";
    if (dagger)
      md << "\n† LibTorch engine: compiler-disabled scopes entered inside a captured region of one compiled forward, "
            "not Dynamo's `graph_break_count`.\n";
    md << "\n";
  }
  write_only_in(md, diff["only_in_a"], la);
  write_only_in(md, diff["only_in_b"], lb);
  return md.str();
}

std::string render_diff_html(const json& diff, const std::string& markdown) {
  const json& a = diff.at("a");
  const json& b = diff.at("b");
  const std::string title = "hookscope: before/after, " + a.value("label", "A") + " → " + b.value("label", "B");
  return html_document(title, markdown_to_html(markdown) +
                                  "<footer>Written by <code>hookscope report A B --html</code>. One file: no scripts, "
                                  "nothing fetched.</footer>\n");
}

std::pair<std::string, std::string> diff_labels(const std::string& file_a, const std::string& file_b,
                                                const std::vector<std::string>& given) {
  if (!given.empty()) {
    if (given.size() != 2 || given[0].empty() || given[1].empty() || given[0] == given[1])
      throw std::invalid_argument("--labels: expected two different names, e.g. main,pr");
    for (const auto& l : given) {
      output::refuse_invalid_utf8("--labels", l);
      output::refuse_control_characters("--labels", l);
    }
    return {given[0], given[1]};
  }
  return output::capture_labels(file_a, file_b);
}

DiffSide read_diff_side(const std::string& file, const std::string& label) {
  storage::CaptureReader rd(file);  // names the file when it is missing or not a capture
  DiffSide s{label, file, build_report(rd), json::object(), output::model_folders(rd)};
  if (s.report["runs"].empty()) throw std::invalid_argument(file + ": the capture holds no runs");
  s.settings = capture_settings(s.report, rd);
  return s;
}

}  // namespace hs::reports
