// Opening and reading the files of a checkpoint folder (config.json, tokenizer.json,
// generation_config.json, the safetensors index and shards) as untrusted input: regular files
// only, opened without blocking (a FIFO or a device in their place is refused at once rather
// than waited on), whole-file reads bounded by a byte limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace hs::models {

/// Why a file could not be opened or read. `what()` is "PATH: REASON"; `reason` alone is
/// "cannot open: No such file or directory", "a folder, not a file", "not a regular file (a
/// FIFO, device or socket)", "N bytes, more than the limit of M", "cannot read: ...".
struct RegularFileError : std::runtime_error {
  enum class Kind { Open, NotRegular, TooLarge, Read };
  RegularFileError(const std::filesystem::path& path, Kind kind, std::string reason);
  Kind kind;
  std::string reason;
};

/// A file descriptor closed on destruction (-1: none).
struct UniqueFd {
  int fd = -1;
  UniqueFd() = default;
  explicit UniqueFd(int f) : fd(f) {}
  UniqueFd(UniqueFd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
};

/// `path` opened read-only (O_NONBLOCK, O_CLOEXEC, O_NOCTTY) and checked to be a regular file;
/// `size` receives its size in bytes. Throws RegularFileError (Open, NotRegular).
UniqueFd open_regular_file(const std::filesystem::path& path, uint64_t& size);

/// The whole of the regular file `path`, at most `max_bytes` bytes. Throws RegularFileError
/// (Open, NotRegular, TooLarge, Read).
std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes);

}  // namespace hs::models
