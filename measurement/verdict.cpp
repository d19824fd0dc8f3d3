#include "measurement/verdict.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

namespace hs::measurement {

using nlohmann::json;

namespace {

std::string fmt(double v, const char* f = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

bool apart(const Spread& a, const Spread& b) { return a.q3 < b.q1 || b.q3 < a.q1; }

std::string range(const Spread& s) { return fmt(s.q1) + "–" + fmt(s.q3); }

std::optional<Spread> spread_at(const json& r, const char* key) {
  const auto it = r.find(key);
  return it == r.end() ? std::nullopt : Spread::from_json(*it);
}

std::vector<double> samples_at(const json& r, const char* key) {
  std::vector<double> out;
  const auto s = r.find("samples");
  if (s == r.end() || !s->is_object()) return out;
  const auto it = s->find(key);
  if (it == s->end() || !it->is_array()) return out;
  for (const auto& v : *it)
    if (v.is_number()) out.push_back(v.get<double>());
  return out;
}

// The first ok eager run of each engine, scenario and policy (one pass; a run's eager is
// looked up, not searched for).
using EagerKey = std::tuple<std::string, std::string, std::string>;
std::map<EagerKey, const json*> eager_runs(const std::vector<const json*>& runs) {
  std::map<EagerKey, const json*> out;
  for (const json* e : runs)
    if (e->value("mode", "") == "eager" && e->value("status", "") == "ok")
      out.emplace(EagerKey{e->value("engine", ""), e->value("scenario", ""), e->value("policy", "")}, e);
  return out;
}

// The eager figure a run's baseline rests on: its interleaved eager, or the eager cell itself.
std::optional<Spread> eager_side(const json& r) {
  if (r.value("mode", "") == "eager") return spread_at(r, "decode_ms_per_token");
  return spread_at(r, "eager_decode_ms_per_token");
}

// Drift between policies within one engine and scenario: the eager figures of the same mode
// (eager cells, or interleaved eager of the same compiled mode and fullgraph) compared pairwise.
// Per scope the pair with the largest ratio wins, the first one in (i, j) order (i < j, run
// order) on a tie: what a loop over every pair finds, in O(n log n) per policy instead of
// O(n^2). A pair drifts (drift()) when both sides have >= kMinRepeats samples and a positive
// median and their interquartile ranges are apart: a.q3 < b.q1 (a below b) or b.q3 < a.q1. For
// one run b, ratio(a, b) = max(ma, mb) / min(ma, mb) falls and then rises with ma, so its largest
// value over the runs below b (or above b) of another policy is at their smallest or largest
// median: prefix minima / maxima over those runs sorted by q3 (by q1 for "above") answer it, and
// among equal medians the smallest run index, which is the pair that comes first.
std::map<std::pair<std::string, std::string>, Drift> drifts(const std::vector<const json*>& runs) {
  struct Cand {
    size_t index;
    Spread e;
  };
  // key (engine, scenario, mode, fullgraph) -> policy -> the runs that can drift
  using Key = std::tuple<std::string, std::string, std::string, bool>;
  std::map<Key, std::map<std::string, std::vector<Cand>>> groups;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& r = *runs[i];
    if (r.value("status", "") != "ok") continue;
    const auto e = eager_side(r);
    if (!e || e->n < kMinRepeats || e->median <= 0) continue;
    groups[Key{r.value("engine", ""), r.value("scenario", ""), r.value("mode", ""), r.value("fullgraph", false)}]
          [r.value("policy", "")]
              .push_back({i, *e});
  }
  // Prefix extremes over runs sorted by a bound: the smallest / largest median so far, each with
  // the smallest run index among the runs that have it.
  struct Extremes {
    double bound;
    double lo, hi;
    size_t lo_index, hi_index;
  };
  auto build = [](std::vector<const Cand*> cs, bool by_q3) {
    std::sort(cs.begin(), cs.end(), [by_q3](const Cand* x, const Cand* y) {
      return by_q3 ? x->e.q3 < y->e.q3 : x->e.q1 > y->e.q1;  // below: q3 ascending; above: q1 descending
    });
    std::vector<Extremes> out;
    out.reserve(cs.size());
    for (const Cand* c : cs) {
      Extremes x{by_q3 ? c->e.q3 : c->e.q1, c->e.median, c->e.median, c->index, c->index};
      if (!out.empty()) {
        const Extremes& p = out.back();
        if (p.lo < x.lo || (p.lo == x.lo && p.lo_index < x.lo_index)) x.lo = p.lo, x.lo_index = p.lo_index;
        if (p.hi > x.hi || (p.hi == x.hi && p.hi_index < x.hi_index)) x.hi = p.hi, x.hi_index = p.hi_index;
      }
      out.push_back(x);
    }
    return out;
  };
  struct Best {
    double ratio = 0;
    size_t i = 0, j = 0;  // i < j
  };
  std::map<std::pair<std::string, std::string>, Best> best;
  for (const auto& [key, by_policy] : groups) {
    if (by_policy.size() < 2) continue;
    Best& scope_best = best[{std::get<0>(key), std::get<1>(key)}];
    std::map<std::string, std::pair<std::vector<Extremes>, std::vector<Extremes>>> index;  // policy -> (below, above)
    for (const auto& [policy, cs] : by_policy) {
      std::vector<const Cand*> ptrs;
      for (const Cand& c : cs) ptrs.push_back(&c);
      index[policy] = {build(ptrs, true), build(ptrs, false)};
    }
    auto consider = [&](const Cand& b, double median, size_t a_index) {
      const double r = std::max(median, b.e.median) / std::min(median, b.e.median);
      const size_t i = std::min(a_index, b.index), j = std::max(a_index, b.index);
      if (r > scope_best.ratio || (r == scope_best.ratio && scope_best.ratio > 0 &&
                                   std::pair{i, j} < std::pair{scope_best.i, scope_best.j}))
        scope_best = {r, i, j};
    };
    for (const auto& [policy_b, cs] : by_policy)
      for (const Cand& b : cs)
        for (const auto& [policy_a, sides] : index) {
          if (policy_a == policy_b) continue;
          const auto& [below, above] = sides;
          // Runs a with a.q3 < b.q1: a prefix of `below`.
          auto n_below = std::lower_bound(below.begin(), below.end(), b.e.q1,
                                          [](const Extremes& x, double v) { return x.bound < v; }) -
                         below.begin();
          if (n_below > 0) {
            const Extremes& x = below[static_cast<size_t>(n_below - 1)];
            consider(b, x.lo, x.lo_index);
            consider(b, x.hi, x.hi_index);
          }
          // Runs a with a.q1 > b.q3: a prefix of `above`.
          auto n_above = std::lower_bound(above.begin(), above.end(), b.e.q3,
                                          [](const Extremes& x, double v) { return x.bound > v; }) -
                         above.begin();
          if (n_above > 0) {
            const Extremes& x = above[static_cast<size_t>(n_above - 1)];
            consider(b, x.lo, x.lo_index);
            consider(b, x.hi, x.hi_index);
          }
        }
  }
  std::map<std::pair<std::string, std::string>, Drift> out;
  for (const auto& [scope, b] : best) {
    if (b.ratio <= 0) continue;
    const json &a = *runs[b.i], &c = *runs[b.j];
    const std::string what = a.value("mode", "") == "eager" ? "eager" : "interleaved eager (" + a.value("mode", "") + ")";
    if (auto d = drift(*eager_side(a), a.value("policy", "") + " " + what, *eager_side(c), c.value("policy", "") + " " + what))
      out[scope] = *d;
  }
  return out;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Faster: return "faster";
    case Verdict::Slower: return "slower";
    case Verdict::WithinNoise: return "within noise";
    case Verdict::NotJudged: return "not judged";
  }
  return "?";
}

Judgement judge(const Spread& compiled, const Spread& eager, const std::vector<double>& pair_ratios) {
  Judgement j;
  j.speedup = !pair_ratios.empty() ? Spread::of(pair_ratios).median
                                   : (compiled.median > 0 ? eager.median / compiled.median : 0);
  const size_t n = std::min(compiled.n, eager.n);
  if (n < kMinRepeats) {
    j.verdict = Verdict::NotJudged;
    j.why = "n=" + std::to_string(n) + " measured generates: at least " + std::to_string(kMinRepeats) +
            " per side are needed to judge";
    return j;
  }
  if (!apart(compiled, eager)) {
    j.verdict = Verdict::WithinNoise;
    j.why = "interquartile ranges overlap (eager " + range(eager) + ", compiled " + range(compiled) + " ms/token)";
    return j;
  }
  if (pair_ratios.size() >= kMinRepeats) {
    const Spread p = Spread::of(pair_ratios);
    if (p.q1 <= 1.0 && p.q3 >= 1.0) {
      j.verdict = Verdict::WithinNoise;
      j.why = "per-repeat speed-ups " + range(p) + "× straddle 1";
      return j;
    }
  }
  j.verdict = compiled.median < eager.median ? Verdict::Faster : Verdict::Slower;
  j.why = "interquartile ranges apart (eager " + range(eager) + ", compiled " + range(compiled) + " ms/token)";
  return j;
}

std::optional<Drift> drift(const Spread& a, const std::string& label_a, const Spread& b, const std::string& label_b) {
  if (a.n < kMinRepeats || b.n < kMinRepeats || !apart(a, b) || a.median <= 0 || b.median <= 0) return std::nullopt;
  Drift d;
  d.ratio = std::max(a.median, b.median) / std::min(a.median, b.median);
  d.why = label_a + " (" + fmt(a.median) + " ms/token) and " + label_b + " (" + fmt(b.median) +
          " ms/token) measure the same eager model yet differ by " + fmt(d.ratio) +
          "×, beyond their spread: the machine's speed changed during the capture";
  return d;
}

Judgement against_drift(Judgement j, const Drift& d, const std::string& what) {
  if (j.verdict != Verdict::Faster && j.verdict != Verdict::Slower) return j;
  const double effect = j.speedup >= 1 ? j.speedup : (j.speedup > 0 ? 1 / j.speedup : 0);
  if (effect > d.ratio) {
    j.why += "; the " + fmt(effect) + "× effect is larger than the " + fmt(d.ratio) + "× " + what + " (" + d.why + ")";
  } else {
    j.verdict = Verdict::WithinNoise;
    j.why = d.why + "; the " + fmt(effect) + "× effect is not larger than that";
  }
  return j;
}

std::vector<std::optional<Judgement>> judge_runs(const std::vector<const json*>& runs) {
  std::vector<std::optional<Judgement>> out(runs.size());
  const auto drifted = drifts(runs);
  const auto eagers = eager_runs(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& r = *runs[i];
    if (r.value("mode", "") == "eager" || r.value("status", "") != "ok") continue;
    const auto compiled = spread_at(r, "decode_ms_per_token");
    if (!compiled) continue;
    std::optional<Spread> eager = spread_at(r, "eager_decode_ms_per_token");
    std::vector<double> pairs;
    if (eager) {
      pairs = ratios(samples_at(r, "eager_decode_ms_per_token"), samples_at(r, "decode_ms_per_token"));
    } else if (const auto e = eagers.find({r.value("engine", ""), r.value("scenario", ""), r.value("policy", "")});
               e != eagers.end()) {
      eager = spread_at(*e->second, "decode_ms_per_token");
    }
    if (!eager) continue;
    Judgement j = judge(*compiled, *eager, pairs);
    const auto d = drifted.find({r.value("engine", ""), r.value("scenario", "")});
    if (d != drifted.end()) j = against_drift(j, d->second, "eager drift between policies");
    out[i] = j;
  }
  return out;
}

}  // namespace hs::measurement
