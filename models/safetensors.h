// safetensors reader: an own bounded parser over a copy-on-write memory mapping, producing
// zero-copy LibTorch CPU tensors. Also opens a whole Hugging Face checkpoint folder
// (model.safetensors, or model.safetensors.index.json + shards) and refuses pickle checkpoints.
//
// File format (huggingface/safetensors README "Format", safetensors/src/tensor.rs):
//   bytes [0, 8)        N, unsigned 64-bit little-endian: the header length in bytes
//   bytes [8, 8+N)      UTF-8 JSON object, starting with '{' (may be padded with trailing spaces):
//                       {"NAME": {"dtype": "BF16", "shape": [..], "data_offsets": [BEGIN, END]},
//                        "__metadata__": {"key": "value", ...}, ...}
//   bytes [8+N, size)   the data section; BEGIN/END are byte offsets into it, END exclusive.
//                       Row-major, little-endian, no strides.
//
// Upstream rules mirrored here (each violation is a LoadError naming the file and the tensor or
// field at fault; everything is checked in open(), before any tensor is made):
//   - the file holds at least the 8-byte length (HeaderTooSmall);
//   - N <= 100,000,000 (MAX_HEADER_SIZE, HeaderTooLarge) and 8+N <= file size
//     (InvalidHeaderLength);
//   - the header is valid UTF-8 (InvalidHeader), starts with '{' (InvalidHeaderStart) and is a
//     JSON object (InvalidHeaderDeserialization);
//   - no duplicate keys, at any level. The README forbids them; note that the Rust crate itself
//     (0.8) silently keeps one of them, we refuse the file instead;
//   - every entry other than "__metadata__" is an object with "dtype" (a string naming one of the
//     22 format dtypes), "shape" (an array of non-negative integers) and "data_offsets" (an array
//     of exactly two non-negative integers). Unknown extra fields are ignored (serde's default);
//   - "__metadata__", if present and not null, is an object of string values;
//   - the element count (product of the shape) and the byte count must not overflow
//     (ValidationOverflow); sub-byte dtypes (F4, F6_*) must cover a whole number of bytes
//     (MisalignedSlice);
//   - BEGIN <= END <= size of the data section, and END-BEGIN == bytes needed by shape and dtype
//     (TensorInvalidInfo);
//   - sorted by offsets the tensors tile the data section exactly: the first starts at 0, each
//     one starts where the previous one ends (overlaps and holes are InvalidOffset), and the
//     last one ends at the end of the file (MetadataIncompleteBuffer). Empty tensors
//     (BEGIN == END) may share an offset.
//   - 0-rank tensors (shape []) and empty tensors (a 0 in the shape) are allowed.
// Beyond upstream, for robustness: a raw NUL byte in the header is refused (nlohmann would stop
// parsing at it), JSON nesting deeper than 16 levels is refused, and the product of a shape's
// non-zero dimensions must fit in int64 (so even an empty tensor has representable strides).
//
// Units: every offset, size and count in this API is in bytes unless named otherwise
// (dtype_bits() is in bits; shapes are element counts).
//
// Memory: the file is opened O_RDONLY and mapped PROT_READ|PROT_WRITE, MAP_PRIVATE. The mapping is
// copy-on-write, so an in-place op on a returned tensor can never reach the file. It does reach
// the mapping: a later tensor() call on the same SafetensorsFile object sees the modified values
// (open the file again for pristine data). Tensors keep the mapping alive after the
// SafetensorsFile is gone. Truncating a file while it is mapped makes reads fault (SIGBUS), as
// with any mmap reader; checkpoints are not expected to change under a running process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>  // at::Tensor, the same type as torch::Tensor
#include <c10/core/ScalarType.h>

namespace hs::models {

/// Every error raised while opening, validating or reading checkpoints. The message names the
/// file (and the tensor or field) at fault.
struct LoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One header entry, as validated.
struct TensorInfo {
  std::string name;
  std::string dtype;           ///< "F32", "BF16", ... exactly as written in the file
  std::vector<int64_t> shape;  ///< element counts per dimension; empty for a 0-rank tensor
  uint64_t begin = 0;          ///< byte offset relative to the start of the data section
  uint64_t end = 0;            ///< byte offset relative to the data section, exclusive
  uint64_t nbytes() const { return end - begin; }
  /// Number of elements (product of shape; 1 for a 0-rank tensor).
  uint64_t numel() const;
};

/// Size in bits of one element of a format dtype, for every dtype the format defines (BOOL, U8,
/// I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F4 (4), F6_E2M3 (6), F6_E3M2 (6),
/// I16, U16, F16, BF16, I32, U32, F32, C64 (64), F64, I64, U64). Throws LoadError for an unknown
/// name. `context` is appended to the message (e.g. "tensor T in FILE").
uint64_t dtype_bits(const std::string& dtype, const std::string& context = "");

/// Size in bytes of one element, for every whole-byte format dtype (all but F4, F6_E2M3 and
/// F6_E3M2, for which it throws LoadError saying the dtype is sub-byte; use dtype_bits()).
/// Throws LoadError for an unknown name.
uint64_t dtype_element_size(const std::string& dtype, const std::string& context = "");

/// Maps a safetensors dtype string to a torch dtype. Loadable: F32, BF16, F16 (the model dtypes)
/// plus F64, I64, I32, I16, I8, U8, BOOL. Any other format dtype (F8_*, F4, F6_*, C64, U16, U32,
/// U64) throws LoadError "dtype X of tensor T in FILE is not supported (supported: ...)"; an
/// unknown name throws LoadError "unknown dtype X ...". `tensor` and `file` only feed the message.
c10::ScalarType scalar_type_of(const std::string& dtype, const std::string& tensor = "",
                               const std::filesystem::path& file = {});

/// One .safetensors file, validated and mapped read-only (copy-on-write). Immutable after open();
/// safe to share between threads.
class SafetensorsFile {
 public:
  /// Opens, maps and validates `path` (all rules above). Throws LoadError.
  static std::shared_ptr<SafetensorsFile> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  /// All tensors, sorted by data offsets (file order); ties (empty tensors) by name.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  /// nullptr if the file has no tensor of that name.
  const TensorInfo* find(const std::string& name) const;
  /// The "__metadata__" map (empty if absent or null).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Total file size in bytes, and the header length N.
  uint64_t file_size() const { return file_size_; }
  uint64_t header_size() const { return header_size_; }

  /// A CPU tensor over the mapping, zero-copy; it keeps the mapping alive. Copied instead when
  /// the data pointer is misaligned for the dtype (writers other than the reference one may not
  /// align), and for empty tensors (fresh storage). BOOL data must be 0/1 bytes. Throws LoadError
  /// for an absent name, an unsupported dtype, or bad BOOL bytes.
  at::Tensor tensor(const std::string& name) const;

 private:
  struct Mapping;  // the mmap region; shared with every tensor made from it
  SafetensorsFile() = default;
  std::filesystem::path path_;
  std::shared_ptr<Mapping> mapping_;
  uint64_t file_size_ = 0;
  uint64_t header_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// All weights of a Hugging Face checkpoint folder.
///
/// open_dir() looks, in this order (transformers' from_pretrained's), for:
///   1. model.safetensors, when it is a regular file (symlinks followed): a folder holding both
///      it and an index loads the single file, as transformers does.
///   2. model.safetensors.index.json: a JSON object whose "weight_map" maps tensor names to shard
///      file names ("metadata" is optional and not relied upon). Each shard must be a plain file
///      name inside the folder (no '/', not "." or ".."; symlinks such as the HF cache's are
///      followed). Each shard is opened and validated once; every weight_map entry must name a
///      tensor its shard holds. Tensors in a shard but absent from weight_map are not exposed.
///      (A model.safetensors that is present but not a regular file, e.g. a dangling link, is
///      passed over here and, without an index, fails to open naming itself.)
///   3. otherwise, if the folder holds pickle checkpoints (pytorch_model.bin,
///      pytorch_model.bin.index.json, *.bin, *.pt, *.pth, *.ckpt), LoadError "refusing to load
///      pickle checkpoint ..." WITHOUT opening them (only the folder listing is read);
///   4. else LoadError "no model.safetensors or model.safetensors.index.json in DIR".
/// A broken index is an error; there is no fallback to the next option.
class Checkpoint {
 public:
  static Checkpoint open_dir(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  /// Tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// Throws LoadError naming the tensor and the folder when missing.
  const TensorInfo& info(const std::string& name) const;
  /// The tensor (see SafetensorsFile::tensor). Throws LoadError when missing.
  at::Tensor get(const std::string& name) const;
  /// Path of the file holding `name`. Throws LoadError when missing.
  std::filesystem::path file_of(const std::string& name) const;
  /// The opened files (one per distinct shard), in the order first met.
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  struct Entry {
    size_t file = 0;
    const TensorInfo* info = nullptr;  // owned by files_[file], which is immutable
  };
  const Entry& entry(const std::string& name) const;

  std::filesystem::path dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry> entries_;
};

}  // namespace hs::models
