// Capture files: storage::CaptureReader on mutated SQLite files (seeds: small captures written
// by the real Store, fuzz/make_capture_seed.cpp), then every query of the reader on every run.
// Expected: storage::CaptureError (open and query failures, and count() of a table the file
// lacks, the header says), and
// std::out_of_range from run(id): in a corrupt file a table scan (runs()) and a rowid lookup
// (run(id)) may disagree without SQLite reporting the corruption.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <system_error>

#include "fuzz/fuzz_util.h"
#include "storage/capture_reader.h"
#include "storage/event_tables.h"

namespace fs = std::filesystem;

namespace {
template <class F>
void query(F&& f) {
  try {
    f();
  } catch (const hs::storage::CaptureError&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path dir = hs::fuzz::scratch_dir("capture");
  const fs::path file = dir / "capture.sqlite";
  std::error_code ec;
  fs::remove(dir / "capture.sqlite-wal", ec);
  fs::remove(dir / "capture.sqlite-shm", ec);
  fs::remove(dir / "capture.sqlite-journal", ec);
  hs::fuzz::write_file(file, data, size);
  std::optional<hs::storage::CaptureReader> reader;
  try {
    hs::storage::ReaderOptions o;
    o.busy_timeout_ms = 0;
    o.page_read_min_rows = 0;  // every run's rows read from the pages where the file allows it
    reader.emplace(file, o);
  } catch (const hs::storage::CaptureError& e) {
    hs::fuzz::expected(e);
    return 0;
  }
  const hs::storage::CaptureReader& r = *reader;
  query([&] { (void)r.metadata(); });
  query([&] { (void)r.finalized(); });
  query([&] { (void)r.indexes(); });
  query([&] { (void)r.compile_results(); });
  query([&] { (void)r.diagnostics(); });
  query([&] { (void)r.devices(); });
  query([&] { (void)r.gpus(); });
  std::vector<hs::storage::RunRecord> runs;
  query([&] { runs = r.runs(); });
  size_t n = 0;
  for (const auto& run : runs) {
    if (++n > 8) break;
    const int64_t id = run.id;
    query([&] {
      try {
        (void)r.run(id);
      } catch (const std::out_of_range&) {
      }
    });
#define HS_FUZZ_QUERY_(Type, Row, rows, ...) query([&] { (void)r.rows(id); });
    HS_HOST_EVENT_KINDS(HS_FUZZ_QUERY_)
    HS_ACTIVITY_KINDS(HS_FUZZ_QUERY_)
#undef HS_FUZZ_QUERY_
    query([&] { r.check_rows(id); });
    query([&] {
      try {
        (void)r.shared_run_rows(id);
      } catch (const std::out_of_range&) {  // as run(id): a RUNS row it cannot read as one
      }
    });
    query([&] { (void)r.modules(id); });
    query([&] { (void)r.threads(id); });
    query([&] { (void)r.transfer_sums(id); });
    query([&] { (void)r.weight_swap_sums(id); });
    query([&] { (void)r.compile_results(id); });
    query([&] { (void)r.diagnostics(id); });
    query([&] { (void)r.devices(id); });
    query([&] { (void)r.count("HOOK_EVENTS", id); });
    hs::storage::detail::for_each_kind([&](auto kind) {  // every table activity_pids reads
      using K = typename decltype(kind)::type;
      namespace d = hs::storage::detail;
      if constexpr (d::has_tag<K, hs::kinds::GlobalTid>() && d::has_tag<K, hs::kinds::Start>())
        query([&] { (void)r.activity_pids(id, K::table); });
    });
  }
  query([&] { (void)r.count("RUNS"); });
  return 0;
}
