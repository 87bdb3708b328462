// The live source: a SUB socket on the LiDAR driver's PUB (docs/wire.md) receiving the sensor
// topics and the pose topic. Each frame gets the pose at its sweep stamp -- its own pose when
// the driver sent one, else interpolated from the pose topic -- and goes into the encoder
// queue, whose drop-oldest policy (counted) applies when encoding falls behind. A frame whose
// pose has not arrived yet waits (bounded: queue_frames frames, pose_max_gap_ms); one that can
// never get a pose is dropped and counted.
#pragma once

#include <atomic>
#include <map>

#include "dejaview/agent/agent.h"
#include "dejaview/agent/pose_buffer.h"
#include "dejaview/transport/wire.h"

namespace dv::agent {

class Subscriber {
 public:
  Subscriber(const AgentConfig& config, BoundedQueue<Frame>* queue, AgentStats* stats);
  // The source thread's body; returns when *stop is set.
  void Run(const std::atomic<bool>* stop);
  uint64_t rejected() const { return rejected_; }

 private:
  void OnFrame(uint32_t sensor_id, const uint8_t* data, size_t size);
  void ResolvePending(bool flush);

  const AgentConfig& config_;
  BoundedQueue<Frame>* queue_;
  AgentStats* stats_;
  PoseBuffer poses_;
  std::map<std::string, uint32_t> sensor_by_topic_;
  std::deque<std::pair<int64_t, Frame>> pending_;  // (arrival, frame) waiting for its pose
  transport::WireCounters counters_;
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace dv::agent
