// The map section: which candidate map voxels explain the frame. The candidate set and every
// context are derived from (map, quantised pose, radius) alone, with integer voxel arithmetic and
// IEEE double arithmetic free of libm calls, so encoder and decoder agree on any machine.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/route_map.h"
#include "voxel_hash.h"

namespace dv::codec {

struct Candidates {
  double resolution_m = 0;
  std::vector<maps::MapVoxel> voxels;   // canonical map order
  std::vector<Eigen::Vector3f> sensor;  // each representative in the sensor frame, as decoded
  std::vector<uint8_t> context;         // visibility x range x persistence, per candidate
  VoxelHash index{0};                   // voxel key -> candidate index
};

// Rotation matrix of a unit quaternion by explicit products (no libm): both sides use this.
Eigen::Matrix3d RotationOf(const Eigen::Vector4d& wxyz);

// Candidates: map voxels with |key - key(sensor)| <= ceil(radius / resolution) + 1 voxels.
Status DeriveCandidates(maps::RouteMap* map, const Eigen::Matrix3d& R_map_sensor,
                        const Eigen::Vector3d& t_map_sensor, double radius_m, Candidates* out,
                        Backend backend = Backend::kCpu);

std::vector<uint8_t> EncodeSelection(const Candidates& c, const std::vector<uint8_t>& selected);
Status DecodeSelection(const Candidates& c, const uint8_t* data, size_t size,
                       std::vector<uint8_t>* selected);

}  // namespace dv::codec
