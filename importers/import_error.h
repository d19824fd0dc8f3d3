// The error every importer throws for input it cannot read: it names the file and where in it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace hs::importers {

/// Bad input: a truncated or malformed file, a missing or invalid field. `what()` reads
/// "FILE: LOCATION: MESSAGE" (LOCATION e.g. "byte 1234", "line 17"; omitted when empty).
class ImportError : public std::runtime_error {
 public:
  ImportError(const std::filesystem::path& file, const std::string& location, const std::string& message);
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

}  // namespace hs::importers
