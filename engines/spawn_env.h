// Internal to engines/: what ChildProcess and ProgramRun hand posix_spawn.
#pragma once

#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace hs::engines::detail {

/// This process's environment with `add` added (replacing variables of the same name).
inline std::vector<std::string> merged_environment(const std::map<std::string, std::string>& add) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    if (!add.count(kv.substr(0, kv.find('=')))) out.push_back(kv);
  }
  for (const auto& [k, v] : add) out.push_back(k + "=" + v);
  return out;
}

/// argv / envp for posix_spawn: pointers into `v`, null-terminated.
inline std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace hs::engines::detail
