// The live source: a SUB socket on the LiDAR driver's PUB (docs/wire.md) receiving the sensor
// topics and the pose topic. Each frame gets the pose at its sweep stamp -- its own pose when
// the driver sent one, else interpolated from the pose topic -- and goes into the encoder
// queue, whose drop-oldest policy (counted) applies when encoding falls behind. A frame whose
// pose has not arrived yet waits (bounded: queue_frames frames, pose_max_gap_ms); one that can
// never get a pose is coded intra and counted, never dropped. A message of any other shape or
// content is rejected, counted by reason and logged at a bounded rate; the loop goes on.
#pragma once

#include <atomic>
#include <map>
#include <string>

#include "dejaview/agent/agent.h"
#include "dejaview/agent/pose_buffer.h"
#include "dejaview/agent/source_epoch.h"
#include "dejaview/transport/wire.h"

namespace dv::agent {

class Subscriber {
 public:
  Subscriber(const AgentConfig& config, BoundedQueue<Frame>* queue, AgentStats* stats,
             EpochSource* epochs);
  // The source thread's body; returns when *stop is set.
  void Run(const std::atomic<bool>* stop);

 private:
  void OnFrame(uint32_t sensor_id, const uint8_t* data, size_t size);
  void ResolvePending(bool flush);
  void NewEpoch(const std::string& why);
  void Reject(transport::Reject why, const std::string& message);
  void LogRejected(const std::string& message);
  void PublishCounters();

  const AgentConfig& config_;
  BoundedQueue<Frame>* queue_;
  AgentStats* stats_;
  EpochSource* epochs_;
  PoseBuffer poses_;
  std::map<std::string, uint32_t> sensor_by_topic_;
  std::deque<std::pair<int64_t, Frame>> pending_;  // (arrival, frame) waiting for its pose
  transport::WireCounters counters_;
  uint64_t epoch_ = 0;
  std::map<uint32_t, uint64_t> last_sequence_;  // per sensor, in this epoch
  int64_t last_reject_log_ms_ = -1000000;
  uint64_t unlogged_rejects_ = 0;
};

}  // namespace dv::agent
