// The event kinds: one declaration per kind, everything else follows from it.
//
// Each kind is one entry in HS_HOST_EVENT_KINDS or HS_ACTIVITY_KINDS (at the bottom of this
// file) plus its field list: one line per column of its SQLite table, in table order. From that
// declaration come
//   - the struct producers fill (`events::HookSpan`, `tracer::KernelActivity`, ...),
//   - for host events, the compact record the HostTracer keeps in its preallocated chunks
//     (`tracer::rec::HookSpan`: strings as run-scoped ids) and an `EventSink` method,
//   - the table's DDL, its indexes and its INSERT (storage/schema.cpp, storage/store.cpp),
//   - the reader's row type and query (`storage::HookEventRow`, `CaptureReader::hook_events`)
//     and its vector of a run's rows (`storage::RunRows::hook_events`, so `ui::RunTimeline`'s).
// Adding a kind: write its field list and its X(...) line below (a new enum also needs its
// names: a list in tracer/kind_names.h, from which storage/schema.cpp writes its ENUM_* table),
// report it (host events: the EventSink method the line names; activity records: the
// ActivityBatch span it names), and add a round-trip test to tests/storage_test.cpp. What is
// genuinely new besides is how it is drawn, if it is (docs/architecture.md, "Event kinds").
//
// A field line is
//   F(Tag, member, "column", "comment")  a field producers fill, declared in list order;
//   T(Tag, member, "column", "comment")  a time field, declared after the F fields, so
//                                        emitters write `{fields..., start, end}`;
//   C(Tag, member, "column", "comment")  a column the store derives (run id, recording
//                                        thread, ...): not in the producer's struct, only in
//                                        the reader's row (when it means something there).
// The tag says what the field is. A value field's tag is its C++ type (int64_t, int32_t,
// uint32_t, uint64_t, bool or an enum): the column is INTEGER NOT NULL. The other tags are
// below. Times are host steady-clock ns (`hs::events::now_ns()`), sizes bytes.
//
// Dependency-free on purpose (only the standard library): the hooks include it through
// tracer/events.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace hs::kinds {

// ---- tags ---------------------------------------------------------------------------------
struct Text {};         ///< a string; column: a StringIds.id, NOT NULL
struct TextOrNull {};   ///< a string; column: a StringIds.id, NULL for ""
struct ModuleClass {};  ///< a string with no column of its own: the class of the kind's `module`
                        ///< field, kept once per (run, module) in MODULES.classId
struct Start {};        ///< int64_t ns: the `start` column (also the time of an instant)
struct End {};          ///< int64_t ns: the `end` column
struct GlobalTid {};    ///< int64_t Linux thread id; column: nsys' globalTid = pid * 0x1000000 + tid
template <class T>
struct Nullable {};     ///< a T, always written; the column is nullable, as nsys declares it
template <class T>
struct Optional {};     ///< a std::optional<T>; the column is NULL for nullopt
// Column-only tags (C lines).
struct RunId {};        ///< RUNS.id of the row's run (every kind has one)
struct Thread {};       ///< THREADS.threadId: the tracer's index of the recording thread
struct GlobalPid {};    ///< nsys' globalPid = pid * 0x1000000 of the capturing process
struct CopyKind {};     ///< ENUM_CUDA_MEMCPY_OPER id of the kind's `src` -> `dst` logical devices
struct NsysOnly {};     ///< an nsys column hookscope leaves NULL (kept so nsys queries run)
template <int64_t N>
struct Constant {};     ///< always N (e.g. the eventClass of a CUDA API table)

/// The type of a field a form does not carry (an empty member).
template <class Tag>
struct Absent {};

template <class Tag>
struct is_constant : std::false_type {};
template <int64_t N>
struct is_constant<Constant<N>> : std::true_type {
  static constexpr int64_t value_of = N;
};
template <class Tag>
inline constexpr bool is_column_only =
    std::is_same_v<Tag, RunId> || std::is_same_v<Tag, Thread> || std::is_same_v<Tag, GlobalPid> ||
    std::is_same_v<Tag, CopyKind> || std::is_same_v<Tag, NsysOnly> || is_constant<Tag>::value;
template <class Tag>
inline constexpr bool is_text =
    std::is_same_v<Tag, Text> || std::is_same_v<Tag, TextOrNull> || std::is_same_v<Tag, ModuleClass>;
/// False only for ModuleClass: every other line is a column of the kind's table.
template <class Tag>
inline constexpr bool has_column = !std::is_same_v<Tag, ModuleClass>;

/// The member type of a field in a form whose strings are `Str`.
template <class Tag, class Str>
struct member_of {
  static_assert(std::is_integral_v<Tag> || std::is_enum_v<Tag>, "a value field's tag is an integer or enum type");
  using type = Tag;
};
template <class Str> struct member_of<Text, Str> { using type = Str; };
template <class Str> struct member_of<TextOrNull, Str> { using type = Str; };
template <class Str> struct member_of<ModuleClass, Str> { using type = Str; };
template <class Str> struct member_of<Start, Str> { using type = int64_t; };
template <class Str> struct member_of<End, Str> { using type = int64_t; };
template <class Str> struct member_of<GlobalTid, Str> { using type = int64_t; };
template <class T, class Str> struct member_of<Nullable<T>, Str> { using type = T; };
template <class T, class Str> struct member_of<Optional<T>, Str> { using type = std::optional<T>; };
template <class Str> struct member_of<RunId, Str> { using type = Absent<RunId>; };
template <class Str> struct member_of<Thread, Str> { using type = Absent<Thread>; };
template <class Str> struct member_of<GlobalPid, Str> { using type = Absent<GlobalPid>; };
template <class Str> struct member_of<CopyKind, Str> { using type = Absent<CopyKind>; };
template <class Str> struct member_of<NsysOnly, Str> { using type = Absent<NsysOnly>; };
template <int64_t N, class Str> struct member_of<Constant<N>, Str> { using type = Absent<Constant<N>>; };

/// The form producers fill: strings are views, valid for the duration of the call they are
/// passed to.
struct Emitted {
  template <class Tag>
  using member = typename member_of<Tag, std::string_view>::type;
};

/// `K<From>` as the form `Rep` (e.g. an `events::HookSpan` as its recorded form).
template <class K, class Rep>
struct rebind;
template <template <class> class K, class From, class Rep>
struct rebind<K<From>, Rep> {
  using type = K<Rep>;
};
template <class K, class Rep>
using rebind_t = typename rebind<K, Rep>::type;

}  // namespace hs::kinds

// ---- the machinery: what a field line becomes ----------------------------------------------
// HS_KIND_DECLARE(Type, Row, rows, TABLE, doc, FIELDS, ...) declares, in namespace hs::kinds,
//   template <class Rep> struct Type      the F and T fields (T last), as form `Rep` stores them,
//                                         with `table`, `doc` and `columns(visitor)`;
//   template <class Rep> struct TypeRow   Type<Rep> plus the C fields: the reader's row.
// `columns(v)` calls, for every line in table order,
//   v(std::type_identity<Tag>{}, "column", "comment", field)
// where `field(s)` returns a reference to the line's member of any form `s` that has it.
#define HS_KIND_MEMBER_(Tag, name, column, doc) [[no_unique_address]] typename Rep::template member<Tag> name{};
#define HS_KIND_SKIP_(Tag, name, column, doc)
#define HS_KIND_VISIT_(Tag, name, column, doc)                                    \
  v(::std::type_identity<Tag>{}, ::std::string_view(column), ::std::string_view(doc), \
    [](auto& s) -> auto& { return s.name; });
#define HS_KIND_DECLARE(Type, Row, rows, TABLE, DOC, FIELDS, ...)      \
  template <class Rep>                                                 \
  struct Type {                                                        \
    FIELDS(HS_KIND_MEMBER_, HS_KIND_SKIP_, HS_KIND_SKIP_)              \
    FIELDS(HS_KIND_SKIP_, HS_KIND_MEMBER_, HS_KIND_SKIP_)              \
    static constexpr ::std::string_view table = TABLE;                 \
    static constexpr ::std::string_view doc = DOC;                     \
    template <class V>                                                 \
    static constexpr void columns(V&& v) {                             \
      FIELDS(HS_KIND_VISIT_, HS_KIND_VISIT_, HS_KIND_VISIT_)           \
    }                                                                  \
  };                                                                   \
  template <class Rep>                                                 \
  struct Type##Row : Type<Rep> {                                       \
    FIELDS(HS_KIND_SKIP_, HS_KIND_SKIP_, HS_KIND_MEMBER_)              \
  };

// ---- host events ----------------------------------------------------------------------------
// Reported by models, hooks, the emulated compiler and the engines through `events::EventSink`,
// recorded by the HostTracer on the reporting thread. Their tables start with runId, the
// times and threadId.
//
//   X(Type, Row, reader method, TABLE, doc, FIELDS, EventSink method)

#define HS_HOST_SPAN_(T, C)                                                    \
  C(RunId, run_id, "runId", "RUNS.id")                                         \
  T(Start, start_ns, "start", "host steady-clock ns")                          \
  T(End, end_ns, "end", "host steady-clock ns")                                \
  C(Thread, thread, "threadId", "THREADS.threadId: the recording thread")
#define HS_HOST_INSTANT_(T, C)                                                 \
  C(RunId, run_id, "runId", "RUNS.id")                                         \
  T(Start, time_ns, "start", "host steady-clock ns (an instant)")              \
  C(Thread, thread, "threadId", "THREADS.threadId: the recording thread")

// The external correlation id of a hook call or module forward: unique within a run (from
// 1), pushed to CUPTI (ExternalKind CUSTOM1) around it when the run traces a GPU, so that
// CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY rows join it through EXTERNAL_CORRELATION; in an
// imported trace, the span's Kineto "External id". 0: none. The last column of its tables, so
// that captures written before it keep their column order (SELECT * reads them alike).
#define HS_EXTERNAL_ID_DOC_(what) \
  "the " what "'s external correlation id (EXTERNAL_CORRELATION.externalId of the GPU work it launched); 0 = none"

#define HS_HOOK_SPAN_FIELDS(F, T, C)                                                               \
  HS_HOST_SPAN_(T, C)                                                                              \
  F(Text, hook, "hookId", "'AlignDevicesHook', 'SequentialHook', 'CpuOffload', ...")               \
  F(events::HookPhase, phase, "phase", "ENUM_HOOK_PHASE")                                          \
  F(Text, module, "moduleId", "module FQN ('' = root)")                                            \
  F(ModuleClass, module_class, "", "the module's class name (MODULES.classId)")                   \
  F(int64_t, external_id, "externalId", HS_EXTERNAL_ID_DOC_("call"))

#define HS_WEIGHT_SWAP_FIELDS(F, T, C)                                                             \
  HS_HOST_SPAN_(T, C)                                                                              \
  F(bool, onload, "onload", "1: materialised on the execution device for a forward, 0: offloaded") \
  F(Text, module, "moduleId", "FQN of the hooked module")                                          \
  F(Text, tensor, "tensorId", "tensor name relative to the module ('weight'); a diffusers group: '*' or its members") \
  F(int64_t, bytes, "bytes", "bytes")                                                              \
  F(Text, dtype, "dtypeId", "'float32', 'bfloat16', ...")                                          \
  F(events::WeightSource, source, "source", "ENUM_WEIGHT_SOURCE: where an onloaded weight came from") \
  F(Text, device, "device", "destination logical device ('0', 'cpu', 'meta', 'disk')")             \
  F(bool, pinned, "pinned", "1: the host source was pinned memory")

#define HS_TRANSFER_FIELDS(F, T, C)                                                                \
  HS_HOST_SPAN_(T, C)                                                                              \
  F(Text, src, "src", "source logical device: '0', '1', 'cpu'")                                    \
  F(Text, dst, "dst", "destination logical device")                                                \
  F(int64_t, bytes, "bytes", "bytes")                                                              \
  C(CopyKind, copy_kind, "copyKind", "ENUM_CUDA_MEMCPY_OPER: logical direction")                   \
  F(bool, emulated, "emulated", "1: an emulated accelerator took part")                            \
  F(TextOrNull, module, "moduleId", "module whose hook moved it; NULL ('' in the struct) = unknown")

#define HS_DISABLED_SCOPE_FIELDS(F, T, C)                                                          \
  HS_HOST_SPAN_(T, C)                                                                              \
  F(Text, function, "functionId", "the compiler-disabled function, e.g. 'AlignDevicesHook.pre_forward'") \
  F(Text, module, "moduleId", "FQN of the module the hook serves")                                 \
  F(int, depth, "depth", "nesting depth; > 1 = nested (counts once as a break)")

#define HS_MODULE_COMPUTE_FIELDS(F, T, C)                                                          \
  HS_HOST_SPAN_(T, C)                                                                              \
  F(Text, module, "moduleId", "module FQN")                                                        \
  F(ModuleClass, module_class, "", "the module's class name (MODULES.classId)")                   \
  F(Text, device, "device", "execution device (logical: '0', 'cpu')")                              \
  F(int64_t, external_id, "externalId", HS_EXTERNAL_ID_DOC_("forward"))

#define HS_REGION_FIELDS(F, T, C)                                                                  \
  HS_HOST_SPAN_(T, C)                                                                              \
  F(int, index, "regionIndex", "0-based within one compiled call")                                 \
  F(int64_t, op_count, "opCount", "ATen ops recorded while the region ran")                        \
  F(Text, backend, "backendId", "'eager', 'cudagraphs'; '' when unknown (an imported trace)")     \
  F(TextOrNull, compile_id, "compileId",                                                           \
    "Dynamo's compile id 'F/C' of an imported 'Torch-Compiled Region'; NULL ('') from the LibTorch engine")

#define HS_GRAPH_BREAK_FIELDS(F, T, C)                                                             \
  HS_HOST_INSTANT_(T, C)                                                                           \
  F(Text, reason, "reasonId", "Dynamo's wording")                                                  \
  F(Text, function, "functionId", "the disabled function, e.g. 'AlignDevicesHook.pre_forward'")    \
  F(Text, module, "moduleId", "FQN of the module whose hook broke the graph")                      \
  F(Text, module_stack, "moduleStackId", "' > '-joined FQNs, outermost first")

#define HS_GENERATION_STEP_FIELDS(F, T, C)                                                         \
  HS_HOST_SPAN_(T, C)                                                                              \
  F(int64_t, step, "step", "0 = prefill")                                                          \
  F(int64_t, token, "token", "the token generated")

#define HS_MEMORY_COUNTER_FIELDS(F, T, C)                                                          \
  HS_HOST_INSTANT_(T, C)                                                                           \
  F(Text, device, "device", "logical device")                                                      \
  F(int64_t, bytes, "bytes", "resident bytes")

#define HS_HOST_EVENT_KINDS(X)                                                                     \
  X(HookSpan, HookEventRow, hook_events, "HOOK_EVENTS",                                            \
    "A hook callback span, e.g. AlignDevicesHook.pre_forward on model.layers.3.",                  \
    HS_HOOK_SPAN_FIELDS, hook_span)                                                                \
  X(WeightSwap, WeightSwapRow, weight_swaps, "WEIGHT_SWAPS",                                       \
    "A weight onload (-> execution device) or offload (accelerate: -> meta; diffusers: -> its "     \
    "offload device) of one tensor, or of one diffusers offload group.",                           \
    HS_WEIGHT_SWAP_FIELDS, weight_swap)                                                            \
  X(Transfer, TransferRow, transfers, "TRANSFERS",                                                 \
    "An activation / tensor copy between two logical devices (weight onloads are WEIGHT_SWAPS).", \
    HS_TRANSFER_FIELDS, transfer)                                                                  \
  X(DisabledScope, DisabledScopeRow, disabled_scopes, "DISABLED_SCOPES",                           \
    "Entry into a compiler-disabled scope (the C++ stand-in for torch.compiler.disable).",         \
    HS_DISABLED_SCOPE_FIELDS, disabled_scope)                                                      \
  X(ModuleCompute, ModuleComputeRow, module_compute, "MODULE_COMPUTE",                             \
    "A module's forward on its execution device (the compute lane of that device).",               \
    HS_MODULE_COMPUTE_FIELDS, module_compute)                                                      \
  X(Region, RegionRow, regions, "COMPILE_REGIONS",                                                 \
    "A captured region of the emulated compiler (the piece between two graph breaks).",               \
    HS_REGION_FIELDS, region)                                                                      \
  X(GraphBreak, GraphBreakRow, graph_breaks, "GRAPH_BREAKS",                                       \
    "A graph break: a compiler-disabled function entered inside a captured region.",               \
    HS_GRAPH_BREAK_FIELDS, graph_break)                                                            \
  X(GenerationStep, GenerationStepRow, generation_steps, "GENERATION_STEPS",                       \
    "One generation step (prefill = step 0).", HS_GENERATION_STEP_FIELDS, generation_step)         \
  X(MemoryCounter, MemoryCounterRow, memory_counters, "MEMORY_COUNTERS",                           \
    "Bytes resident on a logical device at a point in time.", HS_MEMORY_COUNTER_FIELDS,            \
    memory_counter)

// ---- activity records -----------------------------------------------------------------------
// Written in batches (`tracer::ActivityBatch`) by the CUPTI layer or a trace importer: GPU
// activity in Nsight Systems' tables and columns (CUPTI_ACTIVITY_KIND_*, names as StringIds
// ids), CPU ops as torch.profiler / Kineto report them, and what torch.compile's structured
// log says about each compile. Each record names its own thread (globalTid) or device and
// stream, or has no time at all, so these kinds have no threadId.
//
//   X(Type, Row, reader method, TABLE, doc, FIELDS)

// What a kernel, memcpy, memset and synchronization record start with (nsys' column order):
// its times, its device, context and stream, and the correlation id of the CUDA API call that
// issued it.
#define HS_GPU_RECORD_(F, T, C)                                                                     \
  T(Start, start_ns, "start", "host steady-clock ns (converted from the GPU clock)")               \
  T(End, end_ns, "end", "host steady-clock ns")                                                    \
  F(uint32_t, device_id, "deviceId", "CUDA device index")                                          \
  F(uint32_t, context_id, "contextId", "")                                                         \
  C(NsysOnly, green_context_id, "greenContextId", "")                                              \
  F(uint32_t, stream_id, "streamId", "")                                                           \
  F(Nullable<uint32_t>, correlation_id, "correlationId", "= CUPTI_ACTIVITY_KIND_RUNTIME/DRIVER.correlationId") \
  C(GlobalPid, global_pid, "globalPid", "pid * 0x1000000 (nsys serialisation)")

#define HS_KERNEL_FIELDS(F, T, C)                                                                  \
  HS_GPU_RECORD_(F, T, C)                                                                          \
  F(Text, demangled_name, "demangledName", "")                                                     \
  F(Text, short_name, "shortName", "")                                                             \
  F(TextOrNull, mangled_name, "mangledName", "")                                                   \
  F(Nullable<int32_t>, launch_type, "launchType", "")                                              \
  F(Nullable<int32_t>, cache_config, "cacheConfig", "")                                            \
  F(int32_t, registers_per_thread, "registersPerThread", "")                                       \
  F(int32_t, grid_x, "gridX", "")                                                                  \
  F(int32_t, grid_y, "gridY", "")                                                                  \
  F(int32_t, grid_z, "gridZ", "")                                                                  \
  F(int32_t, block_x, "blockX", "")                                                                \
  F(int32_t, block_y, "blockY", "")                                                                \
  F(int32_t, block_z, "blockZ", "")                                                                \
  F(int64_t, static_shared_memory, "staticSharedMemory", "bytes")                                  \
  F(int64_t, dynamic_shared_memory, "dynamicSharedMemory", "bytes")                                \
  F(int64_t, local_memory_per_thread, "localMemoryPerThread", "bytes")                             \
  F(int64_t, local_memory_total, "localMemoryTotal", "bytes")                                      \
  F(int64_t, grid_id, "gridId", "")                                                                \
  C(NsysOnly, shared_memory_executed, "sharedMemoryExecuted", "")                                  \
  F(Optional<int64_t>, graph_node_id, "graphNodeId", "NULL unless launched from a CUDA graph")     \
  C(NsysOnly, shared_memory_limit_config, "sharedMemoryLimitConfig", "")                           \
  C(RunId, run_id, "runId", "hookscope: RUNS.id")

#define HS_MEMCPY_FIELDS(F, T, C)                                                                  \
  HS_GPU_RECORD_(F, T, C)                                                                          \
  F(int64_t, bytes, "bytes", "bytes")                                                              \
  F(tracer::MemcpyKind, copy_kind, "copyKind", "ENUM_CUDA_MEMCPY_OPER")                            \
  C(NsysOnly, deprecated_src_id, "deprecatedSrcId", "")                                            \
  F(Nullable<tracer::MemKind>, src_kind, "srcKind", "ENUM_CUDA_MEM_KIND")                          \
  F(Nullable<tracer::MemKind>, dst_kind, "dstKind", "ENUM_CUDA_MEM_KIND")                          \
  F(Optional<int32_t>, src_device_id, "srcDeviceId", "NULL: host / not applicable")                \
  C(NsysOnly, src_context_id, "srcContextId", "")                                                  \
  F(Optional<int32_t>, dst_device_id, "dstDeviceId", "NULL: host / not applicable")                \
  C(NsysOnly, dst_context_id, "dstContextId", "")                                                  \
  C(NsysOnly, migration_cause, "migrationCause", "")                                               \
  F(Optional<int64_t>, graph_node_id, "graphNodeId", "")                                           \
  C(NsysOnly, virtual_address, "virtualAddress", "")                                               \
  C(RunId, run_id, "runId", "hookscope: RUNS.id")

#define HS_MEMSET_FIELDS(F, T, C)                                                                  \
  HS_GPU_RECORD_(F, T, C)                                                                          \
  F(int64_t, value, "value", "the byte value set")                                                 \
  F(int64_t, bytes, "bytes", "bytes")                                                              \
  F(Optional<int64_t>, graph_node_id, "graphNodeId", "")                                           \
  F(Nullable<tracer::MemKind>, mem_kind, "memKind", "ENUM_CUDA_MEM_KIND")                          \
  C(RunId, run_id, "runId", "hookscope: RUNS.id")

// CUDA runtime and driver API calls share one layout; eventClass tells the tables apart.
#define HS_CUDA_API_FIELDS_(F, T, C, class_id, class_doc)                                 \
  T(Start, start_ns, "start", "host steady-clock ns")                                              \
  T(End, end_ns, "end", "host steady-clock ns")                                                    \
  C(Constant<class_id>, event_class, "eventClass", class_doc)                             \
  F(GlobalTid, os_tid, "globalTid", "pid * 0x1000000 + Linux tid of the calling thread (nsys serialisation)") \
  F(Nullable<uint32_t>, correlation_id, "correlationId", "")                                       \
  F(Text, name, "nameId", "e.g. 'cudaLaunchKernel', 'cuLaunchKernel'")                             \
  F(int32_t, return_value, "returnValue", "")                                                      \
  C(NsysOnly, callchain_id, "callchainId", "")                                                     \
  C(RunId, run_id, "runId", "hookscope: RUNS.id")
#define HS_RUNTIME_FIELDS(F, T, C) HS_CUDA_API_FIELDS_(F, T, C, 0, "ENUM_NSYS_EVENT_CLASS: 0 = CUDA runtime")
#define HS_DRIVER_FIELDS(F, T, C) HS_CUDA_API_FIELDS_(F, T, C, 1, "ENUM_NSYS_EVENT_CLASS: 1 = CUDA driver")

#define HS_SYNC_FIELDS(F, T, C)                                                                    \
  HS_GPU_RECORD_(F, T, C)                                                                          \
  F(tracer::SyncType, sync_type, "syncType", "ENUM_CUPTI_SYNC_TYPE")                               \
  F(uint32_t, event_id, "eventId", "")                                                             \
  C(RunId, run_id, "runId", "hookscope: RUNS.id")

#define HS_EXTERNAL_CORRELATION_FIELDS(F, T, C)                                                    \
  F(tracer::ExternalKind, kind, "externalKind", "ENUM_CUPTI_EXTERNAL_CORRELATION_KIND")            \
  F(uint64_t, external_id, "externalId", "the id pushed (a hook call, a Kineto op)")               \
  F(uint32_t, correlation_id, "correlationId", "")                                                 \
  C(RunId, run_id, "runId", "RUNS.id")

// CUPTI's own cost (CUpti_ActivityOverhead3): buffer flushes, instrumentation, resources,
// driver compilation. hookscope's table: nsys folds these into PROFILER_OVERHEAD, whose
// columns it does not document.
#define HS_OVERHEAD_FIELDS(F, T, C)                                                                \
  T(Start, start_ns, "start", "host steady-clock ns (converted from the CUPTI clock)")             \
  T(End, end_ns, "end", "host steady-clock ns")                                                    \
  F(tracer::OverheadKind, overhead_kind, "overheadKind", "ENUM_CUPTI_OVERHEAD_KIND")               \
  F(tracer::OverheadObject, object_kind, "objectKind", "ENUM_CUPTI_OBJECT_KIND: what paid for it")  \
  F(int64_t, object_id, "objectId", "process or Linux thread id; device index for device, context and stream objects") \
  F(Optional<int64_t>, context_id, "contextId", "context and stream objects only")                 \
  F(Optional<int64_t>, stream_id, "streamId", "stream objects only")                               \
  F(Nullable<uint32_t>, correlation_id, "correlationId", "0: not tied to an API call")             \
  C(GlobalPid, global_pid, "globalPid", "")                                                        \
  C(RunId, run_id, "runId", "hookscope: RUNS.id")

#define HS_CLOCK_SAMPLE_FIELDS(F, T, C)                                                            \
  C(RunId, run_id, "runId", "RUNS.id")                                                             \
  F(uint32_t, device_id, "deviceId", "CUDA device index")                                          \
  F(int64_t, host_ns, "hostNs", "host steady-clock ns")                                            \
  F(int64_t, gpu_ns, "gpuNs", "CUPTI timestamp (cuptiGetTimestamp) ns")

#define HS_CPU_OP_FIELDS(F, T, C)                                                                  \
  C(RunId, run_id, "runId", "RUNS.id")                                                             \
  T(Start, start_ns, "start", "host steady-clock ns")                                              \
  T(End, end_ns, "end", "host steady-clock ns")                                                    \
  F(GlobalTid, os_tid, "globalTid", "pid * 0x1000000 + Linux tid of the op's thread")              \
  F(Text, name, "nameId", "the op, e.g. 'aten::mm'")                                               \
  F(TextOrNull, args, "argsId",                                                                    \
    "JSON object of the op's args as Kineto records them ('Input Dims', 'Input type', ...)")       \
  F(Optional<int64_t>, external_id, "externalId", "Kineto's 'External id': ties the op to its CUDA calls") \
  F(Optional<int64_t>, sequence_number, "sequenceNumber", "autograd's 'Sequence number' (forward <-> backward)") \
  F(Text, category, "categoryId",                                                                  \
    "Kineto's cat: 'cpu_op', 'user_annotation', 'gpu_user_annotation', 'python_function'")

// torch.compile's structured log (TORCH_TRACE), imported by importers/torch_trace_log.h: one
// row per compile id and attempt (tlparse's "[F/C]" / "[F/C_A]"), per graph break (its
// `dynamo_graph_break_reason` artifact) and per failing guard of a recompile. The log's times
// are wall-clock, kept as ns since the Unix epoch; a graph break's is also put on the
// capture's clock (the run's trace shift applied), so the views can mark it as an instant.
#define HS_DYNAMO_COMPILE_FIELDS(F, T, C)                                                          \
  C(RunId, run_id, "runId", "RUNS.id")                                                             \
  F(Text, compile_id, "compileId", "Dynamo's compile id 'F/C' ('Torch-Compiled Region: F/C'); '!A/F/C' under compiled autograd") \
  F(Optional<int64_t>, frame_id, "frameId", "F: the frame (code object) Dynamo compiled")          \
  F(Optional<int64_t>, frame_compile_id, "frameCompileId", "C: its compile number (> 0: a recompile)") \
  F(int32_t, attempt, "attempt", "tracing attempt: > 0 after a restart (tlparse's '[F/C_A]')")      \
  F(Optional<int64_t>, compiled_autograd_id, "compiledAutogradId", "compiled autograd's graph id, if any") \
  F(Text, status, "statusId",                                                                      \
    "'compiled' (guarded code), 'restarted' (a later attempt took over), 'skipped' (Dynamo skipped "  \
    "the frame: it runs eagerly), 'failed' (fail_type set: eager fallback, or the error under "      \
    "fullgraph), 'incomplete' (no compilation_metrics in the log)")                                 \
  F(TextOrNull, code_name, "codeNameId", "co_name of the frame")                                   \
  F(TextOrNull, file, "fileId", "co_filename")                                                     \
  F(Optional<int64_t>, line, "line", "co_firstlineno")                                             \
  F(Optional<int64_t>, guard_count, "guardCount", "guards of the compiled code")                  \
  F(Optional<int64_t>, graph_op_count, "graphOpCount", "ops in the captured graph")                \
  F(Optional<int64_t>, graph_node_count, "graphNodeCount", "nodes in the captured graph")          \
  F(int32_t, graphs, "graphs", "graphs handed to the backend (dynamo_output_graph records)")       \
  F(Optional<int64_t>, start_utc_ns, "startUtcNs", "compile start, ns since the Unix epoch")       \
  F(Optional<int64_t>, compile_ns, "compileNs", "entire_frame_compile_time_s, in ns")              \
  F(Optional<int64_t>, backend_compile_ns, "backendCompileNs", "backend_compile_time_s, in ns")    \
  F(Optional<int64_t>, inductor_compile_ns, "inductorCompileNs", "inductor_compile_time_s, in ns") \
  F(Optional<int64_t>, code_gen_ns, "codeGenNs", "code_gen_time_s, in ns")                         \
  F(Optional<int64_t>, before_restart_ns, "beforeRestartNs", "dynamo_time_before_restart_s, in ns") \
  F(TextOrNull, fail_type, "failTypeId", "e.g. 'Unsupported'")                                     \
  F(TextOrNull, fail_reason, "failReasonId", "Dynamo's message")                                   \
  F(TextOrNull, fail_gb_code, "failGbCodeId", "the last graph-break code in fail_reason, e.g. 'GB0039' (recompile limit)") \
  F(TextOrNull, fail_user_frame, "failUserFrameId", "'file:line' of the user code that failed")    \
  F(TextOrNull, restart_reasons, "restartReasonsId", "JSON array of the restart reasons")          \
  F(TextOrNull, recompile_reason, "recompileReasonId", "Dynamo's first recompile reason")          \
  F(int64_t, log_line, "logLine", "line of the compile's first record in the log")

#define HS_DYNAMO_GRAPH_BREAK_FIELDS(F, T, C)                                                      \
  C(RunId, run_id, "runId", "RUNS.id")                                                             \
  F(Text, compile_id, "compileId", "DYNAMO_COMPILES.compileId of the compile that broke")          \
  F(int32_t, attempt, "attempt", "its attempt")                                                    \
  F(TextOrNull, gb_code, "gbCodeId", "Dynamo's graph-break registry id: 'GB0098' (torch.compiler.disable), ...") \
  F(Text, gb_type, "gbTypeId", "the break's type, e.g. 'Skip calling `torch.compiler.disable()`d function'") \
  F(TextOrNull, explanation, "explanationId", "Dynamo's explanation")                             \
  F(TextOrNull, hints, "hintsId", "the hints, one per line")                                       \
  F(TextOrNull, context, "contextId", "developer debug context")                                   \
  F(Text, reason, "reasonId", "the reason as torch._dynamo.explain prints it")                     \
  F(TextOrNull, instruction, "instructionId", "what Dynamo was doing ('Encountered graph break when attempting to trace CALL: ...')") \
  F(TextOrNull, user_frame, "userFrameId", "'file:line' of the user code that broke")              \
  F(TextOrNull, user_stack, "userStackId", "the user code traceback")                              \
  F(TextOrNull, chained_gb_codes, "chainedGbCodesId", "codes of breaks raised while handling this one, e.g. 'GB7000' (graph break in loop)") \
  F(bool, frame_skipped, "frameSkipped", "1: Dynamo gave up on the frame, which runs eagerly")    \
  F(Optional<int64_t>, time_ns, "timeNs",                                                          \
    "when Dynamo logged the break, on the capture's clock (ns): the record's glog time of day, "   \
    "dated by its compile's start_time; null when the compile has none")                          \
  F(int64_t, log_line, "logLine", "line of the artifact in the log")

#define HS_DYNAMO_RECOMPILE_FIELDS(F, T, C)                                                        \
  C(RunId, run_id, "runId", "RUNS.id")                                                             \
  F(Text, compile_id, "compileId", "the compile the recompile started ('0/8')")                    \
  F(TextOrNull, guard_compile_id, "guardCompileId", "the cached compile whose guard failed ('0/7')") \
  F(Text, guard, "guardId", "the failing guard, e.g. '___check_type_id(module, 94861060722928)'")   \
  F(Text, reason, "reasonId", "Dynamo's whole recompile reason")                                   \
  F(int64_t, log_line, "logLine", "line of the reason in the log")

#define HS_ACTIVITY_KINDS(X)                                                                       \
  X(KernelActivity, KernelRow, kernels, "CUPTI_ACTIVITY_KIND_KERNEL",                              \
    "A GPU kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).", HS_KERNEL_FIELDS)                     \
  X(MemcpyActivity, MemcpyRow, memcpys, "CUPTI_ACTIVITY_KIND_MEMCPY",                              \
    "A memory copy on a GPU (CUPTI_ACTIVITY_KIND_MEMCPY, MEMCPY2 for peer copies).", HS_MEMCPY_FIELDS) \
  X(MemsetActivity, MemsetRow, memsets, "CUPTI_ACTIVITY_KIND_MEMSET",                              \
    "A memset on a GPU.", HS_MEMSET_FIELDS)                                                        \
  X(RuntimeActivity, RuntimeRow, runtime_calls, "CUPTI_ACTIVITY_KIND_RUNTIME",                     \
    "A CUDA runtime API call on a host thread.", HS_RUNTIME_FIELDS)                                \
  X(DriverActivity, DriverRow, driver_calls, "CUPTI_ACTIVITY_KIND_DRIVER",                         \
    "A CUDA driver API call on a host thread.", HS_DRIVER_FIELDS)                                  \
  X(SyncActivity, SyncRow, syncs, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",                           \
    "A synchronization (event, stream or context) on a GPU.", HS_SYNC_FIELDS)                      \
  X(ExternalCorrelation, ExternalCorrelationRow, external_correlations,                            \
    "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION",                                                    \
    "hookscope: a CUPTI correlation id -> the external id pushed around a hook call or op.",       \
    HS_EXTERNAL_CORRELATION_FIELDS)                                                                \
  X(OverheadActivity, OverheadRow, overheads, "CUPTI_ACTIVITY_KIND_OVERHEAD",                      \
    "hookscope: time CUPTI itself spent (buffer flushes, instrumentation, resources).",            \
    HS_OVERHEAD_FIELDS)                                                                            \
  X(ClockSample, ClockSampleRow, clock_samples, "CLOCK_CALIBRATION",                               \
    "hookscope: host/GPU clock pairs behind the conversion of CUPTI times.", HS_CLOCK_SAMPLE_FIELDS) \
  X(CpuOpActivity, CpuOpRow, cpu_ops, "CPU_OPS",                                                   \
    "A CPU op (torch.profiler / Kineto 'cpu_op'): a host slice on one thread.", HS_CPU_OP_FIELDS) \
  X(DynamoCompile, DynamoCompileRow, dynamo_compiles, "DYNAMO_COMPILES",                           \
    "hookscope: one Dynamo compile id and attempt of a torch.compile log (TORCH_TRACE).",         \
    HS_DYNAMO_COMPILE_FIELDS)                                                                      \
  X(DynamoGraphBreak, DynamoGraphBreakRow, dynamo_graph_breaks, "DYNAMO_GRAPH_BREAKS",             \
    "hookscope: a graph break of a torch.compile log (its dynamo_graph_break_reason).",           \
    HS_DYNAMO_GRAPH_BREAK_FIELDS)                                                                  \
  X(DynamoRecompile, DynamoRecompileRow, dynamo_recompiles, "DYNAMO_RECOMPILES",                   \
    "hookscope: a failing guard that made Dynamo recompile (a torch.compile log's recompile_reasons).", \
    HS_DYNAMO_RECOMPILE_FIELDS)
