#include "hooks/event_adapter.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "hooks/hooks.h"
#include "hooks/offload.h"
#include "hooks/runtime.h"

namespace hs::hooks {

namespace {

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kBFloat16: return "bfloat16";
    case c10::kHalf: return "float16";
    case c10::kDouble: return "float64";
    case c10::kLong: return "int64";
    case c10::kInt: return "int32";
    default: return c10::toString(t);
  }
}

}  // namespace

void EventSinkAdapter::on_move(const Move& m) {
  events::EventSink* s = runtime_.sink();
  if (!s || m.weight_onload) return;
  const DeviceManager& dm = runtime_.devices();
  const std::string src = m.src.str(), dst = m.dst.str();
  // The module whose call (hook included) made the copy: the innermost one running.
  const auto& stack = runtime_.call_stack();
  const std::string_view module = stack.empty() ? std::string_view() : std::string_view(stack.back()->fqn());
  s->transfer({src, dst, m.bytes, dm.is_emulated(m.src) || dm.is_emulated(m.dst), module, m.start_ns, m.end_ns});
}

void EventSinkAdapter::on_hook_begin(const HookCall& call) {
  events::EventSink* s = runtime_.sink();
  if (!s || call.phase != events::HookPhase::PostForward || !call.align) return;
  auto it = std::find_if(compute_start_.rbegin(), compute_start_.rend(),
                         [&](const Compute& c) { return c.hook == call.align; });
  if (it == compute_start_.rend()) return;
  const Compute c = *it;
  compute_start_.erase(std::prev(it.base()));
  const auto& exec = call.align->execution_device;
  const std::string dev = exec ? exec->str() : std::string("cpu");
  s->module_compute({call.module.fqn(), call.module.class_name(), dev, static_cast<int64_t>(c.id), c.start_ns,
                     call.called_ns});
}

void EventSinkAdapter::on_hook_end(const HookCall& call) {
  events::EventSink* s = runtime_.sink();
  if (!s || !call.start_ns) return;  // began before recording did (untimed): no span
  s->hook_span({call.hook_class(), call.phase, call.module.fqn(), call.module.class_name(),
                static_cast<int64_t>(call.id), call.start_ns, call.end_ns});
  if (call.completed && call.phase == events::HookPhase::PreForward && call.align) {
    // One entry per hook, the latest (a pre_forward whose post_forward never came is replaced).
    auto it = std::find_if(compute_start_.begin(), compute_start_.end(),
                           [&](const Compute& c) { return c.hook == call.align; });
    if (it != compute_start_.end()) compute_start_.erase(it);
    compute_start_.push_back({call.align, call.end_ns, call.compute_id});
  }
}

void EventSinkAdapter::on_weight_swap(const WeightSwapRecord& w) {
  events::EventSink* s = runtime_.sink();
  if (!s || !w.start_ns) return;  // began before recording did (untimed)
  const std::string dtype = dtype_name(w.value.scalar_type()), device = w.device.str();
  events::WeightSource source = events::WeightSource::Device;
  bool pinned = false;
  if (w.onload) {
    const bool in_memory = w.hook.weights_map && w.hook.weights_map->in_memory(w.tensor).has_value();
    source = in_memory ? events::WeightSource::Cpu : events::WeightSource::Disk;
    pinned = w.value.is_pinned();
  }
  s->weight_swap({w.onload, w.module.fqn(), w.tensor, static_cast<int64_t>(w.value.nbytes()), dtype, source, device,
                  pinned, w.start_ns, w.end_ns});
}

}  // namespace hs::hooks
