#include "importers/import_error.h"

namespace hs::importers {

namespace {
std::string format(const std::filesystem::path& file, const std::string& location, const std::string& message) {
  std::string s = file.string() + ": ";
  if (!location.empty()) s += location + ": ";
  return s + message;
}
}  // namespace

ImportError::ImportError(const std::filesystem::path& file, const std::string& location,
                         const std::string& message)
    : std::runtime_error(format(file, location, message)), file_(file) {}

}  // namespace hs::importers
