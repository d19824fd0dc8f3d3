// accelerate's disk-offload store (`accelerate/utils/offload.py`) and the weight maps
// the hooks read offloaded tensors from.
//
// Folder format, as accelerate 1.15 writes it (byte-compatible both ways):
//   FOLDER/index.json    JSON object, written with `json.dump(indent=2)` (no trailing newline),
//                        keys in insertion order:
//                          {"NAME": {"dtype": "float32", "shape": [5, 4]}, ...}
//   FOLDER/NAME.dat      the tensor's elements, C-contiguous, native byte order (little-endian on
//                        every host hookscope supports), no header. The file name is the full
//                        dotted tensor name plus ".dat", with no subfolders.
// dtype names are NumPy's (`str(weight.numpy().dtype)`): float16, float32, float64, complex64,
// complex128, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool; plus the two cases
// NumPy cannot hold, stored as raw bits: "bfloat16" (written as int16) and the fp8 types
// "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"
// (written as int8; accelerate 1.15 added these — older releases failed on fp8).
// Shapes: a 0-d tensor has "shape": [] and is stored as one element. An empty tensor (a 0 in its
// shape) is stored as a 1-byte file holding 0x00, because that is what `np.memmap(mode="w+")`
// leaves behind (and NumPy cannot map an empty file back).
//
// transformers (4.x and 5.x) also puts *safetensors-backed* entries into the in-memory index it
// hands to dispatch_model: {"safetensors_file": "/path/x.safetensors", "weight_name": "<key in
// file>", "dtype": "<torch dtype name>"}; weight_name and dtype are optional. Such entries are
// read through hs::models::SafetensorsFile (bounded, validated) and cast to "dtype" if given.
//
// Trust: index.json and .dat files are untrusted input. read_offload_index() validates every
// entry before anything is loaded: a known dtype name, integer dimensions >= 0 whose element and
// byte counts fit in int64, a .dat key that cannot leave the folder (no '/', no "..", no NUL, not
// empty), JSON nesting <= 16 levels, index.json <= 256 MiB. Each .dat file must be a regular file
// whose size is exactly the byte count of its entry (NumPy would accept a longer file). Files are
// opened read-only. bool .dat data must be 0/1 bytes.
//
// Units: sizes in bytes; shapes are element counts per dimension.
//
// Errors: every failure of this module throws OffloadError (a std::runtime_error) whose message
// names the file and, where there is one, the key at fault — except a lookup of an absent key
// (WeightsMap::get, OffloadIndex::at), which throws std::out_of_range naming the key (Python's
// KeyError), and PrefixedDataset over a null map (std::invalid_argument).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace hs::models {
class SafetensorsFile;
}

namespace hs::hooks {

/// Any failure reading or writing an offload folder or index.
struct OffloadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Tensors by name in a fixed order — a Python `dict[str, Tensor]` such as `model.state_dict()`.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// One entry of an offload index.
///
/// A `.dat` entry (no safetensors_file): `dtype` is a NumPy-style name (see the file comment) and
/// `shape` the tensor shape ([] for 0-d); the data is FOLDER/<key>.dat.
/// A safetensors entry (safetensors_file set, as transformers writes them): `dtype`, if not
/// empty, is a torch dtype name (`str(torch.float16)` without "torch.") the tensor is cast to;
/// empty means "no dtype field" (keep the file's dtype). `weight_name` defaults to the key.
/// `shape` is not part of such entries and is ignored (kept empty). A relative safetensors_file
/// is resolved against the current directory, as Python's open() does.
struct OffloadIndexEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  std::optional<std::string> safetensors_file;
  std::optional<std::string> weight_name;

  bool is_safetensors() const { return safetensors_file.has_value(); }
  bool operator==(const OffloadIndexEntry&) const = default;
};

/// An offload index: key -> entry, iterated in insertion order like the Python dict accelerate
/// keeps (the order decides index.json's text and OffloadedWeightsLoader::keys()). Assigning an
/// existing key replaces its entry in place (dict semantics).
class OffloadIndex {
 public:
  using value_type = std::pair<std::string, OffloadIndexEntry>;
  using const_iterator = std::vector<value_type>::const_iterator;

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  bool contains(const std::string& key) const { return pos_.count(key) != 0; }
  /// nullptr when absent.
  const OffloadIndexEntry* find(const std::string& key) const;
  /// Throws std::out_of_range naming the key when absent.
  const OffloadIndexEntry& at(const std::string& key) const;
  /// `index[key] = entry`: appends a new key, or replaces an existing key's entry in place.
  void insert_or_assign(const std::string& key, OffloadIndexEntry entry);
  std::vector<std::string> keys() const;
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  /// Same keys in the same order with equal entries.
  bool operator==(const OffloadIndex& other) const { return entries_ == other.entries_; }

 private:
  std::vector<value_type> entries_;
  std::unordered_map<std::string, size_t> pos_;
};

// ---- dtypes --------------------------------------------------------------------------------

/// The index name accelerate records for a tensor of this dtype when writing a .dat file
/// (e.g. kFloat -> "float32", kBFloat16 -> "bfloat16", kFloat8_e4m3fn -> "float8_e4m3fn").
/// Throws OffloadError for dtypes NumPy cannot represent and accelerate does not special-case
/// (complex32, quantized and bit types) — upstream fails in `weight.numpy()`.
std::string offload_dtype_name(c10::ScalarType dtype);
/// The torch dtype of a .dat entry's dtype name (the inverse of offload_dtype_name). Throws
/// OffloadError listing the accepted names for anything else. NumPy aliases that accelerate
/// never writes ("f4", "<f4", "float", ...) are refused.
c10::ScalarType dat_scalar_type(const std::string& name);
/// The torch dtype named by a safetensors entry's "dtype" (canonical `torch.X` names without
/// "torch.": "float16", "bfloat16", "int64", "float8_e4m3fn", ...). Throws OffloadError.
c10::ScalarType torch_scalar_type(const std::string& name);

/// Bytes a .dat file of this entry holds: numel * element size, or 1 for an empty tensor (see
/// the file comment). Throws OffloadError (naming `key`) for a safetensors entry, an unknown
/// dtype, a negative dimension or an overflowing shape.
uint64_t dat_file_bytes(const OffloadIndexEntry& entry, const std::string& key = "");

/// Checks one entry as read_offload_index() does (dtype name, dimensions, overflow, and for .dat
/// entries a key that is a safe file name). `where` names the index in messages. Throws
/// OffloadError naming the key and `where`.
void validate_offload_entry(const std::string& key, const OffloadIndexEntry& entry,
                            const std::string& where = "offload index");

// ---- writing -------------------------------------------------------------------------------

/// `offload_weight(weight, name, folder, index)`: writes `weight` to FOLDER/<name>.dat and
/// records {"dtype", "shape"} under `name` in `index` (a new key is appended, an existing one
/// replaced). The tensor is copied to CPU and made C-contiguous (conjugate/negative views are
/// resolved); bf16 and fp8 are written as their raw bits. The folder must exist (as upstream).
///
/// Atomic: the data goes to a temporary file in the folder, is fsync'ed, then renamed over the
/// target, so a crash never leaves a truncated NAME.dat (at worst a stray ".hs-offload-*.tmp").
/// An existing NAME.dat (or a symlink of that name) is replaced, never written through.
///
/// Throws OffloadError naming the tensor: meta tensors ("Cannot copy out of meta tensor; no
/// data!", as torch says), non-strided (sparse, quantized, mkldnn) tensors, dtypes without an
/// index name (offload_dtype_name), names that are not safe file names, I/O failures.
/// Difference from Python: a tensor that requires grad is written (upstream's `.numpy()`
/// refuses it; accelerate only ever passes detached state-dict tensors).
void offload_weight(const torch::Tensor& weight, const std::string& name,
                    const std::filesystem::path& folder, OffloadIndex& index);

/// `save_offload_index(index, folder)`: does nothing for an empty index. Otherwise merges into
/// FOLDER/index.json if it exists (its entries are kept verbatim, new keys appended, existing
/// keys overwritten in place — Python's `dict.update`) and writes it with indent 2, ASCII-only,
/// no trailing newline: the same text `json.dump(indent=2)` produces. Written atomically
/// (temp + fsync + rename; the folder is fsync'ed before and after, so every .dat renamed before
/// is durable before the index names it). Throws OffloadError when an existing index.json is not
/// a JSON object, or on I/O failure.
void save_offload_index(const OffloadIndex& index, const std::filesystem::path& folder);

/// `offload_state_dict(save_dir, state_dict)`: creates the folder (and parents), writes every
/// tensor with offload_weight in order, then save_offload_index. Returns the index written.
OffloadIndex offload_state_dict(const std::filesystem::path& folder, const NamedTensors& state_dict);

// ---- reading -------------------------------------------------------------------------------

/// Path of FOLDER/index.json (dispatch_model skips writing when it exists).
std::filesystem::path offload_index_path(const std::filesystem::path& folder);

/// Reads and validates FOLDER/index.json (see the file comment). Unknown fields in an entry are
/// ignored; a duplicated key keeps its first position and its last value (Python's json.load).
/// "safetensors_file": null counts as absent (upstream tests `.get(...) is not None`).
/// Throws OffloadError: missing file ("No such file"), unreadable, too large, invalid JSON, not
/// an object, or any invalid entry — naming the file and key.
OffloadIndex read_offload_index(const std::filesystem::path& folder);

/// `load_offloaded_weight(file, info)` for a .dat entry: reads the file (opened read-only) into a
/// new CPU tensor of the entry's dtype and shape — every call returns fresh storage, as upstream
/// copies out of its memmap. bf16/fp8 are re-viewed from their stored bits; shape [] gives a 0-d
/// tensor. The data is read with pread() rather than mapped: the same single copy, and a file
/// truncated while it is read gives an error instead of SIGBUS.
/// Throws OffloadError naming the file: invalid entry, missing file, not a regular file, size not
/// equal to dat_file_bytes(entry) ("has M bytes but its index entry ... needs N bytes"), read
/// errors, bool bytes other than 0/1.
torch::Tensor load_offloaded_weight(const std::filesystem::path& dat_file,
                                    const OffloadIndexEntry& entry);

/// Before a model is mutated, dispatch checks that what the index promises for `key` is what the
/// module's tensor `expected` (usually a meta tensor) needs: same shape and same dtype. For a
/// .dat entry the entry's shape/dtype are compared and FOLDER/<key>.dat must exist with the right
/// size; for a safetensors entry the file's header is read (no data) and the tensor's shape and
/// dtype after the entry's cast are compared.
/// Throws OffloadError naming the key, the file and both shapes and dtypes.
/// Stricter than upstream: accelerate would silently cast a dtype mismatch in
/// set_module_tensor_to_device and raise a shape mismatch only at the first forward.
void check_entry_matches(const std::string& key, const OffloadIndexEntry& entry,
                         const torch::Tensor& expected, const std::filesystem::path& folder);

// ---- weight maps ---------------------------------------------------------------------------

/// A read-only mapping from tensor names to tensors: what accelerate's hooks call `weights_map`
/// (any `Mapping`). Implementations may be shared between hooks and threads.
class WeightsMap {
 public:
  virtual ~WeightsMap() = default;
  /// `key in map`. Cheap: it never loads data (Python's Mapping.__contains__ calls __getitem__,
  /// so there it loads the tensor, and a listed but missing .dat raises instead of returning
  /// False).
  virtual bool contains(const std::string& key) const = 0;
  /// `map[key]`. Throws std::out_of_range "KeyError: 'key'" when absent; loading errors are
  /// OffloadError.
  virtual torch::Tensor get(const std::string& key) const = 0;
  /// Iteration order (`list(map)`).
  virtual std::vector<std::string> keys() const = 0;
  /// `len(map)`.
  virtual size_t size() const = 0;
  /// `map.get(key)`: nullopt when absent.
  std::optional<torch::Tensor> get_or_none(const std::string& key) const;
  /// hookscope only: the tensor this map holds in memory for `key` (what get() returns without
  /// loading anything), or nullopt when get() would load it from a file (.dat or safetensors)
  /// or the key is absent. Decides where an onload comes from ("cpu" or "disk") and what the
  /// memory ledger counts as resident.
  virtual std::optional<torch::Tensor> in_memory(const std::string& key) const = 0;
};

/// A plain map over named tensors (a Python `dict` used as weights_map, e.g. `model.state_dict()`).
/// get() returns the stored tensor itself (same TensorImpl). Duplicate names: first position,
/// last value (dict construction).
class StateDictMap : public WeightsMap {
 public:
  explicit StateDictMap(NamedTensors tensors);
  bool contains(const std::string& key) const override { return pos_.count(key) != 0; }
  torch::Tensor get(const std::string& key) const override;
  std::vector<std::string> keys() const override;
  size_t size() const override { return tensors_.size(); }
  /// Every entry: get(key) when present.
  std::optional<torch::Tensor> in_memory(const std::string& key) const override { return get_or_none(key); }
  const NamedTensors& tensors() const { return tensors_; }

 private:
  NamedTensors tensors_;
  std::unordered_map<std::string, size_t> pos_;
};

/// `OffloadedWeightsLoader(state_dict=None, save_folder=None, index=None, device=None)`.
///
/// - All three absent: OffloadError with accelerate's text "Need either a `state_dict`, a
///   `save_folder` or an `index` containing offloaded weights.".
/// - No index but a save_folder: FOLDER/index.json is read (read_offload_index; missing ->
///   OffloadError "No such file"). A given index is validated the same way; with both, the
///   given index wins and index.json is not read.
/// - keys(): the state-dict keys in order, then the index keys not among them (de-duplicated);
///   size() is their count.
/// - get(key): the state dict has priority and its tensor is returned itself (same object).
///   Otherwise the index entry: a safetensors entry is read from its file (the file is opened once
///   and cached), copied, cast to the entry dtype if any, and moved to `device` (CPU when
///   absent); a .dat entry is load_offloaded_weight(FOLDER/<key>.dat) and stays on the CPU even
///   when `device` is set — as upstream, where `device` only applies to safetensors entries.
///   Every index load returns fresh storage. A .dat entry without a save_folder is an
///   OffloadError (upstream: TypeError from os.path.join(None, ...)).
/// Difference: safetensors data is always read on the CPU and then moved (upstream opens the
/// file on the device, retrying on CPU after a TypeError); the values are the same.
/// fp8 safetensors entries are not loadable (hs::models::SafetensorsFile refuses F8 dtypes).
class OffloadedWeightsLoader : public WeightsMap {
 public:
  OffloadedWeightsLoader(std::optional<NamedTensors> state_dict,
                         std::optional<std::filesystem::path> save_folder,
                         std::optional<OffloadIndex> index = std::nullopt,
                         std::optional<torch::Device> device = std::nullopt);
  ~OffloadedWeightsLoader() override;

  bool contains(const std::string& key) const override;
  torch::Tensor get(const std::string& key) const override;
  std::vector<std::string> keys() const override { return all_keys_; }
  size_t size() const override { return all_keys_.size(); }
  /// The state-dict entries; index entries are loaded from their files.
  std::optional<torch::Tensor> in_memory(const std::string& key) const override {
    return state_dict_.in_memory(key);
  }

  const StateDictMap& state_dict() const { return state_dict_; }
  const std::optional<std::filesystem::path>& save_folder() const { return save_folder_; }
  const OffloadIndex& index() const { return index_; }
  const std::optional<torch::Device>& device() const { return device_; }

  /// check_entry_matches() for an index key, reusing this loader's open safetensors files.
  /// State-dict keys are compared directly (shape and dtype of the stored tensor).
  /// Throws std::out_of_range for unknown keys.
  void check_matches(const std::string& key, const torch::Tensor& expected) const;

 private:
  std::shared_ptr<models::SafetensorsFile> open_safetensors(const std::string& file) const;

  StateDictMap state_dict_;
  std::optional<std::filesystem::path> save_folder_;
  OffloadIndex index_;
  std::optional<torch::Device> device_;
  std::vector<std::string> all_keys_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<models::SafetensorsFile>> files_;
};

/// `PrefixedDataset(dataset, prefix)`: a view of `dataset` under a name prefix, used to
/// hand each hooked module its own part of the weights map.
/// - get(k) / contains(k) look up `prefix + k`.
/// - keys() are the **full, unstripped** keys of the underlying map that start with the prefix
///   (upstream's inconsistency, replicated: iterating and indexing do not agree).
/// - size() is the **whole** underlying size, not the number of prefixed keys (replicated).
class PrefixedDataset : public WeightsMap {
 public:
  PrefixedDataset(std::shared_ptr<const WeightsMap> dataset, std::string prefix);
  bool contains(const std::string& key) const override;
  torch::Tensor get(const std::string& key) const override;
  std::vector<std::string> keys() const override;
  size_t size() const override { return dataset_->size(); }
  std::optional<torch::Tensor> in_memory(const std::string& key) const override {
    return dataset_->in_memory(prefix_ + key);
  }

  const std::shared_ptr<const WeightsMap>& dataset() const { return dataset_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::shared_ptr<const WeightsMap> dataset_;
  std::string prefix_;
};

/// `extract_submodules_state_dict(state_dict, submodule_names)`: the entries whose key equals a
/// module name or starts with `name + "."` (so "a.1" does not capture "a.10"), grouped by module
/// name in the order given, each group in state-dict order; a key selected twice keeps its first
/// position. The tensors are the same objects (no copies). A name "" selects nothing (as
/// upstream: no key equals "" or starts with ".").
NamedTensors extract_submodules_state_dict(const NamedTensors& state_dict,
                                           const std::vector<std::string>& submodule_names);

}  // namespace hs::hooks
