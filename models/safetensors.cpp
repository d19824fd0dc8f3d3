// safetensors reader; see safetensors.h for the format and the rules enforced.
#include "models/safetensors.h"

#include "models/regular_file.h"
#include "storage/bounded_json.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/TensorOptions.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace hs::models {

namespace {

/// upstream MAX_HEADER_SIZE; also the cap on model.safetensors.index.json.
constexpr uint64_t kMaxHeaderSize = 100'000'000;
/// A header's or index's JSON: nested at most 16 levels (the format needs 3: root, entry, shape),
/// no string longer than 1 MiB (names, dtypes and __metadata__ values are short).
constexpr storage::JsonLimits kJsonLimits{
    .max_depth = 16, .max_bytes = kMaxHeaderSize, .max_string_bytes = size_t{1} << 20};
/// The longest tensor name, key or value quoted in a message, and the most dims of a shape.
constexpr size_t kMaxShown = 200, kMaxShownDims = 8;

// ---- message helpers -------------------------------------------------------------------------

/// Renders untrusted text (tensor names, keys) for an error message: control bytes escaped, cut
/// after `max` bytes ("...").
std::string show(std::string_view s, size_t max = kMaxShown) {
  const bool cut = s.size() > max;
  if (cut) s = s.substr(0, max);
  std::string out;
  out.reserve(s.size() + 3);
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return cut ? out + "..." : out;
}

/// A path as given (not cut: the caller chose it).
std::string show_path(const fs::path& p) {
  return show(std::string_view(p.string()), std::numeric_limits<size_t>::max());
}

/// "[2, 3]"; a shape of more than kMaxShownDims dims shows its first ones: "[1, 1, ..., 1, ...]
/// (100000 dims)".
std::string show_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size() && i < kMaxShownDims; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() > kMaxShownDims) return s + ", ...] (" + std::to_string(shape.size()) + " dims)";
  return s + "]";
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream ss;
  (ss << ... << args);
  throw LoadError(ss.str());
}

// ---- dtypes ----------------------------------------------------------------------------------

struct DtypeDesc {
  std::string_view name;
  uint64_t bits;
  bool loadable;
  c10::ScalarType scalar;  // meaningful only when loadable
};

// Every dtype of upstream `enum Dtype`, in its (alignment) order.
constexpr std::array<DtypeDesc, 22> kDtypes{{
    {"BOOL", 8, true, c10::ScalarType::Bool},
    {"F4", 4, false, c10::ScalarType::Undefined},
    {"F6_E2M3", 6, false, c10::ScalarType::Undefined},
    {"F6_E3M2", 6, false, c10::ScalarType::Undefined},
    {"U8", 8, true, c10::ScalarType::Byte},
    {"I8", 8, true, c10::ScalarType::Char},
    {"F8_E5M2", 8, false, c10::ScalarType::Undefined},
    {"F8_E4M3", 8, false, c10::ScalarType::Undefined},
    {"F8_E8M0", 8, false, c10::ScalarType::Undefined},
    {"F8_E4M3FNUZ", 8, false, c10::ScalarType::Undefined},
    {"F8_E5M2FNUZ", 8, false, c10::ScalarType::Undefined},
    {"I16", 16, true, c10::ScalarType::Short},
    {"U16", 16, false, c10::ScalarType::Undefined},
    {"F16", 16, true, c10::ScalarType::Half},
    {"BF16", 16, true, c10::ScalarType::BFloat16},
    {"I32", 32, true, c10::ScalarType::Int},
    {"U32", 32, false, c10::ScalarType::Undefined},
    {"F32", 32, true, c10::ScalarType::Float},
    {"C64", 64, false, c10::ScalarType::Undefined},
    {"F64", 64, true, c10::ScalarType::Double},
    {"I64", 64, true, c10::ScalarType::Long},
    {"U64", 64, false, c10::ScalarType::Undefined},
}};

constexpr std::string_view kSupported = "F32, BF16, F16, F64, I64, I32, I16, I8, U8, BOOL";

const DtypeDesc* lookup_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

std::string all_dtype_names() {
  std::string s;
  for (const auto& d : kDtypes) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

const DtypeDesc& require_dtype(const std::string& dtype, const std::string& context) {
  const DtypeDesc* d = lookup_dtype(dtype);
  if (!d)
    fail("unknown dtype ", show(dtype), context.empty() ? "" : " of ", context,
         " (the safetensors format defines: ", all_dtype_names(), ")");
  return *d;
}

// ---- checked arithmetic ----------------------------------------------------------------------

bool mul_overflows(uint64_t a, uint64_t b, uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

// ---- UTF-8 (strict, as Rust's str::from_utf8) ------------------------------------------------

/// Returns the offset of the first invalid byte, or npos if `s` is valid UTF-8.
size_t invalid_utf8_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  auto cont = [&](size_t k) { return k < n && (p[k] & 0xC0) == 0x80; };
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
    } else if (c >= 0xC2 && c <= 0xDF) {
      if (!cont(i + 1)) return i;
      i += 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      if (i + 1 >= n) return i;
      unsigned char c1 = p[i + 1];
      bool ok = (c == 0xE0)   ? (c1 >= 0xA0 && c1 <= 0xBF)
                : (c == 0xED) ? (c1 >= 0x80 && c1 <= 0x9F)  // no surrogates
                              : (c1 >= 0x80 && c1 <= 0xBF);
      if (!ok || !cont(i + 2)) return i;
      i += 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      if (i + 1 >= n) return i;
      unsigned char c1 = p[i + 1];
      bool ok = (c == 0xF0)   ? (c1 >= 0x90 && c1 <= 0xBF)
                : (c == 0xF4) ? (c1 >= 0x80 && c1 <= 0x8F)  // <= U+10FFFF
                              : (c1 >= 0x80 && c1 <= 0xBF);
      if (!ok || !cont(i + 2) || !cont(i + 3)) return i;
      i += 4;
    } else {
      return i;
    }
  }
  return std::string_view::npos;
}

// ---- JSON with duplicate-key detection -------------------------------------------------------

/// SAX pass over a JSON text (its nesting already bounded) that refuses duplicate keys at any
/// level; builds nothing. Linear in the text (one hash set per open object).
class StrictJsonCheck {
 public:
  StrictJsonCheck(std::string_view text, const std::string& what) : text_(text), what_(what) {}
  std::string error;  ///< set when a check failed (the parse then stops)

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) {
    ++depth_;
    frames_.push_back(Frame{{}, frames_.empty() ? std::string() : last_key_});
    return true;
  }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) {
      error = "duplicate key \"" + show(k) + "\"";
      if (frames_.size() > 1) error += " inside \"" + show(f.parent_key) + "\"";
      error += " in " + what_ + " (duplicate keys are not allowed)";
      return false;
    }
    last_key_ = k;
    return true;
  }
  bool end_object() {
    frames_.pop_back();
    --depth_;
    return value();
  }
  bool start_array(std::size_t) {
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return value();
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e) {
    error = what_ + " is not valid JSON " +
            storage::describe_json_error(text_, storage::json_syntax_error(text_, position, last_token, e, complete_));
    return false;
  }

 private:
  struct Frame {
    std::unordered_set<std::string> keys;
    std::string parent_key;
  };
  bool value() {
    if (depth_ == 0) complete_ = true;  // a whole value read: what follows is named as such
    return true;
  }
  std::string_view text_;
  std::string what_;
  std::vector<Frame> frames_;
  std::string last_key_;
  int depth_ = 0;
  bool complete_ = false;
};

/// Parses `text` (already known to be UTF-8 without NUL bytes) into a DOM, refusing nesting and
/// strings past kJsonLimits and duplicate keys at any level. `what` names the text in messages
/// ("header of FILE"). Three linear passes: the bounds (storage/bounded_json.h, before nlohmann
/// sees the text), the checks (SAX), then the plain DOM parse (nlohmann's callback parser would
/// do both at once, but scans each object's members again at every member's end: quadratic in the
/// number of tensors).
json parse_json_strict(std::string_view text, const std::string& what) {
  try {
    storage::check_json_bounds(text, what, kJsonLimits);
  } catch (const storage::JsonError& e) {
    throw LoadError(e.what());
  }
  StrictJsonCheck check(text, what);
  if (!json::sax_parse(text.begin(), text.end(), &check, json::input_format_t::json, /*strict=*/true,
                       /*ignore_comments=*/false))
    throw LoadError(check.error.empty() ? what + " is not valid JSON" : check.error);
  try {
    return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception&) {  // not expected after the SAX pass; worded as it would be
    const std::optional<storage::JsonSyntaxError> e = storage::find_json_syntax_error(text);
    fail(what, " is not valid JSON", e ? " " + storage::describe_json_error(text, *e) : std::string());
  }
}

/// Where the JSON object at the start of `text` ends (the offset after its closing brace), found
/// by matching braces outside strings; npos when `text` does not start with '{' or the object
/// does not close within it.
size_t json_object_end(std::string_view text) {
  if (text.empty() || text.front() != '{') return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

/// Reads a JSON number that must be a non-negative integer; returns false otherwise.
bool as_u64(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    out = static_cast<uint64_t>(s);
    return true;
  }
  return false;
}

std::string describe_json(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return show(s);
}

// ---- files -----------------------------------------------------------------------------------

/// A RegularFileError as this reader words it: "cannot open ROLE PATH: REASON", "ROLE PATH is
/// not a regular file", "ROLE PATH is N bytes, more than the limit of M".
[[noreturn]] void fail_file(const RegularFileError& e, const std::string& role, const fs::path& path) {
  using Kind = RegularFileError::Kind;
  if (e.kind == Kind::NotRegular) fail(role, show_path(path), " is not a regular file");
  if (e.kind == Kind::TooLarge) fail(role, show_path(path), " is ", e.reason);
  const size_t colon = e.reason.find(':');  // "cannot open: REASON", "cannot read: REASON"
  fail(e.reason.substr(0, colon), " ", role, show_path(path), e.reason.substr(colon));
}

/// Opens a regular file read-only without blocking on FIFOs or devices; returns fd and size.
UniqueFd open_regular(const fs::path& path, const std::string& role, uint64_t& size) {
  try {
    return open_regular_file(path, size);
  } catch (const RegularFileError& e) {
    fail_file(e, role, path);
  }
}

std::string read_small_file(const fs::path& path, const std::string& role, uint64_t cap) {
  try {
    return read_regular_file(path, cap);
  } catch (const RegularFileError& e) {
    fail_file(e, role, path);
  }
}

}  // namespace

// ---- public dtype functions ------------------------------------------------------------------

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);  // validated not to overflow
  return n;
}

uint64_t dtype_bits(const std::string& dtype, const std::string& context) {
  return require_dtype(dtype, context).bits;
}

uint64_t dtype_element_size(const std::string& dtype, const std::string& context) {
  const DtypeDesc& d = require_dtype(dtype, context);
  if (d.bits % 8 != 0)
    fail("dtype ", d.name, context.empty() ? "" : " of ", context, " is a sub-byte type (", d.bits,
         " bits per element); use dtype_bits()");
  return d.bits / 8;
}

c10::ScalarType scalar_type_of(const std::string& dtype, const std::string& tensor,
                               const fs::path& file) {
  std::string context;
  if (!tensor.empty()) context = "tensor " + show(tensor);
  if (!file.empty()) context += (context.empty() ? "" : " ") + std::string("in ") + show_path(file);
  const DtypeDesc& d = require_dtype(dtype, context);
  if (!d.loadable)
    fail("dtype ", d.name, context.empty() ? "" : " of ", context,
         " is not supported (supported: ", kSupported, ")");
  return d.scalar;
}

// ---- SafetensorsFile -------------------------------------------------------------------------

namespace {

// The header's text (`n` bytes after the length field) checked and parsed: UTF-8, no NUL, a
// JSON object. A length field larger than the JSON is named as such.
json parse_header(std::string_view header, uint64_t n, const std::string& file) {
  // A length field larger than the JSON makes the header run into the tensor data: say so,
  // rather than what the data bytes look like.
  auto past_json = [&](size_t at, const std::string& what_follows) {
    const size_t end = json_object_end(header.substr(0, at));
    if (end != std::string_view::npos)
      fail("header length ", n, " of ", file, " runs past its JSON header, which ends at header byte ", end,
           " (", what_follows, "): the length field is wrong or the header was cut");
  };
  if (size_t bad = invalid_utf8_at(header); bad != std::string_view::npos) {
    past_json(bad, "bytes that are not UTF-8 follow at header byte " + std::to_string(bad));
    fail("header of ", file, " is not valid UTF-8 (at header byte ", bad, ")");
  }
  // nlohmann treats a NUL byte as the end of input and would ignore what follows; JSON never
  // holds a raw NUL (not even inside strings), so refuse it outright.
  if (size_t nul = header.find('\0'); nul != std::string_view::npos) {
    past_json(nul, "a NUL byte at header byte " + std::to_string(nul) + " follows");
    fail("header of ", file, " contains a NUL byte at header byte ", nul, " (not valid JSON)");
  }
  if (header.empty() || header.front() != '{')
    fail("header of ", file, " does not start with '{' (a safetensors header is a JSON object)");
  const std::string what = "header of " + file;
  json root = parse_json_strict(header, what);
  if (!root.is_object()) fail(what, " is not a JSON object");
  return root;

}

// One tensor's entry of the header: dtype, shape and data_offsets checked against each other
// and against the data section (`data_size` bytes).
TensorInfo parse_tensor_entry(const std::string& name, const json& v, const std::string& file, uint64_t data_size) {
  const std::string t = "tensor " + show(name) + " in " + file;
  if (!v.is_object()) fail(t, ": entry must be a JSON object, got ", describe_json(v));

  TensorInfo info;
  info.name = name;

  // dtype
  auto dt = v.find("dtype");
  if (dt == v.end()) fail(t, ": missing field \"dtype\"");
  if (!dt->is_string()) fail(t, ": field \"dtype\" must be a string, got ", describe_json(*dt));
  info.dtype = dt->get<std::string>();
  const uint64_t bits = require_dtype(info.dtype, t).bits;

  // shape
  auto sh = v.find("shape");
  if (sh == v.end()) fail(t, ": missing field \"shape\"");
  if (!sh->is_array())
    fail(t, ": field \"shape\" must be an array of non-negative integers, got ",
         describe_json(*sh));
  uint64_t numel = 1, nonzero_numel = 1;
  for (size_t i = 0; i < sh->size(); ++i) {
    uint64_t d = 0;
    if (!as_u64((*sh)[i], d))
      fail(t, ": shape element ", i, " must be a non-negative integer, got ",
           describe_json((*sh)[i]));
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(t, ": shape element ", i, " (", d, ") is too large");
    info.shape.push_back(static_cast<int64_t>(d));
    if (mul_overflows(numel, d, numel))
      fail(t, ": the element count of shape ", describe_json(*sh), " overflows");
    // Also bound the product of the non-zero dims, so that even an empty tensor has strides
    // that fit in int64 (stricter than upstream only for absurd shapes).
    if (d != 0 && (mul_overflows(nonzero_numel, d, nonzero_numel) ||
                   nonzero_numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail(t, ": the element count of shape ", describe_json(*sh), " overflows");
  }

  // data_offsets
  auto off = v.find("data_offsets");
  if (off == v.end()) fail(t, ": missing field \"data_offsets\"");
  if (!off->is_array() || off->size() != 2 || !as_u64((*off)[0], info.begin) ||
      !as_u64((*off)[1], info.end))
    fail(t, ": field \"data_offsets\" must be [BEGIN, END] with non-negative integers, got ",
         describe_json(*off));
  if (info.begin > info.end)
    fail(t, ": data_offsets [", info.begin, ", ", info.end, "] have BEGIN > END");
  if (info.end > data_size)
    fail(t, ": data_offsets [", info.begin, ", ", info.end,
         "] run past the end of the data section (", data_size, " bytes)");

  // byte count
  uint64_t nbits = 0;
  if (mul_overflows(numel, bits, nbits))
    fail(t, ": the byte count of shape ", show_shape(info.shape), " dtype ", info.dtype,
         " overflows");
  if (nbits % 8 != 0)
    fail(t, ": shape ", show_shape(info.shape), " dtype ", info.dtype, " needs ", nbits,
         " bits, not a whole number of bytes");
  if (nbits / 8 != info.nbytes())
    fail(t, ": shape ", show_shape(info.shape), " dtype ", info.dtype, " needs ", nbits / 8,
         " bytes but data_offsets cover ", info.nbytes());

  return info;
}

// The tensors, sorted by offset, must tile the data section: no overlaps, no holes, no
// trailing bytes.
void check_tiling(std::vector<TensorInfo>& ts, const std::string& file, uint64_t data_size) {
  std::sort(ts.begin(), ts.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t pos = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& cur : ts) {
    if (cur.begin < pos)
      fail("tensors ", show(prev->name), " and ", show(cur.name), " overlap in ", file, " (",
           show(prev->name), ": data_offsets [", prev->begin, ", ", prev->end, "], ",
           show(cur.name), ": [", cur.begin, ", ", cur.end, "])");
    if (cur.begin > pos)
      fail("bytes [", pos, ", ", cur.begin, ") of the data section of ", file,
           " are not covered by any tensor (a hole ",
           prev ? "between " + show(prev->name) + " and " : std::string("before "), show(cur.name),
           "); safetensors data must be contiguous");
    pos = cur.end;
    prev = &cur;
  }
  if (pos != data_size)
    fail(file, " has ", data_size, " bytes of tensor data but its tensors end at byte ", pos,
         ": ", data_size - pos, " trailing bytes are not covered by any tensor (incomplete metadata)");

}

}  // namespace

struct SafetensorsFile::Mapping {
  void* base = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base) ::munmap(base, size);
  }
  const unsigned char* bytes() const { return static_cast<const unsigned char*>(base); }
};

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  const std::string file = show_path(path);
  std::shared_ptr<SafetensorsFile> self(new SafetensorsFile());
  self->path_ = path;

  // -- map -----------------------------------------------------------------------------------
  uint64_t size = 0;
  {
    const UniqueFd fd = open_regular(path, "safetensors file ", size);
    if (size < 8)
      fail("safetensors file ", file, " is too short (", size,
           " bytes): it must start with an 8-byte header length");
    if (size > std::numeric_limits<size_t>::max()) fail(file, " is too large to map");
    void* base = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_NORESERVE, fd.fd, 0);
    if (base == MAP_FAILED) fail("cannot map ", file, ": ", std::strerror(errno));
    self->mapping_ = std::make_shared<Mapping>();
    self->mapping_->base = base;
    self->mapping_->size = static_cast<size_t>(size);
  }  // fd closed; the mapping stays valid
  self->file_size_ = size;
  const unsigned char* bytes = self->mapping_->bytes();

  // -- header length -------------------------------------------------------------------------
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian u64
  if (n > kMaxHeaderSize)
    fail("header length ", n, " of ", file, " exceeds the safetensors limit of ", kMaxHeaderSize,
         " bytes");
  if (n > size - 8)
    fail("header length ", n, " runs past the end of ", file, " (size ", size, ")");
  self->header_size_ = n;
  const uint64_t data_size = size - 8 - n;
  std::string_view header(reinterpret_cast<const char*>(bytes + 8), static_cast<size_t>(n));

  const json root = parse_header(header, n, file);
  const std::string what = "header of " + file;

  // -- entries -------------------------------------------------------------------------------
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object())
        fail("__metadata__ in ", what, " must be an object of strings, got ", describe_json(v));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail("__metadata__ entry \"", show(m.key()), "\" in ", what,
               " must be a string, got ", describe_json(m.value()));
        self->metadata_.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    self->tensors_.push_back(parse_tensor_entry(name, v, file, data_size));
  }

  check_tiling(self->tensors_, file, data_size);

  for (size_t i = 0; i < self->tensors_.size(); ++i) self->index_.emplace(self->tensors_[i].name, i);
  return self;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo* info = find(name);
  if (!info) fail("no tensor ", show(name), " in ", show_path(path_));
  const c10::ScalarType st = scalar_type_of(info->dtype, name, path_);
  const auto options = at::TensorOptions().dtype(st).device(c10::kCPU);
  if (info->nbytes() == 0) return at::empty(info->shape, options);

  unsigned char* ptr = static_cast<unsigned char*>(mapping_->base) + 8 + header_size_ + info->begin;
  if (st == c10::ScalarType::Bool) {
    for (uint64_t i = 0; i < info->nbytes(); ++i)
      if (ptr[i] > 1)
        fail("tensor ", show(name), " in ", show_path(path_), ": BOOL element ", i, " is byte ",
             static_cast<int>(ptr[i]), ", not 0 or 1");
  }
  const size_t itemsize = c10::elementSize(st);
  if (reinterpret_cast<uintptr_t>(ptr) % itemsize != 0) {
    at::Tensor out = at::empty(info->shape, options);
    std::memcpy(out.data_ptr(), ptr, static_cast<size_t>(info->nbytes()));
    return out;
  }
  std::shared_ptr<Mapping> keep = mapping_;
  return at::from_blob(
      ptr, info->shape, [keep](void*) mutable { keep.reset(); }, options);
}

// ---- Checkpoint ------------------------------------------------------------------------------

namespace {

bool is_pickle_name(const std::string& n) {
  auto ends = [&](std::string_view suf) {
    return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
  };
  return n == "pytorch_model.bin.index.json" || ends(".bin") || ends(".pt") || ends(".pth") ||
         ends(".ckpt");
}

// POSIX calls rather than std::filesystem::status & co: the PyPI libtorch.so exports its own
// (GCC 13) copies of those functions, which interpose on the system libstdc++'s.
bool present(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;  // a dangling symlink counts: opening it then fails clearly
}

bool regular_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Checkpoint Checkpoint::open_dir(const fs::path& dir) {
  const std::string d = show_path(dir);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) fail("checkpoint folder ", d, " does not exist");
    fail("cannot access checkpoint folder ", d, ": ", std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) fail("checkpoint path ", d, " is not a folder");

  Checkpoint ck;
  ck.dir_ = dir;

  const fs::path index_path = dir / "model.safetensors.index.json";
  const fs::path single_path = dir / "model.safetensors";
  // transformers' from_pretrained takes model.safetensors when it is a file (os.path.isfile,
  // links followed), and only otherwise the index: so do we, whatever the shards hold.
  if (regular_file(single_path)) {
    ck.files_.push_back(SafetensorsFile::open(single_path));
    for (const TensorInfo& t : ck.files_[0]->tensors()) ck.entries_.emplace(t.name, Entry{0, &t});
    return ck;
  }
  if (present(index_path)) {
    const std::string idx = show_path(index_path);
    std::string text = read_small_file(index_path, "index ", kMaxHeaderSize);
    if (size_t bad = invalid_utf8_at(text); bad != std::string_view::npos)
      fail("index ", idx, " is not valid UTF-8 (at byte ", bad, ")");
    if (size_t nul = text.find('\0'); nul != std::string::npos)
      fail("index ", idx, " contains a NUL byte at byte ", nul, " (not valid JSON)");
    json root = parse_json_strict(text, "index " + idx);
    if (!root.is_object()) fail("index ", idx, " is not a JSON object");
    if (auto m = root.find("metadata"); m != root.end() && !m->is_null() && !m->is_object())
      fail("field \"metadata\" of index ", idx, " must be an object, got ", describe_json(*m));
    auto wm = root.find("weight_map");
    if (wm == root.end()) fail("index ", idx, " has no \"weight_map\"");
    if (!wm->is_object())
      fail("field \"weight_map\" of index ", idx, " must be an object, got ", describe_json(*wm));

    std::map<std::string, size_t> shard_index;  // shard file name -> files_ index
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      const std::string& name = it.key();
      const std::string where = "weight_map entry \"" + show(name) + "\" of index " + idx;
      if (!it.value().is_string())
        fail(where, " must be a shard file name (a string), got ", describe_json(it.value()));
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard == "." || shard == ".." ||
          shard.find('/') != std::string::npos || shard.find('\0') != std::string::npos)
        fail(where, " names shard \"", show(shard),
             "\", which is not a plain file name inside the checkpoint folder");
      auto [sit, inserted] = shard_index.emplace(shard, ck.files_.size());
      if (inserted) {
        try {
          ck.files_.push_back(SafetensorsFile::open(dir / shard));
        } catch (const LoadError& e) {
          fail(e.what(), " (shard listed in ", idx, ")");
        }
      }
      const auto& file = ck.files_[sit->second];
      const TensorInfo* info = file->find(name);
      if (!info)
        fail("index ", idx, " maps tensor ", show(name), " to shard ", show_path(file->path()),
             ", but that shard has no tensor ", show(name));
      ck.entries_.emplace(name, Entry{sit->second, info});
    }
    return ck;
  }

  if (present(single_path)) {
    ck.files_.push_back(SafetensorsFile::open(single_path));
    for (const TensorInfo& t : ck.files_[0]->tensors()) ck.entries_.emplace(t.name, Entry{0, &t});
    return ck;
  }

  // No safetensors: look (by name only, never opening anything) for pickle checkpoints.
  std::vector<std::string> pickles;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (is_pickle_name(it->path().filename().string()))
      pickles.push_back(it->path().filename().string());
  if (ec) fail("cannot list checkpoint folder ", d, ": ", ec.message());
  if (!pickles.empty()) {
    std::sort(pickles.begin(), pickles.end());
    std::string pick = pickles.front();
    for (const char* pref : {"pytorch_model.bin.index.json", "pytorch_model.bin"})
      if (std::find(pickles.begin(), pickles.end(), pref) != pickles.end()) {
        pick = pref;
        break;
      }
    fail("refusing to load pickle checkpoint ", show_path(dir / pick),
         ": pickle files can execute code; convert it to safetensors (only if you trust the "
         "files: python -c \"import transformers as t; t.AutoModelForCausalLM.from_pretrained('",
         d, "').save_pretrained('", d, "-safetensors')\"), or download the model's "
         ".safetensors files instead");
  }
  fail("no model.safetensors or model.safetensors.index.json in ", d);
}

const Checkpoint::Entry& Checkpoint::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    fail("tensor ", show(name), " not found in checkpoint ", show_path(dir_), " (", entries_.size(),
         " tensors)");
  return it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

bool Checkpoint::contains(const std::string& name) const { return entries_.count(name) != 0; }

const TensorInfo& Checkpoint::info(const std::string& name) const { return *entry(name).info; }

at::Tensor Checkpoint::get(const std::string& name) const {
  return files_[entry(name).file]->tensor(name);
}

fs::path Checkpoint::file_of(const std::string& name) const {
  return files_[entry(name).file]->path();
}

}  // namespace hs::models
