// `hookscope explain`: one run's graph breaks, in the shape torch._dynamo.explain prints.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/explain_command.h"
#include "storage/capture_reader.h"

namespace hs::app {

using nlohmann::json;

namespace {

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
  if (r.contains("graph_break_count") && r["graph_break_count"].is_number())
    std::cout << "Graph Count: " << num("graph_count") << "\nGraph Break Count: " << num("graph_break_count") << "\n";
  else
    std::cout << "Captured Regions: " << num("captured_regions") << "\nDisabled-Scope Entries: "
              << num("disabled_scope_entries")
              << "  (LibTorch engine: not Dynamo's graph_break_count; capture with --engine torch for Dynamo's)\n";
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

CLI::App* add_explain_command(CLI::App& app, std::function<int()>& run_selected) {
  auto a = std::make_shared<ExplainArgs>();
  auto* c = app.add_subcommand("explain", "One run's graph breaks, like torch._dynamo.explain");
  c->add_option("file", a->file, "Capture written by `hookscope capture`")->required();
  c->add_option("--run", a->run, "Run id (omit to list the runs)");
  c->callback([a, &run_selected] { run_selected = [a] { return run_explain(*a); }; });
  return c;
}

}  // namespace hs::app
