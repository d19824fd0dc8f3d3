#include "app/report.h"
#include "app/report_stats.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

namespace hs::app {

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
    return "raises at `" + b.value("function", "?") + "` (module `" + (m.empty() ? std::string("<root>") : m) + "`)";
  }
  const std::string full = r->contains("error") && (*r)["error"].is_string() ? (*r)["error"].get<std::string>() : "";
  std::string e = full.substr(0, full.find('\n'));
  // Dynamo's "Skip calling ... function" names the function in its explanation: "<function F at 0x…>".
  if (const size_t f = full.find("<function "); f != std::string::npos) {
    const size_t start = f + 10, stop = full.find_first_of(" >", start);
    return "raises at `" + full.substr(start, stop - start) + "`: `` " + e + " ``";
  }
  if (e.size() > 90) e = e.substr(0, 87) + "...";
  for (auto& c : e)
    if (c == '|') c = '/';
  return "raises: `` " + e + " ``";
}

double median_ms(const json* r);

// Compiled vs eager: the same cell's interleaved eager measurement when the engine made one
// (torch engine, per token), else the eager run's decode latency over the compiled run's.
double speedup(const json* r, const json* eager) {
  if (r && r->value("status", "") == "ok") {
    const json e = r->value("eager_decode_ms_per_token", json()), c = r->value("decode_ms_per_token", json());
    if (e.is_object() && c.is_object() && c.value("median", 0.0) > 0) return e.value("median", 0.0) / c["median"].get<double>();
  }
  double m = median_ms(r), em = median_ms(eager);
  return (m > 0 && em > 0) ? em / m : -1;
}

double median_ms(const json* r) {
  if (!r || r->value("status", "") != "ok" || !r->contains("latency_ms") || (*r)["latency_ms"].is_null()) return -1;
  return (*r)["latency_ms"].value("median", -1.0);
}

std::string latency_cell(const json* r) {
  if (!r) return "–";
  if (r->value("status", "") != "ok") return r->value("status", "?");
  const auto& l = (*r)["latency_ms"];
  return fmt(l.value("median", 0.0)) + " (" + fmt(l.value("min", 0.0)) + "–" + fmt(l.value("max", 0.0)) + ")";
}

std::string breaks_cell(const json* r) {
  if (!r) return "–";
  if (r->value("status", "") == "incomplete") return "incomplete";
  if (const auto it = r->find("graph_break_count"); it != r->end() && it->is_number())
    return std::to_string(it->get<int64_t>());
  // The LibTorch engine does not count Dynamo's breaks: its own measure, marked.
  if (const auto it = r->find("disabled_scope_entries"); it != r->end() && it->is_number())
    return std::to_string(it->get<int64_t>()) + "†";
  return "–";
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
  md << "## hookscope: compile-mode comparison, `whole-hook` (accelerate today) vs `offload-only` (proposed)\n\n";
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
  md << "| " << model.value("id", "?") << " | " << model.value("dtype", "?") << " | "
     << fmt(model.value("params", 0.0) / 1e6, "%.1f") << "M | " << bytes_h(model.value("bytes", 0.0)) << " | " << devs
     << " |\n\n";
  if (any_emulated)
    md << "> Emulated accelerators are backed by host memory: moves between them are real copies, but CPU "
          "capture does not fuse or speed anything up — latencies show structure and hook cost, not GPU speed.\n\n";
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

// Decode latency per mode before/after, with the speed-up against eager.
void write_latency(std::ostringstream& md, const Tables& t) {
  const json& runs = t.runs;
  const std::vector<std::string>& scenarios = t.scenarios;
  const std::vector<std::string>& modes = t.modes;
  md << "\n### decode latency, ms (median (min–max))\n\n";
  md << "| scenario | mode |" << policy_headers(t, "") << policy_headers(t, "vs eager, ") << "\n"
     << rule(2 + 2 * t.policies.size());
  auto speed = [](const json* r, const json* e) -> std::string {
    const double s = speedup(r, e);
    return s > 0 ? fmt(s, "%.2f") + "×" : "–";
  };
  for (const auto& sc : scenarios)
    for (const auto& mode : modes) {
      std::vector<const json*> run(t.policies.size()), eager(t.policies.size());
      bool any = false;
      for (size_t i = 0; i < t.policies.size(); ++i) {
        run[i] = find_run(runs, sc, t.policies[i], mode, false);
        eager[i] = find_run(runs, sc, t.policies[i], "eager", false);
        any |= run[i] != nullptr;
      }
      if (!any) continue;
      md << "| " << sc << " | " << mode << " |";
      for (const json* r : run) md << " " << latency_cell(r) << " |";
      for (size_t i = 0; i < run.size(); ++i) md << " " << speed(run[i], eager[i]) << " |";
      md << "\n";
    }
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

std::string first_line(std::string s, size_t max = 100) {
  if (const auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  for (auto& c : s)
    if (c == '|') c = '/';
  return s;
}

// Dynamo's break reasons over the compiled runs: grouped by gb code, reason and user frame.
void write_dynamo_reasons(std::ostringstream& md, const json& runs) {
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> reasons;
  for (const auto& r : runs)
    if (r.contains("break_reasons") && r["break_reasons"].is_array())
      for (const auto& b : r["break_reasons"])
        reasons[{b.value("gb_code", ""), first_line(b.value("reason", "")), b.value("user_frame", "")}] +=
            b.value("count", int64_t{1});
  if (reasons.empty()) return;
  std::vector<std::pair<std::tuple<std::string, std::string, std::string>, int64_t>> v(reasons.begin(), reasons.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  md << "\n### Dynamo's break reasons (all compiled runs; count = breaks)\n\n| gb code | reason | user frame | count |\n"
        "|---|---|---|---|\n";
  for (size_t i = 0; i < v.size() && i < 12; ++i) {
    const auto& [code, reason, frame] = v[i].first;
    md << "| " << (code.empty() ? "–" : code) << " | " << reason << " | `" << frame << "` | " << v[i].second << " |\n";
  }
  if (v.size() > 12) md << "\n(" << v.size() - 12 << " more reasons: `hookscope explain FILE --run ID`)\n";
}

// Graph breaks per compiled forward before/after, and the top break sites.
void write_breaks(std::ostringstream& md, const Tables& t) {
  const json& runs = t.runs;
  const std::vector<std::string>& scenarios = t.scenarios;
  const std::vector<std::string>& modes = t.modes;
  bool dynamo = false;
  for (const auto& r : runs) dynamo |= r.contains("graph_break_count") && r["graph_break_count"].is_number();
  md << (dynamo ? "\n### graph breaks (Dynamo's graph_break_count of one compiled forward)\n\n"
                : "\n### compiler-disabled scope entries per compiled forward†\n\n");
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
  if (!dynamo) md << "\n† LibTorch engine: compiler-disabled scopes entered inside a captured region of one compiled "
        "forward — not Dynamo's `graph_break_count` (Dynamo skips a frame whose loop breaks and stops at "
        "`recompile_limit`); the torch engine reports Dynamo's own count.\n";

  // Dynamo's reasons (gb codes, user frames) or the LibTorch engine's sites (function, module).
  bool sites_known = false;
  for (const auto& r : runs)
    if (r.contains("break_reasons") && r["break_reasons"].is_array())
      for (const auto& b : r["break_reasons"]) sites_known |= !dynamo_reason(b);
  if (!sites_known) return write_dynamo_reasons(md, runs);
  std::map<std::pair<std::string, std::string>, int64_t> sites;
  for (const auto& r : runs)
    if (r.contains("break_reasons"))
      for (const auto& b : r["break_reasons"]) ++sites[{b.value("function", ""), b.value("module", "")}];
  if (!sites.empty()) {
    std::vector<std::pair<std::pair<std::string, std::string>, int64_t>> v(sites.begin(), sites.end());
    std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    md << "\n### top break sites (all runs)\n\n| disabled function | module | breaks |\n|---|---|---|\n";
    for (size_t i = 0; i < v.size() && i < 10; ++i)
      md << "| `" << v[i].first.first << "` | `" << (v[i].first.second.empty() ? "<root>" : v[i].first.second) << "` | "
         << v[i].second << " |\n";
  }
}

std::string engine_title(const std::string& e) {
  if (e == "torch") return "torch engine: real transformers + accelerate + torch.compile (Dynamo's own counts)";
  if (e == "libtorch") return "libtorch engine: hookscope's C++ port of the hooks (emulated devices, every move attributed)";
  if (e == "import") return "imported runs";
  return e.empty() ? "runs" : e + " engine";
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
    md << breaks_cell(&r) << " graph breaks";
    if (!by_code.empty()) {
      md << " (";
      bool first = true;
      for (const auto& [code, n] : by_code) md << (first ? "" : ", ") << code << " ×" << n, first = false;
      md << ")";
    }
    auto num = [&](const char* k) { return r.contains(k) && r[k].is_number() ? r[k].get<int64_t>() : int64_t{-1}; };
    if (num("frames_skipped") >= 0) md << "; " << num("frames_skipped") << " frames skipped (run eagerly)";
    if (num("recompile_limit_hits") >= 0) md << "; recompile_limit hit " << num("recompile_limit_hits") << "×";
    if (num("recompiles") >= 0) md << "; " << num("recompiles") << " recompiles";
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
  auto speed = [](const json* r, const json* e) -> std::string {
    const double s = speedup(r, e);
    return s > 0 ? fmt(s, "%.2f") + "×" : "–";
  };
  for (const auto& sc : torch.scenarios)
    for (const auto& pol : torch.policies) {
      const json* tr = find_run(torch.runs, sc, pol, "default", false);
      const json* lr = find_run(libtorch.runs, sc, pol, "default", false);
      if (!tr && !lr) continue;
      md << "| " << sc << " | " << pol << " | " << breaks_cell(tr) << " | "
         << fullgraph_cell(find_run(torch.runs, sc, pol, "default", true)) << " | "
         << speed(tr, find_run(torch.runs, sc, pol, "eager", false)) << " | " << breaks_cell(lr) << " | "
         << fullgraph_cell(find_run(libtorch.runs, sc, pol, "default", true)) << " | "
         << speed(lr, find_run(libtorch.runs, sc, pol, "eager", false)) << " |\n";
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

}  // namespace

std::string render_markdown(const json& report) {
  const json& model = need(report, "model", "report");
  const json& runs = need(report, "runs", "report");
  const json& devices = need(report, "devices", "report");
  // The runs of each engine, torch (the real stack) first.
  std::map<std::string, json> by_engine;
  for (const auto& r : runs) {
    json& v = by_engine[r.value("engine", "")];
    if (v.is_null()) v = json::array();
    v.push_back(r);
  }
  std::vector<std::string> engines;
  for (const char* e : {"torch", "libtorch"})
    if (by_engine.count(e)) engines.push_back(e);
  for (const auto& [e, v] : by_engine)
    if (std::find(engines.begin(), engines.end(), e) == engines.end()) engines.push_back(e);
  std::ostringstream md;
  write_setup(md, model, devices);
  if (by_engine.count("torch") && by_engine.count("libtorch"))
    write_side_by_side(md, tables_of(by_engine["torch"], devices), tables_of(by_engine["libtorch"], devices));
  for (const auto& e : engines) {
    const Tables t = tables_of(by_engine[e], devices);
    if (engines.size() > 1 || !e.empty()) md << "\n## " << engine_title(e) << "\n\n";
    write_correctness(md, t);
    write_latency(md, t);
    if (e == "torch") write_dynamo_story(md, t);
    write_peak_memory(md, t);
    write_breaks(md, t);
    write_incomplete(md, t);
  }
  md << render_where_time_goes(runs);
  return md.str();
}

}  // namespace hs::app
