// max_memory (device_map.h): accelerate's size strings, `get_max_memory` in both forms, the
// command line's `--max-memory` syntax, and the JSON forms of device maps, budgets and sizes.
#include "hooks/device_map.h"

#include <ATen/DeviceAccelerator.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "hooks/device_map_detail.h"

namespace hs::hooks {

using detail::emit;
using detail::floor_div;
using detail::map_set;
using detail::mps_device;
using detail::py_repr;

namespace {

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string unrecognized_device(const std::string& key) {
  return "Device " + key +
         " is not recognized, available devices are integers(for GPU/XPU), 'mps', 'cpu' and 'disk'";
}

/// Python `float(s)` syntax: surrounding whitespace, sign, digits with single underscores
/// between digits, optional fraction and exponent, or inf/infinity/nan. No hex floats.
std::optional<double> parse_python_float(const std::string& raw) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = raw.find_first_not_of(ws);
  if (b == std::string::npos) return std::nullopt;
  const size_t e = raw.find_last_not_of(ws);
  std::string s = raw.substr(b, e - b + 1);
  size_t i = 0;
  std::string clean;
  if (s[i] == '+' || s[i] == '-') clean += s[i++];
  std::string rest = s.substr(i);
  std::string lower;
  for (char c : rest) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "inf" || lower == "infinity")
    return clean == "-" ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  if (lower == "nan") return std::numeric_limits<double>::quiet_NaN();
  auto digitpart = [&](size_t& k) {  // digit (["_"] digit)*
    if (k >= s.size() || !std::isdigit(static_cast<unsigned char>(s[k]))) return false;
    clean += s[k++];
    while (k < s.size()) {
      if (std::isdigit(static_cast<unsigned char>(s[k]))) {
        clean += s[k++];
      } else if (s[k] == '_' && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
        ++k;
      } else {
        break;
      }
    }
    return true;
  };
  const bool int_part = digitpart(i);
  bool frac_part = false;
  if (i < s.size() && s[i] == '.') {
    clean += s[i++];
    frac_part = digitpart(i);
  }
  if (!int_part && !frac_part) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    clean += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
    if (!digitpart(i)) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  errno = 0;
  return std::strtod(clean.c_str(), nullptr);  // overflow gives ±inf, as Python does
}

int64_t read_mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (f >> key >> value) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return value * 1024;
  }
  throw std::runtime_error("get_max_memory: cannot read MemAvailable from /proc/meminfo");
}

std::optional<int64_t> default_accelerator_free_memory(int index) {
  const DeviceManager& dm = Runtime::current().devices();
  if (index < 0 || index >= dm.num_accelerators()) return std::nullopt;
  const AcceleratorInfo& a = dm.accelerators()[index];
  if (a.emulated && a.total_memory > 0) return a.total_memory;
  if (a.backing.is_cpu()) return read_mem_available();
  // A tiny allocation initialises the device, as accelerate does before mem_get_info.
  (void)torch::zeros({1}, torch::TensorOptions().device(a.backing));
  return static_cast<int64_t>(at::accelerator::getMemoryInfo(a.backing.index()).first);
}

int resolve_num_accelerators(int n) { return n >= 0 ? n : Runtime::current().devices().num_accelerators(); }

std::string py_range_list(int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(i);
  return out + "]";
}

/// Shared by both get_max_memory forms once keys are classified. `unknown` is the first
/// unrecognised key (accelerate raises for it after the range warnings).
MaxMemory normalise(const std::vector<std::pair<DeviceId, int64_t>>& known, const std::optional<std::string>& unknown,
                    int num_accelerators, const LogFn& log) {
  std::vector<int> gpus;
  std::optional<int64_t> mps, cpu, disk;
  std::map<int, int64_t> gpu_values;
  for (const auto& [d, v] : known) {
    switch (d.kind) {
      case DeviceId::Kind::Accelerator:
        if (!gpu_values.count(d.index)) gpus.push_back(d.index);
        gpu_values[d.index] = v;
        break;
      case DeviceId::Kind::Mps: mps = v; break;
      case DeviceId::Kind::Cpu: cpu = v; break;
      case DeviceId::Kind::Disk: disk = v; break;
      case DeviceId::Kind::Meta: break;  // filtered by the callers
    }
  }
  std::sort(gpus.begin(), gpus.end());
  const int n = resolve_num_accelerators(num_accelerators);
  for (int g : gpus)
    if (g >= n || g < 0)
      emit(log, "WARNING",
           "Device " + std::to_string(g) + " is not available, available devices are " + py_range_list(n));
  if (unknown) throw std::invalid_argument(unrecognized_device(*unknown));
  MaxMemory out;
  for (int g : gpus) out.emplace_back(DeviceId::accelerator(g), gpu_values[g]);
  if (mps) out.emplace_back(mps_device(), *mps);
  if (cpu) out.emplace_back(DeviceId::cpu(), *cpu);
  if (disk) out.emplace_back(DeviceId::disk(), *disk);
  return out;
}

/// A max_memory key from JSON or the command line: an int index, or "mps"/"cpu"/"disk".
std::optional<DeviceId> max_memory_key(const std::string& k) {
  if (k == "mps") return mps_device();
  if (k == "cpu") return DeviceId::cpu();
  if (k == "disk") return DeviceId::disk();
  std::string digits = k.size() > 1 && k[0] == '-' ? k.substr(1) : k;
  if (!digits.empty() && digits.size() <= 7 &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return DeviceId::accelerator(std::stoi(k));
  return std::nullopt;
}

int64_t json_bytes(const nlohmann::json& v, const std::string& key) {
  if (v.is_string()) return convert_file_size_to_int(v.get<std::string>());
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > 9.0e18)
      throw std::invalid_argument("max_memory[" + key + "]: " + v.dump() + " is not a usable number of bytes");
    return static_cast<int64_t>(std::floor(d));
  }
  throw std::invalid_argument("max_memory[" + key + "]: " + v.dump() +
                              " is not a size (expected integer bytes or a string such as \"5GB\")");
}

template <typename Json>
DeviceMap device_map_from_json_impl(const Json& j) {
  DeviceMap out;
  auto add = [&](const std::string& k, const Json& v) {
    map_set(out, k, DeviceId::from_json(nlohmann::json::parse(v.dump()), "device_map[" + py_repr(k) + "]"));
  };
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) add(it.key(), it.value());
  } else if (j.is_array()) {
    for (const auto& p : j) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_string())
        throw std::invalid_argument("device_map: expected [name, device] pairs, got " + p.dump());
      add(p[0].template get<std::string>(), p[1]);
    }
  } else {
    throw std::invalid_argument("device_map: expected an object or an array of [name, device] pairs, got " + j.dump());
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------ units

int64_t convert_file_size_to_int(const std::string& size) {
  const std::string err =
      "`size` " + size + " is not in a valid format. Use an integer for bytes, or a string with an unit (like '5.0GB').";
  std::string upper;
  for (char c : size) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto convert = [&](size_t suffix, double multiplier, bool bits_quirk) -> int64_t {
    auto f = parse_python_float(size.substr(0, size.size() - suffix));
    if (!f) throw std::invalid_argument(err);
    const double v = std::trunc(*f * multiplier);
    if (std::isnan(v)) throw std::invalid_argument(err);  // Python: ValueError
    // inf (Python: OverflowError) and values beyond int64 (Python: a big int): too large here.
    if (v >= 9.2233720368547758e18)
      throw std::invalid_argument("`size` " + size + " is too large: at most 9223372036854775807 bytes (8 EiB)");
    if (v < -9.2233720368547758e18) throw std::invalid_argument(err);
    int64_t r = static_cast<int64_t>(v);
    if (bits_quirk && size.back() == 'b') r = floor_div(r, 8);
    if (r < 0) throw std::invalid_argument(err);
    return r;
  };
  if (ends_with(upper, "GIB")) return convert(3, 1073741824.0, false);
  if (ends_with(upper, "MIB")) return convert(3, 1048576.0, false);
  if (ends_with(upper, "KIB")) return convert(3, 1024.0, false);
  if (ends_with(upper, "GB")) return convert(2, 1e9, true);
  if (ends_with(upper, "MB")) return convert(2, 1e6, true);
  if (ends_with(upper, "KB")) return convert(2, 1e3, true);
  throw std::invalid_argument(err);
}

MaxMemory parse_max_memory(const std::string& spec) {
  auto trim = [](const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
  };
  if (trim(spec).empty())
    throw std::invalid_argument("max_memory: empty; expected entries such as \"0=1GiB,1=1GiB,cpu=4GiB\"");
  MaxMemory out;
  std::stringstream ss(spec);
  std::string raw;
  std::vector<std::string> entries;
  while (std::getline(ss, raw, ',')) entries.push_back(raw);
  if (!spec.empty() && spec.back() == ',') entries.push_back("");
  for (const auto& r : entries) {
    const std::string entry = trim(r);
    const std::string where = "max_memory entry '" + entry + "': ";
    if (entry.empty())
      throw std::invalid_argument("max_memory: empty entry in '" + spec +
                                  "'; expected comma-separated device=size entries such as \"0=1GiB,cpu=4GiB\"");
    const size_t eq = entry.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument(where + "expected device=size, e.g. \"0=1GiB\" or \"cpu=4GiB\"");
    const std::string key = trim(entry.substr(0, eq));
    const std::string value = trim(entry.substr(eq + 1));
    auto dev = max_memory_key(key);
    if (!dev) throw std::invalid_argument(where + unrecognized_device(key));
    for (const auto& [d, v] : out)
      if (d == *dev) throw std::invalid_argument(where + "device " + d.str() + " is given twice");
    int64_t bytes = 0;
    if (!value.empty() && std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      errno = 0;
      const long long v = std::strtoll(value.c_str(), nullptr, 10);
      if (errno == ERANGE) throw std::invalid_argument(where + "size " + value + " is too large: at most 9223372036854775807 bytes (8 EiB)");
      bytes = v;
    } else {
      try {
        bytes = convert_file_size_to_int(value);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(where + e.what());
      }
    }
    out.emplace_back(*dev, bytes);
  }
  return out;
}

MaxMemory get_max_memory(const std::optional<MaxMemory>& max_memory, int num_accelerators, const LogFn& log,
                         const MemoryProbe& probe) {
  if (!max_memory) {
    const int n = resolve_num_accelerators(num_accelerators);
    MaxMemory out;
    for (int i = 0; i < n; ++i) {
      std::optional<int64_t> free;
      try {
        free = probe.accelerator_free_memory ? probe.accelerator_free_memory(i) : default_accelerator_free_memory(i);
      } catch (const std::exception&) {
        free.reset();
      }
      if (!free) {
        emit(log, "INFO", "Device " + std::to_string(i) + " seems unavailable, Proceeding to check subsequent devices.");
        continue;
      }
      out.emplace_back(DeviceId::accelerator(i), *free);
    }
    out.emplace_back(DeviceId::cpu(), probe.cpu_available_memory ? probe.cpu_available_memory() : read_mem_available());
    return out;
  }
  std::vector<std::pair<DeviceId, int64_t>> known;
  std::optional<std::string> unknown;
  for (const auto& [d, v] : *max_memory) {
    if (d.is_meta()) {
      if (!unknown) unknown = d.str();
      continue;
    }
    known.emplace_back(d, v);
  }
  return normalise(known, unknown, num_accelerators, log);
}

MaxMemory get_max_memory(const nlohmann::json& max_memory, int num_accelerators, const LogFn& log,
                         const MemoryProbe& probe) {
  if (max_memory.is_null()) return get_max_memory(std::optional<MaxMemory>(), num_accelerators, log, probe);
  // (key as written, value) in document order; values are converted first, as accelerate does.
  std::vector<std::pair<nlohmann::json, int64_t>> items;
  if (max_memory.is_object()) {
    for (auto it = max_memory.begin(); it != max_memory.end(); ++it)
      items.emplace_back(nlohmann::json(it.key()), json_bytes(it.value(), it.key()));
  } else if (max_memory.is_array()) {
    for (const auto& p : max_memory) {
      if (!p.is_array() || p.size() != 2 || !(p[0].is_string() || p[0].is_number_integer()))
        throw std::invalid_argument("max_memory: expected [device, size] pairs, got " + p.dump());
      const std::string k = p[0].is_string() ? p[0].get<std::string>() : p[0].dump();
      items.emplace_back(p[0], json_bytes(p[1], k));
    }
  } else {
    throw std::invalid_argument("max_memory: expected null, an object or an array of [device, size] pairs, got " +
                                max_memory.dump());
  }
  std::vector<std::pair<DeviceId, int64_t>> known;
  std::optional<std::string> unknown;
  for (const auto& [k, v] : items) {
    std::optional<DeviceId> d;
    std::string text;
    if (k.is_number_integer()) {
      const int64_t i = k.get<int64_t>();
      if (i > 1000000 || i < -1000000) throw std::invalid_argument("max_memory: device index " + k.dump() + " is out of range");
      d = DeviceId::accelerator(static_cast<int>(i));
    } else {
      text = k.get<std::string>();
      d = max_memory_key(text);
    }
    if (!d) {
      if (!unknown) unknown = text;
      continue;
    }
    known.emplace_back(*d, v);
  }
  return normalise(known, unknown, num_accelerators, log);
}

// ------------------------------------------------------------------ JSON forms

nlohmann::ordered_json device_map_to_json(const DeviceMap& device_map) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [k, d] : device_map) j[k] = nlohmann::ordered_json(d.to_json());
  return j;
}

DeviceMap device_map_from_json(const nlohmann::json& j) { return device_map_from_json_impl(j); }
DeviceMap device_map_from_json(const nlohmann::ordered_json& j) { return device_map_from_json_impl(j); }

nlohmann::ordered_json max_memory_to_json(const MaxMemory& max_memory) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [d, v] : max_memory) j[d.str()] = v;
  return j;
}

nlohmann::ordered_json module_sizes_to_json(const ModuleSizes& sizes) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [k, v] : sizes.items()) j[k] = v;
  return j;
}

}  // namespace hs::hooks
