#include <cstddef>
#include <cstdint>

#include "dejaview/recorded/foxglove.h"

// Any bytes, after a first byte that picks the encoding (even: protobuf, odd: JSON), decode as a
// foxglove.PointCloud to a frame whose points fill exactly point_count x point_stride bytes with
// a finite origin, or fail with a Status; never a crash, a leak or an allocation beyond the
// message's size.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  namespace rec = dv::recorded;
  auto cloud = rec::DecodeFoxglovePointCloud(data + 1, size - 1,
                                             data[0] % 2 == 0 ? "protobuf" : "json", "fuzz");
  if (cloud.ok() && (cloud->frame.points.size() != size_t(cloud->frame.header.point_count) *
                                                       cloud->frame.header.point_stride ||
                     !cloud->T_frame_cloud.matrix().allFinite()))
    __builtin_trap();
  return 0;
}
