// CUPTI activity records -> the project's activity structs (tracer/gpu_activity.h), apart from
// every CUPTI call that needs a GPU, so the decoding is tested on machines without one.
//
// `ClockCalibration` and `short_kernel_name` are plain C++ (every build). `ActivityDecoder`
// reads the record structs of the installed cupti_activity.h (CUPTI 13: CUpti_ActivityKernel10,
// CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4, CUpti_ActivityMemset4, CUpti_ActivityAPI,
// CUpti_ActivitySynchronization2, CUpti_ActivityExternalCorrelation, CUpti_ActivityOverhead3)
// and is compiled only in the CUPTI build (HOOKSCOPE_WITH_CUPTI); this header itself needs no
// CUDA or CUPTI header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tracer/gpu_activity.h"

namespace hs::tracer {

/// Host steady clock vs CUPTI's clock (cuptiGetTimestamp; one clock for every device):
/// host_ns = gpu_ns + offset_ns, the offset being the median of `host_ns - gpu_ns` over
/// the pairs, so a pair disturbed by preemption does not move it.
struct ClockCalibration {
  int64_t offset_ns = 0;
  size_t samples = 0;  ///< pairs the offset was computed from (0: identity)

  /// The median offset of `pairs`. Throws std::invalid_argument when `pairs` is empty.
  static ClockCalibration from_samples(std::span<const ClockSample> pairs);
  /// A CUPTI timestamp (ns) as host steady-clock ns.
  int64_t to_host(uint64_t gpu_ns) const { return static_cast<int64_t>(gpu_ns) + offset_ns; }
};

/// nsys' shortName of a demangled kernel name: no return type, namespaces, template arguments
/// or parameters ("void at::native::foo<4>(int)" -> "foo"); the name itself when nothing is left.
std::string_view short_kernel_name(std::string_view demangled);

/// An API name without CUPTI's version suffix, as nsys and Kineto show it
/// ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel", "cuMemcpyHtoD_v2" -> "cuMemcpyHtoD").
std::string_view strip_api_version(std::string_view cupti_name);

/// What `ActivityDecoder` saw, cumulated over its lifetime.
struct DecodeStats {
  uint64_t records = 0;        ///< every record walked
  uint64_t unknown_kinds = 0;  ///< records of a kind the decoder does not keep (skipped)
  uint64_t walk_errors = 0;    ///< buffers whose walk ended on an error other than "no more records"
};

#ifdef HOOKSCOPE_WITH_CUPTI
/// Turns CUPTI activity buffers into activity records, in the order CUPTI wrote them.
///
/// A buffer is walked with cuptiActivityGetNextRecord (libcupti's own walker: it needs
/// libcupti, not a GPU, and knows the record sizes of the library actually loaded); each record
/// is decoded from its header struct by `decode_record`, which calls nothing in CUPTI except
/// the API-name lookup (`ApiName`, injectable). Times are converted with the calibration.
/// Strings (kernel names, API names) are copied: the records' views stay valid until `clear`.
///
/// Synchronization records carry a context, not a device: the device is the one kernels,
/// copies and memsets of that context ran on. A sync whose context has not been seen yet is
/// kept back until one is (or until `take_pending_syncs`, with device 0). Not thread-safe.
class ActivityDecoder {
 public:
  /// Name of API call `cbid` (runtime when `driver` is false), or nullptr when unknown.
  using ApiName = const char* (*)(bool driver, uint32_t cbid);
  /// The next record after `*record` (nullptr: the first) in the first `valid` bytes of
  /// `buffer`; returns 0 with `*record` set, 1 at the end, 2 on an error (CUPTI's walker's
  /// contract: CUPTI_SUCCESS, CUPTI_ERROR_MAX_LIMIT_REACHED, anything else).
  using NextRecord = int (*)(uint8_t* buffer, size_t valid, const void** record);

  /// `api_name` / `next_record` nullptr: CUPTI's (cuptiGetCallbackName /
  /// cuptiActivityGetNextRecord).
  explicit ActivityDecoder(ClockCalibration clock = {}, ApiName api_name = nullptr, NextRecord next_record = nullptr);

  void set_clock(ClockCalibration clock) { clock_ = clock; }
  const ClockCalibration& clock() const { return clock_; }

  /// Decodes every record of `buffer` (the bytes CUPTI reported valid). Unknown kinds are
  /// counted and skipped; a walk error ends the buffer (counted).
  void decode_buffer(std::span<uint8_t> buffer);
  /// Decodes one record (a `CUpti_Activity*`). Returns false for a kind it does not keep.
  bool decode_record(const void* record);
  /// Moves the syncs still waiting for their context's device into the records, device 0.
  void take_pending_syncs();

  /// The records decoded since the last `clear`, as a batch of `run_id` (spans into this
  /// decoder: valid until the next decode or clear).
  ActivityBatch batch(int64_t run_id) const;
  /// True when `batch` would carry no record.
  bool empty() const;
  /// Forgets the records and their strings (not the contexts' devices or pending syncs).
  void clear();

  const DecodeStats& stats() const { return stats_; }
  size_t pending_syncs() const { return pending_syncs_.size(); }

 private:
  void kernel(const void* r);
  void memcpy(const void* r);
  void memcpy_p2p(const void* r);
  void memset(const void* r);
  void api(const void* r, bool driver);
  void sync(const void* r);
  void external(const void* r);
  void overhead(const void* r);
  std::string_view keep(std::string s);
  void see_context(uint32_t context, uint32_t device);

  ClockCalibration clock_;
  ApiName api_name_;
  NextRecord next_record_;
  DecodeStats stats_;
  std::unordered_set<std::string> strings_;                      // kernel names; cleared
  std::unordered_set<std::string> api_name_strings_;             // API names; kept
  std::unordered_map<uint64_t, std::string_view> api_names_;  // (driver, cbid) -> name; kept
  std::unordered_map<uint32_t, uint32_t> context_device_;
  std::vector<SyncActivity> pending_syncs_;
  std::vector<KernelActivity> kernels_;
  std::vector<MemcpyActivity> memcpys_;
  std::vector<MemsetActivity> memsets_;
  std::vector<RuntimeActivity> runtime_;
  std::vector<DriverActivity> driver_;
  std::vector<SyncActivity> syncs_;
  std::vector<ExternalCorrelation> externals_;
  std::vector<OverheadActivity> overheads_;
};
#endif

}  // namespace hs::tracer
