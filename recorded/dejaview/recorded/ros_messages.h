// ROS messages (spec: docs/recorded.md) in CDR, the encoding MCAP files from ROS 2 carry: a
// 4-byte encapsulation header (00 01: little-endian CDR; 00 00: big-endian), then the fields in
// order, each primitive aligned to its size (at most 8) from the end of that header, strings as
// u32 length (with the NUL) + bytes, sequences as u32 count + elements; or in ROS 1's
// serialization (ROS 1 bags, MCAP's "ros1"): the same fields little-endian, unaligned, strings
// without the NUL, and a std_msgs/Header that starts with a u32 seq. No Debian package decodes
// either without a ROS stack, so these few messages are written by hand.
//
// A caller may rely on: decoding never reads past the message, never allocates more than the
// message's size justifies, and fails with a Status naming the message (what), the field and
// its byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/transport/wire.h"

namespace dv::recorded {

// The ROS 2 type names as MCAP schemas carry them.
constexpr const char* kPointCloud2Type = "sensor_msgs/msg/PointCloud2";
constexpr const char* kTfMessageType = "tf2_msgs/msg/TFMessage";
constexpr const char* kOdometryType = "nav_msgs/msg/Odometry";
constexpr const char* kPoseStampedType = "geometry_msgs/msg/PoseStamped";

enum class RosEncoding { kCdr, kRos1 };
// MCAP's message encoding names ("cdr", "ros1"); anything else is an error naming what.
StatusOr<RosEncoding> RosEncodingOf(const std::string& message_encoding, const std::string& what);
// The ROS 2 name of a ROS 1 type ("sensor_msgs/PointCloud2" -> "sensor_msgs/msg/PointCloud2",
// "tf/tfMessage" -> tf2's); a ROS 2 name is returned as it is.
std::string CanonicalRosType(const std::string& type);

// sensor_msgs/msg/PointCloud2 as a wire frame (docs/wire.md): header.sensor_stamp_ns and
// frame_id from the message header, its field table as it is (PointField's datatype codes are
// the wire's), its points row by row without row padding. Big-endian data, rows shorter than
// width * point_step and tables the wire rejects (CheckFrameLayout) are errors.
StatusOr<transport::RawFrame> DecodePointCloud2(const uint8_t* data, size_t size,
                                                const std::string& what,
                                                RosEncoding encoding = RosEncoding::kCdr);

// A stamped transform T_parent_child (parent = header.frame_id).
struct StampedPose {
  int64_t stamp_ns = 0;
  std::string parent_frame, child_frame;
  Pose T_parent_child = Pose::Identity();
};
// Poses from a TFMessage (every transform), an Odometry (its pose; child_frame_id as child) or
// a PoseStamped (child empty); type is one of the (ROS 2) names above.
StatusOr<std::vector<StampedPose>> DecodePoses(const std::string& type, const uint8_t* data,
                                               size_t size, const std::string& what,
                                               RosEncoding encoding = RosEncoding::kCdr);
bool IsPoseType(const std::string& type);

// Writers for export: the cloud as PointCloud2 with x y z float64 (so that a cloud moved into
// the world frame and back returns every float32 coordinate exactly) and intensity float32,
// and a PoseStamped.
std::vector<uint8_t> EncodePointCloud2(int64_t stamp_ns, const std::string& frame_id,
                                       const std::vector<Eigen::Vector3d>& xyz,
                                       const std::vector<float>& intensity);
std::vector<uint8_t> EncodePoseStamped(const StampedPose& pose);
// The ros2msg schema texts (each with its dependencies) Foxglove decodes CDR with.
const std::string& PointCloud2Schema();
const std::string& PoseStampedSchema();

}  // namespace dv::recorded
