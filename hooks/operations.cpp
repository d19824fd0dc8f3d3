#include "hooks/operations.h"

#include "hooks/runtime.h"

namespace hs::hooks {

c10::IValue send_to_device(const c10::IValue& v, const DeviceId& device, const std::vector<std::string>& skip_keys) {
  auto& dm = Runtime::current().devices();
  if (v.isTensor()) return dm.to(v.toTensor(), device);
  if (v.isTensorList()) {
    std::vector<torch::Tensor> out;
    for (const auto& t : v.toTensorVector()) out.push_back(dm.to(t, device));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> out;
    for (const auto& e : v.toTupleRef().elements()) out.push_back(send_to_device(e, device, skip_keys));
    return c10::ivalue::Tuple::create(std::move(out));
  }
  if (v.isList()) {
    auto in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const auto& e : in) out.push_back(send_to_device(e, device, skip_keys));
    return out;
  }
  if (v.isGenericDict()) {
    auto in = v.toGenericDict();
    c10::impl::GenericDict out(in.keyType(), in.valueType());
    for (const auto& kv : in) {
      const bool skip = kv.key().isString() && std::find(skip_keys.begin(), skip_keys.end(),
                                                         kv.key().toStringRef()) != skip_keys.end();
      out.insert(kv.key(), skip ? kv.value() : send_to_device(kv.value(), device, skip_keys));
    }
    return out;
  }
  return v;  // ints, None, strings, custom objects
}

void send_call_to_device(CallArgs& call, const DeviceId& device, const std::vector<std::string>& skip_keys) {
  for (auto& a : call.args) a = send_to_device(a, device, {});
  for (auto& [k, v] : call.kwargs)
    if (std::find(skip_keys.begin(), skip_keys.end(), k) == skip_keys.end()) v = send_to_device(v, device, skip_keys);
}

std::optional<DeviceId> find_device(const c10::IValue& v) {
  if (v.isTensor()) return Runtime::current().devices().device_of(v.toTensor());
  if (v.isTensorList()) {
    for (const auto& t : v.toTensorVector()) return Runtime::current().devices().device_of(t);
    return std::nullopt;
  }
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      if (auto d = find_device(e)) return d;
  } else if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (auto d = find_device(e)) return d;
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict())
      if (auto d = find_device(kv.value())) return d;
  }
  return std::nullopt;
}

std::optional<DeviceId> find_device(const CallArgs& call) {
  for (const auto& a : call.args)
    if (auto d = find_device(a)) return d;
  for (const auto& [k, v] : call.kwargs)
    if (auto d = find_device(v)) return d;
  return std::nullopt;
}

}  // namespace hs::hooks
