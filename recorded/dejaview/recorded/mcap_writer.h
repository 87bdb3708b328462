// An MCAP writer (spec: docs/recorded.md), written by hand for the reason mcap.h gives. It
// writes what an indexed reader (Foxglove) needs to seek: the Header, each Schema and Channel
// before its first message, messages in zstd-compressed chunks each followed by its
// MessageIndex records, DataEnd with the data section's CRC, then a summary (Schemas,
// Channels, Statistics, ChunkIndexes, SummaryOffsets) and the Footer with the summary's CRC.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/recorded/mcap.h"

namespace dv::recorded {

struct McapWriterOptions {
  std::string profile;                   // "ros2" for ROS 2 messages
  std::string compression = "zstd";      // "zstd", "lz4" or "" (none)
  size_t chunk_bytes = size_t(4) << 20;  // a chunk is closed once its records pass this size
};

class McapWriter {
 public:
  // Bytes go to sink in order; its error stops the writer (every later call returns it).
  using Sink = std::function<Status(const uint8_t* data, size_t size)>;
  McapWriter(Sink sink, McapWriterOptions options);
  ~McapWriter();

  // Ids are given in call order from 1.
  uint16_t AddSchema(const std::string& name, const std::string& encoding, const std::string& data);
  uint16_t AddChannel(uint16_t schema_id, const std::string& topic,
                      const std::string& message_encoding, const McapStringMap& metadata = {});
  Status WriteMessage(uint16_t channel_id, uint64_t log_time_ns, uint64_t publish_time_ns,
                      const uint8_t* data, size_t size);
  // Closes the last chunk and writes DataEnd, the summary, the Footer and the trailing magic.
  Status Finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Writes an MCAP file durably (a temporary name, fsync, rename, directory fsync): fill is given
// the writer and must not call Finish.
Status WriteMcapFile(const std::string& path, const McapWriterOptions& options,
                     const std::function<Status(McapWriter&)>& fill);

}  // namespace dv::recorded
