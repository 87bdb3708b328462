// The agent's configuration (config/agent.yaml is the annotated example), read through
// base/config like the store's: every key has a default except vehicle and spool.dir; every
// problem of a file (unknown key with the nearest one suggested, wrong type, out of range,
// missing or duplicate key, and the rules spanning keys) is reported at once, each as
// FILE:LINE:COL: key: problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/config.h"
#include "dejaview/base/log.h"
#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"
#include "dejaview/transport/spool.h"

namespace dv::agent {

struct SensorConfig {
  uint32_t id = 0;
  std::string topic = "lidar/top/points/";  // wire topics end in '/' (docs/wire.md)
};

struct UploadConfig {
  std::string endpoint = "tcp://127.0.0.1:5555";
  int window = 4;  // DATA batches in flight
  int batch_records = 16;
  int64_t batch_bytes = 4 << 20;  // payload bytes per batch (at least one record)
  int timeout_ms = 2000;          // no ACK within this: resend
  int backoff_min_ms = 100;
  int backoff_max_ms = 5000;
  int64_t bandwidth_bytes_per_s = 0;  // 0: no cap
  enum class Gate { kAlways, kLink, kWindow } gate = Gate::kAlways;
  std::string link_endpoint;  // gate: link -- a PUB whose topic says "up" or "down"
  std::string link_topic = "link";
  std::string window_start_utc = "00:00";  // gate: window -- [start, end) as HH:MM UTC
  std::string window_end_utc = "00:00";
  int window_start_min = 0;  // the window in minutes after 00:00 UTC, from the two above
  int window_end_min = 0;
  // CURVE (encrypted, authenticated upload): the server's public key (Z85) and this agent's
  // secret key file; both empty: in the clear.
  std::string curve_server_key;
  std::string curve_key_file;
};

// Map sync (docs/map-sync.md): while the uploader is connected, ask the server for a newer map
// version every interval_ms (and at once on each new connection).
struct MapSyncConfig {
  bool enabled = false;
  std::string root;      // synced versions: ROOT/<version>/, ROOT/LATEST; required when enabled
  std::string endpoint;  // empty: upload.endpoint (always with the upload's CURVE keys)
  int interval_ms = 60000;
  int timeout_ms = 2000;  // per request
  int chunk_bytes = 256 << 10;
};

struct AgentConfig {
  std::string vehicle;
  std::string drive;  // empty: "drive-YYYYMMDD" of the agent's start (UTC)
  std::vector<SensorConfig> sensors = {SensorConfig{}};
  std::string lidar_endpoint = "tcp://127.0.0.1:6000";  // the LiDAR driver's PUB; empty: none
  std::string pose_topic = "pose/";
  int64_t pose_max_gap_ms = 500;
  std::string source_drive;   // offline: read frames from a drive folder instead of subscribing
  double source_rate_hz = 0;  // offline pacing; 0: as fast as the encoders take them
  // empty: intra-code every frame (until map sync brings one). With map sync, the newest version
  // synced before (map_sync.root's LATEST) is used instead when there is one.
  std::string map_dir;
  // The map tiles' budget, shared by the encoder threads. Each thread's encoder also keeps the
  // map side of registration for the ball around its last frames (codec/registration.h), outside
  // this budget: tens of MB on a fine map.
  int64_t map_memory_bytes = int64_t(512) << 20;
  double tolerance_m = 0.1;
  double residual_precision_m = 0.02;
  double selection_radius_m = 0;  // codec::EncoderParams::selection_radius_m
  bool intensity = true;
  // cuda needs a build with -DDEJAVIEW_CUDA=ON and a device; the agent refuses to start
  // otherwise rather than silently encode on the CPU (docs/vehicle-compute.md).
  codec::Backend encoder_backend = codec::Backend::kCpu;
  // Frames encoded at once, each by up to frame_threads threads (codec::EncoderParams::threads:
  // a frame's latency falls, its bytes stay the same). Keep the product within the cores: a
  // frame's registration helper waits by spinning (docs/vehicle-compute.md).
  int encoder_threads = 1;
  int frame_threads = 1;
  int queue_frames = 8;
  transport::SpoolOptions spool;
  UploadConfig upload;
  MapSyncConfig map_sync;
  std::string metrics_listen = "127.0.0.1:9100";  // empty: no metrics endpoint
  LogOptions log;                                 // DEJAVIEW_LOG overrides log.level
};

const config::Schema<AgentConfig>& AgentSchema();

StatusOr<AgentConfig> LoadAgentConfig(const std::string& path);
StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml_text, const std::string& name);

}  // namespace dv::agent
