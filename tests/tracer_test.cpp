// HostTracer and the CUPTI seam, against an in-memory EventWriter (no SQLite: the tracer
// layer sits below storage). The binary replaces the global operator new to count heap
// allocations made by recording threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tracer/cupti_tracer.h"
#include "tracer/event_writer.h"
#include "tracer/events.h"
#include "tracer/host_tracer.h"

// ---- allocation counting -------------------------------------------------------------
namespace {
thread_local bool t_count_allocs = false;
thread_local size_t t_allocs = 0;
void* counted_alloc(size_t n) {
  if (t_count_allocs) ++t_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* counted_aligned_alloc(size_t n, std::align_val_t a) {
  if (t_count_allocs) ++t_allocs;
  const size_t al = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void* operator new(size_t n, std::align_val_t a) { return counted_aligned_alloc(n, a); }
void* operator new[](size_t n, std::align_val_t a) { return counted_aligned_alloc(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

using namespace hs;
using tracer::HostTracer;
using tracer::RunStatus;
using tracer::TracerOptions;

// ---- an in-memory EventWriter that checks the batch contract --------------------------
struct Got {
  tracer::EventKind kind;
  uint32_t thread;
  tracer::Record ev;  // string ids as delivered
  std::vector<std::string> strs;  // the event's strings, resolved, in for_each_string order
};

class MemoryWriter : public tracer::EventWriter {
 public:
  int64_t begin_run(const tracer::RunInfo& info) override {
    std::lock_guard lk(mu);
    infos.push_back(info);
    return static_cast<int64_t>(infos.size());
  }
  void write_batch(const tracer::RecordBatch& b) override {
    {
      std::unique_lock lk(gate_mu);
      gate_cv.wait(lk, [&] { return gate_open; });
    }
    std::lock_guard lk(mu);
    ++batch_calls;
    if (fail_on_batch && batch_calls == fail_on_batch) throw std::runtime_error("disk on fire (test)");
    if (b.records.size() > max_batch) max_batch = b.records.size();
    auto& strings = run_strings[b.run_id];
    for (const auto& s : b.strings) {
      auto [it, inserted] = strings.emplace(s.id, std::string(s.text));
      if (!inserted) contract_errors.push_back("string id " + std::to_string(s.id) + " defined twice");
    }
    for (const auto& t : b.threads) threads[b.run_id].push_back(t);
    for (const auto& r : b.records) {
      Got g{r.kind, r.thread, r, {}};
      tracer::Record copy = r;
      tracer::for_each_string(copy, [&](tracer::StrId& id) {
        auto it = strings.find(id);
        if (it == strings.end()) {
          contract_errors.push_back("string id " + std::to_string(id) + " used before defined");
          g.strs.push_back("?");
        } else {
          g.strs.push_back(it->second);
        }
      });
      records[b.run_id].push_back(std::move(g));
    }
    if (b.end) {
      if (ends.count(b.run_id)) contract_errors.push_back("run ended twice");
      ends[b.run_id] = {b.end->status, std::string(b.end->error), b.end->dropped_records};
      last_batch_had_end[b.run_id] = true;
    }
  }
  void close_gate() {
    std::lock_guard lk(gate_mu);
    gate_open = false;
  }
  void open_gate() {
    {
      std::lock_guard lk(gate_mu);
      gate_open = true;
    }
    gate_cv.notify_all();
  }

  struct End {
    RunStatus status;
    std::string error;
    uint64_t dropped;
  };
  std::mutex mu;
  std::vector<tracer::RunInfo> infos;
  std::map<int64_t, std::map<tracer::StrId, std::string>> run_strings;
  std::map<int64_t, std::vector<tracer::ThreadDef>> threads;
  std::map<int64_t, std::vector<Got>> records;
  std::map<int64_t, End> ends;
  std::map<int64_t, bool> last_batch_had_end;
  std::vector<std::string> contract_errors;
  size_t batch_calls = 0, fail_on_batch = 0, max_batch = 0;

  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool gate_open = true;
};

tracer::RunInfo info(const std::string& scenario) {
  tracer::RunInfo i;
  i.scenario = scenario;
  i.policy = "offload-only";
  i.mode = "eager";
  return i;
}

// One event of every kind, with recognisable strings.
void emit_all_kinds(events::EventSink& s, int64_t t) {
  s.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.0", "LlamaDecoderLayer", 0, t, t + 1});
  s.weight_swap({true, "model.layers.0.mlp", "weight", 4096, "bfloat16", events::WeightSource::Disk, "0", true, t,
                 t + 2});
  s.transfer({"cpu", "1", 512, true, "model.layers.1", t, t + 3});
  s.disabled_scope({"AlignDevicesHook._onload_weights", "model.layers.0", 2, t, t + 4});
  s.module_compute({"model.layers.0", "LlamaDecoderLayer", "0", 0, t, t + 5});
  s.region({3, 77, "eager", "2/0", t, t + 6});
  s.graph_break({"Skip calling `torch.compiler.disable()`d function", "AlignDevicesHook.pre_forward", "model.layers.2",
                 "model > model.layers.2", t});
  s.generation_step({5, 42, t, t + 7});
  s.memory_counter({"0", 123456, t});
}

TEST(HostTracer, RecordsEveryEventKindWithItsStrings) {
  MemoryWriter w;
  HostTracer tr(w);
  const int64_t run = tr.begin_run(info("kinds"));
  EXPECT_EQ(run, 1);
  EXPECT_TRUE(tr.recording());
  emit_all_kinds(tr, 1000);
  const auto stats = tr.end_run(RunStatus::Complete);
  EXPECT_FALSE(tr.recording());
  EXPECT_EQ(stats.recorded, 9u);
  EXPECT_EQ(stats.dropped(), 0u);
  EXPECT_EQ(stats.records_written, 9u);
  ASSERT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
  const auto& got = w.records[run];
  ASSERT_EQ(got.size(), 9u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(static_cast<size_t>(got[i].kind), i);

  const auto& hs = got[0].ev.get<tracer::rec::HookSpan>();
  EXPECT_EQ(hs.start_ns, 1000);
  EXPECT_EQ(hs.end_ns, 1001);
  EXPECT_EQ(hs.phase, events::HookPhase::PreForward);
  EXPECT_EQ(got[0].strs, (std::vector<std::string>{"AlignDevicesHook", "model.layers.0", "LlamaDecoderLayer"}));
  const auto& ws = got[1].ev.get<tracer::rec::WeightSwap>();
  EXPECT_TRUE(ws.onload);
  EXPECT_TRUE(ws.pinned);
  EXPECT_EQ(ws.bytes, 4096);
  EXPECT_EQ(ws.source, events::WeightSource::Disk);
  EXPECT_EQ(got[1].strs, (std::vector<std::string>{"model.layers.0.mlp", "weight", "bfloat16", "0"}));
  const auto& tf = got[2].ev.get<tracer::rec::Transfer>();
  EXPECT_TRUE(tf.emulated);
  EXPECT_EQ(tf.bytes, 512);
  EXPECT_EQ(got[2].strs, (std::vector<std::string>{"cpu", "1", "model.layers.1"}));
  EXPECT_EQ(got[3].ev.get<tracer::rec::DisabledScope>().depth, 2);
  EXPECT_EQ(got[4].strs, (std::vector<std::string>{"model.layers.0", "LlamaDecoderLayer", "0"}));
  const auto& rg = got[5].ev.get<tracer::rec::Region>();
  EXPECT_EQ(rg.index, 3);
  EXPECT_EQ(rg.op_count, 77);
  EXPECT_EQ(got[5].strs, (std::vector<std::string>{"eager", "2/0"}));
  EXPECT_EQ(got[6].strs[3], "model > model.layers.2");
  EXPECT_EQ(got[6].ev.get<tracer::rec::GraphBreak>().time_ns, 1000);
  const auto& gs = got[7].ev.get<tracer::rec::GenerationStep>();
  EXPECT_EQ(gs.step, 5);
  EXPECT_EQ(gs.token, 42);
  EXPECT_EQ(got[8].ev.get<tracer::rec::MemoryCounter>().bytes, 123456);

  // "model.layers.0" appears in 4 events but is defined once; 17 distinct strings in all.
  EXPECT_EQ(w.run_strings[run].size(), 17u);
  ASSERT_TRUE(w.ends.count(run));
  EXPECT_EQ(w.ends[run].status, RunStatus::Complete);
  EXPECT_EQ(w.ends[run].dropped, 0u);
  ASSERT_EQ(w.threads[run].size(), 1u);
  EXPECT_GT(w.threads[run][0].os_tid, 0);
}

TEST(HostTracer, EventsOutsideARunAreIgnored) {
  MemoryWriter w;
  HostTracer tr(w);
  emit_all_kinds(tr, 1);  // before any run
  tr.begin_run(info("a"));
  tr.end_run();
  emit_all_kinds(tr, 2);  // after the run
  EXPECT_TRUE(w.records[1].empty());
  EXPECT_EQ(tr.stats().recorded, 0u);
}

TEST(HostTracer, LifecycleMisuseThrows) {
  MemoryWriter w;
  HostTracer tr(w);
  EXPECT_THROW(tr.end_run(), std::logic_error);
  EXPECT_THROW(tr.flush(), std::logic_error);
  tr.begin_run(info("a"));
  EXPECT_THROW(tr.begin_run(info("b")), std::logic_error);
  tr.end_run();
  EXPECT_THROW(HostTracer(w, TracerOptions{.chunk_records = 0}), std::invalid_argument);
}

TEST(HostTracer, MultiThreadRecordingWithConcurrentFlushesLandsEveryEventOnce) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 40000;
  MemoryWriter w;
  TracerOptions o;
  o.chunk_records = 512;
  o.chunks = 1024;  // 512K records of room: this test is about delivery, not drops
  o.batch_records = 3000;
  HostTracer tr(w, o);
  const int64_t run = tr.begin_run(info("mt"));

  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  std::vector<std::string> names(kThreads);
  for (int t = 0; t < kThreads; ++t) names[t] = "model.layers." + std::to_string(t) + ".mlp";
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        const int64_t seq = int64_t{t} * kPerThread + i;
        if (i % 2 == 0)
          tr.generation_step({seq, t, seq, seq + 1});
        else
          tr.hook_span({"AlignDevicesHook", events::HookPhase::PostForward, names[t], "LlamaMLP", 0, seq, seq + 1});
      }
    });
  }
  while (ready.load() < kThreads) std::this_thread::yield();
  go = true;
  for (int f = 0; f < 20; ++f) {  // flushes race with recording
    tr.flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& th : threads) th.join();
  const auto stats = tr.end_run();

  EXPECT_EQ(stats.recorded, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(stats.dropped(), 0u);
  EXPECT_GT(stats.chunks_handed_off, 0u);
  ASSERT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
  EXPECT_LE(w.max_batch, o.batch_records);
  const auto& got = w.records[run];
  ASSERT_EQ(got.size(), size_t{kThreads} * kPerThread);
  // Every (thread, seq) exactly once; strings resolved to the recording thread's module.
  std::vector<uint8_t> seen(size_t{kThreads} * kPerThread, 0);
  std::map<uint32_t, int> thread_of_index;
  for (const Got& g : got) {
    const int64_t seq = g.kind == tracer::EventKind::GenerationStep ? g.ev.get<tracer::rec::GenerationStep>().step
                                                                    : g.ev.get<tracer::rec::HookSpan>().start_ns;
    ASSERT_GE(seq, 0);
    ASSERT_LT(seq, int64_t{kThreads} * kPerThread);
    ASSERT_EQ(seen[seq]++, 0) << "record delivered twice: " << seq;
    const int t = static_cast<int>(seq / kPerThread);
    if (g.kind != tracer::EventKind::GenerationStep) {
      EXPECT_EQ(g.strs[1], names[t]);
    }
    auto it = thread_of_index.emplace(g.thread, t).first;
    EXPECT_EQ(it->second, t) << "thread index " << g.thread << " mixes two threads";
  }
  EXPECT_EQ(thread_of_index.size(), size_t{kThreads});
  EXPECT_EQ(w.threads[run].size(), size_t{kThreads});
  std::set<int64_t> tids;
  for (const auto& td : w.threads[run]) tids.insert(td.os_tid);
  EXPECT_EQ(tids.size(), size_t{kThreads});
  // 1 hook name + 8 module names + 1 class name.
  EXPECT_EQ(w.run_strings[run].size(), 10u);
}

TEST(HostTracer, RecordingPathDoesNotAllocate) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50000;
  MemoryWriter w;
  TracerOptions o;
  o.chunk_records = 1024;  // ~50 chunk hand-offs per thread: the spare path is exercised
  o.chunks = 512;
  HostTracer tr(w, o);
  tr.begin_run(info("alloc"));
  // Strings prepared up front; many distinct ones so interning happens during the burst.
  std::vector<std::string> modules;
  for (int i = 0; i < 300; ++i) modules.push_back("model.layers." + std::to_string(i) + ".self_attn.q_proj");
  std::atomic<size_t> allocs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      t_allocs = 0;
      t_count_allocs = true;
      for (int i = 0; i < kPerThread; ++i) {
        const auto& m = modules[static_cast<size_t>(i) % modules.size()];
        const int64_t now = events::now_ns();
        switch (i % 5) {
          case 0: tr.hook_span({"AlignDevicesHook", events::HookPhase::PreForward, m, "Linear", 0, now, now}); break;
          case 1: tr.weight_swap({true, m, "weight", 1024, "float32", events::WeightSource::Cpu, "0", false, now, now}); break;
          case 2: tr.transfer({"0", "1", 64, true, m, now, now}); break;
          case 3: tr.module_compute({m, "Linear", "0", 0, now, now}); break;
          default: tr.memory_counter({"0", i, now}); break;
        }
      }
      t_count_allocs = false;
      allocs += t_allocs;
    });
  }
  for (auto& th : threads) th.join();
  const auto stats = tr.end_run();
  EXPECT_EQ(allocs.load(), 0u) << "heap allocations on recording threads";
  EXPECT_EQ(stats.recorded, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(stats.dropped(), 0u);
  EXPECT_GE(stats.chunks_handed_off, uint64_t{kThreads} * (kPerThread / 1024));
  EXPECT_EQ(stats.records_written, stats.recorded);
}

// The writer thread leaves full chunks alone until `writer_wake_chunks` of them wait (its SQLite
// work would share the cores with the model), and writes them at flush(); with 1 it writes each
// chunk as it fills.
TEST(HostTracer, TheWriterWaitsForTheWakeMarkOrAFlush) {
  auto written = [](MemoryWriter& w, int64_t run) {
    std::lock_guard lk(w.mu);
    return w.records[run].size();
  };
  auto record = [](HostTracer& tr, int n) {
    for (int i = 0; i < n; ++i) tr.generation_step({i, 0, i, i + 1});
  };
  for (const size_t wake : {size_t{0}, size_t{1}}) {
    SCOPED_TRACE("writer_wake_chunks " + std::to_string(wake));
    MemoryWriter w;
    TracerOptions o;
    o.chunk_records = 16;
    o.chunks = 8;  // wake 0: half of them, 4
    o.writer_wake_chunks = wake;
    HostTracer tr(w, o);
    const int64_t run = tr.begin_run(info("wake"));
    record(tr, 3 * 16);  // three full chunks
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    if (wake == 1) {
      while (written(w, run) < 3 * 16 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(written(w, run), 3u * 16) << "each full chunk is written as it fills";
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(written(w, run), 0u) << "three of eight chunks full: the writer sleeps";
    record(tr, 16);  // the fourth: the wake mark
    while (written(w, run) < 4 * 16 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(written(w, run), 4u * 16);
    record(tr, 16 + 5);  // one more full chunk and a partial one
    tr.flush();
    EXPECT_EQ(written(w, run), 5u * 16 + 5) << "flush writes what waits, full and partial";
    const auto st = tr.end_run();
    EXPECT_EQ(st.dropped(), 0u);
  }
  MemoryWriter w;
  EXPECT_THROW(HostTracer(w, TracerOptions{.chunks = 4, .writer_wake_chunks = 5}), std::invalid_argument);
}

TEST(HostTracer, DropsAndCountsWhenNoSpareChunkThenReusesChunks) {
  MemoryWriter w;
  TracerOptions o;
  o.chunk_records = 8;
  o.chunks = 2;
  HostTracer tr(w, o);
  const int64_t run = tr.begin_run(info("drops"));
  w.close_gate();  // the writer blocks inside write_batch: no chunk comes back
  for (int i = 0; i < 100; ++i) tr.generation_step({i, 0, i, i + 1});
  auto s = tr.stats();
  // Chunk A (8) is held by the blocked writer, chunk B (8) is full and queued: 84 dropped.
  EXPECT_EQ(s.recorded, 16u);
  EXPECT_EQ(s.dropped_no_chunk, 84u);
  EXPECT_EQ(s.chunks_handed_off, 2u);
  w.open_gate();
  tr.flush();
  // Chunks come back: 10 more fills reuse the same two chunks.
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 8; ++i) tr.generation_step({1000 + round * 8 + i, 0, 0, 1});
    tr.flush();
  }
  s = tr.stats();
  EXPECT_EQ(s.recorded, 16u + 80u);
  EXPECT_EQ(s.dropped_no_chunk, 84u);
  EXPECT_EQ(s.chunks_handed_off, 12u);
  const auto end = tr.end_run(RunStatus::Complete);
  EXPECT_EQ(end.dropped(), 84u);
  EXPECT_EQ(w.records[run].size(), 96u);
  ASSERT_TRUE(w.ends.count(run));
  EXPECT_EQ(w.ends[run].dropped, 84u);  // the consumer learns the drop count with the run's end
}

TEST(HostTracer, ThreadSlotAndStringTableOverflowsAreCounted) {
  MemoryWriter w;
  TracerOptions o;
  o.max_threads = 1;
  o.strings_per_thread = 4;
  HostTracer tr(w, o);
  const int64_t run = tr.begin_run(info("overflow"));
  tr.memory_counter({"a", 1, 1});
  tr.memory_counter({"b", 1, 1});
  tr.memory_counter({"c", 1, 1});
  tr.memory_counter({"d", 1, 1});
  tr.memory_counter({"e", 1, 1});  // fifth distinct string: no room
  tr.memory_counter({"a", 2, 2});  // known string: fine
  std::thread other([&] { tr.memory_counter({"a", 3, 3}); });  // no second thread slot
  other.join();
  const auto s = tr.end_run();
  EXPECT_EQ(s.recorded, 5u);
  EXPECT_EQ(s.dropped_strings, 1u);
  EXPECT_EQ(s.dropped_no_thread, 1u);
  EXPECT_EQ(w.records[run].size(), 5u);
  EXPECT_EQ(w.ends[run].dropped, 2u);
}

TEST(HostTracer, FlushDeliversPartialChunksAndEndCommitsWithTheLastBatch) {
  MemoryWriter w;
  HostTracer tr(w);  // default 4096-record chunks: 10 records stay in a partial chunk
  const int64_t run = tr.begin_run(info("flush"));
  for (int i = 0; i < 10; ++i) tr.generation_step({i, i, i, i});
  tr.flush();
  {
    std::lock_guard lk(w.mu);
    EXPECT_EQ(w.records[run].size(), 10u);
    EXPECT_FALSE(w.ends.count(run)) << "a flush must not end the run";
  }
  for (int i = 10; i < 15; ++i) tr.generation_step({i, i, i, i});
  const size_t batches_before_end = w.batch_calls;
  tr.end_run(RunStatus::Failed, "fullgraph=True raised Unsupported");
  EXPECT_EQ(w.batch_calls, batches_before_end + 1) << "the last records and the end share one batch";
  EXPECT_EQ(w.records[run].size(), 15u);
  EXPECT_EQ(w.ends[run].status, RunStatus::Failed);
  EXPECT_EQ(w.ends[run].error, "fullgraph=True raised Unsupported");
}

TEST(HostTracer, WriterFailureIsReportedAndTheRunIsNotEnded) {
  MemoryWriter w;
  w.fail_on_batch = 2;
  HostTracer tr(w);
  const int64_t run = tr.begin_run(info("fail"));
  tr.generation_step({0, 0, 0, 0});
  tr.flush();  // batch 1: fine
  tr.generation_step({1, 0, 0, 0});
  try {
    tr.flush();  // batch 2 throws
    FAIL() << "flush should rethrow the writer's failure";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("disk on fire"), std::string::npos);
  }
  EXPECT_THROW(tr.end_run(), std::runtime_error);
  EXPECT_FALSE(w.ends.count(run)) << "a failed run must not be marked ended";
  EXPECT_FALSE(tr.recording());
  // The tracer is usable again.
  w.fail_on_batch = 0;
  const int64_t run2 = tr.begin_run(info("after"));
  tr.generation_step({2, 0, 0, 0});
  tr.end_run();
  EXPECT_EQ(w.records[run2].size(), 1u);
  EXPECT_EQ(w.ends[run2].status, RunStatus::Complete);
}

TEST(HostTracer, ConsecutiveRunsHaveTheirOwnStringIds) {
  MemoryWriter w;
  HostTracer tr(w);
  const int64_t r1 = tr.begin_run(info("r1"));
  tr.memory_counter({"0", 1, 1});
  tr.end_run();
  const int64_t r2 = tr.begin_run(info("r2"));
  tr.memory_counter({"cpu", 2, 2});
  tr.memory_counter({"0", 3, 3});
  tr.end_run();
  ASSERT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
  EXPECT_EQ(w.run_strings[r1].size(), 1u);
  EXPECT_EQ(w.run_strings[r2].size(), 2u);
  EXPECT_EQ(w.run_strings[r2].at(0), "cpu");  // ids restart at 0 per run
  ASSERT_EQ(w.records[r2].size(), 2u);
  EXPECT_EQ(w.records[r2][1].strs[0], "0");
}

// The string cache is keyed by address: a buffer reused with other bytes of the same length
// (a stack std::string, a name rewritten in place) must still record its new text, whichever
// byte changed and whatever the length (the comparison works in 8-byte words).
TEST(HostTracer, ABufferReusedWithOtherBytesRecordsItsNewText) {
  MemoryWriter w;
  HostTracer tr(w);
  const int64_t run = tr.begin_run(info("reuse"));
  std::vector<std::string> expected;
  char buf[48];
  for (size_t len = 1; len <= 40; ++len) {
    std::memset(buf, 'a', sizeof buf);
    for (size_t pos : {size_t{0}, len / 2, len - 1}) {
      tr.memory_counter({std::string_view(buf, len), 1, 1});
      expected.emplace_back(buf, len);
      buf[pos] = static_cast<char>('b' + pos % 20);
      tr.memory_counter({std::string_view(buf, len), 2, 2});
      expected.emplace_back(buf, len);
    }
  }
  tr.end_run();
  ASSERT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
  ASSERT_EQ(w.records[run].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(w.records[run][i].strs.at(0), expected[i]) << "event " << i;
}

// Pinned texts are recorded by index: every view pin() returned records its text, in every run
// (each run defines its strings again), beside unpinned views of the same and other texts. A view
// that starts or ends inside a pinned text, or one of the texts' own bytes outside pin(), is not
// taken for it.
TEST(HostTracer, PinnedTextsRecordTheirTextAndOnlyTheViewsPinReturned) {
  MemoryWriter w;
  HostTracer tr(w);
  const std::string_view fqn = tr.pin("model.layers.12.self_attn.q_proj"), cls = tr.pin("Linear");
  EXPECT_EQ(fqn, "model.layers.12.self_attn.q_proj");
  EXPECT_EQ(tr.pin(std::string("model.layers.12.self_attn.q_proj")).data(), fqn.data());  // one copy per text
  const std::string_view empty = tr.pin("");
  const std::string own = "Linear";
  // Bytes that read as pinned index 1 ("Linear", 6 bytes) before a view of 6 other bytes.
  const std::string_view tricky = tr.pin(std::string_view("\x01\0\0\0abcdef", 10)).substr(4);
  for (int round = 0; round < 2; ++round) {
    const int64_t run = tr.begin_run(info("pinned"));
    tr.hook_span({tr.pin("AlignDevicesHook"), events::HookPhase::PreForward, fqn, cls, 1, 1, 2});
    tr.hook_span({"AlignDevicesHook", events::HookPhase::PostForward, fqn.substr(6), own, 2, 3, 4});
    tr.hook_span({"SequentialHook", events::HookPhase::PreForward, fqn.substr(0, 12), cls.substr(1), 3, 5, 6});
    tr.hook_span({"", events::HookPhase::PreForward, empty, std::string_view(fqn.data() - 1, 3), 4, 7, 8});
    tr.hook_span({cls, events::HookPhase::PreForward, tricky, tricky, 5, 9, 10});
    tr.end_run();
    ASSERT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
    const auto& got = w.records[run];
    ASSERT_EQ(got.size(), 5u);
    EXPECT_EQ(got[0].strs,
              (std::vector<std::string>{"AlignDevicesHook", "model.layers.12.self_attn.q_proj", "Linear"}));
    EXPECT_EQ(got[1].strs, (std::vector<std::string>{"AlignDevicesHook", "layers.12.self_attn.q_proj", "Linear"}));
    EXPECT_EQ(got[2].strs, (std::vector<std::string>{"SequentialHook", "model.layers", "inear"}));
    EXPECT_EQ(got[3].strs, (std::vector<std::string>{"", "", std::string(fqn.data() - 1, 3)}));
    EXPECT_EQ(got[4].strs, (std::vector<std::string>{"Linear", "abcdef", "abcdef"}));
    // A text pinned and the same text interned are one run string, as two interned copies are.
    std::set<std::string> texts;
    for (const auto& [id, text] : w.run_strings[run]) EXPECT_TRUE(texts.insert(text).second) << text << " twice";
  }
  EXPECT_EQ(tr.stats().dropped(), 0u);
}

// A pinned text is recorded by its index: an event whose texts are all pinned needs no room in the
// recording thread's string table (here none: an unpinned text is dropped for want of it).
TEST(HostTracer, PinnedTextsNeedNoRoomInTheThreadsStringTable) {
  MemoryWriter w;
  TracerOptions o;
  o.strings_per_thread = 1;
  o.string_bytes_per_thread = 0;
  HostTracer tr(w, o);
  const std::string_view hook = tr.pin("AlignDevicesHook"), fqn = tr.pin("model.layers.0.mlp"),
                         cls = tr.pin("LlamaMLP");
  const int64_t run = tr.begin_run(info("no-table"));
  for (int i = 0; i < 3; ++i) tr.hook_span({hook, events::HookPhase::PreForward, fqn, cls, i, i, i + 1});
  tr.hook_span({hook, events::HookPhase::PostForward, std::string("model.layers.0.mlp"), cls, 9, 9, 10});
  const tracer::TracerStats st = tr.end_run();
  ASSERT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
  EXPECT_EQ(st.recorded, 3u);
  EXPECT_EQ(st.dropped_strings, 1u);
  ASSERT_EQ(w.records[run].size(), 3u);
  EXPECT_EQ(w.records[run][2].strs, (std::vector<std::string>{"AlignDevicesHook", "model.layers.0.mlp", "LlamaMLP"}));
}

// pin() keeps at most pinned_strings texts in pinned_bytes (each with a 4-byte header, 4-aligned);
// past either it returns its argument.
TEST(HostTracer, PinKeepsWithinItsRoomThenReturnsItsArgument) {
  MemoryWriter w;
  TracerOptions o;
  o.pinned_strings = 3;
  HostTracer by_count(w, o);
  const std::string texts[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 3; ++i) EXPECT_NE(by_count.pin(texts[i]).data(), texts[i].data()) << texts[i];
  EXPECT_EQ(by_count.pin(texts[3]).data(), texts[3].data());
  EXPECT_NE(by_count.pin(std::string("b")).data(), nullptr);  // a text kept already is still found
  o.pinned_strings = 100;
  o.pinned_bytes = 16;
  HostTracer by_bytes(w, o);
  const std::string ten = "0123456789", two = "ab";
  EXPECT_NE(by_bytes.pin(ten).data(), ten.data());  // header 0..3, bytes 4..13
  EXPECT_EQ(by_bytes.pin(two).data(), two.data());  // its header would start at 16: no room
}

// Once pinned_strings or pinned_bytes are used up, pin() returns its argument and events with it
// are interned as any other; pinning from several threads while others record loses nothing.
TEST(HostTracer, PinningPastItsRoomFallsBackAndIsThreadSafe) {
  MemoryWriter w;
  TracerOptions o;
  o.pinned_strings = 64;
  o.pinned_bytes = 1024;
  HostTracer tr(w, o);
  const int64_t run = tr.begin_run(info("pin-threads"));
  constexpr int kThreads = 4, kNames = 40;
  std::vector<std::vector<std::string>> names(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kNames; ++i)
      names[t].push_back("model.layers." + std::to_string(i) + ".mlp.t" + std::to_string(t % 2));
  std::atomic<int> pinned_views{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kNames; ++i) {
        const std::string_view v = tr.pin(names[t][i]);
        EXPECT_EQ(v, names[t][i]);
        if (v.data() != names[t][i].data()) ++pinned_views;
        tr.memory_counter({v, t * 1000 + i, i});
      }
    });
  for (auto& th : threads) th.join();
  tr.end_run();
  ASSERT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
  EXPECT_GT(pinned_views.load(), 0);
  EXPECT_LT(pinned_views.load(), kThreads * kNames);  // 80 distinct texts: the room ran out
  ASSERT_EQ(w.records[run].size(), static_cast<size_t>(kThreads * kNames));
  for (const Got& g : w.records[run]) {
    tracer::rec::MemoryCounter m;
    std::memcpy(&m, g.ev.payload, sizeof m);
    EXPECT_EQ(g.strs.at(0), names[m.bytes / 1000][m.bytes % 1000]);
  }
}

TEST(HostTracer, DestroyingDuringARunLeavesItIncomplete) {
  MemoryWriter w;
  int64_t run = 0;
  {
    HostTracer tr(w);
    run = tr.begin_run(info("abandoned"));
    tr.generation_step({0, 0, 0, 0});
  }
  EXPECT_EQ(w.records[run].size(), 1u);
  ASSERT_TRUE(w.ends.count(run));
  EXPECT_EQ(w.ends[run].status, RunStatus::Incomplete);
  EXPECT_EQ(w.ends[run].error, "tracer destroyed before end_run");
}

// CPU time of the calling thread (ns): unlike wall time, not inflated by a busy machine.
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// A burst with room for all of it is recorded whole, every event reaching the writer with its
// strings; the cost per event is printed for the log (bench_tracer_overhead bounds it, side by
// side with recording off, where timings belong).
TEST(HostTracer, ABurstWithRoomIsRecordedWholeAndItsCostPrinted) {
  constexpr int kN = 400000;
  events::EventSink null_sink;
  MemoryWriter w;
  TracerOptions o;
  o.chunks = 256;  // room for the whole burst: measure recording, not drops
  HostTracer tr(w, o);
  struct Cost {
    double wall_ns, cpu_ns;
  };
  auto burst = [&](events::EventSink& sink) {
    events::EventSink* volatile through = &sink;  // a real virtual call, as the hooks make
    events::EventSink* s = through;
    const double c0 = thread_cpu_ns();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kN; ++i)
      s->hook_span({"AlignDevicesHook", events::HookPhase::PreForward, "model.layers.7.self_attn", "LlamaAttention", 0, i,
                    i + 1});
    const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return Cost{wall / kN, (thread_cpu_ns() - c0) / kN};
  };
  const Cost base = burst(null_sink);
  tr.begin_run(info("overhead"));
  const Cost traced = burst(tr);
  const auto st = tr.end_run();
  std::printf("{\"hook_span_cpu_ns_per_event\": %.1f, \"hook_span_wall_ns_per_event\": %.1f, "
              "\"null_sink_cpu_ns_per_event\": %.1f, \"recorded\": %llu, \"dropped\": %llu}\n",
              traced.cpu_ns, traced.wall_ns, base.cpu_ns, static_cast<unsigned long long>(st.recorded),
              static_cast<unsigned long long>(st.dropped()));
  EXPECT_EQ(st.recorded, uint64_t{kN});
  EXPECT_EQ(st.dropped(), 0u);
  std::lock_guard lk(w.mu);
  ASSERT_EQ(w.records.size(), 1u);
  const auto& got = w.records.begin()->second;
  ASSERT_EQ(got.size(), static_cast<size_t>(kN));
  EXPECT_TRUE(w.contract_errors.empty()) << w.contract_errors.front();
  EXPECT_EQ(got.back().strs, (std::vector<std::string>{"AlignDevicesHook", "model.layers.7.self_attn", "LlamaAttention"}));
}

// ---- the CUPTI seam -------------------------------------------------------------------

// The tracer of a machine without a GPU (whatever the build) is unavailable and says why.
TEST(CuptiSeam, WithoutAGpuTheBuildsTracerSaysItIsUnavailable) {
  auto t = tracer::make_cupti_tracer();
  ASSERT_NE(t, nullptr);
  if (t->available()) GTEST_SKIP() << "a GPU is traced here: " << t->status();
  EXPECT_EQ(t->status().rfind("CUPTI unavailable", 0), 0u) << t->status();
}

TEST(CuptiSeam, NullTracerReportsCuptiUnavailable) {
  auto t = std::make_unique<tracer::NullCuptiTracer>();
  EXPECT_FALSE(t->available());
  EXPECT_EQ(t->status(), "CUPTI unavailable (CPU build)");
  struct NoGpu : tracer::ActivityWriter {
    void write_activity(const tracer::ActivityBatch&) override { FAIL() << "no GPU records on a CPU build"; }
  } sink;
  try {
    t->start(1, {}, sink);
    FAIL() << "start must refuse on a CPU build";
  } catch (const tracer::CuptiUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("CUPTI unavailable (CPU build)"), std::string::npos);
  }
  EXPECT_THROW(t->calibrate(10), tracer::CuptiUnavailable);
  { tracer::ExternalIdScope scope(*t, tracer::ExternalKind::Custom1, 42); }  // a no-op, never throws
  t->flush();
  t->stop();
  EXPECT_EQ(t->dropped_records(), 0u);
  EXPECT_EQ(tracer::to_string(tracer::ActivityKind::ConcurrentKernel), "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL");
}

TEST(ActivityBufferPool, PreallocatedBuffersCapRejectAndRecycle) {
  tracer::ActivityBufferPool pool(1000, 2);  // rounded up to a multiple of 8
  EXPECT_EQ(pool.buffer_bytes(), 1000u);
  auto a = pool.request();
  auto b = pool.request();
  ASSERT_EQ(a.size(), 1000u);
  ASSERT_EQ(b.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 8, 0u);
  EXPECT_NE(a.data(), b.data());
  EXPECT_TRUE(pool.request().empty()) << "past the cap a request is rejected, not allocated";
  EXPECT_EQ(pool.rejected(), 1u);
  a[0] = 0xAB;
  pool.complete(a.data(), 100);
  pool.complete(b.data(), 5000);  // clamped to the buffer size
  uint8_t foreign[16];
  pool.complete(foreign, 16);
  EXPECT_EQ(pool.foreign(), 1u);
  EXPECT_EQ(pool.completed_count(), 2u);
  std::vector<size_t> sizes;
  EXPECT_EQ(pool.drain([&](std::span<const uint8_t> s) { sizes.push_back(s.size()); }), 2u);
  EXPECT_EQ(sizes, (std::vector<size_t>{100, 1000}));
  EXPECT_EQ(pool.free_count(), 2u);
  EXPECT_FALSE(pool.request().empty());
  EXPECT_THROW(tracer::ActivityBufferPool(0, 1), std::invalid_argument);
}

}  // namespace
