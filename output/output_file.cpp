#include "output/output_file.h"



#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "output/paths.h"

namespace hs::output {

namespace fs = std::filesystem;

namespace {
constexpr size_t kBufferBytes = 1 << 20;
}

std::optional<fs::path> OutputFile::replaced_file(const fs::path& path) {
  struct stat st {};
  std::error_code ec;
  if (::stat(path.c_str(), &st) == 0) {
    // /dev/stdout, a FIFO, a terminal: written as they are; renaming onto them would replace the node.
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return std::nullopt;
    // A link to a file: the link stays, the file it names is replaced.
    if (S_ISREG(st.st_mode) && fs::is_symlink(fs::symlink_status(path, ec))) {
      const fs::path target = fs::canonical(path, ec);
      if (!ec) return target;
    }
    return path;
  }
  // A dangling link (or one whose target cannot be looked up: a name too long, a path through
  // a file): what it names is written (as the shell's `>` does), so that is the file checked and
  // failing; the link stays.
  if (errno != ELOOP && fs::is_symlink(fs::symlink_status(path, ec))) return final_link_target(path);
  return path;
}

OutputFile::OutputFile(fs::path path, bool gzip) : path_(std::move(path)), gzip_(gzip) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw std::invalid_argument(path_.string() + " is a folder; name a file to write");
  } else if (errno == ELOOP) {  // a loop of links is refused, as by every other output, not replaced
    throw fs::filesystem_error("cannot write", path_, std::make_error_code(std::errc::too_many_symbolic_link_levels));
  }
  const std::optional<fs::path> replaced = replaced_file(path_);
  in_place_ = !replaced;
  target_ = replaced ? *replaced : path_;
  if (!in_place_) refuse_name_too_long("", target_);
  partial_ = in_place_ ? path_ : fs::path(target_.string() + ".partial-" + std::to_string(::getpid()));
  handle_ = gzip_ ? static_cast<void*>(gzopen(partial_.c_str(), "wb6")) : static_cast<void*>(std::fopen(partial_.c_str(), "wb"));
  if (!handle_) throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno));
  buffer_.reserve(kBufferBytes);
}

OutputFile::~OutputFile() {
  if (committed_) return;
  if (handle_) {
    if (gzip_) gzclose(static_cast<gzFile>(handle_));
    else std::fclose(static_cast<std::FILE*>(handle_));
  }
  std::error_code ec;
  if (!in_place_) fs::remove(partial_, ec);
}

void OutputFile::write(std::string_view bytes) {
  buffer_.append(bytes);
  bytes_ += bytes.size();
  if (buffer_.size() >= kBufferBytes) flush();
}

void OutputFile::flush() {
  if (buffer_.empty()) return;
  const bool ok = gzip_ ? gzwrite(static_cast<gzFile>(handle_), buffer_.data(), static_cast<unsigned>(buffer_.size())) ==
                              static_cast<int>(buffer_.size())
                        : std::fwrite(buffer_.data(), 1, buffer_.size(), static_cast<std::FILE*>(handle_)) == buffer_.size();
  if (!ok) throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno));
  buffer_.clear();
}

void OutputFile::commit() {
  flush();
  const int rc = gzip_ ? gzclose(static_cast<gzFile>(handle_)) : std::fclose(static_cast<std::FILE*>(handle_));
  handle_ = nullptr;
  if (rc != 0) throw std::runtime_error("cannot finish " + path_.string() + ": " + std::strerror(errno));
  std::error_code ec;
  if (!in_place_) fs::rename(partial_, target_, ec);
  if (ec) throw std::runtime_error("cannot write " + path_.string() + ": " + ec.message());
  committed_ = true;
}

}  // namespace hs::output
