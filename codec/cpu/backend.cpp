// The CPU backend (hot_paths.h HotPaths): each hot path's scaffolding (threads, the sorted grid's
// passes) around the variant table of cpu/kernels.h it was made with, which does the per-element
// work; the classification is the table's whole (cpu/classify.h), the correspondence search
// cpu/correspondences.cpp's. The candidates around frame points are found in a SortedGrid of
// their keys, not hashed (sorted_grid.h).
#include <algorithm>
#include <string>

#include "cpu/correspondences.h"
#include "dejaview/base/fork_join.h"
#include "hot_paths.h"

namespace dv::codec {
namespace {

const float* Floats(const std::vector<Eigen::Vector3f>& v) {
  return v.empty() ? nullptr : v[0].data();
}
float* Floats(std::vector<Eigen::Vector3f>& v) { return v.empty() ? nullptr : v[0].data(); }

// visit(r, points, count, near) once for each distinct voxel of T_map_sensor pts[i] with its
// `count` points and the indices of the candidates within nb voxels per axis of it, in (dx, dy,
// dz) order (search.grid's max_nb >= nb); points whose neighbourhood holds no candidate, or
// leaves the key range, are skipped. The points are visited in up to `runs` runs r at once
// (SortedGrid::ForEachVoxelInRuns), each point's coordinates prefetched a few points ahead: the
// sorted order is no order in the points' array.
template <typename Visit>
void ForEachPointVoxel(const cpu::Kernels& k, const CandidateSearch& search, int runs,
                       Visit&& visit) {
  const std::vector<Eigen::Vector3f>& pts = *search.pts;
  const SortedGrid& grid = *search.grid;
  const SortedGrid::Queries q =
      k.sort_points(grid, pts, search.T_map_sensor, search.voxel_m, search.nb, runs);
  grid.ForEachVoxelInRuns(q, search.nb, runs, visit,
                          [&](uint32_t i) { __builtin_prefetch(pts[i].data()); });
}

Status NeedGrid(const char* what, const CandidateSearch& search) {
  if (search.grid && search.grid->max_nb() >= search.nb) return Status::Ok();
  return Status::InvalidArgument(std::string(what) + ": the CPU needs a sorted grid of max_nb >= " +
                                 std::to_string(search.nb));
}

class CpuHotPaths final : public HotPaths {
 public:
  explicit CpuHotPaths(const cpu::Kernels& kernels) : HotPaths(kernels) {}
  Backend kind() const override { return Backend::kCpu; }
  bool UsesCandidateIndex() const override { return false; }

 protected:
  Status Index(const std::vector<maps::MapVoxel>& voxels, VoxelHash* index) const override {
    for (size_t i = 0; i < voxels.size(); ++i) index->Insert(PackKey(voxels[i].key), int32_t(i));
    return Status::Ok();
  }
  Status Project(const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                 const kernels::Rigid& T_map_sensor, const kernels::AngularGrid& grid,
                 Projection* out, int threads) const override;
  Status Classify(const CandidateSearch& search, const ClassifyRadii& radii,
                  const ClassifyOut& out) const override;
  Status MarkNear(const CandidateSearch& search, double bound2,
                  std::vector<uint8_t>* near) const override;
  StatusOr<std::unique_ptr<CorrespondenceSearch>> NewSearch(
      const std::vector<Eigen::Vector3d>& map_pts, const std::vector<maps::MapVoxel>& fine_voxels,
      const VoxelHash&, double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell,
      int coarse_levels, const SortedGrid* fine_grid) const override {
    return NewCpuCorrespondenceSearch(map_pts, fine_voxels, fine_voxel_m, coarse_voxel_m,
                                      coarse_per_cell, coarse_levels, fine_grid);
  }
};

// Voxel by voxel: runs of them on threads of their own give the same bits. Projected first, the
// nearest per cell after, in a loop of its own: faster than both in one.
Status CpuHotPaths::Project(const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                            const kernels::Rigid& T_map_sensor, const kernels::AngularGrid& grid,
                            Projection* out, int threads) const {
  const size_t n = voxels.size();
  const int runs =
      int(std::max<size_t>(1, std::min(size_t(std::max(threads, 1)), n / kMinProjectRun)));
  ForkJoin(runs, [&](int r) {
    const size_t begin = n * size_t(r) / size_t(runs), end = n * size_t(r + 1) / size_t(runs);
    cpu().project(voxels.data() + begin, end - begin, voxel_m, T_map_sensor, grid,
                  Floats(out->sensor) + 3 * begin, out->range.data() + begin,
                  out->cell.data() + begin);
  });
  for (size_t i = 0; i < n; ++i) {
    const int32_t c = out->cell[i];
    if (c >= 0) out->nearest[size_t(c)] = std::min(out->nearest[size_t(c)], out->range[i]);
  }
  return Status::Ok();
}

// The variant's classification (cpu/classify.h) on the grid the search brings.
Status CpuHotPaths::Classify(const CandidateSearch& search, const ClassifyRadii& radii,
                             const ClassifyOut& out) const {
  DV_RETURN_IF_ERROR(NeedGrid("classify", search));
  cpu().classify(search, radii, out);
  return Status::Ok();
}

// Neighbouring points are mostly near the same candidate: the last one a run found is tried
// first.
Status CpuHotPaths::MarkNear(const CandidateSearch& search, double bound2,
                             std::vector<uint8_t>* near) const {
  DV_RETURN_IF_ERROR(NeedGrid("near candidates", search));
  const std::vector<Eigen::Vector3f>& pts = *search.pts;
  const float* sensor = Floats(*search.candidates);
  std::vector<int32_t> last_hit(size_t(std::max(search.threads, 1)), -1);
  auto mark = [&](int32_t& last, uint32_t i, const SortedGrid::Items& around) {
    const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
    if (last >= 0 && kernels::Explains(sensor, last, p, bound2)) {
      (*near)[i] = 1;
      return;
    }
    for (int32_t j : around) {
      if (kernels::Explains(sensor, j, p, bound2)) {
        (*near)[i] = 1;
        last = j;
        return;
      }
    }
  };
  ForEachPointVoxel(
      cpu(), search, search.threads,
      [&](int r, const uint32_t* points, size_t count, const SortedGrid::Items& around) {
        for (size_t k = 0; k < count; ++k) mark(last_hit[size_t(r)], points[k], around);
      });
  return Status::Ok();
}

}  // namespace

std::unique_ptr<HotPaths> MakeCpuHotPaths(const cpu::Kernels& kernels) {
  return std::make_unique<CpuHotPaths>(kernels);
}

}  // namespace dv::codec
