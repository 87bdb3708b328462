#include "dejaview/agent/map_sync.h"

#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "dejaview/agent/uploader.h"
#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"
#include "dejaview/maps/map_root.h"
#include "dejaview/maps/route_map.h"
#include "dejaview/transport/map_sync.h"

namespace dv::agent {
namespace {

namespace fs = std::filesystem;
using transport::MapFile;
using transport::MapSyncMessage;
using transport::MapSyncType;

struct Fetcher {
  const MapExchange& exchange;
  uint32_t chunk_bytes;
  MapSyncResult* result;

  StatusOr<MapSyncMessage> Ask(const MapSyncMessage& req, MapSyncType want) {
    const std::vector<uint8_t> bytes = transport::EncodeMapSync(req);
    DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> reply, exchange(bytes));
    result->bytes_on_wire += bytes.size() + reply.size();
    DV_ASSIGN_OR_RETURN(MapSyncMessage m, transport::DecodeMapSync(reply.data(), reply.size()));
    if (m.type == MapSyncType::kError) return Status::Unavailable("map sync: server: " + m.detail);
    if (m.type != want) {
      return Status::Corruption(std::string("map sync: got ") + transport::MapSyncTypeName(m.type) +
                                ", expected " + transport::MapSyncTypeName(want));
    }
    return m;
  }

  // The whole file, which the manifest (or LATEST) says is `size` bytes, in chunks.
  StatusOr<std::vector<uint8_t>> File(const std::string& version, MapFile file,
                                      const maps::VoxelKey& tile, uint64_t size,
                                      const std::string& name) {
    if (size > transport::kMaxMapFileBytes)
      return Status::Corruption("map sync: " + name + ": " + std::to_string(size) +
                                " bytes, above 64 MiB");
    std::vector<uint8_t> out;
    out.reserve(size_t(size));
    while (out.size() < size) {
      MapSyncMessage req;
      req.type = MapSyncType::kChunkRequest;
      req.map_version = version;
      req.file = file;
      req.tile = {tile.x(), tile.y(), tile.z()};
      req.offset = out.size();
      req.max_len = uint32_t(std::min<uint64_t>(chunk_bytes, size - out.size()));
      auto m = Ask(req, MapSyncType::kChunk);
      if (!m.ok()) return m.status().WithContext(name);
      if (m->map_version != version || m->file != file || m->tile != req.tile ||
          m->offset != req.offset) {
        return Status::Corruption("map sync: " + name + ": a chunk of another file or offset");
      }
      if (m->total != size) {
        return Status::Corruption("map sync: " + name + ": the server's file is " +
                                  std::to_string(m->total) + " bytes, the manifest says " +
                                  std::to_string(size));
      }
      if (m->data.empty()) return Status::Corruption("map sync: " + name + ": empty chunk");
      out.insert(out.end(), m->data.begin(), m->data.end());
      result->bytes_fetched += m->data.size();
    }
    return out;
  }
};

// current: the map in use (null for none), whose unchanged tiles are copied from current_dir.
Status Stage(Fetcher* fetch, const std::string& version, uint64_t manifest_bytes,
             const maps::RouteMap* current, const std::string& current_dir,
             const std::string& staging) {
  DV_RETURN_IF_ERROR(MakeDirs(staging + "/tiles"));
  DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> manifest,
                      fetch->File(version, MapFile::kManifest, maps::VoxelKey(0, 0, 0),
                                  manifest_bytes, "map " + version + " MANIFEST"));
  // The staging directory is invisible until its rename, so the manifest may come first here.
  DV_RETURN_IF_ERROR(WriteFileAtomic(staging + "/MANIFEST", manifest));
  DV_ASSIGN_OR_RETURN(auto next, maps::OpenMap(staging, 0));
  if (next->version() != version) {
    return Status::Corruption("map sync: the manifest served as version " + version +
                              " hashes to " + next->version());
  }
  std::map<std::array<int, 3>, maps::TileInfo> have;
  if (current) {
    for (const maps::TileInfo& t : current->tiles()) have[{t.tile.x(), t.tile.y(), t.tile.z()}] = t;
  }
  for (const maps::TileInfo& t : next->tiles()) {
    const std::string name = "map " + version + " " + maps::TileFileName(t.tile);
    const auto it = have.find({t.tile.x(), t.tile.y(), t.tile.z()});
    if (it != have.end() && it->second.bytes == t.bytes && it->second.crc32c == t.crc32c) {
      auto bytes = maps::ReadTileFile(current_dir, t);
      if (bytes.ok()) {
        DV_RETURN_IF_ERROR(WriteFileAtomic(staging + "/" + maps::TileFileName(t.tile), *bytes));
        ++fetch->result->tiles_reused;
        continue;
      }
      spdlog::warn("map sync: local {} unusable ({}); fetching it", name, bytes.status().message());
    }
    DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                        fetch->File(version, MapFile::kTile, t.tile, t.bytes, name));
    const uint32_t crc = crc32c::Value(bytes.data(), bytes.size());
    if (crc != t.crc32c) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), ": checksum %08x, the manifest says %08x", crc, t.crc32c);
      return Status::Corruption("map sync: " + name + buf);
    }
    DV_RETURN_IF_ERROR(WriteFileAtomic(staging + "/" + maps::TileFileName(t.tile), bytes));
    ++fetch->result->tiles_fetched;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<MapSyncResult> SyncMap(const MapExchange& exchange, const std::string& current_dir,
                                const std::string& root, uint32_t chunk_bytes) {
  MapSyncResult result;
  Fetcher fetch{exchange, chunk_bytes, &result};
  // A map in use that does not open (a damaged LATEST version) is as good as none: sync anew.
  std::unique_ptr<maps::RouteMap> current;
  if (!current_dir.empty()) {
    auto m = maps::OpenMap(current_dir, 0);
    if (m.ok()) current = std::move(m).value();
  }
  const std::string have = current ? current->version() : "";
  MapSyncMessage req;
  req.type = MapSyncType::kLatestRequest;
  req.map_version = have;
  DV_ASSIGN_OR_RETURN(const MapSyncMessage latest, fetch.Ask(req, MapSyncType::kLatest));
  result.version = latest.map_version;
  if (latest.map_version.empty() || latest.map_version == have) return result;
  DV_RETURN_IF_ERROR(MakeDirs(root));
  const std::string staging = root + "/.staging-" + latest.map_version;
  std::error_code ec;
  fs::remove_all(staging, ec);  // a sync interrupted before
  Status st =
      Stage(&fetch, latest.map_version, latest.manifest_bytes, current.get(), current_dir, staging);
  if (st.ok()) st = maps::CommitVersion(root, staging, latest.map_version);
  if (!st.ok()) {
    fs::remove_all(staging, ec);
    return st;
  }
  result.changed = true;
  return result;
}

StatusOr<std::unique_ptr<MapSyncSocket>> MapSyncSocket::Connect(const AgentConfig& config,
                                                                const transport::CurveKeys& keys,
                                                                const std::atomic<bool>* stop) {
  std::unique_ptr<MapSyncSocket> s(new MapSyncSocket(config.map_sync.timeout_ms, stop));
  const std::string& endpoint =
      config.map_sync.endpoint.empty() ? config.upload.endpoint : config.map_sync.endpoint;
  DV_ASSIGN_OR_RETURN(s->socket_, ConnectDealer(&s->ctx_, endpoint, config.upload, keys));
  return s;
}

StatusOr<std::vector<uint8_t>> MapSyncSocket::Exchange(const std::vector<uint8_t>& request) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point end = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  try {
    // ZMQ_IMMEDIATE: the send waits (in slices, watching stop) until the connection is up.
    while (!socket_->send(zmq::buffer(request), zmq::send_flags::dontwait)) {
      if (stop_->load()) return Status::Unavailable("map sync: stopped");
      if (Clock::now() > end) return Status::Unavailable("map sync: not connected to the server");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    while (!stop_->load() && Clock::now() < end) {
      zmq::pollitem_t item = {socket_->handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      zmq::message_t reply;
      if ((item.revents & ZMQ_POLLIN) && socket_->recv(reply, zmq::recv_flags::dontwait)) {
        const auto* p = static_cast<const uint8_t*>(reply.data());
        return std::vector<uint8_t>(p, p + reply.size());
      }
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("map sync: socket: ") + e.what());
  }
  if (stop_->load()) return Status::Unavailable("map sync: stopped");
  return Status::Unavailable("map sync: no reply within " + std::to_string(timeout_ms_) + " ms");
}

}  // namespace dv::agent
