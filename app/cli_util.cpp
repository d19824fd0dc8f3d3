#include "app/cli_util.h"

#include <algorithm>
#include <sstream>

namespace hs::app {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    out.push_back(item.substr(b, item.find_last_not_of(" \t") - b + 1));
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

CLI::Validator list_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        const auto items = split_list(value);
        if (items.empty()) return "needs at least one of " + join(allowed, ", ");
        for (const auto& item : items)
          if (std::find(allowed.begin(), allowed.end(), item) == allowed.end())
            return "'" + item + "' is not one of " + join(allowed, ", ");
        return "";
      },
      "{" + join(allowed, ",") + "},...");
}

CLI::Validator one_of(std::vector<std::string> allowed) {
  return CLI::Validator(
      [allowed](std::string& value) -> std::string {
        if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return "";
        return "'" + value + "' is not one of " + join(allowed, ", ");
      },
      "{" + join(allowed, ",") + "}");
}

}  // namespace hs::app
