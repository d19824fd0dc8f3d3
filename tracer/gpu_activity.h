// GPU activity records as the CUPTI layer delivers them downstream, and the consumer interface
// they are written through. The records mirror the columns of Nsight Systems' SQLite export
// (`CUPTI_ACTIVITY_KIND_KERNEL`, `_MEMCPY`, `_MEMSET`, `_RUNTIME`/`_DRIVER`,
// `_SYNCHRONIZATION`; spec/profiler-anchors.md §2.1), so the Store writes them 1:1.
//
// Times are host steady-clock ns (the CUPTI implementation converts GPU timestamps with its
// clock calibration; the raw pairs travel as `ClockSample`s). Sizes are bytes. Plain data:
// no CUDA or CUPTI header is needed to use these types, so CPU builds compile them.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace hs::tracer {

/// Copy direction; values are the ids of nsys' `ENUM_CUDA_MEMCPY_OPER` (= CUPTI's
/// `CUpti_ActivityMemcpyKind`).
enum class MemcpyKind : int {
  Unknown = 0, HtoD = 1, DtoH = 2, HtoA = 3, AtoH = 4, AtoA = 5, AtoD = 6, DtoA = 7,
  DtoD = 8, HtoH = 9, PtoP = 10, UvmHtoD = 11, UvmDtoH = 12, UvmDtoD = 13,
};

/// Memory kind; values are the ids of nsys' `ENUM_CUDA_MEM_KIND` (= CUPTI's
/// `CUpti_ActivityMemoryKind` as nsys exports it).
enum class MemKind : int {
  Pageable = 0, Pinned = 1, Device = 2, Array = 3, Managed = 4, DeviceStatic = 5, ManagedStatic = 6, Unknown = 7,
};

/// Synchronization type; values are the ids of nsys' `ENUM_CUPTI_SYNC_TYPE`.
enum class SyncType : int {
  Unknown = 0, EventSynchronize = 1, StreamWaitEvent = 2, StreamSynchronize = 3, ContextSynchronize = 4,
};

/// External correlation kinds; values are CUPTI's `CUpti_ExternalCorrelationKind`.
/// hookscope pushes `Custom1` ids around hook calls (Kineto uses Custom0 for ops).
enum class ExternalKind : uint32_t { Unknown = 1, Custom0 = 3, Custom1 = 4, Custom2 = 5 };

/// `CUPTI_ACTIVITY_KIND_(CONCURRENT_)KERNEL` → table CUPTI_ACTIVITY_KIND_KERNEL.
struct KernelActivity {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t device_id = 0, context_id = 0, stream_id = 0;
  uint32_t correlation_id = 0;
  int64_t grid_id = 0;
  int64_t graph_node_id = 0;  ///< 0 = not launched from a CUDA graph
  std::string_view demangled_name, short_name, mangled_name;
  int32_t grid_x = 1, grid_y = 1, grid_z = 1;
  int32_t block_x = 1, block_y = 1, block_z = 1;
  int32_t registers_per_thread = 0;
  int64_t static_shared_memory = 0, dynamic_shared_memory = 0;  ///< bytes
  int64_t local_memory_per_thread = 0, local_memory_total = 0;  ///< bytes
  int32_t launch_type = 0, cache_config = 0;
};

/// `CUPTI_ACTIVITY_KIND_MEMCPY` (and MEMCPY2 for peer copies).
struct MemcpyActivity {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t device_id = 0, context_id = 0, stream_id = 0;
  uint32_t correlation_id = 0;
  int64_t bytes = 0;
  MemcpyKind copy_kind = MemcpyKind::Unknown;
  MemKind src_kind = MemKind::Unknown, dst_kind = MemKind::Unknown;
  int32_t src_device_id = -1, dst_device_id = -1;  ///< -1 = host / not applicable
  int64_t graph_node_id = 0;
};

/// `CUPTI_ACTIVITY_KIND_MEMSET`.
struct MemsetActivity {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t device_id = 0, context_id = 0, stream_id = 0;
  uint32_t correlation_id = 0;
  int64_t value = 0, bytes = 0;
  MemKind mem_kind = MemKind::Device;
  int64_t graph_node_id = 0;
};

/// `CUPTI_ACTIVITY_KIND_RUNTIME` / `CUPTI_ACTIVITY_KIND_DRIVER`: one API call on a host thread.
struct ApiActivity {
  int64_t start_ns = 0, end_ns = 0;
  bool driver = false;  ///< true: driver API (table _DRIVER), false: runtime API (_RUNTIME)
  int64_t os_tid = 0;   ///< Linux thread id of the calling thread
  uint32_t correlation_id = 0;
  std::string_view name;  ///< e.g. "cudaLaunchKernel", "cuLaunchKernel"
  int32_t return_value = 0;
};

/// `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`.
struct SyncActivity {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t device_id = 0, context_id = 0, stream_id = 0;
  uint32_t correlation_id = 0;
  SyncType sync_type = SyncType::Unknown;
  uint32_t event_id = 0;
};

/// `CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION`: ties a CUPTI correlation id to an id hookscope
/// pushed (a hook call), so copies and kernels attach to the hook and module that caused them.
struct ExternalCorrelation {
  ExternalKind kind = ExternalKind::Custom1;
  uint64_t external_id = 0;
  uint32_t correlation_id = 0;
};

/// One host/GPU clock pair (both ns) taken by the calibration; stored per run so the
/// conversion can be re-derived (spec §1.5: record both clocks).
struct ClockSample {
  uint32_t device_id = 0;
  int64_t host_ns = 0;  ///< host steady-clock ns
  int64_t gpu_ns = 0;   ///< CUPTI timestamp (cuptiGetTimestamp) ns
};

/// A batch of decoded GPU activity for one run. Spans are valid only during the call.
struct GpuActivityBatch {
  int64_t run_id = 0;
  std::span<const KernelActivity> kernels;
  std::span<const MemcpyActivity> memcpys;
  std::span<const MemsetActivity> memsets;
  std::span<const ApiActivity> api_calls;
  std::span<const SyncActivity> syncs;
  std::span<const ExternalCorrelation> external_correlations;
  std::span<const ClockSample> clock_samples;
  uint64_t dropped_records = 0;  ///< CUPTI's dropped-record count since the previous batch
};

/// Consumer of GPU activity (implemented by `hs::storage::Store`). Writes a batch atomically;
/// throws on failure. May be called from the CUPTI processing thread.
class GpuActivityWriter {
 public:
  virtual ~GpuActivityWriter() = default;
  virtual void write_gpu_batch(const GpuActivityBatch& batch) = 0;
};

}  // namespace hs::tracer
