#include <cstddef>
#include <cstdint>

#include "dejaview/transport/wire.h"

// Whatever the bytes, DecodeFrame either rejects them (and counts it) or yields exactly
// point_count * point_stride point bytes that ToPointCloud can map or reject.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dv::transport::WireCounters counters;
  auto frame = dv::transport::DecodeFrame(data, size, &counters);
  if (counters.Total() + counters.accepted != 1) __builtin_trap();
  if (!frame.ok()) return 0;
  const auto& h = frame->header;
  if (frame->points.size() != size_t(h.point_count) * h.point_stride) __builtin_trap();
  auto cloud = dv::transport::ToPointCloud(*frame, nullptr);
  if (cloud.ok() && cloud->size() != h.point_count) __builtin_trap();
  return 0;
}
