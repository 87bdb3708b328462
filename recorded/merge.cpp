// A drive's frames as one world-frame cloud (drive_mcap.h: MergeDrive).
#include <cmath>
#include <cstdint>
#include <unordered_set>

#include "dejaview/recorded/drive_mcap.h"

namespace dv::recorded {
namespace {

// A voxel's integer coordinates packed into one key: 21 bits each, two's complement, so that
// voxels up to 2^20 cells from the origin on each axis are distinct (a 1 cm voxel: 10 km).
uint64_t VoxelKey(const Eigen::Vector3f& p, double voxel_m) {
  uint64_t key = 0;
  for (int k = 0; k < 3; ++k) {
    const auto cell = int64_t(std::floor(double(p[k]) / voxel_m));
    key = key << 21 | (uint64_t(cell) & ((uint64_t(1) << 21) - 1));
  }
  return key;
}

}  // namespace

StatusOr<PointCloud> MergeDrive(const Drive& drive, double voxel_m, MergeStats* stats) {
  if (drive.size() == 0 || drive.poses.size() != drive.size())
    return Status::InvalidArgument(drive.root +
                                   ": a merged cloud needs frames and a pose for each "
                                   "(poses.txt)");
  if (!(voxel_m >= 0) || !std::isfinite(voxel_m))
    return Status::InvalidArgument("--voxel: must be a finite size >= 0 m");
  // Voxels beyond 2^20 cells from the origin would share keys: refuse a voxel too small for the
  // drive's extent rather than drop points silently.
  constexpr double kMaxCells = double(1 << 20);
  *stats = MergeStats();
  PointCloud merged;
  std::unordered_set<uint64_t> voxels;
  for (size_t i = 0; i < drive.size(); ++i) {
    DV_ASSIGN_OR_RETURN(const PointCloud cloud, ReadPointCloudFile(drive.frame_paths[i]));
    ++stats->frames;
    stats->points_in += cloud.size();
    for (size_t k = 0; k < cloud.size(); ++k) {
      if (!cloud.xyz[k].allFinite()) {
        ++stats->non_finite;
        continue;
      }
      // The voxel of the point as written (float32), so that the written cloud itself has at
      // most one point per voxel.
      const Eigen::Vector3d world = drive.poses[i] * cloud.xyz[k].cast<double>();
      const Eigen::Vector3f p(float(world.x()), float(world.y()), float(world.z()));
      if (voxel_m > 0) {
        if (double(p.cwiseAbs().maxCoeff()) / voxel_m >= kMaxCells)
          return Status::OutOfRange(drive.frame_paths[i] + ": point " + std::to_string(k) +
                                    " is more than 2^20 voxels of " + std::to_string(voxel_m) +
                                    " m from the world origin; use a larger --voxel");
        if (!voxels.insert(VoxelKey(p, voxel_m)).second) continue;
      }
      merged.push_back(p, cloud.intensity[k]);
    }
  }
  stats->points_out = merged.size();
  return merged;
}

}  // namespace dv::recorded
