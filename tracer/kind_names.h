// The names of the event kinds' enumerations, one row per value: the row of its ENUM_* table
// (storage/schema.cpp writes the table from here) and what hookscope's reports, exports and
// viewer print for it. The enums themselves are in tracer/events.h, tracer/gpu_activity.h and
// tracer/event_writer.h; their names live here, once.
#pragma once

#include <cstddef>
#include <string_view>

#include "tracer/event_writer.h"
#include "tracer/events.h"
#include "tracer/gpu_activity.h"

namespace hs::tracer {

/// One value of an enumeration: its row of the ENUM_* table (id = the value), and its printed
/// name where that is not the label. Every name is a string literal (so NUL-terminated too).
template <class E>
struct EnumName {
  E value;
  std::string_view name;     ///< ENUM_*.name: nsys' constant (hookscope's own, in its style)
  std::string_view label;    ///< ENUM_*.label
  std::string_view printed;  ///< what hookscope prints for the value ("" = the label)
  constexpr std::string_view shown() const { return printed.empty() ? label : printed; }
};

/// ENUM_CUDA_MEMCPY_OPER. Printed as nsys' reports and Kineto name copies ("HtoD").
inline constexpr EnumName<MemcpyKind> kMemcpyKindNames[] = {
    {MemcpyKind::Unknown, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown", "Unknown"},
    {MemcpyKind::HtoD, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device", "HtoD"},
    {MemcpyKind::DtoH, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host", "DtoH"},
    {MemcpyKind::HtoA, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array", "HtoA"},
    {MemcpyKind::AtoH, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host", "AtoH"},
    {MemcpyKind::AtoA, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array", "AtoA"},
    {MemcpyKind::AtoD, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device", "AtoD"},
    {MemcpyKind::DtoA, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array", "DtoA"},
    {MemcpyKind::DtoD, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device", "DtoD"},
    {MemcpyKind::HtoH, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host", "HtoH"},
    {MemcpyKind::PtoP, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer", "PtoP"},
    {MemcpyKind::UvmHtoD, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device", "UvmHtoD"},
    {MemcpyKind::UvmDtoH, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host", "UvmDtoH"},
    {MemcpyKind::UvmDtoD, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device", "UvmDtoD"},
};

/// ENUM_CUDA_MEM_KIND. Printed as its label, as Kineto names a copy's memory ("Pageable").
inline constexpr EnumName<MemKind> kMemKindNames[] = {
    {MemKind::Pageable, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable", ""},
    {MemKind::Pinned, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned", ""},
    {MemKind::Device, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device", ""},
    {MemKind::Array, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array", ""},
    {MemKind::Managed, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed", ""},
    {MemKind::DeviceStatic, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static", ""},
    {MemKind::ManagedStatic, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static", ""},
    {MemKind::Unknown, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown", ""},
};

/// ENUM_CUPTI_SYNC_TYPE. Printed as Kineto names a sync (its `cuda_sync_kind`, "Event Sync").
inline constexpr EnumName<SyncType> kSyncTypeNames[] = {
    {SyncType::Unknown, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown", "Unknown Sync"},
    {SyncType::EventSynchronize, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync", "Event Sync"},
    {SyncType::StreamWaitEvent, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync",
     "Stream Wait Event"},
    {SyncType::StreamSynchronize, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync",
     "Stream Sync"},
    {SyncType::ContextSynchronize, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync",
     "Context Sync"},
};

/// ENUM_RUN_STATUS. Printed as its label ("complete").
inline constexpr EnumName<RunStatus> kRunStatusNames[] = {
    {RunStatus::Incomplete, "INCOMPLETE", "incomplete", ""},
    {RunStatus::Complete, "COMPLETE", "complete", ""},
    {RunStatus::Failed, "FAILED", "failed", ""},
};

/// ENUM_HOOK_PHASE. Printed as its label ("pre_forward").
inline constexpr EnumName<events::HookPhase> kHookPhaseNames[] = {
    {events::HookPhase::PreForward, "PRE_FORWARD", "pre_forward", ""},
    {events::HookPhase::PostForward, "POST_FORWARD", "post_forward", ""},
    {events::HookPhase::InitHook, "INIT_HOOK", "init_hook", ""},
    {events::HookPhase::DetachHook, "DETACH_HOOK", "detach_hook", ""},
};

/// ENUM_WEIGHT_SOURCE. Printed as its label ("cpu").
inline constexpr EnumName<events::WeightSource> kWeightSourceNames[] = {
    {events::WeightSource::Cpu, "CPU", "cpu", ""},
    {events::WeightSource::Disk, "DISK", "disk", ""},
    {events::WeightSource::Device, "DEVICE", "device", ""},
};

/// The printed name of `value` in `names`; `otherwise` for a value that is none of them (an id
/// read from a damaged file). Each caller keeps its own `otherwise`.
template <class E, size_t N>
constexpr std::string_view name_of(const EnumName<E> (&names)[N], E value, std::string_view otherwise) {
  for (const EnumName<E>& n : names)
    if (n.value == value) return n.shown();
  return otherwise;
}

/// The value whose printed name in `names` is `text`; `otherwise` when none is (the reverse of
/// name_of, for a name read from a trace).
template <class E, size_t N>
constexpr E value_named(const EnumName<E> (&names)[N], std::string_view text, E otherwise) {
  for (const EnumName<E>& n : names)
    if (n.shown() == text) return n.value;
  return otherwise;
}

/// "HtoD", "DtoH", ... (ENUM_CUDA_MEMCPY_OPER).
constexpr std::string_view copy_kind_name(MemcpyKind k, std::string_view otherwise) {
  return name_of(kMemcpyKindNames, k, otherwise);
}
/// "Pageable", "Pinned", "Device", ... (ENUM_CUDA_MEM_KIND).
constexpr std::string_view mem_kind_name(MemKind k, std::string_view otherwise) {
  return name_of(kMemKindNames, k, otherwise);
}
/// "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync", "Unknown Sync"
/// (ENUM_CUPTI_SYNC_TYPE).
constexpr std::string_view sync_type_name(SyncType s, std::string_view otherwise) {
  return name_of(kSyncTypeNames, s, otherwise);
}
/// "pre_forward", "post_forward", "init_hook", "detach_hook" (ENUM_HOOK_PHASE).
constexpr std::string_view hook_phase_name(events::HookPhase p, std::string_view otherwise) {
  return name_of(kHookPhaseNames, p, otherwise);
}
/// "cpu", "disk", "device" (ENUM_WEIGHT_SOURCE).
constexpr std::string_view weight_source_name(events::WeightSource s, std::string_view otherwise) {
  return name_of(kWeightSourceNames, s, otherwise);
}

}  // namespace hs::tracer
