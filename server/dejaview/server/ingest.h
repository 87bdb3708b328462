// The server's ingest: answers upload-protocol messages (docs/upload-protocol.md) from many
// agents on one ROUTER socket. A batch is ACKed only after its records are fsync'd in the delta
// store and committed to the frame index; (vehicle, sensor, sequence) already indexed -- or
// repeated inside the batch -- counts as a duplicate and is not stored again.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "dejaview/server/delta_store.h"
#include "dejaview/server/frame_index.h"
#include "dejaview/transport/upload.h"

namespace dv::server {

struct IngestStats {
  uint64_t batches_acked = 0;
  uint64_t batches_nacked = 0;
  uint64_t records_stored = 0;
  uint64_t records_duplicate = 0;
  uint64_t bytes_received = 0;
  uint64_t recovered_records = 0;     // indexed at start-up from the store
  uint64_t recovered_torn_bytes = 0;  // truncated at start-up (never acknowledged)
};

class Ingest {
 public:
  Ingest(DeltaStore* store, FrameIndex* index) : store_(store), index_(index) {}

  // Start-up repair: indexes every store record past each file's indexed end and truncates the
  // torn tail an interrupted append left (that batch was never ACKed, so the agent resends it).
  Status Recover();
  // One message from peer -> the reply to send back.
  transport::Message Handle(const std::string& peer, const uint8_t* data, size_t size);
  const IngestStats& stats() const { return stats_; }

 private:
  struct Peer {
    std::string vehicle;
    std::set<uint32_t> sensors;
  };
  transport::Message HandleData(const std::string& peer, transport::Message msg);
  DeltaStore* store_;
  FrameIndex* index_;
  std::map<std::string, Peer> peers_;
  IngestStats stats_;
};

struct ServerOptions {
  std::string listen = "tcp://127.0.0.1:5555";
  std::string store_dir;
  std::string index_path;  // empty: STORE/index.sqlite
  // CURVE: the server's secret key file; empty runs in the clear (loopback, tests). With it,
  // the ZAP handler admits the public keys of curve_allow_file (empty: any key, encryption only).
  std::string curve_key_file;
  std::string curve_allow_file;
};

// Binds, recovers and serves until *stop; on_listening gets the bound endpoint (with the real
// port when listen asks for port 0).
Status RunServer(const ServerOptions& options, const std::atomic<bool>* stop,
                 const std::function<void(const std::string&)>& on_listening);

}  // namespace dv::server
