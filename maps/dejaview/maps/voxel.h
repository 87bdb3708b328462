// Voxel keys and the per-voxel record of the route map. A key is floor(p / resolution) per axis;
// everything derived from keys (tile of a voxel, candidate sets, orders) is integer arithmetic so
// that encoder and decoder agree bit for bit on any machine.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>

#include "dejaview/maps/key_floor.h"
#include "dejaview/maps/portable_atan2.h"

namespace dv::maps {

using VoxelKey = Eigen::Vector3i;

// Voxels per tile side: a tile's local coordinates fit in one byte per axis.
constexpr int kTileVoxels = 256;

inline int FloorDiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

inline VoxelKey KeyOf(const Eigen::Vector3d& p, double resolution_m) {
  return VoxelKey(KeyFloor(p.x() / resolution_m), KeyFloor(p.y() / resolution_m),
                  KeyFloor(p.z() / resolution_m));
}
// floor(k / 256) per axis as an arithmetic shift (two's complement), which is what FloorDiv
// computes, without its branch on the sign: the codec takes the tile of every candidate it codes.
inline VoxelKey TileOf(const VoxelKey& k) {
  static_assert(kTileVoxels == 256, "TileOf shifts by 8 bits");
  return VoxelKey(k.x() >> 8, k.y() >> 8, k.z() >> 8);
}
// Lexicographic (x, y, z): the canonical order of tiles, and of voxels inside a tile.
inline bool KeyLess(const VoxelKey& a, const VoxelKey& b) {
  if (a.x() != b.x()) return a.x() < b.x();
  if (a.y() != b.y()) return a.y() < b.y();
  return a.z() < b.z();
}

struct MapVoxel {
  VoxelKey key;
  uint8_t q[3];           // representative inside the voxel: (key + (q + 0.5) / 256) * resolution
  uint8_t intensity;      // mean intensity * 255, rounded
  uint16_t hits;          // source frames with a return in this voxel
  uint16_t seen_through;  // source frames whose beams passed clearly beyond it
};

inline Eigen::Vector3d Representative(const MapVoxel& v, double resolution_m) {
  return Eigen::Vector3d((v.key.x() + (v.q[0] + 0.5) / 256.0) * resolution_m,
                         (v.key.y() + (v.q[1] + 0.5) / 256.0) * resolution_m,
                         (v.key.z() + (v.q[2] + 0.5) / 256.0) * resolution_m);
}

}  // namespace dv::maps
