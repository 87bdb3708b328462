#include <cstddef>
#include <cstdint>

#include "dejaview/base/kitti.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cloud = dv::DecodeKittiBin(data, size, "fuzz");
  if (cloud.ok() && cloud->size() != size / 16) __builtin_trap();
  return 0;
}
