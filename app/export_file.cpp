#include "app/export_file.h"

#include "app/cli_util.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace hs::app {

namespace fs = std::filesystem;

namespace {
constexpr size_t kBufferBytes = 1 << 20;
}

ExportFile::ExportFile(fs::path path, bool gzip) : path_(std::move(path)), gzip_(gzip) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw std::invalid_argument(path_.string() + " is a folder; name a file to write");
    // /dev/stdout, a FIFO, a terminal: written as they are; renaming onto them would replace the node.
    in_place_ = !S_ISREG(st.st_mode);
    // A link to a file: the link stays, the file it names is replaced.
    if (!in_place_ && fs::is_symlink(path_)) target_ = fs::canonical(path_);
  }
  if (target_.empty()) target_ = path_;
  partial_ = in_place_ ? path_ : fs::path(target_.string() + ".partial-" + std::to_string(::getpid()));
  handle_ = gzip_ ? static_cast<void*>(gzopen(partial_.c_str(), "wb6")) : static_cast<void*>(std::fopen(partial_.c_str(), "wb"));
  if (!handle_) throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno));
  buffer_.reserve(kBufferBytes);
}

ExportFile::~ExportFile() {
  if (committed_) return;
  if (handle_) {
    if (gzip_) gzclose(static_cast<gzFile>(handle_));
    else std::fclose(static_cast<std::FILE*>(handle_));
  }
  std::error_code ec;
  if (!in_place_) fs::remove(partial_, ec);
}

void ExportFile::write(std::string_view bytes) {
  buffer_.append(bytes);
  bytes_ += bytes.size();
  if (buffer_.size() >= kBufferBytes) flush();
}

void ExportFile::flush() {
  if (buffer_.empty()) return;
  const bool ok = gzip_ ? gzwrite(static_cast<gzFile>(handle_), buffer_.data(), static_cast<unsigned>(buffer_.size())) ==
                              static_cast<int>(buffer_.size())
                        : std::fwrite(buffer_.data(), 1, buffer_.size(), static_cast<std::FILE*>(handle_)) == buffer_.size();
  if (!ok) throw std::runtime_error("cannot write " + path_.string() + ": " + std::strerror(errno));
  buffer_.clear();
}

void ExportFile::commit() {
  flush();
  const int rc = gzip_ ? gzclose(static_cast<gzFile>(handle_)) : std::fclose(static_cast<std::FILE*>(handle_));
  handle_ = nullptr;
  if (rc != 0) throw std::runtime_error("cannot finish " + path_.string() + ": " + std::strerror(errno));
  std::error_code ec;
  if (!in_place_) fs::rename(partial_, target_, ec);
  if (ec) throw std::runtime_error("cannot write " + path_.string() + ": " + ec.message());
  committed_ = true;
}

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {  // a capture's text may hold any bytes: JSON holds UTF-8, each bad byte is U+FFFD
      const size_t n = utf8_length_at(s, i);
      if (n == 0) out += "\\ufffd";
      else out.append(s.substr(i, n));
      i += std::max<size_t>(n, 1) - 1;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_us(std::string& out, int64_t ns) {
  // |ns| as unsigned, so INT64_MIN has a magnitude too.
  const uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%s%llu.%03llu", ns < 0 ? "-" : "",
                              static_cast<unsigned long long>(mag / 1000), static_cast<unsigned long long>(mag % 1000));
  out.append(buf, static_cast<size_t>(n));
}

}  // namespace hs::app
