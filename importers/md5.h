// MD5 of a TORCH_TRACE payload (the log's `has_payload` field), through Nettle.
#pragma once

#include <string>
#include <string_view>

#include <nettle/md5.h>

namespace hs::importers {

class Md5 {
 public:
  Md5() { md5_init(&ctx_); }
  /// Appends bytes to the message.
  void update(std::string_view bytes) {
    md5_update(&ctx_, bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
  }
  /// The digest as 32 lowercase hex digits (Python's `hashlib.md5(...).hexdigest()`). Ends the
  /// message: call once.
  std::string hex() {
    uint8_t d[MD5_DIGEST_SIZE];
    md5_digest(&ctx_, MD5_DIGEST_SIZE, d);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string s;
    for (uint8_t b : d) s += {kHex[b >> 4], kHex[b & 15]};
    return s;
  }

 private:
  md5_ctx ctx_;
};

}  // namespace hs::importers
