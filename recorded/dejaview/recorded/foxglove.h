// foxglove.PointCloud (spec: docs/recorded.md), Foxglove's own point cloud schema, as MCAP files
// carry it: protobuf-encoded (schema encoding "protobuf", message encoding "protobuf") or JSON
// (schema encoding "jsonschema", message encoding "json", data in base64). The protobuf wire
// format is decoded by hand for this one message (Debian's libprotobuf would need Foxglove's
// .proto files compiled in; the message is six fields):
//   PointCloud { Timestamp timestamp = 1; string frame_id = 2; Pose pose = 3;
//                fixed32 point_stride = 4; repeated PackedElementField fields = 5; bytes data = 6 }
//   Timestamp { int64 seconds = 1; int32 nanos = 2 }
//   PackedElementField { string name = 1; fixed32 offset = 2; NumericType type = 3 }
//   Pose { Vector3 position = 1; Quaternion orientation = 2 }
//   Vector3 { double x, y, z = 1..3 }   Quaternion { double x, y, z, w = 1..4 }
//   NumericType: UINT8 1, INT8 2, UINT16 3, INT16 4, UINT32 5, INT32 6, FLOAT32 7, FLOAT64 8
//
// A caller may rely on: decoding never reads past the message, allocates at most the message's
// size, and fails with a Status naming the message (what), the field and its byte offset.
#pragma once

#include <cstdint>
#include <string>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/transport/wire.h"

namespace dv::recorded {

constexpr const char* kFoxglovePointCloudType = "foxglove.PointCloud";

struct FoxglovePointCloud {
  transport::RawFrame frame;  // stamp, frame_id, field table (NumericType mapped), points
  Pose T_frame_cloud = Pose::Identity();  // the cloud's origin in frame_id (its pose field)
};

// message_encoding: "protobuf" or "json" (anything else is an error naming what). The points
// are kept packed as sent (point_stride apart); the field table must pass the wire's
// CheckFrameLayout, and data must be a whole number of points.
StatusOr<FoxglovePointCloud> DecodeFoxglovePointCloud(const uint8_t* data, size_t size,
                                                      const std::string& message_encoding,
                                                      const std::string& what);

}  // namespace dv::recorded
