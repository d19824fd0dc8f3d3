// TORCH_TRACE compile logs: read_torch_trace on arbitrary bytes; a log that reads is read
// again for its last cell and imported into a run of a scratch capture.
// Expected: hs::importers::ImportError ("FILE: line N: ...") and the Store's RowSumError (values
// each in range whose durations sum past int64: the importers leave sums to the Store). Any other
// Store error from a log the reader accepted is a finding.
#include <cstdint>

#include "fuzz/fuzz_store.h"
#include "fuzz/fuzz_util.h"
#include "importers/import_error.h"
#include "importers/torch_trace_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = hs::fuzz::scratch_dir("torch-trace");
  static hs::fuzz::FuzzStore store(dir / "capture.sqlite");
  const std::filesystem::path log = dir / "dedicated_log_torch_trace_fuzz.log";
  hs::fuzz::write_file(log, data, size);
  hs::importers::TorchTraceOptions opts;
  opts.max_line_bytes = 1 << 16;  // small limits, so the over-long paths are reachable
  opts.max_payload_bytes = 1 << 14;
  hs::importers::TorchTraceSummary summary;
  try {
    (void)hs::importers::read_torch_trace(log, opts, &summary);
  } catch (const hs::importers::ImportError& e) {
    hs::fuzz::expected(e);
    return 0;
  }
  if (!summary.cells.empty()) {
    opts.cell = summary.cells.back();
    try {
      (void)hs::importers::read_torch_trace(log, opts);
    } catch (const hs::importers::ImportError&) {
    }
  }
  const int64_t run = store.new_run();
  try {
    (void)hs::importers::import_torch_trace(log, store.store(), run, opts);
    store.store().end_run(run, hs::tracer::RunStatus::Complete);
  } catch (const hs::importers::ImportError& e) {
    hs::fuzz::expected(e);
    store.store().end_run(run, hs::tracer::RunStatus::Failed, "import error");
  } catch (const hs::storage::RowSumError&) {
    store.store().end_run(run, hs::tracer::RunStatus::Failed, "sums past int64");
  }
  return 0;
}
