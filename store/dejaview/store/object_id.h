// Object ids: an object is immutable once sealed and named by its content hash (BLAKE2b-256
// from libsodium), so equal bytes get equal ids in every tier and a re-sent object deduplicates
// by name. A caller may rely on: ComputeId(bytes) == id exactly when the bytes are intact.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "dejaview/base/status.h"

namespace dv::store {

struct ObjectId {
  static constexpr size_t kSize = 32;
  std::array<uint8_t, kSize> bytes{};

  std::string Hex() const;
  static StatusOr<ObjectId> FromHex(const std::string& hex);
  bool operator==(const ObjectId& o) const { return bytes == o.bytes; }
  bool operator!=(const ObjectId& o) const { return bytes != o.bytes; }
  bool operator<(const ObjectId& o) const { return bytes < o.bytes; }
};

ObjectId ComputeId(const void* data, size_t size);

struct ObjectIdHash {
  size_t operator()(const ObjectId& id) const {
    size_t h;  // the id is already a uniform hash: its first bytes are a good bucket key
    std::memcpy(&h, id.bytes.data(), sizeof h);
    return h;
  }
};

}  // namespace dv::store
