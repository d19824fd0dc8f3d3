#include "app/export_file.h"

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

ExportFile::ExportFile(fs::path path, bool gzip)
    : path_(std::move(path)), partial_(path_.string() + ".partial-" + std::to_string(::getpid())), gzip_(gzip) {
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
  fs::remove(partial_, ec);
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
  fs::rename(partial_, path_);
  committed_ = true;
}

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
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
