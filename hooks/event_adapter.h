// The tracer's side of a runtime's notifications: turns them into the event vocabulary
// (tracer/events.h) and hands them to the runtime's sink. `Runtime::set_sink` subscribes it; it
// is the only place where hook work becomes events, so the hook bodies carry no recording code.
//
//   Move that is not a weight onload   -> events::Transfer (src, dst, bytes, whether a side is
//                                         an emulated accelerator, the innermost module running)
//   HookCall end                       -> events::HookSpan (also when the method threw)
//   AlignDevicesHook: from the end of its pre_forward's work to the call of its post_forward
//                                      -> events::ModuleCompute on its execution device ("cpu"
//                                         without one)
//   WeightSwapRecord                   -> events::WeightSwap: an onload's source is "cpu" when
//                                         its weights_map holds the tensor in memory, "disk"
//                                         when it loads it from a file; offloads go to "meta"
//                                         from the device.
// Weight onloads are recorded once, as WeightSwap events, never also as Transfers.
#pragma once

#include <cstdint>
#include <vector>

#include "hooks/subscriber.h"

namespace hs::hooks {

class Runtime;

class EventSinkAdapter final : public RuntimeSubscriber {
 public:
  explicit EventSinkAdapter(Runtime& runtime) : runtime_(runtime) {}

  void on_move(const Move& m) override;
  void on_hook_begin(const HookCall& call) override;
  void on_hook_end(const HookCall& call) override;
  void on_weight_swap(const WeightSwapRecord& w) override;

 private:
  Runtime& runtime_;
  // When each AlignDevicesHook's module began computing (its pre_forward ended), and the id
  // of that forward (HookCall::compute_id): one entry per hook, as a map would keep them, in a
  // vector searched from its end (module calls nest, so a post_forward's entry is at or near
  // the top; a SequentialHook's hooks end in the order they began). No allocation once grown.
  struct Compute {
    const AlignDevicesHook* hook;
    int64_t start_ns;
    uint64_t id;
  };
  std::vector<Compute> compute_start_;
};

}  // namespace hs::hooks
