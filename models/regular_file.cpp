#include "models/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hs::models {

RegularFileError::RegularFileError(const std::filesystem::path& path, Kind k, std::string why)
    : std::runtime_error(path.string() + ": " + why), kind(k), reason(std::move(why)) {}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd >= 0) ::close(fd);
    fd = o.fd;
    o.fd = -1;
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd >= 0) ::close(fd);
}

UniqueFd open_regular_file(const std::filesystem::path& path, uint64_t& size) {
  using Kind = RegularFileError::Kind;
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (f.fd < 0) throw RegularFileError(path, Kind::Open, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw RegularFileError(path, Kind::Open, std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw RegularFileError(path, Kind::NotRegular, "a folder, not a file");
  if (!S_ISREG(st.st_mode)) throw RegularFileError(path, Kind::NotRegular, "not a regular file (a FIFO, device or socket)");
  size = static_cast<uint64_t>(st.st_size);
  return f;
}

std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes) {
  using Kind = RegularFileError::Kind;
  uint64_t size = 0;
  const UniqueFd f = open_regular_file(path, size);
  if (size > max_bytes)
    throw RegularFileError(path, Kind::TooLarge,
                           std::to_string(size) + " bytes, more than the limit of " + std::to_string(max_bytes));
  std::string buf(size, '\0');
  size_t got = 0;
  while (got < size) {
    const ssize_t r = ::read(f.fd, buf.data() + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw RegularFileError(path, Kind::Read, std::string("cannot read: ") + std::strerror(errno));
    if (r == 0) break;  // shrank under us
    got += static_cast<size_t>(r);
  }
  buf.resize(got);
  return buf;
}

}  // namespace hs::models
