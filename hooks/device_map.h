// Device maps: accelerate's `infer_auto_device_map` and its helpers (`accelerate/utils/
// modeling.py`).
//
// Every size is in **bytes** (int64). A device map is ordered like the Python dict accelerate
// returns; a max_memory is ordered accelerators ascending, then "mps", "cpu", "disk".
// Model tensors are only inspected (shapes and dtypes), never read: a model on `meta` works.
//
// Messages. accelerate's warnings (`warnings.warn`, `logger.warning`) go to the logger as
// level "WARNING", its `logger.info` lines as "INFO", and the `verbose=True` prints as
// "VERBOSE" — with accelerate's texts. A null `LogFn` means the process-wide hooks logger
// (`hooks::log`, stderr by default).
//
// Decisions on accelerate's quirks (R = replicated, F = fixed):
//  3 (F)  accelerate drops the direct buffers of a module it splits, so its map then fails
//         `check_device_map`. Here a split module is replaced by its direct parameters, then
//         its direct buffers, then its children (accelerate: parameters, children), so the
//         buffers are placed at the split point — on the device where the module's first
//         pieces go (or the next one if they do not fit) — and are counted against that
//         device's memory. Maps therefore differ from accelerate's exactly when a split
//         module has direct buffers (where accelerate's map is incomplete). The same holds
//         for the splits done by the tied-module and fallback paths.
//  2 (R here, F in dispatch)  like accelerate, `infer_auto_device_map` returns `{"": "disk"}`
//         when nothing fits anywhere but disk (accelerate's test cases E, I); `check_device_map` accepts it,
//         and `dispatch_model` (big_modeling.h) expands it and offloads the whole model.
//  4 (F)  `get_balanced_memory` ignores a "disk" key (accelerate crashes on it).
//  8 (R)  a lowercase trailing "b" in "GB"/"MB"/"KB" sizes means bits: "1gb" = 125000000.
// 12 (R)  `check_device_map` warns about keys that are not module names, parameter-level
//         keys ("0.weight") included.
// 13 (F)  `get_max_memory` never mutates its input (accelerate converts the caller's dict
//         in place).
// New ones found while porting:
//  a (F)  `clean_device_map` visits sibling prefixes in a Python `set`, so the order of the
//         merged entries depends on PYTHONHASHSEED (verified: `{"a.x": 0, "a.y": 0, "b.x": 1,
//         "b.y": 1, "c": 1}` gives `c, a, b` or `c, b, a`). Here siblings are visited in order of
//         first appearance in the map (`c, a, b`).
//  b (F)  `find_tied_parameters` builds its groups by iterating a `set`, so the group order
//         varies between runs; with two or more tie groups touching one module that also
//         changes `infer_auto_device_map`'s tie handling order. Here groups are ordered by
//         their first (canonical) parameter's position in `named_parameters()`.
//  c (R)  a tied parameter whose owner was already placed makes accelerate's
//         `get_module_size_with_ties` fail (IndexError); this raises std::runtime_error.
// Differences of representation: sizes are int64 — a bool tensor counts ceil(numel / 8)
// bytes (accelerate: a float numel / 8), and the 0.9 scaling of `get_balanced_memory` (no
// user max_memory, one accelerator) is truncated to whole bytes (accelerate keeps a float).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "hooks/device.h"
#include "hooks/hooks.h"
#include "models/module.h"

namespace hs::hooks {

using models::HookableModule;

/// Module name ("" = the whole model) -> device, in insertion order (a Python dict). Same type
/// as `DeviceMapEntries` in big_modeling.h.
using DeviceMap = std::vector<std::pair<std::string, DeviceId>>;
/// Device -> bytes. As returned by get_max_memory: accelerators ascending, then mps, cpu, disk.
using MaxMemory = std::vector<std::pair<DeviceId, int64_t>>;
/// Tensor name (dotted, from the model root) -> dtype it will be loaded in.
using SpecialDtypes = std::map<std::string, c10::ScalarType>;

// ------------------------------------------------------------------------------ sizes, units

/// `convert_file_size_to_int`: "1GiB" -> 1073741824, "1.5GB" -> 1500000000, "500Mb" (bits) ->
/// 62500000, "2KiB" -> 2048. Suffixes GiB/MiB/KiB (2^30/2^20/2^10) and GB/MB/KB (10^9/10^6/
/// 10^3) match case-insensitively; for GB/MB/KB a lowercase trailing "b" divides by 8 (so
/// "1gb" = 125000000, quirk 8 R). The number takes Python `float()` syntax ("1e3MB", "1_000KB",
/// " 2 GiB"); the product is truncated toward zero. Throws std::invalid_argument with
/// accelerate's ValueError text "`size` X is not in a valid format. Use an integer for bytes,
/// or a string with an unit (like '5.0GB')." for anything else: no unit ("1000"), an unknown
/// one ("1TB"), a bad number ("5k0MB"), a negative result ("-1GB"). "infGB" (Python:
/// OverflowError) and a result beyond int64 (Python: a big int) throw std::invalid_argument
/// "`size` X is too large: at most 9223372036854775807 bytes (8 EiB)".
int64_t convert_file_size_to_int(const std::string& size);

/// Parses the command-line form "0=1GiB,1=1GiB,cpu=4GiB": comma-separated `key=size`; keys are
/// accelerator indices (ints, "-1" included: get_max_memory only warns about it) or "mps",
/// "cpu", "disk"; sizes are a plain integer (bytes) or a convert_file_size_to_int string.
/// Returns the entries in the given order (normalise with get_max_memory). Throws
/// std::invalid_argument naming the bad entry: an empty spec or entry, a missing "=", an
/// unknown key (accelerate's "Device K is not recognized, ..." text), an unparsable size, a
/// device given twice.
MaxMemory parse_max_memory(const std::string& spec);

/// Where `get_max_memory(None)` gets its numbers. Null members use the defaults:
///  - accelerator i: logical device i of the current runtime (hooks/runtime.h) — an emulated
///    one reports its budget (`AcceleratorInfo::total_memory`; 0 = the free memory of its
///    backing device), a real one its current free memory (`at::accelerator::getMemoryInfo`,
///    after a tiny allocation as accelerate does); nullopt or an exception = unavailable (logged at INFO,
///    "Device i seems unavailable, Proceeding to check subsequent devices.", and skipped);
///  - cpu: the available RAM (`MemAvailable` of /proc/meminfo, what psutil reports).
struct MemoryProbe {
  std::function<std::optional<int64_t>(int index)> accelerator_free_memory;
  std::function<int64_t()> cpu_available_memory;
};

/// `get_max_memory`. `num_accelerators` < 0 means the current runtime's accelerator count
/// (`Runtime::current().devices()`; std::logic_error when no runtime is installed).
///  - nullopt (Python None): each accelerator 0..num_accelerators-1 from `probe`, then "cpu";
///    "disk" is not added.
///  - given: reordered (accelerators ascending, then "mps", "cpu", "disk"); an accelerator
///    index >= num_accelerators or < 0 logs the WARNING "Device i is not available, available
///    devices are [0, 1]"; any other device ("meta") throws std::invalid_argument with
///    accelerate's text "Device meta is not recognized, available devices are integers(for
///    GPU/XPU), 'mps', 'cpu' and 'disk'". A device given twice keeps the last value (dict
///    semantics). The input is not modified (quirk 13 F).
MaxMemory get_max_memory(const std::optional<MaxMemory>& max_memory, int num_accelerators = -1,
                         const LogFn& log = {}, const MemoryProbe& probe = {});
/// The same from JSON: null (= None); an object whose keys are decimal ints ("0") or device
/// names; or an array of [key, value] pairs whose keys are ints or names. Values are integer
/// bytes or convert_file_size_to_int strings (JSON floats are truncated to whole bytes).
/// Unknown keys such as "cuda:0" throw std::invalid_argument with accelerate's text; a value
/// of another type throws std::invalid_argument naming the key.
MaxMemory get_max_memory(const nlohmann::json& max_memory, int num_accelerators = -1, const LogFn& log = {},
                         const MemoryProbe& probe = {});

/// `dtype_byte_size`: bytes per element as accelerate counts them — bool 1/8, float8 types 1,
/// otherwise the trailing bit count of the Python dtype name / 8 (float32 4, bfloat16 2, int64 8,
/// complex64 8, quint4x2 0). Throws std::invalid_argument for a dtype without a bit count.
double dtype_byte_size(c10::ScalarType dtype);

/// Sizes by name, ordered as accelerate's dict: "" (the total) first, then every prefix of
/// every tensor name in `named_parameters()` then `named_buffers()` order. Lookups of an absent
/// name give 0 (accelerate's defaultdict).
class ModuleSizes {
 public:
  int64_t get(const std::string& name) const;
  int64_t operator[](const std::string& name) const { return get(name); }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const std::vector<std::pair<std::string, int64_t>>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  void add(const std::string& name, int64_t bytes);

 private:
  std::vector<std::pair<std::string, int64_t>> items_;
  std::unordered_map<std::string, size_t> index_;
};

/// `compute_module_sizes(model, dtype, special_dtypes, buffers_only)`: bytes of every module
/// and tensor, each tensor added to every prefix of its name including "" (the total).
/// Parameters (tied ones once, as `named_parameters()` lists them) then buffers, non-persistent
/// ones included. Bytes per tensor: `special_dtypes[name]` if given; else its own dtype when
/// `dtype` is unset or the tensor is an int/uint/bool tensor; else numel × min(bytes(dtype),
/// bytes(own dtype)). Example (Linear(3,4), BatchNorm1d(4), Linear(4,5), fp32): "" 236,
/// linear1 64, batchnorm 72, linear2 100.
ModuleSizes compute_module_sizes(const HookableModule& model, std::optional<c10::ScalarType> dtype = std::nullopt,
                                 const SpecialDtypes& special_dtypes = {}, bool buffers_only = false);

/// `compute_module_total_buffer_size`: the "" entry of a buffers-only compute_module_sizes.
int64_t compute_module_total_buffer_size(const HookableModule& model,
                                         std::optional<c10::ScalarType> dtype = std::nullopt,
                                         const SpecialDtypes& special_dtypes = {});

/// One item of accelerate's `modules_to_treat` list: a module, or a tensor (module == nullptr).
/// Non-owning: the model must outlive it.
struct ModuleEntry {
  std::string name;
  const HookableModule* module = nullptr;
  bool is_tensor() const { return module == nullptr; }
};

/// `get_max_layer_size(modules, module_sizes, no_split_module_classes)`: walks the list
/// depth-first (children replace their parent at the front); a layer is a tensor entry, a
/// module without children, or a module whose class_name() is in `no_split_module_classes`.
/// Returns (max size, every layer name reaching it, in walk order).
std::pair<int64_t, std::vector<std::string>> get_max_layer_size(
    const std::vector<ModuleEntry>& modules, const ModuleSizes& module_sizes,
    const std::vector<std::string>& no_split_module_classes);

/// `find_tied_parameters`: the names of parameters that are the same tensor, grouped; each
/// group sorted; groups ordered by their first name in `named_parameters()` (quirk b F).
/// Example: Sequential(layer, layer) -> [["0.weight", "1.weight"], ["0.bias", "1.bias"]].
std::vector<std::vector<std::string>> find_tied_parameters(const HookableModule& model);

// ------------------------------------------------------------------------------ device maps

/// `clean_device_map`: recursively from `module_name`, when every entry under a prefix has
/// the same device and there are at least two of them, they are replaced by one entry for the
/// prefix, placed at the end (or where the prefix key already was). Siblings are visited in
/// order of first appearance (quirk a F). Examples: {"a": 0, "b": 0} -> {"": 0};
/// {"a.x": 0, "a.y": 0, "b.x": 1, "b.y": 1, "c": 1} -> {"c": 1, "a": 0, "b": 1}.
DeviceMap clean_device_map(DeviceMap device_map, const std::string& module_name = "");

/// `check_device_map(model, device_map)`. Keys other than "" that are not module names log the
/// WARNING "The following device_map keys do not match any submodules in the model: ['k', ...]"
/// (quirk 12 R). Every state-dict entry (parameters, tied duplicates included, and persistent
/// buffers) must equal a key or start with `key + "."` (a "" key covers all); otherwise throws
/// std::invalid_argument("The device_map provided does not give any device for the following
/// parameters: a, b") listing them in state-dict order.
void check_device_map(const HookableModule& model, const DeviceMap& device_map, const LogFn& log = {});

/// Options of infer_auto_device_map, named as accelerate's keyword arguments.
struct InferAutoDeviceMapOptions {
  /// Bytes per device (any order; normalised by get_max_memory). nullopt = get_max_memory(None).
  std::optional<MaxMemory> max_memory;
  /// Class names (HookableModule::class_name()) that are never split, e.g. {"LlamaDecoderLayer"}.
  std::vector<std::string> no_split_module_classes;
  /// The dtype the weights will be loaded in (see compute_module_sizes).
  std::optional<c10::ScalarType> dtype;
  SpecialDtypes special_dtypes;
  /// Log each step at level "VERBOSE", with accelerate's print texts.
  bool verbose = false;
  /// Merge entries with clean_device_map.
  bool clean_result = true;
  /// Buffers of offloaded modules are offloaded too (only silences the buffer warning here).
  bool offload_buffers = false;
  /// When nothing fits on a device, look (depth-first) for any later module that does.
  bool fallback_allocation = false;
  /// For get_max_memory's range warning / None probe; < 0: the current runtime's count.
  int num_accelerators = -1;
  LogFn log;
  MemoryProbe probe;
};

/// `infer_auto_device_map`: fills the accelerators in order, then the cpu, then disk (only
/// devices present in max_memory are used, plus "disk": without a "cpu" key the overflow goes
/// to disk). Step by step as accelerate does it: on the first accelerator and the cpu ("main devices";
/// only "mps" when present) room for the largest remaining layer is kept free; a module and
/// the modules it shares tied weights with go together (the substring quirk of the tie test
/// is kept); a module that does not fit (`used + size >= limit`) is split into its parts
/// unless it is a leaf or a no-split class, else the next device is taken; optional fallback
/// allocation. Logs the buffer WARNING ("Current model requires N bytes of buffer for
/// offloaded layers, ...") and the INFO about devices that got nothing ("... - 0: 164 bytes
/// required ..."), and, for a CausalLM whose config ties the embeddings but whose weights are
/// not tied, "The model weights are not tied. ...". Quirks 2, 3, a, b, c: see the top of this
/// file. Throws what get_max_memory throws, and std::runtime_error for quirk c.
/// Example (accelerate's test case A): Linear(3,4)/BatchNorm1d(4)/Linear(4,5) with {0: 200, 1: 200} ->
/// {"linear1": 0, "batchnorm": 1, "linear2": 1}.
DeviceMap infer_auto_device_map(const HookableModule& model, const InferAutoDeviceMapOptions& options = {});

/// Options of get_balanced_memory, named as accelerate's keyword arguments.
struct GetBalancedMemoryOptions {
  std::optional<MaxMemory> max_memory;
  std::vector<std::string> no_split_module_classes;
  std::optional<c10::ScalarType> dtype;
  SpecialDtypes special_dtypes;
  bool low_zero = false;
  int num_accelerators = -1;
  LogFn log;
  MemoryProbe probe;
};

/// `get_balanced_memory`: a max_memory for infer_auto_device_map that spreads the model evenly
/// over the accelerators (those with > 0 bytes): each but the last gets
/// min(total // n + buffer, its own), buffer = int(1.25 × max(size of the first instance of
/// the largest no-split class, mean size of the final modules)); `low_zero` keeps device 0 as
/// empty as possible. With no accelerator it returns get_max_memory's result; with one it
/// turns low_zero off and, when max_memory was not given, keeps 90% of it (INFO "We will use
/// 90% of the memory on device 0 ..."). A "disk" key is kept and ignored (quirk 4 F); "mps"
/// and "cpu" are not counted as accelerators. With low_zero, accelerate reads
/// max_memory[0..n-1] by index: a missing one throws std::invalid_argument naming it
/// (accelerate: KeyError).
MaxMemory get_balanced_memory(const HookableModule& model, const GetBalancedMemoryOptions& options = {});

// ------------------------------------------------------------------------------ JSON forms

/// {"name": device, ...} in map order; devices as accelerate's values (int or string).
nlohmann::ordered_json device_map_to_json(const DeviceMap& device_map);
/// From an array of [name, device] pairs, or an object (an ordered_json object keeps document
/// order; a plain json object is key-sorted). Devices are parsed by DeviceId::from_json
/// (throws std::invalid_argument naming the key).
DeviceMap device_map_from_json(const nlohmann::json& j);
DeviceMap device_map_from_json(const nlohmann::ordered_json& j);
/// {"0": bytes, "cpu": bytes, ...} in order.
nlohmann::ordered_json max_memory_to_json(const MaxMemory& max_memory);
/// {"": total, "model": ..., ...} in order.
nlohmann::ordered_json module_sizes_to_json(const ModuleSizes& sizes);

}  // namespace hs::hooks
