// The MCAP reader, written by hand: no Debian package reads MCAP (see mcap.h and
// docs/recorded.md). Integers are little-endian; strings and byte arrays carry their length.
#include "dejaview/recorded/mcap.h"

#include <zlib.h>

#include <cstring>
#include <memory>

#include "decompress.h"
#include "dejaview/base/bytes.h"
#include "mapped_file.h"
#include "mcap_format.h"

namespace dv::recorded {
namespace {

using namespace mcap_format;  // mcap_format.h: the names both the reader and the writer use

uint32_t Crc32(const uint8_t* data, size_t size) {
  return uint32_t(crc32_z(crc32_z(0, nullptr, 0), data, size));
}

// The spec's field types on top of ByteReader: each returns false (and fails the reader) when
// the field would end past the record.
class FieldReader {
 public:
  FieldReader(const uint8_t* data, size_t size) : r_(data, size) {}
  bool U8(uint8_t* v) { return r_.U8(v); }
  bool U16(uint16_t* v) { return r_.U16(v); }
  bool U32(uint32_t* v) { return r_.U32(v); }
  bool U64(uint64_t* v) { return r_.U64(v); }
  bool Str(std::string* s) {
    ByteView v;
    if (!Bytes32(&v)) return false;
    s->assign(reinterpret_cast<const char*>(v.data), v.size);
    return true;
  }
  bool Bytes32(ByteView* v) {
    uint32_t n = 0;
    return r_.U32(&n) && View(n, v);
  }
  bool Bytes64(ByteView* v) {
    uint64_t n = 0;
    return r_.U64(&n) && View(n, v);
  }
  bool Rest(ByteView* v) { return View(r_.remaining(), v); }
  bool StringMap(McapStringMap* m) {
    ByteView v;
    if (!Bytes32(&v)) return false;
    FieldReader in(v.data, v.size);
    while (in.r_.remaining() > 0) {
      std::pair<std::string, std::string> kv;
      if (!in.Str(&kv.first) || !in.Str(&kv.second)) return Fail();
      m->push_back(std::move(kv));
    }
    return true;
  }
  bool U16U64Map(std::map<uint16_t, uint64_t>* m) {
    ByteView v;
    if (!Bytes32(&v)) return false;
    FieldReader in(v.data, v.size);
    while (in.r_.remaining() > 0) {
      uint16_t k = 0;
      uint64_t value = 0;
      if (!in.U16(&k) || !in.U64(&value)) return Fail();
      (*m)[k] = value;
    }
    return true;
  }

 private:
  bool View(uint64_t n, ByteView* v) {
    if (n > r_.remaining()) return Fail();
    v->size = size_t(n);
    return r_.View(&v->data, v->size);
  }
  bool Fail() {
    r_.Skip(r_.remaining() + 1);  // marks the reader failed
    return false;
  }
  ByteReader r_;
};

// Parses a known record's fields; bytes after them are padding. Returns false when a field
// ends past the record.
bool ParseFields(uint8_t op, FieldReader& f, McapRecord* out) {
  switch (op) {
    case kHeader: {
      McapHeader h;
      if (!f.Str(&h.profile) || !f.Str(&h.library)) return false;
      *out = std::move(h);
      return true;
    }
    case kFooter: {
      McapFooter h;
      if (!f.U64(&h.summary_start) || !f.U64(&h.summary_offset_start) || !f.U32(&h.summary_crc))
        return false;
      *out = h;
      return true;
    }
    case kSchema: {
      McapSchema s;
      if (!f.U16(&s.id) || !f.Str(&s.name) || !f.Str(&s.encoding) || !f.Bytes32(&s.data))
        return false;
      *out = std::move(s);
      return true;
    }
    case kChannel: {
      McapChannel c;
      if (!f.U16(&c.id) || !f.U16(&c.schema_id) || !f.Str(&c.topic) ||
          !f.Str(&c.message_encoding) || !f.StringMap(&c.metadata))
        return false;
      *out = std::move(c);
      return true;
    }
    case kMessage: {
      McapMessage m;
      if (!f.U16(&m.channel_id) || !f.U32(&m.sequence) || !f.U64(&m.log_time) ||
          !f.U64(&m.publish_time) || !f.Rest(&m.data))
        return false;
      *out = m;
      return true;
    }
    case kChunkIndex: {
      McapChunkIndex c;
      if (!f.U64(&c.message_start_time) || !f.U64(&c.message_end_time) ||
          !f.U64(&c.chunk_start_offset) || !f.U64(&c.chunk_length) ||
          !f.U16U64Map(&c.message_index_offsets) || !f.U64(&c.message_index_length) ||
          !f.Str(&c.compression) || !f.U64(&c.compressed_size) || !f.U64(&c.uncompressed_size))
        return false;
      *out = std::move(c);
      return true;
    }
    case kAttachment: {
      McapAttachment a;
      if (!f.U64(&a.log_time) || !f.U64(&a.create_time) || !f.Str(&a.name) ||
          !f.Str(&a.media_type) || !f.Bytes64(&a.data) || !f.U32(&a.crc))
        return false;
      *out = std::move(a);
      return true;
    }
    case kAttachmentIndex: {
      McapAttachmentIndex a;
      if (!f.U64(&a.offset) || !f.U64(&a.length) || !f.U64(&a.log_time) || !f.U64(&a.create_time) ||
          !f.U64(&a.data_size) || !f.Str(&a.name) || !f.Str(&a.media_type))
        return false;
      *out = std::move(a);
      return true;
    }
    case kStatistics: {
      McapStatistics s;
      if (!f.U64(&s.message_count) || !f.U16(&s.schema_count) || !f.U32(&s.channel_count) ||
          !f.U32(&s.attachment_count) || !f.U32(&s.metadata_count) || !f.U32(&s.chunk_count) ||
          !f.U64(&s.message_start_time) || !f.U64(&s.message_end_time) ||
          !f.U16U64Map(&s.channel_message_counts))
        return false;
      *out = std::move(s);
      return true;
    }
    case kMetadata: {
      McapMetadata m;
      if (!f.Str(&m.name) || !f.StringMap(&m.metadata)) return false;
      *out = std::move(m);
      return true;
    }
    case kMetadataIndex: {
      McapMetadataIndex m;
      if (!f.U64(&m.offset) || !f.U64(&m.length) || !f.Str(&m.name)) return false;
      *out = std::move(m);
      return true;
    }
    case kSummaryOffset: {
      McapSummaryOffset s;
      if (!f.U8(&s.group_opcode) || !f.U64(&s.group_start) || !f.U64(&s.group_length)) return false;
      *out = s;
      return true;
    }
    case kDataEnd: {
      McapDataEnd d;
      if (!f.U32(&d.data_section_crc)) return false;
      *out = d;
      return true;
    }
  }
  return false;
}

const char* OpName(uint8_t op) {
  static const char* const kNames[] = {
      "?",        "Header",        "Footer",        "Schema",     "Channel",         "Message",
      "Chunk",    "MessageIndex",  "ChunkIndex",    "Attachment", "AttachmentIndex", "Statistics",
      "Metadata", "MetadataIndex", "SummaryOffset", "DataEnd"};
  return op <= kDataEnd ? kNames[op] : "unknown";
}

struct Chunk {
  uint64_t message_start_time = 0, message_end_time = 0, uncompressed_size = 0;
  uint32_t uncompressed_crc = 0;
  std::string compression;
  ByteView records;
};

class Walker {
 public:
  Walker(const uint8_t* data, size_t size, const std::string& name, const McapVisitor& visit)
      : data_(data), size_(size), name_(name), visit_(visit) {}

  Status Run() {
    if (size_ < 2 * sizeof(kMagic) || std::memcmp(data_, kMagic, sizeof(kMagic)) != 0)
      return Error(0, "not an MCAP file (no leading magic)");
    uint64_t pos = sizeof(kMagic);
    for (;;) {
      if (size_ - pos < kRecordPrefix)
        return Error(pos, "truncated: the file ends before a Footer");
      const uint8_t op = data_[pos];
      uint64_t length = 0;
      std::memcpy(&length, data_ + pos + 1, 8);
      const uint64_t body = pos + kRecordPrefix;
      if (length > size_ - body) {
        return Error(pos, std::string(OpName(op)) + " record of " + std::to_string(length) +
                              " bytes runs past the end of the file (" + std::to_string(size_) +
                              " bytes)");
      }
      if (op == kFooter) return Footer(pos, length);
      DV_RETURN_IF_ERROR(Record(op, pos, {data_ + body, size_t(length)}));
      pos = body + length;
    }
  }

 private:
  Status Error(uint64_t offset, const std::string& what) const {
    return Status::Corruption(name_ + ": offset " + std::to_string(offset) + ": " + what);
  }

  Status Record(uint8_t op, uint64_t pos, ByteView body) {
    if (op == kChunk) return ChunkRecords(pos, body);
    if (op == kDataEnd) {
      DV_RETURN_IF_ERROR(Visit(op, pos, body));
      const uint32_t want = std::get<McapDataEnd>(last_).data_section_crc;
      if (want != 0 && Crc32(data_, size_t(pos)) != want)
        return Error(pos, "data section CRC mismatch");
      return Status::Ok();
    }
    return Visit(op, pos, body);
  }

  // Parses and yields one record; unknown opcodes and MessageIndex are skipped.
  Status Visit(uint8_t op, uint64_t pos, ByteView body, const char* where = "") {
    if (op == kMessageIndex || op < kHeader || op > kDataEnd) return Status::Ok();
    if (op == kChunk) return Error(pos, std::string(where) + "a Chunk inside a chunk");
    FieldReader f(body.data, body.size);
    if (!ParseFields(op, f, &last_))
      return Error(pos, std::string(where) + "truncated " + OpName(op) + " record");
    if (auto* a = std::get_if<McapAttachment>(&last_)) {
      // The attachment CRC covers every field before it.
      const size_t covered = size_t(a->data.data + a->data.size - body.data);
      if (a->crc != 0 && Crc32(body.data, covered) != a->crc)
        return Error(pos, std::string(where) + "attachment '" + a->name + "' CRC mismatch");
    }
    return visit_(last_);
  }

  Status ChunkRecords(uint64_t pos, ByteView body) {
    FieldReader f(body.data, body.size);
    Chunk c;
    if (!f.U64(&c.message_start_time) || !f.U64(&c.message_end_time) ||
        !f.U64(&c.uncompressed_size) || !f.U32(&c.uncompressed_crc) || !f.Str(&c.compression) ||
        !f.Bytes64(&c.records))
      return Error(pos, "truncated Chunk record");
    std::unique_ptr<uint8_t[]> owned;
    ByteView records;
    DV_RETURN_IF_ERROR(Decompress(pos, c, &owned, &records));
    if (c.uncompressed_crc != 0 && Crc32(records.data, records.size) != c.uncompressed_crc)
      return Error(pos, "chunk CRC mismatch");
    uint64_t at = 0;
    while (at < records.size) {
      const std::string where = "chunk record at offset " + std::to_string(at) + ": ";
      if (records.size - at < kRecordPrefix) return Error(pos, where + "truncated record header");
      const uint8_t op = records.data[at];
      uint64_t length = 0;
      std::memcpy(&length, records.data + at + 1, 8);
      if (length > records.size - at - kRecordPrefix)
        return Error(pos, where + OpName(op) + " record runs past the chunk's end");
      DV_RETURN_IF_ERROR(
          Visit(op, pos, {records.data + at + kRecordPrefix, size_t(length)}, where.c_str()));
      at += kRecordPrefix + length;
    }
    return Status::Ok();
  }

  Status Decompress(uint64_t pos, const Chunk& c, std::unique_ptr<uint8_t[]>* owned,
                    ByteView* out) const {
    const uint64_t in = c.records.size;
    if (c.compression.empty()) {
      if (c.uncompressed_size != in)
        return Error(pos, "uncompressed chunk of " + std::to_string(in) + " bytes declares " +
                              std::to_string(c.uncompressed_size));
      *out = c.records;
      return Status::Ok();
    }
    const bool lz4 = c.compression == "lz4";
    if (!lz4 && c.compression != "zstd")
      return Error(pos, "chunk compression '" + c.compression + "' is not lz4, zstd or none");
    const uint64_t bound = in * (lz4 ? kLz4MaxRatio : kZstdMaxRatio) + kRatioSlackBytes;
    if (c.uncompressed_size > kMaxChunkBytes || c.uncompressed_size > bound) {
      return Error(pos, "chunk uncompressed_size " + std::to_string(c.uncompressed_size) +
                            " is more than " + std::to_string(in) + " " + c.compression +
                            " bytes can hold");
    }
    const size_t n = size_t(c.uncompressed_size);
    owned->reset(new uint8_t[n == 0 ? 1 : n]);
    const bool ok = lz4 ? Lz4FrameDecompress(c.records, owned->get(), n)
                        : ZstdDecompress(c.records, owned->get(), n);
    if (!ok)
      return Error(pos,
                   c.compression + " chunk does not decode to its " + std::to_string(n) + " bytes");
    *out = {owned->get(), n};
    return Status::Ok();
  }

  Status Footer(uint64_t pos, uint64_t length) {
    const ByteView body{data_ + pos + kRecordPrefix, size_t(length)};
    DV_RETURN_IF_ERROR(Visit(kFooter, pos, body));
    const McapFooter& footer = std::get<McapFooter>(last_);
    const uint64_t end = pos + kRecordPrefix + length;
    if (size_ - end != sizeof(kMagic) || std::memcmp(data_ + end, kMagic, sizeof(kMagic)) != 0)
      return Error(end, "no trailing magic right after the Footer");
    const uint64_t start = footer.summary_start != 0 ? footer.summary_start : pos;
    if (start > pos)
      return Error(pos, "summary_start " + std::to_string(start) + " is past the Footer");
    // The summary CRC covers the summary section and the Footer up to summary_crc.
    const size_t covered = size_t(pos + kRecordPrefix + 16 - start);
    if (footer.summary_crc != 0 && Crc32(data_ + start, covered) != footer.summary_crc)
      return Error(pos, "summary CRC mismatch");
    return Status::Ok();
  }

  const uint8_t* data_;
  size_t size_;
  const std::string& name_;
  const McapVisitor& visit_;
  McapRecord last_;
};

}  // namespace

Status ReadMcap(const uint8_t* data, size_t size, const std::string& name,
                const McapVisitor& visit) {
  return Walker(data, size, name, visit).Run();
}

Status ReadMcapFile(const std::string& path, const McapVisitor& visit) {
  MappedFile file;
  DV_RETURN_IF_ERROR(file.Open(path));
  return ReadMcap(file.data(), file.size(), path, visit);
}

Status ReadMcapMessages(const uint8_t* data, size_t size, const std::string& name,
                        const McapMessageVisitor& visit) {
  struct SchemaName {
    std::string name, encoding;
  };
  std::map<uint16_t, SchemaName> schemas;
  std::map<uint16_t, McapChannel> channels;
  const SchemaName none;
  return ReadMcap(data, size, name, [&](const McapRecord& record) -> Status {
    if (const auto* s = std::get_if<McapSchema>(&record)) {
      if (s->id == 0) return Status::Corruption(name + ": schema id 0 is reserved");
      schemas[s->id] = {s->name, s->encoding};
    } else if (const auto* c = std::get_if<McapChannel>(&record)) {
      if (c->schema_id != 0 && schemas.count(c->schema_id) == 0) {
        return Status::Corruption(name + ": channel '" + c->topic + "' names schema " +
                                  std::to_string(c->schema_id) + ", not defined before it");
      }
      channels[c->id] = *c;
    } else if (const auto* m = std::get_if<McapMessage>(&record)) {
      const auto it = channels.find(m->channel_id);
      if (it == channels.end()) {
        return Status::Corruption(name + ": message on channel " + std::to_string(m->channel_id) +
                                  ", not defined before it");
      }
      const McapChannel& channel = it->second;
      const SchemaName& schema =
          channel.schema_id == 0 ? none : schemas.find(channel.schema_id)->second;
      return visit({&channel, &schema.name, &schema.encoding, m});
    }
    return Status::Ok();
  });
}

Status ReadMcapMessages(const std::string& path, const McapMessageVisitor& visit) {
  MappedFile file;
  DV_RETURN_IF_ERROR(file.Open(path));
  return ReadMcapMessages(file.data(), file.size(), path, visit);
}

}  // namespace dv::recorded
