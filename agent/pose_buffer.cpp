#include "dejaview/agent/pose_buffer.h"

#include <algorithm>
#include <string>

namespace dv::agent {

void PoseBuffer::Add(int64_t t_ns, const Pose& T_map_sensor) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!samples_.empty() && t_ns <= samples_.back().first) {
    ++out_of_order_;
    return;
  }
  samples_.emplace_back(t_ns, T_map_sensor);
  while (samples_.size() > max_samples_) samples_.pop_front();
}

StatusOr<Pose> PoseBuffer::At(int64_t t_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (samples_.empty() || t_ns > samples_.back().first) {
    return Status::Unavailable("pose at " + std::to_string(t_ns) + " ns not received yet");
  }
  if (t_ns < samples_.front().first) {
    return Status::NotFound("pose at " + std::to_string(t_ns) + " ns is older than the buffer");
  }
  const auto after = std::lower_bound(samples_.begin(), samples_.end(), t_ns,
                                      [](const auto& s, int64_t t) { return s.first < t; });
  if (after->first == t_ns) return after->second;
  const auto before = after - 1;
  const int64_t gap = after->first - before->first;
  if (gap > max_gap_ns_) {
    return Status::NotFound("pose at " + std::to_string(t_ns) + " ns falls in a " +
                            std::to_string(gap / 1000000) + " ms gap of the pose topic");
  }
  return InterpolatePose(before->second, after->second, double(t_ns - before->first) / double(gap));
}

uint64_t PoseBuffer::out_of_order() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_of_order_;
}

}  // namespace dv::agent
