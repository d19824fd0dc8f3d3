// ActivityDecoder: CUPTI 13's activity record structs -> tracer/gpu_activity.h records.
// CUPTI build only (see tracer/CMakeLists.txt).
#include "tracer/cupti_decode.h"

#include <cupti.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

namespace hs::tracer {

namespace {

// The structs this decoder reads are the current ones of the installed header; a CUPTI whose
// header renames them fails to compile here rather than decoding the wrong layout.
using Kernel = CUpti_ActivityKernel10;
using Memcpy = CUpti_ActivityMemcpy6;
using MemcpyP2P = CUpti_ActivityMemcpyPtoP4;
using Memset = CUpti_ActivityMemset4;
using Api = CUpti_ActivityAPI;
using Sync = CUpti_ActivitySynchronization2;
using External = CUpti_ActivityExternalCorrelation;
using Overhead = CUpti_ActivityOverhead3;

const char* cupti_api_name(bool driver, uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) !=
      CUPTI_SUCCESS)
    return nullptr;
  return name;
}

int cupti_next_record(uint8_t* buffer, size_t valid, const void** record) {
  auto* r = const_cast<CUpti_Activity*>(static_cast<const CUpti_Activity*>(*record));
  const CUptiResult res = cuptiActivityGetNextRecord(buffer, valid, &r);
  *record = r;
  return res == CUPTI_SUCCESS ? 0 : res == CUPTI_ERROR_MAX_LIMIT_REACHED ? 1 : 2;
}

/// CUPTI's CUpti_ActivityMemoryKind (0 = unknown, 1 = pageable, ...) as nsys' ENUM_CUDA_MEM_KIND
/// (0 = pageable, ..., 7 = unknown).
MemKind mem_kind(uint32_t cupti) {
  if (cupti >= CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE && cupti <= CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC)
    return static_cast<MemKind>(cupti - 1);
  return MemKind::Unknown;
}

MemcpyKind copy_kind(uint32_t cupti) {
  return cupti <= CUPTI_ACTIVITY_MEMCPY_KIND_PTOP ? static_cast<MemcpyKind>(cupti) : MemcpyKind::Unknown;
}

std::optional<int64_t> graph_node(uint64_t id) {
  if (id == 0) return std::nullopt;
  return static_cast<int64_t>(id);
}

std::string demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return mangled;  // a C name (Triton's) or not mangled
  std::string out(d);
  std::free(d);
  return out;
}

/// Fields CUPTI's structs share, copied into one of ours.
template <class Out, class In>
void common_gpu_fields(Out& o, const In& r, const ClockCalibration& c) {
  o.device_id = r.deviceId;
  o.context_id = r.contextId;
  o.stream_id = r.streamId;
  o.correlation_id = r.correlationId;
  o.start_ns = c.to_host(r.start);
  o.end_ns = c.to_host(r.end);
}

/// A copy's fields, shared by CUPTI's memcpy and peer-to-peer memcpy structs.
template <class In>
MemcpyActivity copy_fields(const In& r, const ClockCalibration& c) {
  MemcpyActivity m{};
  common_gpu_fields(m, r, c);
  m.bytes = static_cast<int64_t>(r.bytes);
  m.copy_kind = copy_kind(r.copyKind);
  m.src_kind = mem_kind(r.srcKind);
  m.dst_kind = mem_kind(r.dstKind);
  m.graph_node_id = graph_node(r.graphNodeId);
  return m;
}

}  // namespace

ActivityDecoder::ActivityDecoder(ClockCalibration clock, ApiName api_name, NextRecord next_record)
    : clock_(clock),
      api_name_(api_name ? api_name : &cupti_api_name),
      next_record_(next_record ? next_record : &cupti_next_record) {}

void ActivityDecoder::decode_buffer(std::span<uint8_t> buffer) {
  const void* r = nullptr;
  for (;;) {
    const int res = next_record_(buffer.data(), buffer.size(), &r);
    if (res == 1) return;
    if (res != 0) {
      ++stats_.walk_errors;
      return;
    }
    decode_record(r);
  }
}

bool ActivityDecoder::decode_record(const void* record) {
  ++stats_.records;
  CUpti_ActivityKind kind;
  std::memcpy(&kind, record, sizeof kind);
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: kernel(record); return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY: memcpy(record); return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: memcpy_p2p(record); return true;
    case CUPTI_ACTIVITY_KIND_MEMSET: memset(record); return true;
    case CUPTI_ACTIVITY_KIND_RUNTIME: api(record, false); return true;
    case CUPTI_ACTIVITY_KIND_DRIVER: api(record, true); return true;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: sync(record); return true;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: external(record); return true;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: overhead(record); return true;
    default: ++stats_.unknown_kinds; return false;
  }
}

std::string_view ActivityDecoder::keep(std::string s) { return *strings_.insert(std::move(s)).first; }

void ActivityDecoder::see_context(uint32_t context, uint32_t device) {
  if (!context_device_.emplace(context, device).second || pending_syncs_.empty()) return;
  for (size_t i = 0; i < pending_syncs_.size();) {
    if (pending_syncs_[i].context_id == context) {
      pending_syncs_[i].device_id = device;
      syncs_.push_back(pending_syncs_[i]);
      pending_syncs_.erase(pending_syncs_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void ActivityDecoder::kernel(const void* p) {
  const auto& r = *static_cast<const Kernel*>(p);
  KernelActivity k{};
  common_gpu_fields(k, r, clock_);
  const char* mangled = r.name ? r.name : "";
  k.demangled_name = keep(demangle(mangled));
  k.short_name = short_kernel_name(k.demangled_name);
  if (k.demangled_name != mangled) k.mangled_name = keep(mangled);  // NULL when it was not mangled
  k.launch_type = r.launchType;
  k.cache_config = r.cacheConfig.config.executed;
  k.registers_per_thread = r.registersPerThread;
  k.grid_x = r.gridX, k.grid_y = r.gridY, k.grid_z = r.gridZ;
  k.block_x = r.blockX, k.block_y = r.blockY, k.block_z = r.blockZ;
  k.static_shared_memory = r.staticSharedMemory;
  k.dynamic_shared_memory = r.dynamicSharedMemory;
  k.local_memory_per_thread = r.localMemoryPerThread;
  k.local_memory_total = static_cast<int64_t>(r.localMemoryTotal_v2);
  k.grid_id = r.gridId;
  k.graph_node_id = graph_node(r.graphNodeId);
  kernels_.push_back(k);
  see_context(r.contextId, r.deviceId);
}

void ActivityDecoder::memcpy(const void* p) {
  using K = MemcpyKind;
  const auto& r = *static_cast<const Memcpy*>(p);
  MemcpyActivity m = copy_fields(r, clock_);
  const auto dev = static_cast<int32_t>(r.deviceId);
  if (m.copy_kind == K::HtoD || m.copy_kind == K::AtoD || m.copy_kind == K::DtoD) m.dst_device_id = dev;
  if (m.copy_kind == K::DtoH || m.copy_kind == K::DtoA || m.copy_kind == K::DtoD) m.src_device_id = dev;
  memcpys_.push_back(m);
  see_context(r.contextId, r.deviceId);
}

void ActivityDecoder::memcpy_p2p(const void* p) {
  const auto& r = *static_cast<const MemcpyP2P*>(p);
  MemcpyActivity m = copy_fields(r, clock_);
  m.src_device_id = static_cast<int32_t>(r.srcDeviceId);
  m.dst_device_id = static_cast<int32_t>(r.dstDeviceId);
  memcpys_.push_back(m);
  see_context(r.contextId, r.deviceId);
}

void ActivityDecoder::memset(const void* p) {
  const auto& r = *static_cast<const Memset*>(p);
  MemsetActivity m{};
  common_gpu_fields(m, r, clock_);
  m.value = r.value;
  m.bytes = static_cast<int64_t>(r.bytes);
  m.graph_node_id = graph_node(r.graphNodeId);
  m.mem_kind = mem_kind(r.memoryKind);
  memsets_.push_back(m);
  see_context(r.contextId, r.deviceId);
}

void ActivityDecoder::api(const void* p, bool driver) {
  const auto& r = *static_cast<const Api*>(p);
  const uint64_t key = (uint64_t{driver} << 32) | r.cbid;
  auto it = api_names_.find(key);
  if (it == api_names_.end()) {
    const char* n = api_name_(driver, r.cbid);
    std::string name = n ? std::string(strip_api_version(n))
                         : (driver ? "cuda driver cbid " : "cuda runtime cbid ") + std::to_string(r.cbid);
    it = api_names_.emplace(key, *api_name_strings_.insert(std::move(name)).first).first;
  }
  auto fill = [&](auto& a) {
    a.os_tid = r.threadId;
    a.correlation_id = r.correlationId;
    a.name = it->second;
    a.return_value = static_cast<int32_t>(r.returnValue);
    a.start_ns = clock_.to_host(r.start);
    a.end_ns = clock_.to_host(r.end);
  };
  if (driver)
    fill(driver_.emplace_back());
  else
    fill(runtime_.emplace_back());
}

void ActivityDecoder::sync(const void* p) {
  const auto& r = *static_cast<const Sync*>(p);
  SyncActivity y{};
  y.context_id = r.contextId;
  y.stream_id = r.streamId;
  y.correlation_id = r.correlationId;
  y.sync_type = r.type <= CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE ? static_cast<SyncType>(r.type)
                                                                                 : SyncType::Unknown;
  y.event_id = r.cudaEventId;
  y.start_ns = clock_.to_host(r.start);
  y.end_ns = clock_.to_host(r.end);
  if (auto it = context_device_.find(r.contextId); it != context_device_.end()) {
    y.device_id = it->second;
    syncs_.push_back(y);
  } else {
    pending_syncs_.push_back(y);
  }
}

void ActivityDecoder::external(const void* p) {
  const auto& r = *static_cast<const External*>(p);
  ExternalCorrelation x{};
  x.kind = static_cast<ExternalKind>(r.externalKind);
  x.external_id = r.externalId;
  x.correlation_id = r.correlationId;
  externals_.push_back(x);
}

void ActivityDecoder::overhead(const void* p) {
  const auto& r = *static_cast<const Overhead*>(p);
  OverheadActivity o{};
  o.overhead_kind = static_cast<OverheadKind>(r.overheadKind);
  o.object_kind = r.objectKind <= CUPTI_ACTIVITY_OBJECT_STREAM ? static_cast<OverheadObject>(r.objectKind)
                                                              : OverheadObject::Unknown;
  switch (r.objectKind) {
    case CUPTI_ACTIVITY_OBJECT_PROCESS: o.object_id = r.objectId.pt.processId; break;
    case CUPTI_ACTIVITY_OBJECT_THREAD: o.object_id = r.objectId.pt.threadId; break;
    case CUPTI_ACTIVITY_OBJECT_STREAM: o.stream_id = r.objectId.dcs.streamId; [[fallthrough]];
    case CUPTI_ACTIVITY_OBJECT_CONTEXT: o.context_id = r.objectId.dcs.contextId; [[fallthrough]];
    case CUPTI_ACTIVITY_OBJECT_DEVICE: o.object_id = r.objectId.dcs.deviceId; break;
    default: break;
  }
  o.correlation_id = r.correlationId;
  o.start_ns = clock_.to_host(r.start);
  o.end_ns = clock_.to_host(r.end);
  overheads_.push_back(o);
}

void ActivityDecoder::take_pending_syncs() {
  for (SyncActivity& y : pending_syncs_) syncs_.push_back(y);  // device_id stays 0
  pending_syncs_.clear();
}

ActivityBatch ActivityDecoder::batch(int64_t run_id) const {
  ActivityBatch b;
  b.run_id = run_id;
  b.kernels = kernels_;
  b.memcpys = memcpys_;
  b.memsets = memsets_;
  b.runtime_calls = runtime_;
  b.driver_calls = driver_;
  b.syncs = syncs_;
  b.external_correlations = externals_;
  b.overheads = overheads_;
  return b;
}

bool ActivityDecoder::empty() const {
  return kernels_.empty() && memcpys_.empty() && memsets_.empty() && runtime_.empty() && driver_.empty() &&
         syncs_.empty() && externals_.empty() && overheads_.empty();
}

void ActivityDecoder::clear() {
  kernels_.clear();
  memcpys_.clear();
  memsets_.clear();
  runtime_.clear();
  driver_.clear();
  syncs_.clear();
  externals_.clear();
  overheads_.clear();
  strings_.clear();
}

}  // namespace hs::tracer
