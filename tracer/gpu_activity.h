// Activity records as the CUPTI layer or a trace importer (torch.profiler / Kineto) delivers
// them downstream, and the consumer interface they are written through. GPU records mirror the
// columns of Nsight Systems' SQLite export (`CUPTI_ACTIVITY_KIND_KERNEL`, `_MEMCPY`, `_MEMSET`,
// `_RUNTIME`/`_DRIVER`, `_SYNCHRONIZATION`), so the Store writes them 1:1; CPU ops follow
// Kineto's `cpu_op`. The kinds are declared in tracer/event_kinds.h.
//
// Times are host steady-clock ns (the CUPTI implementation converts GPU timestamps with its
// clock calibration; the raw pairs travel as `ClockSample`s). Sizes are bytes. Plain data:
// no CUDA or CUPTI header is needed to use these types, so CPU builds compile them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "tracer/event_kinds.h"

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

/// What CUPTI spent its own time on; values are CUPTI's `CUpti_ActivityOverheadKind`
/// (ids of `ENUM_CUPTI_OVERHEAD_KIND`).
enum class OverheadKind : int64_t {
  Unknown = 0, DriverCompiler = 1, CuptiBufferFlush = 1 << 16, CuptiInstrumentation = 2 << 16,
  CuptiResource = 3 << 16, RuntimeTriggeredModuleLoading = 4 << 16, LazyFunctionLoading = 5 << 16,
  CommandBufferFull = 6 << 16, ActivityBufferRequest = 7 << 16, UvmActivityInit = 8 << 16,
};

/// Who paid an overhead; values are CUPTI's `CUpti_ActivityObjectKind` (ids of
/// `ENUM_CUPTI_OBJECT_KIND`).
enum class OverheadObject : int { Unknown = 0, Process = 1, Thread = 2, Device = 3, Context = 4, Stream = 5 };

/// External correlation kinds; values are CUPTI's `CUpti_ExternalCorrelationKind`.
/// hookscope pushes `Custom1` ids around hook calls (Kineto uses Custom0 for ops).
enum class ExternalKind : uint32_t { Unknown = 1, Custom0 = 3, Custom1 = 4, Custom2 = 5 };

}  // namespace hs::tracer

namespace hs::kinds {
HS_ACTIVITY_KINDS(HS_KIND_DECLARE)
}  // namespace hs::kinds

namespace hs::tracer {

// One struct per activity kind (`KernelActivity`, `MemcpyActivity`, `MemsetActivity`,
// `RuntimeActivity`, `DriverActivity`, `SyncActivity`, `ExternalCorrelation`, `OverheadActivity`, `ClockSample`,
// `CpuOpActivity`, `DynamoCompile`, `DynamoGraphBreak`, `DynamoRecompile`): the F and T lines of its declaration in tracer/event_kinds.h, in order,
// time fields last. Strings are views, valid during the write call.
#define HS_ACTIVITY_STRUCT_(Type, ...) using Type = kinds::Type<kinds::Emitted>;
HS_ACTIVITY_KINDS(HS_ACTIVITY_STRUCT_)
#undef HS_ACTIVITY_STRUCT_

/// A batch of activity records for one run: one span per kind, named as the reader's methods
/// (`kernels`, `memcpys`, `memsets`, `runtime_calls`, `driver_calls`, `syncs`,
/// `external_correlations`, `overheads`, `clock_samples`, `cpu_ops`, `dynamo_compiles`, `dynamo_graph_breaks`,
/// `dynamo_recompiles`). Spans are valid only during the call.
struct ActivityBatch {
  int64_t run_id = 0;
#define HS_ACTIVITY_SPAN_(Type, Row, rows, ...) std::span<const Type> rows;
  HS_ACTIVITY_KINDS(HS_ACTIVITY_SPAN_)
#undef HS_ACTIVITY_SPAN_
  uint64_t dropped_records = 0;  ///< records the source dropped since its previous batch (CUPTI's count)
  /// The process the records were traced in: globalTid / globalPid are derived from it
  /// (pid * 0x1000000 [+ tid]). nullopt: this process (CUPTI); an importer sets the trace's pid.
  std::optional<int64_t> pid;
};

/// Consumer of activity records (implemented by `hs::storage::Store`). Writes a batch
/// atomically; throws on failure. May be called from the CUPTI processing thread.
class ActivityWriter {
 public:
  virtual ~ActivityWriter() = default;
  virtual void write_activity(const ActivityBatch& batch) = 0;
};

}  // namespace hs::tracer
