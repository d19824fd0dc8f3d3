// --max-memory and device-map strings. Byte 0 picks the entry point, byte 1 the accelerator
// count (0..7), the rest is the string:
//   0  parse_max_memory (the CLI's "0=1GiB,cpu=4GiB"), then get_max_memory of the result
//   1  convert_file_size_to_int ("1.5GB")
//   2  DeviceId::parse ("cuda:1")
//   3  get_max_memory of a JSON max_memory (object or [key, value] pairs)
//   4  device_map_from_json of a JSON device map (ordered), and back through device_map_to_json
// Expected: std::invalid_argument (every one of them documents it). JSON the input does not
// parse as is skipped (nlohmann's parse is not the entry point). Checked: a parsed device map
// written back and parsed again is the same map.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "hooks/device.h"
#include "hooks/device_map.h"

using namespace hs::hooks;

namespace {
MemoryProbe probe() {
  MemoryProbe p;
  p.accelerator_free_memory = [](int i) -> std::optional<int64_t> { return int64_t{1} << (30 + i % 4); };
  p.cpu_available_memory = [] { return int64_t{16} << 30; };
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int mode = data[0] % 5, accelerators = data[1] % 8;
  const std::string s(reinterpret_cast<const char*>(data + 2), size - 2);
  const LogFn log = [](auto&&...) {};
  try {
    switch (mode) {
      case 0: {
        const MaxMemory mm = parse_max_memory(s);
        (void)max_memory_to_json(get_max_memory(std::optional<MaxMemory>(mm), accelerators, log, probe()));
        break;
      }
      case 1:
        if (convert_file_size_to_int(s) < 0) std::abort();
        break;
      case 2:
        (void)DeviceId::parse(s).str();
        break;
      case 3: {
        const nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
        if (j.is_discarded()) return 0;
        (void)max_memory_to_json(get_max_memory(j, accelerators, log, probe()));
        break;
      }
      case 4: {
        const nlohmann::ordered_json j = nlohmann::ordered_json::parse(s, nullptr, false);
        if (j.is_discarded()) return 0;
        const DeviceMap m = device_map_from_json(j);
        const nlohmann::ordered_json back = device_map_to_json(m);
        if (device_map_to_json(device_map_from_json(back)) != back) std::abort();
        break;
      }
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
