// The CUDA backend of hot_paths.h, on plain host arrays (no Eigen: nvcc compiles the other side).
// Every function copies its inputs to the device, runs the kernels of hot_kernels.h' functions
// and copies the results back; a CUDA error comes back as a Status naming the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "dejaview/base/status.h"
#include "hot_kernels.h"

namespace dv::codec::cuda {

// Ok when a CUDA device is usable; otherwise why not ("no CUDA device: ...").
Status DeviceAvailable();

// Fills a hash table of `slots` slots (a power of two, mask slots - 1, `shift` as
// kernels::HashSlot takes it) with packed[i] -> i for i < n, the keys distinct; keys and values:
// host arrays of `slots`, written whole (empty slots: kernels::kEmptyKey and -1).
Status IndexKeys(const uint64_t* packed, size_t n, size_t slots, int32_t shift, uint64_t* keys,
                 int32_t* values);

// pts: n x 3 floats; sensor: candidates x 3 floats; the hash has `slots` slots. explained,
// point_nearest, point_second: n; nearest, close: candidates (all written whole).
Status ClassifyPoints(const float* pts, size_t n, const kernels::Rigid& T_map_sensor,
                      const kernels::HashView& index, size_t slots, const float* sensor,
                      size_t candidates, double voxel_m, int32_t nb, double bound2, double select2,
                      uint8_t* explained, uint8_t* nearest, uint8_t* close, int32_t* point_nearest,
                      int32_t* point_second);

// As ClassifyPoints; near: n (written whole).
Status MarkNearCandidates(const float* pts, size_t n, const kernels::Rigid& T_map_sensor,
                          const kernels::HashView& index, size_t slots, const float* sensor,
                          size_t candidates, double voxel_m, int32_t nb, double bound2,
                          uint8_t* near);

// voxels: n records laid out as kernels::VoxelRecord; T: R_map_sensor, t_map_sensor. sensor:
// n x 3 floats; range, cell: n; nearest: grid.rows * grid.cols (all written whole).
Status ProjectCandidates(const void* voxels, size_t n, double voxel_m, const kernels::Rigid& T,
                         const kernels::AngularGrid& grid, float* sensor, double* range,
                         int32_t* cell, double* nearest);

// Device copies of the map points (n x 3 doubles) and of two neighbour grids, for the
// registration iterations. A grid's hash has `slots` slots; its cells hold `cells` cells.
class Search {
 public:
  static StatusOr<std::unique_ptr<Search>> Create(const double* map_pts, size_t n,
                                                  const kernels::NeighbourGrid& fine,
                                                  size_t fine_slots,
                                                  const kernels::NeighbourGrid& coarse,
                                                  size_t coarse_slots, size_t coarse_cells);
  ~Search();
  // src: n x 3 doubles; best: n.
  Status Find(const double* src, size_t n, const kernels::Rigid& T, bool fine, double max_d2,
              int32_t* best) const;

 private:
  struct Impl;
  explicit Search(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dv::codec::cuda
