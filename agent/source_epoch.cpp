#include "dejaview/agent/source_epoch.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"

namespace dv::agent {
namespace {

constexpr const char* kEpochName = "EPOCH";
constexpr size_t kEpochFileBytes = 12;  // epoch:u64 | Mask(CRC32C(epoch)):u32, little-endian

uint64_t WallClockNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

EpochSource EpochSource::Open(const std::string& dir) {
  EpochSource e;
  e.path_ = dir + "/" + kEpochName;
  std::error_code ec;
  if (!std::filesystem::exists(e.path_, ec)) return e;
  auto bytes = ReadFileBytes(e.path_, 64);
  if (!bytes.ok() || bytes->size() != kEpochFileBytes) {
    e.damaged_ = true;
    return e;
  }
  uint64_t epoch = 0;
  uint32_t masked = 0;
  for (int i = 0; i < 8; ++i) epoch |= uint64_t((*bytes)[size_t(i)]) << (8 * i);
  for (int i = 0; i < 4; ++i) masked |= uint32_t((*bytes)[size_t(8 + i)]) << (8 * i);
  if (crc32c::Unmask(masked) != crc32c::Value(bytes->data(), 8)) {
    e.damaged_ = true;
    return e;
  }
  e.last_ = epoch;
  return e;
}

uint64_t EpochSource::Next(Status* persisted) {
  // Live epochs stay below 2^63; DriveEpoch's are above.
  const uint64_t epoch = std::max(WallClockNs(), last_ + 1) & ~(uint64_t(1) << 63);
  uint8_t bytes[kEpochFileBytes];
  for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(epoch >> (8 * i));
  const uint32_t crc = crc32c::Mask(crc32c::Value(bytes, 8));
  for (int i = 0; i < 4; ++i) bytes[8 + i] = uint8_t(crc >> (8 * i));
  *persisted = WriteFileAtomic(path_, bytes, sizeof(bytes));
  last_ = epoch;
  return epoch;
}

uint64_t DriveEpoch(const std::string& drive_dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(drive_dir, ec);
  const std::string s = (ec ? std::filesystem::path(drive_dir) : p).lexically_normal().string();
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) {
    h ^= uint8_t(c);
    h *= 0x100000001b3ull;
  }
  return h | (uint64_t(1) << 63);
}

}  // namespace dv::agent
