// Ties a GPU's work to the hook call or module forward that launched it: a runtime subscriber
// that pushes each call's external correlation id to CUPTI around it (ExternalKind CUSTOM1, as
// Kineto does for user annotations), so every CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY record made
// meanwhile gets an EXTERNAL_CORRELATION row naming it: HOOK_EVENTS.externalId (a hook method)
// or MODULE_COMPUTE.externalId (an AlignDevicesHook module's forward, from the end of its
// pre_forward to the call of its post_forward: the outermost ones, a SequentialHook's when the
// AlignDevicesHook runs inside one).
//
// CUPTI keeps one stack of external ids per thread; the hooks run on the thread that calls the
// model, so one subscriber serves one calling thread. Pushes nest as the calls do (a forward
// whose pre_forward ran inside a SequentialHook's is pushed when that hook's call ends); a
// forward that threw (its post_forward never comes) is popped when an enclosing module's
// post_forward begins, or when the subscriber is destroyed. Nothing is pushed while the runtime has no sink
// (an interleaved eager baseline: its events are not recorded, so its GPU work stays
// unattributed rather than named after calls that have no rows).
#pragma once

#include <cstdint>
#include <vector>

#include "hooks/runtime.h"
#include "hooks/subscriber.h"
#include "tracer/cupti_tracer.h"

namespace hs::engines {

class CuptiCorrelation final : public hooks::RuntimeSubscriber {
 public:
  /// Subscribes to `runtime` until destroyed; `cupti` must outlive it.
  CuptiCorrelation(hooks::Runtime& runtime, tracer::CuptiTracer& cupti);
  /// Pops every id still pushed, then unsubscribes.
  ~CuptiCorrelation() override;
  CuptiCorrelation(const CuptiCorrelation&) = delete;
  CuptiCorrelation& operator=(const CuptiCorrelation&) = delete;

  void on_hook_begin(const hooks::HookCall& call) override;
  void on_hook_end(const hooks::HookCall& call) override;

  /// Ids pushed and not yet popped, outermost first.
  std::vector<uint64_t> pushed() const;

 private:
  struct Pushed {
    uint64_t id;
    const models::HookableModule* forward_of;  // a module forward's id: the module; nullptr for a hook call
  };
  void push(uint64_t id, const models::HookableModule* forward_of);
  void pop();

  hooks::Runtime& runtime_;
  tracer::CuptiTracer& cupti_;
  std::vector<Pushed> stack_;
  std::vector<Pushed> pending_;  // forwards whose pre_forward ended inside an enclosing hook call
  hooks::Runtime::Subscription subscription_;  // last: unsubscribes before the stack goes
};

}  // namespace hs::engines
