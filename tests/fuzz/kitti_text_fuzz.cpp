// KITTI poses.txt and timestamps.txt parsers on arbitrary text: the first byte picks the parser.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "dejaview/base/kitti.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto poses = dv::ParseKittiPoses(text, "fuzz");
    if (poses.ok()) {
      for (const auto& p : *poses) {
        if (!p.matrix().allFinite()) __builtin_trap();  // non-finite numbers are rejected
      }
    }
  } else {
    auto ts = dv::ParseTimestamps(text, "fuzz");
    if (ts.ok()) {
      for (double t : *ts) {
        if (!std::isfinite(t)) __builtin_trap();
      }
    }
  }
  return 0;
}
