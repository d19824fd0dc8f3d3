// Imports one torch.profiler (Kineto) Chrome trace into a fresh capture and prints what it
// cost, as one JSON line: {"events", "seconds", "events_per_s", "file_bytes", "peak_rss_bytes",
// "rows"}. bench/import_bench.py drives it next to Python's json.load of the same file.
//
//   bench_import TRACE.json[.gz] CAPTURE.hscope [--one-thread]
//
// --one-thread: read, scan and parse on one thread (KinetoOptions::pipeline_bytes past any
// file), as files up to 4 MiB are; the rows are still written by the sink's writer thread.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <string>
#include <iostream>

#include <nlohmann/json.hpp>

#include "importers/kineto_trace.h"
#include "storage/store.h"

int main(int argc, char** argv) {
  const bool one_thread = argc == 4 && std::string(argv[3]) == "--one-thread";
  if (argc != 3 && !one_thread) {
    std::cerr << "usage: bench_import TRACE.json[.gz] CAPTURE.hscope [--one-thread]\n";
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path trace = argv[1], capture = argv[2];
  try {
    hs::storage::StoreOptions so;
    so.overwrite = true;
    hs::storage::Store store(capture, so);
    hs::tracer::RunInfo info;
    info.scenario = "bench/import";
    const int64_t run = store.add_run(info);
    const auto t0 = std::chrono::steady_clock::now();
    hs::importers::KinetoOptions ko;
    if (one_thread) ko.pipeline_bytes = UINT64_MAX;
    const hs::importers::KinetoSummary s = hs::importers::import_kineto_trace(trace, store, run, ko);
    store.end_run(run, hs::tracer::RunStatus::Complete);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    int64_t rows = 0;
    for (const auto& [_, n] : s.rows_by_table) rows += n;
    nlohmann::json out = {{"events", s.events},
                          {"seconds", seconds},
                          {"events_per_s", static_cast<double>(s.events) / seconds},
                          {"file_bytes", static_cast<int64_t>(fs::file_size(trace))},
                          {"peak_rss_bytes", static_cast<int64_t>(ru.ru_maxrss) * 1024},
                          {"rows", rows}};
    std::cout << out.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_import: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
