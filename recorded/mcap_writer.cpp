// The MCAP writer (mcap_writer.h): written by hand, as no Debian package writes MCAP.
#include "dejaview/recorded/mcap_writer.h"

#include <lz4frame.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "dejaview/base/bytes.h"
#include "dejaview/base/file_util.h"
#include "mcap_format.h"

namespace dv::recorded {
namespace {

using namespace mcap_format;  // mcap_format.h: the names both the reader and the writer use

// MCAP's strings and maps carry a u32 byte length (ByteWriter::Str's is a varint).
void Str(ByteWriter* w, const std::string& s) {
  w->U32(uint32_t(s.size()));
  w->Bytes(s.data(), s.size());
}

void Record(ByteWriter* out, uint8_t op, const std::vector<uint8_t>& body) {
  out->U8(op);
  out->U64(body.size());
  out->Bytes(body.data(), body.size());
}

std::vector<uint8_t> U16U64Map(const std::map<uint16_t, uint64_t>& m) {
  ByteWriter w;
  w.U32(uint32_t(m.size() * 10));
  for (const auto& [k, v] : m) {
    w.U16(k);
    w.U64(v);
  }
  return w.Take();
}

uint32_t Crc32(uint32_t crc, const uint8_t* data, size_t size) {
  return uint32_t(crc32_z(crc, data, size));
}

}  // namespace

struct McapWriter::State {
  Sink sink;
  McapWriterOptions options;
  Status status;
  uint64_t offset = 0;
  uint32_t data_crc = 0;
  bool data_ended = false;
  std::vector<std::vector<uint8_t>> schemas, channels;  // record bodies, for the summary
  ByteWriter chunk;                                     // the open chunk's records
  uint64_t chunk_start_ns = 0, chunk_end_ns = 0;
  std::map<uint16_t, std::vector<std::pair<uint64_t, uint64_t>>> chunk_index;  // (time, offset)
  ByteWriter chunk_indexes;  // ChunkIndex records, for the summary
  uint64_t message_count = 0, start_ns = 0, end_ns = 0;
  uint32_t chunk_count = 0;
  std::map<uint16_t, uint64_t> channel_message_counts;

  Status Emit(const uint8_t* data, size_t size) {
    if (!status.ok()) return status;
    status = sink(data, size);
    offset += size;
    if (!data_ended) data_crc = Crc32(data_crc, data, size);
    return status;
  }
  Status Emit(ByteWriter& w) {
    const std::vector<uint8_t> bytes = w.Take();
    w.buffer().clear();  // Take leaves a moved-from vector
    return Emit(bytes.data(), bytes.size());
  }

  StatusOr<std::vector<uint8_t>> Compress(const std::vector<uint8_t>& in) const {
    const std::string& c = options.compression;
    if (c.empty()) return in;
    std::vector<uint8_t> out;
    if (c == "zstd") {
      out.resize(ZSTD_compressBound(in.size()));
      const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
      if (ZSTD_isError(n))
        return Status::InvalidArgument("zstd: " + std::string(ZSTD_getErrorName(n)));
      out.resize(n);
    } else if (c == "lz4") {
      out.resize(LZ4F_compressFrameBound(in.size(), nullptr));
      const size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), nullptr);
      if (LZ4F_isError(n))
        return Status::InvalidArgument("lz4: " + std::string(LZ4F_getErrorName(n)));
      out.resize(n);
    } else {
      return Status::InvalidArgument("MCAP compression '" + c + "' is not zstd, lz4 or none");
    }
    return out;
  }

  // Writes the open chunk, its MessageIndex records, and remembers its ChunkIndex.
  Status CloseChunk() {
    if (chunk.size() == 0) return status;
    const std::vector<uint8_t> records = chunk.Take();
    DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> packed, Compress(records));
    ByteWriter body;
    body.U64(chunk_start_ns);
    body.U64(chunk_end_ns);
    body.U64(records.size());
    body.U32(Crc32(0, records.data(), records.size()));
    Str(&body, options.compression);
    body.U64(packed.size());
    body.Bytes(packed.data(), packed.size());
    ByteWriter out;
    Record(&out, kChunk, body.Take());
    const uint64_t chunk_offset = offset, chunk_length = out.size();
    DV_RETURN_IF_ERROR(Emit(out));
    std::map<uint16_t, uint64_t> index_offsets;
    const uint64_t index_start = offset;
    for (const auto& [channel, entries] : chunk_index) {
      ByteWriter index;
      index.U16(channel);
      index.U32(uint32_t(entries.size() * 16));
      for (const auto& [t, at] : entries) {
        index.U64(t);
        index.U64(at);
      }
      index_offsets[channel] = offset;
      Record(&out, kMessageIndex, index.Take());
      DV_RETURN_IF_ERROR(Emit(out));
    }
    ByteWriter ci;
    ci.U64(chunk_start_ns);
    ci.U64(chunk_end_ns);
    ci.U64(chunk_offset);
    ci.U64(chunk_length);
    const auto map = U16U64Map(index_offsets);
    ci.Bytes(map.data(), map.size());
    ci.U64(offset - index_start);
    Str(&ci, options.compression);
    ci.U64(packed.size());
    ci.U64(records.size());
    Record(&chunk_indexes, kChunkIndex, ci.Take());
    chunk_index.clear();
    ++chunk_count;
    return status;
  }

  // One summary group: its records, and the SummaryOffset that points at them.
  Status Group(uint8_t op, const std::vector<uint8_t>& records, ByteWriter* offsets) {
    if (records.empty()) return status;
    ByteWriter so;
    so.U8(op);
    so.U64(offset);
    so.U64(records.size());
    Record(offsets, kSummaryOffset, so.Take());
    return Emit(records.data(), records.size());
  }
};

McapWriter::McapWriter(Sink sink, McapWriterOptions options) : s_(new State) {
  s_->sink = std::move(sink);
  s_->options = std::move(options);
  ByteWriter out, header;
  out.Bytes(kMagic, sizeof(kMagic));
  Str(&header, s_->options.profile);
  Str(&header, "dejaview");
  Record(&out, kHeader, header.Take());
  s_->Emit(out);
}

McapWriter::~McapWriter() = default;

uint16_t McapWriter::AddSchema(const std::string& name, const std::string& encoding,
                               const std::string& data) {
  const auto id = uint16_t(s_->schemas.size() + 1);
  ByteWriter body;
  body.U16(id);
  Str(&body, name);
  Str(&body, encoding);
  Str(&body, data);
  s_->schemas.push_back(body.Take());
  Record(&s_->chunk, kSchema, s_->schemas.back());
  return id;
}

uint16_t McapWriter::AddChannel(uint16_t schema_id, const std::string& topic,
                                const std::string& message_encoding,
                                const McapStringMap& metadata) {
  const auto id = uint16_t(s_->channels.size() + 1);
  ByteWriter body, map;
  body.U16(id);
  body.U16(schema_id);
  Str(&body, topic);
  Str(&body, message_encoding);
  for (const auto& [k, v] : metadata) {
    Str(&map, k);
    Str(&map, v);
  }
  body.U32(uint32_t(map.size()));
  body.Bytes(map.buffer().data(), map.size());
  s_->channels.push_back(body.Take());
  Record(&s_->chunk, kChannel, s_->channels.back());
  return id;
}

Status McapWriter::WriteMessage(uint16_t channel_id, uint64_t log_time_ns, uint64_t publish_time_ns,
                                const uint8_t* data, size_t size) {
  State& s = *s_;
  if (!s.status.ok()) return s.status;
  const bool first_in_chunk = s.chunk_index.empty();
  s.chunk_start_ns = first_in_chunk ? log_time_ns : std::min(s.chunk_start_ns, log_time_ns);
  s.chunk_end_ns = first_in_chunk ? log_time_ns : std::max(s.chunk_end_ns, log_time_ns);
  s.chunk_index[channel_id].emplace_back(log_time_ns, s.chunk.size());
  ByteWriter body;
  body.U16(channel_id);
  body.U32(uint32_t(s.channel_message_counts[channel_id]++));
  body.U64(log_time_ns);
  body.U64(publish_time_ns);
  s.chunk.U8(kMessage);
  s.chunk.U64(body.size() + size);
  s.chunk.Bytes(body.buffer().data(), body.size());
  s.chunk.Bytes(data, size);
  s.start_ns = s.message_count == 0 ? log_time_ns : std::min(s.start_ns, log_time_ns);
  s.end_ns = s.message_count == 0 ? log_time_ns : std::max(s.end_ns, log_time_ns);
  ++s.message_count;
  if (s.chunk.size() >= s.options.chunk_bytes) return s.CloseChunk();
  return s.status;
}

Status McapWriter::Finish() {
  State& s = *s_;
  DV_RETURN_IF_ERROR(s.CloseChunk());
  ByteWriter out, data_end;
  data_end.U32(s.data_crc);
  Record(&out, kDataEnd, data_end.Take());
  DV_RETURN_IF_ERROR(s.Emit(out));
  s.data_ended = true;

  const uint64_t summary_start = s.offset;
  ByteWriter schemas, channels, stats, offsets;
  for (const auto& b : s.schemas) Record(&schemas, kSchema, b);
  for (const auto& b : s.channels) Record(&channels, kChannel, b);
  ByteWriter st;
  st.U64(s.message_count);
  st.U16(uint16_t(s.schemas.size()));
  st.U32(uint32_t(s.channels.size()));
  st.U32(0);  // attachments
  st.U32(0);  // metadata
  st.U32(s.chunk_count);
  st.U64(s.start_ns);
  st.U64(s.end_ns);
  const auto counts = U16U64Map(s.channel_message_counts);
  st.Bytes(counts.data(), counts.size());
  Record(&stats, kStatistics, st.Take());
  // Every summary byte is kept to compute the summary CRC, which covers them and the Footer.
  std::vector<uint8_t> summary;
  const auto group = [&](uint8_t op, ByteWriter& records) {
    const std::vector<uint8_t> bytes = records.Take();
    records.buffer().clear();
    summary.insert(summary.end(), bytes.begin(), bytes.end());
    return s.Group(op, bytes, &offsets);
  };
  DV_RETURN_IF_ERROR(group(kSchema, schemas));
  DV_RETURN_IF_ERROR(group(kChannel, channels));
  DV_RETURN_IF_ERROR(group(kStatistics, stats));
  DV_RETURN_IF_ERROR(group(kChunkIndex, s.chunk_indexes));
  const uint64_t summary_offset_start = s.offset;
  const std::vector<uint8_t> offset_records = offsets.Take();
  summary.insert(summary.end(), offset_records.begin(), offset_records.end());
  DV_RETURN_IF_ERROR(s.Emit(offset_records.data(), offset_records.size()));

  ByteWriter footer;
  footer.U8(kFooter);
  footer.U64(20);
  footer.U64(summary_start);
  footer.U64(summary_offset_start);
  uint32_t summary_crc = Crc32(0, summary.data(), summary.size());
  summary_crc = Crc32(summary_crc, footer.buffer().data(), footer.size());
  footer.U32(summary_crc);
  footer.Bytes(kMagic, sizeof(kMagic));
  return s.Emit(footer);
}

Status WriteMcapFile(const std::string& path, const McapWriterOptions& options,
                     const std::function<Status(McapWriter&)>& fill) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::IoError(tmp + ": " + std::strerror(errno));
  McapWriter writer(
      [&](const uint8_t* data, size_t size) {
        if (std::fwrite(data, 1, size, f) != size)
          return Status::IoError(tmp + ": write: " + std::strerror(errno));
        return Status::Ok();
      },
      options);
  Status s = fill(writer);
  if (s.ok()) s = writer.Finish();
  if (s.ok() && (std::fflush(f) != 0 || ::fsync(fileno(f)) != 0))
    s = Status::IoError(tmp + ": " + std::strerror(errno));
  if (std::fclose(f) != 0 && s.ok()) s = Status::IoError(tmp + ": close: " + std::strerror(errno));
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = Status::IoError(path + ": rename: " + std::strerror(errno));
  if (!s.ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return FsyncDir(dir.empty() ? "." : dir);
}

}  // namespace dv::recorded
