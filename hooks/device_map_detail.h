// What hooks/device_map.cpp and hooks/max_memory.cpp share (not part of the public API).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hooks/device_map.h"
#include "hooks/runtime.h"

namespace hs::hooks::detail {

/// accelerate's warning or info line through `log` when given, else the runtime's logger.
inline void emit(const LogFn& log, const std::string& level, const std::string& message) {
  if (log)
    log(level, message);
  else
    hooks::log(level, message);
}

/// Python's `a // b` on integers (rounds toward negative infinity).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

inline DeviceId mps_device() { return DeviceId{DeviceId::Kind::Mps, 0}; }

/// Python's repr() of a str (enough for module names).
inline std::string py_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == '\\' || c == q) out += '\\';
    out += c;
  }
  out += q;
  return out;
}
inline std::string py_repr(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + py_repr(v[i]);
  return out + "]";
}
inline std::string py_repr(const std::vector<std::vector<std::string>>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + py_repr(v[i]);
  return out + "]";
}

/// Sets `key` in `m` (replacing its device, or appended in order).
inline void map_set(DeviceMap& m, const std::string& key, const DeviceId& d) {
  for (auto& [k, v] : m)
    if (k == key) {
      v = d;
      return;
    }
  m.emplace_back(key, d);
}

}  // namespace hs::hooks::detail
