#include <cstddef>
#include <cstdint>

#include "dejaview/recorded/recording.h"
#include "dejaview/recorded/ros_messages.h"

// Any bytes as a ROS 1 bag: its records walk, and its messages decode as ROS 1 PointCloud2s
// and poses, or fail with a Status; never a crash, a leak or an allocation beyond the bounds
// ReadRos1Bag states.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rec = dv::recorded;
  (void)rec::ReadRos1Bag(data, size, "fuzz", [](const rec::RecordedMessage& m) {
    const std::string type = rec::CanonicalRosType(*m.type);
    if (type == rec::kPointCloud2Type) {
      auto frame =
          rec::DecodePointCloud2(m.data.data, m.data.size, "fuzz", rec::RosEncoding::kRos1);
      if (frame.ok() &&
          frame->points.size() != size_t(frame->header.point_count) * frame->header.point_stride)
        __builtin_trap();
    } else if (rec::IsPoseType(type)) {
      (void)rec::DecodePoses(type, m.data.data, m.data.size, "fuzz", rec::RosEncoding::kRos1);
    }
    return dv::Status::Ok();
  });
  return 0;
}
