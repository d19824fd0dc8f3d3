#include "hooks/compiler_disable.h"

#include <stdexcept>

#include "hooks/event_adapter.h"
#include "hooks/runtime.h"
#include "tracer/events.h"

namespace hs::hooks {

std::string policy_name(CompilePolicy p) { return p == CompilePolicy::WholeHook ? "whole-hook" : "offload-only"; }

CompilePolicy parse_policy(const std::string& s) {
  if (s == "whole-hook") return CompilePolicy::WholeHook;
  if (s == "offload-only") return CompilePolicy::OffloadOnly;
  throw std::invalid_argument("unknown policy '" + s + "' (expected whole-hook or offload-only)");
}

CompilerDisabledScope::CompilerDisabledScope(std::string_view function, std::string_view module)
    : CompilerDisabledScope(Runtime::current(), function, module) {}

CompilerDisabledScope::CompilerDisabledScope(Runtime& runtime, std::string_view function, std::string_view module)
    : runtime_(runtime),
      function_(function),
      module_(module),
      depth_(++runtime_.scopes().depth),
      start_ns_(runtime_.sink() ? events::now_ns() : 0) {  // only a sink records the scope
  if (auto* obs = runtime_.scopes().observer) {
    try {
      obs->on_enter(function_, module_, depth_);
    } catch (...) {
      --runtime_.scopes().depth;  // the scope never opened
      throw;
    }
  }
}

CompilerDisabledScope::CompilerDisabledScope(Runtime& runtime, std::string_view function,
                                             const models::HookableModule& module)
    : CompilerDisabledScope(runtime, function, module.fqn()) {
  hooked_ = &module;
}

CompilerDisabledScope::~CompilerDisabledScope() {
  DisabledScopes& scopes = runtime_.scopes();
  --scopes.depth;
  if (auto* s = runtime_.sink(); s && start_ns_) {
    if (hooked_) {
      EventSinkAdapter& a = runtime_.event_adapter();
      s->disabled_scope(
          {a.literal(*s, function_), a.module_texts(*s, *hooked_).fqn, depth_, start_ns_, events::now_ns()});
    } else {
      s->disabled_scope({function_, module_, depth_, start_ns_, events::now_ns()});
    }
  }
  if (auto* obs = scopes.observer) {
    try {
      obs->on_exit(function_, module_, depth_);
    } catch (...) {
      // An exit notification must not throw out of a destructor (it may run during unwinding).
    }
  }
}

int CompilerDisabledScope::depth() {
  const Runtime* r = Runtime::current_or_null();
  return r ? r->scopes().depth : 0;
}

}  // namespace hs::hooks
