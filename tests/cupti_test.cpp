// The CUPTI tracer without a GPU: activity buffers built from the installed CUPTI's record
// structs, decoded and written through the Store into nsys' tables; the buffer pool under
// concurrent callbacks; the real tracer on a GPU-less machine and, through a fake CuptiApi, a
// subscriber conflict, missing privileges and a whole traced session.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "storage/capture_reader.h"
#include "storage/store.h"
#include "tests/test_util.h"
#include "tracer/cupti_decode.h"
#include "tracer/cupti_tracer.h"
#include "tracer/events.h"

#ifdef HOOKSCOPE_WITH_CUPTI
#include "tracer/cupti_activity_tracer.h"
#endif

namespace hs {
namespace {

using tracer::ClockCalibration;
using tracer::ClockSample;

// ---- plain C++: calibration and names --------------------------------------------------------

TEST(ClockCalibration, MedianOffsetIgnoresOutliers) {
  std::vector<ClockSample> s;
  for (int i = 0; i < 9; ++i) s.push_back({0, 1'000'000 + i * 10, 400'000 + i * 10});  // offset 600000
  s.push_back({0, 9'000'000, 1});                                                          // preempted pair
  s.push_back({0, 1, 9'000'000});
  const ClockCalibration c = ClockCalibration::from_samples(s);
  EXPECT_EQ(c.offset_ns, 600'000);
  EXPECT_EQ(c.samples, 11u);
  EXPECT_EQ(c.to_host(1'000), 601'000);
  const ClockSample two[] = {{0, 100, 0}, {0, 110, 0}};
  EXPECT_EQ(ClockCalibration::from_samples(two).offset_ns, 105);  // even count: the middle pair's mean
  EXPECT_THROW(ClockCalibration::from_samples({}), std::invalid_argument);
  EXPECT_EQ(ClockCalibration{}.to_host(42), 42);
}

TEST(KernelNames, ShortNamesAndApiNamesAsNsysShowsThem) {
  EXPECT_EQ(tracer::short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)"),
            "vectorized_elementwise_kernel");
  EXPECT_EQ(tracer::short_kernel_name("triton_poi_fused_add_0"), "triton_poi_fused_add_0");
  EXPECT_EQ(tracer::strip_api_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(tracer::strip_api_version("cuMemcpyHtoD_v2"), "cuMemcpyHtoD");
  EXPECT_EQ(tracer::strip_api_version("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(tracer::strip_api_version("cuda_vx"), "cuda_vx");
}

// ---- the buffer pool under concurrent callbacks ----------------------------------------------

TEST(ActivityBufferPool, ConcurrentRequestsAndCompletionsLoseNothing) {
  tracer::ActivityBufferPool pool(256, 8);
  constexpr int kThreads = 4, kRounds = 2000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> completed{0}, drained{0}, bytes_seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        std::span<uint8_t> b = pool.request();
        if (b.empty()) {
          std::this_thread::yield();
          continue;
        }
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 8, 0u);
        std::memset(b.data(), t + 1, 16);  // a record's worth, this thread's mark
        pool.complete(b.data(), 16);
        ++completed;
      }
    });
  std::thread drainer([&] {
    auto f = [&](std::span<const uint8_t> b) {
      EXPECT_EQ(b.size(), 16u);
      EXPECT_TRUE(std::all_of(b.begin(), b.end(), [&](uint8_t v) { return v == b[0] && v >= 1 && v <= kThreads; }));
      bytes_seen += b.size();
      ++drained;
    };
    while (!done) pool.drain(f);
    pool.drain(f);
  });
  for (auto& t : threads) t.join();
  done = true;
  drainer.join();
  EXPECT_GT(completed.load(), 0u);
  EXPECT_EQ(drained.load(), completed.load()) << "every completed buffer is drained exactly once";
  EXPECT_EQ(bytes_seen.load(), completed.load() * 16);
  EXPECT_EQ(pool.free_count(), pool.capacity()) << "every buffer is free again";
  EXPECT_EQ(pool.completed_count(), 0u);
  EXPECT_EQ(pool.foreign(), 0u);
  EXPECT_EQ(completed.load() + pool.rejected(), uint64_t{kThreads} * kRounds);
  uint8_t outsider[16];
  pool.complete(outsider, sizeof outsider);
  EXPECT_EQ(pool.foreign(), 1u);
}

// The CPU build's NullCuptiTracer: tests/tracer_test.cpp (CuptiSeam.*).

}  // namespace
}  // namespace hs


#ifdef HOOKSCOPE_WITH_CUPTI
namespace hs {
namespace {

namespace fs = std::filesystem;
using tracer::ClockCalibration;
using tracer::ClockSample;

tracer::RunInfo gpu_run() {
  tracer::RunInfo i;
  i.scenario = "sharded";
  i.policy = "offload-only";
  i.mode = "eager";
  i.model = "tiny-llama";
  i.engine = "libtorch";
  return i;
}

/// One value of a SQL query on a capture.
std::string sql_one(const fs::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(db);
  std::string out = "<no row>";
  if (st && sqlite3_step(st) == SQLITE_ROW)
    out = sqlite3_column_type(st, 0) == SQLITE_NULL ? "NULL" : reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}


// ---- activity buffers from the installed CUPTI's record structs -------------------------------

/// An activity buffer as CUPTI fills one: records back to back, each its struct's size (a
/// multiple of 8: CUPTI's PACKED_ALIGNMENT).
struct RecordBuffer {
  alignas(8) uint8_t bytes[16384] = {};
  size_t used = 0;
  template <class R>
  void add(const R& r) {
    static_assert(sizeof(R) % 8 == 0);
    ASSERT_LE(used + sizeof r, sizeof bytes);
    std::memcpy(bytes + used, &r, sizeof r);
    used += sizeof r;
  }
  std::span<uint8_t> span() { return {bytes, used}; }
};

constexpr uint64_t kGpu0 = 1'000'000'000;  // CUPTI timestamps of the records
constexpr int64_t kOffset = 7'000;         // host = gpu + 7 us
constexpr uint32_t kCtx = 11;

CUpti_ActivityKernel10 kernel_record() {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.cacheConfig.config.requested = 1;
  k.cacheConfig.config.executed = 2;
  k.registersPerThread = 32;
  k.start = kGpu0 + 100;
  k.end = kGpu0 + 600;
  k.deviceId = 1;
  k.contextId = kCtx;
  k.streamId = 7;
  k.gridX = 128, k.gridY = 2, k.gridZ = 1;
  k.blockX = 256, k.blockY = 1, k.blockZ = 1;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 4096;
  k.localMemoryPerThread = 16;
  k.localMemoryTotal = 1;  // the 32-bit field; the decoder reads localMemoryTotal_v2
  k.localMemoryTotal_v2 = uint64_t{5} << 32;
  k.correlationId = 41;
  k.gridId = 9001;
  k.name = "_ZN2at6native4gemmIfEEvPfi";
  k.launchType = 0;
  return k;
}

CUpti_ActivityMemcpy6 copy_record(CUpti_ActivityMemcpyKind kind, CUpti_ActivityMemoryKind src,
                                  CUpti_ActivityMemoryKind dst, uint64_t bytes, uint32_t correlation) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = static_cast<uint8_t>(kind);
  m.srcKind = static_cast<uint8_t>(src);
  m.dstKind = static_cast<uint8_t>(dst);
  m.bytes = bytes;
  m.start = kGpu0 + 1000 + correlation;
  m.end = m.start + 50;
  m.deviceId = 1;
  m.contextId = kCtx;
  m.streamId = 8;
  m.correlationId = correlation;
  return m;
}

/// A buffer with one record of every kind the tracer enables, two syncs (one on a context no
/// copy or kernel names yet), one record of a kind it does not keep.
RecordBuffer every_kind() {
  RecordBuffer b;
  CUpti_ActivitySynchronization2 early{};  // before any record of its context: kept back
  early.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  early.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  early.start = kGpu0 + 10, early.end = kGpu0 + 20;
  early.correlationId = 60, early.contextId = kCtx, early.streamId = 7, early.cudaEventId = 3;
  b.add(early);
  b.add(kernel_record());
  b.add(copy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4096, 42));
  b.add(copy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 2048, 43));
  b.add(copy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1024, 44));
  CUpti_ActivityMemcpyPtoP4 p{};
  p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  p.srcKind = p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  p.bytes = 1 << 20;
  p.start = kGpu0 + 2000, p.end = kGpu0 + 2500;
  p.deviceId = 1, p.contextId = kCtx, p.streamId = 9;
  p.srcDeviceId = 1, p.dstDeviceId = 3;
  p.correlationId = 45;
  p.graphNodeId = 77;
  b.add(p);
  CUpti_ActivityMemset4 ms{};
  ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  ms.value = 0xAB, ms.bytes = 512;
  ms.start = kGpu0 + 3000, ms.end = kGpu0 + 3010;
  ms.deviceId = 1, ms.contextId = kCtx, ms.streamId = 7, ms.correlationId = 46;
  ms.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  b.add(ms);
  CUpti_ActivityAPI rt{};
  rt.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  rt.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  rt.start = kGpu0 + 50, rt.end = kGpu0 + 90;
  rt.processId = 100, rt.threadId = 4242, rt.correlationId = 41, rt.returnValue = 0;
  b.add(rt);
  CUpti_ActivityAPI drv = rt;
  drv.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  drv.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  drv.correlationId = 47, drv.returnValue = 1;
  b.add(drv);
  CUpti_ActivitySynchronization2 sy = early;
  sy.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sy.correlationId = 61;
  b.add(sy);
  CUpti_ActivityExternalCorrelation x{};
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
  x.externalId = 123456789012ull;
  x.correlationId = 41;
  b.add(x);
  CUpti_ActivityOverhead3 o{};
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.processId = 100, o.objectId.pt.threadId = 4243;
  o.start = kGpu0 + 5000, o.end = kGpu0 + 6000;
  b.add(o);
  CUpti_ActivityName n{};  // a kind the tracer does not enable: skipped, counted
  n.kind = CUPTI_ACTIVITY_KIND_NAME;
  b.add(n);
  return b;
}

ClockCalibration calibration() { return ClockCalibration{kOffset, 1}; }

TEST(ActivityDecoder, EveryRecordKindOfTheInstalledCupti) {
  RecordBuffer buf = every_kind();
  tracer::ActivityDecoder d(calibration());  // CUPTI's own walker and API names: no GPU needed
  d.decode_buffer(buf.span());
  EXPECT_EQ(d.stats().records, 13u);
  EXPECT_EQ(d.stats().unknown_kinds, 1u);
  EXPECT_EQ(d.stats().walk_errors, 0u);
  const tracer::ActivityBatch b = d.batch(5);
  EXPECT_EQ(b.run_id, 5);

  ASSERT_EQ(b.kernels.size(), 1u);
  const auto& k = b.kernels[0];
  EXPECT_EQ(k.start_ns, static_cast<int64_t>(kGpu0) + 100 + kOffset);
  EXPECT_EQ(k.end_ns, static_cast<int64_t>(kGpu0) + 600 + kOffset);
  EXPECT_EQ(k.device_id, 1u);
  EXPECT_EQ(k.context_id, kCtx);
  EXPECT_EQ(k.stream_id, 7u);
  EXPECT_EQ(k.correlation_id, 41u);
  EXPECT_EQ(k.demangled_name, "void at::native::gemm<float>(float*, int)");
  EXPECT_EQ(k.short_name, "gemm");
  EXPECT_EQ(k.mangled_name, "_ZN2at6native4gemmIfEEvPfi");
  EXPECT_EQ(k.cache_config, 2);
  EXPECT_EQ(k.registers_per_thread, 32);
  EXPECT_EQ(std::vector<int>({k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z}),
            std::vector<int>({128, 2, 1, 256, 1, 1}));
  EXPECT_EQ(k.static_shared_memory, 1024);
  EXPECT_EQ(k.dynamic_shared_memory, 4096);
  EXPECT_EQ(k.local_memory_per_thread, 16);
  EXPECT_EQ(k.local_memory_total, int64_t{5} << 32);
  EXPECT_EQ(k.grid_id, 9001);
  EXPECT_EQ(k.graph_node_id, std::nullopt);

  using MK = tracer::MemcpyKind;
  using Mem = tracer::MemKind;
  ASSERT_EQ(b.memcpys.size(), 4u);
  const auto& h2d = b.memcpys[0];
  EXPECT_EQ(h2d.copy_kind, MK::HtoD);
  EXPECT_EQ(h2d.src_kind, Mem::Pinned);
  EXPECT_EQ(h2d.dst_kind, Mem::Device);
  EXPECT_EQ(h2d.bytes, 4096);
  EXPECT_EQ(h2d.src_device_id, std::nullopt);
  EXPECT_EQ(h2d.dst_device_id, 1);
  EXPECT_EQ(h2d.correlation_id, 42u);
  EXPECT_EQ(h2d.stream_id, 8u);
  EXPECT_EQ(h2d.start_ns, static_cast<int64_t>(kGpu0) + 1042 + kOffset);
  EXPECT_EQ(h2d.end_ns - h2d.start_ns, 50);
  const auto& d2h = b.memcpys[1];
  EXPECT_EQ(d2h.copy_kind, MK::DtoH);
  EXPECT_EQ(d2h.src_kind, Mem::Device);
  EXPECT_EQ(d2h.dst_kind, Mem::Pageable);
  EXPECT_EQ(d2h.src_device_id, 1);
  EXPECT_EQ(d2h.dst_device_id, std::nullopt);
  EXPECT_EQ(b.memcpys[2].copy_kind, MK::DtoD);
  EXPECT_EQ(b.memcpys[2].src_device_id, 1);
  EXPECT_EQ(b.memcpys[2].dst_device_id, 1);
  const auto& p2p = b.memcpys[3];
  EXPECT_EQ(p2p.copy_kind, MK::PtoP);
  EXPECT_EQ(p2p.bytes, 1 << 20);
  EXPECT_EQ(p2p.src_device_id, 1);
  EXPECT_EQ(p2p.dst_device_id, 3);
  EXPECT_EQ(p2p.graph_node_id, 77);

  ASSERT_EQ(b.memsets.size(), 1u);
  EXPECT_EQ(b.memsets[0].value, 0xAB);
  EXPECT_EQ(b.memsets[0].bytes, 512);
  EXPECT_EQ(b.memsets[0].mem_kind, Mem::Device);
  EXPECT_EQ(b.memsets[0].correlation_id, 46u);

  ASSERT_EQ(b.runtime_calls.size(), 1u);
  EXPECT_EQ(b.runtime_calls[0].name, "cudaLaunchKernel");
  EXPECT_EQ(b.runtime_calls[0].os_tid, 4242);
  EXPECT_EQ(b.runtime_calls[0].correlation_id, 41u);
  EXPECT_EQ(b.runtime_calls[0].start_ns, static_cast<int64_t>(kGpu0) + 50 + kOffset);
  ASSERT_EQ(b.driver_calls.size(), 1u);
  EXPECT_EQ(b.driver_calls[0].name, "cuLaunchKernel");
  EXPECT_EQ(b.driver_calls[0].return_value, 1);

  // Both syncs got the device of their context; the early one once the kernel named it.
  ASSERT_EQ(b.syncs.size(), 2u);
  EXPECT_EQ(d.pending_syncs(), 0u);
  std::set<tracer::SyncType> types;
  for (const auto& y : b.syncs) {
    EXPECT_EQ(y.device_id, 1u);
    EXPECT_EQ(y.context_id, kCtx);
    types.insert(y.sync_type);
  }
  EXPECT_EQ(types, (std::set<tracer::SyncType>{tracer::SyncType::EventSynchronize, tracer::SyncType::StreamSynchronize}));

  ASSERT_EQ(b.external_correlations.size(), 1u);
  EXPECT_EQ(b.external_correlations[0].kind, tracer::ExternalKind::Custom1);
  EXPECT_EQ(b.external_correlations[0].external_id, 123456789012ull);
  EXPECT_EQ(b.external_correlations[0].correlation_id, k.correlation_id) << "the hook call's id reaches the kernel";

  ASSERT_EQ(b.overheads.size(), 1u);
  EXPECT_EQ(b.overheads[0].overhead_kind, tracer::OverheadKind::CuptiBufferFlush);
  EXPECT_EQ(b.overheads[0].object_kind, tracer::OverheadObject::Thread);
  EXPECT_EQ(b.overheads[0].object_id, 4243);
  EXPECT_EQ(b.overheads[0].end_ns - b.overheads[0].start_ns, 1000);

  d.clear();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.batch(5).kernels.size(), 0u);
}

TEST(ActivityDecoder, SyncOfAnUnseenContextWaitsThenFallsBackToDeviceZero) {
  RecordBuffer buf;
  CUpti_ActivitySynchronization2 y{};
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  y.contextId = 99;
  buf.add(y);
  auto name = [](bool, uint32_t) -> const char* { return nullptr; };
  tracer::ActivityDecoder d({}, name);
  d.decode_buffer(buf.span());
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.pending_syncs(), 1u);
  d.clear();  // a batch written meanwhile: the sync stays pending
  RecordBuffer later;
  CUpti_ActivityAPI a{};
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = 123456;
  later.add(a);
  d.decode_buffer(later.span());
  EXPECT_EQ(d.batch(1).runtime_calls[0].name, "cuda runtime cbid 123456") << "an unknown cbid keeps its number";
  d.take_pending_syncs();
  ASSERT_EQ(d.batch(1).syncs.size(), 1u);
  EXPECT_EQ(d.batch(1).syncs[0].device_id, 0u);
  EXPECT_EQ(d.batch(1).syncs[0].sync_type, tracer::SyncType::ContextSynchronize);
}

TEST(ActivityDecoder, RecordsLandInTheNsysTablesThroughTheStore) {
  const fs::path file = test::scratch_dir("cupti_store") / "capture.sqlite";
  int64_t run = 0;
  {
    storage::Store store(file, {.overwrite = true});
    run = store.add_run(gpu_run());
    RecordBuffer buf = every_kind();
    tracer::ActivityDecoder d(calibration());
    d.decode_buffer(buf.span());
    tracer::ActivityBatch b = d.batch(run);
    const ClockSample clocks[] = {{0, 5000, 5000 - kOffset}, {0, 6000, 6000 - kOffset}};
    b.clock_samples = clocks;
    b.dropped_records = 7;
    store.write_activity(b);
    store.end_run(run, tracer::RunStatus::Complete);
    store.finalize();
  }
  storage::CaptureReader r(file);
  const auto kernels = r.kernels(run);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].short_name, "gemm");
  EXPECT_EQ(kernels[0].demangled_name, "void at::native::gemm<float>(float*, int)");
  EXPECT_EQ(kernels[0].mangled_name, "_ZN2at6native4gemmIfEEvPfi");
  EXPECT_EQ(kernels[0].start_ns, static_cast<int64_t>(kGpu0) + 100 + kOffset);
  EXPECT_EQ(kernels[0].grid_x, 128);
  EXPECT_EQ(r.memcpys(run).size(), 4u);
  EXPECT_EQ(r.memsets(run).size(), 1u);
  EXPECT_EQ(r.runtime_calls(run).size(), 1u);
  EXPECT_EQ(r.driver_calls(run).size(), 1u);
  EXPECT_EQ(r.syncs(run).size(), 2u);
  EXPECT_EQ(r.external_correlations(run).size(), 1u);
  ASSERT_EQ(r.overheads(run).size(), 1u);
  EXPECT_EQ(r.overheads(run)[0].overhead_kind, tracer::OverheadKind::CuptiBufferFlush);
  EXPECT_EQ(r.clock_samples(run).size(), 2u);
  EXPECT_EQ(r.run(run).dropped_records, 7);
  bool warned = false;
  for (const auto& dg : r.diagnostics(run)) warned |= dg.text == "CUPTI dropped 7 activity records";
  EXPECT_TRUE(warned);
  // nsys' columns and enums, as people query them.
  EXPECT_EQ(sql_one(file, "SELECT group_concat(e.label || ':' || m.bytes || ':' || s.label || '->' || d.label, ',') "
                          "FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER e ON e.id = m.copyKind "
                          "JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind"),
            "Host-to-Device:4096:Pinned->Device,Device-to-Host:2048:Device->Pageable,"
            "Device-to-Device:1024:Device->Device,Peer-to-Peer:1048576:Device->Device");
  EXPECT_EQ(sql_one(file, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                          "ON r.correlationId = k.correlationId JOIN StringIds s ON s.id = r.nameId"),
            "cudaLaunchKernel");
  EXPECT_EQ(sql_one(file, "SELECT x.externalId FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN "
                          "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION x ON x.correlationId = k.correlationId"),
            "123456789012");
  EXPECT_EQ(sql_one(file, "SELECT value || ':' || bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"), "171:512");
  EXPECT_EQ(sql_one(file, "SELECT e.name FROM CUPTI_ACTIVITY_KIND_OVERHEAD o JOIN ENUM_CUPTI_OVERHEAD_KIND e "
                          "ON e.id = o.overheadKind"),
            "CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH");
  EXPECT_EQ(sql_one(file, "SELECT group_concat(deviceId, ',') FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"), "1,1");
  EXPECT_EQ(sql_one(file, "SELECT globalTid % 0x1000000 FROM CUPTI_ACTIVITY_KIND_RUNTIME"), "4242");
}

// ---- the real tracer on this machine ---------------------------------------------------------

bool machine_has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(CuptiActivityTracer, WithoutAGpuItSaysWhyAndCaptureStaysHostOnly) {
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a CUDA device";
  std::unique_ptr<tracer::CuptiTracer> t = tracer::make_cupti_tracer();
  EXPECT_NE(dynamic_cast<tracer::CuptiActivityTracer*>(t.get()), nullptr) << "the CUPTI build's tracer";
  EXPECT_FALSE(t->available());
  EXPECT_EQ(t->status().rfind("CUPTI unavailable: no CUDA device (cudaGetDeviceCount: ", 0), 0u) << t->status();
  const fs::path file = test::scratch_dir("cupti_nogpu") / "capture.sqlite";
  storage::Store store(file, {.overwrite = true});
  const int64_t run = store.add_run(gpu_run());
  try {
    t->start(run, {}, store);
    FAIL() << "started without a GPU";
  } catch (const tracer::CuptiUnavailable& e) {
    EXPECT_EQ(std::string(e.what()), t->status());
  }
  t->push_external_id(tracer::ExternalKind::Custom1, 1);  // hot path: harmless
  t->pop_external_id(tracer::ExternalKind::Custom1);
  t->flush();
  t->stop();
  EXPECT_THROW(t->calibrate(3), tracer::CuptiUnavailable);
  EXPECT_EQ(t->dropped_records(), 0u);
}

// ---- a fake CUPTI: conflicts and a whole session ---------------------------------------------

namespace fake {
std::vector<std::string> calls;
int devices = 2;
CUptiResult subscribe_result = CUPTI_SUCCESS;
CUpti_ActivityKind refuse_kind = CUPTI_ACTIVITY_KIND_INVALID;
CUptiResult refuse_result = CUPTI_SUCCESS;
std::vector<CUpti_ActivityKind> enabled;
CUpti_BuffersCallbackRequestFunc requested = nullptr;
CUpti_BuffersCallbackCompleteFunc completed = nullptr;
struct Held {
  uint8_t* buffer;
  size_t size, valid;
};
std::vector<Held> held;  // buffers "CUPTI" filled and has not completed yet
size_t dropped_next = 0;
std::vector<std::pair<int, uint64_t>> pushed;
int popped = 0;
constexpr int64_t kBehind = 5'000'000;  // the fake GPU clock runs 5 ms behind the host's

void reset() {
  calls.clear();
  devices = 2;
  subscribe_result = refuse_result = CUPTI_SUCCESS;
  refuse_kind = CUPTI_ACTIVITY_KIND_INVALID;
  enabled.clear();
  held.clear();
  dropped_next = 0;
  pushed.clear();
  popped = 0;
}

cudaError_t device_count(int* n) {
  calls.push_back("cudaGetDeviceCount");
  *n = devices;
  return cudaSuccess;
}
const char* error_name(cudaError_t) { return "cudaErrorFake"; }
const char* error_string(cudaError_t) { return "fake"; }
CUptiResult version(uint32_t* v) {
  calls.push_back("cuptiGetVersion");
  *v = 130001;
  return CUPTI_SUCCESS;
}
CUptiResult subscribe(CUpti_SubscriberHandle* h, CUpti_CallbackFunc, void*) {
  calls.push_back("cuptiSubscribe");
  *h = reinterpret_cast<CUpti_SubscriberHandle>(uintptr_t{0x1});
  return subscribe_result;
}
CUptiResult unsubscribe(CUpti_SubscriberHandle) {
  calls.push_back("cuptiUnsubscribe");
  return CUPTI_SUCCESS;
}
CUptiResult thread_id_type(CUpti_ActivityThreadIdType t) {
  EXPECT_EQ(t, CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  return CUPTI_SUCCESS;
}
CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
  calls.push_back("cuptiActivityRegisterCallbacks");
  requested = r, completed = c;
  return CUPTI_SUCCESS;
}
CUptiResult enable(CUpti_ActivityKind k) {
  calls.push_back("cuptiActivityEnable");
  if (k == refuse_kind) return refuse_result;
  enabled.push_back(k);
  return CUPTI_SUCCESS;
}
CUptiResult disable(CUpti_ActivityKind k) {
  std::erase(enabled, k);
  return CUPTI_SUCCESS;
}
CUptiResult flush_all(uint32_t flag) {
  EXPECT_EQ(flag, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (const Held& h : std::exchange(held, {})) completed(nullptr, 0, h.buffer, h.size, h.valid);
  return CUPTI_SUCCESS;
}
CUptiResult dropped(CUcontext, uint32_t, size_t* n) {
  *n = std::exchange(dropped_next, 0);
  return CUPTI_SUCCESS;
}
CUptiResult push(CUpti_ExternalCorrelationKind k, uint64_t id) {
  pushed.emplace_back(static_cast<int>(k), id);
  return CUPTI_SUCCESS;
}
CUptiResult pop(CUpti_ExternalCorrelationKind, uint64_t*) {
  ++popped;
  return CUPTI_SUCCESS;
}
CUptiResult timestamp(uint64_t* t) {
  *t = static_cast<uint64_t>(events::now_ns() - kBehind);
  return CUPTI_SUCCESS;
}

const tracer::CuptiApi api{&device_count, &error_name, &error_string, &version, &cuptiGetResultString, &subscribe,
                           &unsubscribe, &thread_id_type, &register_callbacks, &enable, &disable, &flush_all,
                           &dropped, &push, &pop, &timestamp};

/// What CUPTI does while the program runs: take a buffer from the tracer and fill it.
void fill_buffer(RecordBuffer& records) {
  uint8_t* b = nullptr;
  size_t size = 0, max_records = 99;
  requested(&b, &size, &max_records);
  ASSERT_NE(b, nullptr);
  ASSERT_GE(size, records.used);
  EXPECT_EQ(max_records, 0u);
  std::memcpy(b, records.bytes, records.used);
  held.push_back({b, size, records.used});
}
}  // namespace fake

struct NullWriter : tracer::ActivityWriter {
  void write_activity(const tracer::ActivityBatch&) override { ADD_FAILURE() << "nothing should be written"; }
};

TEST(CuptiActivityTracer, NoCuptiCallBeforeStart) {
  fake::reset();
  tracer::CuptiActivityTracer t(fake::api);
  EXPECT_TRUE(fake::calls.empty()) << "constructing calls nothing";
  EXPECT_TRUE(t.available());
  EXPECT_EQ(t.status(), "CUPTI ready: 2 CUDA devices");
  EXPECT_EQ(fake::calls, std::vector<std::string>{"cudaGetDeviceCount"}) << "only the device probe, once";
  fake::reset();
  fake::devices = 0;
  tracer::CuptiActivityTracer none(fake::api);
  EXPECT_FALSE(none.available());
  EXPECT_EQ(none.status(), "CUPTI unavailable: no CUDA device (cudaGetDeviceCount: 0 devices)");
  NullWriter w;
  EXPECT_THROW(none.start(1, {}, w), tracer::CuptiUnavailable);
  EXPECT_EQ(fake::calls, std::vector<std::string>{"cudaGetDeviceCount"}) << "no CUPTI call without a device";
}

TEST(CuptiActivityTracer, AnotherSubscriberDegradesToHostOnly) {
  fake::reset();
  fake::subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  tracer::CuptiActivityTracer t(fake::api);
  NullWriter w;
  try {
    t.start(1, {}, w);
    FAIL() << "started next to another subscriber";
  } catch (const tracer::CuptiUnavailable& e) {
    const std::string what = e.what();
    EXPECT_EQ(what, t.status());
    EXPECT_NE(what.find("another CUPTI client is attached"), std::string::npos) << what;
    EXPECT_NE(what.find("cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39"), std::string::npos) << what;
  }
  EXPECT_FALSE(t.available());
  EXPECT_TRUE(fake::enabled.empty());
  EXPECT_EQ(std::count(fake::calls.begin(), fake::calls.end(), "cuptiActivityEnable"), 0);
  t.push_external_id(tracer::ExternalKind::Custom1, 5);
  t.pop_external_id(tracer::ExternalKind::Custom1);
  EXPECT_TRUE(fake::pushed.empty());
  EXPECT_EQ(fake::popped, 0);
  t.stop();  // nothing to stop
}

TEST(CuptiActivityTracer, MissingPrivilegesUndoWhatWasEnabled) {
  fake::reset();
  fake::refuse_kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  fake::refuse_result = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  tracer::CuptiActivityTracer t(fake::api);
  NullWriter w;
  EXPECT_THROW(t.start(1, {}, w), tracer::CuptiUnavailable);
  EXPECT_NE(t.status().find("GPU profiling needs privileges"), std::string::npos) << t.status();
  EXPECT_NE(t.status().find("cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME): CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"),
            std::string::npos)
      << t.status();
  EXPECT_TRUE(fake::enabled.empty()) << "the kinds enabled before the refusal are disabled again";
  EXPECT_EQ(fake::calls.back(), "cuptiUnsubscribe");
  // A second tracer may start once the first gave up.
  fake::reset();
  tracer::CuptiActivityTracer again(fake::api);
  struct Count : tracer::ActivityWriter {
    int batches = 0;
    void write_activity(const tracer::ActivityBatch&) override { ++batches; }
  } c;
  again.start(1, {.calibration_samples = 5}, c);
  again.stop();
  EXPECT_EQ(c.batches, 1) << "the clock pairs";
}

TEST(CuptiActivityTracer, ASessionThroughTheFakeCuptiIntoTheStore) {
  fake::reset();
  const fs::path file = test::scratch_dir("cupti_session") / "capture.sqlite";
  storage::Store store(file, {.overwrite = true});
  const int64_t run = store.add_run(gpu_run());
  tracer::CuptiActivityTracer t(fake::api);
  t.start(run, {.buffer_bytes = 64 << 10, .max_buffers = 2, .calibration_samples = 101}, store);
  EXPECT_EQ(t.status(), "CUPTI 13.0 (API 130001) tracing 2 CUDA devices");
  EXPECT_EQ(fake::enabled,
            (std::vector<CUpti_ActivityKind>{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
                                             CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                             CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD}));
  {
    tracer::ExternalIdScope hook(t, tracer::ExternalKind::Custom1, 42);
    RecordBuffer records = every_kind();
    fake::fill_buffer(records);
  }
  EXPECT_EQ(fake::pushed, (std::vector<std::pair<int, uint64_t>>{{CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 42}}));
  EXPECT_EQ(fake::popped, 1);
  RecordBuffer second;
  second.add(kernel_record());
  fake::fill_buffer(second);
  uint8_t* third = nullptr;
  size_t size = 0, max_records = 0;
  fake::requested(&third, &size, &max_records);
  EXPECT_EQ(third, nullptr) << "past the pool's cap CUPTI gets no buffer";
  fake::dropped_next = 3;
  t.flush();
  EXPECT_EQ(t.dropped_records(), 3u);
  EXPECT_EQ(t.rejected_buffers(), 1u);
  t.stop();
  EXPECT_TRUE(fake::enabled.empty());
  EXPECT_EQ(fake::calls.back(), "cuptiUnsubscribe");
  EXPECT_EQ(t.decode_stats().records, 14u);
  store.end_run(run, tracer::RunStatus::Complete);

  storage::CaptureReader r(file);
  EXPECT_EQ(r.kernels(run).size(), 2u);
  EXPECT_EQ(r.memcpys(run).size(), 4u);
  EXPECT_EQ(r.syncs(run).size(), 2u);
  EXPECT_EQ(r.run(run).dropped_records, 3);
  const auto clocks = r.clock_samples(run);
  ASSERT_EQ(clocks.size(), 101u);
  // The fake GPU clock is 5 ms behind: the records' times moved by that much.
  const int64_t offset = kernel_record().start;
  const int64_t converted = r.kernels(run)[0].start_ns - offset;
  EXPECT_NEAR(static_cast<double>(converted), static_cast<double>(fake::kBehind), 200'000.0);
  for (const auto& c : clocks) EXPECT_NEAR(static_cast<double>(c.host_ns - c.gpu_ns), fake::kBehind, 200'000.0);
}

}  // namespace
}  // namespace hs
#endif  // HOOKSCOPE_WITH_CUPTI
