#include "dejaview/store/pack.h"

#include <string>

#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"

namespace dv::store {

std::vector<uint8_t> BuildPack(const std::vector<PackMember>& members) {
  ByteWriter header;
  header.Varint(members.size());
  uint64_t data_bytes = 0;
  for (const PackMember& m : members) {
    header.Bytes(m.id.bytes.data(), m.id.bytes.size());
    header.Varint(m.size);
    data_bytes += m.size;
  }
  ByteWriter out;
  out.buffer().reserve(kPackPrefixBytes + header.size() + 4 + data_bytes);
  out.U32(kPackMagic);
  out.U32(kPackVersion);
  out.U32(uint32_t(header.size()));
  out.Bytes(header.buffer().data(), header.size());
  out.U32(crc32c::Mask(crc32c::Value(header.buffer().data(), header.size())));
  for (const PackMember& m : members) out.Bytes(m.data, m.size);
  return out.Take();
}

StatusOr<uint32_t> ParsePackPrefix(const uint8_t* prefix, size_t size, const std::string& what) {
  ByteReader r(prefix, size);
  uint32_t magic = 0, version = 0, header_len = 0;
  r.U32(&magic);
  r.U32(&version);
  r.U32(&header_len);
  if (r.failed()) return Status::Corruption(what + ": pack shorter than its 12-byte prefix");
  if (magic != kPackMagic) return Status::Corruption(what + ": not a pack (bad magic)");
  if (version != kPackVersion) {
    return Status::Corruption(what + ": pack version " + std::to_string(version) +
                              ", this build reads version 1");
  }
  if (header_len > kMaxPackHeaderBytes) {
    return Status::Corruption(what + ": pack header_len " + std::to_string(header_len) +
                              " exceeds the limit of " + std::to_string(kMaxPackHeaderBytes));
  }
  return header_len;
}

StatusOr<std::vector<PackEntry>> ParsePackHeader(const uint8_t* header, size_t header_len_plus_crc,
                                                 const std::string& what) {
  if (header_len_plus_crc < 4) return Status::Corruption(what + ": pack header truncated");
  const size_t header_len = header_len_plus_crc - 4;
  ByteReader crc_reader(header + header_len, 4);
  uint32_t stored = 0;
  crc_reader.U32(&stored);
  if (crc32c::Unmask(stored) != crc32c::Value(header, header_len)) {
    return Status::Corruption(what + ": pack header CRC mismatch");
  }
  ByteReader r(header, header_len);
  uint64_t count = 0;
  // Each entry takes at least 33 bytes, which bounds count by what the header can hold.
  if (!r.Varint(&count) || count > header_len / 33) {
    return Status::Corruption(what + ": pack member count invalid");
  }
  std::vector<PackEntry> entries(count);
  uint64_t offset = kPackPrefixBytes + header_len_plus_crc;
  for (PackEntry& e : entries) {
    r.Bytes(e.id.bytes.data(), e.id.bytes.size());
    if (!r.Varint(&e.length) || e.length > (uint64_t(1) << 40)) {
      return Status::Corruption(what + ": pack member length invalid");
    }
    e.offset = offset;
    offset += e.length;
  }
  if (r.failed() || r.remaining() != 0) {
    return Status::Corruption(what + ": pack header has " +
                              (r.failed() ? "truncated" : "trailing") + " entries");
  }
  return entries;
}

}  // namespace dv::store
