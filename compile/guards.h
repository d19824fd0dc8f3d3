// Guards: what a compiled call specialises on, and why a later call recompiles.
//
// Mirrors Dynamo's guards with `dynamic=False` (static shapes): a cache entry is valid for
// inputs whose tensors have the same rank, sizes, dtype and device, and whose plain values
// (ints, floats, bools, strings, None) are equal. The first failing check of an entry is its
// guard-failure text, worded as Dynamo's `TensorCheck::check_verbose` / guard expressions:
//   tensor 'args[0]' size mismatch at index 1. expected 5, actual 1
//   tensor 'args[0]' dtype mismatch. expected Float, actual Double
//   tensor 'args[0]' rank mismatch. expected 2, actual 3
//   tensor 'args[0]' Tensor device index mismatch. Expected device index to be 0, actual 1
//   args[1] == 3
//   len(args) == 2
// Devices are *logical* (the current runtime's DeviceManager::device_of; computing a signature
// needs a hooks::Runtime installed), so two emulated accelerators that
// share CPU memory still guard apart. A change of device kind (accelerator <-> cpu) has no
// Dynamo text of its own (Dynamo reports a dispatch-key-set mismatch); it reads
//   tensor 'args[0]' device mismatch. expected 0, actual cpu
//
// Not mirrored: strides, requires_grad, global state (grad mode, autocast), and Dynamo's
// automatic dynamic shapes (after a size mismatch Dynamo recompiles with a symbolic size;
// here every new size is a new entry, as with `torch.compile(dynamic=False)`). Custom class
// objects (such as the KV cache) are guarded by type only, not by content.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "hooks/device.h"

namespace hs::compile {

/// One guarded leaf of the inputs.
struct GuardItem {
  enum class Kind { Tensor, Int, Double, Bool, String, None, Object, Other };
  Kind kind = Kind::None;
  std::string name;             ///< source name: "args[0]", "args[2][1]", "args[3]['k']"
  // Tensor
  std::vector<int64_t> sizes;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  hooks::DeviceId device;       ///< logical device
  torch::Device torch_device{torch::kCPU};  ///< the torch device behind it (cpu for emulated)
  // Values
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;                ///< String value, or the type name of Object / Other
};

/// The guarded shape of a call's inputs: `len(args)` plus every leaf, depth-first (lists,
/// tuples and string-keyed dicts are walked; tensor lists too).
struct InputSignature {
  size_t num_args = 0;
  std::vector<GuardItem> items;
};

/// Reads the signature of `inputs` (never throws for well-formed IValues).
InputSignature signature_of(const std::vector<c10::IValue>& inputs);

/// The first guard of `cached` that `actual` fails, in Dynamo's wording (see above), or
/// nullopt when `actual` satisfies every guard of `cached`.
std::optional<std::string> guard_failure(const InputSignature& cached, const InputSignature& actual);

/// Dynamo's dtype spelling in guard texts ("Float", "BFloat16", "Long", ...).
std::string dtype_text(c10::ScalarType t);

}  // namespace hs::compile
