#include "dejaview/server/map_service.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "dejaview/maps/map_root.h"

namespace dv::server {

using transport::MapFile;
using transport::MapSyncError;
using transport::MapSyncMessage;
using transport::MapSyncType;

namespace {

namespace fs = std::filesystem;

MapSyncMessage Error(MapSyncError code, const std::string& detail) {
  MapSyncMessage m;
  m.type = MapSyncType::kError;
  m.error = code;
  m.detail = detail;
  return m;
}

}  // namespace

std::vector<uint8_t> MapService::Handle(const std::string& key, const KeyRing* keys,
                                        const uint8_t* data, size_t size) {
  ++stats_.requests;
  auto req = transport::DecodeMapSync(data, size);
  MapSyncMessage reply;
  if (keys && !keys->VehicleOf(key)) {
    reply = Error(MapSyncError::kUnauthorized, "this key is no longer enrolled");
  } else if (!req.ok()) {
    const bool version = req.status().code() == Status::Code::kInvalidArgument;
    reply =
        Error(version ? MapSyncError::kVersion : MapSyncError::kBadMessage, req.status().message());
  } else {
    reply = Answer(*req);
  }
  if (reply.type == MapSyncType::kError) {
    ++stats_.errors;
    spdlog::warn("map service: {}", reply.detail);
  }
  return transport::EncodeMapSync(reply);
}

MapSyncMessage MapService::Answer(const MapSyncMessage& req) {
  if (root_.empty()) return Error(MapSyncError::kNoMap, "this server has no maps root (--maps)");
  switch (req.type) {
    case MapSyncType::kLatestRequest: {
      auto latest = maps::ReadLatest(root_);
      if (!latest.ok()) return Error(MapSyncError::kIo, latest.status().message());
      MapSyncMessage m;
      m.type = MapSyncType::kLatest;
      if (latest->empty()) return m;  // nothing published yet
      std::error_code ec;
      const uintmax_t bytes = fs::file_size(root_ + "/" + *latest + "/MANIFEST", ec);
      if (ec || bytes == 0 || bytes > transport::kMaxMapFileBytes)
        return Error(MapSyncError::kIo, "map version " + *latest + ": no readable MANIFEST");
      m.map_version = *latest;
      m.manifest_bytes = bytes;
      return m;
    }
    case MapSyncType::kChunkRequest: {
      // The version is 16 hex digits and the tile key three integers (checked by the parser):
      // the path cannot leave the maps root.
      const std::string name =
          req.file == MapFile::kManifest
              ? std::string("MANIFEST")
              : maps::TileFileName(maps::VoxelKey(req.tile[0], req.tile[1], req.tile[2]));
      const std::string path = root_ + "/" + req.map_version + "/" + name;
      std::ifstream in(path, std::ios::binary);
      std::error_code ec;
      const uintmax_t total = fs::file_size(path, ec);
      if (!in || ec) return Error(MapSyncError::kNotFound, req.map_version + "/" + name);
      if (total > transport::kMaxMapFileBytes)
        return Error(MapSyncError::kIo, path + ": larger than 64 MiB");
      if (req.offset > total) return Error(MapSyncError::kBadMessage, name + ": offset past end");
      MapSyncMessage m;
      m.type = MapSyncType::kChunk;
      m.map_version = req.map_version;
      m.file = req.file;
      m.tile = req.tile;
      m.offset = req.offset;
      m.total = total;
      m.data.resize(size_t(std::min<uint64_t>(req.max_len, total - req.offset)));
      in.seekg(std::streamoff(req.offset));
      if (!in.read(reinterpret_cast<char*>(m.data.data()), std::streamsize(m.data.size())))
        return Error(MapSyncError::kIo, path + ": read failed");
      ++stats_.chunks_served;
      stats_.bytes_served += m.data.size();
      return m;
    }
    case MapSyncType::kLatest:
    case MapSyncType::kChunk:
    case MapSyncType::kError:
      break;
  }
  return Error(MapSyncError::kBadMessage,
               std::string(transport::MapSyncTypeName(req.type)) + " is not sent to a server");
}

}  // namespace dv::server
