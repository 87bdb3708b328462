// MCAP, the ROS 2 default recording format (spec: docs/recorded.md, after mcap.dev/spec).
// No Debian package reads MCAP, so this reader is written by hand against the published
// specification and checked against the MCAP project's own conformance suite.
//
// ReadMcap walks a file as the spec's streamed reader does: every record in file order, the
// records inside each Chunk in place of the Chunk, MessageIndex records skipped (they only
// index chunks), unknown opcodes skipped, bytes after a record's known fields ("padding")
// ignored. CRCs that are not 0 are checked (data section, summary, chunk, attachment).
//
// A caller may rely on: no read past the input; every length is checked against the bytes that
// remain before it is used, and a chunk's uncompressed size against what its compressed bytes
// can decode to, so no allocation exceeds a bound set by the input's size; any failure is a
// Status naming the input and the byte offset of the record at fault.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dejaview/base/status.h"

namespace dv::recorded {

// Bytes inside the input (or inside a chunk's decompressed records): valid during the callback.
struct ByteView {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

using McapStringMap = std::vector<std::pair<std::string, std::string>>;  // in file order

struct McapHeader {
  std::string profile, library;
};
struct McapFooter {
  uint64_t summary_start = 0, summary_offset_start = 0;
  uint32_t summary_crc = 0;
};
struct McapSchema {
  uint16_t id = 0;
  std::string name, encoding;
  ByteView data;
};
struct McapChannel {
  uint16_t id = 0, schema_id = 0;
  std::string topic, message_encoding;
  McapStringMap metadata;
};
struct McapMessage {
  uint16_t channel_id = 0;
  uint32_t sequence = 0;
  uint64_t log_time = 0, publish_time = 0;
  ByteView data;
};
struct McapChunkIndex {
  uint64_t message_start_time = 0, message_end_time = 0, chunk_start_offset = 0, chunk_length = 0;
  std::map<uint16_t, uint64_t> message_index_offsets;
  uint64_t message_index_length = 0;
  std::string compression;
  uint64_t compressed_size = 0, uncompressed_size = 0;
};
struct McapAttachment {
  uint64_t log_time = 0, create_time = 0;
  std::string name, media_type;
  ByteView data;
  uint32_t crc = 0;
};
struct McapAttachmentIndex {
  uint64_t offset = 0, length = 0, log_time = 0, create_time = 0, data_size = 0;
  std::string name, media_type;
};
struct McapStatistics {
  uint64_t message_count = 0;
  uint16_t schema_count = 0;
  uint32_t channel_count = 0, attachment_count = 0, metadata_count = 0, chunk_count = 0;
  uint64_t message_start_time = 0, message_end_time = 0;
  std::map<uint16_t, uint64_t> channel_message_counts;
};
struct McapMetadata {
  std::string name;
  McapStringMap metadata;
};
struct McapMetadataIndex {
  uint64_t offset = 0, length = 0;
  std::string name;
};
struct McapSummaryOffset {
  uint8_t group_opcode = 0;
  uint64_t group_start = 0, group_length = 0;
};
struct McapDataEnd {
  uint32_t data_section_crc = 0;
};

using McapRecord = std::variant<McapHeader, McapFooter, McapSchema, McapChannel, McapMessage,
                                McapChunkIndex, McapAttachment, McapAttachmentIndex, McapStatistics,
                                McapMetadata, McapMetadataIndex, McapSummaryOffset, McapDataEnd>;

// The visitor's error stops the walk and is returned as it is.
using McapVisitor = std::function<Status(const McapRecord&)>;

// name is for the messages ("drive.mcap: offset 1234: ...").
Status ReadMcap(const uint8_t* data, size_t size, const std::string& name,
                const McapVisitor& visit);
// Maps the file read-only (a drive is often larger than memory) and reads it.
Status ReadMcapFile(const std::string& path, const McapVisitor& visit);

// A message with its channel and the channel's schema name and encoding resolved (both empty
// for schema id 0).
struct McapMessageView {
  const McapChannel* channel = nullptr;
  const std::string* schema_name = nullptr;
  const std::string* schema_encoding = nullptr;
  const McapMessage* message = nullptr;
};
using McapMessageVisitor = std::function<Status(const McapMessageView&)>;
// Every Message in file order; a message on a channel (or a channel on a schema) not yet
// defined is an error naming its offset.
Status ReadMcapMessages(const std::string& path, const McapMessageVisitor& visit);
Status ReadMcapMessages(const uint8_t* data, size_t size, const std::string& name,
                        const McapMessageVisitor& visit);

}  // namespace dv::recorded
