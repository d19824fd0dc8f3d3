#include "importers/run_import.h"

#include "importers/kineto_trace.h"
#include "importers/torch_trace_log.h"

namespace hs::importers {

using nlohmann::json;

namespace {

json trace_json(const KinetoSummary& k) {
  return {{"events", k.events},
          {"events_by_category", k.events_by_category},
          {"rows_by_table", k.rows_by_table},
          {"unknown_categories", k.unknown_categories},
          {"gpu_count", k.gpu_count},
          {"first_ns", k.first_ns ? json(*k.first_ns) : json(nullptr)},
          {"last_ns", k.last_ns ? json(*k.last_ns) : json(nullptr)},
          {"hookscope_run", k.hookscope_run}};
}

json log_json(const TorchTraceSummary& t) {
  return {{"compiles", t.compiles},
          {"graph_breaks", t.graph_breaks},
          {"recompiles", t.recompiles},
          {"frames_skipped", t.frames_skipped},
          {"recompile_limit_hits", t.recompile_limit_hits},
          {"graph_count", t.graph_count},
          {"graph_break_count", t.graph_break_count},
          {"records", t.records},
          {"unknown_types", t.unknown_types}};
}

}  // namespace

RunImportSummary import_run_files(storage::Store& store, int64_t run_id, const RunFiles& files,
                                  const RunImportOptions& options) {
  RunImportSummary s;
  if (files.trace) {
    KinetoOptions ko;
    ko.progress = options.progress;
    ko.shift_ns = options.trace_shift_ns;
    const KinetoSummary k = import_kineto_trace(*files.trace, store, run_id, ko);
    s.trace = trace_json(k);
    s.diagnostics.insert(s.diagnostics.end(), k.diagnostics.begin(), k.diagnostics.end());
  }
  if (files.compile_log) {
    TorchTraceOptions to;
    to.cell = files.cell;
    to.shift_ns = options.trace_shift_ns;  // graph breaks go onto the trace's clock too
    const TorchTraceSummary t = import_torch_trace(*files.compile_log, store, run_id, to);
    s.compile_log = log_json(t);  // its diagnostics are stored by import_torch_trace itself
  }
  for (const auto& d : s.diagnostics) store.add_diagnostic(run_id, storage::Severity::Warning, "import", d);
  return s;
}

}  // namespace hs::importers
