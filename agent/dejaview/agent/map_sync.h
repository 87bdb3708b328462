// The agent's side of map sync (docs/map-sync.md): asks the server for its latest route map
// version and, when it is not the one in use, builds it in the agent's maps root from the tiles
// it already has plus the ones that changed, fetched in bounded chunks. Every fetched byte is
// checked (chunk CRC in transit, each tile's size and CRC32C against the manifest, the
// manifest's hash against the announced version) and the version directory appears only by
// one rename of a complete staging directory: a failed or interrupted sync leaves the map in
// use, and the root, as they were.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "dejaview/agent/config.h"
#include "dejaview/base/status.h"
#include "dejaview/transport/upload.h"

namespace dv::agent {

// One request -> its reply (Unavailable when none came within the timeout).
using MapExchange =
    std::function<StatusOr<std::vector<uint8_t>>(const std::vector<uint8_t>& request)>;

struct MapSyncResult {
  std::string version;   // the server's latest ("" when it has none)
  bool changed = false;  // version is new here and now committed under the root as LATEST
  uint64_t tiles_fetched = 0;
  uint64_t tiles_reused = 0;   // copied from the map in use: same key, size and CRC32C
  uint64_t bytes_fetched = 0;  // file bytes fetched (manifest and tiles)
  uint64_t bytes_on_wire = 0;  // every request and reply, as sent
};

// current_dir: the map in use ("" for none); its version is what the server is told we hold.
StatusOr<MapSyncResult> SyncMap(const MapExchange& exchange, const std::string& current_dir,
                                const std::string& root, uint32_t chunk_bytes);

// A request/reply exchange on its own DEALER to the server (the upload endpoint unless
// map_sync.endpoint says otherwise, with the upload's CURVE keys). One per sync attempt, so a
// late reply to an abandoned request can never be taken for the answer to the next one.
class MapSyncSocket {
 public:
  static StatusOr<std::unique_ptr<MapSyncSocket>> Connect(const AgentConfig& config,
                                                          const transport::CurveKeys& keys,
                                                          const std::atomic<bool>* stop);
  StatusOr<std::vector<uint8_t>> Exchange(const std::vector<uint8_t>& request);

 private:
  MapSyncSocket(int timeout_ms, const std::atomic<bool>* stop)
      : timeout_ms_(timeout_ms), stop_(stop) {}
  zmq::context_t ctx_{1};
  std::unique_ptr<zmq::socket_t> socket_;
  int timeout_ms_;
  const std::atomic<bool>* stop_;
};

}  // namespace dv::agent
