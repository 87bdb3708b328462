// LiDAR frames and poses on the wire (ZeroMQ PUB/SUB, spec: docs/wire.md).
//
// Every message is two ZeroMQ frames: [topic ending in '/'] [body]. A frame body is a
// little-endian header (magic "DVLF", version, sequence, stamps, frame id, optional pose, a
// PointCloud2-style field table) followed by point_count * point_stride point bytes, optionally
// LZ4-compressed. A pose body ("DVPS") carries a stamped T_map_sensor with its covariance.
//
// A caller may rely on: DecodeFrame/DecodePose never read past the input, never allocate more
// than the limits below whatever the input claims, and return a Status naming the offending
// field; each rejection is also counted by reason in WireCounters.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv::transport {

constexpr uint32_t kFrameMagic = 0x464c5644;  // "DVLF" in little-endian byte order
constexpr uint32_t kPoseMagic = 0x53505644;   // "DVPS"
constexpr uint8_t kWireMajor = 1;             // a reader rejects any other major
constexpr uint8_t kWireMinor = 0;             // a reader accepts any minor of its major

// Limits checked before any allocation (an HDL-64E frame is ~125k points x 16 bytes).
constexpr uint32_t kMaxPoints = 1u << 24;
constexpr uint32_t kMaxStride = 1024;
constexpr uint64_t kMaxPointBytes = uint64_t(256) << 20;
constexpr size_t kMaxFields = 32;
constexpr size_t kMaxNameBytes = 64;  // frame id and field names

// sensor_msgs/PointField datatype codes, so a ROS driver's table maps one to one.
enum class DataType : uint8_t {
  kInt8 = 1,
  kUint8 = 2,
  kInt16 = 3,
  kUint16 = 4,
  kInt32 = 5,
  kUint32 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
};
size_t DataTypeSize(DataType t);  // 0 for a code outside 1..8

struct Field {
  std::string name;
  uint32_t offset = 0;  // bytes from the start of a point
  DataType type = DataType::kFloat32;
  uint32_t count = 1;  // elements (PointCloud2 semantics); the mapping reads element 0
};

using Covariance6 = Eigen::Matrix<double, 6, 6>;  // (x y z roll pitch yaw), row-major on the wire

struct FrameHeader {
  uint8_t major = kWireMajor;
  uint8_t minor = kWireMinor;
  uint64_t sequence = 0;
  int64_t sensor_stamp_ns = 0;   // when the sweep started, sensor clock
  int64_t publish_stamp_ns = 0;  // when the driver sent it
  std::string frame_id;
  bool has_pose = false;  // T_map_sensor/covariance below are meaningful only when set
  Pose T_map_sensor = Pose::Identity();
  Covariance6 covariance = Covariance6::Zero();
  bool lz4 = false;
  uint32_t point_count = 0;
  uint32_t point_stride = 0;
  std::vector<Field> fields;
};

// A decoded frame: header plus the (decompressed) point bytes, exactly count * stride long.
struct RawFrame {
  FrameHeader header;
  std::vector<uint8_t> points;
};

struct PoseMessage {
  int64_t stamp_ns = 0;
  Pose T_map_sensor = Pose::Identity();
  Covariance6 covariance = Covariance6::Zero();
};

// Why a message was rejected; one counter each.
enum class Reject : uint8_t {
  kTruncated,
  kBadMagic,
  kBadVersion,
  kBadFlags,
  kBadName,
  kTooLarge,
  kBadFieldTable,
  kBadLz4,
  kTrailingBytes,
  kBadPose,
  kNotMappable,
  kWrongShape,    // a message that is not exactly [topic] [body]
  kUnknownTopic,  // a topic that only shares a prefix with a subscribed one
  kCount,
};
const char* RejectName(Reject r);

struct WireCounters {
  std::array<uint64_t, size_t(Reject::kCount)> rejected{};
  uint64_t accepted = 0;
  uint64_t Total() const;
};

// Encoders. EncodeFrame checks the header against the point bytes (same rules as the decoder)
// so that a producer cannot emit what a consumer would reject.
StatusOr<std::vector<uint8_t>> EncodeFrame(const FrameHeader& header, const uint8_t* points,
                                           size_t size);
std::vector<uint8_t> EncodePose(const PoseMessage& pose);

// The field-table rules both apply (limits, datatypes, spans inside the stride, no overlaps,
// unique names), for a producer that builds a RawFrame without encoding it (an import).
Status CheckFrameLayout(const FrameHeader& header);

// Decoders; counters may be null.
StatusOr<RawFrame> DecodeFrame(const uint8_t* data, size_t size, WireCounters* counters);
StatusOr<PoseMessage> DecodePose(const uint8_t* data, size_t size, WireCounters* counters);

// Maps a driver's layout to a PointCloud: x, y, z (float32/float64) are required; intensity
// (or reflectivity) becomes float: a float as it is, an integer divided by the largest value of
// its type; ring of any integer type; time (or t, time_offset) as float32/float64 seconds or
// integer nanoseconds from the sweep start. Other
// fields and padding are skipped. A frame it cannot map counts as not_mappable.
StatusOr<PointCloud> ToPointCloud(const RawFrame& frame, WireCounters* counters);

// The layout dejaview itself publishes: x y z intensity float32 (stride 16, the KITTI .bin
// record), then ring uint16 + 2 padding bytes and time float32 when the cloud has them.
// Fills header->fields/point_count/point_stride and returns the point bytes.
std::vector<uint8_t> PackPointCloud(const PointCloud& cloud, FrameHeader* header);

}  // namespace dv::transport
