// The event vocabulary (DESIGN.md §6): what models, hooks and the compile engine report, and
// the narrow `EventSink` interface they report to. Dependency-free on purpose: the hooks
// never depend on SQLite or CUPTI; the tracer implements the sink.
//
// Times are host steady-clock nanoseconds (`hs::events::now_ns()`); sizes are bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hs::events {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Which hook callback ran.
enum class HookPhase { PreForward, PostForward, InitHook, DetachHook };

/// A hook callback span: e.g. `AlignDevicesHook.pre_forward` on `model.layers.3`.
struct HookSpan {
  std::string_view hook;      ///< "AlignDevicesHook", "SequentialHook", "CpuOffload", ...
  HookPhase phase;
  std::string_view module;    ///< module FQN ("" = root)
  std::string_view module_class;
  int64_t start_ns, end_ns;
};

/// Where an onloaded weight came from.
enum class WeightSource { Cpu, Disk, Device };

/// A weight onload (weights_map → execution device) or offload (→ meta) of one tensor.
struct WeightSwap {
  bool onload;                  ///< true: materialised for a forward; false: back to meta
  std::string_view module;      ///< FQN of the hooked module
  std::string_view tensor;      ///< tensor name relative to the module ("weight", "0.bias")
  int64_t bytes;
  std::string_view dtype;       ///< "float32", "bfloat16", ...
  WeightSource source;
  std::string_view device;      ///< destination logical device ("0", "cpu", "meta")
  bool pinned;                  ///< host source was pinned memory
  int64_t start_ns, end_ns;
};

/// An activation / tensor copy between two logical devices. Weight onloads are WeightSwap
/// events, never also Transfers.
struct Transfer {
  std::string_view src, dst;    ///< logical devices: "0", "1", "cpu"
  int64_t bytes;
  bool emulated;                ///< at least one side is an emulated accelerator
  std::string_view module;      ///< module whose hook moved it ("" when unknown)
  int64_t start_ns, end_ns;
};

/// Entry into a compiler-disabled scope (the C++ stand-in for `torch.compiler.disable`).
struct DisabledScope {
  std::string_view function;    ///< e.g. "AlignDevicesHook.pre_forward"
  std::string_view module;      ///< FQN of the module the hook serves
  int depth;                    ///< nesting depth; > 1 = nested (counts once as a break)
  int64_t start_ns, end_ns;
};

/// A module's forward on its execution device (the compute lane of that device).
struct ModuleCompute {
  std::string_view module;      ///< FQN
  std::string_view module_class;
  std::string_view device;      ///< logical device ("0", "cpu")
  int64_t start_ns, end_ns;
};

/// A captured region of the compile engine (the piece between two graph breaks).
struct Region {
  int index;                    ///< 0-based within one compiled call
  int64_t op_count;             ///< ATen ops recorded while the region ran
  std::string_view backend;     ///< "eager", "cudagraphs"
  int64_t start_ns, end_ns;
};

/// A graph break: a compiler-disabled function entered inside a captured region.
struct GraphBreak {
  std::string_view reason;      ///< Dynamo's wording
  std::string_view function;    ///< e.g. "AlignDevicesHook.pre_forward"
  std::string_view module;      ///< FQN of the module whose hook broke the graph
  std::string_view module_stack;///< " > "-joined FQNs, outermost first
  int64_t time_ns;
};

/// One generation step (prefill = step 0).
struct GenerationStep {
  int64_t step;
  int64_t token;
  int64_t start_ns, end_ns;
};

/// Bytes resident on a logical device at a point in time.
struct MemoryCounter {
  std::string_view device;
  int64_t bytes;
  int64_t time_ns;
};

/// The sink. Every method has an empty default so a sink implements only what it records.
/// Implementations must be cheap and must not throw on the recording path.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void hook_span(const HookSpan&) {}
  virtual void weight_swap(const WeightSwap&) {}
  virtual void transfer(const Transfer&) {}
  virtual void disabled_scope(const DisabledScope&) {}
  virtual void module_compute(const ModuleCompute&) {}
  virtual void region(const Region&) {}
  virtual void graph_break(const GraphBreak&) {}
  virtual void generation_step(const GenerationStep&) {}
  virtual void memory_counter(const MemoryCounter&) {}
};

}  // namespace hs::events
