// The encoder's per-frame hot paths behind one object per backend: HotPaths, with a CPU
// implementation (cpu/backend.cpp, on the variant table of cpu/kernels.h it chose when it was
// made) and a CUDA one (cuda/backend.cpp, built with -DDEJAVIEW_CUDA=ON; its kernels are
// cuda/hot_paths.cu). MakeHotPaths makes one for the user's choice (codec.h Backend) and says why
// not where it cannot; codec::Encoder keeps one per backend kind and hands it to the stages that
// run hot paths. Both implementations call the per-element functions of hot_kernels.h, and every
// reduction whose result depends on order stays on the CPU or is order-free (an OR of marks, a
// minimum), so both return the same bits.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/kernels.h"
#include "dejaview/base/status.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/voxel.h"
#include "hot_kernels.h"
#include "map_section.h"
#include "sorted_grid.h"
#include "voxel_hash.h"

namespace dv::codec {

kernels::Rigid RigidOf(const Eigen::Matrix3d& R, const Eigen::Vector3d& t);

// x, y, z of each voxel's key, for a SortedGrid.
std::vector<int32_t> VoxelKeys(const std::vector<maps::MapVoxel>& voxels);

// What a classification or a gap test searches: each frame point p = (*pts)[i] (sensor frame)
// against the candidates whose voxels lie within nb voxels (per axis) of the voxel of
// T_map_sensor p (voxels of voxel_m), by their representatives (*candidates, sensor frame). The
// CPU finds them in `grid`, a SortedGrid of their voxels' keys (VoxelKeys) with max_nb >= nb; the
// CUDA backend in their hash, `index` (HotPaths::UsesCandidateIndex says which; the other may be
// null). The CPU splits the points over up to `threads` threads, with the same result.
struct CandidateSearch {
  const std::vector<Eigen::Vector3f>* pts = nullptr;
  kernels::Rigid T_map_sensor{};
  const std::vector<Eigen::Vector3f>* candidates = nullptr;
  const SortedGrid* grid = nullptr;
  const VoxelHash* index = nullptr;
  double voxel_m = 0;
  int nb = 0;
  int threads = 1;
};

// The classification's radii, squared: bound2, within which a candidate explains a point;
// select2 <= bound2, within which it is marked close; near2, the first gap test's (ClassifyOut).
struct ClassifyRadii {
  double bound2 = 0, select2 = 0, near2 = 0;
};

// What the classification writes, each sized and cleared first. near (optional; the CPU only):
// near[i] = 1 for each unexplained point with one of the candidates it looked at within
// sqrt(near2): points MarkNearCandidates with bound2 = near2 and an nb of at least this one
// would mark, which it can take as `known` and leave out of its search.
struct ClassifyOut {
  std::vector<uint8_t>* explained = nullptr;
  CandidateMarks* marks = nullptr;
  std::vector<uint8_t>* near = nullptr;
};

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
// shorter run projects in less time than a thread takes to start.
constexpr size_t kMinProjectRun = 65536;

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
  friend class CpuCorrespondenceSearch;  // cpu/correspondences.cpp
  std::vector<int32_t> keys_;            // 3 per point: the key of its last look-up
  std::vector<uint8_t> known_;
  std::vector<std::vector<int32_t>> items_;
  size_t looked_up_ = 0;
  const SortedGrid* grid_ = nullptr;  // the grid its look-ups were made in
};

// RegisterFrame's correspondence search over fixed map points (HotPaths::CreateSearch).
class CorrespondenceSearch {
 public:
  virtual ~CorrespondenceSearch();
  // best[i]: index of the map point nearest to T source[i] within sqrt(max_d2) among the 27
  // voxels around it, on the fine or the coarse grid (the lowest index among equals); -1 when
  // none. With a cache (on the CPU; coarse searches on the finer grids only), only the points
  // whose voxel changed since the cache's last search in the same grid look their neighbourhood
  // up again; the result is the same.
  Status Find(const std::vector<Eigen::Vector3d>& source, const kernels::Rigid& T, bool fine,
              double max_d2, std::vector<int32_t>* best, NeighbourhoodCache* cache = nullptr) const;

 protected:
  // Find, with *best sized to the source and all -1.
  virtual Status FindNearest(const std::vector<Eigen::Vector3d>& source, const kernels::Rigid& T,
                             bool fine, double max_d2, std::vector<int32_t>* best,
                             NeighbourhoodCache* cache) const = 0;
};

// One backend's hot paths. The public functions state the contract and size the outputs; each
// implementation does the work in the protected ones. Const and free of per-call state: one
// object serves any number of frames, one thread at a time per call's outputs.
class HotPaths {
 public:
  virtual ~HotPaths();
  HotPaths(const HotPaths&) = delete;
  HotPaths& operator=(const HotPaths&) = delete;

  // The user's choice this object runs.
  virtual Backend kind() const = 0;
  // Whether its look-ups around frame points read Candidates::index, the candidates' hash (the
  // CUDA kernels), not a SortedGrid of their keys (the CPU), which callers then need not build.
  virtual bool UsesCandidateIndex() const = 0;
  // The CPU variants (cpu/kernels.h) for the CPU work around its hot paths (registration's
  // subsample), chosen when the object was made.
  const cpu::Kernels& cpu() const { return cpu_; }

  // *index: voxels[i]'s key -> i, the voxels' keys distinct (a map's are), as the CUDA kernels
  // look candidates up (DeriveCandidates' kCandidateIndex). The CUDA backend inserts on the
  // device and copies the table back. Where keys collide, slots may differ from the CPU's
  // insertion order; every look-up answers the same, and the kernels only look up.
  Status IndexKeys(const std::vector<maps::MapVoxel>& voxels, VoxelHash* index) const;

  // Projection of each voxel (kernels::Project). The CPU splits the voxels over up to `threads`
  // threads, voxel by voxel, with the same bits.
  Status ProjectCandidates(const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                           const Eigen::Matrix3d& R_map_sensor, const Eigen::Vector3d& t_map_sensor,
                           const kernels::AngularGrid& grid, Projection* out,
                           int threads = 1) const;

  // Encode's classification: explained[i] = 1 when some candidate the search finds around point i
  // has its representative within sqrt(bound2) of it. The nearest of those (the first in (dx, dy,
  // dz) order among equals) gets marks->nearest[j] = 1, and every one within sqrt(select2) marks
  // ->close[j] = 1 (the marks sized to the candidates); per point, marks->point_nearest and
  // point_second as CandidateMarks says. The same marks with any number of threads.
  Status ClassifyPoints(const CandidateSearch& search, const ClassifyRadii& radii,
                        const ClassifyOut& out) const;

  // Encode's first gap test, for the points ClassifyPoints left unexplained: near[i] = 1 when some
  // candidate the search finds around point i has its representative within sqrt(bound2) of it.
  // An existence test, free of order: both backends give the same marks by construction. With
  // `known`, the points with known[i] = 1 are marked without a search: the caller vouches that
  // the test holds for them (ClassifyOut::near).
  Status MarkNearCandidates(const CandidateSearch& search, double bound2,
                            std::vector<uint8_t>* near,
                            const std::vector<uint8_t>* known = nullptr) const;

  // RegisterFrame's correspondence search: the fine grid holds the candidates' own voxels
  // (map_pts[i] is fine_voxels[i]'s representative), the coarse grid at most coarse_per_cell
  // points per voxel of coarse_voxel_m, in point order. map_pts: the fine points first, then the
  // coarse ones; best indices refer to it; the search keeps pointers to it, to fine_index and to
  // fine_grid. The CPU sorts both grids (sorted_grid.h); the CUDA backend hashes them (fine_index
  // is the candidates' index, needed there only) and keeps device copies.
  //
  // The CPU also sorts the coarse points into coarse_levels finer grids, of coarse_voxel_m / 2,
  // / 4, ..., each keeping every point, and searches the finest whose voxel is at least
  // sqrt(max_d2): the 27 voxels around a point still hold every map point within sqrt(max_d2),
  // but a few of them where the coarse grid's held dozens. The answer is the coarse grid's
  // wherever no coarse voxel holds more than coarse_per_cell points (Nearest breaks ties by index,
  // not by the order it visits voxels in), so the CUDA backend, which has the coarse grid only,
  // returns the same. fine_grid (CPU, optional): a SortedGrid of fine_voxels' keys with max_nb >=
  // 1, which the caller keeps while the search lives; without it the CPU sorts them itself.
  StatusOr<std::unique_ptr<CorrespondenceSearch>> CreateSearch(
      const std::vector<Eigen::Vector3d>& map_pts, const std::vector<maps::MapVoxel>& fine_voxels,
      const VoxelHash& fine_index, double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell,
      int coarse_levels = 0, const SortedGrid* fine_grid = nullptr) const;

 protected:
  explicit HotPaths(const cpu::Kernels& cpu) : cpu_(cpu) {}
  // *index sized for the voxels and empty.
  virtual Status Index(const std::vector<maps::MapVoxel>& voxels, VoxelHash* index) const = 0;
  // out's arrays sized for the voxels, nearest all 1e300.
  virtual Status Project(const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                         const kernels::Rigid& T_map_sensor, const kernels::AngularGrid& grid,
                         Projection* out, int threads) const = 0;
  // out's arrays sized and cleared (point_nearest and point_second -1).
  virtual Status Classify(const CandidateSearch& search, const ClassifyRadii& radii,
                          const ClassifyOut& out) const = 0;
  // *near sized to the points and cleared.
  virtual Status MarkNear(const CandidateSearch& search, double bound2,
                          std::vector<uint8_t>* near) const = 0;
  // fine_voxels.size() <= map_pts.size().
  virtual StatusOr<std::unique_ptr<CorrespondenceSearch>> NewSearch(
      const std::vector<Eigen::Vector3d>& map_pts, const std::vector<maps::MapVoxel>& fine_voxels,
      const VoxelHash& fine_index, double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell,
      int coarse_levels, const SortedGrid* fine_grid) const = 0;

 private:
  const cpu::Kernels& cpu_;
};

// The backend for `backend`, or why it cannot run here: for kCuda the error says whether this
// build lacks CUDA (configure with -DDEJAVIEW_CUDA=ON) or the machine has no usable CUDA device
// (CheckBackend's error, which is this one's).
StatusOr<std::unique_ptr<HotPaths>> MakeHotPaths(Backend backend);
// The CPU backend, on the variant table `kernels` (cpu::Best(), read now, unless told): it
// cannot fail.
std::unique_ptr<HotPaths> MakeCpuHotPaths(const cpu::Kernels& kernels = cpu::Best());

}  // namespace dv::codec
