#include "engines/cupti_correlation.h"

#include <algorithm>

namespace hs::engines {

namespace {
constexpr auto kKind = tracer::ExternalKind::Custom1;
}

CuptiCorrelation::CuptiCorrelation(hooks::Runtime& runtime, tracer::CuptiTracer& cupti)
    : runtime_(runtime), cupti_(cupti), subscription_(runtime.subscribe(*this)) {}

CuptiCorrelation::~CuptiCorrelation() {
  subscription_.reset();
  while (!stack_.empty()) pop();
}

void CuptiCorrelation::push(uint64_t id, const models::HookableModule* forward_of) {
  cupti_.push_external_id(kKind, id);
  stack_.push_back({id, forward_of});
}

void CuptiCorrelation::pop() {
  cupti_.pop_external_id(kKind);
  stack_.pop_back();
}

void CuptiCorrelation::on_hook_begin(const hooks::HookCall& call) {
  if (call.phase == events::HookPhase::PostForward) {
    // The module's forward ends where its (outermost) post_forward begins: pop it, and whatever
    // a forward that threw left above it.
    const models::HookableModule* m = &call.module;
    std::erase_if(pending_, [&](const Pushed& p) { return p.forward_of == m; });
    const auto it = std::find_if(stack_.rbegin(), stack_.rend(), [&](const Pushed& p) { return p.forward_of == m; });
    if (it != stack_.rend()) {
      const size_t keep = static_cast<size_t>(stack_.rend() - it) - 1;
      while (stack_.size() > keep) pop();
    }
  }
  if (runtime_.sink()) push(call.id, nullptr);  // without a sink nothing records the call
}

void CuptiCorrelation::on_hook_end(const hooks::HookCall& call) {
  if (!stack_.empty() && stack_.back().forward_of == nullptr && stack_.back().id == call.id) pop();
  // A forward begins when its pre_forward ends, but a pre_forward run by an enclosing hook (a
  // SequentialHook's) ends inside that hook's call: its forward is pushed once no hook call is
  // still running, so that every hook call's id comes off the stack when the call ends.
  if (call.compute_id && runtime_.sink()) pending_.push_back({call.compute_id, &call.module});
  if (stack_.empty() || stack_.back().forward_of != nullptr) {
    for (const Pushed& p : pending_) push(p.id, p.forward_of);
    pending_.clear();
  }
}

std::vector<uint64_t> CuptiCorrelation::pushed() const {
  std::vector<uint64_t> out;
  for (const auto& p : stack_) out.push_back(p.id);
  return out;
}

}  // namespace hs::engines
