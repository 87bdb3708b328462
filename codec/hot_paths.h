// The encoder's per-frame hot paths as array-in, array-out functions, each with a CPU and a CUDA
// backend (codec/cuda, built with -DDEJAVIEW_CUDA=ON). Both call the per-element functions of
// hot_kernels.h, and every reduction whose result depends on order stays on the CPU or is
// order-free (an OR of marks, a minimum), so both backends return the same bits.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/voxel.h"
#include "hot_kernels.h"
#include "map_coder.h"
#include "sorted_grid.h"
#include "voxel_hash.h"

namespace dv::codec {

kernels::Rigid RigidOf(const Eigen::Matrix3d& R, const Eigen::Vector3d& t);

// *index: voxels[i]'s key -> i, the voxels' keys distinct (a map's are), as the CUDA kernels
// look candidates up (DeriveCandidates' kCandidateIndex). The CUDA backend inserts on the device
// and copies the table back: on 356 k candidates that took 18 ms a frame on the CPU of a GPU
// machine. Where keys collide, slots may differ from the CPU's insertion order; every look-up
// answers the same, and the kernels only look up.
Status IndexKeys(Backend backend, const std::vector<maps::MapVoxel>& voxels, VoxelHash* index);

// x, y, z of each voxel's key, for a SortedGrid.
std::vector<int32_t> VoxelKeys(const std::vector<maps::MapVoxel>& voxels);

#ifdef __SSE2__
// maps::BoundedFloor of two doubles, as two int32 lanes (the low two): truncated, then one less
// where that is above the value (INT_MIN where a value is out of int's range or NaN).
inline __m128i BoundedFloor2(__m128d v) {
  const __m128i i = _mm_cvttpd_epi32(v);
  const __m128i above = _mm_castpd_si128(_mm_cmpgt_pd(_mm_cvtepi32_pd(i), v));
  return _mm_add_epi32(i, _mm_shuffle_epi32(above, _MM_SHUFFLE(2, 0, 2, 0)));
}

// kernels::NeighbourhoodKey of points a and b at once, lane by lane the same IEEE operations in
// the same order (Transform's products and sums, KeyOf's quotient, KeyFloor's clamp, truncation
// and correction; the build fuses nothing): the keys at k[0..2] and k[3..5], whether each fits as
// bits 0 and 1. The quotients were most of the classification's keys (KITTI 00: 124 k points, three
// divisions each; two lanes a division here).
inline unsigned NeighbourhoodKeys2(const kernels::Rigid& T, const Eigen::Vector3f& a,
                                   const Eigen::Vector3f& b, double voxel_m, int32_t nb,
                                   int32_t k[6]) {
  const __m128d p[3] = {_mm_setr_pd(double(a.x()), double(b.x())),
                        _mm_setr_pd(double(a.y()), double(b.y())),
                        _mm_setr_pd(double(a.z()), double(b.z()))};
  const __m128d v = _mm_set1_pd(voxel_m), lo = _mm_set1_pd(-double(1 << 30)),
                hi = _mm_set1_pd(double(1 << 30));
  alignas(16) int32_t lanes[3][4];
  for (int r = 0; r < 3; ++r) {
    const __m128d q =
        _mm_add_pd(_mm_add_pd(_mm_add_pd(_mm_mul_pd(_mm_set1_pd(T.R[3 * r]), p[0]),
                                         _mm_mul_pd(_mm_set1_pd(T.R[3 * r + 1]), p[1])),
                              _mm_mul_pd(_mm_set1_pd(T.R[3 * r + 2]), p[2])),
                   _mm_set1_pd(T.t[r]));
    // KeyFloor: maxpd gives its second operand where the first is NaN, so NaN clamps to -2^30.
    const __m128d c = _mm_min_pd(_mm_max_pd(_mm_div_pd(q, v), lo), hi);
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes[r]), BoundedFloor2(c));
  }
  for (int r = 0; r < 3; ++r) {
    k[r] = lanes[r][0];
    k[3 + r] = lanes[r][1];
  }
  return unsigned(kernels::KeyFits(k, nb)) | unsigned(kernels::KeyFits(k + 3, nb)) << 1;
}
#endif

// The CPU's look-up around frame points: visit(r, points, count, near) once for each distinct
// voxel of T_map_sensor pts[i] (pts in the sensor frame) with its `count` points and the indices
// of the voxels within nb <= grid.max_nb() voxels per axis of it, in (dx, dy, dz) order; points
// whose neighbourhood holds no voxel, or leaves the key range, are skipped. grid: the voxels' keys
// (VoxelKeys), sorted, not hashed (sorted_grid.h). The points are visited in up to `threads` runs
// r at once (SortedGrid::ForEachVoxelInRuns), each point's coordinates prefetched a few points
// ahead.
template <typename Visit>
void ForEachPointVoxel(const std::vector<Eigen::Vector3f>& pts, const kernels::Rigid& T_map_sensor,
                       const SortedGrid& grid, double voxel_m, int nb, int threads, Visit&& visit) {
  auto key = [&](size_t i, int32_t k[3]) {
    const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
    return kernels::NeighbourhoodKey(T_map_sensor, p, voxel_m, nb, k);
  };
#ifdef __SSE2__
  const SortedGrid::Queries q =
      grid.SortBy(pts.size(), nb, threads, key, [&](size_t i, int32_t k[6]) {
        return NeighbourhoodKeys2(T_map_sensor, pts[i], pts[i + 1], voxel_m, nb, k);
      });
#else
  const SortedGrid::Queries q = grid.SortBy(pts.size(), nb, threads, key);
#endif
  grid.ForEachVoxelInRuns(q, nb, threads, visit,
                          [&](uint32_t i) { __builtin_prefetch(pts[i].data()); });
}

// ForEachPointVoxel, once per point: visit(r, i, near).
template <typename Visit>
void ForEachPointNeighbourhood(const std::vector<Eigen::Vector3f>& pts,
                               const kernels::Rigid& T_map_sensor, const SortedGrid& grid,
                               double voxel_m, int nb, int threads, Visit&& visit) {
  ForEachPointVoxel(
      pts, T_map_sensor, grid, voxel_m, nb, threads,
      [&](int r, const uint32_t* points, size_t count, const SortedGrid::Items& near) {
        for (size_t k = 0; k < count; ++k) visit(r, points[k], near);
      });
}

// Encode's classification. For each frame point p = pts[i] (sensor frame): explained[i] = 1 when
// some candidate j whose voxel lies within nb voxels (per axis) of the voxel of T_map_sensor p has
// its representative candidate_sensor[j] within sqrt(bound2) of p. The nearest of those (the first
// in (dx, dy, dz) order among equals) gets marks->nearest[j] = 1, and every one within
// sqrt(select2) <= sqrt(bound2) marks->close[j] = 1 (the marks are sized to the candidates and
// cleared first). The CPU finds the candidates around a point in `grid`, a SortedGrid of their
// voxels' keys with max_nb >= nb, the CUDA backend in their hash, `index`; each backend may leave
// the other's null. The CPU splits the points over up to `threads` threads and gives the same marks
// with any number. With `near`, the CPU also sets near[i] = 1 for each unexplained point with one
// of the candidates it looked at within sqrt(near2) (the CUDA backend sets none): points
// MarkNearCandidates with bound2 = near2 and an nb of at least this one would mark, which it can
// take as `known` and leave out of its search.
Status ClassifyPoints(Backend backend, const std::vector<Eigen::Vector3f>& pts,
                      const kernels::Rigid& T_map_sensor, const SortedGrid* grid,
                      const VoxelHash* index, const std::vector<Eigen::Vector3f>& candidate_sensor,
                      double voxel_m, int nb, double bound2, double select2,
                      std::vector<uint8_t>* explained, CandidateMarks* marks, int threads = 1,
                      double near2 = 0, std::vector<uint8_t>* near = nullptr);

// Encode's first gap test, for the points ClassifyPoints left unexplained: near[i] = 1 when some
// candidate whose voxel lies within nb voxels (per axis) of the voxel of T_map_sensor pts[i] has
// its representative within sqrt(bound2) of pts[i]. An existence test, free of order: both
// backends give the same marks by construction. grid / index / threads as for ClassifyPoints.
// With `known`, the points with known[i] = 1 are marked without a search: the caller vouches that
// the test holds for them (ClassifyPoints' `near`).
Status MarkNearCandidates(Backend backend, const std::vector<Eigen::Vector3f>& pts,
                          const kernels::Rigid& T_map_sensor, const SortedGrid* grid,
                          const VoxelHash* index,
                          const std::vector<Eigen::Vector3f>& candidate_sensor, double voxel_m,
                          int nb, double bound2, std::vector<uint8_t>* near, int threads = 1,
                          const std::vector<uint8_t>* known = nullptr);

// DeriveCandidates' projection: each voxel's representative in the sensor frame (as float, as
// the decoder emits it), its range, its cell in `grid` (-1 outside), and per cell the nearest
// range (1e300 where no candidate falls).
struct Projection {
  std::vector<Eigen::Vector3f> sensor;
  std::vector<double> range;
  std::vector<int32_t> cell;
  std::vector<double> nearest;
};
// The CPU splits the voxels over up to `threads` threads, in runs of at least kMinProjectRun: a
// shorter run projects in less time than a thread takes to start (0.1 ms here).
constexpr size_t kMinProjectRun = 65536;
Status ProjectCandidates(Backend backend, const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                         const Eigen::Matrix3d& R_map_sensor, const Eigen::Vector3d& t_map_sensor,
                         const kernels::AngularGrid& grid, Projection* out, int threads = 1);

// The CPU loop of ProjectCandidates over voxels[0, n): kernels::Project voxel by voxel, or, with
// avx2 (on a CPU that has it, CpuHasAvx2), the same IEEE operations in the same order four voxels
// at a time. The bits are the same either way: a frame's contexts depend on them, and it must
// decode alike on a machine without AVX2. On KITTI 00 at T = 0.1 the projection was a fifth of a
// frame's decode time (dv_micro BM_DejaviewDecodeFrame, perf).
bool CpuHasAvx2();
// Tests: allow (the default) or forbid the AVX2 paths CpuHasAvx2 opens, so that one machine checks
// the SSE2 and scalar paths beside them (ProjectCandidates, ClassifyPoints).
void AllowAvx2(bool allow);
void ProjectCpu(const maps::MapVoxel* voxels, size_t n, double voxel_m, const kernels::Rigid& T,
                const kernels::AngularGrid& grid, bool avx2, float* sensor, double* range,
                int32_t* cell);

// What a search found around each source point, kept from one registration iteration to the next
// (CorrespondenceSearch::Find): a point whose voxel key has not changed has the same map points
// around it, and from its third iteration registration moves points centimetres, then
// millimetres, against voxels of 0.75-1.5 m (coarse) and decimetres (fine). One per source it
// serves (the source's points by index); it starts over when a search uses another grid. CPU only.
class NeighbourhoodCache {
 public:
  // How many look-ups it has made, over every search it served.
  size_t LookedUp() const { return looked_up_; }

 private:
  friend class CorrespondenceSearch;
  std::vector<int32_t> keys_;  // 3 per point: the key of its last look-up
  std::vector<uint8_t> known_;
  std::vector<std::vector<int32_t>> items_;
  size_t looked_up_ = 0;
  const SortedGrid* grid_ = nullptr;  // the grid its look-ups were made in
};

// RegisterFrame's correspondence search over fixed map points: the fine grid holds the
// candidates' own voxels (map_pts[i] is fine_voxels[i]'s representative), the coarse grid at most
// coarse_per_cell points per voxel of coarse_voxel_m, in point order. The CPU sorts both
// (sorted_grid.h); the CUDA backend hashes them (fine_index is the candidates' index, needed
// there only) and keeps device copies.
//
// The CPU also sorts the coarse points into coarse_levels finer grids, of coarse_voxel_m / 2,
// / 4, ..., each keeping every point, and searches the finest whose voxel is at least
// sqrt(max_d2): the 27 voxels around a point still hold every map point within sqrt(max_d2), but
// a few of them where the coarse grid's held dozens. The answer is the coarse grid's wherever no
// coarse voxel holds more than coarse_per_cell points (Nearest breaks ties by index, not by the
// order it visits voxels in), so the CUDA backend, which has the coarse grid only, returns the
// same.
class CorrespondenceSearch {
 public:
  // map_pts: the fine points (fine_voxels' representatives) first, then the coarse ones; best
  // indices refer to it. fine_grid (CPU, optional): a SortedGrid of fine_voxels' keys
  // (VoxelKeys) with max_nb >= 1, which the caller keeps while the search lives; without it the
  // CPU sorts them itself.
  static StatusOr<std::unique_ptr<CorrespondenceSearch>> Create(
      Backend backend, const std::vector<Eigen::Vector3d>& map_pts,
      const std::vector<maps::MapVoxel>& fine_voxels, const VoxelHash& fine_index,
      double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell, int coarse_levels = 0,
      const SortedGrid* fine_grid = nullptr);
  ~CorrespondenceSearch();

  // best[i]: index of the map point nearest to T source[i] within sqrt(max_d2) among the 27
  // voxels around it, on the fine or the coarse grid (the lowest index among equals); -1 when
  // none.
  // With a cache (on the CPU; coarse searches on the finer grids only), only the points whose
  // voxel changed since the cache's last search in the same grid look their neighbourhood up
  // again; the result is the same.
  Status Find(const std::vector<Eigen::Vector3d>& source, const kernels::Rigid& T, bool fine,
              double max_d2, std::vector<int32_t>* best, NeighbourhoodCache* cache = nullptr) const;

 private:
  struct Device;
  CorrespondenceSearch() = default;
  kernels::NeighbourGrid Grid(bool fine) const;

  const std::vector<Eigen::Vector3d>* map_pts_ = nullptr;
  size_t coarse_first_ = 0;  // index in map_pts of the first coarse point
  const VoxelHash* fine_index_ = nullptr;
  double fine_voxel_m_ = 0, coarse_voxel_m_ = 0;
  int per_cell_ = 0;
  const SortedGrid* fine_grid_ = nullptr;      // kCpu only, as the coarse grids
  std::unique_ptr<SortedGrid> own_fine_grid_;  // fine_grid_ unless the caller's
  // Of coarse_voxel_m_ / 2^level for level 0..coarse_levels; only level 0 capped at per_cell_.
  std::vector<std::unique_ptr<SortedGrid>> coarse_grids_;
  std::unique_ptr<VoxelHash> coarse_hash_;  // kCuda only, as below
  std::vector<int32_t> coarse_cells_;       // [count, index x per_cell] per cell
  std::unique_ptr<Device> device_;
};

}  // namespace dv::codec
