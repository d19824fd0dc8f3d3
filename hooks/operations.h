// accelerate's `utils/operations.py` on hookscope's modules: moving a call's tensors to a device
// (`send_to_device`) and finding the device of its first tensor (`find_device`). Every move
// goes through the current runtime's DeviceManager (hooks/runtime.h), so the tracer sees it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hooks/device.h"
#include "models/module.h"

namespace hs::hooks {

using models::CallArgs;

/// accelerate's `send_to_device`: tensors (and lists, tuples, string-keyed dicts of them,
/// recursively) moved to `device`; keys in `skip_keys` of any nested dict are left alone;
/// anything else (ints, None, custom objects such as the KV cache) is returned unchanged.
c10::IValue send_to_device(const c10::IValue& v, const DeviceId& device, const std::vector<std::string>& skip_keys = {});
/// Moves positional args (no skip_keys) and kwargs (with skip_keys at every level).
void send_call_to_device(CallArgs& call, const DeviceId& device, const std::vector<std::string>& skip_keys);
/// accelerate's `find_device`: first tensor's logical device in a depth-first walk.
std::optional<DeviceId> find_device(const CallArgs& call);
std::optional<DeviceId> find_device(const c10::IValue& v);

}  // namespace hs::hooks
