// Map-sync protocol messages (spec: docs/map-sync.md): a vehicle asks the server for its latest
// route map version and fetches the manifest and the tiles it lacks in bounded chunks. The
// messages travel on the upload ROUTER (their first byte, kMapSyncMagic, is never an upload
// protocol version), one ZeroMQ frame each. DecodeMapSync is strict and bounded: a short field,
// a value past its bound, a CRC mismatch or a trailing byte is a Corruption naming the field,
// and no allocation exceeds kMaxMapChunkBytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/status.h"

namespace dv::transport {

constexpr uint8_t kMapSyncMagic = 0x4d;  // 'M'
constexpr uint8_t kMapSyncVersion = 1;
constexpr uint32_t kMaxMapChunkBytes = 1u << 20;
constexpr uint64_t kMaxMapFileBytes = uint64_t(64) << 20;  // a manifest or a tile file
constexpr size_t kMaxMapSyncDetailBytes = 256;

enum class MapSyncType : uint8_t {
  kLatestRequest = 1,
  kLatest = 2,
  kChunkRequest = 3,
  kChunk = 4,
  kError = 5
};
enum class MapFile : uint8_t { kManifest = 0, kTile = 1 };
enum class MapSyncError : uint8_t {
  kBadMessage = 1,    // did not parse
  kVersion = 2,       // protocol version not spoken by the server
  kNoMap = 3,         // the server has no maps root or no published version
  kNotFound = 4,      // no such map version or tile
  kIo = 5,            // the server could not read the file; retry later
  kUnauthorized = 6,  // the connection's CURVE key is no longer enrolled (docs/security.md)
};

struct MapSyncMessage {
  MapSyncType type = MapSyncType::kLatestRequest;
  uint8_t version = kMapSyncVersion;
  // LATEST_REQUEST: the version the vehicle holds (may be empty); LATEST: the newest published
  // (empty: none); CHUNK_REQUEST, CHUNK: the version the file belongs to.
  std::string map_version;
  uint64_t manifest_bytes = 0;  // LATEST
  // CHUNK_REQUEST, CHUNK: which file (the tile key for kTile, zeros for the manifest) and where.
  MapFile file = MapFile::kManifest;
  std::array<int32_t, 3> tile = {0, 0, 0};
  uint64_t offset = 0;
  uint32_t max_len = 0;       // CHUNK_REQUEST: 1 .. kMaxMapChunkBytes
  uint64_t total = 0;         // CHUNK: the whole file's size
  std::vector<uint8_t> data;  // CHUNK: file bytes [offset, offset + data.size())
  MapSyncError error = MapSyncError::kBadMessage;  // ERROR
  std::string detail;                              // ERROR
};

std::vector<uint8_t> EncodeMapSync(const MapSyncMessage& m);
// InvalidArgument for a protocol version other than kMapSyncVersion (checked before the body),
// Corruption for anything else that is wrong.
StatusOr<MapSyncMessage> DecodeMapSync(const uint8_t* data, size_t size);
const char* MapSyncTypeName(MapSyncType t);
// A map version as the maps root names it: exactly 16 lowercase hex digits.
bool IsMapVersionName(const std::string& s);

}  // namespace dv::transport
