#include <cstddef>
#include <cstdint>

#include "dejaview/recorded/ros_messages.h"

// Any input, as CDR and as ROS 1 serialization, decodes as each message type to a valid frame or
// poses, or fails with a Status; never a crash, a leak or an allocation the input's size does
// not justify.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rec = dv::recorded;
  for (const auto encoding : {rec::RosEncoding::kCdr, rec::RosEncoding::kRos1}) {
    auto frame = rec::DecodePointCloud2(data, size, "fuzz", encoding);
    if (frame.ok() &&
        frame->points.size() != size_t(frame->header.point_count) * frame->header.point_stride)
      __builtin_trap();
    for (const char* type : {rec::kTfMessageType, rec::kOdometryType, rec::kPoseStampedType}) {
      auto poses = rec::DecodePoses(type, data, size, "fuzz", encoding);
      if (poses.ok()) {
        for (const auto& p : *poses) {
          if (!p.T_parent_child.matrix().allFinite()) __builtin_trap();
        }
      }
    }
  }
  return 0;
}
