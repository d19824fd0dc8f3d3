// An output file (an export, a report, a screenshot's layout): written under a temporary name
// beside its final one (plain, or gzip through zlib) and renamed into place by commit(), so a
// failed write never leaves a file that looks finished.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace hs::output {

class OutputFile {
 public:
  /// Opens `path`'s temporary sibling for writing; `gzip` compresses through zlib (level 6).
  /// A `path` that is a link to a file replaces the file it names (the link stays); one that is
  /// no regular file (/dev/stdout, a FIFO) is written in place, never renamed onto. Throws
  /// std::invalid_argument when `path` is a folder or its name leaves no room for the temporary
  /// suffix (refuse_name_too_long), std::filesystem::filesystem_error (ELOOP)
  /// when it is a loop of links, std::runtime_error naming the file when it cannot be created.
  OutputFile(std::filesystem::path path, bool gzip);
  /// Removes the temporary file unless commit() ran.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  /// The file an OutputFile at `path` writes a temporary sibling of and renames onto: `path`
  /// itself, or the file its link names (followed to the end, a dangling link's target too:
  /// that file is created, the link stays); nothing when `path` is written in place (an
  /// existing node that is no regular file or folder: /dev/stdout, a FIFO). Never throws.
  static std::optional<std::filesystem::path> replaced_file(const std::filesystem::path& path);

  /// Appends bytes (buffered). Throws std::runtime_error on a write error.
  void write(std::string_view bytes);
  /// Flushes, closes and renames the file to its final name (replacing one that exists).
  /// Throws std::runtime_error naming the file and the reason when a write, the close or the
  /// rename fails (a full disk, /dev/full): the temporary file is removed then.
  void commit();
  /// Uncompressed bytes written so far.
  uint64_t bytes() const { return bytes_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void flush();
  std::filesystem::path path_, target_, partial_;
  bool gzip_ = false, committed_ = false, in_place_ = false;
  void* handle_ = nullptr;  // gzFile or std::FILE*
  std::string buffer_;
  uint64_t bytes_ = 0;
};

}  // namespace hs::output
