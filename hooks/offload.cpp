// accelerate's disk-offload store and weight maps. See offload.h for the format and the rules.
#include "hooks/offload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "models/safetensors.h"
#include "storage/bounded_json.h"

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace hs::hooks {

static_assert(std::endian::native == std::endian::little,
              "the offload format is native byte order; hookscope reads and writes it as "
              "little-endian (as every x86/ARM accelerate host does)");

namespace {

constexpr uint64_t kMaxIndexBytes = 256ull << 20;  // index.json size cap
/// index.json's JSON: root, entry, shape need 3 levels; keys (parameter names) and dtypes are short.
constexpr storage::JsonLimits kIndexJsonLimits{
    .max_depth = 16, .max_bytes = kMaxIndexBytes, .max_string_bytes = size_t{1} << 20};

// ---- messages ------------------------------------------------------------------------------

/// A name from an untrusted file, safe to put in a message: quoted, control and non-ASCII bytes
/// escaped as \xNN, cut after 200 bytes.
std::string show(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  size_t n = 0;
  for (unsigned char c : s) {
    if (++n > 200) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + "'";
}

/// "[2, 3]"; past 8 dims, the first 8 and the count: "[1, 1, ..., 1, ...] (100000 dims)".
std::string shape_str(c10::IntArrayRef shape) {
  constexpr size_t kMaxShownDims = 8;
  std::string s = "[";
  for (size_t i = 0; i < shape.size() && i < kMaxShownDims; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() > kMaxShownDims) return s + ", ...] (" + std::to_string(shape.size()) + " dims)";
  return s + "]";
}

std::string errno_str(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& msg) { throw OffloadError(msg); }

// ---- dtypes --------------------------------------------------------------------------------

struct NamedDtype {
  const char* name;
  c10::ScalarType type;
};

// Names accelerate writes for .dat files: NumPy's names plus its bf16/fp8 special cases.
constexpr NamedDtype kDatDtypes[] = {
    {"float32", c10::ScalarType::Float},
    {"float16", c10::ScalarType::Half},
    {"bfloat16", c10::ScalarType::BFloat16},
    {"float64", c10::ScalarType::Double},
    {"complex64", c10::ScalarType::ComplexFloat},
    {"complex128", c10::ScalarType::ComplexDouble},
    {"int8", c10::ScalarType::Char},
    {"int16", c10::ScalarType::Short},
    {"int32", c10::ScalarType::Int},
    {"int64", c10::ScalarType::Long},
    {"uint8", c10::ScalarType::Byte},
    {"uint16", c10::ScalarType::UInt16},
    {"uint32", c10::ScalarType::UInt32},
    {"uint64", c10::ScalarType::UInt64},
    {"bool", c10::ScalarType::Bool},
    {"float8_e4m3fn", c10::ScalarType::Float8_e4m3fn},
    {"float8_e5m2", c10::ScalarType::Float8_e5m2},
    {"float8_e4m3fnuz", c10::ScalarType::Float8_e4m3fnuz},
    {"float8_e5m2fnuz", c10::ScalarType::Float8_e5m2fnuz},
    {"float8_e8m0fnu", c10::ScalarType::Float8_e8m0fnu},
};

std::string dat_names_list() {
  std::string s;
  for (const auto& d : kDatDtypes) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

/// Product of the non-zero dimensions times `itemsize` fits in int64 (so strides and byte counts
/// are representable even for empty tensors); returns numel * itemsize.
uint64_t checked_nbytes(const std::vector<int64_t>& shape, uint64_t itemsize, const std::string& ctx) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t nonzero = itemsize;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) fail(ctx + ": negative dimension " + std::to_string(d) + " in shape " + shape_str(shape));
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > kMax / static_cast<uint64_t>(d))
      fail(ctx + ": shape " + shape_str(shape) + " overflows (too many bytes)");
    nonzero *= static_cast<uint64_t>(d);
  }
  return empty ? 0 : nonzero;
}

/// A .dat key must be one plain file-name component once ".dat" is appended.
void check_dat_key(const std::string& key, const std::string& where) {
  std::string why;
  if (key.empty())
    why = "is empty";
  else if (key.find('/') != std::string::npos)
    why = "contains '/'";
  else if (key.find("..") != std::string::npos)
    why = "contains \"..\"";
  else if (key.find('\0') != std::string::npos)
    why = "contains a NUL byte";
  else if (key.size() + 4 > 255)
    why = "is too long for a file name";
  if (!why.empty())
    fail("offload key " + show(key) + " in " + where + " " + why +
         ": its .dat file would not be a plain file inside the offload folder");
}

// ---- file helpers --------------------------------------------------------------------------

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

/// Best effort: makes renames inside `dir` durable (some filesystems refuse fsync on a dir).
void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

/// Creates a new temporary file in `dir` for writing (O_EXCL: never an existing one) and sets
/// `tmp` to its path: ".hs-offload-<pid>-<tid>.tmp", or "...-<tid>-<k>.tmp" for k = 1, 2, ...
/// past names taken. A thread writes one file at a time and removes or renames its temporary
/// before it returns, so pid and thread id make the name unique among the live writers of this
/// process (thread ids are unique on the host, too); k only steps past a stray temporary that a
/// crashed process with the same ids left behind, or a writer in another pid namespace sharing
/// the folder. No counter is kept anywhere.
int create_temporary(const fs::path& dir, fs::path& tmp, const std::string& what) {
  const std::string stem = ".hs-offload-" + std::to_string(::getpid()) + "-" + std::to_string(::gettid());
  constexpr int kAttempts = 1000;
  int err = 0;
  for (int k = 0; k < kAttempts; ++k) {
    std::string name = stem;  // appended, not `a + b`: GCC 12 warns (-Wstringop-overflow) on that form here
    if (k) name.append("-").append(std::to_string(k));
    tmp = dir / name.append(".tmp");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    err = errno;
    if (err != EEXIST) break;
  }
  fail("cannot write " + what + ": creating a temporary file in " + dir.string() + " failed: " +
       (err == EEXIST ? std::to_string(kAttempts) + " names " + stem + "*.tmp are taken" : errno_str(err)));
}

/// Writes `data` to `target` through a temporary file in the same folder: write, fsync, rename.
/// A crash leaves either the old file, the complete new file, or a stray temporary.
void write_file_atomic(const fs::path& target, const void* data, size_t n, const std::string& what) {
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  fs::path tmp;
  Fd fd(create_temporary(dir, tmp, what));
  auto cleanup_fail = [&](const std::string& msg) {
    int err = errno;
    ::close(fd.release());
    ::unlink(tmp.c_str());
    fail("cannot write " + what + " (" + target.string() + "): " + msg + ": " + errno_str(err));
  };
  const char* p = static_cast<const char*>(data);
  size_t left = n;
  while (left > 0) {
    ssize_t w = ::write(fd.fd, p, std::min<size_t>(left, 1u << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      cleanup_fail("write failed");
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd.fd) != 0) cleanup_fail("fsync failed");
  if (::close(fd.release()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write " + what + " (" + target.string() + "): close failed: " + errno_str(err));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write " + what + ": renaming the temporary file to " + target.string() +
         " failed: " + errno_str(err));
  }
}

/// Opens an untrusted file read-only and checks it is a regular file. Returns the fd and size.
Fd open_regular(const fs::path& path, const std::string& what, uint64_t& size) {
  int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) {
    int err = errno;
    fail(what + " " + path.string() + " cannot be opened: " + errno_str(err) +
         (err == ENOENT ? " (No such file)" : ""));
  }
  Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(what + " " + path.string() + ": fstat failed: " + errno_str(errno));
  if (!S_ISREG(st.st_mode)) fail(what + " " + path.string() + " is not a regular file");
  size = static_cast<uint64_t>(st.st_size);
  return Fd(fd.release());
}

/// Reads exactly n bytes at offset 0 into dst.
void read_exact(int fd, void* dst, uint64_t n, const fs::path& path, const std::string& what) {
  char* p = static_cast<char*>(dst);
  uint64_t off = 0;
  while (off < n) {
    ssize_t r = ::pread(fd, p + off, std::min<uint64_t>(n - off, 1u << 30), static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(what + " " + path.string() + ": read failed: " + errno_str(errno));
    }
    if (r == 0)
      fail(what + " " + path.string() + ": the file ended after " + std::to_string(off) +
           " bytes while reading " + std::to_string(n) + " (it shrank while being read)");
    off += static_cast<uint64_t>(r);
  }
}

std::string read_small_file(const fs::path& path, uint64_t max, const std::string& what) {
  uint64_t size = 0;
  Fd fd = open_regular(path, what, size);
  if (size > max)
    fail(what + " " + path.string() + " is " + std::to_string(size) + " bytes, more than the " +
         std::to_string(max) + " accepted");
  std::string text(size, '\0');
  read_exact(fd.fd, text.data(), size, path, what);
  return text;
}

/// Parses JSON within kIndexJsonLimits (storage/bounded_json.h); keeps key order (duplicate key:
/// first position, last value, like Python's json.load into a dict).
ojson parse_json(const std::string& text, const std::string& what) {
  try {
    return storage::parse_ordered_json_bounded(text, what, kIndexJsonLimits);
  } catch (const storage::JsonError& e) {
    if (e.kind() == storage::JsonError::Kind::Invalid) fail(what + " is not valid JSON " + e.invalid_at());
    fail(e.what());
  }
}

// ---- index entries <-> JSON ----------------------------------------------------------------

OffloadIndexEntry entry_from_json(const std::string& key, const ojson& v, const std::string& where) {
  const std::string ctx = "offload index entry " + show(key) + " in " + where;
  if (!v.is_object()) fail(ctx + " is not a JSON object");
  OffloadIndexEntry e;
  auto it = v.find("safetensors_file");
  if (it != v.end() && !it->is_null()) {
    if (!it->is_string()) fail(ctx + ": \"safetensors_file\" is not a string");
    e.safetensors_file = it->get<std::string>();
  }
  if (e.safetensors_file) {
    if (auto w = v.find("weight_name"); w != v.end()) {
      if (!w->is_string()) fail(ctx + ": \"weight_name\" is not a string");
      e.weight_name = w->get<std::string>();
    }
    if (auto d = v.find("dtype"); d != v.end()) {
      if (!d->is_string()) fail(ctx + ": \"dtype\" is not a string");
      e.dtype = d->get<std::string>();
      if (e.dtype.empty()) fail(ctx + ": \"dtype\" is empty");
    }
    // "shape" is not part of safetensors entries and is not read (as upstream).
  } else {
    auto d = v.find("dtype");
    if (d == v.end()) fail(ctx + " has no \"dtype\"");
    if (!d->is_string()) fail(ctx + ": \"dtype\" is not a string");
    e.dtype = d->get<std::string>();
    auto s = v.find("shape");
    if (s == v.end()) fail(ctx + " has no \"shape\"");
    if (!s->is_array()) fail(ctx + ": \"shape\" is not an array");
    for (const auto& dim : *s) {
      if (dim.is_number_unsigned()) {
        uint64_t u = dim.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          fail(ctx + ": dimension " + std::to_string(u) + " is too large");
        e.shape.push_back(static_cast<int64_t>(u));
      } else if (dim.is_number_integer()) {
        e.shape.push_back(dim.get<int64_t>());  // negative: refused by validate_offload_entry
      } else {
        fail(ctx + ": \"shape\" holds " + dim.dump() + ", not an integer");
      }
    }
  }
  validate_offload_entry(key, e, where);
  return e;
}

ojson entry_to_json(const OffloadIndexEntry& e) {
  ojson j = ojson::object();
  if (e.safetensors_file) {
    // transformers' key order: safetensors_file, weight_name, dtype.
    j["safetensors_file"] = *e.safetensors_file;
    if (e.weight_name) j["weight_name"] = *e.weight_name;
    if (!e.dtype.empty()) j["dtype"] = e.dtype;
  } else {
    j["dtype"] = e.dtype;
    j["shape"] = ojson::array();
    for (int64_t d : e.shape) j["shape"].push_back(d);
  }
  return j;
}

/// Shape and dtype an entry yields, after checking its data is there (file exists, right size).
struct Resolved {
  std::vector<int64_t> shape;
  c10::ScalarType dtype;
  std::string file;
};

using SafetensorsOpener = std::function<std::shared_ptr<models::SafetensorsFile>(const std::string&)>;

std::shared_ptr<models::SafetensorsFile> open_st(const std::string& file, const std::string& key) {
  try {
    return models::SafetensorsFile::open(file);
  } catch (const models::LoadError& e) {
    fail("cannot read offloaded tensor " + show(key) + " from safetensors file " + file + ": " + e.what());
  }
}

Resolved resolve_entry(const std::string& key, const OffloadIndexEntry& entry,
                       const std::optional<fs::path>& folder, const SafetensorsOpener& opener) {
  validate_offload_entry(key, entry);
  Resolved r;
  if (entry.is_safetensors()) {
    r.file = *entry.safetensors_file;
    auto f = opener(r.file);
    const std::string wn = entry.weight_name.value_or(key);
    const models::TensorInfo* info = f->find(wn);
    if (!info)
      fail("offloaded tensor " + show(key) + ": safetensors file " + r.file + " has no tensor " + show(wn));
    r.shape = info->shape;
    if (!entry.dtype.empty()) {
      r.dtype = torch_scalar_type(entry.dtype);
    } else {
      try {
        r.dtype = models::scalar_type_of(info->dtype, wn, r.file);
      } catch (const models::LoadError& e) {
        fail(std::string("offloaded tensor ") + show(key) + ": " + e.what());
      }
    }
    return r;
  }
  if (!folder)
    fail("offloaded tensor " + show(key) +
         " is stored as a .dat file but no offload folder (save_folder) was given");
  fs::path dat = *folder / (key + ".dat");
  r.file = dat.string();
  r.shape = entry.shape;
  r.dtype = dat_scalar_type(entry.dtype);
  const uint64_t want = dat_file_bytes(entry, key);
  std::error_code ec;
  auto st = fs::status(dat, ec);
  if (ec || !fs::exists(st))
    fail("offload file " + r.file + " for " + show(key) + " does not exist (No such file)");
  if (!fs::is_regular_file(st)) fail("offload file " + r.file + " for " + show(key) + " is not a regular file");
  const uint64_t have = fs::file_size(dat, ec);
  if (ec) fail("offload file " + r.file + ": cannot read its size: " + ec.message());
  if (have != want)
    fail("offload file " + r.file + " for " + show(key) + " has " + std::to_string(have) +
         " bytes but its index entry (dtype " + entry.dtype + ", shape " + shape_str(entry.shape) +
         ") needs " + std::to_string(want) + " bytes");
  return r;
}

/// "float32", "bfloat16", ... (torch's names), or c10's name for dtypes outside the table.
std::string dtype_str(c10::ScalarType t) {
  if (t == c10::ScalarType::ComplexHalf) return "complex32";
  for (const auto& d : kDatDtypes)
    if (d.type == t) return d.name;
  return c10::toString(t);
}

void compare_resolved(const std::string& key, const Resolved& r, const torch::Tensor& expected) {
  if (!expected.defined())
    fail("check of offloaded tensor " + show(key) + ": the model's tensor is undefined (None)");
  const bool same_shape = c10::IntArrayRef(r.shape) == expected.sizes();
  const bool same_dtype = r.dtype == expected.scalar_type();
  if (same_shape && same_dtype) return;
  fail("offloaded tensor " + show(key) + " (" + r.file + ") does not match the model: the offload " +
       "index gives shape " + shape_str(r.shape) + " dtype " + dtype_str(r.dtype) +
       ", the model's tensor has shape " + shape_str(expected.sizes()) + " dtype " +
       dtype_str(expected.scalar_type()));
}

}  // namespace

// ---- OffloadIndex --------------------------------------------------------------------------

const OffloadIndexEntry* OffloadIndex::find(const std::string& key) const {
  auto it = pos_.find(key);
  return it == pos_.end() ? nullptr : &entries_[it->second].second;
}

const OffloadIndexEntry& OffloadIndex::at(const std::string& key) const {
  if (const OffloadIndexEntry* e = find(key)) return *e;
  throw std::out_of_range("KeyError: " + show(key) + " is not in the offload index");
}

void OffloadIndex::insert_or_assign(const std::string& key, OffloadIndexEntry entry) {
  auto it = pos_.find(key);
  if (it != pos_.end()) {
    entries_[it->second].second = std::move(entry);
    return;
  }
  pos_.emplace(key, entries_.size());
  entries_.emplace_back(key, std::move(entry));
}

std::vector<std::string> OffloadIndex::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [k, e] : entries_) out.push_back(k);
  return out;
}

// ---- dtypes --------------------------------------------------------------------------------

std::string offload_dtype_name(c10::ScalarType dtype) {
  for (const auto& d : kDatDtypes)
    if (d.type == dtype) return d.name;
  fail(std::string("dtype ") + c10::toString(dtype) +
       " cannot be offloaded to disk: NumPy has no equivalent and accelerate does not special-case "
       "it (upstream fails in weight.numpy())");
}

c10::ScalarType dat_scalar_type(const std::string& name) {
  for (const auto& d : kDatDtypes)
    if (name == d.name) return d.type;
  fail("unsupported offload dtype " + show(name) + " (accepted: " + dat_names_list() + ")");
}

c10::ScalarType torch_scalar_type(const std::string& name) {
  if (name == "complex32") return c10::ScalarType::ComplexHalf;
  for (const auto& d : kDatDtypes)
    if (name == d.name) return d.type;
  fail("unsupported torch dtype " + show(name) + " (accepted: " + dat_names_list() + ", complex32)");
}

uint64_t dat_file_bytes(const OffloadIndexEntry& entry, const std::string& key) {
  const std::string ctx = "offload index entry " + show(key);
  if (entry.is_safetensors()) fail(ctx + " is safetensors-backed, it has no .dat file");
  c10::ScalarType t;
  try {
    t = dat_scalar_type(entry.dtype);
  } catch (const OffloadError& e) {
    fail(ctx + ": " + e.what());
  }
  const uint64_t n = checked_nbytes(entry.shape, c10::elementSize(t), ctx);
  return n == 0 ? 1 : n;
}

void validate_offload_entry(const std::string& key, const OffloadIndexEntry& entry, const std::string& where) {
  const std::string ctx = "offload index entry " + show(key) + " in " + where;
  if (entry.is_safetensors()) {
    if (entry.safetensors_file->empty()) fail(ctx + ": \"safetensors_file\" is empty");
    if (entry.safetensors_file->find('\0') != std::string::npos)
      fail(ctx + ": \"safetensors_file\" contains a NUL byte");
    if (!entry.dtype.empty()) {
      try {
        torch_scalar_type(entry.dtype);
      } catch (const OffloadError& e) {
        fail(ctx + ": " + e.what());
      }
    }
    return;
  }
  check_dat_key(key, where);
  c10::ScalarType t;
  try {
    t = dat_scalar_type(entry.dtype);
  } catch (const OffloadError& e) {
    fail(ctx + ": " + e.what());
  }
  checked_nbytes(entry.shape, c10::elementSize(t), ctx);
}

// ---- writing -------------------------------------------------------------------------------

void offload_weight(const torch::Tensor& weight, const std::string& name, const fs::path& folder,
                    OffloadIndex& index) {
  const std::string ctx = "offload_weight(" + show(name) + ")";
  check_dat_key(name, ctx);
  if (!weight.defined()) fail(ctx + ": the tensor is undefined (None)");
  if (weight.is_meta())
    fail("Cannot copy out of meta tensor; no data! (" + ctx + ": a meta tensor has no values to "
         "write to " + folder.string() + ")");
  if (weight.layout() != c10::kStrided || weight.is_quantized() || weight.is_mkldnn())
    fail(ctx + ": only dense strided tensors can be offloaded");
  std::string dtype;
  try {
    dtype = offload_dtype_name(weight.scalar_type());
  } catch (const OffloadError& e) {
    fail(ctx + ": " + e.what());
  }
  torch::Tensor cpu;
  {
    torch::NoGradGuard no_grad;
    cpu = weight.detach().to(torch::kCPU).resolve_conj().resolve_neg().contiguous();
  }
  const uint64_t nbytes = static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
  static const char kZero = 0;
  const fs::path target = folder / (name + ".dat");
  if (nbytes == 0)
    write_file_atomic(target, &kZero, 1, "offloaded tensor " + show(name));  // as np.memmap does
  else
    write_file_atomic(target, cpu.data_ptr(), nbytes, "offloaded tensor " + show(name));
  OffloadIndexEntry e;
  e.dtype = std::move(dtype);
  e.shape = weight.sizes().vec();
  index.insert_or_assign(name, std::move(e));
}

void save_offload_index(const OffloadIndex& index, const fs::path& folder) {
  if (index.empty()) return;
  const fs::path file = offload_index_path(folder);
  ojson current = ojson::object();
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) {
    current = parse_json(read_small_file(file, kMaxIndexBytes, "offload index"), "offload index " + file.string());
    if (!current.is_object()) fail("offload index " + file.string() + " is not a JSON object; not merging into it");
  }
  for (const auto& [key, entry] : index) current[key] = entry_to_json(entry);
  const std::string text = current.dump(2, ' ', /*ensure_ascii=*/true);
  fsync_dir(folder);
  write_file_atomic(file, text.data(), text.size(), "offload index");
  fsync_dir(folder);
}

OffloadIndex offload_state_dict(const fs::path& folder, const NamedTensors& state_dict) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) fail("cannot create offload folder " + folder.string() + ": " + ec.message());
  OffloadIndex index;
  for (const auto& [name, tensor] : state_dict) offload_weight(tensor, name, folder, index);
  save_offload_index(index, folder);
  return index;
}

// ---- reading -------------------------------------------------------------------------------

fs::path offload_index_path(const fs::path& folder) { return folder / "index.json"; }

OffloadIndex read_offload_index(const fs::path& folder) {
  const fs::path file = offload_index_path(folder);
  const std::string where = "offload index " + file.string();
  ojson j = parse_json(read_small_file(file, kMaxIndexBytes, "offload index"), where);
  if (!j.is_object()) fail(where + " is not a JSON object");
  OffloadIndex index;
  for (const auto& [key, value] : j.items()) index.insert_or_assign(key, entry_from_json(key, value, where));
  return index;
}

torch::Tensor load_offloaded_weight(const fs::path& dat_file, const OffloadIndexEntry& entry) {
  const std::string what = "offload file";
  if (entry.is_safetensors())
    fail("load_offloaded_weight(" + dat_file.string() + "): the entry is safetensors-backed (" +
         *entry.safetensors_file + "), not a .dat entry");
  const std::string ctx = what + " " + dat_file.string();
  c10::ScalarType dtype;
  uint64_t want = 0;
  try {
    dtype = dat_scalar_type(entry.dtype);
    want = checked_nbytes(entry.shape, c10::elementSize(dtype), ctx);
  } catch (const OffloadError& e) {
    fail(ctx + ": invalid index entry: " + e.what());
  }
  const uint64_t file_bytes = want == 0 ? 1 : want;
  uint64_t have = 0;
  Fd fd = open_regular(dat_file, what, have);
  if (have != file_bytes)
    fail(ctx + " has " + std::to_string(have) + " bytes but its index entry (dtype " + entry.dtype +
         ", shape " + shape_str(entry.shape) + ") needs " + std::to_string(file_bytes) +
         " bytes (truncated, or not the file the index describes)");
  torch::Tensor t = torch::empty(c10::IntArrayRef(entry.shape), torch::TensorOptions().dtype(dtype));
  if (want == 0) return t;
  read_exact(fd.fd, t.data_ptr(), want, dat_file, what);
  if (dtype == c10::ScalarType::Bool) {
    const auto* b = static_cast<const uint8_t*>(t.data_ptr());
    for (uint64_t i = 0; i < want; ++i)
      if (b[i] > 1)
        fail(ctx + ": bool element " + std::to_string(i) + " is byte " + std::to_string(b[i]) + ", not 0 or 1");
  }
  return t;
}

void check_entry_matches(const std::string& key, const OffloadIndexEntry& entry,
                         const torch::Tensor& expected, const fs::path& folder) {
  std::unordered_map<std::string, std::shared_ptr<models::SafetensorsFile>> opened;
  SafetensorsOpener opener = [&](const std::string& f) {
    auto& slot = opened[f];
    if (!slot) slot = open_st(f, key);
    return slot;
  };
  compare_resolved(key, resolve_entry(key, entry, folder, opener), expected);
}

// ---- weight maps ---------------------------------------------------------------------------

std::optional<torch::Tensor> WeightsMap::get_or_none(const std::string& key) const {
  if (!contains(key)) return std::nullopt;
  return get(key);
}

StateDictMap::StateDictMap(NamedTensors tensors) {
  tensors_.reserve(tensors.size());
  for (auto& [name, t] : tensors) {
    auto it = pos_.find(name);
    if (it != pos_.end()) {
      tensors_[it->second].second = std::move(t);
    } else {
      pos_.emplace(name, tensors_.size());
      tensors_.emplace_back(name, std::move(t));
    }
  }
}

torch::Tensor StateDictMap::get(const std::string& key) const {
  auto it = pos_.find(key);
  if (it == pos_.end()) throw std::out_of_range("KeyError: " + show(key) + " is not in this weights map");
  return tensors_[it->second].second;
}

std::vector<std::string> StateDictMap::keys() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [k, t] : tensors_) out.push_back(k);
  return out;
}

OffloadedWeightsLoader::OffloadedWeightsLoader(std::optional<NamedTensors> state_dict,
                                               std::optional<fs::path> save_folder,
                                               std::optional<OffloadIndex> index,
                                               std::optional<torch::Device> device)
    : state_dict_(state_dict ? std::move(*state_dict) : NamedTensors{}),
      save_folder_(std::move(save_folder)),
      device_(device) {
  if (!state_dict && !save_folder_ && !index)
    fail("Need either a `state_dict`, a `save_folder` or an `index` containing offloaded weights.");
  if (index) {
    for (const auto& [k, e] : *index) validate_offload_entry(k, e, "the given offload index");
    index_ = std::move(*index);
  } else if (save_folder_) {
    index_ = read_offload_index(*save_folder_);
  }
  all_keys_ = state_dict_.keys();
  for (const auto& [k, e] : index_)
    if (!state_dict_.contains(k)) all_keys_.push_back(k);
}

OffloadedWeightsLoader::~OffloadedWeightsLoader() = default;

bool OffloadedWeightsLoader::contains(const std::string& key) const {
  return state_dict_.contains(key) || index_.contains(key);
}

std::shared_ptr<models::SafetensorsFile> OffloadedWeightsLoader::open_safetensors(const std::string& file) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto& slot = files_[file];
  if (!slot) {
    try {
      slot = models::SafetensorsFile::open(file);
    } catch (const models::LoadError& e) {
      files_.erase(file);
      fail(std::string("cannot open safetensors file of offloaded weights: ") + e.what());
    }
  }
  return slot;
}

torch::Tensor OffloadedWeightsLoader::get(const std::string& key) const {
  if (state_dict_.contains(key)) return state_dict_.get(key);
  const OffloadIndexEntry* entry = index_.find(key);
  if (!entry) throw std::out_of_range("KeyError: " + show(key) + " is not in the offloaded weights");
  if (!entry->is_safetensors()) {
    if (!save_folder_)
      fail("offloaded tensor " + show(key) +
           " is stored as a .dat file but the loader has no save_folder to find it in");
    return load_offloaded_weight(*save_folder_ / (key + ".dat"), *entry);
  }
  auto file = open_safetensors(*entry->safetensors_file);
  const std::string wn = entry->weight_name.value_or(key);
  torch::Tensor t;
  try {
    t = file->tensor(wn);  // zero-copy view of the mapping
  } catch (const models::LoadError& e) {
    fail("offloaded tensor " + show(key) + ": " + e.what());
  }
  torch::NoGradGuard no_grad;
  bool fresh = false;
  const torch::Device dev = device_.value_or(torch::Device(torch::kCPU));
  if (t.device() != dev) {  // upstream opens the file on `device`
    t = t.to(dev);
    fresh = true;
  }
  if (!entry->dtype.empty()) {
    const c10::ScalarType want = torch_scalar_type(entry->dtype);
    if (t.scalar_type() != want) {
      t = t.to(want);
      fresh = true;
    }
  }
  // Never hand out a view of the shared mapping: in-place changes would reach later loads.
  return fresh ? t : t.clone();
}

void OffloadedWeightsLoader::check_matches(const std::string& key, const torch::Tensor& expected) const {
  if (state_dict_.contains(key)) {
    torch::Tensor t = state_dict_.get(key);
    Resolved r{t.sizes().vec(), t.scalar_type(), "state dict"};
    compare_resolved(key, r, expected);
    return;
  }
  const OffloadIndexEntry* entry = index_.find(key);
  if (!entry) throw std::out_of_range("KeyError: " + show(key) + " is not in the offloaded weights");
  SafetensorsOpener opener = [this](const std::string& f) { return open_safetensors(f); };
  compare_resolved(key, resolve_entry(key, *entry, save_folder_, opener), expected);
}

PrefixedDataset::PrefixedDataset(std::shared_ptr<const WeightsMap> dataset, std::string prefix)
    : dataset_(std::move(dataset)), prefix_(std::move(prefix)) {
  if (!dataset_) throw std::invalid_argument("PrefixedDataset: the underlying dataset is null");
}

bool PrefixedDataset::contains(const std::string& key) const { return dataset_->contains(prefix_ + key); }

torch::Tensor PrefixedDataset::get(const std::string& key) const { return dataset_->get(prefix_ + key); }

std::vector<std::string> PrefixedDataset::keys() const {
  std::vector<std::string> out;
  for (auto& k : dataset_->keys())
    if (k.starts_with(prefix_)) out.push_back(std::move(k));
  return out;
}

NamedTensors extract_submodules_state_dict(const NamedTensors& state_dict,
                                           const std::vector<std::string>& submodule_names) {
  NamedTensors out;
  std::unordered_map<std::string, size_t> pos;
  for (const auto& module : submodule_names) {
    const std::string dotted = module + ".";
    for (const auto& [key, t] : state_dict) {
      if (key != module && !key.starts_with(dotted)) continue;
      auto it = pos.find(key);
      if (it != pos.end()) {
        out[it->second].second = t;  // dict.update: position kept, value replaced
      } else {
        pos.emplace(key, out.size());
        out.emplace_back(key, t);
      }
    }
  }
  return out;
}

}  // namespace hs::hooks
