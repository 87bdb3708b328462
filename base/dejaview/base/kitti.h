// KITTI odometry file formats (spec: docs/formats.md).
//   velodyne/NNNNNN.bin   N x {float32 x, y, z, reflectance}, little-endian, no header
//   poses.txt             one line per frame: 12 numbers, row-major 3x4 T_world_velodyne
//   timestamps.txt        one number per line: seconds from the start of the sequence
//   labels/NNNNNN.label   N x uint32: class in the low 16 bits, instance in the high 16
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv {

// A KITTI frame of more than this many points is rejected as absurd (an HDL-64E gives ~125k,
// a 128-beam sensor ~260k): 16M points = 256 MiB of floats.
constexpr size_t kMaxPointsPerFrame = size_t(1) << 24;

// Non-finite points are kept: callers decide (RemoveNonFinite) and count them.
StatusOr<PointCloud> ReadKittiBin(const std::string& path);
Status WriteKittiBin(const std::string& path, const PointCloud& cloud);
std::vector<uint8_t> EncodeKittiBin(const PointCloud& cloud);
StatusOr<PointCloud> DecodeKittiBin(const uint8_t* data, size_t size, const std::string& name);

// Poses are re-orthonormalised (PoseFromKitti12); the rows give the 12 numbers as written.
StatusOr<std::vector<Pose>> ReadKittiPoses(const std::string& path);
StatusOr<std::vector<std::array<double, 12>>> ReadKittiPoseRows(const std::string& path);
// The text of a poses.txt / timestamps.txt; name is for the error messages (file:line).
StatusOr<std::vector<Pose>> ParseKittiPoses(const std::string& text, const std::string& name);
StatusOr<std::vector<std::array<double, 12>>> ParseKittiPoseRows(const std::string& text,
                                                                 const std::string& name);
StatusOr<std::vector<double>> ParseTimestamps(const std::string& text, const std::string& name);
Status WriteKittiPoses(const std::string& path, const std::vector<Pose>& poses);
StatusOr<std::vector<double>> ReadTimestamps(const std::string& path);
Status WriteTimestamps(const std::string& path, const std::vector<double>& seconds);
// Epoch times: seconds with exactly nine decimals, written from the integer nanoseconds
// ("1700000000.123456789"): neither a double nor WriteTimestamps' %.9e holds an epoch time
// to the nanosecond.
Status WriteTimestampsNs(const std::string& path, const std::vector<int64_t>& ns);

// SemanticKITTI labels; expected_points is checked against the file length.
StatusOr<std::vector<uint32_t>> ReadLabels(const std::string& path, size_t expected_points);
Status WriteLabels(const std::string& path, const std::vector<uint32_t>& labels);
inline uint16_t LabelClass(uint32_t label) { return uint16_t(label & 0xffff); }
inline uint16_t LabelInstance(uint32_t label) { return uint16_t(label >> 16); }
// SemanticKITTI's moving classes (252-259: moving car, bicyclist, person, ...).
inline bool IsMovingClass(uint16_t cls) { return cls >= 252 && cls <= 259; }
// The simulator labels with its own classes (docs/simulator.md: 0 static, 1 dynamic, 2 changed)
// and marks its drives by writing poses_prior.txt (Drive::simulated()).
constexpr uint16_t kSimulatorDynamicClass = 1;
inline bool IsDynamicLabel(uint32_t label, bool simulated) {
  return simulated ? LabelClass(label) == kSimulatorDynamicClass : IsMovingClass(LabelClass(label));
}

}  // namespace dv
