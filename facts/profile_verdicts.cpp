#include "facts/profile_verdicts.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "facts/breaks.h"
#include "importers/dynamo_text.h"
#include "measurement/verdict.h"
#include "storage/capture_settings.h"

namespace hs::facts {

using nlohmann::json;

namespace {

std::string fmt(double v, const char* f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}


// obj[a][b]... when it is a number, else null.
json number_at(const json& obj, std::initializer_list<const char*> path) {
  const json* at = &obj;
  for (const char* k : path) {
    if (!at->is_object() || !at->contains(k)) return nullptr;
    at = &(*at)[k];
  }
  return at->is_number() ? *at : json(nullptr);
}

// The function most of the log's breaks named (the reason's `<function F at 0x…>`), with its gb
// code and records.
json log_break_site(const json& r) {
  if (!r.contains("log_break_reasons") || !r["log_break_reasons"].is_array()) return nullptr;
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  std::vector<std::pair<std::string, std::string>> order;
  for (const json& b : r["log_break_reasons"]) {
    if (!b.is_object() || !b.contains("reason") || !b["reason"].is_string()) continue;
    const std::string f = importers::named_function(b["reason"].get<std::string>());
    if (f.empty()) continue;
    const std::pair key{f, b.contains("gb_code") && b["gb_code"].is_string() ? b["gb_code"].get<std::string>() : ""};
    if (counts.emplace(key, 0).second) order.push_back(key);
    counts[key] += b.contains("count") && b["count"].is_number() ? b["count"].get<int64_t>() : 1;
  }
  int64_t total = 0;  // every record, named function or not
  for (const json& b : r["log_break_reasons"])
    if (b.is_object()) total += b.contains("count") && b["count"].is_number() ? b["count"].get<int64_t>() : 1;
  json best = nullptr;
  for (const auto& key : order)
    if (best.is_null() || counts[key] > best["count"].get<int64_t>())
      best = {{"function", key.first}, {"gb_code", key.second}, {"count", counts[key]}, {"of", total}};
  return best;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

json side(const json& r) {
  const std::string command = program_command(r);
  json s{{"policy", r.value("policy", "")},
         {"run", r.value("id", json(nullptr))},
         {"status", r.value("status", "")},
         {"error", r.contains("error") && r["error"].is_string() ? json(first_line(r["error"].get<std::string>())) : json(nullptr)},
         {"capture_ranges", r.contains("profile") && r["profile"].is_object() && r["profile"].contains("ranges") &&
                                    r["profile"]["ranges"].is_array()
                                ? json(r["profile"]["ranges"].size())
                                : json(nullptr)},
         {"command", command.empty() ? json(nullptr) : json(command)},
         {"exit_status", number_at(r, {"exit_status"})},
         {"breaks", breaks_text(r)},
         {"break_site", log_break_site(r)},
         {"hook_busy_ns", number_at(r, {"stats", "totals", "hook_busy_ns"})},
         {"hook_calls", number_at(r, {"stats", "totals", "hook_calls"})},
         {"hook_compile_ns", number_at(r, {"stats", "totals", "hook_compile_ns"})},
         {"weight_onloads", number_at(r, {"recorded", "weight_onloads"})},
         {"weight_onload_bytes", number_at(r, {"recorded", "weight_onload_bytes"})},
         {"iterations", number_at(r, {"iterations", "count"})},
         {"iteration_source", nullptr},
         {"iteration_ms", number_at(r, {"iterations", "ms", "median"})}};
  for (const char* k : {"log_graphs", "log_graph_break_count", "log_graph_break_records", "log_compiles", "log_recompiles",
                        "log_frames_skipped", "log_recompile_limit_hits"})
    s[k] = number_at(r, {k});
  if (r.contains("iterations") && r["iterations"].is_object() && r["iterations"].contains("source"))
    s["iteration_source"] = r["iterations"]["source"];
  return s;
}

// Iterations per policy below which their times are not judged: the two runs were made one
// after the other, not interleaved (no drift can be told apart), and a program's first calls
// hold Dynamo's compiles.
constexpr size_t kMinIterations = 5;

// before ÷ after median iteration, judged on the two runs' spreads.
json iteration_speedup(const json& before_run, const json& after_run, const std::string& before, const std::string& after) {
  auto spread = [](const json& r) -> std::optional<measurement::Spread> {
    if (!r.contains("iterations") || !r["iterations"].is_object() || !r["iterations"]["ms"].is_object()) return std::nullopt;
    return measurement::Spread::from_json(r["iterations"]["ms"]);
  };
  const auto b = spread(before_run), a = spread(after_run);
  if (!a || !b || a->median <= 0 || b->median <= 0) return nullptr;
  measurement::Judgement j = measurement::judge(*a, *b, {});
  if (const size_t n = std::min(a->n, b->n); n < kMinIterations) {
    j.verdict = measurement::Verdict::NotJudged;
    j.why = std::to_string(n) + " iteration" + (n == 1 ? "" : "s") + " " +
            (a->n == b->n ? std::string("under each policy") : "under " + (a->n < b->n ? after : before)) + ": at least " + std::to_string(kMinIterations) +
            " per policy are needed to judge two runs made one after the other";
  } else
    j.why = std::string("interquartile ranges ") + (j.verdict == measurement::Verdict::WithinNoise ? "overlap" : "apart") +
            ": " + before + " " + fmt(b->q1, "%.2f") + "–" + fmt(b->q3, "%.2f") + ", " + after + " " +
            fmt(a->q1, "%.2f") + "–" + fmt(a->q3, "%.2f") + " ms";
  return {{"ratio", j.speedup}, {"verdict", measurement::verdict_name(j.verdict)}, {"why", j.why}};
}

json against_hypothesis(const json& v) {
  json out = json::array();
  const json &b = v["before"], &a = v["after"];
  if (b["log_graph_break_count"].is_number() && a["log_graph_break_count"].is_number() &&
      a["log_graph_break_count"].get<int64_t>() > b["log_graph_break_count"].get<int64_t>())
    out.push_back({{"kind", "more_breaks"}, {"before", b["log_graph_break_count"]}, {"after", a["log_graph_break_count"]}});
  if (v["iteration_speedup"].is_object() && v["iteration_speedup"]["verdict"] == "slower")
    out.push_back({{"kind", "slower_iterations"}});
  return out;
}

std::vector<int64_t> runs_of(std::initializer_list<const json*> sides) {
  std::vector<int64_t> out;
  for (const json* s : sides)
    if (s->is_object() && (*s)["run"].is_number()) out.push_back((*s)["run"].get<int64_t>());
  return out;
}

std::string num(const json& v) { return v.is_number() ? std::to_string(v.get<int64_t>()) : "–"; }

// "1 call", "30 calls".
std::string counted(const json& v, const std::string& what) {
  return num(v) + " " + what + (v.is_number() && v.get<int64_t>() == 1 ? "" : "s");
}

}  // namespace

std::string bytes_text(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int i = 0;
  while (v >= 1024 && i < 4) v /= 1024, ++i;
  return fmt(v, i ? "%.1f" : "%.0f") + " " + units[i];
}

std::string program_command(const json& run) {
  if (!run.is_object() || !run.contains("command") || !run["command"].is_array()) return "";
  std::vector<std::string> words;
  for (const json& w : run["command"])
    if (w.is_string()) words.push_back(w.get<std::string>());
  return storage::shell_command(words);
}

json profile_verdicts(const json& report) {
  json out = json::array();
  if (!report.contains("runs") || !report["runs"].is_array()) return out;
  std::vector<std::string> programs;
  for (const auto& r : report["runs"])
    if (r.value("engine", "") == "profile" &&
        std::find(programs.begin(), programs.end(), r.value("scenario", "")) == programs.end())
      programs.push_back(r.value("scenario", ""));
  for (const auto& program : programs) {
    std::vector<const json*> runs;  // the first run of each policy, in capture order
    for (const auto& r : report["runs"])
      if (r.value("engine", "") == "profile" && r.value("scenario", "") == program &&
          std::none_of(runs.begin(), runs.end(), [&](const json* x) { return (*x)["policy"] == r["policy"]; }))
        runs.push_back(&r);
    const json* before = runs[0];
    const json* after = runs.size() > 1 ? runs[1] : nullptr;
    json v{{"engine", "profile"}, {"scenario", program}, {"scenario_note", nullptr}, {"mode", ""},
           {"before", side(*before)}, {"after", after ? side(*after) : json(nullptr)}, {"policy_speedup", nullptr},
           {"iteration_speedup", after ? iteration_speedup(*before, *after, before->value("policy", ""),
                                                           after->value("policy", ""))
                                       : json(nullptr)}};
    v["against_hypothesis"] = after ? against_hypothesis(v) : json::array();
    // The program's other runs (an --append of the same policies): not compared, said so.
    v["left_out"] = json::array();
    for (const auto& r : report["runs"])
      if (r.value("engine", "") == "profile" && r.value("scenario", "") == program &&
          std::none_of(runs.begin(), runs.end(), [&](const json* x) { return x == &r; }))
        v["left_out"].push_back({{"run", r.value("id", json(nullptr))}, {"policy", r.value("policy", "")}});
    // --label NAME: RUNS.label is "NAME · POLICY" (the script's name when none was given).
    v["label"] = nullptr;
    const std::string suffix = " · " + before->value("policy", "");
    if (const std::string label = before->value("label", "");
        label.size() > suffix.size() && label.compare(label.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        label.substr(0, label.size() - suffix.size()) != program)
      v["label"] = label.substr(0, label.size() - suffix.size());
    out.push_back(v);
  }
  return out;
}

namespace {

// "graphs − 1 in the log: 2 under `whole-hook` → 1 under `offload-only` (graphs 3 → 2, graph-break
// records 14 → 14)".
std::optional<Claim> log_claim(const json& b, const json& a, const Markup& m) {
  if (!b["log_graph_break_count"].is_number()) return std::nullopt;
  if (!a.is_object() || !a["log_graph_break_count"].is_number())
    return Claim{m.code(b["policy"].get<std::string>()) + ": graphs − 1 in the log " + num(b["log_graph_break_count"]) +
                     " (" + num(b["log_graphs"]) + " graphs, " + num(b["log_graph_break_records"]) +
                     " graph-break records in " + num(b["log_compiles"]) + " compiles)",
                 runs_of({&b})};
  return Claim{"graphs − 1 in the log: " + num(b["log_graph_break_count"]) + " under " + m.code(b["policy"].get<std::string>()) +
                   " → " + num(a["log_graph_break_count"]) + " under " + m.code(a["policy"].get<std::string>()) +
                   " (graphs " + num(b["log_graphs"]) + " → " + num(a["log_graphs"]) + ", graph-break records " +
                   num(b["log_graph_break_records"]) + " → " + num(a["log_graph_break_records"]) + ")",
               runs_of({&b, &a})};
}

std::optional<Claim> iterations_claim(const json& v, const Markup& m) {
  const json &b = v["before"], &a = v["after"], &x = v["iteration_speedup"];
  if (!x.is_object()) return std::nullopt;
  const std::string bp = m.code(b["policy"].get<std::string>()), ap = m.code(a["policy"].get<std::string>());
  const std::string what = b["iteration_source"].is_string() ? b["iteration_source"].get<std::string>() + "s" : "iterations";
  const std::string ms = "median " + fmt(b["iteration_ms"].get<double>(), "%.2f") + " → " +
                         fmt(a["iteration_ms"].get<double>(), "%.2f") + " ms over " + num(b["iterations"]) + " and " +
                         num(a["iterations"]) + " " + what;
  const double r = x["ratio"].get<double>();
  const std::string verdict = x["verdict"].get<std::string>();
  std::string text = verdict == "faster"   ? ap + "'s iterations are " + fmt(r, "%.2f") + "× faster than " + bp + "'s (" + ms + ")"
                     : verdict == "slower" ? ap + "'s iterations are " + fmt(1 / r, "%.2f") + "× slower than " + bp + "'s (" + ms + ")"
                                           : "iterations under " + bp + " and " + ap + ": " + ms + ", " + fmt(r, "%.2f") +
                                                 "×, " + verdict + (x["why"].get<std::string>().empty() ? "" : " (" + m.text(x["why"].get<std::string>()) + ")");
  return Claim{text, runs_of({&b, &a})};
}

// One policy's run: where its log broke, its recompiles, the hook work recorded.
Claim side_claim(const json& s, const Markup& m) {
  std::string text = m.code(s["policy"].get<std::string>()) + ": ";
  std::vector<std::string> parts;
  if (s["break_site"].is_object()) {
    const json& site = s["break_site"];
    const int64_t count = site["count"].get<int64_t>(), of = site.value("of", count);
    std::string p = std::string(2 * count > of ? "the log's breaks mostly at " : "the log's breaks include ") +
                    m.code(site["function"].get<std::string>());
    const std::string code = site["gb_code"].get<std::string>();
    p += " (" + (code.empty() ? "" : code + ", ") + num(site["count"]) + " of " + std::to_string(of) + " records)";
    parts.push_back(p);
  }
  if (s["log_recompiles"].is_number())
    parts.push_back("in the log " + counted(s["log_recompiles"], "recompile_reasons record") + " and " +
                    counted(s["log_frames_skipped"], "compile") + " skipped or failed" +
                    (s["log_recompile_limit_hits"].is_number() && s["log_recompile_limit_hits"].get<int64_t>() > 0
                         ? " (" + counted(s["log_recompile_limit_hits"], "recompile-limit failure") +
                               ": Dynamo stopped compiling the frame and ran it eagerly)"
                         : std::string()));
  if (s["hook_calls"].is_number() && s["hook_calls"].get<int64_t>() > 0)
    parts.push_back("hook time " + fmt(s["hook_busy_ns"].get<double>() / 1e6, "%.1f") + " ms over " +
                    counted(s["hook_calls"], "call") +
                    (s["hook_compile_ns"].is_number() && s["hook_compile_ns"].get<int64_t>() > 0
                         ? " (besides " + fmt(s["hook_compile_ns"].get<double>() / 1e6, "%.1f") +
                               " ms of Dynamo compiling inside them)"
                         : std::string()));
  else if (s["status"] == "error")
    parts.push_back("the run failed" + (s["error"].is_string() ? ": " + m.text(s["error"].get<std::string>()) : std::string()));
  else if (s["capture_ranges"] == 0)
    parts.push_back("no capture range was recorded (--capture-range markers without hookscope_torch.start(), or a "
                    "--delay past the program's end): the run holds its compile log only");
  else
    parts.push_back("no hook call recorded (a hook Dynamo traces has no range of its own: in a compiled program it is "
                    "left unwrapped, docs/profile.md)");
  if (s["weight_onloads"].is_number() && s["weight_onloads"].get<int64_t>() > 0)
    parts.push_back(counted(s["weight_onloads"], "weight onload") + " (" + bytes_text(s["weight_onload_bytes"].get<int64_t>()) + ")");
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? "; " : "") + parts[i];
  return {text, runs_of({&s})};
}

// "`python script.py` exited with status 7 under `whole-hook` and 7 under `offload-only`".
std::optional<Claim> program_claim(const json& b, const json& a, const Markup& m) {
  if (!b["command"].is_string()) return std::nullopt;
  // "exited with status 7", "was stopped before its end (the run is incomplete)"; `again`: the
  // second side's shorter form after the first's ("7 under ...").
  auto ended = [&](const json& s, bool again) {
    if (s["status"] == "incomplete") return std::string("was stopped before its end (the run is incomplete)");
    const std::string code = s["exit_status"].is_number() ? std::to_string(s["exit_status"].get<int64_t>()) : "–";
    return again ? code : "exited with status " + code;
  };
  const bool same_form = a.is_object() && (a["status"] == "incomplete") == (b["status"] == "incomplete");
  std::string text = m.code(b["command"].get<std::string>()) + " " + ended(b, false) + " under " +
                     m.code(b["policy"].get<std::string>());
  if (a.is_object())
    text += " and " + (same_form && a["status"] != "incomplete" ? ended(a, true) : ended(a, false)) + " under " +
            m.code(a["policy"].get<std::string>());
  return Claim{text, a.is_object() ? runs_of({&b, &a}) : runs_of({&b})};
}

}  // namespace

std::vector<Claim> profile_diagnosis(const json& v, const Markup& m) {
  std::vector<Claim> claims;
  const json &b = v["before"], &a = v["after"];
  if (auto c = log_claim(b, a, m)) claims.push_back(*c);
  if (auto c = iterations_claim(v, m)) claims.push_back(*c);
  claims.push_back(side_claim(b, m));
  if (a.is_object()) claims.push_back(side_claim(a, m));
  // Hook time over different calls: under offload-only a hook Dynamo traces into the graph gets
  // no range, so the two times are not of the same work.
  if (a.is_object() && b["hook_calls"].is_number() && a["hook_calls"].is_number() && b["hook_calls"].get<int64_t>() > 0 &&
      a["hook_calls"].get<int64_t>() > 0 && a["hook_calls"] != b["hook_calls"])
    claims.push_back({"the policies recorded different hook calls, " + num(b["hook_calls"]) + " under " +
                          m.code(b["policy"].get<std::string>()) + " and " + num(a["hook_calls"]) + " under " +
                          m.code(a["policy"].get<std::string>()) +
                          ": a hook Dynamo traces has no range of its own (in a compiled program it is left "
                          "unwrapped), so the hook times are not over the same calls",
                      runs_of({&b, &a})});
  // No iterations where the run recorded: say why and how to get them (facts/iterations.h rule 1).
  std::vector<const json*> none;
  for (const json* s : {&b, &a})
    if (s->is_object() && (*s)["iterations"] == 0 && (*s)["status"] != "error" && (*s)["capture_ranges"] != 0)
      none.push_back(s);
  if (!none.empty()) {
    std::string who = m.code((*none[0])["policy"].get<std::string>());
    if (none.size() > 1) who = "under " + who + " and " + m.code((*none[1])["policy"].get<std::string>());
    else who = "under " + who;
    claims.push_back({"no iterations " + who +
                          ": no call of a model hookscope saw held hook work at the top level (a compiled model whose "
                          "hooks Dynamo traced into its graph, or hooks on submodules only); wrap each iteration in " +
                          m.code("torch.profiler.record_function(f\"ProfilerStep#{i}\")") +
                          ", which hookscope takes as an iteration",
                      none.size() > 1 ? runs_of({none[0], none[1]}) : runs_of({none[0]})});
  }
  if (auto c = program_claim(b, a, m)) claims.push_back(*c);
  if (v.contains("left_out") && v["left_out"].is_array() && !v["left_out"].empty()) {
    std::string runs;
    std::vector<int64_t> ids;
    for (const json& o : v["left_out"]) {
      runs += (runs.empty() ? "" : ", ") + num(o["run"]) + " (" + m.code(o.value("policy", "")) + ")";
      if (o["run"].is_number()) ids.push_back(o["run"].get<int64_t>());
    }
    claims.push_back({(v["left_out"].size() == 1 ? "run " : "runs ") + runs + (v["left_out"].size() == 1 ? " is" : " are") +
                          " not compared: the block compares the first run of each policy",
                      ids});
  }
  if (!a.is_object()) {
    const std::string policy = b["policy"].get<std::string>();
    const std::string other = policy == "offload-only" ? "whole-hook" : "offload-only";
    const std::string both = other == "whole-hook" ? other + "," + policy : policy + "," + other;
    claims.push_back({"no " + m.code(other) + " run of this program in the capture: " +
                          m.code("hookscope profile --policies " + both + " -- COMMAND") + " runs the comparison",
                      {}});
  } else if (!v["against_hypothesis"].empty()) {
    const std::string bp = m.code(b["policy"].get<std::string>()), ap = m.code(a["policy"].get<std::string>());
    std::string text = "Against the hypothesis here:";
    const char* sep = " ";
    for (const auto& t : v["against_hypothesis"]) {
      if (t.value("kind", "") == "more_breaks")
        text += sep + ap + " gives more graphs − 1 in the log (" + num(t["after"]) + ") than " + bp + " (" + num(t["before"]) + ")";
      else if (t.value("kind", "") == "slower_iterations")
        text += sep + ap + "'s iterations are slower than " + bp + "'s";
      sep = "; ";
    }
    claims.push_back({text, runs_of({&b, &a})});
  }
  return claims;
}

}  // namespace hs::facts
