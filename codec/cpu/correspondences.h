// The CPU's correspondence search (hot_paths.h HotPaths::CreateSearch), for cpu/backend.cpp.
#pragma once

#include <memory>
#include <vector>

#include "hot_paths.h"

namespace dv::codec {

// map_pts: the fine points (fine_voxels' representatives) first, then the coarse ones; fine_voxels
// no more than map_pts. The search keeps pointers to map_pts and fine_grid.
std::unique_ptr<CorrespondenceSearch> NewCpuCorrespondenceSearch(
    const std::vector<Eigen::Vector3d>& map_pts, const std::vector<maps::MapVoxel>& fine_voxels,
    double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell, int coarse_levels,
    const SortedGrid* fine_grid);

}  // namespace dv::codec
