// Pack: the remote tier's unit of upload. Small objects are coalesced into one pack so that the
// object store sees few large PUTs; the pack names its members up front, so the index of the
// remote tier is the union of the pack headers and an object is remote exactly when the single
// PUT of its pack has completed (S3 PUTs are atomic).
//
//   pack   := magic u32 "DVPK" | version u32 (1) | header_len u32 | header | header_crc u32 | data
//   header := count varint | count x (id[32] | length varint)
//   header_crc = crc32c::Mask(crc32c(header)); member i starts in data at the sum of the
//   lengths before it (members are contiguous, in header order).
// All integers little-endian. A pack's key is "packs/<BLAKE2b-256 of the pack bytes in hex>",
// so the same members in the same order always produce the same key (a retried upload
// overwrites rather than duplicates). Spec: docs/store.md.
#pragma once

#include <cstdint>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/store/object_id.h"

namespace dv::store {

constexpr uint32_t kPackMagic = 0x4b505644;  // "DVPK"
constexpr uint32_t kPackVersion = 1;
constexpr uint32_t kPackPrefixBytes = 12;
constexpr uint32_t kMaxPackHeaderBytes = 1 << 20;

struct PackMember {
  ObjectId id;
  const uint8_t* data;
  uint64_t size;
};
struct PackEntry {
  ObjectId id;
  uint64_t offset;  // from the start of the pack
  uint64_t length;
};

std::vector<uint8_t> BuildPack(const std::vector<PackMember>& members);
// The header length a pack prefix announces (bounded by kMaxPackHeaderBytes).
StatusOr<uint32_t> ParsePackPrefix(const uint8_t* prefix, size_t size, const std::string& what);
// Entries of a header (header_len bytes followed by its CRC); what names the pack in errors.
StatusOr<std::vector<PackEntry>> ParsePackHeader(const uint8_t* header, size_t header_len_plus_crc,
                                                 const std::string& what);

}  // namespace dv::store
