// The server's ingest: answers upload-protocol messages (docs/upload-protocol.md) from many
// agents on one ROUTER socket. Each record is one object of the tiered store (docs/store.md),
// durable on the local disk tier before the frame index commits it; a batch is ACKed only after
// both. (vehicle, sensor, sequence) already indexed -- by this server or by another one sharing
// the index -- or repeated inside the batch counts as a duplicate and is not stored again. The
// store's copier moves committed objects to the remote tier lazily, off the acknowledged path.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "dejaview/store/frame_index.h"
#include "dejaview/store/store.h"
#include "dejaview/transport/upload.h"

namespace dv::server {

struct IngestStats {
  uint64_t batches_acked = 0;
  uint64_t batches_nacked = 0;
  uint64_t records_stored = 0;
  uint64_t records_duplicate = 0;
  uint64_t bytes_received = 0;
};

class Ingest {
 public:
  Ingest(store::Store* store, store::FrameIndex* index) : store_(store), index_(index) {}

  // One message from peer -> the reply to send back.
  transport::Message Handle(const std::string& peer, const uint8_t* data, size_t size);
  const IngestStats& stats() const { return stats_; }

 private:
  struct Peer {
    std::string vehicle;
    std::set<uint32_t> sensors;
  };
  transport::Message HandleData(const std::string& peer, transport::Message msg);
  store::Store* store_;
  store::FrameIndex* index_;
  std::map<std::string, Peer> peers_;
  IngestStats stats_;
};

struct ServerOptions {
  std::string listen = "tcp://127.0.0.1:5555";
  std::string store_dir;
  // Frame index: a SQLite path, sqlite:PATH or postgresql:CONNINFO; empty: STORE/index.sqlite.
  std::string index_path;
  // YAML of the storage tiers (docs/store.md, config/store.yaml); empty: the disk tier only.
  // disk.dir defaults to store_dir.
  std::string store_config;
  // CURVE: the server's secret key file; empty runs in the clear (loopback, tests). With it,
  // the ZAP handler admits the public keys of curve_allow_file (empty: any key, encryption only).
  std::string curve_key_file;
  std::string curve_allow_file;
  // The maps root the map service serves from (docs/map-sync.md); empty: no map service.
  std::string maps_root;
};

// Binds, recovers and serves until *stop; on_listening gets the bound endpoint (with the real
// port when listen asks for port 0).
Status RunServer(const ServerOptions& options, const std::atomic<bool>* stop,
                 const std::function<void(const std::string&)>& on_listening);

}  // namespace dv::server
