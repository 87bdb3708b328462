// The CPU's correspondence search (hot_paths.h HotPaths::CreateSearch): the fine and coarse
// points sorted by voxel key (sorted_grid.h), the coarse ones also into finer grids, each search
// kernels::Nearest's rule over the 27 voxels around a point.
#include <cmath>

#include "cpu/correspondences.h"

namespace dv::codec {
namespace {

// One search's source points moved into the map frame, with their keys in the grid searched, and
// where the answers go.
struct Query {
  Query(const std::vector<Eigen::Vector3d>& source, const kernels::Rigid& T, double voxel_m)
      : moved(3 * source.size()), keys(3 * source.size()), valid(source.size()) {
    // The arrays by local pointers: a store to valid may alias the vectors' own.
    double* const m = moved.data();
    int32_t* const k = keys.data();
    uint8_t* const v = valid.data();
    for (size_t i = 0; i < source.size(); ++i) {
      double* p = m + 3 * i;
      kernels::Transform(T, source[i].data(), p);
      bool ok = true;
      for (int a = 0; a < 3; ++a) ok = ok && std::abs(p[a] / voxel_m) < double(kPackBias);
      if (ok) kernels::KeyOf(p, voxel_m, k + 3 * i);
      v[i] = ok;
    }
  }
  // kernels::Nearest's rule over the items `near` of point i: the nearest closer than
  // sqrt(max_d2), the lowest index among equals.
  void Nearest(uint32_t i, const SortedGrid::Items& near) const {
    const double* p = &moved[3 * size_t(i)];
    double b = max_d2;
    int32_t bi = -1;
    for (int32_t j : near) {
      const double d2 = kernels::Dist2(map + 3 * size_t(j), p);
      if (d2 < b || (d2 == b && j < bi)) {
        b = d2;
        bi = j;
      }
    }
    (*best)[i] = bi < 0 ? -1 : bi + offset;
  }

  std::vector<double> moved;    // 3 per point
  std::vector<int32_t> keys;    // 3 per point
  std::vector<uint8_t> valid;   // whether its key is within the packing's range
  const double* map = nullptr;  // the grid's points (items), from map_pts[offset]
  int32_t offset = 0;
  double max_d2 = 0;
  std::vector<int32_t>* best = nullptr;
};

}  // namespace

class CpuCorrespondenceSearch final : public CorrespondenceSearch {
 public:
  CpuCorrespondenceSearch(const std::vector<Eigen::Vector3d>& map_pts,
                          const std::vector<maps::MapVoxel>& fine_voxels, double fine_voxel_m,
                          double coarse_voxel_m, int coarse_per_cell, int coarse_levels,
                          const SortedGrid* fine_grid);

 protected:
  Status FindNearest(const std::vector<Eigen::Vector3d>& source, const kernels::Rigid& T, bool fine,
                     double max_d2, std::vector<int32_t>* best,
                     NeighbourhoodCache* cache) const override;

 private:
  int CoarseLevel(double max_d2) const;
  void FindInColumns(const SortedGrid& grid, double voxel_m, const Query& q) const;
  static void FindCached(const SortedGrid& grid, const Query& q, NeighbourhoodCache* cache);

  const std::vector<Eigen::Vector3d>* map_pts_;
  size_t coarse_first_;  // index in map_pts of the first coarse point
  double fine_voxel_m_, coarse_voxel_m_;
  const SortedGrid* fine_grid_ = nullptr;
  std::unique_ptr<SortedGrid> own_fine_grid_;  // fine_grid_ unless the caller's
  // Of coarse_voxel_m_ / 2^level for level 0..coarse_levels; only level 0 capped at per cell.
  std::vector<std::unique_ptr<SortedGrid>> coarse_grids_;
};

CpuCorrespondenceSearch::CpuCorrespondenceSearch(const std::vector<Eigen::Vector3d>& map_pts,
                                                 const std::vector<maps::MapVoxel>& fine_voxels,
                                                 double fine_voxel_m, double coarse_voxel_m,
                                                 int coarse_per_cell, int coarse_levels,
                                                 const SortedGrid* fine_grid)
    : map_pts_(&map_pts),
      coarse_first_(fine_voxels.size()),
      fine_voxel_m_(fine_voxel_m),
      coarse_voxel_m_(coarse_voxel_m) {
  if (fine_grid == nullptr || fine_grid->max_nb() < 1) {
    own_fine_grid_ = std::make_unique<SortedGrid>(VoxelKeys(fine_voxels), 1, 0);
    fine_grid = own_fine_grid_.get();
  }
  fine_grid_ = fine_grid;
  const size_t first = coarse_first_;
  std::vector<int32_t> keys(3 * (map_pts.size() - first));
  for (int level = 0; level <= coarse_levels; ++level) {
    const double voxel_m = std::ldexp(coarse_voxel_m, -level);
    for (size_t i = first; i < map_pts.size(); ++i) {
      const maps::VoxelKey k = maps::KeyOf(map_pts[i], voxel_m);
      std::copy(k.data(), k.data() + 3, &keys[3 * (i - first)]);
    }
    coarse_grids_.push_back(
        std::make_unique<SortedGrid>(keys, 1, level == 0 ? coarse_per_cell : 0));
  }
}

// The finest coarse grid whose voxel is at least sqrt(max_d2).
int CpuCorrespondenceSearch::CoarseLevel(double max_d2) const {
  int level = 0;
  while (level + 1 < int(coarse_grids_.size()) &&
         std::ldexp(coarse_voxel_m_, -(level + 1)) >= std::sqrt(max_d2)) {
    ++level;
  }
  return level;
}

Status CpuCorrespondenceSearch::FindNearest(const std::vector<Eigen::Vector3d>& source,
                                            const kernels::Rigid& T, bool fine, double max_d2,
                                            std::vector<int32_t>* best,
                                            NeighbourhoodCache* cache) const {
  const int level = fine ? 0 : CoarseLevel(max_d2);
  const SortedGrid& grid = fine ? *fine_grid_ : *coarse_grids_[size_t(level)];
  const double voxel_m = fine ? fine_voxel_m_ : std::ldexp(coarse_voxel_m_, -level);
  Query q(source, T, voxel_m);
  // The coarse grid's items count from the first coarse point.
  const size_t base = fine ? 0 : coarse_first_;
  q.map = map_pts_->size() > base ? (*map_pts_)[base].data() : nullptr;
  q.offset = int32_t(base);
  q.max_d2 = max_d2;
  q.best = best;
  // The coarsest grid's neighbourhoods hold dozens of centroids a cell: copying them into a cache
  // saved less than it cost.
  if (!fine && level == 0) {
    FindInColumns(grid, voxel_m, q);
  } else if (!cache) {
    grid.ForEachQuery(q.keys, q.valid, 1,
                      [&](uint32_t i, const SortedGrid::Items& near) { q.Nearest(i, near); });
  } else {
    FindCached(grid, q, cache);
  }
  return Status::Ok();
}

// The coarsest grid: dozens of centroids in each of the 27 cells, read in place: the query's own
// column of cells first, then only the columns whose nearest side is nearer than the best so far
// (the others hold no nearer centroid, nor an equal one: the sides are taken a micrometre nearer
// than they are, against rounding). The same result as Query::Nearest, the least (distance,
// index), which does not depend on the order. Gathered into a list, pruned voxel by voxel (its
// own z too), it ran slower: the copies were the cost, not the distances.
void CpuCorrespondenceSearch::FindInColumns(const SortedGrid& grid, double voxel_m,
                                            const Query& q) const {
  const double* const map = q.map;
  const double* const moved = q.moved.data();
  const int32_t* const keys = q.keys.data();
  const double max_d2 = q.max_d2;
  int32_t* const best = q.best->data();
  grid.ForEachQueryRuns(
      q.keys, q.valid, 1, [&](uint32_t i, const std::vector<SortedGrid::Run>& runs) {
        const double* p = moved + 3 * size_t(i);
        const int32_t* k = keys + 3 * size_t(i);
        double side[2][3];  // [axis][d + 1]: the squared distance to the column at offset d
        for (int a = 0; a < 2; ++a) {
          const double below = std::max(0.0, p[a] - double(k[a]) * voxel_m - 1e-6);
          const double above = std::max(0.0, double(k[a] + 1) * voxel_m - p[a] - 1e-6);
          side[a][0] = below * below;
          side[a][1] = 0;
          side[a][2] = above * above;
        }
        double b = max_d2;
        int32_t bi = -1;
        auto search = [&](const SortedGrid::Run& r) {
          for (size_t m = 0; m < r.count; ++m) {
            const int32_t j = int32_t(r.items[m]);
            const double d2 = kernels::Dist2(map + 3 * size_t(j), p);
            if (d2 < b || (d2 == b && j < bi)) {
              b = d2;
              bi = j;
            }
          }
        };
        const size_t own = runs.size() / 2;  // (0, 0), the middle of the (dx, dy) order
        search(runs[own]);
        for (size_t r = 0; r < runs.size(); ++r) {
          if (r != own && side[0][runs[r].dx + 1] + side[1][runs[r].dy + 1] <= b) search(runs[r]);
        }
        best[i] = bi < 0 ? -1 : bi + q.offset;
      });
}

// The points whose key is new look their neighbourhood up (none where the grid's pass lists no
// items around them), then every valid point takes its nearest from the cache.
void CpuCorrespondenceSearch::FindCached(const SortedGrid& grid, const Query& q,
                                         NeighbourhoodCache* cache) {
  NeighbourhoodCache& c = *cache;
  const size_t n = q.valid.size();
  if (c.known_.size() != n || c.grid_ != &grid) {
    c.grid_ = &grid;
    c.keys_.assign(3 * n, 0);
    c.known_.assign(n, 0);
    c.items_.assign(n, {});
  }
  std::vector<uint8_t> changed(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!q.valid[i]) continue;
    const int32_t* k = &q.keys[3 * i];
    int32_t* was = &c.keys_[3 * i];
    if (c.known_[i] && k[0] == was[0] && k[1] == was[1] && k[2] == was[2]) continue;
    changed[i] = 1;
    ++c.looked_up_;
    std::copy(k, k + 3, was);
    c.known_[i] = 1;
    c.items_[i].clear();
  }
  grid.ForEachQuery(q.keys, changed, 1, [&](uint32_t i, const SortedGrid::Items& near) {
    c.items_[i].assign(near.begin(), near.end());
  });
  for (size_t i = 0; i < n; ++i) {
    if (q.valid[i])
      q.Nearest(uint32_t(i), SortedGrid::Items(c.items_[i].data(), c.items_[i].size()));
  }
}

std::unique_ptr<CorrespondenceSearch> NewCpuCorrespondenceSearch(
    const std::vector<Eigen::Vector3d>& map_pts, const std::vector<maps::MapVoxel>& fine_voxels,
    double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell, int coarse_levels,
    const SortedGrid* fine_grid) {
  return std::make_unique<CpuCorrespondenceSearch>(map_pts, fine_voxels, fine_voxel_m,
                                                   coarse_voxel_m, coarse_per_cell, coarse_levels,
                                                   fine_grid);
}

}  // namespace dv::codec
