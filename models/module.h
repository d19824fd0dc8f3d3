// The hookable module base every model module derives from.
//
// Mirrors the parts of Python's `torch.nn.Module` that accelerate's hooks rely on:
//  - every module knows its class name (`LlamaDecoderLayer`, `Linear`, ...) and its
//    fully-qualified name in the tree (`model.layers.3.self_attn.q_proj`);
//  - parameters and buffers live in named slots (Python's `_parameters` / `_buffers`, with
//    `_non_persistent_buffers_set`) that can be *replaced by assignment*, as
//    `set_module_tensor_to_device` does (`module._parameters[name] = new_value`). Forward code
//    reads its tensors through the slots on every call, never through cached handles, so a
//    swap is seen at once. (torch::nn::Module's own parameter registry cannot replace an
//    entry, which is why the slots are ours; children still use torch::nn::Module's registry.)
//  - a call runs `hook.pre_forward -> forward -> hook.post_forward` through one place,
//    `HookableModule::call`, where accelerate's `add_hook_to_module` attaches.
// Arguments are positional + keyword `c10::IValue`s so `send_to_device`, `skip_keys` and
// `io_same_device` can behave as in Python.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace hs::models {

/// Keyword arguments in call order (like a Python `**kwargs` dict, which keeps insertion order).
using Kwargs = std::vector<std::pair<std::string, c10::IValue>>;

/// The arguments of one module call: `module(*args, **kwargs)`.
struct CallArgs {
  std::vector<c10::IValue> args;
  Kwargs kwargs;

  /// The keyword argument `name`, or nullptr when absent.
  const c10::IValue* kwarg(const std::string& name) const;
  c10::IValue* kwarg(const std::string& name);
  /// The keyword argument as a tensor; an undefined tensor when absent or None.
  torch::Tensor tensor_kwarg(const std::string& name) const;
};

class HookableModule;

/// The run a module call belongs to, as far as models/ needs one: the stack of module calls
/// running in it. `hooks::Runtime` (hooks/runtime.h) is its one implementation; installing a
/// runtime on a thread (`hooks::RuntimeScope`) makes it that thread's context. That per-thread
/// pointer is the only seam between the ported code — whose call signatures mirror Python and
/// cannot take the run as an argument — and the state of a run; nothing else in models/,
/// hooks/ or compile/ is mutable global or thread-local state (hooks/runtime.h says what is
/// process-wide). Module calls made with no context installed keep no stack.
class CallContext {
 public:
  CallContext(const CallContext&) = delete;
  CallContext& operator=(const CallContext&) = delete;

  /// Modules whose `call` is running in this context, outermost first (the module stack a
  /// graph break reports). Includes the hook callbacks' time.
  const std::vector<const HookableModule*>& call_stack() const { return call_stack_; }

  /// The context installed on the calling thread, or nullptr.
  static CallContext* current();

 protected:
  CallContext() = default;
  ~CallContext() = default;
  /// Makes `context` (may be nullptr) the calling thread's context; returns the one it
  /// replaces. Only implementations install themselves (see hooks::RuntimeScope).
  static CallContext* exchange_current(CallContext* context);

 private:
  friend class HookableModule;
  std::vector<const HookableModule*> call_stack_;
};

/// The attach point for a hook. hooks/ implements accelerate's `ModelHook` family on it;
/// models/ knows nothing else about hooks. Mirrors `ModelHook.pre_forward/post_forward`.
class ModuleHookInterface {
 public:
  virtual ~ModuleHookInterface() = default;
  /// Runs before the module's forward; may rewrite the arguments (e.g. move them to a device).
  virtual void pre_forward(HookableModule& module, CallArgs& call) = 0;
  /// Runs after the forward; returns the (possibly moved) output.
  virtual c10::IValue post_forward(HookableModule& module, c10::IValue output) = 0;
};

/// One parameter or buffer of a module.
struct TensorSlot {
  std::string name;
  torch::Tensor value;        ///< may be undefined (Python `None`) or on `meta`
  bool is_parameter = true;   ///< false: buffer
  bool persistent = true;     ///< buffers only: false = not in the state dict (e.g. `inv_freq`)
};

class HookableModule : public torch::nn::Module {
 public:
  /// `class_name` is the transformers/PyTorch class this module mirrors, e.g. "Qwen3Attention".
  explicit HookableModule(std::string class_name);

  const std::string& class_name() const { return class_name_; }
  /// Fully-qualified name from the root ("" for the root), set by `assign_fqns`.
  const std::string& fqn() const { return fqn_; }
  /// A number naming this module's (class_name, fqn) in this process, never 0: no other module,
  /// nor this one once `assign_fqns` renames it, ever has it. What a cache keyed by a module's
  /// names checks (hooks/event_adapter.h), where the module's address could be reused.
  uint64_t names_serial() const { return names_serial_.value; }

  /// `module(*args, **kwargs)`: pre_forward of the attached hook, `forward_impl`,
  /// post_forward. Runs under `torch::NoGradGuard` (inference only).
  c10::IValue call(CallArgs call);
  /// Convenience: a call whose output is one tensor. Throws std::runtime_error (naming the
  /// module) when the output is not a tensor.
  torch::Tensor call_tensor(CallArgs call);

  /// `CallContext::current()->call_stack()`: the modules whose `call` is running on this
  /// thread, outermost first; empty when no context is installed.
  static const std::vector<const HookableModule*>& call_stack();

  /// The module's own forward. Throws for containers (ModuleList is not callable).
  virtual c10::IValue forward_impl(CallArgs& call) = 0;

  // --- hook slot (what accelerate stores as `module._hf_hook`) ---
  const std::shared_ptr<ModuleHookInterface>& hook() const { return hook_; }
  void set_hook(std::shared_ptr<ModuleHookInterface> hook) { hook_ = std::move(hook); }

  // --- tensors: this module's own (non-recursive) parameters and buffers ---
  const std::vector<TensorSlot>& local_tensors() const { return slots_; }
  bool has_parameter(const std::string& name) const;
  bool has_buffer(const std::string& name) const;
  /// The current value of parameter or buffer `name`; throws std::out_of_range naming the
  /// module if absent.
  const torch::Tensor& get_tensor(const std::string& name) const;
  /// Replaces the value of parameter or buffer `name` (as `module._parameters[name] = v`).
  /// Throws std::out_of_range naming the module if there is no such tensor.
  void set_tensor(const std::string& name, torch::Tensor value);

  // --- children ---
  /// Direct children in registration order, as hookable modules.
  std::vector<std::pair<std::string, std::shared_ptr<HookableModule>>> hookable_children() const;

 protected:
  /// Registers a parameter; returns its slot index for fast access in forward.
  size_t register_param(const std::string& name, torch::Tensor value);
  /// Registers a buffer; `persistent=false` keeps it out of the state dict (Python's
  /// `register_buffer(..., persistent=False)`).
  size_t register_buf(const std::string& name, torch::Tensor value, bool persistent = true);
  /// The current value in slot `i` (see `register_param`).
  const torch::Tensor& slot(size_t i) const { return slots_[i].value; }
  /// Registers a hookable child.
  template <typename M>
  std::shared_ptr<M> add_child(const std::string& name, std::shared_ptr<M> child) {
    register_module(name, child);
    return child;
  }

 private:
  friend void assign_fqns(HookableModule& root);
  std::string class_name_;
  std::string fqn_;
  // A fresh serial for every module made, copied or moved into, and for a module moved from
  // (whose names are then gone): a serial names one (class_name, fqn) only.
  struct NamesSerial {
    uint64_t value = next();
    NamesSerial() = default;
    NamesSerial(const NamesSerial&) : value(next()) {}
    NamesSerial(NamesSerial&& o) noexcept : value(next()) { o.value = next(); }
    NamesSerial& operator=(const NamesSerial&) {
      value = next();
      return *this;
    }
    NamesSerial& operator=(NamesSerial&& o) noexcept {
      value = next();
      o.value = next();
      return *this;
    }
    static uint64_t next() noexcept;  // process-wide, from 1: serials never repeat
  };
  NamesSerial names_serial_;
  std::vector<TensorSlot> slots_;
  std::shared_ptr<ModuleHookInterface> hook_;
};

/// Sets `fqn()` of every module in the tree rooted at `root` (root = "").
void assign_fqns(HookableModule& root);

namespace detail {
template <typename Module, typename Visit>
void walk_modules(Module& m, const std::string& name, Visit& visit) {
  if constexpr (std::is_void_v<std::invoke_result_t<Visit&, Module&, const std::string&>>) {
    visit(m, name);
  } else if (!visit(m, name)) {
    return;
  }
  for (const auto& [child_name, child] : m.hookable_children())
    walk_modules<Module>(*child, name.empty() ? child_name : name + "." + child_name, visit);
}
}  // namespace detail

/// The one tree walk: visits `root`, then its descendants depth-first in pre-order (children in
/// registration order, as `named_modules`), calling `visit(module, name)` with the module's
/// dotted name relative to `root` ("" for `root` itself). When `visit` returns a bool, false
/// skips that module's children; a `visit` returning void sees the whole tree. `root` may be
/// const (then so are the modules visited).
template <typename Module, typename Visit>
  requires std::is_base_of_v<HookableModule, std::remove_const_t<Module>>
void walk_modules(Module& root, Visit&& visit) {
  using Base = std::conditional_t<std::is_const_v<Module>, const HookableModule, HookableModule>;
  detail::walk_modules<Base>(root, std::string(), visit);
}

/// `root.named_modules()`: pre-order, root first with name "".
std::vector<std::pair<std::string, std::shared_ptr<HookableModule>>> named_modules(
    const std::shared_ptr<HookableModule>& root);

/// `module.named_parameters(recurse, remove_duplicate)`: names are dotted from `module`.
/// `remove_duplicate` (Python's default) lists a tensor shared by two modules (tied weights)
/// once, under its first name in traversal order.
std::vector<std::pair<std::string, torch::Tensor>> named_parameters(
    const HookableModule& module, bool recurse = true, bool remove_duplicate = true);
/// `module.named_buffers(recurse, remove_duplicate)`, persistent and non-persistent alike.
std::vector<std::pair<std::string, torch::Tensor>> named_buffers(
    const HookableModule& module, bool recurse = true, bool remove_duplicate = true);

/// The submodule at dotted path `name` ("" = module itself); nullptr when absent.
std::shared_ptr<HookableModule> get_submodule(const std::shared_ptr<HookableModule>& module,
                                              const std::string& name);

/// A container of numbered children, mirroring `torch.nn.ModuleList` (not callable).
class ModuleList : public HookableModule {
 public:
  ModuleList() : HookableModule("ModuleList") {}
  void push_back(std::shared_ptr<HookableModule> m);
  size_t size() const { return items_.size(); }
  const std::shared_ptr<HookableModule>& operator[](size_t i) const { return items_.at(i); }
  c10::IValue forward_impl(CallArgs& call) override;

 private:
  std::vector<std::shared_ptr<HookableModule>> items_;
};

}  // namespace hs::models
