// The agent's configuration (config/agent.yaml is the annotated example). Every key has a
// default except vehicle; an unknown key or a value of the wrong type is an error naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/transport/spool.h"

namespace dv::agent {

struct SensorConfig {
  uint32_t id = 0;
  std::string topic = "lidar";
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
  int window_start_min = 0;  // gate: window -- minutes after 00:00 UTC, [start, end)
  int window_end_min = 0;
  // CURVE (encrypted, authenticated upload): the server's public key (Z85) and this agent's
  // secret key file; both empty: in the clear.
  std::string curve_server_key;
  std::string curve_key_file;
};

struct AgentConfig {
  std::string vehicle;
  std::string drive;  // empty: "drive-YYYYMMDD" of the agent's start (UTC)
  std::vector<SensorConfig> sensors = {SensorConfig{}};
  std::string lidar_endpoint = "tcp://127.0.0.1:6000";  // the LiDAR driver's PUB
  std::string pose_topic = "pose";
  int64_t pose_max_gap_ms = 500;
  std::string source_drive;   // offline: read frames from a drive folder instead of subscribing
  double source_rate_hz = 0;  // offline pacing; 0: as fast as the encoders take them
  std::string map_dir;        // empty: intra-code every frame
  int64_t map_memory_bytes = int64_t(512) << 20;
  double tolerance_m = 0.1;
  double residual_precision_m = 0.02;
  bool intensity = true;
  int encoder_threads = 1;
  int queue_frames = 8;
  transport::SpoolOptions spool;
  UploadConfig upload;
  std::string metrics_listen = "127.0.0.1:9100";  // empty: no metrics endpoint
};

StatusOr<AgentConfig> LoadAgentConfig(const std::string& path);
StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml_text, const std::string& name);

}  // namespace dv::agent
