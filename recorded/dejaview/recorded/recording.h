// The messages of a recording, whatever holds them: an MCAP file (mcap.h) or a ROS 2 bag's
// SQLite database (.db3, rosbag2's sqlite3 storage: tables topics(id, name, type,
// serialization_format, ...) and messages(topic_id, timestamp, data)), chosen by extension.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "dejaview/base/status.h"
#include "dejaview/recorded/mcap.h"

namespace dv::recorded {

struct RecordedMessage {
  const std::string* topic = nullptr;
  const std::string* type = nullptr;      // "sensor_msgs/msg/PointCloud2"; empty when unknown
  const std::string* encoding = nullptr;  // "cdr"
  uint64_t log_time_ns = 0;
  ByteView data;  // valid during the callback
};
using RecordedVisitor = std::function<Status(const RecordedMessage&)>;

// True for the extensions ReadRecordedMessages reads (.mcap, .db3).
bool IsRecording(const std::string& path);
// Every message in the file's order (a .db3 in timestamp order); the visitor's error stops the
// walk and is returned. A .db3 that SQLite cannot read, or without rosbag2's tables, is an
// error naming the file.
Status ReadRecordedMessages(const std::string& path, const RecordedVisitor& visit);

}  // namespace dv::recorded
