// The point cloud every library passes around. Coordinates are float32 metres in the frame the
// owner states (usually the sensor frame); intensity is float32 in the sensor's own scale
// (KITTI: reflectance 0..1). ring and time_offset_s are optional: empty, or one entry per point.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dv {

// How a text-capable format (PCD, PLY) stores its body.
enum class CloudEncoding { kBinary, kAscii };

struct PointCloud {
  std::vector<Eigen::Vector3f> xyz;
  std::vector<float> intensity;      // one per point (0 where the source had none)
  std::vector<uint16_t> ring;        // empty or one per point
  std::vector<float> time_offset_s;  // empty or one per point, seconds from the frame stamp

  size_t size() const { return xyz.size(); }
  bool empty() const { return xyz.empty(); }
  bool has_ring() const { return !ring.empty(); }
  bool has_time() const { return !time_offset_s.empty(); }
  void reserve(size_t n) {
    xyz.reserve(n);
    intensity.reserve(n);
  }
  void push_back(const Eigen::Vector3f& p, float i) {
    xyz.push_back(p);
    intensity.push_back(i);
  }
  // True when every per-point array has a consistent length.
  bool consistent() const {
    return intensity.size() == xyz.size() && (ring.empty() || ring.size() == xyz.size()) &&
           (time_offset_s.empty() || time_offset_s.size() == xyz.size());
  }
};

// Removes points with a non-finite coordinate (BENCHMARK.md's metrics remove them before measuring
// and count them). Returns how many were removed.
size_t RemoveNonFinite(PointCloud* cloud);

struct Bounds {
  Eigen::Vector3f min = Eigen::Vector3f::Constant(0);
  Eigen::Vector3f max = Eigen::Vector3f::Constant(0);
};
Bounds ComputeBounds(const PointCloud& cloud);

}  // namespace dv
