#include <cstddef>
#include <cstdint>

#include "dejaview/transport/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dv::transport::WireCounters counters;
  auto pose = dv::transport::DecodePose(data, size, &counters);
  if (counters.Total() + counters.accepted != 1) __builtin_trap();
  if (pose.ok() && !pose->T_map_sensor.matrix().allFinite()) __builtin_trap();
  return 0;
}
