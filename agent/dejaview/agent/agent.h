// The vehicle agent: frames come from the LiDAR topics (or, offline, from a drive folder), get
// the pose at their timestamp, wait in a bounded queue, are encoded by worker threads and
// appended to the durable spool, from which the uploader drains them to the server.
// Shutdown (stop set, e.g. by SIGTERM) stops the sources, lets the workers drain the queue into
// the spool, syncs it, and then stops the uploader: nothing received is lost by a clean stop.
// With map sync on, a newer map version from the server replaces the one in use between frames.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "dejaview/agent/bounded_queue.h"
#include "dejaview/agent/config.h"
#include "dejaview/agent/uploader.h"
#include "dejaview/base/metrics.h"
#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/codec/codec.h"
#include "dejaview/transport/spool.h"
#include "dejaview/transport/wire.h"

namespace dv::agent {

struct Frame {
  uint32_t sensor_id = 0;
  uint64_t source_epoch = 0;  // with sequence, the frame's name (transport::RecordMeta)
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  PointCloud cloud;
  bool has_pose = false;                 // false: coded intra, without the map
  Pose T_map_sensor = Pose::Identity();  // the localisation prior at timestamp_ns
};

struct AgentStats {
  std::atomic<uint64_t> frames_in{0};
  std::atomic<uint64_t> frames_encoded{0};
  std::atomic<uint64_t> frames_failed{0};      // encoder or spool error, logged
  std::atomic<uint64_t> frames_no_pose{0};     // no pose at the frame's stamp: coded intra
  std::atomic<uint64_t> points_non_finite{0};  // dropped by the encoder (NaN/Inf coordinates)
  // Live messages rejected, by transport::Reject reason (the subscriber's WireCounters).
  std::atomic<uint64_t> wire_rejected[size_t(transport::Reject::kCount)] = {};
  std::atomic<uint64_t> source_epochs{0};
  std::atomic<uint64_t> epoch_write_errors{0};
  std::atomic<uint64_t> bytes_raw{0};  // 16 bytes per point (xyz + intensity float32)
  std::atomic<uint64_t> bytes_encoded{0};
  std::atomic<uint64_t> map_tiles_loaded{0};
  // Map sync (docs/map-sync.md).
  std::atomic<uint64_t> map_sync_attempts{0};
  std::atomic<uint64_t> map_sync_errors{0};  // failed attempts: the map in use is kept
  std::atomic<uint64_t> map_versions_switched{0};
  std::atomic<uint64_t> map_versions_pruned{0};  // old synced versions removed from the root
  std::atomic<uint64_t> map_tiles_fetched{0};
  std::atomic<uint64_t> map_tiles_reused{0};
  std::atomic<uint64_t> map_bytes_fetched{0};  // manifest and tile bytes
  std::atomic<uint64_t> map_bytes_on_wire{0};  // map-sync requests and replies
};

struct RunOptions {
  // Offline: exit once the source drive is exhausted and every record is acknowledged.
  bool exit_when_drained = false;
  std::string metrics_port_file;  // written with the bound metrics port
};

class Agent {
 public:
  explicit Agent(AgentConfig config);
  ~Agent();
  Status Run(const std::atomic<bool>* stop, const RunOptions& options);
  // The Prometheus exposition of /metrics (base/metrics), this agent's totals copied in.
  std::string RenderMetrics();

 private:
  void EncodeLoop();
  Status ReadDrive(const std::atomic<bool>* stop);
  void MapSyncLoop(const std::atomic<bool>* stop, const transport::CurveKeys& keys);
  std::string CurrentMapDir();

  AgentConfig config_;
  std::unique_ptr<transport::Spool> spool_;
  std::unique_ptr<Uploader> uploader_;
  BoundedQueue<Frame> queue_;
  AgentStats stats_;
  metrics::Registry registry_;
  metrics::Histogram& encode_seconds_;
  // The map new frames are encoded against. Map sync replaces it and bumps the generation;
  // each worker reopens it before its next frame (frames already encoded keep their version).
  std::mutex map_mu_;
  std::string map_dir_;
  std::atomic<uint64_t> map_generation_{0};
  // The encoder threads' shared memory of each sensor's latest frame: whichever thread codes a
  // frame, it is compared with the frame before (EncoderParams::still_m).
  const std::shared_ptr<codec::StillMemory> still_ = codec::NewStillMemory();
};

}  // namespace dv::agent
