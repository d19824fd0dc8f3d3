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
//
// The texts it passes again and again (module FQNs and classes, hook classes, device and dtype
// names) are pinned by the sink once (EventSink::pin) and kept here until the runtime's sink
// changes, so the tracer records them by index without reading their bytes on every event.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
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
  /// Forgets what the previous sink pinned (Runtime::set_sink calls it, also for the same sink
  /// again: an address says nothing of whether it is the same sink). Allocates the module cache.
  void sink_changed();

  /// A module's FQN and class as the runtime's sink `s` pinned them (direct-mapped by
  /// names_serial: a model's modules have consecutive serials; where another module holds the
  /// slot, the module's own strings, unpinned). Valid until the sink changes; where `s` pins
  /// nothing, views of the module's own strings, valid as long as the module is not renamed.
  struct ModuleTexts {
    uint64_t serial = 0;  // models::HookableModule::names_serial; 0 = empty slot
    std::string_view fqn, class_name;
  };
  const ModuleTexts& module_texts(events::EventSink& s, const models::HookableModule& m);
  /// `text`, a view into a string literal (static storage: the cache is keyed by its address and
  /// length; another string would be taken for the literal that had its address), as `s` pinned
  /// it. Valid until the sink changes.
  std::string_view literal(events::EventSink& s, std::string_view text);

 private:
  // The name of `d` / of `t` ("cpu", "0", "float32"), pinned when the sink pins it; else made
  // into `scratch`, which must outlive the use of the view (the sink is asked once per name).
  std::string_view device_name(events::EventSink& s, DeviceId d, std::string& scratch);
  std::string_view dtype_name(events::EventSink& s, c10::ScalarType t, std::string& scratch);

  Runtime& runtime_;
  std::vector<ModuleTexts> modules_;  // kModuleSlots once a sink is set
  ModuleTexts unpinned_;              // module_texts' answer before any sink was set
  struct LiteralText {
    const char* data = nullptr;
    size_t size = 0;
    std::string_view text;
  };
  std::array<LiteralText, 64> literals_{};  // hook classes and disabled-scope functions: a few
  static constexpr int kDeviceSlots = 16;  // per DeviceId::Kind: indexes 0..15 pinned, others made per event
  struct NameSlot {
    bool asked = false;     // the sink was asked to pin this name
    std::string_view text;  // its pinned copy; empty when the sink keeps none (made per event)
  };
  // `made` (a name just made into a scratch string) as `slot` keeps it: the sink's pinned copy,
  // asked for once; `made` itself where the sink keeps none.
  static std::string_view pinned_name(events::EventSink& s, NameSlot& slot, std::string_view made);
  std::array<NameSlot, 5 * kDeviceSlots> devices_{};
  std::array<NameSlot, static_cast<size_t>(c10::ScalarType::NumOptions)> dtypes_{};
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
