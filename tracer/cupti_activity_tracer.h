// The CUPTI tracer: tracer/cupti_tracer.h's policy on the CUPTI Activity API. CUPTI build only
// (HOOKSCOPE_WITH_CUPTI); `make_cupti_tracer()` returns one of these there.
//
//  - Deferred init: constructing one calls nothing; `available()` asks the CUDA runtime for
//    its devices once (cudaGetDeviceCount, not CUPTI) and `start` makes the first CUPTI call.
//  - Degrading: no device, another CUPTI subscriber (nsys, ncu, compute-sanitizer, DCGM:
//    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), missing profiling privileges
//    (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) or any other CUPTI error in `start` leaves
//    `available() == false`, `status()` naming the cause, and `start` throws CuptiUnavailable
//    with that status: the capture goes on host-only.
//  - Records: CONCURRENT_KERNEL, MEMCPY, MEMCPY2, MEMSET, RUNTIME, DRIVER, SYNCHRONIZATION,
//    EXTERNAL_CORRELATION, OVERHEAD (as `CuptiOptions::kinds` asks), in buffers of an
//    ActivityBufferPool; a processing thread decodes completed buffers (ActivityDecoder) and
//    writes them to the ActivityWriter in batches, with the dropped-record count
//    (cuptiActivityGetNumDroppedRecords, read outside every lock) and, in the first batch,
//    the clock pairs `start` calibrated with.
//  - One tracer may be started per process at a time (CUPTI's callbacks carry no user data).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tracer/cupti_api.h"
#include "tracer/cupti_decode.h"
#include "tracer/cupti_tracer.h"

namespace hs::tracer {

class CuptiActivityTracer final : public CuptiTracer {
 public:
  /// `api`: the calls to make (tests pass a fake); must outlive the tracer.
  explicit CuptiActivityTracer(const CuptiApi& api = CuptiApi::real());
  /// stop(); errors are swallowed.
  ~CuptiActivityTracer() override;
  CuptiActivityTracer(const CuptiActivityTracer&) = delete;
  CuptiActivityTracer& operator=(const CuptiActivityTracer&) = delete;

  /// False when there is no CUDA device or `start` failed. The first call probes the devices.
  bool available() const noexcept override;
  /// "CUPTI unavailable: <cause> (<call>: <error>)", "CUPTI ready: N CUDA devices" before
  /// start, "CUPTI <version> tracing N CUDA devices" while started.
  std::string status() const override;
  /// Throws CuptiUnavailable (status) when unavailable, another tracer of this process is
  /// started, or a CUPTI call fails (then everything enabled so far is undone);
  /// std::logic_error when already started.
  void start(int64_t run_id, const CuptiOptions& options, ActivityWriter& writer) override;
  /// FLUSH_FORCED, then waits until the processing thread has written every completed buffer.
  /// Rethrows (once) an exception the writer threw on the processing thread.
  void flush() override;
  /// flush(), disables the kinds, unsubscribes, writes what is left (syncs whose device is
  /// unknown get device 0) and ends the processing thread. No-op when not started.
  void stop() override;
  void push_external_id(ExternalKind kind, uint64_t id) noexcept override;
  void pop_external_id(ExternalKind kind) noexcept override;
  /// `samples` (host steady clock, cuptiGetTimestamp) pairs, host time the midpoint of two
  /// reads around the GPU one; device 0 (CUPTI's timestamps are one clock for all devices).
  /// Throws CuptiUnavailable when unavailable, std::invalid_argument when samples < 1.
  std::vector<ClockSample> calibrate(int samples) override;
  uint64_t dropped_records() const noexcept override { return dropped_.load(); }

  /// What the decoder saw since construction (for tests and diagnostics).
  DecodeStats decode_stats() const;
  /// Activity buffers CUPTI asked for and did not get (pool exhausted).
  uint64_t rejected_buffers() const;

 private:
  struct Failure {
    std::string cause, call;
    CUptiResult result;
  };
  void probe() const;
  std::string error_status(const Failure& f) const;
  [[noreturn]] void fail(const Failure& f);
  void enable_kinds(const CuptiOptions& options);
  void undo_start();
  CUptiResult sample_clocks(int samples, std::vector<ClockSample>& out) const;
  void process_loop();
  std::exception_ptr drain_and_write(bool final_batch);
  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);
  static void CUPTIAPI no_op_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

  const CuptiApi& api_;
  mutable std::mutex mu_;  // state below, not the hot paths
  mutable bool probed_ = false;
  mutable int devices_ = 0;
  mutable std::string unavailable_;  // non-empty: the status saying why
  uint32_t version_ = 0;
  bool started_ = false;
  CUpti_SubscriberHandle subscriber_{};
  std::vector<CUpti_ActivityKind> enabled_;

  std::atomic<bool> tracing_{false};
  std::atomic<uint64_t> dropped_{0};
  uint64_t dropped_written_ = 0;
  std::unique_ptr<ActivityBufferPool> pool_;
  ActivityWriter* writer_ = nullptr;
  int64_t run_id_ = 0;
  std::vector<ClockSample> clock_samples_;  // written with the first batch
  mutable std::mutex decoder_mu_;  // decoder_, clock_samples_, dropped_written_ (processing thread)
  std::unique_ptr<ActivityDecoder> decoder_;

  std::mutex work_mu_;
  std::condition_variable work_cv_, done_cv_;
  uint64_t flush_requested_ = 0, flush_done_ = 0;
  bool stopping_ = false;
  std::exception_ptr writer_error_;
  std::thread worker_;
};

}  // namespace hs::tracer
