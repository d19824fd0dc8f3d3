#include "app/cupti_correlation.h"

#include <algorithm>

namespace hs::app {

namespace {
constexpr auto kKind = tracer::ExternalKind::Custom1;
}

CuptiCorrelation::CuptiCorrelation(hooks::Runtime& runtime, tracer::CuptiTracer& cupti)
    : runtime_(runtime), cupti_(cupti), subscription_(runtime.subscribe(*this)) {}

CuptiCorrelation::~CuptiCorrelation() {
  subscription_.reset();
  while (!stack_.empty()) pop();
}

void CuptiCorrelation::push(uint64_t id, const hooks::AlignDevicesHook* compute_of) {
  cupti_.push_external_id(kKind, id);
  stack_.push_back({id, compute_of});
}

void CuptiCorrelation::pop() {
  cupti_.pop_external_id(kKind);
  stack_.pop_back();
}

void CuptiCorrelation::on_hook_begin(const hooks::HookCall& call) {
  if (call.phase == events::HookPhase::PostForward && call.align) {
    // The module's forward ends here: pop it, and whatever a forward that threw left above it.
    const auto it = std::find_if(stack_.rbegin(), stack_.rend(), [&](const Pushed& p) { return p.compute_of == call.align; });
    if (it != stack_.rend()) {
      const size_t keep = static_cast<size_t>(stack_.rend() - it) - 1;
      while (stack_.size() > keep) pop();
    }
  }
  if (runtime_.sink()) push(call.id, nullptr);  // without a sink nothing records the call
}

void CuptiCorrelation::on_hook_end(const hooks::HookCall& call) {
  if (!stack_.empty() && stack_.back().compute_of == nullptr && stack_.back().id == call.id) pop();
  if (call.compute_id && call.align && runtime_.sink()) push(call.compute_id, call.align);
}

std::vector<uint64_t> CuptiCorrelation::pushed() const {
  std::vector<uint64_t> out;
  for (const auto& p : stack_) out.push_back(p.id);
  return out;
}

}  // namespace hs::app
