// ROS 1 bags, format 2.0, read by hand: no Debian package reads them without the ROS 1 C++
// stack. Spec (docs/recorded.md, from wiki.ros.org/Bags/Format/2.0):
//   "#ROSBAG V2.0\n", then records: header_len u32, header, data_len u32, data
//   header = fields: field_len u32, "name=value" (value binary; the name ends at the first '=')
//   op (u8) 0x03 bag header, 0x05 chunk (compression "none" | "bz2" | "lz4", size u32: the
//   uncompressed size; data: the chunk's records), 0x07 connection (conn u32, topic; data: the
//   connection header's fields, type among them), 0x02 message data (conn u32, time: sec u32 and
//   nsec u32; data: the message, ROS 1 serialization), 0x04 index data and 0x06 chunk info
//   (skipped: the records are walked in file order and the index is not needed).
// Every length is checked against the bytes left; errors name the file and the record's byte
// offset (inside a chunk: the chunk's offset and the record's offset in the uncompressed chunk).
#include <cstring>
#include <map>
#include <memory>

#include "decompress.h"
#include "dejaview/base/bytes.h"
#include "dejaview/recorded/recording.h"

namespace dv::recorded {
namespace {

constexpr char kMagic[] = "#ROSBAG V2.0\n";
constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
constexpr uint8_t kOpMessage = 0x02, kOpBagHeader = 0x03, kOpIndex = 0x04, kOpChunk = 0x05,
                  kOpChunkInfo = 0x06, kOpConnection = 0x07;
constexpr size_t kMaxFieldName = 64;

struct Connection {
  std::string topic, type;
  const std::string encoding = "ros1";
};

// A record's header fields by name.
using Fields = std::map<std::string, ByteView>;

class Walker {
 public:
  Walker(const std::string& name, const RecordedVisitor& visit) : name_(name), visit_(visit) {}

  // Walks the records of data; base is data's offset in the file (for the messages), chunk the
  // offset of the chunk holding them (0: top level).
  Status Records(const uint8_t* data, size_t size, uint64_t base, uint64_t chunk) {
    ByteReader r(data, size);
    while (r.remaining() > 0) {
      const uint64_t at = base + uint64_t(r.position() - data);
      uint32_t header_len = 0, data_len = 0;
      const uint8_t *header = nullptr, *body = nullptr;
      if (!r.U32(&header_len) || !r.View(&header, header_len) || !r.U32(&data_len) ||
          !r.View(&body, data_len))
        return Error(at, chunk, "record longer than the bytes left");
      Fields fields;
      DV_RETURN_IF_ERROR(ParseFields(header, header_len, at, chunk, &fields));
      uint8_t op = 0;
      DV_RETURN_IF_ERROR(Get(fields, "op", at, chunk, &op));
      if (chunk != 0 && op != kOpMessage && op != kOpConnection)
        return Error(at, chunk, "record op " + std::to_string(op) + " inside a chunk");
      switch (op) {
        case kOpMessage:
          DV_RETURN_IF_ERROR(Message(fields, body, data_len, at, chunk));
          break;
        case kOpConnection:
          DV_RETURN_IF_ERROR(AddConnection(fields, body, data_len, at, chunk));
          break;
        case kOpChunk:
          DV_RETURN_IF_ERROR(Chunk(fields, body, data_len, at));
          break;
        case kOpBagHeader:
        case kOpIndex:
        case kOpChunkInfo:
          break;
        default:
          return Error(at, chunk, "unknown record op " + std::to_string(op));
      }
    }
    return Status::Ok();
  }

 private:
  Status Error(uint64_t at, uint64_t chunk, const std::string& what) const {
    return Status::Corruption(name_ + ": " +
                              (chunk != 0 ? "chunk at byte offset " + std::to_string(chunk) +
                                                ": record at uncompressed offset "
                                          : std::string("record at byte offset ")) +
                              std::to_string(at) + ": " + what);
  }

  Status ParseFields(const uint8_t* p, size_t n, uint64_t at, uint64_t chunk, Fields* out) const {
    ByteReader r(p, n);
    while (r.remaining() > 0) {
      uint32_t len = 0;
      const uint8_t* field = nullptr;
      if (!r.U32(&len) || !r.View(&field, len))
        return Error(at, chunk, "header field longer than its header");
      size_t eq = 0;
      while (eq < len && eq <= kMaxFieldName && field[eq] != '=') ++eq;
      if (eq == len || eq > kMaxFieldName) return Error(at, chunk, "header field without '='");
      (*out)[std::string(reinterpret_cast<const char*>(field), eq)] = {field + eq + 1,
                                                                       len - eq - 1};
    }
    return Status::Ok();
  }

  template <typename T>
  Status Get(const Fields& f, const char* key, uint64_t at, uint64_t chunk, T* v) const {
    const auto it = f.find(key);
    if (it == f.end() || it->second.size != sizeof(T))
      return Error(at, chunk,
                   std::string("header field '") + key + "' missing or not " +
                       std::to_string(sizeof(T)) + " bytes");
    std::memcpy(v, it->second.data, sizeof(T));
    return Status::Ok();
  }
  Status GetString(const Fields& f, const char* key, uint64_t at, uint64_t chunk,
                   std::string* v) const {
    const auto it = f.find(key);
    if (it == f.end()) return Error(at, chunk, std::string("header field '") + key + "' missing");
    v->assign(reinterpret_cast<const char*>(it->second.data), it->second.size);
    return Status::Ok();
  }

  Status AddConnection(const Fields& f, const uint8_t* body, size_t n, uint64_t at,
                       uint64_t chunk) {
    uint32_t id = 0;
    DV_RETURN_IF_ERROR(Get(f, "conn", at, chunk, &id));
    Connection c;
    DV_RETURN_IF_ERROR(GetString(f, "topic", at, chunk, &c.topic));
    Fields header;
    DV_RETURN_IF_ERROR(ParseFields(body, n, at, chunk, &header));
    DV_RETURN_IF_ERROR(GetString(header, "type", at, chunk, &c.type));
    // A connection is written twice (in its chunk and in the index section): the first stays.
    connections_.emplace(id, std::move(c));
    return Status::Ok();
  }

  Status Message(const Fields& f, const uint8_t* body, size_t n, uint64_t at, uint64_t chunk) {
    uint32_t id = 0;
    uint64_t time = 0;
    DV_RETURN_IF_ERROR(Get(f, "conn", at, chunk, &id));
    DV_RETURN_IF_ERROR(Get(f, "time", at, chunk, &time));
    const auto it = connections_.find(id);
    if (it == connections_.end())
      return Error(at, chunk,
                   "message on connection " + std::to_string(id) + ", not defined before it");
    const uint64_t log_time_ns = (time & 0xffffffffu) * 1000000000u + (time >> 32);
    return visit_(
        {&it->second.topic, &it->second.type, &it->second.encoding, log_time_ns, {body, n}});
  }

  Status Chunk(const Fields& f, const uint8_t* body, size_t n, uint64_t at) {
    std::string compression;
    uint32_t size = 0;
    DV_RETURN_IF_ERROR(GetString(f, "compression", at, 0, &compression));
    DV_RETURN_IF_ERROR(Get(f, "size", at, 0, &size));
    if (compression == "none") {
      if (size != n)
        return Error(at, 0,
                     "uncompressed chunk of " + std::to_string(n) + " bytes declares " +
                         std::to_string(size));
      return Records(body, n, 0, at);
    }
    const bool lz4 = compression == "lz4";
    if (!lz4 && compression != "bz2")
      return Error(at, 0, "chunk compression '" + compression + "' is not none, bz2 or lz4");
    if (size > kMaxChunkBytes || (lz4 && size > uint64_t(n) * kLz4MaxRatio + kRatioSlackBytes))
      return Error(at, 0,
                   "chunk size " + std::to_string(size) + " is more than " + std::to_string(n) +
                       " " + compression + " bytes can hold");
    std::unique_ptr<uint8_t[]> records(new uint8_t[size == 0 ? 1 : size]);
    const ByteView in{body, n};
    if (!(lz4 ? Lz4FrameDecompress(in, records.get(), size)
              : Bz2Decompress(in, records.get(), size)))
      return Error(
          at, 0, compression + " chunk does not decode to its " + std::to_string(size) + " bytes");
    return Records(records.get(), size, 0, at);
  }

  const std::string& name_;
  const RecordedVisitor& visit_;
  std::map<uint32_t, Connection> connections_;
};

}  // namespace

Status ReadRos1Bag(const uint8_t* data, size_t size, const std::string& name,
                   const RecordedVisitor& visit) {
  if (size < kMagicBytes || std::memcmp(data, kMagic, kMagicBytes) != 0)
    return Status::Corruption(name + ": not a ROS 1 bag of format 2.0 (no '#ROSBAG V2.0' magic)");
  return Walker(name, visit).Records(data + kMagicBytes, size - kMagicBytes, kMagicBytes, 0);
}

}  // namespace dv::recorded
