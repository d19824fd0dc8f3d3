#include "tracer/cupti_tracer.h"

#include <algorithm>
#include <cstdint>

namespace hs::tracer {

std::string_view to_string(ActivityKind k) {
  switch (k) {
    case ActivityKind::ConcurrentKernel: return "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL";
    case ActivityKind::Memcpy: return "CUPTI_ACTIVITY_KIND_MEMCPY";
    case ActivityKind::Memset: return "CUPTI_ACTIVITY_KIND_MEMSET";
    case ActivityKind::Runtime: return "CUPTI_ACTIVITY_KIND_RUNTIME";
    case ActivityKind::Driver: return "CUPTI_ACTIVITY_KIND_DRIVER";
    case ActivityKind::Synchronization: return "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
    case ActivityKind::ExternalCorrelation: return "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION";
    case ActivityKind::Overhead: return "CUPTI_ACTIVITY_KIND_OVERHEAD";
  }
  return "CUPTI_ACTIVITY_KIND_INVALID";
}

void NullCuptiTracer::start(int64_t, const CuptiOptions&, ActivityWriter&) {
  throw CuptiUnavailable(std::string(kStatus) + ": GPU activity (kernels, memcpy, memset, API calls, syncs) is "
                                                "not traced; host events are");
}

std::vector<ClockSample> NullCuptiTracer::calibrate(int) {
  throw CuptiUnavailable(std::string(kStatus) + ": no GPU clock to calibrate against");
}

#ifndef HOOKSCOPE_WITH_CUPTI
std::unique_ptr<CuptiTracer> make_cupti_tracer() { return std::make_unique<NullCuptiTracer>(); }
#endif  // else tracer/cupti_activity_tracer.cpp

ActivityBufferPool::ActivityBufferPool(size_t buffer_bytes, size_t max_buffers)
    : buffer_bytes_(buffer_bytes), max_buffers_(max_buffers) {
  if (buffer_bytes == 0 || max_buffers == 0)
    throw std::invalid_argument("ActivityBufferPool: buffer_bytes and max_buffers must be > 0");
  const size_t words = (buffer_bytes + 7) / 8;
  buffer_bytes_ = words * 8;
  storage_.reset(new uint64_t[words * max_buffers]);
  free_.reserve(max_buffers);
  completed_.reserve(max_buffers);
  // Hand out the lowest address first (free_ is used as a stack).
  for (size_t i = max_buffers; i-- > 0;) free_.push_back(reinterpret_cast<uint8_t*>(storage_.get() + i * words));
}

std::span<uint8_t> ActivityBufferPool::request() noexcept {
  std::lock_guard lk(mu_);
  if (free_.empty()) {
    ++rejected_;
    return {};
  }
  uint8_t* b = free_.back();
  free_.pop_back();
  return {b, buffer_bytes_};
}

void ActivityBufferPool::complete(uint8_t* data, size_t valid_bytes) noexcept {
  const auto base = reinterpret_cast<uintptr_t>(storage_.get());
  const auto addr = reinterpret_cast<uintptr_t>(data);
  std::lock_guard lk(mu_);
  if (addr < base || addr - base >= buffer_bytes_ * max_buffers_ || (addr - base) % buffer_bytes_ != 0) {
    ++foreign_;
    return;
  }
  completed_.emplace_back(data, std::min(valid_bytes, buffer_bytes_));  // never reallocates: reserved
}

size_t ActivityBufferPool::drain(const std::function<void(std::span<const uint8_t>)>& f) {
  std::vector<std::pair<uint8_t*, size_t>> ready;
  {
    std::lock_guard lk(mu_);
    ready.swap(completed_);
    completed_.reserve(max_buffers_);
  }
  size_t done = 0;
  auto give_back = [&](size_t from) {
    std::lock_guard lk(mu_);
    for (size_t i = from; i < ready.size(); ++i) free_.push_back(ready[i].first);
  };
  for (; done < ready.size(); ++done) {
    try {
      f({ready[done].first, ready[done].second});
    } catch (...) {
      give_back(done);
      throw;
    }
    std::lock_guard lk(mu_);
    free_.push_back(ready[done].first);
  }
  return done;
}

size_t ActivityBufferPool::free_count() const {
  std::lock_guard lk(mu_);
  return free_.size();
}
size_t ActivityBufferPool::completed_count() const {
  std::lock_guard lk(mu_);
  return completed_.size();
}
uint64_t ActivityBufferPool::rejected() const {
  std::lock_guard lk(mu_);
  return rejected_;
}
uint64_t ActivityBufferPool::foreign() const {
  std::lock_guard lk(mu_);
  return foreign_;
}

}  // namespace hs::tracer
