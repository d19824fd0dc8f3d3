#include "hooks/event_adapter.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "hooks/hooks.h"
#include "hooks/offload.h"
#include "hooks/runtime.h"

namespace hs::hooks {

namespace {

constexpr size_t kModuleSlots = 4096;

std::string make_dtype_name(c10::ScalarType t) {
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

// ------------------------------------------------------------------ pinned texts

void EventSinkAdapter::sink_changed() {
  modules_.assign(kModuleSlots, {});
  literals_.fill({});
  devices_.fill({});
  dtypes_.fill({});
}

const EventSinkAdapter::ModuleTexts& EventSinkAdapter::module_texts(events::EventSink& s,
                                                                    const models::HookableModule& m) {
  if (modules_.empty()) return unpinned_ = {m.names_serial(), m.fqn(), m.class_name()};  // no sink yet
  ModuleTexts& slot = modules_[m.names_serial() % kModuleSlots];
  if (slot.serial == m.names_serial()) return slot;
  // A slot another module holds keeps it (more than kModuleSlots modules under one sink): this
  // one's texts go unpinned, interned by the sink as any other, rather than pinned (a lock) on
  // every event.
  if (slot.serial != 0) return unpinned_ = {m.names_serial(), m.fqn(), m.class_name()};
  // Views of the module's own strings where the sink pins nothing: they live as long as the
  // module, and a renamed or new module has another serial.
  slot = {m.names_serial(), s.pin(m.fqn()), s.pin(m.class_name())};
  return slot;
}

std::string_view EventSinkAdapter::literal(events::EventSink& s, std::string_view text) {
  // Open addressing over four neighbouring slots; a full neighbourhood gives up its first slot.
  const uint64_t key = (reinterpret_cast<uintptr_t>(text.data()) + text.size() * 0x9E3779B97F4A7C15ull) *
                       0xBF58476D1CE4E5B9ull;
  const size_t first = static_cast<size_t>(key >> 58) % literals_.size();
  LiteralText* free_slot = nullptr;
  for (size_t k = 0; k < 4; ++k) {
    LiteralText& slot = literals_[(first + k) % literals_.size()];
    if (slot.data == text.data() && slot.size == text.size()) return slot.text;
    if (!slot.data && !free_slot) free_slot = &slot;
  }
  LiteralText& slot = free_slot ? *free_slot : literals_[first];
  slot = {text.data(), text.size(), s.pin(text)};
  return slot.text;
}

std::string_view EventSinkAdapter::pinned_name(events::EventSink& s, NameSlot& slot, std::string_view made) {
  if (slot.asked) return slot.text.data() ? slot.text : made;
  slot.asked = true;
  const std::string_view pinned = s.pin(made);
  if (pinned.data() != made.data()) slot.text = pinned;  // kept only where the sink owns the bytes
  return pinned;
}

std::string_view EventSinkAdapter::device_name(events::EventSink& s, DeviceId d, std::string& scratch) {
  const int kind = static_cast<int>(d.kind);
  if (kind < 0 || kind >= 5 || d.index < 0 || d.index >= kDeviceSlots) return scratch = d.str();
  NameSlot& slot = devices_[static_cast<size_t>(kind * kDeviceSlots + d.index)];
  if (slot.asked && slot.text.data()) return slot.text;
  return pinned_name(s, slot, scratch = d.str());
}

std::string_view EventSinkAdapter::dtype_name(events::EventSink& s, c10::ScalarType t, std::string& scratch) {
  const auto i = static_cast<size_t>(t);
  if (i >= dtypes_.size()) return scratch = make_dtype_name(t);
  if (dtypes_[i].asked && dtypes_[i].text.data()) return dtypes_[i].text;
  return pinned_name(s, dtypes_[i], scratch = make_dtype_name(t));
}

// ------------------------------------------------------------------ notifications

void EventSinkAdapter::on_move(const Move& m) {
  events::EventSink* s = runtime_.sink();
  if (!s || m.weight_onload) return;
  const DeviceManager& dm = runtime_.devices();
  std::string src_scratch, dst_scratch;
  const std::string_view src = device_name(*s, m.src, src_scratch), dst = device_name(*s, m.dst, dst_scratch);
  // The module whose call (hook included) made the copy: the innermost one running.
  const auto& stack = runtime_.call_stack();
  const std::string_view module = stack.empty() ? std::string_view() : module_texts(*s, *stack.back()).fqn;
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
  std::string scratch;
  const std::string_view dev = device_name(*s, exec ? *exec : DeviceId::cpu(), scratch);
  const ModuleTexts& names = module_texts(*s, call.module);
  s->module_compute({names.fqn, names.class_name, dev, static_cast<int64_t>(c.id), c.start_ns, call.called_ns});
}

void EventSinkAdapter::on_hook_end(const HookCall& call) {
  events::EventSink* s = runtime_.sink();
  if (!s || !call.start_ns) return;  // began before recording did (untimed): no span
  const ModuleTexts& names = module_texts(*s, call.module);
  s->hook_span({literal(*s, call.hook_class()), call.phase, names.fqn, names.class_name, static_cast<int64_t>(call.id),
                call.start_ns, call.end_ns});
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
  std::string dtype_scratch, device_scratch;
  const std::string_view dtype = dtype_name(*s, w.value.scalar_type(), dtype_scratch),
                         device = device_name(*s, w.device, device_scratch);
  events::WeightSource source = events::WeightSource::Device;
  bool pinned = false;
  if (w.onload) {
    const bool in_memory = w.hook.weights_map && w.hook.weights_map->in_memory(w.tensor).has_value();
    source = in_memory ? events::WeightSource::Cpu : events::WeightSource::Disk;
    pinned = w.value.is_pinned();
  }
  s->weight_swap({w.onload, module_texts(*s, w.module).fqn, w.tensor, static_cast<int64_t>(w.value.nbytes()), dtype,
                  source, device, pinned, w.start_ns, w.end_ns});
}

}  // namespace hs::hooks
