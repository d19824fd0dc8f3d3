// Ingest benchmark: how fast host events go into a capture file, and how big they are there.
//
//   bench_ingest [--events N] [--dir DIR] [--only WORKLOAD]
//
// Prints one JSON object. For each workload:
//   store_events_per_s      Store::write_batch alone (batches of 65536 records, one transaction each),
//                           wall clock; store_events_per_cpu_s the same per CPU second (shared machines)
//   tracer_events_per_s     HostTracer → Store end to end on one recording thread, until end_run returns
//   tracer_record_(cpu_)ns_per_event  the recording thread's wall / CPU time per event (this includes
//                           the benchmark's own event generation, a few ns)
//   bytes_per_event         capture file size / events, after close (WAL folded in), no indexes
//   bytes_per_event_indexed the same after Store::finalize() built the (runId, start) indexes
//   raw_insert_events_per_s the peer: the same rows, read back from the store's file into memory,
//                           inserted by one prepared INSERT per table in one transaction (same
//                           tables and pragmas, no indexes); store_over_raw_insert(_cpu) = the
//                           store's rate over it (issue 36's target: >= 0.8); raw_insert_bytes_per_event
//                           the file it makes (the floor of this schema)
//   record_only            the tracer alone: CPU ns per event on the recording thread, the batches
//                          discarded (no SQLite), events built beforehand as the hooks emit them,
//                          their texts pinned (EventSink::pin). record_cpu_ns_per_event: the loop
//                          into the tracer; harness_cpu_ns_per_event: the same loop into a sink
//                          that does nothing (the loop, the times, the virtual call);
//                          tracer_cpu_ns_per_event: the difference, the tracer's own cost (issue
//                          36's target: <= 10)
//   record_cold            the same with the caches taken between events, as a model's weights take
//                          them in a decode: before each event the thread reads the next 128 KiB
//                          of a 256 MiB buffer (a decode streams about that much per hooked call).
//                          cold_ns_per_event: the median over 15 rounds of (time in the tracer's
//                          call - time in the call of a sink that does nothing) per event, each call
//                          timed by the steady clock, the two arms in turn; empty_sink_ns_per_event:
//                          the second term (the clock reads and a virtual call)
//   record_only_interned, record_cold_interned  the same with texts that are not pinned (views of
//                          the modules' own strings), interned by their bytes on every event
// Issue targets (reported, not asserted): >= 2M events/s, <= 24 bytes/event, >= 0.8 of the raw insert.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "storage/store.h"
#include "tracer/event_writer.h"
#include "tracer/host_tracer.h"

namespace {

namespace fs = std::filesystem;
using namespace hs;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// CPU seconds of the whole process (all threads): on a shared machine wall time includes waiting
// for a core; CPU time does not.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }
// CPU seconds of the calling thread only.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

tracer::RunInfo run_info(const std::string& scenario) {
  tracer::RunInfo i;
  i.scenario = scenario;
  i.policy = "offload-only";
  i.mode = "eager";
  i.model = "bench";
  return i;
}

// The strings a 30-layer decoder's hooks would report.
struct Vocabulary {
  std::vector<std::string> modules;
  std::vector<std::string> all;  // index = StrId
  Vocabulary() {
    const char* parts[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                           "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    for (int l = 0; l < 30; ++l)
      for (const char* p : parts) modules.push_back("model.layers." + std::to_string(l) + "." + p);
    all = modules;
    for (const char* s : {"AlignDevicesHook", "Linear", "0", "1", "cpu", "weight", "bfloat16",
                          "AlignDevicesHook._onload_weights"})
      all.emplace_back(s);
  }
  tracer::StrId id(const std::string& s) const {
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] == s) return static_cast<tracer::StrId>(i);
    std::abort();
  }
};

enum class Mix { HookSpans, Realistic };

// Event i of a workload, with run-scoped string ids of `v`. Times advance ~1 µs per event.
tracer::Record make_record(const Vocabulary& v, Mix mix, int64_t i, int64_t t0) {
  const auto module = static_cast<tracer::StrId>(i % static_cast<int64_t>(v.modules.size()));
  const int64_t start = t0 + i * 1000;
  static const tracer::StrId hook = v.id("AlignDevicesHook"), linear = v.id("Linear"), d0 = v.id("0"),
                             d1 = v.id("1"), cpu = v.id("cpu"), weight = v.id("weight"), bf16 = v.id("bfloat16"),
                             onload = v.id("AlignDevicesHook._onload_weights");
  const int slot = mix == Mix::HookSpans ? 0 : static_cast<int>(i % 20);
  namespace rec = tracer::rec;
  const auto phase = (i & 1) ? events::HookPhase::PostForward : events::HookPhase::PreForward;
  if (slot < 8) return tracer::Record::of(rec::HookSpan{hook, phase, module, linear, 0, start, start + 700});
  if (slot < 11) return tracer::Record::of(rec::ModuleCompute{module, linear, d0, 0, start, start + 900});
  if (slot < 14) return tracer::Record::of(rec::DisabledScope{onload, module, 1, start, start + 400});
  if (slot < 16) return tracer::Record::of(rec::Transfer{d0, d1, 8192, true, module, start, start + 300});
  if (slot < 18)
    return tracer::Record::of(rec::WeightSwap{(i & 1) == 0, module, weight, 2 << 20, bf16, events::WeightSource::Cpu,
                                              d0, false, start, start + 500});
  return tracer::Record::of(rec::MemoryCounter{cpu, int64_t{1} << 30, start});
}

// The event a record was made from, reported to `sink` (strings resolved through `v`).
void replay(events::EventSink& sink, const Vocabulary& v, const tracer::Record& r) {
  tracer::visit(r, [&](const auto& recorded) {
    using R = std::decay_t<decltype(recorded)>;
    kinds::rebind_t<R, kinds::Emitted> e;
    R::columns([&](auto tag, std::string_view, std::string_view, auto field) {
      using Tag = typename decltype(tag)::type;
      if constexpr (kinds::is_text<Tag>)
        field(e) = v.all[field(recorded)];
      else if constexpr (!kinds::is_column_only<Tag>)
        field(e) = field(recorded);
    });
    events::emit(sink, e);
  });
}

// The peer of Store::write_batch: the same rows, already in memory, inserted into the same
// tables (their CREATE statements copied from the store's file, no indexes) by one prepared
// INSERT per table in one transaction, with the store's pragmas. Returns {events/s, CPU
// events/s, bytes per event} for `events` events; the rows are read from `store_file` first
// (not timed).
struct RawInsert {
  double events_per_s = 0, events_per_cpu_s = 0, bytes_per_event = 0;
};

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    throw std::runtime_error(std::string("raw insert: ") + what + ": " + sqlite3_errmsg(db));
}

RawInsert raw_insert(const fs::path& store_file, const fs::path& raw_file, int64_t events) {
  struct Table {
    std::string create, name;
    int columns = 0;
    std::vector<sqlite3_int64> values;  // row-major; every event column is an integer
  };
  std::vector<Table> tables;
  {
    sqlite3* src = nullptr;
    check(sqlite3_open_v2(store_file.c_str(), &src, SQLITE_OPEN_READONLY, nullptr), src, "open the store's file");
    sqlite3_stmt* q = nullptr;
    check(sqlite3_prepare_v2(src, "SELECT name, sql FROM sqlite_master WHERE type='table'", -1, &q, nullptr), src,
          "list tables");
    while (sqlite3_step(q) == SQLITE_ROW)
    {
      Table t;
      t.create = reinterpret_cast<const char*>(sqlite3_column_text(q, 1));
      t.name = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
      tables.push_back(std::move(t));
    }
    sqlite3_finalize(q);
    for (Table& t : tables) {  // only the event tables: integer rows, many of them
      const std::string sel = "SELECT * FROM \"" + t.name + "\"";
      check(sqlite3_prepare_v2(src, sel.c_str(), -1, &q, nullptr), src, "read a table");
      t.columns = sqlite3_column_count(q);
      bool all_int = true;
      while (all_int && sqlite3_step(q) == SQLITE_ROW)
        for (int c = 0; c < t.columns; ++c) {
          const int type = sqlite3_column_type(q, c);
          if (type != SQLITE_INTEGER && type != SQLITE_NULL) all_int = false;
          t.values.push_back(sqlite3_column_int64(q, c));
        }
      sqlite3_finalize(q);
      if (!all_int || t.values.size() < 1000) t.values.clear();
    }
    sqlite3_close(src);
  }
  std::erase_if(tables, [](const Table& t) { return t.values.empty(); });

  fs::remove(raw_file);
  sqlite3* db = nullptr;
  check(sqlite3_open(raw_file.c_str(), &db), db, "create the raw file");
  check(sqlite3_exec(db,
                     "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                     "PRAGMA cache_size=-32768;",
                     nullptr, nullptr, nullptr),
        db, "pragmas");
  for (const Table& t : tables) check(sqlite3_exec(db, t.create.c_str(), nullptr, nullptr, nullptr), db, "create");
  const auto start = Clock::now();
  const double cpu0 = cpu_seconds();
  check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db, "begin");
  for (const Table& t : tables) {
    std::string ins = "INSERT INTO \"" + t.name + "\" VALUES (";
    for (int c = 0; c < t.columns; ++c) ins += c ? ",?" : "?";
    ins += ")";
    sqlite3_stmt* st = nullptr;
    check(sqlite3_prepare_v2(db, ins.c_str(), -1, &st, nullptr), db, "prepare insert");
    for (size_t row = 0; row < t.values.size(); row += static_cast<size_t>(t.columns)) {
      for (int c = 0; c < t.columns; ++c) sqlite3_bind_int64(st, c + 1, t.values[row + static_cast<size_t>(c)]);
      check(sqlite3_step(st), db, "insert");
      sqlite3_reset(st);
    }
    sqlite3_finalize(st);
  }
  check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
  RawInsert r;
  const double secs = seconds_since(start), cpu = cpu_seconds() - cpu0;
  sqlite3_close(db);  // folds the WAL in, as the store's close does
  r.events_per_s = static_cast<double>(events) / secs;
  r.events_per_cpu_s = static_cast<double>(events) / cpu;
  r.bytes_per_event = static_cast<double>(fs::file_size(raw_file)) / static_cast<double>(events);
  fs::remove(raw_file);
  return r;
}

nlohmann::json run_workload(const fs::path& dir, Mix mix, int64_t events) {
  const Vocabulary v;
  const std::string name = mix == Mix::HookSpans ? "hook_spans" : "realistic_mix";
  nlohmann::json out;
  out["events"] = events;
  const int64_t t0 = events::now_ns();

  // 1. Store::write_batch alone.
  const fs::path file = dir / (name + ".hscope");
  double store_s = 0, store_cpu_s = 0;
  {
    storage::Store store(file, {.overwrite = true});
    const int64_t run = store.begin_run(run_info(name));
    std::vector<tracer::StringDef> defs;
    for (size_t i = 0; i < v.all.size(); ++i) defs.push_back({static_cast<tracer::StrId>(i), v.all[i]});
    constexpr int64_t kBatch = 65536;
    std::vector<tracer::Record> batch;
    batch.reserve(kBatch);
    const tracer::ThreadDef thread{0, 1};
    const auto start = Clock::now();
    const double cpu0 = cpu_seconds();
    for (int64_t done = 0; done < events;) {
      batch.clear();
      const int64_t n = std::min(kBatch, events - done);
      for (int64_t k = 0; k < n; ++k) batch.push_back(make_record(v, mix, done + k, t0));
      tracer::RecordBatch b;
      b.run_id = run;
      if (done == 0) {
        b.strings = defs;
        b.threads = {&thread, 1};
      }
      b.records = batch;
      tracer::RunEnd end{tracer::RunStatus::Complete, {}, t0 + events * 1000, 0};
      done += n;
      if (done == events) b.end = &end;
      store.write_batch(b);
    }
    store_s = seconds_since(start);
    store_cpu_s = cpu_seconds() - cpu0;
  }
  const double bytes = static_cast<double>(fs::file_size(file));
  const RawInsert raw = raw_insert(file, dir / (name + "_raw.sqlite"), events);
  out["raw_insert_events_per_s"] = raw.events_per_s;
  out["raw_insert_bytes_per_event"] = raw.bytes_per_event;
  out["store_over_raw_insert"] = store_s > 0 ? (static_cast<double>(events) / store_s) / raw.events_per_s : 0;
  out["store_over_raw_insert_cpu"] = (static_cast<double>(events) / store_cpu_s) / raw.events_per_cpu_s;
  {
    storage::Store store(file);
    store.finalize();
  }
  const double bytes_indexed = static_cast<double>(fs::file_size(file));
  out["store_events_per_s"] = static_cast<double>(events) / store_s;
  out["store_events_per_cpu_s"] = static_cast<double>(events) / store_cpu_s;
  out["bytes_per_event"] = bytes / static_cast<double>(events);
  out["bytes_per_event_indexed"] = bytes_indexed / static_cast<double>(events);

  // 2. HostTracer → Store, one recording thread, until end_run has committed everything.
  const fs::path file2 = dir / (name + "_tracer.hscope");
  {
    storage::Store store(file2, {.overwrite = true});
    tracer::TracerOptions o;
    o.chunks = 1024;  // 4M records of buffer: the burst may outrun SQLite without drops
    tracer::HostTracer tr(store, o);
    tr.begin_run(run_info(name));
    events::EventSink& sink = tr;
    const auto start = Clock::now();
    const double thread_cpu0 = thread_cpu_seconds();
    for (int64_t i = 0; i < events; ++i) {
      replay(sink, v, make_record(v, mix, i, t0));
    }
    const double record_s = seconds_since(start);
    const double record_cpu_s = thread_cpu_seconds() - thread_cpu0;
    const auto st = tr.end_run();
    const double total_s = seconds_since(start);
    out["tracer_record_ns_per_event"] = record_s * 1e9 / static_cast<double>(events);
    out["tracer_record_cpu_ns_per_event"] = record_cpu_s * 1e9 / static_cast<double>(events);
    out["tracer_events_per_s"] = static_cast<double>(st.records_written) / total_s;
    out["tracer_dropped"] = st.dropped();
  }
  fs::remove(file);
  fs::remove(file2);
  return out;
}

// A writer that keeps nothing: what recording costs the recording thread, without SQLite.
struct DiscardingWriter : tracer::EventWriter {
  int64_t begin_run(const tracer::RunInfo&) override { return 1; }
  void write_batch(const tracer::RecordBatch&) override {}
};

// A pre_forward and a post_forward span of every module of `v`. With `pin`, as the hooks emit
// them: their texts pinned by the sink once (hooks/event_adapter.h), so the tracer records them by
// index; without, views of names that live as long as the modules (here: `v`), which the tracer
// interns by their bytes (what an importer or another producer's events cost).
std::vector<events::HookSpan> hook_spans(const Vocabulary& v, events::EventSink* pin = nullptr) {
  auto text = [&](std::string_view s) { return pin ? pin->pin(s) : s; };
  std::vector<events::HookSpan> spans;
  for (const std::string& module : v.modules)
    for (const auto phase : {events::HookPhase::PreForward, events::HookPhase::PostForward})
      spans.push_back(events::HookSpan{text("AlignDevicesHook"), phase, text(module), text("Linear"), 0, 0, 0});
  return spans;
}

// The tracer's own cost per event on the recording thread (the row Tracy's "a few ns per zone"
// compares with): hook spans built beforehand as the hooks emit them (views of module names that
// live as long as the modules), recorded through the EventSink interface into a tracer whose
// writer discards the batches. CPU ns of the recording thread per event, best of 5 rounds.
nlohmann::json record_only(int64_t events, bool pinned) {
  const Vocabulary v;
  DiscardingWriter writer;
  tracer::TracerOptions o;
  o.chunks = 256;
  tracer::HostTracer tr(writer, o);
  events::EventSink nothing;  // the harness alone: the loop, the span's times, a virtual call
  std::vector<events::HookSpan> spans = hook_spans(v, pinned ? &tr : nullptr);
  // CPU ns per event of the loop into `sink`.
  auto run = [&](events::EventSink& sink) {
    const int64_t t0 = events::now_ns();
    const double cpu0 = thread_cpu_seconds();
    size_t k = 0;  // the span of event i: i % spans.size(), without a division per event
    for (int64_t i = 0; i < events; ++i) {
      events::HookSpan& e = spans[k];
      if (++k == spans.size()) k = 0;
      e.start_ns = t0 + i * 1000;
      e.end_ns = e.start_ns + 700;
      sink.hook_span(e);
    }
    return (thread_cpu_seconds() - cpu0) * 1e9 / static_cast<double>(events);
  };
  double best = 1e30, harness = 1e30;
  uint64_t dropped = 0;
  for (int round = 0; round < 5; ++round) {
    harness = std::min(harness, run(nothing));
    tr.begin_run(run_info("record_only"));
    best = std::min(best, run(tr));
    dropped += tr.end_run().dropped();
  }
  nlohmann::json out = {{"events", events},
                        {"record_cpu_ns_per_event", best},
                        {"harness_cpu_ns_per_event", harness},
                        {"tracer_cpu_ns_per_event", best - harness},
                        {"dropped", dropped}};
  if (pinned) out["target_ns"] = 10;
  return out;
}

// What an event costs when the tracer's lines are cold (record_cold in the header). The stream
// between events is read the same way in both arms; only the sink differs.
nlohmann::json record_cold(int64_t events, bool pinned) {
  const Vocabulary v;
  constexpr size_t kStream = size_t{256} << 20, kPerEvent = size_t{128} << 10;
  std::vector<uint64_t> weights(kStream / sizeof(uint64_t), 1);
  DiscardingWriter writer;
  tracer::TracerOptions o;
  o.chunks = 16;
  tracer::HostTracer tr(writer, o);
  std::vector<events::HookSpan> spans = hook_spans(v, pinned ? &tr : nullptr);
  events::EventSink nothing;
  uint64_t sum = 0;
  size_t at = 0;
  auto run = [&](events::EventSink& sink) {
    const int64_t t0 = events::now_ns();
    int64_t in_sink = 0;
    for (int64_t i = 0; i < events; ++i) {
      const uint64_t* w = weights.data() + at / sizeof(uint64_t);
      for (size_t k = 0; k < kPerEvent / sizeof(uint64_t); k += 8) sum += w[k];  // one load a line
      at = (at + kPerEvent) % kStream;
      events::HookSpan& e = spans[static_cast<size_t>(i) % spans.size()];
      e.start_ns = t0 + i * 1000;
      e.end_ns = e.start_ns + 700;
      const int64_t a = events::now_ns();
      sink.hook_span(e);
      in_sink += events::now_ns() - a;
    }
    return static_cast<double>(in_sink) / static_cast<double>(events);
  };
  std::vector<double> differences, stream;
  uint64_t dropped = 0;
  for (int round = 0; round < 15; ++round) {
    const double without = run(nothing);
    tr.begin_run(run_info("record_cold"));
    differences.push_back(run(tr) - without);
    dropped += tr.end_run().dropped();
    stream.push_back(without);
  }
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  return {{"events", events},
          {"cold_ns_per_event", median(differences)},
          {"empty_sink_ns_per_event", median(stream)},
          {"dropped", dropped},
          {"checksum", sum % 2}};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t events = 2'000'000;
  std::string only;  // one workload's name, or all of them
  fs::path dir = fs::temp_directory_path() / ("hookscope-ingest-" + std::to_string(::getpid()));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--events" && i + 1 < argc) {
      events = std::atoll(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--events N] [--dir DIR] [--only WORKLOAD]\n", argv[0]);
      return 2;
    }
  }
  if (events <= 0) {
    std::fprintf(stderr, "--events must be > 0\n");
    return 2;
  }
  try {
    fs::create_directories(dir);
    nlohmann::json out;
    const auto wanted = [&](const char* name) { return only.empty() || only == name; };
    if (wanted("hook_spans")) out["hook_spans"] = run_workload(dir, Mix::HookSpans, events);
    if (wanted("realistic_mix")) out["realistic_mix"] = run_workload(dir, Mix::Realistic, events);
    for (const bool pinned : {true, false}) {
      const std::string suffix = pinned ? "" : "_interned";
      if (wanted(("record_only" + suffix).c_str()))
        out["record_only" + suffix] = record_only(std::min<int64_t>(events, 1000000), pinned);
      if (wanted(("record_cold" + suffix).c_str()))
        out["record_cold" + suffix] = record_cold(std::min<int64_t>(events, 20000), pinned);
    }
    if (out.empty()) {
      std::fprintf(stderr,
                   "--only: no workload '%s' (hook_spans, realistic_mix, record_only, record_cold, "
                   "record_only_interned, record_cold_interned)\n",
                   only.c_str());
      return 2;
    }
    out["targets"] = {{"events_per_s", 2'000'000}, {"bytes_per_event", 24}, {"store_over_raw_insert", 0.8}};
    std::printf("%s\n", out.dump(2).c_str());
    fs::remove_all(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ingest: %s\n", e.what());
    return 1;
  }
  return 0;
}
