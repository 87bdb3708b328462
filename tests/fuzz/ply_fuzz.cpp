#include <cstddef>
#include <cstdint>

#include "dejaview/base/ply.h"

// Any input either parses to a consistent cloud or fails with a Status; never a crash, a leak or
// an allocation the input size does not justify.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cloud = dv::ParsePly(data, size, "fuzz.ply");
  if (cloud.ok() && !cloud->consistent()) __builtin_trap();
  return 0;
}
