#include "facts/verdicts.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "facts/breaks.h"
#include "facts/profile_verdicts.h"
#include "measurement/verdict.h"

namespace hs::facts {

using nlohmann::json;

namespace {

std::string fmt(double v, const char* f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

json number_or_null(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? *it : json(nullptr);
}

std::optional<measurement::Spread> spread_of(const json& r, const char* key) {
  if (r.value("status", "") != "ok" || !r.contains(key)) return std::nullopt;
  return measurement::Spread::from_json(r[key]);
}

json median_or_null(const json& r, const char* key) {
  const auto s = spread_of(r, key);
  return s ? json(s->median) : json(nullptr);
}

const json* find_run(const json& runs, const std::string& engine, const std::string& sc, const std::string& pol,
                     const std::string& mode, bool fullgraph) {
  for (const auto& r : runs)
    if (r.value("engine", "") == engine && r.value("scenario", "") == sc && r.value("policy", "") == pol &&
        r.value("mode", "") == mode && r.value("fullgraph", false) == fullgraph)
      return &r;
  return nullptr;
}

// The function a refused fullgraph run stopped at: the LibTorch engine's first cut, else the
// "<function F at 0x…>" Dynamo's message names.
json fullgraph_at(const json& r) {
  if (r.contains("break_reasons") && r["break_reasons"].is_array() && !r["break_reasons"].empty()) {
    const json& b = r["break_reasons"][0];
    if (b.is_object() && !b.contains("gb_code") && b.contains("function") && b["function"].is_string())
      return b["function"];
  }
  const std::string e = r.contains("error") && r["error"].is_string() ? r["error"].get<std::string>() : "";
  const size_t f = e.find("<function ");
  if (f == std::string::npos) return nullptr;
  const size_t start = f + 10, stop = e.find_first_of(" >", start);
  return e.substr(start, stop - start);
}

json side(const json& runs, const json& r, const std::string& engine, const std::string& sc, const std::string& mode) {
  const std::string pol = r.value("policy", "");
  json s{{"policy", pol},
         {"run", r.value("id", json(nullptr))},
         {"status", r.value("status", "")},
         {"decode_ms_per_token", median_or_null(r, "decode_ms_per_token")},
         {"eager_decode_ms_per_token", median_or_null(r, "eager_decode_ms_per_token")},
         {"vs_eager", nullptr},
         {"verdict", nullptr},
         {"breaks", breaks_text(r)},
         {"fullgraph", nullptr},
         {"fullgraph_run", nullptr},
         {"fullgraph_at", nullptr},
         {"break_site", nullptr}};
  for (const char* k : {"graph_break_count", "disabled_scope_entries", "frames_skipped", "recompiles",
                        "guard_recompiles", "recompile_limit_hits", "hooked_modules"})
    s[k] = number_or_null(r, k);
  if (r.contains("speedup") && r["speedup"].is_object()) {
    s["vs_eager"] = r["speedup"].value("vs_eager", json(nullptr));
    s["verdict"] = r["speedup"].value("verdict", json(nullptr));
  }
  if (const auto site = main_break_site(r))
    s["break_site"] = {{"function", site->function}, {"gb_code", site->gb_code}, {"count", site->count}};
  if (const json* fg = find_run(runs, engine, sc, pol, mode, true); fg && fg->value("status", "") != "incomplete") {
    s["fullgraph_run"] = fg->value("id", json(nullptr));
    s["fullgraph"] = fg->value("status", "") == "ok" ? "works" : "raises";
    if (s["fullgraph"] == "raises") s["fullgraph_at"] = fullgraph_at(*fg);
  }
  return s;
}

// The headline: before ÷ after compiled decode, judged on their spreads. When the two cells'
// eager decode drifted apart beyond their spread, the machine changed between them and absolute
// times mislead: each compiled run is then judged against its own eager (the per-round
// speed-ups, speedup_vs_eager), as `report A B` does across captures.
json policy_speedup(const json& before_run, const json& after_run, const std::string& before, const std::string& after) {
  const auto b = spread_of(before_run, "decode_ms_per_token"), a = spread_of(after_run, "decode_ms_per_token");
  if (!a || !b || a->median <= 0 || b->median <= 0) return nullptr;
  measurement::Judgement j = measurement::judge(*a, *b, {});
  // judge() names its sides eager and compiled: here they are the two policies' compiled runs.
  if (j.verdict != measurement::Verdict::NotJudged)
    j.why = std::string("interquartile ranges ") + (j.verdict == measurement::Verdict::WithinNoise ? "overlap" : "apart") +
            " (" + before + " " + fmt(b->q1, "%.2f") + "–" + fmt(b->q3, "%.2f") + ", " + after + " " +
            fmt(a->q1, "%.2f") + "–" + fmt(a->q3, "%.2f") + " ms/token)";
  json out{{"ratio", j.speedup}, {"judged_by", "absolute"}, {"normalized_ratio", nullptr}};
  const auto eb = spread_of(before_run, "eager_decode_ms_per_token"), ea = spread_of(after_run, "eager_decode_ms_per_token");
  const auto d = eb && ea ? measurement::drift(*eb, before + " eager", *ea, after + " eager") : std::nullopt;
  if (d && j.verdict != measurement::Verdict::NotJudged) {
    const auto sb = spread_of(before_run, "speedup_vs_eager"), sa = spread_of(after_run, "speedup_vs_eager");
    if (sb && sa && sb->median > 0) {
      // judge(compiled, eager) decides "compiled below eager": before's speed-up below after's.
      // As everywhere, the decision stands only beyond how far eager moved (against_drift).
      measurement::Judgement n = measurement::judge(*sb, *sa, {});
      n.why = "against its own eager " + after + " compiled is " + fmt(sa->median, "%.2f") + "× and " + before +
              " compiled " + fmt(sb->median, "%.2f") + "× (eager ÷ compiled per round), interquartile ranges " +
              (n.verdict == measurement::Verdict::WithinNoise ? "overlapping"
               : n.verdict == measurement::Verdict::NotJudged ? "unknown (too few rounds)"
                                                              : "apart");
      const std::string relative = n.why;
      n = measurement::against_drift(n, *d, "eager drift between the two cells");
      j.verdict = n.verdict;
      j.why = n.why.find(relative) == std::string::npos ? relative + "; " + n.why : n.why;
      out["judged_by"] = "speedup_vs_eager";
      out["normalized_ratio"] = n.speedup;
    } else {
      j.verdict = measurement::Verdict::WithinNoise;
      j.why = d->why + "; without per-round speed-ups the policies' compiled decode cannot be told from that drift";
    }
  }
  // Too few rounds to judge drift, but eager plainly moved between the two cells: said, since
  // the raw ratio then reflects the machine as much as the policies.
  if (!d && eb && ea && eb->median > 0 && ea->median > 0) {
    const double moved = ea->median / eb->median;
    if (moved > 1.5 || moved < 1 / 1.5)
      j.why += (j.why.empty() ? "" : "; ") + std::string("eager itself moved ") +
               fmt(moved >= 1 ? moved : 1 / moved, "%.1f") + "× between the two cells (" + before + " " +
               fmt(eb->median, "%.2f") + ", " + after + " " + fmt(ea->median, "%.2f") +
               " ms/token): the raw ratio reflects the machine as much as the policies";
  }
  out["verdict"] = measurement::verdict_name(j.verdict);
  out["why"] = j.why;
  return out;
}

int64_t breaks_of(const json& s) {
  for (const char* k : {"graph_break_count", "disabled_scope_entries"})
    if (s[k].is_number()) return s[k].get<int64_t>();
  return -1;
}

// What went against "after has fewer breaks, compiles faster and works with fullgraph": kinds
// "more_breaks" {before, after}, "slower_compiled", "fullgraph_regressed".
json against_hypothesis(const json& v) {
  json out = json::array();
  const json &b = v["before"], &a = v["after"];
  const int64_t nb = breaks_of(b), na = breaks_of(a);
  if (nb >= 0 && na > nb) out.push_back({{"kind", "more_breaks"}, {"before", nb}, {"after", na}});
  if (v["policy_speedup"].is_object() && v["policy_speedup"]["verdict"] == "slower")
    out.push_back({{"kind", "slower_compiled"}});
  if (a["fullgraph"] == "raises" && b["fullgraph"] == "works") out.push_back({{"kind", "fullgraph_regressed"}});
  return out;
}

}  // namespace

json scenario_verdicts(const json& report) {
  json out = json::array();
  if (!report.contains("runs") || !report["runs"].is_array()) return out;
  const json& runs = report["runs"];
  std::vector<std::string> engines, scenarios, policies;
  auto add = [](std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
  };
  for (const char* e : {"torch", "libtorch"}) add(engines, e);
  for (const auto& r : runs) {
    add(engines, r.value("engine", ""));
    add(scenarios, r.value("scenario", ""));
  }
  for (const auto& engine : engines)
    for (const auto& sc : scenarios) {
      if (engine == "profile") continue;  // profile_verdicts: no generate to time
      policies.clear();
      std::string mode;
      for (const auto& r : runs)
        if (r.value("engine", "") == engine && r.value("scenario", "") == sc && !r.value("fullgraph", false)) {
          add(policies, r.value("policy", ""));
          const std::string m = r.value("mode", "");
          if (m != "eager" && (mode.empty() || m == "default")) mode = m;
        }
      if (policies.empty() || mode.empty()) continue;
      const json* before = find_run(runs, engine, sc, policies[0], mode, false);
      const json* after = policies.size() > 1 ? find_run(runs, engine, sc, policies[1], mode, false) : nullptr;
      if (!before || (policies.size() > 1 && !after)) continue;
      // How the scenario differs from its name on this machine (the torch engine's "sharded"
      // without accelerators keeps every block on the cpu), as the engine noted it.
      const json note = before->contains("scenario_note") && (*before)["scenario_note"].is_string()
                            ? (*before)["scenario_note"]
                            : json(nullptr);
      // One policy captured: its block says what it did and that the comparison needs the other.
      json v{{"engine", engine}, {"scenario", sc}, {"scenario_note", note}, {"mode", mode},
             {"before", side(runs, *before, engine, sc, mode)},
             {"after", after ? side(runs, *after, engine, sc, mode) : json(nullptr)},
             {"policy_speedup", after ? policy_speedup(*before, *after, policies[0], policies[1]) : json(nullptr)}};
      v["against_hypothesis"] = after ? against_hypothesis(v) : json::array();
      out.push_back(v);
    }
  for (auto& v : profile_verdicts(report)) out.push_back(std::move(v));
  return out;
}

namespace {

// "1.25× slower than eager", "1.24× faster than eager", "within noise of eager (1.03×)".
std::string against_eager(const json& s) {
  if (!s["vs_eager"].is_number()) return "";
  const double x = s["vs_eager"].get<double>();
  const std::string verdict = s["verdict"].is_string() ? s["verdict"].get<std::string>() : "";
  if (verdict == "slower") return fmt(1 / x, "%.2f") + "× slower than eager";
  if (verdict == "faster") return fmt(x, "%.2f") + "× faster than eager";
  return verdict + " against eager (eager ÷ compiled " + fmt(x, "%.2f") + "×)";
}

// Why a policy's compiled run is what it is: its breaks and what Dynamo gave up on.
std::string breaks_clause(const json& s, const std::string& engine, const Markup& m) {
  const int64_t n = breaks_of(s);
  if (n < 0) return "";
  std::string out;
  if (n == 0) {
    out = engine == "libtorch" ? "one captured region per forward (0 disabled-scope entries†)"
                               : "Dynamo traced the hooks into the compiled graph (0 graph breaks";
    if (engine != "libtorch")
      out += s["hooked_modules"].is_number()
                 ? " across " + std::to_string(s["hooked_modules"].get<int64_t>()) + " hooked modules)"
                 : ")";
  } else {
    out = engine == "libtorch" ? "one forward entered " + std::to_string(n) + " compiler-disabled scopes†"
                               : "Dynamo broke the forward " + std::to_string(n) + " times";
    if (s["break_site"].is_object()) {
      const json& site = s["break_site"];
      out += ", mostly at " + m.code(site["function"].get<std::string>());
      if (!site["gb_code"].get<std::string>().empty()) out += " (" + site["gb_code"].get<std::string>() + ")";
    }
  }
  auto count = [&](const char* k, const std::string& what) {
    if (s[k].is_number() && s[k].get<int64_t>() > 0) out += ", " + what + " " + std::to_string(s[k].get<int64_t>()) + "×";
  };
  count("frames_skipped", "skipped frames");
  count("recompile_limit_hits", "hit recompile_limit");
  count("recompiles", "recompiled");
  count("guard_recompiles", "recompiled†");
  return out;
}

// A capture of one policy: what its compiled run did, and what the comparison needs.
std::vector<Claim> one_policy_diagnosis(const json& v, const Markup& m) {
  std::vector<Claim> claims;
  const json& b = v["before"];
  const std::string engine = v.value("engine", "");
  const std::string policy = b["policy"].get<std::string>();
  const std::vector<int64_t> runs =
      b["run"].is_number() ? std::vector<int64_t>{b["run"].get<int64_t>()} : std::vector<int64_t>{};
  const std::string vs = against_eager(b), why = breaks_clause(b, engine, m);
  if (!vs.empty() || !why.empty())
    claims.push_back({m.code(policy) + " compile" + (vs.empty() ? "" : " is " + vs) + (why.empty() ? "" : ": " + why),
                      runs});
  if (b["fullgraph"].is_string()) {
    std::string t = b["fullgraph"].get<std::string>();
    if (t == "raises" && b["fullgraph_at"].is_string()) t += " at " + m.code(b["fullgraph_at"].get<std::string>());
    std::vector<int64_t> fg;
    if (b["fullgraph_run"].is_number()) fg.push_back(b["fullgraph_run"].get<int64_t>());
    claims.push_back({"fullgraph=True " + t + " under " + m.code(policy), fg});
  }
  const std::string other = policy == "offload-only" ? "whole-hook" : "offload-only";
  claims.push_back({"no " + m.code(other) + " run of this scenario and mode in the capture (not captured, or failed): " +
                        m.code("hookscope capture --policies " +
                                                                          (other == "whole-hook" ? other + "," + policy
                                                                                                 : policy + "," + other)) +
                        " runs the comparison",
                    {}});
  return claims;
}

}  // namespace

std::vector<Claim> diagnosis(const json& v, const Markup& m) {
  if (v.value("engine", "") == "profile") return profile_diagnosis(v, m);
  if (!v["after"].is_object()) return one_policy_diagnosis(v, m);
  std::vector<Claim> claims;
  const json &b = v["before"], &a = v["after"];
  const std::string engine = v.value("engine", "");
  const std::string bp = m.code(b["policy"].get<std::string>()), ap = m.code(a["policy"].get<std::string>());
  auto run = [](const json& s) { return s["run"].is_number() ? std::vector<int64_t>{s["run"].get<int64_t>()} : std::vector<int64_t>{}; };
  if (v["policy_speedup"].is_object()) {
    const json& ps = v["policy_speedup"];
    const double x = ps["ratio"].get<double>();
    const std::string verdict = ps["verdict"].get<std::string>();
    const std::string ms = fmt(b["decode_ms_per_token"].get<double>(), "%.2f") + " → " +
                           fmt(a["decode_ms_per_token"].get<double>(), "%.2f") + " ms/token";
    std::string text;
    if (ps.value("judged_by", "") == "speedup_vs_eager") {
      // The machine moved between the cells: the raw ratio is shown, the decision is relative.
      const double n = ps["normalized_ratio"].get<double>();
      text = ap + " compiled decode against " + bp + " compiled: " + ms + " (" + fmt(x, "%.2f") +
             "×), but eager moved between the two cells; judged against each one's own eager: " +
             (verdict == "faster"   ? fmt(n, "%.2f") + "× faster"
              : verdict == "slower" ? fmt(1 / n, "%.2f") + "× slower"
                                    : verdict + " (" + fmt(n, "%.2f") + "×)") +
             " (" + m.text(ps["why"].get<std::string>()) + ")";
    } else if (verdict == "faster") {
      text = ap + " compiled decode is " + fmt(x, "%.2f") + "× faster than " + bp + " compiled (" + ms + ")";
    } else if (verdict == "slower") {
      text = ap + " compiled decode is " + fmt(1 / x, "%.2f") + "× slower than " + bp + " compiled (" + ms + ")";
    } else {
      text = ap + " compiled decode against " + bp + " compiled: " + ms + ", " + fmt(x, "%.2f") + "×, " + verdict + " (" +
             m.text(ps["why"].get<std::string>()) + ")";
    }
    std::vector<int64_t> runs = run(b);
    for (int64_t r : run(a)) runs.push_back(r);
    claims.push_back({text, runs});
  }
  for (const json* s : {&b, &a}) {
    const std::string vs = against_eager(*s), why = breaks_clause(*s, engine, m);
    if (vs.empty() && why.empty()) continue;
    std::string text = m.code((*s)["policy"].get<std::string>()) + " compile";
    text += vs.empty() ? "" : " is " + vs;
    text += why.empty() ? "" : (vs.empty() ? ": " : ": ") + why;
    claims.push_back({text, run(*s)});
  }
  if (b["fullgraph"].is_string() && a["fullgraph"].is_string()) {
    auto fg = [&](const json& s) {
      std::string t = s["fullgraph"].get<std::string>();
      if (t == "raises" && s["fullgraph_at"].is_string()) t += " at " + m.code(s["fullgraph_at"].get<std::string>());
      return t;
    };
    std::vector<int64_t> runs;
    for (const json* s : {&b, &a})
      if ((*s)["fullgraph_run"].is_number()) runs.push_back((*s)["fullgraph_run"].get<int64_t>());
    claims.push_back({"fullgraph=True " + fg(b) + " under " + bp + " and " + fg(a) + " under " + ap, runs});
  }
  if (!v["against_hypothesis"].empty()) {
    std::string text = "Against the hypothesis here:";
    const char* sep = " ";
    for (const auto& t : v["against_hypothesis"]) {
      const std::string kind = t.value("kind", "");
      if (kind == "more_breaks")
        text += sep + ap + " gives more breaks (" + std::to_string(t["after"].get<int64_t>()) + ") than " + bp + " (" +
                std::to_string(t["before"].get<int64_t>()) + ")";
      else if (kind == "slower_compiled")
        text += sep + ap + "'s compiled decode is slower than " + bp + "'s";
      else if (kind == "fullgraph_regressed")
        text += sep + std::string("fullgraph=True raises under ") + ap + " and works under " + bp;
      sep = "; ";
    }
    std::vector<int64_t> runs = run(b);
    for (int64_t r : run(a)) runs.push_back(r);
    claims.push_back({text, runs});
  }
  return claims;
}

}  // namespace hs::facts
