// CuptiActivityTracer: see tracer/cupti_activity_tracer.h. CUPTI build only.
#include "tracer/cupti_activity_tracer.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "tracer/events.h"

namespace hs::tracer {

namespace {

/// The started tracer CUPTI's buffer callbacks serve (they carry no user data).
std::atomic<CuptiActivityTracer*> g_active{nullptr};

CUptiResult real_get_num_dropped(CUcontext ctx, uint32_t stream, size_t* dropped) {
  return cuptiActivityGetNumDroppedRecords(ctx, stream, dropped);
}

CUpti_ActivityKind cupti_kind(ActivityKind k) {
  switch (k) {
    case ActivityKind::ConcurrentKernel: return CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    case ActivityKind::Memcpy: return CUPTI_ACTIVITY_KIND_MEMCPY;
    case ActivityKind::Memset: return CUPTI_ACTIVITY_KIND_MEMSET;
    case ActivityKind::Runtime: return CUPTI_ACTIVITY_KIND_RUNTIME;
    case ActivityKind::Driver: return CUPTI_ACTIVITY_KIND_DRIVER;
    case ActivityKind::Synchronization: return CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    case ActivityKind::ExternalCorrelation: return CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    case ActivityKind::Overhead: return CUPTI_ACTIVITY_KIND_OVERHEAD;
  }
  return CUPTI_ACTIVITY_KIND_INVALID;
}

std::string kind_name(CUpti_ActivityKind k) {
  if (k == CUPTI_ACTIVITY_KIND_MEMCPY2) return "CUPTI_ACTIVITY_KIND_MEMCPY2";
  for (ActivityKind a : {ActivityKind::ConcurrentKernel, ActivityKind::Memcpy, ActivityKind::Memset,
                         ActivityKind::Runtime, ActivityKind::Driver, ActivityKind::Synchronization,
                         ActivityKind::ExternalCorrelation, ActivityKind::Overhead})
    if (cupti_kind(a) == k) return std::string(to_string(a));
  return "activity kind " + std::to_string(static_cast<int>(k));
}

/// Why a CUPTI error means no GPU tracing, in words a user can act on.
std::string cause_of(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another CUPTI client is attached to this process (nsys, ncu, compute-sanitizer, DCGM or a profiler)";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return "GPU profiling needs privileges (NVreg_RestrictProfilingToAdminUsers=0, or CAP_SYS_ADMIN / "
             "--cap-add SYS_ADMIN in a container)";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED: return "CUPTI does not trace virtualized GPUs";
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED: return "CUPTI does not trace CMP devices";
    default: return "CUPTI failed";
  }
}

}  // namespace

const CuptiApi& CuptiApi::real() {
  static const CuptiApi api{
      &cudaGetDeviceCount,
      &cudaGetErrorName,
      &cudaGetErrorString,
      &cuptiGetVersion,
      &cuptiGetResultString,
      &cuptiSubscribe,
      &cuptiUnsubscribe,
      &cuptiSetThreadIdType,
      &cuptiActivityRegisterCallbacks,
      &cuptiActivityEnable,
      &cuptiActivityDisable,
      &cuptiActivityFlushAll,
      &real_get_num_dropped,
      &cuptiActivityPushExternalCorrelationId,
      &cuptiActivityPopExternalCorrelationId,
      &cuptiGetTimestamp,
  };
  return api;
}

std::unique_ptr<CuptiTracer> make_cupti_tracer() { return std::make_unique<CuptiActivityTracer>(); }

CuptiActivityTracer::CuptiActivityTracer(const CuptiApi& api) : api_(api) {}

CuptiActivityTracer::~CuptiActivityTracer() {
  try {
    stop();
  } catch (...) {
  }
}

void CuptiActivityTracer::probe() const {  // mu_ held
  if (probed_) return;
  probed_ = true;
  int n = 0;
  const cudaError_t e = api_.get_device_count(&n);
  if (e != cudaSuccess || n <= 0) {
    std::string why = e != cudaSuccess ? std::string(api_.cuda_error_name(e)) + ": " + api_.cuda_error_string(e)
                                       : "0 devices";
    unavailable_ = "CUPTI unavailable: no CUDA device (cudaGetDeviceCount: " + why + ")";
    return;
  }
  devices_ = n;
}

bool CuptiActivityTracer::available() const noexcept {
  std::lock_guard lk(mu_);
  try {
    probe();
  } catch (...) {
    unavailable_ = "CUPTI unavailable: the CUDA runtime could not be asked for devices";
  }
  return unavailable_.empty();
}

std::string CuptiActivityTracer::status() const {
  std::lock_guard lk(mu_);
  probe();
  if (!unavailable_.empty()) return unavailable_;
  const std::string devs = std::to_string(devices_) + (devices_ == 1 ? " CUDA device" : " CUDA devices");
  if (!started_) return "CUPTI ready: " + devs;
  return "CUPTI " + std::to_string(version_ / 10000) + "." + std::to_string(version_ / 100 % 100) + " (API " +
         std::to_string(version_) + ") tracing " + devs;
}

std::string CuptiActivityTracer::error_status(const Failure& f) const {
  const char* s = nullptr;
  if (api_.get_result_string(f.result, &s) != CUPTI_SUCCESS || s == nullptr) s = "CUPTI error";
  return "CUPTI unavailable: " + f.cause + " (" + f.call + ": " + s + " = " + std::to_string(static_cast<int>(f.result)) +
         ")";
}

void CuptiActivityTracer::fail(const Failure& f) {  // mu_ held
  undo_start();
  unavailable_ = error_status(f);
  throw CuptiUnavailable(unavailable_);
}

void CuptiActivityTracer::undo_start() {  // mu_ held; CUPTI state only
  for (CUpti_ActivityKind k : enabled_) api_.disable(k);
  enabled_.clear();
  if (subscriber_) api_.unsubscribe(subscriber_);
  subscriber_ = {};
  CuptiActivityTracer* self = this;
  g_active.compare_exchange_strong(self, nullptr);
}

void CuptiActivityTracer::enable_kinds(const CuptiOptions& options) {  // mu_ held
  std::vector<CUpti_ActivityKind> kinds;
  for (ActivityKind k : options.kinds) {
    kinds.push_back(cupti_kind(k));
    if (k == ActivityKind::Memcpy) kinds.push_back(CUPTI_ACTIVITY_KIND_MEMCPY2);  // peer copies
  }
  for (CUpti_ActivityKind k : kinds) {
    if (const CUptiResult r = api_.enable(k); r != CUPTI_SUCCESS)
      fail({cause_of(r), "cuptiActivityEnable(" + kind_name(k) + ")", r});
    enabled_.push_back(k);
  }
}

CUptiResult CuptiActivityTracer::sample_clocks(int samples, std::vector<ClockSample>& out) const {
  out.clear();
  out.reserve(static_cast<size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    uint64_t gpu = 0;
    const int64_t before = events::now_ns();
    if (const CUptiResult r = api_.get_timestamp(&gpu); r != CUPTI_SUCCESS) return r;
    const int64_t after = events::now_ns();
    out.push_back(ClockSample{0, before + (after - before) / 2, static_cast<int64_t>(gpu)});
  }
  return CUPTI_SUCCESS;
}

void CuptiActivityTracer::start(int64_t run_id, const CuptiOptions& options, ActivityWriter& writer) {
  if (options.buffer_bytes == 0 || options.max_buffers == 0 || options.calibration_samples < 1)
    throw std::invalid_argument("CuptiActivityTracer::start: buffer_bytes, max_buffers and calibration_samples must be > 0");
  std::lock_guard lk(mu_);
  if (started_) throw std::logic_error("CuptiActivityTracer::start: already started");
  probe();
  if (!unavailable_.empty()) throw CuptiUnavailable(unavailable_);
  pool_ = std::make_unique<ActivityBufferPool>(options.buffer_bytes, options.max_buffers);
  CuptiActivityTracer* none = nullptr;
  if (!g_active.compare_exchange_strong(none, this))
    throw CuptiUnavailable("CUPTI unavailable: another CUPTI tracer of this process is started");
  auto check = [&](CUptiResult r, const char* call) {
    if (r != CUPTI_SUCCESS) fail({cause_of(r), call, r});
  };
  check(api_.get_version(&version_), "cuptiGetVersion");  // the first CUPTI call
  check(api_.subscribe(&subscriber_, &no_op_callback, nullptr), "cuptiSubscribe");
  check(api_.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM), "cuptiSetThreadIdType");
  check(sample_clocks(options.calibration_samples, clock_samples_), "cuptiGetTimestamp");
  decoder_ = std::make_unique<ActivityDecoder>(ClockCalibration::from_samples(clock_samples_));
  check(api_.register_callbacks(&buffer_requested, &buffer_completed), "cuptiActivityRegisterCallbacks");
  enable_kinds(options);
  writer_ = &writer;
  run_id_ = run_id;
  dropped_ = 0;
  dropped_written_ = 0;
  flush_requested_ = flush_done_ = 0;
  stopping_ = false;
  writer_error_ = nullptr;
  started_ = true;
  tracing_ = true;
  worker_ = std::thread(&CuptiActivityTracer::process_loop, this);
}

void CuptiActivityTracer::flush() {
  if (!tracing_) return;
  api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // completes every buffer before returning
  std::unique_lock lk(work_mu_);
  const uint64_t want = ++flush_requested_;
  work_cv_.notify_one();
  done_cv_.wait(lk, [&] { return flush_done_ >= want; });
  if (writer_error_) std::rethrow_exception(std::exchange(writer_error_, nullptr));
}

void CuptiActivityTracer::stop() {
  {
    std::lock_guard lk(mu_);
    if (!started_) return;
    tracing_ = false;
    for (CUpti_ActivityKind k : enabled_) api_.disable(k);
    enabled_.clear();
    api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (subscriber_) api_.unsubscribe(subscriber_);
    subscriber_ = {};
  }
  {
    std::lock_guard lk(work_mu_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
  std::exception_ptr err;
  {
    std::lock_guard lk(mu_);
    CuptiActivityTracer* self = this;
    g_active.compare_exchange_strong(self, nullptr);
    started_ = false;
  }
  {
    std::lock_guard lk(work_mu_);
    err = std::exchange(writer_error_, nullptr);
  }
  if (err) std::rethrow_exception(err);
}

namespace {
thread_local int t_pushed = 0;  // ids this thread pushed and has not popped
}

void CuptiActivityTracer::push_external_id(ExternalKind kind, uint64_t id) noexcept {
  if (!tracing_.load(std::memory_order_relaxed)) return;
  if (api_.push_external_correlation_id(static_cast<CUpti_ExternalCorrelationKind>(kind), id) == CUPTI_SUCCESS)
    ++t_pushed;
}

void CuptiActivityTracer::pop_external_id(ExternalKind kind) noexcept {
  if (t_pushed == 0) return;  // its push happened before start (or failed)
  uint64_t last = 0;
  api_.pop_external_correlation_id(static_cast<CUpti_ExternalCorrelationKind>(kind), &last);
  --t_pushed;
}

std::vector<ClockSample> CuptiActivityTracer::calibrate(int samples) {
  if (samples < 1) throw std::invalid_argument("CuptiActivityTracer::calibrate: samples must be >= 1");
  std::lock_guard lk(mu_);
  probe();
  if (!unavailable_.empty()) throw CuptiUnavailable(unavailable_);
  std::vector<ClockSample> out;
  if (const CUptiResult r = sample_clocks(samples, out); r != CUPTI_SUCCESS)
    throw CuptiUnavailable(error_status({"no CUPTI clock", "cuptiGetTimestamp", r}));
  return out;
}

DecodeStats CuptiActivityTracer::decode_stats() const {
  std::lock_guard lk(decoder_mu_);
  return decoder_ ? decoder_->stats() : DecodeStats{};
}

uint64_t CuptiActivityTracer::rejected_buffers() const {
  std::lock_guard lk(mu_);
  return pool_ ? pool_->rejected() : 0;
}

// ---- the callbacks and the processing thread -------------------------------------------------

void CUPTIAPI CuptiActivityTracer::buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  CuptiActivityTracer* t = g_active.load();
  const std::span<uint8_t> b = t ? t->pool_->request() : std::span<uint8_t>{};
  *buffer = b.empty() ? nullptr : b.data();  // nullptr: CUPTI >= 13 drops and counts the records
  *size = b.size();
}

void CUPTIAPI CuptiActivityTracer::buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                                                   size_t valid) {
  CuptiActivityTracer* t = g_active.load();
  if (t == nullptr || buffer == nullptr) return;
  t->pool_->complete(buffer, valid);
  size_t dropped = 0;  // outside every lock: CUPTI's own lock + ours deadlocked Kineto
  if (t->api_.get_num_dropped_records(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) t->dropped_ += dropped;
  t->work_cv_.notify_one();
}

void CuptiActivityTracer::process_loop() {
  std::unique_lock lk(work_mu_);
  for (;;) {
    work_cv_.wait_for(lk, std::chrono::milliseconds(100), [&] {
      return stopping_ || flush_requested_ != flush_done_ || pool_->completed_count() > 0;
    });
    const uint64_t generation = flush_requested_;
    const bool last = stopping_;
    lk.unlock();
    std::exception_ptr err = drain_and_write(last);
    lk.lock();
    if (err && !writer_error_) writer_error_ = err;
    flush_done_ = std::max(flush_done_, generation);
    done_cv_.notify_all();
    if (last) return;
  }
}

std::exception_ptr CuptiActivityTracer::drain_and_write(bool final_batch) {
  std::lock_guard lk(decoder_mu_);
  try {
    pool_->drain([&](std::span<const uint8_t> b) {
      if (!b.empty()) decoder_->decode_buffer({const_cast<uint8_t*>(b.data()), b.size()});
    });
    if (final_batch) decoder_->take_pending_syncs();
    const uint64_t dropped = dropped_.load();
    if (decoder_->empty() && clock_samples_.empty() && dropped == dropped_written_) return nullptr;
    ActivityBatch b = decoder_->batch(run_id_);
    b.clock_samples = clock_samples_;
    b.dropped_records = dropped - dropped_written_;
    dropped_written_ = dropped;
    writer_->write_activity(b);
    clock_samples_.clear();
    decoder_->clear();
    return nullptr;
  } catch (...) {
    clock_samples_.clear();
    decoder_->clear();  // the batch is lost; the error surfaces from flush / stop
    return std::current_exception();
  }
}

}  // namespace hs::tracer
