#include "app/capture_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/scenarios.h"
#include "compile/compile.h"
#include "hooks/device_map.h"
#include "hooks/runtime.h"
#include "models/generate.h"
#include "models/numerics.h"
#include "models/tokenizer.h"
#include "app/report.h"
#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tracer/host_tracer.h"

namespace hs::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct CaptureArgs {
  std::string model;
  std::string scenarios = "sharded,cpu-offload,disk-offload,mixed";
  std::string policies = "whole-hook,offload-only";
  std::string modes = "eager,default,reduce-overhead";
  std::string fullgraph = "both";
  int devices = 4;
  std::string max_memory;
  std::string prompt = "The capital of France is";
  std::string prompt_ids;  ///< comma-separated token ids; replaces --prompt (no tokenizer needed)
  int64_t max_new_tokens = 64;
  int repeats = 5;
  int warmup = 2;
  std::string dtype = "f32";
  std::string out = "out/capture.sqlite";
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Parse-time check of a comma-separated option against its allowed values: a bad value is a
// usage error (exit 2) whose message names the option (CLI11 prefixes it) and the choices.
CLI::Validator list_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        const auto items = split_list(value);
        if (items.empty()) return "needs at least one of " + join(allowed, ", ");
        for (const auto& item : items)
          if (std::find(allowed.begin(), allowed.end(), item) == allowed.end())
            return "'" + item + "' is not one of " + join(allowed, ", ");
        return "";
      },
      "{" + join(allowed, ",") + "},...");
}

// The same for a single value.
CLI::Validator one_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return "";
        return "'" + value + "' is not one of " + join(allowed, ", ");
      },
      "{" + join(allowed, ",") + "}");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

json device_map_json(const hooks::DeviceMap& m) {
  json j = json::object();
  for (const auto& [k, d] : m) j[k] = d.to_json();
  return j;
}

class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(isatty(STDERR_FILENO)) {}
  void line(const std::string& text) {
    ++done_;
    std::fprintf(stderr, "%s[%zu/%zu] %s\n", tty_ ? "\r\033[K" : "", done_, total_, text.c_str());
    std::fflush(stderr);
  }

 private:
  size_t total_, done_ = 0;
  bool tty_;
};

int run_capture(const CaptureArgs& a) {
  const auto dtype = models::parse_dtype(a.dtype, "--dtype");
  std::vector<Scenario> scenarios;
  for (const auto& s : split_list(a.scenarios)) scenarios.push_back(parse_scenario(s));
  std::vector<hooks::CompilePolicy> policies;
  for (const auto& p : split_list(a.policies)) policies.push_back(hooks::parse_policy(p));
  std::vector<compile::Mode> modes;
  for (const auto& m : split_list(a.modes)) modes.push_back(compile::parse_mode(m));
  if (scenarios.empty() || policies.empty() || modes.empty())
    throw std::invalid_argument("--scenarios, --policies and --modes each need at least one value");
  for (Scenario sc : scenarios)
    if ((sc == Scenario::Sharded || sc == Scenario::Mixed) && a.devices < 2)
      throw std::invalid_argument("scenario " + scenario_name(sc) + " needs --devices 2 or more");
  std::vector<bool> fullgraphs;
  if (a.fullgraph == "both") fullgraphs = {false, true};
  else if (a.fullgraph == "on" || a.fullgraph == "true") fullgraphs = {true};
  else if (a.fullgraph == "off" || a.fullgraph == "false") fullgraphs = {false};
  else throw std::invalid_argument("--fullgraph must be both, on or off (got '" + a.fullgraph + "')");
  if (a.repeats < 1 || a.warmup < 0 || a.max_new_tokens < 1)
    throw std::invalid_argument("--repeats must be >= 1, --warmup >= 0 and --max-new-tokens >= 1");
  std::optional<hooks::MaxMemory> max_memory;
  if (!a.max_memory.empty()) max_memory = hooks::parse_max_memory(a.max_memory);

  hooks::RuntimeOptions ro;
  ro.accelerators = a.devices;
  if (max_memory)
    for (const auto& [d, b] : *max_memory)
      if (d.is_accelerator()) {
        if (static_cast<int>(ro.budget_bytes.size()) <= d.index) ro.budget_bytes.resize(d.index + 1, 0);
        ro.budget_bytes[d.index] = b;
      }
  ro.log = [](const std::string& level, const std::string& msg) {
    if (level == "WARNING" && msg.find("offloaded to the") == std::string::npos)
      std::fprintf(stderr, "[accelerate WARNING] %s\n", msg.c_str());
  };
  hooks::Runtime runtime(ro);
  hooks::RuntimeScope runtime_installed(runtime);
  const hooks::DeviceManager& dm = runtime.devices();

  // The reference: the same checkpoint on one device, no hooks.
  models::LoadOptions lo;
  lo.dtype = dtype;
  models::LoadedModel ref = models::load_model(a.model, lo);
  std::vector<int64_t> prompt_ids;
  if (!a.prompt_ids.empty()) {
    for (const auto& t : split_list(a.prompt_ids)) {
      size_t used = 0;
      int64_t v = -1;
      try {
        v = std::stoll(t, &used);
      } catch (const std::exception&) {
      }
      if (used != t.size() || v < 0 || v >= ref.config.vocab_size)
        throw std::invalid_argument("--prompt-ids: '" + t + "' is not a token id of this model (vocab_size " +
                                    std::to_string(ref.config.vocab_size) + ")");
      prompt_ids.push_back(v);
    }
  } else {
    models::Tokenizer tok = models::Tokenizer::from_file(ref.dir / "tokenizer.json");
    prompt_ids = tok.encode(a.prompt, true);
  }
  if (prompt_ids.empty()) throw std::invalid_argument("--prompt encodes to no tokens");
  auto ids = torch::tensor(prompt_ids, torch::kInt64).unsqueeze(0);
  torch::Tensor ref_logits;
  {
    c10::InferenceMode g;
    ref_logits = ref.model->forward(ids, models::KVCache::dynamic_cache(ref.config.num_hidden_layers), 1)[0][-1]
                     .to(torch::kCPU, torch::kFloat)
                     .clone();
  }
  const int64_t ref_argmax = ref_logits.argmax().item<int64_t>();
  int64_t n_params = 0, n_bytes = 0;
  for (const auto& [n, t] : models::named_parameters(*ref.model)) {
    n_params += t.numel();
    n_bytes += static_cast<int64_t>(t.nbytes());
  }
  const json model_json{{"id", a.model}, {"path", ref.dir.string()}, {"dtype", models::dtype_short_name(dtype)},
                        {"params", n_params}, {"bytes", n_bytes}, {"architecture", ref.config.architecture}};
  ref.model.reset();

  fs::path out(a.out);
  if (out.has_parent_path() && !fs::is_directory(out.parent_path()))
    throw std::invalid_argument("--out: folder " + out.parent_path().string() + " does not exist");
  const fs::path work = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  ScenarioOptions sopt{a.model, dtype, max_memory, work / (out.stem().string() + "-offload")};
  // Prepare the first scenario before the file is opened (and replaced): settings that do not
  // fit the model fail here and leave an existing capture alone.
  std::optional<PreparedScenario> first;
  try {
    first.emplace(prepare_scenario(scenarios.front(), sopt));
  } catch (const std::exception& e) {
    throw std::runtime_error("scenario " + scenario_name(scenarios.front()) + ": " + e.what());
  }
  storage::StoreOptions so;
  so.overwrite = true;
  storage::Store store(out, so);
  for (const auto& acc : dm.accelerators()) {
    storage::DeviceInfo d;
    d.name = std::to_string(acc.index);
    d.kind = acc.emulated ? storage::DeviceKind::Emulated : storage::DeviceKind::Cuda;
    d.backing = acc.backing.str();
    d.label = acc.name;
    if (acc.total_memory > 0) d.max_memory = acc.total_memory;
    store.add_device(d);
  }
  {
    storage::DeviceInfo cpu;
    cpu.name = "cpu";
    cpu.backing = "cpu";
    cpu.label = "host memory";
    store.add_device(cpu);
  }
  if (dm.any_emulated())
    store.add_diagnostic(std::nullopt, storage::Severity::Warning, "devices",
                         "accelerators are emulated in host memory: moves between them are real copies, but CPU "
                         "capture does not fuse or speed anything up");

  tracer::HostTracer tracer(store);
  const json versions{{"hookscope", "0.1.0"}, {"torch", TORCH_VERSION}};

  size_t total = 0;
  for (size_t i = 0; i < scenarios.size(); ++i)
    for (size_t j = 0; j < policies.size(); ++j)
      for (auto m : modes) total += m == compile::Mode::Eager ? 1 : fullgraphs.size();
  Progress progress(total);
  int failures = 0;

  for (Scenario sc : scenarios) {
    PreparedScenario prep = [&] {
      if (first) {
        PreparedScenario p = std::move(*first);
        first.reset();
        return p;
      }
      try {
        return prepare_scenario(sc, sopt);
      } catch (const std::exception& e) {
        throw std::runtime_error("scenario " + scenario_name(sc) + ": " + e.what());
      }
    }();
    const bool offloaded = !prep.offloaded_params.empty();
    auto& model = *prep.lm.model;
    const int64_t layers = prep.lm.config.num_hidden_layers;
    c10::intrusive_ptr<models::KVCache> cache;
    compile::Function fn = [&](const std::vector<c10::IValue>& in) -> c10::IValue {
      return model.forward(in.at(0).toTensor(), cache, 1);
    };
    for (auto pol : policies)
      for (auto mode : modes)
        for (bool fg : fullgraphs) {
          if (mode == compile::Mode::Eager && fg) continue;  // fullgraph only means something when capturing
          runtime.set_compile_policy(pol);
          tracer::RunInfo info;
          info.scenario = scenario_name(sc);
          info.policy = hooks::policy_name(pol);
          info.mode = compile::mode_name(mode);
          info.fullgraph = fg;
          info.model = a.model;
          info.device_map_json = device_map_json(prep.device_map).dump();
          info.versions_json = versions.dump();
          const int64_t run = tracer.begin_run(info);
          runtime.set_sink(&tracer);
          auto& ledger = runtime.ledger();
          ledger.begin(model);  // MEMORY_COUNTERS: bytes resident per device (hooks/memory.h)
          json r{{"scenario", info.scenario}, {"policy", info.policy}, {"mode", info.mode}, {"fullgraph", fg},
                 {"status", "ok"}, {"error", nullptr}, {"weight_devices", prep.weight_devices}, {"model", model_json}};
          std::string status_line;
          bool unexpected = false;  // fullgraph's Unsupported is a result; anything else a failure
          try {
            compile::CompileOptions co;
            co.mode = mode;
            co.fullgraph = fg;
            co.name = "CausalLM.forward";
            compile::CompiledFunction cf = compile::compile(fn, co);
            c10::InferenceMode g;
            // Prefill: structure, argmax and logits against the single-device reference.
            cache = models::KVCache::dynamic_cache(layers);
            torch::Tensor logits = cf.call_tensor({ids})[0][-1].to(torch::kCPU, torch::kFloat);
            ledger.sample();
            const compile::ExplainOutput ex = cf.explain();
            r["graph_count"] = ex.graph_count;
            r["graph_break_count"] = ex.graph_break_count;
            json reasons = json::array();
            for (const auto& b : ex.break_reasons)
              reasons.push_back({{"reason", b.reason}, {"function", b.function}, {"module", b.module}});
            r["break_reasons"] = reasons;
            r["diagnostics"] = ex.diagnostics;
            r["argmax_match"] = logits.argmax().item<int64_t>() == ref_argmax;
            // Offloaded runs must reproduce the reference bit for bit (as accelerate does);
            // where they do not, how far: max |Δ| and ulps of the model's dtype.
            const models::LogitsDiff diff = models::compare_logits(logits, ref_logits, dtype);
            const bool checked = sc != Scenario::Sharded;
            r["logits_identical"] = checked ? json(diff.identical) : json(nullptr);
            r["logits_max_abs_diff"] = checked ? json(diff.max_abs_diff) : json(nullptr);
            r["logits_max_ulp"] = checked ? json(diff.max_ulp) : json(nullptr);
            r["params_on_meta_after"] = offloaded ? json(offloaded_params_on_meta(prep)) : json(nullptr);
            // Decode latency: warmups, then repeats of a full greedy decode; the time of the
            // decode steps (after prefill) per repeat.
            std::vector<double> lat;
            int64_t new_tokens = 0;
            for (int rep = 0; rep < a.warmup + a.repeats; ++rep) {
              cache = models::KVCache::dynamic_cache(layers);
              const int64_t p0 = events::now_ns();
              auto l = cf.call_tensor({ids});
              int64_t tok_id = l[0][-1].argmax().item<int64_t>();
              tracer.generation_step({0, tok_id, p0, events::now_ns()});  // prefill = step 0
              ledger.sample();
              const int64_t t0 = events::now_ns();
              int64_t n = 1;
              for (; n < a.max_new_tokens; ++n) {
                const int64_t s0 = events::now_ns();
                auto step = cf.call_tensor({torch::full({1, 1}, tok_id, torch::kInt64)});
                tok_id = step[0][-1].argmax().item<int64_t>();
                tracer.generation_step({n, tok_id, s0, events::now_ns()});
                ledger.sample();  // step boundary
              }
              if (rep >= a.warmup) lat.push_back((events::now_ns() - t0) / 1e6);
              new_tokens = n;
            }
            r["latency_ms"] = {{"median", median(lat)},
                               {"min", *std::min_element(lat.begin(), lat.end())},
                               {"max", *std::max_element(lat.begin(), lat.end())},
                               {"n", lat.size()}};
            r["new_tokens"] = new_tokens;
            r["recompiles"] = cf.recompiles();
            storage::CompileResult cr;
            cr.graph_count = ex.graph_count;
            cr.graph_break_count = ex.graph_break_count;
            cr.recompiles = cf.recompiles();
            cr.break_reasons = reasons;
            store.add_compile_result(run, cr);
            status_line = "ok, " + std::to_string(ex.graph_break_count) + " breaks, " +
                          std::to_string(static_cast<int>(median(lat))) + " ms";
          } catch (const compile::Unsupported& e) {
            r["status"] = "error";
            r["error"] = e.what();
            r["graph_count"] = nullptr;
            r["graph_break_count"] = nullptr;
            r["break_reasons"] = json::array({{{"reason", e.record().reason}, {"function", e.record().function},
                                               {"module", e.record().module}}});
            r["argmax_match"] = nullptr;
            r["logits_identical"] = nullptr;
            r["logits_max_abs_diff"] = nullptr;
            r["logits_max_ulp"] = nullptr;
            r["params_on_meta_after"] = nullptr;
            r["latency_ms"] = nullptr;
            r["new_tokens"] = 0;
            storage::CompileResult cr;
            cr.fullgraph_ok = false;
            cr.error = e.what();
            cr.break_reasons = r["break_reasons"];
            store.add_compile_result(run, cr);
            status_line = "fullgraph raises at " + e.record().function;
          } catch (const std::exception& e) {
            r["status"] = "error";
            r["error"] = e.what();
            unexpected = true;
            ++failures;
            status_line = std::string("error: ") + e.what();
          }
          json peaks = json::object();
          for (const auto& [dev, bytes] : ledger.end()) peaks[dev.str()] = bytes;
          r["peak_memory_bytes"] = peaks;
          runtime.set_sink(nullptr);
          store.set_run_result(run, r);
          tracer.end_run(unexpected ? tracer::RunStatus::Failed : tracer::RunStatus::Complete,
                         r["error"].is_string() ? r["error"].get<std::string>() : std::string());
          progress.line(info.scenario + " " + info.policy + " " + info.mode + (fg ? " fullgraph" : "") + ": " +
                        status_line);
        }
  }
  store.finalize();
  store.close();
  std::fprintf(stderr, "[hookscope] wrote %s (%zu runs)\n", out.c_str(), total);
  return failures ? 1 : 0;
}

// ------------------------------------------------------------------ report / explain

json device_id_json(const std::string& name) {
  if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) return std::stoll(name);
  return name;
}

/// The report JSON (schema 1) of a capture, with SQL-derived totals per run.
json build_report(const storage::CaptureReader& rd) {
  json report{{"schema", 1}, {"model", nullptr}, {"devices", json::array()}, {"runs", json::array()}};
  for (const auto& d : rd.devices()) {
    const auto& i = d.info;
    if (i.run_id) continue;
    std::string kind = i.kind == storage::DeviceKind::Cuda ? "cuda" : i.kind == storage::DeviceKind::Emulated ? "emulated" : "cpu";
    report["devices"].push_back({{"id", device_id_json(i.name)}, {"kind", kind}, {"backing", i.backing},
                                 {"max_memory", i.max_memory ? json(*i.max_memory) : json(nullptr)}});
  }
  for (const auto& rec : rd.runs()) {
    json r = rec.results.is_object() ? rec.results : json::object();
    if (report["model"].is_null() && r.contains("model")) report["model"] = r["model"];
    r.erase("model");
    r["id"] = rec.id;
    r["scenario"] = rec.scenario;
    r["policy"] = rec.policy;
    r["mode"] = rec.mode;
    r["fullgraph"] = rec.fullgraph;
    if (rec.status == tracer::RunStatus::Incomplete) {
      r["status"] = "incomplete";
      r["error"] = "the capture stopped before this run ended";
    } else if (rec.status == tracer::RunStatus::Failed && r.value("status", "") != "error") {
      r["status"] = "error";
      r["error"] = rec.error;
    }
    for (const char* k : {"error", "graph_count", "graph_break_count", "argmax_match", "logits_identical",
                          "logits_max_abs_diff", "logits_max_ulp", "params_on_meta_after", "latency_ms"})
      if (!r.contains(k)) r[k] = nullptr;
    if (!r.contains("break_reasons")) r["break_reasons"] = json::array();
    if (!r.contains("weight_devices")) r["weight_devices"] = json::array();
    if (!r.contains("new_tokens")) r["new_tokens"] = 0;
    // Totals straight from the recorded events (what the timeline shows).
    int64_t tb = 0, tn = 0, sb = 0, sn = 0;
    for (const auto& t : rd.transfer_sums(rec.id)) {
      tb += t.bytes;
      tn += t.count;
    }
    for (const auto& w : rd.weight_swap_sums(rec.id))
      if (w.onload) {
        sb += w.bytes;
        sn += w.count;
      }
    // Peak resident bytes per device: the capture stores it with the results; a run that never
    // ended has only its recorded counters.
    if (!r.contains("peak_memory_bytes") || !r["peak_memory_bytes"].is_object()) {
      json peaks = json::object();
      for (const auto& c : rd.memory_counters(rec.id))
        peaks[c.device] = std::max(peaks.value(c.device, int64_t{0}), c.bytes);
      r["peak_memory_bytes"] = peaks;
    }
    r["recorded"] = {{"transfers", tn}, {"transfer_bytes", tb}, {"weight_onloads", sn}, {"weight_onload_bytes", sb},
                     {"graph_breaks", rd.graph_breaks(rec.id).size()}};
    report["runs"].push_back(r);
  }
  if (report["model"].is_null()) report["model"] = {{"id", "?"}, {"path", ""}, {"dtype", "?"}, {"params", 0}, {"bytes", 0}};
  return report;
}

struct ReportArgs {
  std::string file, markdown, json_out;
};

int run_report(const ReportArgs& a) {
  storage::CaptureReader rd(a.file);
  json report = build_report(rd);
  if (report["runs"].empty()) throw std::invalid_argument(a.file + ": the capture holds no runs");
  const std::string md = render_markdown(report);
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    f.close();
    if (!f) throw std::runtime_error("cannot write " + path);
  };
  if (!a.markdown.empty()) write(a.markdown, md);
  if (!a.json_out.empty()) write(a.json_out, report.dump(2) + "\n");
  std::cout << md;
  return 0;
}

struct ExplainArgs {
  std::string file;
  int64_t run = -1;
};

int run_explain(const ExplainArgs& a) {
  storage::CaptureReader rd(a.file);
  auto runs = rd.runs();
  if (runs.empty()) throw std::invalid_argument(a.file + ": the capture holds no runs");
  if (a.run < 0) {
    std::cout << "runs in " << a.file << " (pick one with --run ID):\n";
    for (const auto& r : runs)
      std::cout << "  " << r.id << "  " << r.scenario << " " << r.policy << " " << r.mode << (r.fullgraph ? " fullgraph" : "")
                << "  [" << (r.status == tracer::RunStatus::Complete ? "complete" : r.status == tracer::RunStatus::Failed ? "failed" : "incomplete") << "]\n";
    return 0;
  }
  const storage::RunRecord rec = rd.run(a.run);
  const json& r = rec.results;
  std::cout << "Run " << rec.id << ": " << rec.scenario << ", policy " << rec.policy << ", mode " << rec.mode
            << (rec.fullgraph ? ", fullgraph=True" : "") << "\n";
  if (rec.status == tracer::RunStatus::Incomplete) {
    std::cout << "(incomplete: the capture stopped before this run ended)\n";
    return 0;
  }
  auto num = [&](const char* k) { return r.contains(k) && r[k].is_number() ? std::to_string(r[k].get<int64_t>()) : std::string("-"); };
  std::cout << "Graph Count: " << num("graph_count") << "\nGraph Break Count: " << num("graph_break_count") << "\n";
  if (r.contains("error") && r["error"].is_string()) std::cout << "Error: " << r["error"].get<std::string>() << "\n";
  std::cout << "Break Reasons:\n";
  int i = 0;
  if (r.contains("break_reasons"))
    for (const auto& b : r["break_reasons"]) {
      std::cout << "  Break Reason " << ++i << ":\n    Reason: " << b.value("reason", "") << "\n    Function: "
                << b.value("function", "") << "\n    Module: " << (b.value("module", "").empty() ? "<root>" : b.value("module", ""))
                << "\n";
    }
  std::cout << "Graph breaks recorded over the whole run (prefill and every decode step): " << rd.graph_breaks(rec.id).size()
            << "\n";
  return 0;
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ReportArgs>();
  auto* c = app.add_subcommand("report", "Markdown tables (and report.json) from a capture");
  c->add_option("file", a->file, "Capture written by `hookscope capture`")->required();
  c->add_option("--markdown", a->markdown, "Also write the Markdown here");
  c->add_option("--json", a->json_out, "Write the report JSON (schema 1) here");
  c->footer("Example:\n  hookscope report out/demo.sqlite --markdown out/report.md --json out/report.json");
  c->callback([a, &run_selected] { run_selected = [a] { return run_report(*a); }; });
  return c;
}

CLI::App* add_explain_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ExplainArgs>();
  auto* c = app.add_subcommand("explain", "One run's graph breaks, like torch._dynamo.explain");
  c->add_option("file", a->file, "Capture written by `hookscope capture`")->required();
  c->add_option("--run", a->run, "Run id (omit to list the runs)");
  c->callback([a, &run_selected] { run_selected = [a] { return run_explain(*a); }; });
  return c;
}

CLI::App* add_capture_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<CaptureArgs>();
  auto* c = app.add_subcommand("capture", "Run the scenario x policy x mode matrix and record it into SQLite");
  c->option_defaults()->always_capture_default();  // --help shows every default
  c->add_option("--model", a->model, "HF checkpoint folder, or a model id in the offline HF cache")->required();
  c->add_option("--scenarios", a->scenarios, "Comma-separated: sharded, cpu-offload, disk-offload, mixed")
      ->check(list_of({"sharded", "cpu-offload", "disk-offload", "mixed"}));
  c->add_option("--policies", a->policies, "Comma-separated: whole-hook, offload-only")
      ->check(list_of({"whole-hook", "offload-only"}));
  c->add_option("--modes", a->modes, "Comma-separated: eager, default, reduce-overhead")
      ->check(list_of({"eager", "default", "reduce-overhead"}));
  c->add_option("--fullgraph", a->fullgraph, "both | on | off (fullgraph runs for the capturing modes)")
      ->check(one_of({"both", "on", "off", "true", "false"}));
  c->add_option("--devices", a->devices, "Logical accelerators (emulated when fewer real ones)")->check(CLI::Range(1, 64));
  c->add_option("--max-memory", a->max_memory, "Budgets for the sharded map, e.g. 0=200MB,1=200MB,cpu=4GiB");
  auto* prompt = c->add_option("--prompt", a->prompt, "Prompt text (encoded with the checkpoint's tokenizer.json)");
  c->add_option("--prompt-ids", a->prompt_ids, "Comma-separated prompt token ids instead of --prompt")->excludes(prompt);
  c->add_option("--max-new-tokens", a->max_new_tokens, "Tokens per greedy decode");
  c->add_option("--repeats", a->repeats, "Measured decodes per run");
  c->add_option("--warmup", a->warmup, "Unmeasured decodes first");
  c->add_option("--dtype", a->dtype, "Weight dtype")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  c->add_option("--out", a->out, "SQLite capture to write (replaced); disk offload folders go next to it");
  c->footer("Example:\n  hookscope capture --model DIR --devices 4 --max-new-tokens 8 --repeats 2 --warmup 1 --out out/demo.sqlite");
  c->callback([a, &run_selected] { run_selected = [a] { return run_capture(*a); }; });
  return c;
}

}  // namespace hs::app
