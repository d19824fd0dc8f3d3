#include "reports/report.h"
#include "reports/markdown_text.h"
#include "reports/report_stats.h"
#include "facts/breaks.h"
#include "facts/catalogue.h"
#include "facts/profile_verdicts.h"
#include "facts/recording.h"
#include "facts/verdicts.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace hs::reports {

using nlohmann::json;

namespace {

const json& need(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw std::invalid_argument("report: missing field '" + std::string(key) + "' in " + where);
  return j.at(key);
}

std::string fmt(double v, const char* f = "%.1f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string bytes_h(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) {
    b /= 1024;
    ++i;
  }
  return fmt(b, i ? "%.1f" : "%.0f") + " " + u[i];
}

// The run of (scenario, policy, mode, fullgraph), or nullptr.
const json* find_run(const json& runs, const std::string& sc, const std::string& pol, const std::string& mode,
                     bool fullgraph) {
  for (const auto& r : runs)
    if (r.value("scenario", "") == sc && r.value("policy", "") == pol && r.value("mode", "") == mode &&
        r.value("fullgraph", false) == fullgraph)
      return &r;
  return nullptr;
}

// A break reason of Dynamo's (gb code, user frame), not a LibTorch-engine site (function, module).
bool dynamo_reason(const json& b) { return b.contains("gb_code") || !b.contains("function"); }

std::string fullgraph_cell(const json* r) {
  if (!r) return "–";
  if (r->value("status", "") == "incomplete") return "incomplete";
  if (r->value("status", "") == "ok") return "works";
  // Name the compiler-disabled function and the module where the LibTorch engine stopped;
  // for Dynamo, its own message says where (the run's reasons are those of the non-fullgraph
  // explain, not of the refusal).
  if (r->contains("break_reasons") && (*r)["break_reasons"].is_array() && !(*r)["break_reasons"].empty() &&
      !dynamo_reason((*r)["break_reasons"][0])) {
    const auto& b = (*r)["break_reasons"][0];
    const std::string m = b.value("module", "");
    return "raises at " + md_code(b.value("function", "?"), MdPlace::cell) + " (module " +
           md_code(m.empty() ? "<root>" : m, MdPlace::cell) + ")";
  }
  // The message's first line, and the function Dynamo named (first_lines() took both out).
  const std::string e = r->contains("error") && (*r)["error"].is_string() ? (*r)["error"].get<std::string>() : "";
  if (r->contains("error_function") && (*r)["error_function"].is_string())
    return "raises at " + md_code((*r)["error_function"].get<std::string>(), MdPlace::cell) + ": " +
           md_code(e, MdPlace::cell);
  return "raises: " + md_code(md_shortened(e, 90), MdPlace::cell);
}

// A spread field of a run ({median, q1, q3, n, ...}), or nullptr.
const json* spread(const json* r, const char* key) {
  if (!r || r->value("status", "") != "ok") return nullptr;
  const auto it = r->find(key);
  return it != r->end() && it->is_object() && it->contains("median") ? &*it : nullptr;
}

// "12.3 (12.1–12.6)": the median and interquartile range of a spread field; "–" without one.
std::string spread_cell(const json* r, const char* key, const char* f = "%.1f") {
  const json* s = spread(r, key);
  if (!s) return r && r->value("status", "") != "ok" ? r->value("status", "?") : "–";
  return fmt(s->value("median", 0.0), f) + " (" + fmt(s->value("q1", 0.0), f) + "–" + fmt(s->value("q3", 0.0), f) + ")";
}

// A compiled run's speed-up against eager with its verdict: "1.38× faster", "1.04× within
// noise [2]" (footnote 2, collected in `notes`, says why), "1.38× (n=1, not judged)".
std::string speedup_cell(const json* r, std::vector<std::string>& notes) {
  if (!r || !r->contains("speedup") || !(*r)["speedup"].is_object()) return "–";
  const json& s = (*r)["speedup"];
  const std::string verdict = s.value("verdict", "");
  const std::string ratio = fmt(s.value("vs_eager", 0.0), "%.2f") + "×";
  if (verdict == "not judged") {
    const json* d = spread(r, "decode_ms_per_token");
    return ratio + " (n=" + std::to_string(d ? d->value("n", 0) : 0) + ", not judged)";
  }
  const std::string why = s.value("why", "");
  // A decision that stands although eager drifted between policies says by how much.
  if (verdict != "within noise" && why.find("eager drift between policies") == std::string::npos)
    return ratio + " " + verdict;
  notes.push_back(why);
  return ratio + " " + verdict + " [" + std::to_string(notes.size()) + "]";
}

// The speed-up and verdict without a footnote (the side-by-side table).
std::string speedup_short(const json* r) {
  std::vector<std::string> ignored;
  const std::string c = speedup_cell(r, ignored);
  return c.substr(0, c.find(" ["));
}

// A compiled run's breaks, as every view writes them (facts/breaks.h).
std::string breaks_cell(const json* r) { return r ? facts::breaks_text(*r) : "–"; }

// A verdict side's figures as table cells.
std::string side_vs_eager(const json& s) {
  if (!s["vs_eager"].is_number()) return "–";
  return fmt(s["vs_eager"].get<double>(), "%.2f") + "× " + (s["verdict"].is_string() ? s["verdict"].get<std::string>() : "");
}
std::string side_ms(const json& s, const char* key) { return s[key].is_number() ? fmt(s[key].get<double>(), "%.2f") : "–"; }
std::string side_fullgraph(const json& s) {
  if (!s["fullgraph"].is_string()) return "–";
  if (s["fullgraph"] == "works") return "works";
  return s["fullgraph_at"].is_string() ? "raises at " + md_code(s["fullgraph_at"].get<std::string>(), MdPlace::cell) : "raises";
}

// " (runs 8, 12)"; with `links`, each a link to the run's row of the HTML runs table.
std::string runs_ref(const std::vector<int64_t>& runs, bool links) {
  if (runs.empty()) return "";
  std::string s = runs.size() == 1 ? " (run " : " (runs ";
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string id = std::to_string(runs[i]);
    s += (i ? ", " : "") + (links ? "[" + id + "](#run-" + id + ")" : id);
  }
  return s + ")";
}

std::string engine_name(const std::string& e) {
  return e == "torch"      ? "torch engine (real torch.compile)"
         : e == "libtorch" ? "libtorch engine (hookscope's port)"
         : e == "profile"  ? "a profiled script (hookscope profile)"
                           : e;
}

// A profiled program's figure as a verdict cell: a count ("–" without one).
std::string count_cell(const json& v) { return v.is_number() ? std::to_string(v.get<int64_t>()) : "–"; }

// A profiled program's block (facts/profile_verdicts.h): what each policy's run recorded, one
// column per policy, then the diagnosis. Every row is a fact of facts/catalogue.h.
void write_profile_verdict(std::ostringstream& md, const json& v, const facts::Markup& markup, bool links) {
  md << "**" << engine_name("profile") << ", "
     << (v.contains("label") && v["label"].is_string() ? v["label"].get<std::string>() + " (" + v.value("scenario", "") + ")" : v.value("scenario", ""))
     << "**\n\n";
  std::vector<const json*> sides{&v["before"]};
  if (v["after"].is_object()) sides.push_back(&v["after"]);
  auto row = [&](const std::string& label, const std::function<std::string(const json&)>& cell) {
    md << "| " << label << " |";
    for (const json* s : sides) md << " " << cell(*s) << " |";
    md << "\n";
  };
  auto label = [](const char* key) { return std::string(facts::fact(key).label); };
  md << "| |";
  for (size_t i = 0; i < sides.size(); ++i)
    md << " " << md_code(sides[i]->value("policy", ""), MdPlace::cell) << (sides.size() > 1 ? i ? " (after)" : " (before)" : "")
       << " |";
  md << "\n|---|" << (sides.size() > 1 ? "---|---|" : "---|") << "\n";
  row(label("command"), [](const json& s) { return s["command"].is_string() ? md_code(s["command"].get<std::string>(), MdPlace::cell) : "–"; });
  // The status the program exited with (as the runs table shows it), and whether its run is incomplete.
  row(label("exit_status"), [](const json& s) {
    if (s["status"] != "incomplete") return count_cell(s["exit_status"]);
    return s["exit_status"].is_number() ? count_cell(s["exit_status"]) + " (incomplete)" : std::string("incomplete");
  });
  for (const char* k : {"log_graphs", "log_graph_break_count", "log_graph_break_records", "log_recompiles"})
    row(label(k), [&](const json& s) { return count_cell(s[k]); });
  // Only where a policy hit the limit: a frame Dynamo gave up on runs eagerly from then on.
  if (std::any_of(sides.begin(), sides.end(), [](const json* s) {
        return (*s)["log_recompile_limit_hits"].is_number() && (*s)["log_recompile_limit_hits"].get<int64_t>() > 0;
      }))
    row(label("log_recompile_limit_hits"), [](const json& s) { return count_cell(s["log_recompile_limit_hits"]); });
  row(label("iteration_ms") + ", ms (" + label("iterations") + ")", [](const json& s) {
    return s["iteration_ms"].is_number() ? fmt(s["iteration_ms"].get<double>(), "%.2f") + " (" + count_cell(s["iterations"]) + ")"
                                         : "– (" + count_cell(s["iterations"]) + ")";
  });
  row(label("hook_busy_ns") + ", ms (calls)", [](const json& s) {
    if (!s["hook_calls"].is_number() || s["hook_calls"].get<int64_t>() == 0) return std::string("–");
    return fmt(s["hook_busy_ns"].get<double>() / 1e6) + " (" + count_cell(s["hook_calls"]) + ")";
  });
  row(label("weight_onloads") + " (bytes)", [](const json& s) {
    if (s.contains("capture_ranges") && s["capture_ranges"] == 0) return std::string("–");  // nothing recorded: as hook time
    return count_cell(s["weight_onloads"]) +
           (s["weight_onload_bytes"].is_number() ? " (" + bytes_h(s["weight_onload_bytes"].get<double>()) + ")" : "");
  });
  md << "\n";
  for (const auto& c : facts::diagnosis(v, markup)) md << "- " << c.text << runs_ref(c.runs, links) << "\n";
  md << "\n";
}

// The verdict blocks (facts/verdicts.h): per engine and scenario, the two policies' compiled
// decode, their ratio, each against eager, breaks and fullgraph, and the diagnosis with the runs
// it rests on. `verdicts` is md_safe'd: names are Markdown text already.
void write_verdicts(std::ostringstream& md, const json& verdicts, bool links) {
  if (!verdicts.is_array() || verdicts.empty()) return;
  md << "### Verdict\n\n";
  const facts::Markup markup{[](const std::string& s) { return md_code(s, MdPlace::line); },
                             [](const std::string& s) { return s; }};
  for (const auto& v : verdicts) {
    if (v.value("engine", "") == "profile") {
      write_profile_verdict(md, v, markup, links);
      continue;
    }
    const json &b = v["before"], &a = v["after"];
    const bool libtorch = v.value("engine", "") == "libtorch";
    md << "**" << engine_name(v.value("engine", "")) << ", " << v.value("scenario", "") << ", mode " << v.value("mode", "")
       << "**\n\n";
    if (v["scenario_note"].is_string()) md << "> " << v["scenario_note"].get<std::string>() << "\n\n";
    // One column per policy captured (a one-policy capture has no "after").
    std::vector<const json*> sides{&b};
    if (a.is_object()) sides.push_back(&a);
    auto row = [&](std::string_view label, const std::function<std::string(const json&)>& cell) {
      md << "| " << label << " |";
      for (const json* s : sides) md << " " << cell(*s) << " |";
      md << "\n";
    };
    md << "| |";
    for (size_t i = 0; i < sides.size(); ++i)
      md << " " << md_code(sides[i]->value("policy", ""), MdPlace::cell) << (sides.size() > 1 ? i ? " (after)" : " (before)" : "")
         << " |";
    md << "\n|---|" << (sides.size() > 1 ? "---|---|" : "---|") << "\n";
    row(std::string(facts::fact("decode_ms_per_token").label) + ", ms/token", [&](const json& s) { return side_ms(s, "decode_ms_per_token"); });
    row(std::string(facts::fact("eager_decode_ms_per_token").label) + ", ms/token",
        [&](const json& s) { return side_ms(s, "eager_decode_ms_per_token"); });
    row(facts::fact("vs_eager").label, [&](const json& s) { return side_vs_eager(s); });
    row(facts::fact(libtorch ? "disabled_scope_entries" : "graph_break_count").label,
        [&](const json& s) { return s.value("breaks", "–"); });
    row("fullgraph=True", [&](const json& s) { return side_fullgraph(s); });
    md << "\n";
    const auto claims = facts::diagnosis(v, markup);
    for (size_t i = 0; i < claims.size(); ++i) {
      const bool headline = i == 0 && v["policy_speedup"].is_object();
      md << "- " << (headline ? "**" : "") << claims[i].text << (headline ? "**" : "") << runs_ref(claims[i].runs, links) << "\n";
    }
    md << "\n";
  }
  md << "A run's breaks: `hookscope explain FILE --run ID`; every figure is defined under \"figures\" at the end.\n\n";
}

// The figures the report can name for runs of `engines`, each with its one definition
// (facts/catalogue.h).
void write_glossary(std::ostringstream& md, const std::set<std::string>& engines) {
  md << "\n### figures\n\n";
  for (const facts::Fact& f : facts::catalogue())
    if (facts::applies_to(f, engines))
      md << "- **" << f.label << "** (" << f.unit << "; " << f.source << "): " << f.definition << "\n";
}

// What every table of the report reads: the runs, the devices, and the scenarios and modes in
// the order they first appear.
struct Tables {
  const json& runs;     ///< the runs of one engine
  const json& devices;
  std::vector<std::string> scenarios, modes;
  std::vector<std::string> policies;  ///< in capture order: whole-hook, offload-only, accelerate trees
};

// Scenarios, modes and policies of `runs` in the order they first appear.
Tables tables_of(const json& runs, const json& devices) {
  Tables t{runs, devices, {}, {}, {}};
  auto add = [](std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
  };
  for (const auto& r : runs) {
    add(t.scenarios, r.value("scenario", ""));
    add(t.modes, r.value("mode", ""));
    add(t.policies, r.value("policy", ""));
  }
  return t;
}

// " | a | b" header cells, one per policy, with a prefix.
std::string policy_headers(const Tables& t, const std::string& prefix) {
  std::string s;
  for (const auto& p : t.policies) s += " " + prefix + p + " |";
  return s;
}
std::string rule(size_t columns) {
  std::string s = "|";
  for (size_t i = 0; i < columns; ++i) s += "---|";
  return s + "\n";
}

// The setup: model, size, devices (emulated ones marked).
void write_setup(std::ostringstream& md, const json& model, const json& devices) {
  md << "| model | dtype | params | size | devices |\n|---|---|---|---|---|\n";
  std::string devs;
  bool any_emulated = false;
  for (const auto& d : devices) {
    if (!devs.empty()) devs += ", ";
    const std::string kind = d.value("kind", "?");
    any_emulated |= kind == "emulated";
    devs += d["id"].is_number() ? std::to_string(d["id"].get<int64_t>()) : d["id"].get<std::string>();
    devs += " (" + kind + ")";
  }
  const bool sized = model.contains("params") && model["params"].is_number();
  md << "| " << model.value("id", "?") << " | " << model.value("dtype", "?") << " | "
     << (sized ? fmt(model["params"].get<double>() / 1e6, "%.1f") + "M" : std::string("?")) << " | "
     << (sized && model.contains("bytes") && model["bytes"].is_number() ? bytes_h(model["bytes"].get<double>()) : "?")
     << " | " << devs << " |\n\n";
  if (any_emulated)
    md << "> Emulated accelerators are backed by host memory: moves between them are real copies, but CPU "
          "capture does not fuse or speed anything up — latencies show structure and hook cost, not GPU speed.\n\n";
}

// The capture's settings (report["settings"], storage/capture_settings.h): what a reader needs to
// rerun or to judge the numbers.
void write_settings(std::ostringstream& md, const json& s) {
  if (!s.is_object() || s.empty()) return;
  auto str = [&](const char* k) -> std::string {
    const auto it = s.find(k);
    if (it == s.end() || it->is_null()) return "";
    if (it->is_array() && k != std::string("prompt_ids")) {
      std::string list;
      for (const auto& v : *it) list += (list.empty() ? "" : ", ") + (v.is_string() ? v.get<std::string>() : v.dump());
      return list;
    }
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  md << "### settings\n\n";
  if (!str("prompt_ids").empty()) md << "- prompt ids: " << md_code(str("prompt_ids"), MdPlace::line);
  else if (!str("prompt").empty()) md << "- prompt: " << md_code(str("prompt"), MdPlace::line);
  if (!str("max_new_tokens").empty())
    md << "; " << str("max_new_tokens") << " new tokens per greedy generate; " << str("warmup") << " warm-up(s) and "
       << str("repeats") << " measured generate(s) per run\n";
  if (!str("interleaving").empty()) md << "- measurement: " << str("interleaving") << "\n";
  if (!str("engines").empty())
    md << "- engines: " << str("engines") << "; scenarios " << md_code(str("scenarios"), MdPlace::line) << ", policies "
       << md_code(str("policies"), MdPlace::line) << ", modes " << md_code(str("modes"), MdPlace::line) << ", fullgraph " << str("fullgraph") << "; backend " << str("backend")
       << ", " << str("cache_implementation") << " cache, dtype " << str("dtype")
       << (str("threads").empty() ? "" : ", " + str("threads") + " thread(s)") << "\n";
  if (s.contains("versions") && s["versions"].is_object() && !s["versions"].empty()) {
    md << "- versions:";
    bool first = true;
    for (const auto& [k, v] : s["versions"].items()) {
      if (k == "accelerate_file" || k == "device") continue;
      md << (first ? " " : ", ") << k << " " << (v.is_string() ? v.get<std::string>() : v.dump());
      first = false;
    }
    md << "\n";
  }
  if (s.contains("machine") && s["machine"].is_object()) {
    const json& m = s["machine"];
    md << "- machine: " << (m.contains("cpu") && m["cpu"].is_string() ? m["cpu"].get<std::string>() : "?");
    if (m.contains("logical_cpus") && m["logical_cpus"].is_number()) md << ", " << m["logical_cpus"].dump() << " logical CPUs";
    if (m.contains("memory_bytes") && m["memory_bytes"].is_number()) md << ", " << bytes_h(m["memory_bytes"].get<double>());
    if (m.contains("os") && m["os"].is_string()) md << ", " << m["os"].get<std::string>();
    if (!str("accelerators").empty()) md << "; accelerators: " << str("accelerators");
    md << "\n";
  }
  if (!str("date").empty()) md << "- date: " << str("date") << "\n";
  if (!str("command").empty()) md << "- command: " << md_code(str("command"), MdPlace::line) << "\n";
  md << "\n";
}

// fullgraph before/after and the prefill checks, per scenario.
void write_correctness(std::ostringstream& md, const Tables& t) {
  const json& runs = t.runs;
  const std::vector<std::string>& scenarios = t.scenarios;
  const std::vector<std::string>& modes = t.modes;
  md << "### fullgraph and correctness\n\n";
  md << "| scenario |" << policy_headers(t, "fullgraph, ")
     << " prefill argmax = eager | logits bit-identical | params on meta after forward | weights on |\n"
     << rule(t.policies.size() + 5);
  for (const auto& sc : scenarios) {
    std::vector<const json*> fullgraph(t.policies.size(), nullptr);
    for (size_t i = 0; i < t.policies.size(); ++i)
      for (const auto& mode : modes)
        if (!fullgraph[i]) fullgraph[i] = find_run(runs, sc, t.policies[i], mode, true);
    // Correctness columns: every run of the scenario must agree.
    auto all = [&](const char* key) -> std::string {
      bool seen = false, ok = true;
      for (const auto& r : runs)
        if (r.value("scenario", "") == sc && r.contains(key) && !r[key].is_null()) {
          seen = true;
          ok &= r[key].get<bool>();
        }
      return seen ? (ok ? "yes" : "**no**") : "–";
    };
    // Bit-identity, or how far the worst run of the scenario was from the reference (the
    // pipes of |Δ| escaped: the cell is inside a Markdown table).
    auto logits_cell = [&]() -> std::string {
      std::string cell = all("logits_identical");
      if (cell != "**no**") return cell;
      double abs_diff = 0;
      int64_t ulp = 0;
      bool known = false, nan_in_one = false;
      for (const auto& r : runs)
        if (r.value("scenario", "") == sc && r.value("logits_identical", json(nullptr)) == false &&
            r.value("logits_max_ulp", json(nullptr)).is_number()) {
          known = true;
          abs_diff = std::max(abs_diff, r.value("logits_max_abs_diff", 0.0));
          const int64_t u = r["logits_max_ulp"].get<int64_t>();
          nan_in_one |= u < 0;
          ulp = std::max(ulp, u);
        }
      if (!known) return cell;  // a capture from before the diff was recorded
      if (nan_in_one) return "**no** (NaN where the reference has a number)";
      return "**no** (max \\|Δ\\| " + fmt(abs_diff, "%.2g") + ", " + std::to_string(ulp) + " ulp)";
    };
    std::string where;
    for (const auto& r : runs)
      if (r.value("scenario", "") == sc && r.contains("weight_devices")) {
        for (const auto& w : r["weight_devices"]) where += (where.empty() ? "" : ", ") + w.get<std::string>();
        break;
      }
    md << "| " << sc << " |";
    for (const json* r : fullgraph) md << " " << fullgraph_cell(r) << " |";
    md << " " << all("argmax_match") << " | " << logits_cell() << " | " << all("params_on_meta_after") << " | " << where
       << " |\n";
  }
}

// Latency per scenario, mode and policy: prefill, decode per token and tokens/s as median
// (interquartile range), and a compiled run's speed-up against eager with its verdict
// (measurement/verdict.h).
// The run's recording_overhead (facts/recording.h), as every view writes it.
std::string overhead_cell(const json& r) {
  const auto o = facts::recording_overhead(r);
  return o ? facts::recording_overhead_text(*o) : "–";
}

void write_latency(std::ostringstream& md, const Tables& t) {
  md << "\n### latency: median (interquartile range) of the measured generates\n\n"
        "| scenario | mode | policy | n | prefill, ms | decode, ms/token | tokens/s | eager decode, ms/token "
        "(interleaved) | vs eager | " << facts::fact("recording_overhead").label << " |\n"
     << rule(10);
  std::vector<std::string> notes;
  for (const auto& sc : t.scenarios)
    for (const auto& mode : t.modes)
      for (const auto& pol : t.policies) {
        const json* r = find_run(t.runs, sc, pol, mode, false);
        if (!r) continue;
        const json* d = spread(r, "decode_ms_per_token");
        const json* p = d ? d : spread(r, "prefill_ms");
        const bool eager = mode == "eager";
        md << "| " << sc << " | " << mode << " | " << pol << " | " << (p ? std::to_string(p->value("n", 0)) : "–")
           << " | " << spread_cell(r, "prefill_ms") << " | " << spread_cell(r, "decode_ms_per_token", "%.2f") << " | "
           << spread_cell(r, "tokens_per_s") << " | "
           << (eager ? std::string("–") : spread_cell(r, "eager_decode_ms_per_token", "%.2f")) << " | "
           << (eager ? std::string("–") : speedup_cell(r, notes)) << " | " << overhead_cell(*r) << " |\n";
      }
  md << "\nprefill = the generate's first forward (the prompt); decode = (end of the last step − end of the "
        "prefill) / (tokens − 1). A compiled run's speed-up is eager over compiled decode, both measured in "
        "alternation in the same cell after its warm-ups. *faster* / *slower* need at least 3 measured generates "
        "per side, interquartile ranges apart and the per-round speed-ups on one side of 1; otherwise the "
        "comparison reads *within noise* (why below) or *not judged*. When eager itself drifted between the "
        "policies of a scenario beyond its spread, only an effect larger than that drift is decided (the note "
        "below gives both). " << facts::fact("recording_overhead").label << ": " << facts::fact("recording_overhead").definition
     << " (torch engine; – where nothing ran unrecorded).\n";
  for (size_t i = 0; i < notes.size(); ++i) md << "\n[" << i + 1 << "] " << notes[i] << "\n";
}

// Peak resident bytes per device, the largest over each scenario's runs.
void write_peak_memory(std::ostringstream& md, const Tables& t) {
  const json& runs = t.runs;
  const json& devices = t.devices;
  const std::vector<std::string>& scenarios = t.scenarios;
  // Peak resident bytes per device (hooks/memory.h says what is counted), the largest over a
  // scenario's runs: policies and modes move the same weights.
  std::vector<std::string> mem_devices;
  for (const auto& d : devices)
    mem_devices.push_back(d["id"].is_number() ? std::to_string(d["id"].get<int64_t>()) : d["id"].get<std::string>());
  for (const auto& r : runs)
    if (r.contains("peak_memory_bytes") && r["peak_memory_bytes"].is_object())
      for (const auto& [dev, v] : r["peak_memory_bytes"].items())
        if (std::find(mem_devices.begin(), mem_devices.end(), dev) == mem_devices.end()) mem_devices.push_back(dev);
  bool any_peak = false;
  for (const auto& r : runs) any_peak |= r.contains("peak_memory_bytes") && !r["peak_memory_bytes"].empty();
  if (any_peak) {
    md << "\n### peak resident memory per device (weights, buffers and hook-moved activations; max over the "
          "scenario's runs)\n\n| scenario |";
    for (const auto& d : mem_devices) md << " " << d << " |";
    md << "\n|---|";
    for (size_t i = 0; i < mem_devices.size(); ++i) md << "---|";
    md << "\n";
    for (const auto& sc : scenarios) {
      md << "| " << sc << " |";
      for (const auto& d : mem_devices) {
        int64_t peak = -1;
        for (const auto& r : runs)
          if (r.value("scenario", "") == sc && r.contains("peak_memory_bytes") && r["peak_memory_bytes"].is_object() &&
              r["peak_memory_bytes"].contains(d))
            peak = std::max(peak, r["peak_memory_bytes"][d].get<int64_t>());
        md << " " << (peak < 0 ? std::string("–") : bytes_h(static_cast<double>(peak))) << " |";
      }
      md << "\n";
    }
  }
}

// Dynamo's break reasons per compiled run without fullgraph (explain's, one forward), then each
// run's compile-log records by gb code (every compile of the run): two facts, each under its
// own name.
void write_dynamo_reasons(std::ostringstream& md, const json& runs) {
  std::ostringstream rows;
  size_t n = 0, more = 0;
  for (const auto& r : runs)
    if (!r.value("fullgraph", false) && r.contains("break_reasons") && r["break_reasons"].is_array())
      for (const auto& b : r["break_reasons"]) {
        if (++n > 12) {
          ++more;
          continue;
        }
        const auto text = [&](const char* k) { return b.value(k, json()).is_string() ? b[k].get<std::string>() : ""; };
        rows << "| " << r.value("id", json(0)).dump() << " | " << r.value("scenario", "") << " | " << r.value("policy", "")
             << " | " << (text("gb_code").empty() ? "–" : text("gb_code")) << " | "
             << (text("function").empty() ? "–" : md_code(text("function"), MdPlace::cell)) << " | "
             << md_shortened(b.value("reason", ""), 100) << " | "
             << md_code(b.value("user_frame", json()).is_string() ? b["user_frame"].get<std::string>() : "", MdPlace::cell)
             << " | " << b.value("count", int64_t{1}) << " |\n";
      }
  if (n > 0)
    md << "\n### " << facts::fact("break_reasons").label << ", per compiled run\n\n"
       << "| run | scenario | policy | gb code | disabled function | reason | user frame | count |\n"
          "|---|---|---|---|---|---|---|---|\n"
       << rows.str() << (more ? "\n(" + std::to_string(more) + " more: `hookscope explain FILE --run ID`)\n" : "");
  std::ostringstream log;
  for (const auto& r : runs) {
    if (!r.contains("log_break_reasons") || !r["log_break_reasons"].is_array() || r["log_break_reasons"].empty()) continue;
    std::map<std::string, std::pair<int64_t, int64_t>> by_code;  // gb code -> records, frames skipped
    std::vector<std::string> order;
    for (const auto& b : r["log_break_reasons"]) {
      const std::string code = b.value("gb_code", json()).is_string() ? b["gb_code"].get<std::string>() : "–";
      if (!by_code.count(code)) order.push_back(code);
      by_code[code].first += b.value("count", int64_t{0});
      by_code[code].second += b.value("frame_skipped", int64_t{0});
    }
    for (const auto& code : order)
      log << "| " << r.value("id", json(0)).dump() << " | " << r.value("scenario", "") << " | " << r.value("policy", "")
          << " | " << r.value("mode", "") << (r.value("fullgraph", false) ? " fullgraph" : "") << " | " << code << " | "
          << by_code[code].first << " | " << by_code[code].second << " |\n";
  }
  if (!log.str().empty())
    md << "\n### " << facts::fact("log_graph_break_records").label << " (TORCH_TRACE: every compile of the run), by gb code\n\n"
       << "| run | scenario | policy | mode | gb code | records | of them frames skipped |\n|---|---|---|---|---|---|---|\n"
       << log.str();
}

// Graph breaks per compiled forward before/after, and the break sites by disabled function.
// A run's figure is Dynamo's (torch engine), its log's (an import) or the LibTorch engine's.
void write_breaks(std::ostringstream& md, const Tables& t) {
  const json& runs = t.runs;
  const std::vector<std::string>& scenarios = t.scenarios;
  const std::vector<std::string>& modes = t.modes;
  bool dynamo = false, logged = false, any_figure = false;
  for (const auto& r : runs) {
    const std::string source = r.value("breaks_source", "");
    dynamo |= source == "dynamo";
    logged |= source == "log";
    // A report written before breaks_source existed still has its figures.
    any_figure |= source.empty() ? r.contains("disabled_scope_entries") || r.contains("break_reasons") ||
                                       r.contains("graph_break_count")
                                 : source != "none";
  }
  if (!any_figure) {  // e.g. a bare trace import: no figure to tabulate
    md << "\n### graph breaks\n\nNo run recorded a graph-break figure (neither torch._dynamo.explain, a TORCH_TRACE "
          "compile log, nor the LibTorch engine's capture).\n";
    return;
  }
  md << (dynamo   ? "\n### " + std::string(facts::fact("graph_break_count").label) + "\n\n"
         : logged ? "\n### " + std::string(facts::fact("log_graph_break_records").label) +
                        " (each run's compile log, every compile of the run, as tlparse lists them; not one "
                        "forward's graph_break_count)\n\n"
                  : "\n### " + std::string(facts::fact("disabled_scope_entries").label) + " per compiled forward\n\n");
  md << "| scenario | mode |" << policy_headers(t, "") << "\n" << rule(2 + t.policies.size());
  for (const auto& sc : scenarios)
    for (const auto& mode : modes) {
      if (mode == "eager") continue;
      std::vector<const json*> run(t.policies.size());
      bool any = false;
      for (size_t i = 0; i < t.policies.size(); ++i) any |= (run[i] = find_run(runs, sc, t.policies[i], mode, false)) != nullptr;
      if (!any) continue;
      md << "| " << sc << " | " << mode << " |";
      for (const json* r : run) md << " " << breaks_cell(r) << " |";
      md << "\n";
    }
  if (!dynamo && !logged) md << "\n† LibTorch engine: compiler-disabled scopes entered inside a captured region of one compiled "
        "forward — not Dynamo's `graph_break_count` (Dynamo skips a frame whose loop breaks and stops at "
        "`recompile_limit`); the torch engine reports Dynamo's own count.\n";

  // Dynamo's reasons (gb codes, user frames) or the LibTorch engine's sites (function, module).
  bool sites_known = false;
  for (const auto& r : runs)
    if (r.contains("break_reasons") && r["break_reasons"].is_array())
      for (const auto& b : r["break_reasons"]) sites_known |= !dynamo_reason(b);
  if (!sites_known) return write_dynamo_reasons(md, runs);
  // Grouped by disabled function: how often each broke, across how many modules (first and
  // last in capture order) and runs — not one row per module, which would be a list of ties.
  struct Site {
    int64_t breaks = 0;
    std::vector<std::string> modules;
    std::set<int64_t> runs;
  };
  std::map<std::string, Site> sites;
  for (const auto& r : runs)
    if (r.contains("break_reasons"))
      for (const auto& b : r["break_reasons"]) {
        Site& s = sites[b.value("function", "")];
        ++s.breaks;
        const std::string m = b.value("module", "").empty() ? "<root>" : b.value("module", "");
        if (std::find(s.modules.begin(), s.modules.end(), m) == s.modules.end()) s.modules.push_back(m);
        s.runs.insert(r.value("id", int64_t{0}));
      }
  if (sites.empty()) return;
  std::vector<std::pair<std::string, Site>> v(sites.begin(), sites.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second.breaks > y.second.breaks; });
  md << "\n### break sites (all runs): where compiled forwards entered a compiler-disabled function\n\n"
        "| disabled function | breaks | runs | modules | first – last module |\n|---|---|---|---|---|\n";
  for (size_t i = 0; i < v.size() && i < 10; ++i) {
    const Site& s = v[i].second;
    md << "| " << md_code(v[i].first, MdPlace::cell) << " | " << s.breaks << " | " << s.runs.size() << " | " << s.modules.size() << " | "
       << md_code(s.modules.front(), MdPlace::cell) << (s.modules.size() > 1 ? " – " + md_code(s.modules.back(), MdPlace::cell) : std::string()) << " |\n";
  }
  if (v.size() > 10) md << "\n(" << v.size() - 10 << " more functions: `hookscope explain FILE --run ID`)\n";
}

std::string engine_title(const std::string& e) {
  if (e == "torch") return "torch engine: real transformers + accelerate + torch.compile (Dynamo's own counts)";
  if (e == "libtorch") return "libtorch engine: hookscope's C++ port of the hooks (emulated devices, every move attributed)";
  if (e == "import") return "imported runs";
  if (e == "profile") return "profiled scripts: `hookscope profile`, the program's own code under each policy (Dynamo's own counts)";
  return e.empty() ? "runs" : e + " engine";
}

// A profiled program's runs (`hookscope profile`): what ran, how it ended, what was recorded. The
// generate tables (correctness, latency, peak memory of the model's weights) have nothing to
// show for a program and are left out.
// "23.62 (21.40–27.43)": the iterations' median and interquartile range, ms.
std::string iteration_spread_cell(const json& it) {
  const json& s = it.is_object() && it.contains("ms") ? it["ms"] : json();
  if (!s.is_object() || !s.contains("median")) return "–";
  return fmt(s.value("median", 0.0), "%.2f") + " (" + fmt(s.value("q1", 0.0), "%.2f") + "–" + fmt(s.value("q3", 0.0), "%.2f") + ")";
}

void write_profiled_programs(std::ostringstream& md, const Tables& t) {
  // Each run's own --label (an appended run may carry another than the first's), when any has one.
  const bool labels = std::any_of(t.runs.begin(), t.runs.end(), [](const json& r) { return r.value("label", json()).is_string(); });
  md << "### the programs' runs\n\n| run |" << (labels ? " label |" : "") << " program | policy | status | "
     << facts::fact("exit_status").label << " | capture range | " << facts::fact("iterations").label << " | "
     << facts::fact("iteration_ms").label << ", ms |\n" << rule(labels ? 9 : 8);
  for (const auto& r : t.runs) {
    const std::string command = facts::program_command(r);
    const json& it = r.value("iterations", json::object());
    const std::string source = it.value("source", "");
    md << "| " << r.value("id", json(0)).dump() << " | ";
    if (labels) md << (r.value("label", json()).is_string() ? md_shortened(r["label"].get<std::string>(), 80) : "–") << " | ";
    md << (command.empty() ? "–" : md_code(command, MdPlace::cell)) << " | "
       << r.value("policy", "") << " | " << r.value("status", "") << " | "
       << count_cell(r.value("exit_status", json(nullptr))) << " | "
       << (r.contains("profile") && r["profile"].is_object() ? r["profile"].value("capture_range", "–") : "–") << " | "
       << count_cell(it.value("count", json(nullptr))) << (source.empty() || source == "none" ? "" : " (" + source + ")") << " | "
       << iteration_spread_cell(it) << " |\n";
  }
  md << "\n" << facts::fact("iterations").label << ": " << facts::fact("iterations").definition << ".\n";
}

// One line per compiled torch-engine run: what Dynamo did.
void write_dynamo_story(std::ostringstream& md, const Tables& t) {
  bool header = false;
  for (const auto& r : t.runs) {
    if (r.value("mode", "") == "eager" || r.value("status", "") == "incomplete") continue;
    if (!header) md << "\n### what Dynamo did (per compiled run)\n\n";
    header = true;
    md << "- **" << r.value("scenario", "") << " " << r.value("policy", "") << " " << r.value("mode", "")
       << (r.value("fullgraph", false) ? " fullgraph" : "") << "**: ";
    if (r.value("status", "") == "error") {
      md << fullgraph_cell(&r) << "\n";
      continue;
    }
    std::map<std::string, int64_t> by_code;
    if (r.contains("break_reasons") && r["break_reasons"].is_array())
      for (const auto& b : r["break_reasons"]) by_code[b.value("gb_code", "?")] += b.value("count", int64_t{1});
    auto num = [&](const char* k) { return r.contains(k) && r[k].is_number() ? r[k].get<int64_t>() : int64_t{-1}; };
    md << facts::fact("graph_break_count").label << ": " << (num("graph_break_count") >= 0 ? std::to_string(num("graph_break_count")) : "–");
    if (!by_code.empty()) {
      md << " (reasons";
      for (const auto& [code, n] : by_code) md << " " << code << " ×" << n;
      md << ")";
    }
    if (num("log_graph_break_records") >= 0)
      md << "; " << num("log_graph_break_records") << " " << facts::fact("log_graph_break_records").label;
    if (num("frames_skipped") >= 0) md << "; " << num("frames_skipped") << " frames skipped (run eagerly)";
    if (num("recompile_limit_hits") >= 0) md << "; recompile_limit hit " << num("recompile_limit_hits") << "×";
    if (num("recompiles") >= 0) md << "; " << num("recompiles") << " recompiles";
    if (num("guard_recompiles") >= 0) md << "; " << num("guard_recompiles") << " " << facts::fact("guard_recompiles").label;
    if (r.contains("hooked_modules_compiled") && r["hooked_modules_compiled"].is_number() && num("hooked_modules") > 0)
      md << "; " << r["hooked_modules_compiled"].get<int64_t>() << "/" << num("hooked_modules") << " hooked modules ran compiled";
    if (r.contains("cache_implementation") && r["cache_implementation"].is_string())
      md << "; " << r["cache_implementation"].get<std::string>() << " cache";
    md << "\n";
  }
}

// The two engines per scenario and policy: the compiled run's breaks, fullgraph and speed-up.
void write_side_by_side(std::ostringstream& md, const Tables& torch, const Tables& libtorch) {
  md << "### engines side by side (mode `default`)\n\n"
        "| scenario | policy | torch: graph breaks | torch: fullgraph | torch: vs eager | libtorch: disabled-scope "
        "entries† | libtorch: fullgraph | libtorch: vs eager |\n" << rule(8);
  for (const auto& sc : torch.scenarios)
    for (const auto& pol : torch.policies) {
      const json* tr = find_run(torch.runs, sc, pol, "default", false);
      const json* lr = find_run(libtorch.runs, sc, pol, "default", false);
      if (!tr && !lr) continue;
      md << "| " << sc << " | " << pol << " | " << breaks_cell(tr) << " | "
         << fullgraph_cell(find_run(torch.runs, sc, pol, "default", true)) << " | "
         << speedup_short(tr) << " | " << breaks_cell(lr) << " | "
         << fullgraph_cell(find_run(libtorch.runs, sc, pol, "default", true)) << " | "
         << speedup_short(lr) << " |\n";
    }
  md << "\n";
}

// Runs the capture never finished.
void write_incomplete(std::ostringstream& md, const Tables& t) {
  const json& runs = t.runs;
  std::vector<std::string> incomplete;
  for (const auto& r : runs)
    if (r.value("status", "") == "incomplete")
      incomplete.push_back(r.value("scenario", "") + "/" + r.value("policy", "") + "/" + r.value("mode", "") +
                           (r.value("fullgraph", false) ? "/fullgraph" : ""));
  if (!incomplete.empty()) {
    md << "\n> **Incomplete runs** (the capture stopped part-way; their numbers are missing): ";
    for (size_t i = 0; i < incomplete.size(); ++i) md << (i ? ", " : "") << incomplete[i];
    md << "\n";
  }
}

// The report with each run's multi-line messages cut to their first line, as the tables show
// them: `error` (and in `error_function` the function Dynamo's "Skip calling" names in a later
// line, "<function F at 0x…>") and each break reason's `reason`.
json first_lines(json report) {
  const auto first = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  for (auto& r : report["runs"]) {
    if (!r.is_object()) continue;
    if (r.contains("error") && r["error"].is_string()) {
      const std::string full = r["error"].get<std::string>();
      if (const size_t f = full.find("<function "); f != std::string::npos) {
        const size_t start = f + 10, stop = full.find_first_of(" >", start);
        r["error_function"] = full.substr(start, stop - start);
      }
      r["error"] = first(full);
    }
    if (r.contains("break_reasons") && r["break_reasons"].is_array())
      for (auto& b : r["break_reasons"])
        if (b.is_object() && b.contains("reason") && b["reason"].is_string()) b["reason"] = first(b["reason"].get<std::string>());
  }
  return report;
}

}  // namespace

namespace {

// The report's runs by engine, torch (the real stack) first.
std::vector<std::pair<std::string, json>> runs_by_engine(const json& runs) {
  std::map<std::string, json> by_engine;
  for (const auto& r : runs) {
    json& v = by_engine[r.value("engine", "")];
    if (v.is_null()) v = json::array();
    v.push_back(r);
  }
  std::vector<std::pair<std::string, json>> out;
  for (const char* e : {"torch", "libtorch"})
    if (by_engine.count(e)) out.emplace_back(e, by_engine[e]);
  for (const auto& [e, v] : by_engine)
    if (e != "torch" && e != "libtorch") out.emplace_back(e, v);
  return out;
}

}  // namespace

std::string render_verdict_markdown(const json& original, bool run_links) {
  const json report = md_safe(json{{"verdicts", original.value("verdicts", json::array())},
                                   {"runs", original.value("runs", json::array())}});
  std::vector<std::string> policies;  // in capture order
  for (const auto& r : report["runs"])
    if (const std::string p = r.value("policy", "");
        !p.empty() && std::find(policies.begin(), policies.end(), p) == policies.end())
      policies.push_back(p);
  std::ostringstream md;
  if (policies == std::vector<std::string>{"whole-hook", "offload-only"}) {
    md << "## hookscope: compile-mode comparison, `whole-hook` (accelerate today) vs `offload-only` (proposed)\n\n";
  } else {
    md << "## hookscope: compile-mode comparison";
    for (size_t i = 0; i < policies.size(); ++i) md << (i ? " vs " : ", ") << md_code(policies[i], MdPlace::line);
    md << "\n\n";
  }
  write_verdicts(md, report["verdicts"], run_links);
  return md.str();
}

// A run's cell names as the tables show them: a policy or mode the run does not name (an
// import given neither) reads "–", not an empty cell or heading.
json with_named_cells(json report) {
  if (report.contains("runs") && report["runs"].is_array())
    for (json& r : report["runs"])
      for (const char* k : {"policy", "mode"})
        if (r.is_object() && (!r.contains(k) || (r[k].is_string() && r[k].get_ref<const std::string&>().empty())))
          r[k] = "–";
  return report;
}

std::string render_tables_markdown(const json& original) {
  need(original, "runs", "report");
  // Names and messages from the capture, each kept on its line and in its cell.
  const json report = with_named_cells(md_safe(first_lines(original)));
  const json& model = need(report, "model", "report");
  const json& runs = need(report, "runs", "report");
  const json& devices = need(report, "devices", "report");
  const auto engines = runs_by_engine(runs);
  std::ostringstream md;
  md << "### setup\n\n";
  if (model.value("id", "?") != "?" || !devices.empty())
    write_setup(md, model, devices);
  else if (engines.size() == 1 && engines.begin()->first == "profile")
    md << "A profiled program (`hookscope profile`): no checkpoint or device map of hookscope's; each run's command "
          "and exit status: `hookscope explain FILE --run ID`.\n\n";
  else
    md << "No model or device recorded (an imported trace given no `--model`).\n\n";
  const json* torch = nullptr;
  const json* libtorch = nullptr;
  for (const auto& [e, v] : engines) {
    if (e == "torch") torch = &v;
    if (e == "libtorch") libtorch = &v;
  }
  if (torch && libtorch) write_side_by_side(md, tables_of(*torch, devices), tables_of(*libtorch, devices));
  for (const auto& [e, v] : engines) {
    const Tables t = tables_of(v, devices);
    if (engines.size() > 1 || !e.empty()) md << "\n## " << engine_title(e) << "\n\n";
    if (e == "profile") {
      write_profiled_programs(md, t);
    } else {
      write_correctness(md, t);
      write_latency(md, t);
      if (e == "torch") write_dynamo_story(md, t);
      write_peak_memory(md, t);
    }
    write_breaks(md, t);
    write_incomplete(md, t);
  }
  md << render_where_time_goes(runs);
  if (report.contains("settings")) {
    md << "\n";
    write_settings(md, report["settings"]);
  }
  std::set<std::string> engine_names;
  for (const auto& [e, v] : engines) engine_names.insert(e.empty() ? "libtorch" : e);  // files before engines were named
  write_glossary(md, engine_names);
  return md.str();
}

std::string render_markdown(const json& report) {
  need(report, "runs", "report");
  return render_verdict_markdown(report, false) + render_tables_markdown(report);
}

}  // namespace hs::reports
