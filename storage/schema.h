// The capture file format: one SQLite file per capture, every run of a comparison in it.
// Where Nsight Systems' SQLite export has a table for the same thing we use its name and
// columns (StringIds, ENUM_*, META_DATA_EXPORT, TARGET_INFO_GPU,
// TARGET_INFO_SESSION_START_TIME, CUPTI_ACTIVITY_KIND_*), so SQL people already have carries
// over. hookscope's own tables follow the same conventions. The full DDL, with a comment per
// column, is `schema_sql()` (and is stored in the file's sqlite_master); the event tables in it
// follow from the kinds declared in tracer/event_kinds.h.
//
// Conventions
//  - Times are INTEGER ns of the host steady clock (CLOCK_MONOTONIC, `hs::events::now_ns()`),
//    absolute, like the events; TARGET_INFO_SESSION_START_TIME and RUNS.startUtcNs anchor
//    them to wall-clock time. Sizes are INTEGER bytes.
//  - Columns named `*Id` of hookscope strings (hookId, moduleId, tensorId, dtypeId, functionId,
//    reasonId, moduleStackId, backendId, classId) and the logical-device columns `device`,
//    `src`, `dst` hold StringIds.id. `deviceId` keeps its nsys meaning (a CUDA device index).
//  - Every event table has `runId` → RUNS.id. Host event tables also have `threadId` →
//    THREADS.threadId (the tracer's 0-based index of the recording thread within the run);
//    activity tables name their thread (globalTid) or device and stream instead.
//  - Instants (GRAPH_BREAKS, MEMORY_COUNTERS) store their time in `start`.
//  - Enumerations live in ENUM_*(id, name, label) tables.
//  - No indexes during capture (as nsys); `Store::finalize()` adds (runId, start) per event
//    table and (runId, correlationId) per CUPTI table.
//  - A table added after a capture was written (e.g. CPU_OPS) is created when a Store opens
//    that capture to append, and reads as empty until then.
//  - TRANSFERS.copyKind uses nsys' ENUM_CUDA_MEMCPY_OPER ids for the *logical* direction
//    (cpu→accelerator = HtoD, accelerator→cpu = DtoH, between two accelerators PtoP, within
//    one DtoD, cpu→cpu HtoH); a copy that involves an emulated accelerator keeps that
//    direction and has `emulated = 1` — the bytes really moved, but host-to-host.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tracer/event_writer.h"
#include "tracer/gpu_activity.h"

namespace hs::storage {

/// META_DATA_EXPORT key and value of the schema this build writes and reads. A reader refuses
/// files with a higher version.
inline constexpr std::string_view kSchemaVersionKey = "HOOKSCOPE_SCHEMA_VERSION";
inline constexpr int kSchemaVersion = 2;  // HOOKSCOPE_SCHEMA_VERSION
/// META_DATA_EXPORT key of the writing program ("hookscope 0.1.0"), as nsys' own key.
inline constexpr std::string_view kProductVersionKey = "EXPORT_PRODUCT_VERSION";

/// The DDL of a fresh capture (tables and enum rows; no indexes).
std::string_view schema_sql();
/// The part of schema_sql() that creates the event tables, one per kind of
/// tracer/event_kinds.h, as `CREATE TABLE IF NOT EXISTS`.
std::string_view event_tables_sql();

/// Any failure to open, read or write a capture. `what()` names the file; `path()` is it.
class CaptureError : public std::runtime_error {
 public:
  CaptureError(std::filesystem::path path, const std::string& message)
      : std::runtime_error(message), path_(std::move(path)) {}
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// DIAGNOSTICS.severity (ENUM_DIAGNOSTIC_SEVERITY).
enum class Severity : int { Info = 0, Warning = 1, Error = 2 };
std::string_view to_string(Severity s);

/// DEVICES.kind (ENUM_DEVICE_KIND).
enum class DeviceKind : int {
  Cpu = 0,       ///< the host
  Cuda = 1,      ///< a real CUDA device
  Emulated = 2,  ///< a logical accelerator backed by CPU memory or by another device
};
std::string_view to_string(DeviceKind k);

/// A logical device of a run (or of the whole capture when `run_id` is empty).
struct DeviceInfo {
  std::optional<int64_t> run_id;    ///< empty = run-independent
  std::string name;                 ///< logical id as accelerate spells it: "0", "1", "cpu", "disk"
  DeviceKind kind = DeviceKind::Cpu;
  std::string backing;              ///< what holds its memory: "cpu", "cuda:0"
  std::string label;                ///< e.g. "NVIDIA H200", "emulated accelerator 1 (cpu)"
  std::optional<int64_t> max_memory;  ///< bytes, the budget accelerate's max_memory gives it
  std::optional<int64_t> gpu_id;    ///< TARGET_INFO_GPU.id when kind == Cuda
};

/// A real GPU (TARGET_INFO_GPU; nsys column names in comments). Left empty on CPU machines.
struct GpuInfo {
  int64_t id = 0;                 ///< id (CUDA device index)
  std::string name;               ///< name, e.g. "NVIDIA H200"
  std::string bus_location;       ///< busLocation, e.g. "0000:19:00.0"
  std::string uuid;               ///< uuid
  std::string chip_name;          ///< chipName, e.g. "GH100"
  bool is_discrete = true;        ///< isDiscrete
  int64_t total_memory = 0;       ///< totalMemory, bytes
  int64_t memory_bandwidth = 0;   ///< memoryBandwidth, bytes/s
  int64_t l2_cache_size = 0;      ///< l2CacheSize, bytes
  int64_t clock_rate = 0;         ///< clockRate, Hz
  int64_t sm_count = 0;           ///< smCount
  int64_t compute_major = 0, compute_minor = 0;  ///< computeMajor, computeMinor
  int64_t async_engines = 0;      ///< asyncEngines
  int64_t max_shmem_per_block = 0;  ///< maxShmemPerBlock, bytes
  int64_t threads_per_warp = 32;  ///< threadsPerWarp
  int64_t max_warps_per_sm = 0;   ///< maxWarpsPerSm
};

/// The emulated compiler (compile/)'s `explain` of one run (COMPILE_RESULTS). Its counts are not
/// Dynamo's (Dynamo skips frames and stops at recompile_limit), so they carry their own names.
struct CompileResult {
  int64_t region_count = 0;             ///< captured regions that ran >= 1 op
  int64_t disabled_scope_entries = 0;   ///< compiler-disabled scopes entered inside a region
  int64_t recompiles = 0;
  bool fullgraph_ok = true;       ///< false: fullgraph=True raised
  std::string error;              ///< the Unsupported message when fullgraph failed
  nlohmann::json break_reasons = nlohmann::json::array();  ///< Dynamo-worded reasons
};

/// Logical direction of a copy between two logical devices ("cpu"/"disk" = host, a decimal
/// index = accelerator): HtoD, DtoH, DtoD (same accelerator), PtoP (two accelerators), HtoH;
/// Unknown otherwise. See the TRANSFERS convention above.
tracer::MemcpyKind copy_kind_for(std::string_view src, std::string_view dst);

}  // namespace hs::storage
