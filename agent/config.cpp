#include "dejaview/agent/config.h"

#include <cstdio>

#include "dejaview/base/file_util.h"
#include "dejaview/transport/map_sync.h"
#include "dejaview/transport/upload.h"

namespace dv::agent {
namespace {

constexpr int64_t kMaxMs = 86'400'000;  // a day: every duration key's upper bound
constexpr int64_t kMaxBytesPerS = int64_t(1) << 40;

const config::Schema<SensorConfig>& SensorSchema() {
  static const auto s = config::Schema<SensorConfig>()
                            .Int("id", &SensorConfig::id, 0, UINT32_MAX, "sensor id (HELLO)")
                            .String("topic", &SensorConfig::topic, "wire topic, ends in '/'");
  return s;
}

const config::Schema<transport::SpoolOptions>& SpoolSchema() {
  using O = transport::SpoolOptions;
  static const auto s =
      config::Schema<O>()
          .String("dir", &O::dir, "spool directory")
          .Required()
          .Int("budget_kb", &O::budget_bytes, 1, int64_t(1) << 40,
               "reached: the oldest sealed segment is dropped and counted", 1024)
          .Int("segment_kb", &O::segment_bytes, 1, int64_t(1) << 30, "segment size", 1024)
          .Choice(
              "sync", &O::sync,
              {{"every_record", O::Sync::kEveryRecord}, {"group_commit", O::Sync::kGroupCommit}},
              "fsync each record, or groups of them")
          .Int("group_commit_ms", &O::group_commit_ms, 0, kMaxMs, "group commit period");
  return s;
}

const config::Schema<UploadConfig>& UploadSchema() {
  using U = UploadConfig;
  static const auto s =
      config::Schema<U>()
          .String("endpoint", &U::endpoint, "the server's upload socket")
          .Int("window", &U::window, 1, 1024, "DATA batches in flight")
          .Int("batch_records", &U::batch_records, 1, int64_t(transport::kMaxBatchRecords),
               "records per batch")
          .Int("batch_bytes", &U::batch_bytes, 1, int64_t(1) << 30, "payload bytes per batch")
          .Int("timeout_ms", &U::timeout_ms, 1, kMaxMs, "no ACK within this: resend")
          .Int("backoff_min_ms", &U::backoff_min_ms, 1, kMaxMs, "first reconnect delay")
          .Int("backoff_max_ms", &U::backoff_max_ms, 1, kMaxMs, "longest reconnect delay")
          .Int("bandwidth_bytes_per_s", &U::bandwidth_bytes_per_s, 0, kMaxBytesPerS, "0: no cap")
          .Choice("gate", &U::gate,
                  {{"always", U::Gate::kAlways},
                   {"link", U::Gate::kLink},
                   {"window", U::Gate::kWindow}},
                  "when uploads may run")
          .String("link_endpoint", &U::link_endpoint, "gate link: a PUB saying up or down")
          .String("link_topic", &U::link_topic, "gate link: its topic")
          .String("window_start_utc", &U::window_start_utc, "gate window: HH:MM UTC, inclusive")
          .String("window_end_utc", &U::window_end_utc, "gate window: HH:MM UTC, exclusive")
          .String("curve_server_key", &U::curve_server_key, "CURVE: the server's public key")
          .String("curve_key_file", &U::curve_key_file, "CURVE: this agent's secret key file");
  return s;
}

const config::Schema<MapSyncConfig>& MapSyncSchema() {
  using M = MapSyncConfig;
  static const auto s =
      config::Schema<M>()
          .Bool("enabled", &M::enabled, "ask the server for newer map versions")
          .String("root", &M::root, "synced versions: ROOT/<version>/, ROOT/LATEST")
          .String("endpoint", &M::endpoint, "empty: upload.endpoint")
          .Int("interval_ms", &M::interval_ms, 1, kMaxMs, "while connected: ask this often")
          .Int("timeout_ms", &M::timeout_ms, 1, kMaxMs, "per request")
          .Int("chunk_kb", &M::chunk_bytes, 1, int64_t(transport::kMaxMapChunkBytes >> 10),
               "tile bytes per request", 1024);
  return s;
}

// "HH:MM" -> minutes after midnight; -1 when it is not that.
int ClockMinutes(const std::string& s) {
  int h = -1, m = -1;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%d:%d%c", &h, &m, &tail) != 2 || h < 0 || h > 23 || m < 0 || m > 59) {
    return -1;
  }
  return h * 60 + m;
}

void CheckName(const std::string& key, const std::string& value, config::Problems* p) {
  const Status s = transport::ValidateName(key, value);
  if (!s.ok()) p->Add(key, s.message().substr(key.size() + 2));  // without its "key: "
}

// The rules that span keys, or that a value's type cannot say.
void CheckAgentConfig(const AgentConfig& c, config::Problems* p) {
  if (!c.vehicle.empty()) CheckName("vehicle", c.vehicle, p);
  CheckName("drive", c.drive, p);
  const UploadConfig& u = c.upload;
  if (u.gate == UploadConfig::Gate::kLink && u.link_endpoint.empty()) {
    p->Add("upload.gate", "link needs upload.link_endpoint");
  }
  if (u.curve_server_key.empty() != u.curve_key_file.empty()) {
    p->Add(u.curve_server_key.empty() ? "upload.curve_key_file" : "upload.curve_server_key",
           "give upload.curve_server_key and upload.curve_key_file both or neither");
  }
  if (!u.curve_server_key.empty() && u.curve_server_key.size() != 40) {
    p->Add("upload.curve_server_key", "not a 40-character Z85 key");
  }
  for (const auto& [key, value] : {std::pair{"upload.window_start_utc", &u.window_start_utc},
                                   std::pair{"upload.window_end_utc", &u.window_end_utc}}) {
    if (ClockMinutes(*value) < 0) p->Add(key, "'" + *value + "' is not HH:MM");
  }
  if (u.backoff_max_ms < u.backoff_min_ms) {
    p->Add("upload.backoff_max_ms", "below upload.backoff_min_ms");
  }
  if (c.map_sync.enabled && c.map_sync.root.empty()) {
    p->Add("map_sync.root", "required when map_sync.enabled");
  }
  for (size_t i = 0; i < c.sensors.size(); ++i) {
    const std::string& topic = c.sensors[i].topic;
    if (topic.empty()) p->Add("sensors[" + std::to_string(i) + "].topic", "empty");
  }
}

}  // namespace

const config::Schema<AgentConfig>& AgentSchema() {
  using A = AgentConfig;
  static const auto s =
      config::Schema<A>()
          .String("vehicle", &A::vehicle, "[A-Za-z0-9._-], at most 128 bytes")
          .Required()
          .String("drive", &A::drive, "empty: drive-YYYYMMDD of the agent's start (UTC)")
          .SectionList("sensors", &A::sensors, SensorSchema(), 1, transport::kMaxHelloSensors,
                       "{id, topic} of each LiDAR")
          .String("lidar_endpoint", &A::lidar_endpoint, "the LiDAR driver's PUB; empty: none")
          .String("pose_topic", &A::pose_topic, "the localiser's pose topic")
          .Int("pose_max_gap_ms", &A::pose_max_gap_ms, 0, kMaxMs,
               "no pose interpolated across a wider gap")
          .String("source_drive", &A::source_drive, "offline: replay a drive folder instead")
          .Double("source_rate_hz", &A::source_rate_hz, 0, 1e6, "offline pacing; 0: unpaced")
          .String("map_dir", &A::map_dir, "route map; empty: intra-code every frame")
          .Int("map_memory_mb", &A::map_memory_bytes, 1, int64_t(1) << 30,
               "map tiles' memory budget", int64_t(1) << 20)
          .Double("tolerance_m", &A::tolerance_m, 0.001, 100, "the guaranteed maximum error")
          .Double("residual_precision_m", &A::residual_precision_m, 0, 100,
                  "error of points the map does not explain")
          .Double("selection_radius_m", &A::selection_radius_m, 0, 1000,
                  "map voxels the map section selects from, within this range; 0: all")
          .Bool("intensity", &A::intensity, "code intensity")
          .Choice("encoder_backend", &A::encoder_backend,
                  {{"cpu", codec::Backend::kCpu}, {"cuda", codec::Backend::kCuda}},
                  "cuda: a -DDEJAVIEW_CUDA=ON build on a machine with a GPU")
          .Int("encoder_threads", &A::encoder_threads, 1, 64, "frames encoded at once")
          .Int("frame_threads", &A::frame_threads, 1, codec::kMaxEncoderThreads,
               "threads sharing each frame's encoding")
          .Int("queue_frames", &A::queue_frames, 1, 10000, "live frames waiting at most")
          .Section("spool", &A::spool, SpoolSchema())
          .Section("upload", &A::upload, UploadSchema())
          .Section("map_sync", &A::map_sync, MapSyncSchema())
          .String("metrics_listen", &A::metrics_listen, "Prometheus /metrics; empty: off")
          .Section("log", &A::log, LogOptionsSchema());
  return s;
}

StatusOr<AgentConfig> ParseAgentConfig(const std::string& text, const std::string& name) {
  AgentConfig c;
  DV_RETURN_IF_ERROR(
      config::LoadString<AgentConfig>(text, name, AgentSchema(), &c, CheckAgentConfig));
  c.upload.window_start_min = ClockMinutes(c.upload.window_start_utc);
  c.upload.window_end_min = ClockMinutes(c.upload.window_end_utc);
  return c;
}

StatusOr<AgentConfig> LoadAgentConfig(const std::string& path) {
  DV_ASSIGN_OR_RETURN(const std::string text, ReadFileText(path, config::kMaxConfigBytes));
  return ParseAgentConfig(text, path);
}

}  // namespace dv::agent
