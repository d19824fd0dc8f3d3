// MD5 (RFC 1321), incremental: torch.compile's structured log stamps every payload with its
// MD5 (`has_payload`), which is how a truncated or damaged payload is recognised.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hs::importers {

class Md5 {
 public:
  Md5();
  /// Appends bytes to the message.
  void update(std::string_view bytes);
  /// The digest as 32 lowercase hex digits (Python's `hashlib.md5(...).hexdigest()`). Ends the
  /// message: call once.
  std::string hex();

 private:
  void block(const unsigned char* p);
  std::array<uint32_t, 4> h_;
  std::array<unsigned char, 64> buf_{};
  uint64_t length_ = 0;  ///< bytes so far
};

}  // namespace hs::importers
