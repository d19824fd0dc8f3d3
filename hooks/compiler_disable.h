// Compiler-disabled scopes: the C++ stand-in for `torch.compiler.disable`.
//
// accelerate wraps hook methods in a lazy `torch.compiler.disable` decorator; under
// torch.compile, calling such a function from a captured region is a graph break (and an
// error with fullgraph=True). hookscope makes that boundary explicit: code that must stay
// eager runs inside a `CompilerDisabledScope` named after the function it guards
// ("AlignDevicesHook.pre_forward", "AlignDevicesHook._onload_weights", ...). The compile
// engine observes scope entries; nested scopes count once (only depth 1 is a break).
//
// Which functions are guarded is the *policy*:
//  - `whole-hook` (accelerate 1.15 today): AlignDevicesHook.pre_forward/post_forward,
//    SequentialHook.pre_forward/post_forward, CpuOffload.pre_forward and
//    LayerwiseCastingHook.pre_forward/post_forward run whole inside a scope, so every hooked
//    module boundary breaks the graph.
//  - `offload-only` (the proposed change): only AlignDevicesHook._onload_weights and
//    AlignDevicesHook._offload_weights (the weight swaps of offloaded modules) are guarded;
//    moving inputs and outputs between devices stays capturable.
#pragma once

#include <string>
#include <string_view>

namespace hs::models {
class HookableModule;
}

namespace hs::hooks {

enum class CompilePolicy { WholeHook, OffloadOnly };

/// "whole-hook" / "offload-only".
std::string policy_name(CompilePolicy p);
/// Parses "whole-hook" / "offload-only"; throws std::invalid_argument naming the value.
CompilePolicy parse_policy(const std::string& s);

/// Receives scope entries and exits (the emulated compiler installs one for a compiled call).
/// `depth` is 1 for an outermost scope.
class DisabledScopeObserver {
 public:
  virtual ~DisabledScopeObserver() = default;
  virtual void on_enter(std::string_view function, std::string_view module, int depth) = 0;
  virtual void on_exit(std::string_view function, std::string_view module, int depth) = 0;
};

/// The compiler-disabled scopes of one runtime (hooks/runtime.h: `Runtime::scopes()`).
struct DisabledScopes {
  /// The policy the hooks consult at call time (default: WholeHook, as accelerate).
  CompilePolicy policy = CompilePolicy::WholeHook;
  /// Hears every scope entry and exit; nullptr = none. Not owned.
  DisabledScopeObserver* observer = nullptr;
  int depth = 0;  ///< scopes open now (0 = not inside any)
};

class Runtime;

/// RAII scope: the guarded function runs eagerly, outside any captured region. Counts itself in
/// the current runtime's `DisabledScopes`, tells its observer, and when it closes records a
/// `DisabledScope` event to the runtime's sink. The constructor throws std::logic_error when no
/// runtime is installed, and otherwise only what the observer throws on entry (the compile
/// engine raises `Unsupported` under fullgraph); the destructor never throws.
class CompilerDisabledScope {
 public:
  /// `function` and `module` are viewed, not copied: both must outlive the scope (a hook's
  /// method name literal and its module's fqn do).
  CompilerDisabledScope(std::string_view function, std::string_view module);
  /// The same in `runtime` (the hooks' path: no thread-local lookup).
  CompilerDisabledScope(Runtime& runtime, std::string_view function, std::string_view module);
  /// The hooks' path for a hook method of `module`: `function` a string literal; the event
  /// records the two as the runtime's event adapter pinned them (hooks/event_adapter.h).
  CompilerDisabledScope(Runtime& runtime, std::string_view function, const models::HookableModule& module);
  ~CompilerDisabledScope();
  CompilerDisabledScope(const CompilerDisabledScope&) = delete;
  CompilerDisabledScope& operator=(const CompilerDisabledScope&) = delete;

  /// The current runtime's `DisabledScopes::depth` (0 when no runtime is installed).
  static int depth();

 private:
  Runtime& runtime_;
  std::string_view function_;
  std::string_view module_;
  const models::HookableModule* hooked_ = nullptr;  // the third constructor's module
  int depth_;
  long long start_ns_;
};

}  // namespace hs::hooks
