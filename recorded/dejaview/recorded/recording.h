// The messages of a recording, whatever holds them: an MCAP file (mcap.h), a ROS 2 bag's
// SQLite database (.db3, rosbag2's sqlite3 storage: tables topics(id, name, type,
// serialization_format, ...) and messages(topic_id, timestamp, data)) or a ROS 1 bag (.bag,
// format 2.0; its messages have encoding "ros1" and ROS 1 type names), chosen by extension.
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

// True for the extensions ReadRecordedMessages reads (.mcap, .db3, .bag).
bool IsRecording(const std::string& path);
// Every message in the file's order (a .db3 in timestamp order); the visitor's error stops the
// walk and is returned. A .db3 that SQLite cannot read, or without rosbag2's tables, is an
// error naming the file.
Status ReadRecordedMessages(const std::string& path, const RecordedVisitor& visit);

// A ROS 1 bag in memory (name for the messages): records in file order, chunks uncompressed,
// bz2 or lz4. Errors name the record's byte offset; a chunk never decompresses to more than
// 1 GiB, nor an lz4 chunk to more than its bytes can hold.
Status ReadRos1Bag(const uint8_t* data, size_t size, const std::string& name,
                   const RecordedVisitor& visit);

}  // namespace dv::recorded
