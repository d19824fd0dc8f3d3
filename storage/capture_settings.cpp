#include "storage/capture_settings.h"

#include "storage/bounded_json.h"
#include "storage/capture_reader.h"

#include <sys/utsname.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <thread>

namespace hs::storage {

namespace {

bool plain(const std::string& a) {
  if (a.empty()) return false;
  for (unsigned char c : a)
    if (!std::isalnum(c) && std::string("_./=,:+-").find(static_cast<char>(c)) == std::string::npos) return false;
  return true;
}

// The value after "KEY:" on the first line of `file` that starts with KEY, trimmed.
std::string field(const char* file, const std::string& key) {
  std::ifstream f(file);
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key, 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const size_t b = line.find_first_not_of(" \t", colon + 1);
      return b == std::string::npos ? "" : line.substr(b);
    }
  return "";
}

}  // namespace

std::string shell_word(const std::string& a) {
  if (plain(a)) return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string shell_command(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_word(w);
  }
  return out;
}

std::string command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!out.empty()) out += ' ';
    out += shell_word(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json machine_info() {
  nlohmann::json m;
  const std::string cpu = field("/proc/cpuinfo", "model name");
  m["cpu"] = cpu.empty() ? nlohmann::json(nullptr) : nlohmann::json(cpu);
  const unsigned n = std::thread::hardware_concurrency();
  m["logical_cpus"] = n ? nlohmann::json(n) : nlohmann::json(nullptr);
  const std::string mem = field("/proc/meminfo", "MemTotal");  // "24563744 kB"
  try {
    m["memory_bytes"] = mem.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::stoll(mem) * 1024);
  } catch (const std::exception&) {
    m["memory_bytes"] = nullptr;
  }
  utsname u{};
  if (uname(&u) == 0) m["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  else m["os"] = nullptr;
  return m;
}

nlohmann::json capture_settings(const CaptureReader& reader) {
  using nlohmann::json;
  const auto meta = reader.metadata();
  const auto it = meta.find(kCaptureSettingsKey);
  if (it == meta.end()) return json::object();
  const std::string where = "capture " + reader.path().string() + ": META_DATA_EXPORT." + kCaptureSettingsKey;
  json settings;
  try {
    settings = parse_json_bounded(it->second, where);
  } catch (const JsonError& e) {
    if (e.kind() != JsonError::Kind::Invalid)
      throw CaptureError(reader.path(), std::string(e.what()) + "; the file is damaged");
    settings = json(json::value_t::discarded);
  }
  if (settings.is_discarded() || !settings.is_object())
    throw CaptureError(reader.path(), where +
                                          " is not the JSON object hookscope writes there; the file is damaged or was "
                                          "written by another program");
  return settings;
}

}  // namespace hs::storage
