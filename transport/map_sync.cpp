#include "dejaview/transport/map_sync.h"

#include <cstdlib>

#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"

namespace dv::transport {
namespace {

// The map format's own bound on tile keys (docs/map-format.md).
constexpr int32_t kMaxTileKey = 1 << 22;

Status Bad(const std::string& what) { return Status::Corruption("map-sync message: " + what); }

void WriteFileRef(const MapSyncMessage& m, ByteWriter* w) {
  w->Str(m.map_version);
  w->U8(uint8_t(m.file));
  for (int32_t k : m.tile) w->U32(uint32_t(k));
  w->U64(m.offset);
}

Status ReadFileRef(const char* what, ByteReader* r, MapSyncMessage* m) {
  const std::string name = what;
  uint8_t file = 0;
  if (!r->Str(&m->map_version, 16) || !IsMapVersionName(m->map_version))
    return Bad(name + " map version: truncated or not 16 hex digits");
  if (!r->U8(&file) || file > uint8_t(MapFile::kTile)) return Bad(name + " file: not 0 or 1");
  m->file = MapFile(file);
  for (int ax = 0; ax < 3; ++ax) {
    uint32_t k = 0;
    if (!r->U32(&k)) return Bad(name + " tile key: truncated");
    m->tile[ax] = int32_t(k);
    if (std::abs(int64_t(m->tile[ax])) > kMaxTileKey) return Bad(name + " tile key: beyond +-2^22");
  }
  if (m->file == MapFile::kManifest && m->tile != std::array<int32_t, 3>{0, 0, 0})
    return Bad(name + " tile key: not 0 0 0 for the manifest");
  if (!r->U64(&m->offset)) return Bad(name + " offset: truncated");
  if (m->offset > kMaxMapFileBytes) return Bad(name + " offset: beyond 64 MiB");
  return Status::Ok();
}

}  // namespace

bool IsMapVersionName(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

const char* MapSyncTypeName(MapSyncType t) {
  switch (t) {
    case MapSyncType::kLatestRequest:
      return "LATEST_REQUEST";
    case MapSyncType::kLatest:
      return "LATEST";
    case MapSyncType::kChunkRequest:
      return "CHUNK_REQUEST";
    case MapSyncType::kChunk:
      return "CHUNK";
    case MapSyncType::kError:
      return "ERROR";
  }
  return "?";
}

std::vector<uint8_t> EncodeMapSync(const MapSyncMessage& m) {
  ByteWriter w;
  w.U8(kMapSyncMagic);
  w.U8(m.version);
  w.U8(uint8_t(m.type));
  switch (m.type) {
    case MapSyncType::kLatestRequest:
      w.Str(m.map_version);
      break;
    case MapSyncType::kLatest:
      w.Str(m.map_version);
      w.U64(m.manifest_bytes);
      break;
    case MapSyncType::kChunkRequest:
      WriteFileRef(m, &w);
      w.U32(m.max_len);
      break;
    case MapSyncType::kChunk: {
      WriteFileRef(m, &w);
      w.U64(m.total);
      w.U32(uint32_t(m.data.size()));
      w.Bytes(m.data.data(), m.data.size());
      w.U32(crc32c::Mask(crc32c::Value(w.buffer().data(), w.size())));
      break;
    }
    case MapSyncType::kError:
      w.U8(uint8_t(m.error));
      w.Str(m.detail.substr(0, kMaxMapSyncDetailBytes));
      break;
  }
  return w.Take();
}

StatusOr<MapSyncMessage> DecodeMapSync(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  MapSyncMessage m;
  uint8_t magic = 0, type = 0;
  if (!r.U8(&magic) || !r.U8(&m.version) || !r.U8(&type))
    return Bad("shorter than its 3-byte header");
  if (magic != kMapSyncMagic) return Bad("magic byte " + std::to_string(magic) + " is not 0x4d");
  // The version is checked before the body: a newer agent gets an ERROR it can act on.
  if (m.version != kMapSyncVersion) {
    return Status::InvalidArgument("map-sync message: protocol version " +
                                   std::to_string(m.version) + " (this side speaks " +
                                   std::to_string(kMapSyncVersion) + ")");
  }
  if (type < uint8_t(MapSyncType::kLatestRequest) || type > uint8_t(MapSyncType::kError))
    return Bad("unknown type " + std::to_string(type));
  m.type = MapSyncType(type);
  switch (m.type) {
    case MapSyncType::kLatestRequest:
    case MapSyncType::kLatest: {
      const std::string name = MapSyncTypeName(m.type);
      if (!r.Str(&m.map_version, 16) || !(m.map_version.empty() || IsMapVersionName(m.map_version)))
        return Bad(name + " map version: truncated or not empty / 16 hex digits");
      if (m.type == MapSyncType::kLatestRequest) break;
      if (!r.U64(&m.manifest_bytes)) return Bad("LATEST manifest bytes: truncated");
      if (m.manifest_bytes > kMaxMapFileBytes) return Bad("LATEST manifest bytes: above 64 MiB");
      if ((m.manifest_bytes == 0) != m.map_version.empty())
        return Bad("LATEST manifest bytes: 0 exactly when no version is published");
      break;
    }
    case MapSyncType::kChunkRequest: {
      DV_RETURN_IF_ERROR(ReadFileRef("CHUNK_REQUEST", &r, &m));
      if (!r.U32(&m.max_len)) return Bad("CHUNK_REQUEST max_len: truncated");
      if (m.max_len == 0 || m.max_len > kMaxMapChunkBytes)
        return Bad("CHUNK_REQUEST max_len: not 1 .. 1 MiB");
      break;
    }
    case MapSyncType::kChunk: {
      DV_RETURN_IF_ERROR(ReadFileRef("CHUNK", &r, &m));
      uint32_t len = 0;
      const uint8_t* bytes = nullptr;
      if (!r.U64(&m.total)) return Bad("CHUNK total: truncated");
      if (m.total > kMaxMapFileBytes) return Bad("CHUNK total: above 64 MiB");
      if (m.offset > m.total) return Bad("CHUNK offset: past the file's end");
      if (!r.U32(&len)) return Bad("CHUNK length: truncated");
      if (len > kMaxMapChunkBytes || len > m.total - m.offset)
        return Bad("CHUNK length: above 1 MiB or past the file's end");
      if (len == 0 && m.offset != m.total) return Bad("CHUNK length: 0 before the file's end");
      if (!r.View(&bytes, len)) return Bad("CHUNK data: truncated");
      const size_t covered = size - r.remaining();
      uint32_t crc = 0;
      if (!r.U32(&crc)) return Bad("CHUNK crc: truncated");
      if (crc32c::Unmask(crc) != crc32c::Value(data, covered))
        return Bad("CHUNK crc: mismatch (altered in transit)");
      m.data.assign(bytes, bytes + len);
      break;
    }
    case MapSyncType::kError: {
      uint8_t code = 0;
      if (!r.U8(&code) || code < uint8_t(MapSyncError::kBadMessage) ||
          code > uint8_t(MapSyncError::kUnauthorized))
        return Bad("ERROR code: truncated or unknown");
      m.error = MapSyncError(code);
      if (!r.Str(&m.detail, kMaxMapSyncDetailBytes))
        return Bad("ERROR detail: truncated or above 256 bytes");
      break;
    }
  }
  if (r.remaining() != 0) {
    return Bad(std::to_string(r.remaining()) + " trailing bytes after " + MapSyncTypeName(m.type));
  }
  return m;
}

}  // namespace dv::transport
