#include "dejaview/agent/source_epoch.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "dejaview/base/file_util.h"

namespace dv::agent {
namespace {

constexpr const char* kEpochName = "EPOCH";
constexpr char kEpochMagic[8] = {'D', 'V', 'E', 'P', 'O', 'C', 'H', '1'};

uint64_t WallClockNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

EpochSource EpochSource::Open(const std::string& dir) {
  EpochSource e;
  e.path_ = dir + "/" + kEpochName;
  auto last = ReadU64File(e.path_, kEpochMagic);
  if (last.ok()) {
    e.last_ = *last;
  } else if (last.status().code() != Status::Code::kNotFound) {
    e.damaged_ = true;
  }
  return e;
}

uint64_t EpochSource::Next(Status* persisted) {
  // Live epochs stay below 2^63; DriveEpoch's are above.
  const uint64_t epoch = std::max(WallClockNs(), last_ + 1) & ~(uint64_t(1) << 63);
  *persisted = WriteU64File(path_, kEpochMagic, epoch);
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
