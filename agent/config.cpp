#include "dejaview/agent/config.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <set>

#include "dejaview/base/file_util.h"
#include "dejaview/transport/map_sync.h"
#include "dejaview/transport/upload.h"

namespace dv::agent {
namespace {

// Reads a mapping whose keys must all be known; yaml-cpp's exceptions stop here.
class Section {
 public:
  Section(const YAML::Node& node, std::string where) : node_(node), where_(std::move(where)) {}

  template <typename T>
  Status Get(const std::string& key, T* out) {
    seen_.insert(key);
    const YAML::Node v = node_[key];
    if (!v) return Status::Ok();
    try {
      *out = v.as<T>();
    } catch (const YAML::Exception&) {
      return Status::InvalidArgument(where_ + key + ": '" + Scalar(v) + "' has the wrong type");
    }
    return Status::Ok();
  }
  YAML::Node Child(const std::string& key) {
    seen_.insert(key);
    return node_[key];
  }
  Status CheckUnknown() const {
    for (const auto& kv : node_) {
      const std::string k = kv.first.as<std::string>();
      if (!seen_.count(k)) return Status::InvalidArgument(where_ + k + ": unknown key");
    }
    return Status::Ok();
  }
  const std::string& where() const { return where_; }

 private:
  static std::string Scalar(const YAML::Node& v) {
    return v.IsScalar() ? v.Scalar() : "(not a scalar)";
  }
  YAML::Node node_;
  std::string where_;
  std::set<std::string> seen_;
};

Status Positive(const std::string& key, double v) {
  if (!(v > 0)) return Status::InvalidArgument(key + ": must be > 0");
  return Status::Ok();
}

// "HH:MM" -> minutes after midnight.
StatusOr<int> ParseClock(const std::string& key, const std::string& s) {
  int h = -1, m = -1;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%d:%d%c", &h, &m, &tail) != 2 || h < 0 || h > 23 || m < 0 || m > 59) {
    return Status::InvalidArgument(key + ": '" + s + "' is not HH:MM");
  }
  return h * 60 + m;
}

Status ParseUpload(const YAML::Node& node, UploadConfig* u) {
  Section s(node, "upload.");
  std::string gate = "always", start = "00:00", end = "00:00";
  DV_RETURN_IF_ERROR(s.Get("endpoint", &u->endpoint));
  DV_RETURN_IF_ERROR(s.Get("window", &u->window));
  DV_RETURN_IF_ERROR(s.Get("batch_records", &u->batch_records));
  DV_RETURN_IF_ERROR(s.Get("batch_bytes", &u->batch_bytes));
  DV_RETURN_IF_ERROR(s.Get("timeout_ms", &u->timeout_ms));
  DV_RETURN_IF_ERROR(s.Get("backoff_min_ms", &u->backoff_min_ms));
  DV_RETURN_IF_ERROR(s.Get("backoff_max_ms", &u->backoff_max_ms));
  DV_RETURN_IF_ERROR(s.Get("bandwidth_bytes_per_s", &u->bandwidth_bytes_per_s));
  DV_RETURN_IF_ERROR(s.Get("gate", &gate));
  DV_RETURN_IF_ERROR(s.Get("link_endpoint", &u->link_endpoint));
  DV_RETURN_IF_ERROR(s.Get("link_topic", &u->link_topic));
  DV_RETURN_IF_ERROR(s.Get("window_start_utc", &start));
  DV_RETURN_IF_ERROR(s.Get("window_end_utc", &end));
  DV_RETURN_IF_ERROR(s.Get("curve_server_key", &u->curve_server_key));
  DV_RETURN_IF_ERROR(s.Get("curve_key_file", &u->curve_key_file));
  DV_RETURN_IF_ERROR(s.CheckUnknown());
  if (gate == "always") {
    u->gate = UploadConfig::Gate::kAlways;
  } else if (gate == "link") {
    u->gate = UploadConfig::Gate::kLink;
    if (u->link_endpoint.empty())
      return Status::InvalidArgument("upload.link_endpoint: needed by gate: link");
  } else if (gate == "window") {
    u->gate = UploadConfig::Gate::kWindow;
  } else {
    return Status::InvalidArgument("upload.gate: '" + gate + "' is not always, link or window");
  }
  if (u->curve_server_key.empty() != u->curve_key_file.empty()) {
    return Status::InvalidArgument(
        "upload.curve_server_key, upload.curve_key_file: give both or neither");
  }
  if (!u->curve_server_key.empty() && u->curve_server_key.size() != 40) {
    return Status::InvalidArgument("upload.curve_server_key: not a 40-character Z85 key");
  }
  DV_ASSIGN_OR_RETURN(u->window_start_min, ParseClock("upload.window_start_utc", start));
  DV_ASSIGN_OR_RETURN(u->window_end_min, ParseClock("upload.window_end_utc", end));
  DV_RETURN_IF_ERROR(Positive("upload.window", u->window));
  DV_RETURN_IF_ERROR(Positive("upload.batch_records", u->batch_records));
  DV_RETURN_IF_ERROR(Positive("upload.batch_bytes", double(u->batch_bytes)));
  DV_RETURN_IF_ERROR(Positive("upload.timeout_ms", u->timeout_ms));
  DV_RETURN_IF_ERROR(Positive("upload.backoff_min_ms", u->backoff_min_ms));
  if (u->backoff_max_ms < u->backoff_min_ms)
    return Status::InvalidArgument("upload.backoff_max_ms: below backoff_min_ms");
  if (u->batch_records > int(transport::kMaxBatchRecords))
    return Status::InvalidArgument("upload.batch_records: above 256");
  if (u->bandwidth_bytes_per_s < 0)
    return Status::InvalidArgument("upload.bandwidth_bytes_per_s: negative");
  return Status::Ok();
}

Status ParseMapSync(const YAML::Node& node, MapSyncConfig* m) {
  Section s(node, "map_sync.");
  int64_t chunk_kb = m->chunk_bytes >> 10;
  DV_RETURN_IF_ERROR(s.Get("enabled", &m->enabled));
  DV_RETURN_IF_ERROR(s.Get("root", &m->root));
  DV_RETURN_IF_ERROR(s.Get("endpoint", &m->endpoint));
  DV_RETURN_IF_ERROR(s.Get("interval_ms", &m->interval_ms));
  DV_RETURN_IF_ERROR(s.Get("timeout_ms", &m->timeout_ms));
  DV_RETURN_IF_ERROR(s.Get("chunk_kb", &chunk_kb));
  DV_RETURN_IF_ERROR(s.CheckUnknown());
  if (m->enabled && m->root.empty())
    return Status::InvalidArgument("map_sync.root: required when map_sync.enabled");
  DV_RETURN_IF_ERROR(Positive("map_sync.interval_ms", m->interval_ms));
  DV_RETURN_IF_ERROR(Positive("map_sync.timeout_ms", m->timeout_ms));
  if (chunk_kb < 1 || chunk_kb > int64_t(transport::kMaxMapChunkBytes >> 10))
    return Status::InvalidArgument("map_sync.chunk_kb: 1 to 1024");
  m->chunk_bytes = int(chunk_kb << 10);
  return Status::Ok();
}

Status ParseSpool(const YAML::Node& node, transport::SpoolOptions* o) {
  Section s(node, "spool.");
  std::string sync = "group_commit";
  int64_t budget_kb = int64_t(o->budget_bytes >> 10), segment_kb = int64_t(o->segment_bytes >> 10);
  DV_RETURN_IF_ERROR(s.Get("dir", &o->dir));
  DV_RETURN_IF_ERROR(s.Get("budget_kb", &budget_kb));
  DV_RETURN_IF_ERROR(s.Get("segment_kb", &segment_kb));
  DV_RETURN_IF_ERROR(s.Get("sync", &sync));
  DV_RETURN_IF_ERROR(s.Get("group_commit_ms", &o->group_commit_ms));
  DV_RETURN_IF_ERROR(s.CheckUnknown());
  if (sync == "every_record") {
    o->sync = transport::SpoolOptions::Sync::kEveryRecord;
  } else if (sync == "group_commit") {
    o->sync = transport::SpoolOptions::Sync::kGroupCommit;
  } else {
    return Status::InvalidArgument("spool.sync: '" + sync +
                                   "' is not every_record or group_commit");
  }
  if (o->dir.empty()) return Status::InvalidArgument("spool.dir: required");
  if (budget_kb <= 0 || segment_kb <= 0)
    return Status::InvalidArgument("spool.budget_kb, spool.segment_kb: must be > 0");
  o->budget_bytes = uint64_t(budget_kb) << 10;
  o->segment_bytes = uint64_t(segment_kb) << 10;
  return Status::Ok();
}

}  // namespace

StatusOr<AgentConfig> ParseAgentConfig(const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(name + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) return Status::InvalidArgument(name + ": top level is not a mapping");
  AgentConfig c;
  Section s(root, "");
  auto with_name = [&](const Status& st) { return st.ok() ? st : st.WithContext(name); };
  Status st;
  try {
    st = [&]() -> Status {
      DV_RETURN_IF_ERROR(s.Get("vehicle", &c.vehicle));
      DV_RETURN_IF_ERROR(s.Get("drive", &c.drive));
      DV_RETURN_IF_ERROR(s.Get("lidar_endpoint", &c.lidar_endpoint));
      DV_RETURN_IF_ERROR(s.Get("pose_topic", &c.pose_topic));
      DV_RETURN_IF_ERROR(s.Get("pose_max_gap_ms", &c.pose_max_gap_ms));
      DV_RETURN_IF_ERROR(s.Get("source_drive", &c.source_drive));
      DV_RETURN_IF_ERROR(s.Get("source_rate_hz", &c.source_rate_hz));
      DV_RETURN_IF_ERROR(s.Get("map_dir", &c.map_dir));
      int64_t map_mb = c.map_memory_bytes >> 20;
      DV_RETURN_IF_ERROR(s.Get("map_memory_mb", &map_mb));
      c.map_memory_bytes = map_mb << 20;
      DV_RETURN_IF_ERROR(s.Get("tolerance_m", &c.tolerance_m));
      DV_RETURN_IF_ERROR(s.Get("residual_precision_m", &c.residual_precision_m));
      DV_RETURN_IF_ERROR(s.Get("intensity", &c.intensity));
      std::string backend = "cpu";
      DV_RETURN_IF_ERROR(s.Get("encoder_backend", &backend));
      auto be = codec::ParseBackend(backend);
      if (!be.ok()) return be.status().WithContext("encoder_backend");
      c.encoder_backend = *be;
      DV_RETURN_IF_ERROR(s.Get("encoder_threads", &c.encoder_threads));
      DV_RETURN_IF_ERROR(s.Get("frame_threads", &c.frame_threads));
      DV_RETURN_IF_ERROR(s.Get("queue_frames", &c.queue_frames));
      DV_RETURN_IF_ERROR(s.Get("metrics_listen", &c.metrics_listen));
      if (const YAML::Node sensors = s.Child("sensors")) {
        if (!sensors.IsSequence() || sensors.size() == 0 ||
            sensors.size() > transport::kMaxHelloSensors) {
          return Status::InvalidArgument("sensors: a list of 1 to 64 {id, topic}");
        }
        c.sensors.clear();
        for (size_t i = 0; i < sensors.size(); ++i) {
          Section ss(sensors[i], "sensors[" + std::to_string(i) + "].");
          SensorConfig sc;
          DV_RETURN_IF_ERROR(ss.Get("id", &sc.id));
          DV_RETURN_IF_ERROR(ss.Get("topic", &sc.topic));
          DV_RETURN_IF_ERROR(ss.CheckUnknown());
          c.sensors.push_back(sc);
        }
      }
      DV_RETURN_IF_ERROR(ParseSpool(s.Child("spool"), &c.spool));
      if (const YAML::Node up = s.Child("upload")) DV_RETURN_IF_ERROR(ParseUpload(up, &c.upload));
      if (const YAML::Node ms = s.Child("map_sync"))
        DV_RETURN_IF_ERROR(ParseMapSync(ms, &c.map_sync));
      return s.CheckUnknown();
    }();
  } catch (const YAML::Exception& e) {
    st = Status::InvalidArgument(std::string("malformed value: ") + e.what());
  }
  DV_RETURN_IF_ERROR(with_name(st));
  if (c.vehicle.empty()) return with_name(Status::InvalidArgument("vehicle: required"));
  DV_RETURN_IF_ERROR(with_name(transport::ValidateName("vehicle", c.vehicle)));
  DV_RETURN_IF_ERROR(with_name(transport::ValidateName("drive", c.drive)));
  if (c.encoder_threads < 1 || c.encoder_threads > 64)
    return with_name(Status::InvalidArgument("encoder_threads: 1 to 64"));
  if (c.frame_threads < 1 || c.frame_threads > codec::kMaxEncoderThreads)
    return with_name(Status::InvalidArgument("frame_threads: 1 to " +
                                             std::to_string(codec::kMaxEncoderThreads)));
  if (c.queue_frames < 1 || c.queue_frames > 10000)
    return with_name(Status::InvalidArgument("queue_frames: 1 to 10000"));
  if (!(c.tolerance_m > 0)) return with_name(Status::InvalidArgument("tolerance_m: must be > 0"));
  if (c.source_rate_hz < 0) return with_name(Status::InvalidArgument("source_rate_hz: negative"));
  return c;
}

StatusOr<AgentConfig> LoadAgentConfig(const std::string& path) {
  DV_ASSIGN_OR_RETURN(const std::string text, ReadFileText(path, 1 << 20));
  return ParseAgentConfig(text, path);
}

}  // namespace dv::agent
