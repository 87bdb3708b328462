#include "dejaview/store/object_id.h"

#include <sodium.h>

namespace dv::store {

std::string ObjectId::Hex() const {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(kSize * 2, '0');
  for (size_t i = 0; i < kSize; ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

StatusOr<ObjectId> ObjectId::FromHex(const std::string& hex) {
  if (hex.size() != kSize * 2) {
    return Status::InvalidArgument("object id '" + hex + "': expected 64 hex digits");
  }
  ObjectId id;
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else {
      return Status::InvalidArgument("object id '" + hex + "': not lower-case hex");
    }
    id.bytes[i / 2] = uint8_t(id.bytes[i / 2] | (i % 2 ? v : v << 4));
  }
  return id;
}

ObjectId ComputeId(const void* data, size_t size) {
  ObjectId id;
  // Unkeyed BLAKE2b never fails for a 32-byte output; sodium_init is not needed for it.
  crypto_generichash(id.bytes.data(), id.bytes.size(), static_cast<const unsigned char*>(data),
                     size, nullptr, 0);
  return id;
}

}  // namespace dv::store
