// The map section: which candidate map voxels explain the frame. The candidate set and every
// context are derived from (map, quantised pose, radius) alone, with integer voxel arithmetic and
// IEEE double arithmetic free of libm calls, so encoder and decoder agree on any machine.
#pragma once

#include <Eigen/Core>
#include <array>
#include <vector>

#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"
#include "dejaview/codec/range_coder.h"
#include "dejaview/maps/route_map.h"
#include "voxel_hash.h"

namespace dv::codec {

struct Candidates {
  double resolution_m = 0;
  std::vector<maps::MapVoxel> voxels;   // canonical map order
  std::vector<Eigen::Vector3f> sensor;  // each representative in the sensor frame, as decoded
  std::vector<uint8_t> context;         // visibility x range x persistence, per candidate
  std::vector<int32_t> cell;            // angular cell of each candidate, -1 outside the grid
  VoxelHash index{0};                   // voxel key -> candidate index (encoder only)
};

// The angular grid of the visibility context: cell = row * kAngularCols + column.
constexpr int kAngularCols = 1024;
// The grid column of a point in the sensor frame, by the rule DeriveCandidates projects with.
int AngularColumn(const Eigen::Vector3f& p_sensor);

// Rotation matrix of a unit quaternion by explicit products (no libm): both sides use this.
Eigen::Matrix3d RotationOf(const Eigen::Vector4d& wxyz);

// Candidates: map voxels with |key - key(sensor)| <= ceil(radius / resolution) + 1 voxels.
// `parts` says what to fill beyond voxels: the decoder never looks a key up, and registration
// needs neither the sensor-frame positions nor the contexts.
enum CandidateParts : unsigned { kCandidateIndex = 1, kCandidateProjection = 2 };
Status DeriveCandidates(maps::RouteMap* map, const Eigen::Matrix3d& R_map_sensor,
                        const Eigen::Vector3d& t_map_sensor, double radius_m, Candidates* out,
                        unsigned parts = kCandidateIndex | kCandidateProjection,
                        Backend backend = Backend::kCpu);

// For each candidate, the index of its neighbour at key - e_x, - e_y, - e_z when that neighbour
// is a candidate earlier in the order, else -1: the context of the selection coder.
std::vector<std::array<int32_t, 3>> PrecedingNeighbours(const Candidates& c);

// How the selection bits are modelled (docs/delta-format.md): each_face = false (format versions 1
// and 2) makes the neighbour context the number of selected face neighbours; true (version 3) the
// state of each face neighbour (not coded, unselected, selected).
struct SelectionModel {
  Adaptation adaptation;
  bool each_face;
};
std::vector<uint8_t> EncodeSelection(const Candidates& c, const std::vector<uint8_t>& selected,
                                     const SelectionModel& model);
Status DecodeSelection(const Candidates& c, const uint8_t* data, size_t size,
                       const SelectionModel& model, std::vector<uint8_t>* selected);

}  // namespace dv::codec
