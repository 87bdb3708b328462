// Voxel keys and the per-voxel record of the route map. A key is floor(p / resolution) per axis;
// everything derived from keys (tile of a voxel, candidate sets, orders) is integer arithmetic so
// that encoder and decoder agree bit for bit on any machine.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>

namespace dv::maps {

using VoxelKey = Eigen::Vector3i;

// Voxels per tile side: a tile's local coordinates fit in one byte per axis.
constexpr int kTileVoxels = 256;

inline int FloorDiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

inline VoxelKey KeyOf(const Eigen::Vector3d& p, double resolution_m) {
  return VoxelKey(int(std::floor(p.x() / resolution_m)), int(std::floor(p.y() / resolution_m)),
                  int(std::floor(p.z() / resolution_m)));
}
inline VoxelKey TileOf(const VoxelKey& k) {
  return VoxelKey(FloorDiv(k.x(), kTileVoxels), FloorDiv(k.y(), kTileVoxels),
                  FloorDiv(k.z(), kTileVoxels));
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

// atan2 from + - * / only (max error about 1e-5 rad): unlike libm's atan2 it rounds identically
// on every IEEE-754 machine, so it may decide angular bins that the decoder must reproduce.
inline double PortableAtan2(double y, double x) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  const double mx = ax > ay ? ax : ay;
  if (mx == 0) return 0;
  const double a = (ax > ay ? ay : ax) / mx;
  const double s = a * a;
  double r = ((((0.0208351 * s - 0.085133) * s + 0.180141) * s - 0.3302995) * s + 0.999866) * a;
  if (ay > ax) r = 1.57079632679489662 - r;
  if (x < 0) r = 3.14159265358979324 - r;
  return y < 0 ? -r : r;
}

}  // namespace dv::maps
