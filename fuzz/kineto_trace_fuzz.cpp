// torch.profiler (Kineto) Chrome traces: import_kineto_trace on arbitrary bytes (plain JSON or
// gzip, detected from the content, as the importer does), into a run of a scratch capture.
// Expected: hs::importers::ImportError (the header: "naming the file and the byte offset").
// The Store's RowSumError is expected too (values each in range whose durations or byte counts
// sum past int64: the importers leave sums to the Store). Any other Store error
// (storage::CaptureError, std::invalid_argument) from input the importer accepted is a finding:
// the importer let through something the store refuses.
// Inputs of odd length are read in two stages (KinetoOptions::pipeline_bytes = 0: reading and
// scanning on a thread of the reader's own), as a trace past 4 MiB is; the rest in one.
#include <cstdint>

#include "fuzz/fuzz_store.h"
#include "fuzz/fuzz_util.h"
#include "importers/kineto_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = hs::fuzz::scratch_dir("kineto");
  static hs::fuzz::FuzzStore store(dir / "capture.sqlite");
  const std::filesystem::path trace = dir / "trace.json";
  hs::fuzz::write_file(trace, data, size);
  const int64_t run = store.new_run();
  hs::importers::KinetoOptions opts;
  opts.batch_rows = 64;  // several batches per input: the flush paths (the writer thread) run too
  if (size % 2 == 1) opts.pipeline_bytes = 0;
  try {
    (void)hs::importers::import_kineto_trace(trace, store.store(), run, opts);
    store.store().end_run(run, hs::tracer::RunStatus::Complete);
  } catch (const hs::importers::ImportError& e) {
    hs::fuzz::expected(e);
    store.store().end_run(run, hs::tracer::RunStatus::Failed, "import error");
  } catch (const hs::storage::RowSumError&) {
    store.store().end_run(run, hs::tracer::RunStatus::Failed, "sums past int64");
  }
  return 0;
}
