// CRC32C (Castagnoli), as used by LevelDB's log format. Written here because Debian 12 packages
// no crc32c library (google/crc32c is not in bookworm); a table-driven version is fast enough
// for spool records and containers. Mask/Unmask follow LevelDB: a CRC stored inside data that is
// itself CRC'd is masked so that the CRC of a CRC is not trivially related.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dv::crc32c {

uint32_t Extend(uint32_t crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace dv::crc32c
