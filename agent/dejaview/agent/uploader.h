// The uploader: drains the spool to the server over the upload protocol
// (docs/upload-protocol.md) on a DEALER socket. A window of DATA batches is in flight; the
// spool cursor advances only over a contiguous prefix of ACKed batches (the server ACKs after
// its fsync, so what the cursor passes is on the server's disk). A batch with no answer within
// timeout_ms means the link or the server is gone: the socket is replaced after a backoff that
// doubles up to backoff_max_ms, HELLO is repeated and every unACKed batch is resent (the
// server deduplicates). A connection that does not complete (no server, a refused CURVE key:
// seen through the socket's monitor) or a server that stops answering PING is treated the same
// way. Refusals (rate, quota, revoked key, unknown map) pause all sends for a wait that doubles
// per round of refusals; each change of state is logged once. The gate (always / link topic
// says up / UTC time window) decides when new batches may go, and a token bucket caps the
// average bytes per second over every send, resends included.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "dejaview/agent/config.h"
#include "dejaview/transport/spool.h"
#include "dejaview/transport/upload.h"

namespace dv::agent {

struct UploaderStats {
  std::atomic<uint64_t> batches_sent{0};
  std::atomic<uint64_t> batches_acked{0};
  std::atomic<uint64_t> batches_resent{0};
  std::atomic<uint64_t> batches_rejected{0};  // NACKed as invalid: logged and skipped
  std::atomic<uint64_t> batches_deferred{0};  // NACKed for a limit or revoked key: kept, retried
  std::atomic<uint64_t> auth_refused{0};      // HELLOs the server refused for this key
  std::atomic<uint64_t> records_acked{0};
  std::atomic<uint64_t> records_duplicate{0};
  // Refused by the server as unreadable (ACK's rejected count, or a rejected batch's records).
  std::atomic<uint64_t> records_rejected{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> inflight{0};
  std::atomic<bool> gate_open{false};
  std::atomic<bool> connected{false};  // HELLO answered on the current socket
};

class Uploader {
 public:
  // keys: this agent's CURVE keys when config.curve_server_key is set.
  Uploader(UploadConfig config, std::string vehicle, std::vector<uint32_t> sensor_ids,
           transport::Spool* spool, transport::CurveKeys keys = {})
      : config_(std::move(config)),
        vehicle_(std::move(vehicle)),
        sensor_ids_(std::move(sensor_ids)),
        spool_(spool),
        keys_(std::move(keys)) {}

  // The uploader thread's body; returns when *stop is set. Never fails: every error is a retry.
  void Run(const std::atomic<bool>* stop);
  const UploaderStats& stats() const { return stats_; }

 private:
  const UploadConfig config_;
  const std::string vehicle_;
  const std::vector<uint32_t> sensor_ids_;
  transport::Spool* spool_;
  const transport::CurveKeys keys_;
  UploaderStats stats_;
};

// A DEALER connected to endpoint, with CURVE when config.curve_server_key is set (keys: this
// agent's pair): the uploader's and the map sync's socket to the server. Not yet connected is
// not an error (ZeroMQ connects in the background); a bad endpoint or key is.
StatusOr<std::unique_ptr<zmq::socket_t>> ConnectDealer(zmq::context_t* ctx,
                                                       const std::string& endpoint,
                                                       const UploadConfig& config,
                                                       const transport::CurveKeys& keys);

// Whether the time-window gate is open at minute-of-day now_min (UTC); start == end is all day,
// start > end wraps past midnight.
bool InUploadWindow(int start_min, int end_min, int now_min);

}  // namespace dv::agent
