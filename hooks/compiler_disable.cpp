#include "hooks/compiler_disable.h"

#include <atomic>
#include <stdexcept>

#include "tracer/events.h"

namespace hs::hooks {

namespace {
std::atomic<CompilePolicy> g_policy{CompilePolicy::WholeHook};
std::atomic<DisabledScopeObserver*> g_observer{nullptr};
thread_local int t_depth = 0;
thread_local long long t_outermost = 0;
}  // namespace

std::string policy_name(CompilePolicy p) { return p == CompilePolicy::WholeHook ? "whole-hook" : "offload-only"; }

CompilePolicy parse_policy(const std::string& s) {
  if (s == "whole-hook") return CompilePolicy::WholeHook;
  if (s == "offload-only") return CompilePolicy::OffloadOnly;
  throw std::invalid_argument("unknown policy '" + s + "' (expected whole-hook or offload-only)");
}

CompilePolicy compile_policy() { return g_policy.load(); }
void set_compile_policy(CompilePolicy p) { g_policy.store(p); }
void set_disabled_scope_observer(DisabledScopeObserver* obs) { g_observer.store(obs); }
DisabledScopeObserver* disabled_scope_observer() { return g_observer.load(); }

CompilerDisabledScope::CompilerDisabledScope(std::string_view function, std::string_view module)
    : function_(function), module_(module), depth_(++t_depth), start_ns_(events::now_ns()) {
  if (depth_ == 1) ++t_outermost;
  if (auto* obs = g_observer.load()) {
    try {
      obs->on_enter(function_, module_, depth_);
    } catch (...) {
      --t_depth;  // the scope never opened
      throw;
    }
  }
}

CompilerDisabledScope::~CompilerDisabledScope() {
  --t_depth;
  if (auto* s = events::sink()) s->disabled_scope({function_, module_, depth_, start_ns_, events::now_ns()});
  if (auto* obs = g_observer.load()) {
    try {
      obs->on_exit(function_, module_, depth_);
    } catch (...) {
      // An exit notification must not throw out of a destructor (it may run during unwinding).
    }
  }
}

int CompilerDisabledScope::depth() { return t_depth; }
long long CompilerDisabledScope::outermost_entries() { return t_outermost; }
void CompilerDisabledScope::reset_counters() { t_outermost = 0; }

}  // namespace hs::hooks
