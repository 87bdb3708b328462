// Which of a frame's unexplained points stood still since the same sensor's frame before: an
// encoder-only test (the decoder reads which octree a cell is in and never repeats it).
//
// The points the map does not explain and that lie far from it are, on a real revisit, mostly
// scene changes that stand still (a car parked since the map's days, a skip, a construction
// fence), and few are moving objects. Only a moving object needs the residual's finer precision;
// a point within still_m of such a point of the frame before (in the map frame, both frames'
// refined poses) has moved less than still_m in that time, and is coded at the tolerance with
// the gap class. Frames further apart than kStillWindowNs, of another sensor or another map are
// never compared.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dv::codec {

// Two frames compared are at most this far apart in time: at 10 Hz the frame before, or the one
// before it where a frame was dropped.
constexpr int64_t kStillWindowNs = 250'000'000;

// One frame's far unexplained points in the map frame, bucketed in cubes of side 2 * match_m so
// that the points within match_m of any point lie in at most 8 cubes.
class StillFrame {
 public:
  StillFrame(uint64_t map_id, int64_t timestamp_ns, double match_m,
             std::vector<Eigen::Vector3d> points_map);
  // Whether some point lies within match_m of p_map.
  bool Near(const Eigen::Vector3d& p_map) const;
  uint64_t map_id() const { return map_id_; }
  int64_t timestamp_ns() const { return timestamp_ns_; }
  double match_m() const { return match_m_; }

 private:
  uint64_t CubeKey(int64_t x, int64_t y, int64_t z) const;
  uint64_t map_id_;
  int64_t timestamp_ns_;
  double match_m_, cube_m_;
  std::vector<Eigen::Vector3d> points_;                                // by cube
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> cubes_;  // key -> [begin, end)
};

// The latest frame of each sensor that the encoders sharing the memory coded (codec.h
// NewStillMemory). Thread-safe: encoder threads finish frames in any order.
class StillMemory {
 public:
  // The frame to compare a frame of `sensor` at timestamp_ns against: null where there is none
  // within kStillWindowNs before it, or it was coded against another map or match_m.
  std::shared_ptr<const StillFrame> Before(uint32_t sensor, uint64_t map_id, int64_t timestamp_ns,
                                           double match_m) const;
  // Keeps `frame` as the sensor's latest, where it is later than the one kept or that one lies
  // more than kStillWindowNs after it (the sensor's clock went back: a restarted replay).
  void Keep(uint32_t sensor, std::shared_ptr<const StillFrame> frame);

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, std::shared_ptr<const StillFrame>> last_;
};

}  // namespace dv::codec
