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

// The eager run of the same engine, scenario and policy.
const json* eager_of(const std::vector<const json*>& runs, const json& r) {
  for (const json* e : runs)
    if (e->value("engine", "") == r.value("engine", "") && e->value("scenario", "") == r.value("scenario", "") &&
        e->value("policy", "") == r.value("policy", "") && e->value("mode", "") == "eager" &&
        e->value("status", "") == "ok")
      return e;
  return nullptr;
}

// The eager figure a run's baseline rests on: its interleaved eager, or the eager cell itself.
std::optional<Spread> eager_side(const json& r) {
  if (r.value("mode", "") == "eager") return spread_at(r, "decode_ms_per_token");
  return spread_at(r, "eager_decode_ms_per_token");
}

// Drift between policies within one engine and scenario: the eager figures of the same mode
// (eager cells, or interleaved eager of the same compiled mode and fullgraph) compared pairwise.
std::map<std::pair<std::string, std::string>, Drift> drifts(const std::vector<const json*>& runs) {
  std::map<std::pair<std::string, std::string>, Drift> out;
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = i + 1; j < runs.size(); ++j) {
      const json &a = *runs[i], &b = *runs[j];
      auto key = [](const json& r) {
        return std::make_tuple(r.value("engine", ""), r.value("scenario", ""), r.value("mode", ""),
                               r.value("fullgraph", false));
      };
      if (key(a) != key(b) || a.value("policy", "") == b.value("policy", "")) continue;
      if (a.value("status", "") != "ok" || b.value("status", "") != "ok") continue;
      const auto ea = eager_side(a), eb = eager_side(b);
      if (!ea || !eb) continue;
      const std::pair<std::string, std::string> scope{a.value("engine", ""), a.value("scenario", "")};
      const std::string what = a.value("mode", "") == "eager" ? "eager" : "interleaved eager (" + a.value("mode", "") + ")";
      auto d = drift(*ea, a.value("policy", "") + " " + what, *eb, b.value("policy", "") + " " + what);
      if (!d) continue;
      const auto it = out.find(scope);
      if (it == out.end() || it->second.ratio < d->ratio) out[scope] = *d;
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
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& r = *runs[i];
    if (r.value("mode", "") == "eager" || r.value("status", "") != "ok") continue;
    const auto compiled = spread_at(r, "decode_ms_per_token");
    if (!compiled) continue;
    std::optional<Spread> eager = spread_at(r, "eager_decode_ms_per_token");
    std::vector<double> pairs;
    if (eager) {
      pairs = ratios(samples_at(r, "eager_decode_ms_per_token"), samples_at(r, "decode_ms_per_token"));
    } else if (const json* e = eager_of(runs, r)) {
      eager = spread_at(*e, "decode_ms_per_token");
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
