// Recent poses from the pose topic, so that each LiDAR frame gets the pose at its own
// timestamp. Poses arrive at their own rate (and possibly late), so the buffer keeps a bounded
// window and interpolates (slerp/lerp, base/pose.h) between the two samples around t.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv::agent {

class PoseBuffer {
 public:
  // max_samples bounds memory; max_gap_ns is the widest gap interpolated across (a longer gap
  // means the localiser stalled and an interpolated pose would be a guess).
  PoseBuffer(size_t max_samples, int64_t max_gap_ns)
      : max_samples_(max_samples), max_gap_ns_(max_gap_ns) {}

  // Samples must arrive in time order; an older or equal stamp is ignored and counted.
  void Add(int64_t t_ns, const Pose& T_map_sensor);
  // The pose at t_ns: Unavailable when t is after the newest sample (retry once it arrives),
  // NotFound when t is before the window or inside a gap wider than max_gap_ns.
  StatusOr<Pose> At(int64_t t_ns) const;
  uint64_t out_of_order() const;

 private:
  const size_t max_samples_;
  const int64_t max_gap_ns_;
  mutable std::mutex mu_;
  std::deque<std::pair<int64_t, Pose>> samples_;
  uint64_t out_of_order_ = 0;
};

}  // namespace dv::agent
