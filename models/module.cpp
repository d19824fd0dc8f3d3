#include "models/module.h"

#include <atomic>
#include <stdexcept>
#include <unordered_set>
#include <utility>

namespace hs::models {

const c10::IValue* CallArgs::kwarg(const std::string& name) const {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

c10::IValue* CallArgs::kwarg(const std::string& name) {
  for (auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

torch::Tensor CallArgs::tensor_kwarg(const std::string& name) const {
  const c10::IValue* v = kwarg(name);
  if (!v || v->isNone()) return {};
  return v->toTensor();
}

uint64_t HookableModule::NamesSerial::next() noexcept {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

HookableModule::HookableModule(std::string class_name)
    : torch::nn::Module(class_name), class_name_(std::move(class_name)) {}

namespace {
// The calling thread's context (see CallContext): the one per-thread seam.
thread_local CallContext* t_context = nullptr;

}  // namespace

CallContext* CallContext::current() { return t_context; }

CallContext* CallContext::exchange_current(CallContext* context) { return std::exchange(t_context, context); }

const std::vector<const HookableModule*>& HookableModule::call_stack() {
  static const std::vector<const HookableModule*> none;
  const CallContext* c = t_context;
  return c ? c->call_stack() : none;
}

c10::IValue HookableModule::call(CallArgs call) {
  torch::NoGradGuard no_grad;
  // On the installed context's call stack for the duration of the call, hooks included.
  std::vector<const HookableModule*>* stack = t_context ? &t_context->call_stack_ : nullptr;
  if (stack) stack->push_back(this);
  struct Pop {
    std::vector<const HookableModule*>* stack;
    ~Pop() {
      if (stack) stack->pop_back();
    }
  } pop{stack};
  if (hook_) hook_->pre_forward(*this, call);
  c10::IValue out = forward_impl(call);
  if (hook_) out = hook_->post_forward(*this, std::move(out));
  return out;
}

torch::Tensor HookableModule::call_tensor(CallArgs args) {
  c10::IValue out = call(std::move(args));
  if (!out.isTensor())
    throw std::runtime_error("module '" + fqn_ + "' (" + class_name_ +
                             ") returned a non-tensor output");
  return out.toTensor();
}

bool HookableModule::has_parameter(const std::string& name) const {
  for (const auto& s : slots_)
    if (s.name == name) return s.is_parameter;
  return false;
}

bool HookableModule::has_buffer(const std::string& name) const {
  for (const auto& s : slots_)
    if (s.name == name) return !s.is_parameter;
  return false;
}

const torch::Tensor& HookableModule::get_tensor(const std::string& name) const {
  for (const auto& s : slots_)
    if (s.name == name) return s.value;
  throw std::out_of_range("module '" + fqn_ + "' (" + class_name_ + ") has no parameter or buffer '" +
                          name + "'");
}

void HookableModule::set_tensor(const std::string& name, torch::Tensor value) {
  for (auto& s : slots_)
    if (s.name == name) {
      s.value = std::move(value);
      return;
    }
  throw std::out_of_range("module '" + fqn_ + "' (" + class_name_ + ") has no parameter or buffer '" +
                          name + "'");
}

size_t HookableModule::register_param(const std::string& name, torch::Tensor value) {
  slots_.push_back({name, std::move(value), true, true});
  return slots_.size() - 1;
}

size_t HookableModule::register_buf(const std::string& name, torch::Tensor value, bool persistent) {
  slots_.push_back({name, std::move(value), false, persistent});
  return slots_.size() - 1;
}

std::vector<std::pair<std::string, std::shared_ptr<HookableModule>>>
HookableModule::hookable_children() const {
  std::vector<std::pair<std::string, std::shared_ptr<HookableModule>>> out;
  for (const auto& item : named_children()) {
    auto m = std::dynamic_pointer_cast<HookableModule>(item.value());
    if (!m)
      throw std::logic_error("child '" + item.key() + "' of '" + fqn_ + "' is not a HookableModule");
    out.emplace_back(item.key(), std::move(m));
  }
  return out;
}

void assign_fqns(HookableModule& root) {
  walk_modules(root, [](HookableModule& m, const std::string& name) {
    if (m.fqn_ == name) return;
    m.fqn_ = name;
    m.names_serial_.value = HookableModule::NamesSerial::next();
  });
}

std::vector<std::pair<std::string, std::shared_ptr<HookableModule>>> named_modules(
    const std::shared_ptr<HookableModule>& root) {
  std::vector<std::pair<std::string, std::shared_ptr<HookableModule>>> out;
  out.emplace_back("", root);
  walk_modules(*root, [&](HookableModule& m, const std::string& name) {
    if (!name.empty()) out.emplace_back(name, std::dynamic_pointer_cast<HookableModule>(m.shared_from_this()));
  });
  return out;
}

namespace {
std::vector<std::pair<std::string, torch::Tensor>> collect(const HookableModule& module, bool recurse,
                                                           bool remove_duplicate, bool params) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::unordered_set<const void*> seen;
  walk_modules(module, [&](const HookableModule& m, const std::string& prefix) {
    for (const auto& s : m.local_tensors()) {
      if (s.is_parameter != params || !s.value.defined()) continue;
      const void* id = s.value.unsafeGetTensorImpl();
      if (remove_duplicate && !seen.insert(id).second) continue;
      out.emplace_back(prefix.empty() ? s.name : prefix + "." + s.name, s.value);
    }
    return recurse;
  });
  return out;
}
}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> named_parameters(const HookableModule& module,
                                                                    bool recurse,
                                                                    bool remove_duplicate) {
  return collect(module, recurse, remove_duplicate, true);
}

std::vector<std::pair<std::string, torch::Tensor>> named_buffers(const HookableModule& module,
                                                                 bool recurse,
                                                                 bool remove_duplicate) {
  return collect(module, recurse, remove_duplicate, false);
}

std::shared_ptr<HookableModule> get_submodule(const std::shared_ptr<HookableModule>& module,
                                              const std::string& name) {
  if (name.empty()) return module;
  std::shared_ptr<HookableModule> cur = module;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string part = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    std::shared_ptr<HookableModule> next;
    for (auto& [child_name, child] : cur->hookable_children())
      if (child_name == part) next = child;
    if (!next) return nullptr;
    cur = next;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

void ModuleList::push_back(std::shared_ptr<HookableModule> m) {
  register_module(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

c10::IValue ModuleList::forward_impl(CallArgs&) {
  throw std::logic_error("ModuleList '" + fqn() + "' is not callable (as in torch.nn.ModuleList)");
}

}  // namespace hs::models
