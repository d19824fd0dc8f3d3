// The CUPTI seam: a thin class around buffers and callbacks, all policy above it (the way
// Kineto is built); CPU builds and tests need none of it.
//
// `CuptiTracer` is the interface the GPU build implements around the CUPTI Activity API.
// This CPU build ships only `NullCuptiTracer`, which reports "CUPTI unavailable (CPU build)"
// and refuses to start: GPU lanes are then shown as unavailable, never faked.
//
// What an implementation must do (the lessons Kineto learned):
//  - defer every CUPTI call (even cuptiGetVersion) until `start`, and check
//    cudaGetDeviceCount() > 0 first; map CUPTI_ERROR_INSUFFICIENT_PRIVILEGES and
//    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39) to `available() == false` with a
//    status naming the cause, so capture degrades to host-only tracing;
//  - enable CONCURRENT_KERNEL (not KERNEL), MEMCPY (+MEMCPY2), MEMSET, RUNTIME and DRIVER
//    (Triton launches via cuLaunchKernel), SYNCHRONIZATION, EXTERNAL_CORRELATION, OVERHEAD;
//    never GRAPH_TRACE together with per-kernel records;
//  - serve bufferRequested/bufferCompleted from a preallocated `ActivityBufferPool` (a fresh
//    buffer per request, hard cap, rejections counted), read cuptiActivityGetNumDroppedRecords
//    outside any lock, and flush with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED at stop;
//  - push an external correlation id (`ExternalKind::Custom1`) per hook call so copies and
//    kernels attach to the hook and module that caused them;
//  - calibrate host steady-clock vs cuptiGetTimestamp (many pairs, median), convert record
//    times to host ns, and deliver the raw pairs as `ClockSample`s;
//  - decode records on a processing thread, never on the launching thread, and deliver them
//    to an `ActivityWriter` (the Store) in batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tracer/gpu_activity.h"

namespace hs::tracer {

/// Activity kinds a CUPTI tracer can enable (CUPTI_ACTIVITY_KIND_*).
enum class ActivityKind {
  ConcurrentKernel, Memcpy, Memset, Runtime, Driver, Synchronization, ExternalCorrelation, Overhead,
};
/// The CUPTI constant's name, e.g. "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL".
std::string_view to_string(ActivityKind k);

struct CuptiOptions {
  std::vector<ActivityKind> kinds = {ActivityKind::ConcurrentKernel, ActivityKind::Memcpy,
                                     ActivityKind::Memset,           ActivityKind::Runtime,
                                     ActivityKind::Driver,           ActivityKind::Synchronization,
                                     ActivityKind::ExternalCorrelation, ActivityKind::Overhead};
  size_t buffer_bytes = 4u << 20;  ///< per activity buffer (Kineto: 4 MiB; CUPTI advises 1–10 MiB)
  size_t max_buffers = 33;         ///< cap: 1 + 128 MiB / 4 MiB, as Kineto
  int calibration_samples = 1001;  ///< host/GPU clock pairs per calibration
};

/// Thrown by `start` (and `calibrate`) when CUPTI cannot be used; `what()` is the status.
class CuptiUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CuptiTracer {
 public:
  virtual ~CuptiTracer() = default;
  /// True when GPU activity can be traced in this process.
  virtual bool available() const noexcept = 0;
  /// Human-readable state, e.g. "CUPTI unavailable (CPU build)" or "CUPTI 13.0, 4 GPUs".
  virtual std::string status() const = 0;
  /// Enables the activity kinds and starts delivering records of run `run_id` to `writer`
  /// (which must outlive `stop`). Throws `CuptiUnavailable` when `!available()`.
  virtual void start(int64_t run_id, const CuptiOptions& options, ActivityWriter& writer) = 0;
  /// Forces CUPTI to complete its buffers (FLUSH_FORCED) and delivers them; returns once written.
  virtual void flush() = 0;
  /// flush(), then disables the activity kinds. No-op when not started.
  virtual void stop() = 0;
  /// Pushes / pops an external correlation id on the calling thread. Hot path: cheap, no-throw.
  virtual void push_external_id(ExternalKind kind, uint64_t id) noexcept = 0;
  virtual void pop_external_id(ExternalKind kind) noexcept = 0;
  /// Takes `samples` host/GPU clock pairs per device. Throws `CuptiUnavailable` when unavailable.
  virtual std::vector<ClockSample> calibrate(int samples) = 0;
  /// Records CUPTI reported as dropped since `start`.
  virtual uint64_t dropped_records() const noexcept = 0;
};

/// The CPU build's tracer: nothing to trace, and says so.
class NullCuptiTracer final : public CuptiTracer {
 public:
  static constexpr std::string_view kStatus = "CUPTI unavailable (CPU build)";
  bool available() const noexcept override { return false; }
  std::string status() const override { return std::string(kStatus); }
  void start(int64_t, const CuptiOptions&, ActivityWriter&) override;
  void flush() override {}
  void stop() override {}
  void push_external_id(ExternalKind, uint64_t) noexcept override {}
  void pop_external_id(ExternalKind) noexcept override {}
  std::vector<ClockSample> calibrate(int) override;
  uint64_t dropped_records() const noexcept override { return 0; }
};

/// The tracer this build provides: `NullCuptiTracer` unless the GPU build (compiled with
/// HOOKSCOPE_WITH_CUPTI) links its implementation.
std::unique_ptr<CuptiTracer> make_cupti_tracer();

/// Pushes an external id for the lifetime of the scope (no-op with NullCuptiTracer).
class ExternalIdScope {
 public:
  ExternalIdScope(CuptiTracer& t, ExternalKind kind, uint64_t id) noexcept : t_(t), kind_(kind) {
    t_.push_external_id(kind_, id);
  }
  ~ExternalIdScope() { t_.pop_external_id(kind_); }
  ExternalIdScope(const ExternalIdScope&) = delete;
  ExternalIdScope& operator=(const ExternalIdScope&) = delete;

 private:
  CuptiTracer& t_;
  ExternalKind kind_;
};

/// Activity buffers for CUPTI's bufferRequested / bufferCompleted callbacks, with the policy
/// Kineto learned the hard way: every buffer is allocated up front (the request callback never
/// mallocs — it inflates launch latency), each request gets a fresh buffer (CUPTI ≥ 13 uses
/// per-thread buffers), and past the cap a request is rejected (an empty span) and counted
/// instead of growing without bound. Thread-safe; the callbacks may come from any thread.
class ActivityBufferPool {
 public:
  /// Allocates `max_buffers` buffers of `buffer_bytes`, 8-byte aligned (CUPTI requires it).
  /// Throws `std::invalid_argument` when either is 0.
  ActivityBufferPool(size_t buffer_bytes, size_t max_buffers);

  /// bufferRequested: a free buffer, or an empty span when all are in use (counted).
  std::span<uint8_t> request() noexcept;
  /// bufferCompleted: `valid_bytes` of the buffer starting at `data` hold records; queued for
  /// `drain`. A pointer this pool did not hand out is ignored and counted in `foreign()`.
  void complete(uint8_t* data, size_t valid_bytes) noexcept;
  /// Processing thread: calls `f` for each completed buffer (oldest first) outside the lock,
  /// then makes it free again. Returns the number of buffers drained. If `f` throws, the
  /// buffer is still freed and the exception propagates.
  size_t drain(const std::function<void(std::span<const uint8_t>)>& f);

  size_t buffer_bytes() const { return buffer_bytes_; }
  size_t capacity() const { return max_buffers_; }
  size_t free_count() const;
  size_t completed_count() const;
  uint64_t rejected() const;
  uint64_t foreign() const;

 private:
  size_t buffer_bytes_, max_buffers_;
  std::unique_ptr<uint64_t[]> storage_;  // uint64_t: 8-byte alignment
  mutable std::mutex mu_;
  std::vector<uint8_t*> free_;
  std::vector<std::pair<uint8_t*, size_t>> completed_;
  uint64_t rejected_ = 0, foreign_ = 0;
};

}  // namespace hs::tracer
