#include "dejaview/store/object_id.h"

#include <sodium.h>

#include "dejaview/base/hex.h"

namespace dv::store {

std::string ObjectId::Hex() const { return HexEncode(bytes.data(), kSize); }

StatusOr<ObjectId> ObjectId::FromHex(const std::string& hex) {
  if (hex.size() != kSize * 2) {
    return Status::InvalidArgument("object id '" + hex + "': expected 64 hex digits");
  }
  ObjectId id;
  if (!HexDecode(hex, id.bytes.data())) {
    return Status::InvalidArgument("object id '" + hex + "': not lower-case hex");
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
