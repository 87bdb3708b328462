// MCAP's record-level constants, shared by the reader (mcap.cpp) and the writer (mcap_writer.cpp)
// so that the two cannot drift apart (https://mcap.dev/spec).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dv::recorded::mcap_format {

constexpr uint8_t kMagic[8] = {0x89, 'M', 'C', 'A', 'P', '0', '\r', '\n'};
constexpr size_t kRecordPrefix = 9;  // opcode u8, body length u64

enum Op : uint8_t {
  kHeader = 0x01,
  kFooter = 0x02,
  kSchema = 0x03,
  kChannel = 0x04,
  kMessage = 0x05,
  kChunk = 0x06,
  kMessageIndex = 0x07,
  kChunkIndex = 0x08,
  kAttachment = 0x09,
  kAttachmentIndex = 0x0A,
  kStatistics = 0x0B,
  kMetadata = 0x0C,
  kMetadataIndex = 0x0D,
  kSummaryOffset = 0x0E,
  kDataEnd = 0x0F,
};

}  // namespace dv::recorded::mcap_format
