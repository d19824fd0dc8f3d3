// The CUDA runtime and CUPTI calls the CUPTI tracer makes, as a table of function pointers:
// `CuptiApi::real()` is the toolkit's, tests swap in their own to play a subscriber conflict
// or missing privileges without a GPU. CUPTI build only (includes cupti.h).
#pragma once

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <cstdint>

namespace hs::tracer {

struct CuptiApi {
  // CUDA runtime: the device probe made before any CUPTI call.
  cudaError_t (*get_device_count)(int* count);
  const char* (*cuda_error_name)(cudaError_t e);
  const char* (*cuda_error_string)(cudaError_t e);
  // CUPTI.
  CUptiResult (*get_version)(uint32_t* version);
  CUptiResult (*get_result_string)(CUptiResult result, const char** str);
  CUptiResult (*subscribe)(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata);
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle subscriber);
  CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType type);
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc requested,
                                    CUpti_BuffersCallbackCompleteFunc completed);
  CUptiResult (*enable)(CUpti_ActivityKind kind);
  CUptiResult (*disable)(CUpti_ActivityKind kind);
  CUptiResult (*flush_all)(uint32_t flag);
  CUptiResult (*get_num_dropped_records)(CUcontext context, uint32_t stream_id, size_t* dropped);
  CUptiResult (*push_external_correlation_id)(CUpti_ExternalCorrelationKind kind, uint64_t id);
  CUptiResult (*pop_external_correlation_id)(CUpti_ExternalCorrelationKind kind, uint64_t* last_id);
  CUptiResult (*get_timestamp)(uint64_t* timestamp);

  /// The toolkit's functions (cudaGetDeviceCount, cuptiSubscribe, ...).
  static const CuptiApi& real();
};

}  // namespace hs::tracer
