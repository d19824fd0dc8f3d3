#include "hooks/modeling.h"

#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "hooks/runtime.h"

namespace hs::hooks {

namespace {

std::string torch_size(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "torch.Size([";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "])";
  return o.str();
}

bool is_integral_or_bool(c10::ScalarType t) { return c10::isIntegralType(t, /*includeBool=*/true); }

}  // namespace

std::string module_label(const HookableModule& m) {
  return m.class_name() + " '" + (m.fqn().empty() ? std::string("<root>") : m.fqn()) + "'";
}

std::pair<HookableModule*, std::string> resolve_tensor(HookableModule& module, const std::string& name) {
  HookableModule* cur = &module;
  std::string rest = name;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos;) {
    std::string part = rest.substr(0, dot);
    HookableModule* next = nullptr;
    for (auto& [n, child] : cur->hookable_children())
      if (n == part) next = child.get();
    if (!next) throw std::invalid_argument(module_label(*cur) + " has no attribute " + part + ".");
    cur = next;
    rest = rest.substr(dot + 1);
  }
  if (!cur->has_parameter(rest) && !cur->has_buffer(rest))
    throw std::invalid_argument(module_label(*cur) + " does not have a parameter or a buffer named " + rest + ".");
  return {cur, rest};
}

std::vector<TensorRef> named_module_tensors(HookableModule& m, bool recurse) {
  std::vector<TensorRef> params, buffers;
  std::unordered_set<const void*> seen;
  models::walk_modules(m, [&](HookableModule& mod, const std::string& prefix) {
    for (const auto& s : mod.local_tensors()) {
      if (!s.value.defined()) continue;
      if (!seen.insert(s.value.unsafeGetTensorImpl()).second) continue;
      TensorRef r{prefix.empty() ? s.name : prefix + "." + s.name, &mod, s.name, s.is_parameter, s.persistent};
      (s.is_parameter ? params : buffers).push_back(std::move(r));
    }
    return recurse;
  });
  params.insert(params.end(), buffers.begin(), buffers.end());
  return params;
}

void set_module_tensor_to_device(HookableModule& module, const std::string& tensor_name, const DeviceId& device,
                                 const torch::Tensor& value_in, std::optional<c10::ScalarType> dtype,
                                 TiedParamsMap* tied) {
  auto [owner, local] = resolve_tensor(module, tensor_name);
  const torch::Tensor old = owner->get_tensor(local);
  auto& dm = Runtime::current().devices();
  // Tied shortcut: a tensor already materialised on this device for the same pointer.
  if (tied) {
    for (const torch::Tensor* t : {&value_in, &old}) {
      if (!t->defined() || t->is_meta()) continue;
      auto it = tied->find(t->data_ptr());
      if (it == tied->end()) continue;
      auto jt = it->second.find(device);
      if (jt != it->second.end()) {
        owner->set_tensor(local, jt->second);
        return;
      }
    }
  }
  if (old.is_meta() && !device.is_meta() && !value_in.defined())
    throw std::invalid_argument(local + " is on the meta device, we need a `value` to put in on " + device.str() +
                                ".");
  torch::Tensor src = value_in.defined() ? value_in : old;
  if (value_in.defined() && value_in.sizes() != old.sizes())
    throw std::invalid_argument("Trying to set a tensor of shape " + torch_size(value_in.sizes()) + " in \"" + local +
                                "\" (which has shape " + torch_size(old.sizes()) + "), this looks incorrect.");
  if (dtype) {
    if (!is_integral_or_bool(src.scalar_type())) src = src.to(*dtype);
  } else if (value_in.defined() && !is_integral_or_bool(src.scalar_type()) && src.scalar_type() != old.scalar_type()) {
    src = src.to(old.scalar_type());
  }
  torch::Tensor moved =
      device.is_meta() ? torch::empty(src.sizes(), src.options().device(torch::kMeta)) : dm.to(src, device);
  owner->set_tensor(local, moved);
  if (tied && !device.is_meta()) {
    const void* ptr = nullptr;
    if (!old.is_meta() && tied->count(old.data_ptr()))
      ptr = old.data_ptr();
    else if (value_in.defined() && tied->count(value_in.data_ptr()))
      ptr = value_in.data_ptr();
    if (ptr && !(*tied)[ptr].count(device)) (*tied)[ptr][device] = moved;
  }
}

std::optional<DeviceId> first_param_device(HookableModule& module) {
  for (const auto& r : named_module_tensors(module, true))
    if (r.is_param) return Runtime::current().devices().device_of(r.owner->get_tensor(r.local));
  return std::nullopt;
}

void module_to(HookableModule& module, const DeviceId& device) {
  if (has_move_guard(module)) {
    log("WARNING", "You shouldn't move a model that is dispatched using accelerate hooks.");
    for (const auto& r : named_module_tensors(module, true))
      if (r.is_param && r.owner->get_tensor(r.local).is_meta())
        throw std::runtime_error("You can't move a model that has some modules offloaded to cpu or disk.");
  }
  // Like nn.Module.to: a tensor shared by several slots (tied weights) is converted once and
  // every slot that held it gets the result. A meta tensor has no data to move anywhere but
  // meta: nn.Module.to raises NotImplementedError with this text at the first one (after
  // converting those before it); here it is checked first, so nothing moves.
  auto& dm = Runtime::current().devices();
  const auto modules = models::named_modules(std::dynamic_pointer_cast<HookableModule>(module.shared_from_this()));
  if (!device.is_meta())
    for (const auto& [name, m] : modules)
      for (const auto& slot : m->local_tensors())
        if (slot.value.defined() && slot.value.is_meta())
          throw std::runtime_error(
              "Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of "
              "torch.nn.Module.to() when moving module from meta to a different device.");
  std::unordered_map<const void*, torch::Tensor> done;
  for (const auto& [name, m] : modules)
    for (const auto& slot : m->local_tensors()) {
      if (!slot.value.defined() || slot.value.is_meta()) continue;
      const void* key = slot.value.unsafeGetTensorImpl();
      auto it = done.find(key);
      if (it == done.end()) it = done.emplace(key, dm.to(slot.value, device)).first;
      m->set_tensor(slot.name, it->second);
    }
}

void module_to_dtype(HookableModule& module, c10::ScalarType dtype, bool recurse) {
  std::unordered_map<const void*, torch::Tensor> done;
  models::walk_modules(module, [&](HookableModule& m, const std::string&) {
    for (const auto& slot : m.local_tensors()) {
      const auto& t = slot.value;
      if (!t.defined() || !c10::isFloatingType(t.scalar_type()) || t.scalar_type() == dtype) continue;
      const void* key = t.unsafeGetTensorImpl();
      auto it = done.find(key);
      if (it == done.end()) it = done.emplace(key, t.to(dtype)).first;
      m.set_tensor(slot.name, it->second);
    }
    return recurse;
  });
}

std::vector<std::pair<std::string, torch::Tensor>> state_dict(const HookableModule& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  models::walk_modules(module, [&](const HookableModule& m, const std::string& prefix) {
    for (const auto& s : m.local_tensors())
      if (s.value.defined() && s.is_parameter) out.emplace_back(prefix.empty() ? s.name : prefix + "." + s.name, s.value);
    for (const auto& s : m.local_tensors())
      if (s.value.defined() && !s.is_parameter && s.persistent)
        out.emplace_back(prefix.empty() ? s.name : prefix + "." + s.name, s.value);
  });
  return out;
}

void set_move_guard(HookableModule& module, bool on) { Runtime::current().set_move_guard(module, on); }

bool has_move_guard(const HookableModule& module) { return Runtime::current().has_move_guard(module); }

}  // namespace hs::hooks
