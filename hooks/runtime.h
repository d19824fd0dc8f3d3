// The runtime of one capture, one plan or one test: the state accelerate's hooks consult while
// they run, gathered in one object.
//
// accelerate's hooks reach process state without taking it as an argument — `torch.cuda`'s
// devices, the `torch.compiler.disable` decorators, `logging`. This port keeps the hooks' call
// signatures, so that state lives in a `Runtime`:
//   - the logical devices (`devices()`, hooks/device.h): the accelerators, which logical device a
//     storage belongs to, the execution-device stack;
//   - the memory ledger (`ledger()`, hooks/memory.h);
//   - the subscribers that hear every move, hook call and weight swap (hooks/subscriber.h);
//   - the event sink (the tracer) and the adapter that turns those notifications into events
//     (hooks/event_adapter.h);
//   - the compile policy and the compiler-disabled scopes' depth and observer
//     (`scopes()`, hooks/compiler_disable.h);
//   - the logger for accelerate's warnings and info lines;
//   - the move guards `dispatch_model` sets;
//   - the emulated compiler's frame counter (`next_compile_frame`, compile/compile.h).
// `hookscope capture` and `hookscope plan` build one from their arguments; every test fixture
// builds a fresh one.
//
// The one seam: the hooks cannot take the runtime as an argument, so a runtime is installed on
// a thread for a scope (`RuntimeScope`) and found with `Runtime::current()`. The per-thread
// pointer lives in `models::CallContext` (models/module.h), which Runtime extends so that module
// calls keep their stack in the runtime too. That pointer is the only mutable global or
// thread-local state of models/, hooks/ and compile/; the rest is owned by a runtime or by an
// object passed explicitly: a compiled function owns its cache and the lock that serialises
// its captured calls, and takes its CUDA-graph backend in its CompileOptions; the offload
// store's temporary files are named from the process and thread ids, with no counter. What is
// process-wide besides is constant (the tokenizer's Unicode tables, built once on first use)
// or torch's own (the ATen op callback a capture adds is thread-local in torch). A runtime is
// driven by one thread at a time: its execution-device stack, scope depth, module call stack
// and frame counter describe that thread's calls, so threads that capture at the same time
// each drive their own runtime.
//
// Around an AlignDevicesHook's forward the runtime keeps the device bookkeeping the emulated
// accelerators need (it decides `device_of`, so it is behaviour, not instrumentation): when the
// hook's pre_forward ends, its execution device is pushed; when its post_forward begins, the
// module's outputs are tagged with it and it is popped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "hooks/compiler_disable.h"
#include "hooks/device.h"
#include "hooks/memory.h"
#include "hooks/subscriber.h"
#include "models/module.h"
#include "tracer/events.h"

namespace hs::hooks {

class EventSinkAdapter;

/// Logger for accelerate's warnings ("WARNING"), info lines ("INFO") and verbose prints
/// ("VERBOSE").
using LogFn = std::function<void(const std::string& level, const std::string& message)>;

/// What a runtime is built from.
struct RuntimeOptions {
  /// Logical accelerators 0..accelerators-1 (`hookscope capture --devices N`).
  int accelerators = 0;
  /// Back as many accelerators as there are CUDA devices with real ones; the rest are emulated.
  bool prefer_real = true;
  /// Emulate every accelerator on cuda:0 instead of in CPU memory (when a GPU exists).
  bool emulate_on_gpu = false;
  /// budget_bytes[i]: accelerator i's max_memory, recorded as its total memory (0 or missing:
  /// none given).
  std::vector<int64_t> budget_bytes = {};
  CompilePolicy compile_policy = CompilePolicy::WholeHook;
  /// Where accelerate's messages go; null = stderr ("[accelerate LEVEL] message").
  LogFn log = nullptr;

  /// One real accelerator per visible CUDA device (none without CUDA): what a plain torch
  /// process sees.
  static RuntimeOptions cuda_devices();
};

class Runtime final : public models::CallContext {
 public:
  /// Throws std::invalid_argument for a negative accelerator count.
  explicit Runtime(RuntimeOptions options = {});
  /// Uninstall it first (its RuntimeScope must have ended).
  ~Runtime();

  /// The runtime installed on the calling thread (see RuntimeScope). Throws std::logic_error
  /// when there is none: the hooks, DeviceManager users and compiled calls need one.
  static Runtime& current();
  /// The same, or nullptr.
  static Runtime* current_or_null();

  DeviceManager& devices() { return *devices_; }
  const DeviceManager& devices() const { return *devices_; }
  MemoryLedger& ledger() { return *ledger_; }

  DisabledScopes& scopes() { return scopes_; }
  const DisabledScopes& scopes() const { return scopes_; }
  CompilePolicy compile_policy() const { return scopes_.policy; }
  void set_compile_policy(CompilePolicy p) { scopes_.policy = p; }

  /// The run's event sink (the tracer), or nullptr: recording off. Not owned: keep it alive
  /// until it is replaced. Setting one subscribes the event adapter (hooks/event_adapter.h);
  /// the memory ledger and the emulated compiler write to it directly.
  events::EventSink* sink() const { return sink_; }
  void set_sink(events::EventSink* sink);
  /// The adapter that turns the runtime's notifications into events, and keeps the texts the
  /// sink pinned (hooks/event_adapter.h).
  EventSinkAdapter& event_adapter() { return *adapter_; }

  /// Unsubscribes when destroyed (or reset). Movable.
  class Subscription {
   public:
    Subscription() = default;
    Subscription(Subscription&& o) noexcept;
    Subscription& operator=(Subscription&& o) noexcept;
    ~Subscription() { reset(); }
    void reset();

   private:
    friend class Runtime;
    Subscription(Runtime* r, RuntimeSubscriber* s) : runtime_(r), subscriber_(s) {}
    Runtime* runtime_ = nullptr;
    RuntimeSubscriber* subscriber_ = nullptr;
  };
  /// Adds `s` (not owned) after the subscribers already there; it hears everything published
  /// until the returned handle is destroyed (destroy it before the runtime). The memory ledger
  /// is subscribed from the start.
  [[nodiscard]] Subscription subscribe(RuntimeSubscriber& s);

  /// Publishing (DeviceManager::to, the hooks, WeightSwapScope): each notification goes once to
  /// every subscriber, in subscription order. `hook_begin` and `hook_end` also keep the
  /// execution-device bookkeeping (see the top of this file). `hook_begin` sets
  /// `call.called_ns`, `call.id` (a fresh external correlation id) and, after the
  /// notifications, `call.start_ns`; `hook_end` sets `call.end_ns` (the times only while
  /// `timed()`, else 0) and, for a completed
  /// AlignDevicesHook pre_forward, `call.compute_id` (another fresh id: the module's forward
  /// that follows) before them.
  void publish(const Move& m);
  void publish(const WeightSwapRecord& w);
  /// Whether hook calls and weight swaps are timed: a sink records or a subscriber
  /// `wants_times()`. Unrecorded, a hooked call reads no clock.
  bool timed() const { return sink_ != nullptr || timed_subscribers_ > 0; }
  void hook_begin(HookCall& call);
  void hook_end(HookCall& call);

  /// accelerate's messages, to the logger (stderr when none is set).
  void log(const std::string& level, const std::string& message) const;
  void set_logger(LogFn fn);

  /// dispatch_model's guard on `module.to` (see hooks.h: set_move_guard).
  void set_move_guard(const models::HookableModule& module, bool on);
  bool has_move_guard(const models::HookableModule& module) const;

  /// Dynamo's frame counter, for the emulated compiler (compile/compile.h): 0, 1, 2, ... — each
  /// compiled function takes the next one when it first compiles in this runtime (the "0" of
  /// its "0/1" ids).
  int next_compile_frame() { return next_compile_frame_++; }

 private:
  friend class RuntimeScope;
  void unsubscribe(RuntimeSubscriber* s);

  // Declared before what subscribes, so it outlives every Subscription member.
  std::vector<RuntimeSubscriber*> subscribers_;
  int timed_subscribers_ = 0;  // those of subscribers_ that want_times()
  uint64_t last_external_id_ = 0;  // HookCall::id / compute_id: 1, 2, ... per runtime
  int next_compile_frame_ = 0;
  DisabledScopes scopes_;
  events::EventSink* sink_ = nullptr;
  std::unique_ptr<DeviceManager> devices_;
  std::unique_ptr<MemoryLedger> ledger_;
  std::unique_ptr<EventSinkAdapter> adapter_;
  Subscription adapter_subscription_;
  mutable std::mutex log_mu_;
  LogFn log_;
  mutable std::mutex guard_mu_;
  std::unordered_set<const models::HookableModule*> move_guards_;
};

/// RAII: installs a runtime on the calling thread for a scope; the one installed before (or
/// none) comes back when it ends. Scopes nest; destroy them in reverse order.
class RuntimeScope {
 public:
  explicit RuntimeScope(Runtime& runtime);
  ~RuntimeScope();
  RuntimeScope(const RuntimeScope&) = delete;
  RuntimeScope& operator=(const RuntimeScope&) = delete;

 private:
  models::CallContext* previous_;
};

/// RAII around one weight onload or offload of one tensor by an AlignDevicesHook (the loops of
/// its `_onload_weights` / `_offload_weights`). While an onload scope is open, the copies
/// `DeviceManager::to` makes are weight onloads (`Move::weight_onload`), not activation
/// transfers. When the scope closes normally (not by an exception), the runtime publishes one
/// WeightSwapRecord timed from the scope's construction — for an onload, from before the
/// weights_map lookup to after the copy.
class WeightSwapScope {
 public:
  enum class Kind { Onload, Offload };
  /// `device`: the destination (the execution device, or meta for an offload).
  WeightSwapScope(Kind kind, const AlignDevicesHook& hook, const models::HookableModule& module,
                  const std::string& tensor, const DeviceId& device);
  ~WeightSwapScope();
  WeightSwapScope(const WeightSwapScope&) = delete;
  WeightSwapScope& operator=(const WeightSwapScope&) = delete;

  /// The tensor swapped: the weights_map entry for an onload, the tensor sent to meta for an
  /// offload. A scope closed without one publishes nothing.
  void set_tensor(torch::Tensor value) { value_ = std::move(value); }

 private:
  Runtime& runtime_;
  Kind kind_;
  const AlignDevicesHook& hook_;
  const models::HookableModule& module_;
  const std::string& tensor_;
  DeviceId device_;
  int64_t start_ns_;
  int uncaught_;
  torch::Tensor value_;
};

/// accelerate's warnings and info lines: the current runtime's logger (`Runtime::log`); stderr
/// ("[accelerate LEVEL] message") when no runtime is installed.
void log(const std::string& level, const std::string& message);

}  // namespace hs::hooks
