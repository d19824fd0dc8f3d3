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

namespace {

// send_to_device on `v` in place: a tensor already on `device` (the common case, a sharded
// model's activations) is left as it is, without the reference-count traffic of a copy.
void send_in_place(c10::IValue& v, const DeviceId& device, const std::vector<std::string>& skip_keys,
                   DeviceManager& dm) {
  if (v.isTensor()) {
    if (dm.device_of(v.toTensor()) != device) v = dm.to(v.toTensor(), device);
  } else if (v.isTuple() || v.isList() || v.isGenericDict() || v.isTensorList()) {
    v = send_to_device(v, device, skip_keys);
  }
}

}  // namespace

void send_call_to_device(CallArgs& call, const DeviceId& device, const std::vector<std::string>& skip_keys) {
  DeviceManager& dm = Runtime::current().devices();
  static const std::vector<std::string> kNoKeys;
  for (auto& a : call.args) send_in_place(a, device, kNoKeys, dm);
  for (auto& [k, v] : call.kwargs)
    if (std::find(skip_keys.begin(), skip_keys.end(), k) == skip_keys.end()) send_in_place(v, device, skip_keys, dm);
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
