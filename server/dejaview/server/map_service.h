// The map service: answers map-sync requests (docs/map-sync.md) from the maps root, the same
// root the reconstruction opens versions from. LATEST is re-read on every LATEST_REQUEST, so a
// `dejaview map publish` is served at once without a restart; chunks are read from the version
// directory by offset, so a vehicle fetching version V is unaffected by a later publish.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/server/keyring.h"
#include "dejaview/transport/map_sync.h"

namespace dv::server {

struct MapServiceStats {
  uint64_t requests = 0;
  uint64_t chunks_served = 0;
  uint64_t bytes_served = 0;  // file bytes in CHUNK replies
  uint64_t errors = 0;        // ERROR replies
};

class MapService {
 public:
  // root empty: no map service, every request gets ERROR NO_MAP.
  explicit MapService(std::string root) : root_(std::move(root)) {}
  // One request -> the reply to send back (never fails: errors are ERROR replies). With CURVE,
  // key is the connection's (its ZAP User-Id) and keys the ring current now: a key no longer
  // enrolled gets ERROR UNAUTHORIZED, as uploads on it get NACK UNAUTHORIZED.
  std::vector<uint8_t> Handle(const std::string& key, const KeyRing* keys, const uint8_t* data,
                              size_t size);
  const MapServiceStats& stats() const { return stats_; }

 private:
  transport::MapSyncMessage Answer(const transport::MapSyncMessage& req);
  std::string root_;
  MapServiceStats stats_;
};

}  // namespace dv::server
