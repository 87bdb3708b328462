// The server's ingest: answers upload-protocol messages (docs/upload-protocol.md) from many
// agents on one ROUTER socket. Each record is one object of the tiered store (docs/store.md),
// durable on the local disk tier before the frame index commits it; a batch is ACKed only after
// both. (vehicle, sensor, source epoch, sequence) already indexed -- by this server or by another
// one sharing the index -- or repeated inside the batch counts as a duplicate and is not stored
// again. The store's copier moves committed objects to the remote tier lazily, off the acknowledged
// path. With CURVE, every message is bound to the vehicle its connection's key is enrolled as
// (KeyRing); limits per vehicle (rate, storage quota) answer with a NACK the agent retries.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "dejaview/server/keyring.h"
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
  uint64_t auth_refused = 0;        // CURVE handshakes with a key not enrolled
  uint64_t auth_impersonation = 0;  // HELLO naming another vehicle than the key's
  uint64_t auth_revoked = 0;        // messages on a connection whose key was since revoked
  uint64_t throttled = 0;           // DATA above the vehicle's rate limit
  uint64_t over_quota = 0;          // DATA above the vehicle's storage quota
  uint64_t records_rejected = 0;    // payloads that are not a readable delta frame: not stored
  uint64_t unknown_map = 0;         // DATA naming a map version the maps root does not have
  uint64_t key_reloads = 0;
  uint64_t key_files_rejected = 0;  // skipped at load or reload (see the log)
};

struct IngestLimits {
  // Token bucket on DATA bytes per vehicle (burst: one second's worth, and a message is admitted
  // while the bucket is not in debt, so one of any size can pass); 0: unlimited.
  uint64_t vehicle_bytes_per_s = 0;
  // Stored payload bytes per vehicle, counted from the frame index; 0: unlimited. With several
  // servers on one index each enforces it with what it read at the vehicle's first batch plus
  // what it stored since: a vehicle spread over k servers can overshoot by k - 1 batches.
  uint64_t vehicle_quota_bytes = 0;
};

class Ingest {
 public:
  // keys: null runs without authentication (no CURVE); otherwise Handle's key must be enrolled.
  Ingest(store::Store* store, store::FrameIndex* index, IngestLimits limits = {},
         const KeyRing* keys = nullptr)
      : store_(store), index_(index), limits_(limits), keys_(keys) {}

  // One message from peer (the ROUTER routing id) on a connection that authenticated with the
  // Z85 public key `key` (ZAP User-Id; empty without CURVE) -> the reply to send back.
  transport::Message Handle(const std::string& peer, const std::string& key, const uint8_t* data,
                            size_t size);
  // A reloaded keys directory: connections whose key is gone are refused from the next message.
  void SetKeys(const KeyRing* keys) { keys_ = keys; }
  // With a maps root, a delta frame whose map version is not in it is deferred (NACK
  // UNKNOWN_MAP): stored, it could not be reconstructed.
  void SetMapsRoot(std::string root) { maps_root_ = std::move(root); }
  IngestStats* mutable_stats() { return &stats_; }
  const IngestStats& stats() const { return stats_; }

 private:
  struct Peer {
    std::string vehicle;
    std::set<uint32_t> sensors;
  };
  struct Vehicle {
    double tokens = 0;  // rate limit bucket, bytes; negative: in debt
    std::chrono::steady_clock::time_point refilled;
    bool quota_loaded = false;
    uint64_t stored_bytes = 0;
  };
  transport::Message HandleData(const std::string& peer, transport::Message msg, size_t size);
  // False (and counts it) when the vehicle is over its rate limit.
  bool Admit(Vehicle* v, size_t bytes);
  bool MapKnown(const std::string& version);
  store::Store* store_;
  store::FrameIndex* index_;
  IngestLimits limits_;
  const KeyRing* keys_;
  std::map<std::string, Peer> peers_;
  std::map<std::string, Vehicle> vehicles_;
  std::string maps_root_;
  std::set<std::string> known_maps_;
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
  // the ZAP handler admits only the keys enrolled in keys_dir (KeyRing), and every message is
  // bound to its key's vehicle. keys_dir is read again whenever *reload is set (SIGHUP).
  std::string curve_key_file;
  std::string keys_dir;
  std::atomic<bool>* reload = nullptr;
  IngestLimits limits;
  // Prometheus GET /metrics on "host:port" (port 0: a free one, written to metrics_port_file);
  // empty: none.
  std::string metrics_listen;
  std::string metrics_port_file;
  // Filled with the final counters when RunServer returns (tests, the shutdown log).
  IngestStats* stats_out = nullptr;
  // The maps root the map service serves from (docs/map-sync.md); empty: no map service.
  std::string maps_root;
};

// Binds, recovers and serves until *stop; on_listening gets the bound endpoint (with the real
// port when listen asks for port 0).
Status RunServer(const ServerOptions& options, const std::atomic<bool>* stop,
                 const std::function<void(const std::string&)>& on_listening);

}  // namespace dv::server
