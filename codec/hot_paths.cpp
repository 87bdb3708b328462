// The backend-independent half of hot_paths.h: the factory, the contracts every backend's hot
// paths share (outputs sized and cleared, the gap test's known points), and the helpers.
#include "hot_paths.h"

#include <algorithm>
#include <cstddef>
#include <string>

#ifdef DEJAVIEW_HAVE_CUDA
#include "cuda/backend.h"
#endif

namespace dv::codec {

// The CUDA backend copies these arrays to the device byte for byte.
static_assert(sizeof(Eigen::Vector3f) == 3 * sizeof(float), "Vector3f arrays are float triples");
static_assert(sizeof(Eigen::Vector3d) == 3 * sizeof(double), "Vector3d arrays are double triples");
static_assert(sizeof(maps::MapVoxel) == sizeof(kernels::VoxelRecord) &&
                  alignof(maps::MapVoxel) == alignof(kernels::VoxelRecord) &&
                  offsetof(kernels::VoxelRecord, q) == sizeof(maps::VoxelKey),
              "kernels::VoxelRecord mirrors maps::MapVoxel");

StatusOr<std::unique_ptr<HotPaths>> MakeHotPaths(Backend backend) {
  if (backend == Backend::kCpu) return MakeCpuHotPaths();
#ifdef DEJAVIEW_HAVE_CUDA
  return MakeCudaHotPaths();
#else
  return Status::InvalidArgument(
      "backend cuda: this build has no CUDA support (configure with -DDEJAVIEW_CUDA=ON)");
#endif
}

Status CheckBackend(Backend backend) { return MakeHotPaths(backend).status(); }

StatusOr<Backend> ParseBackend(const std::string& name) {
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  return Status::InvalidArgument("backend: '" + name + "' is not cpu or cuda");
}

kernels::Rigid RigidOf(const Eigen::Matrix3d& R, const Eigen::Vector3d& t) {
  kernels::Rigid T;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) T.R[3 * r + c] = R(r, c);
    T.t[r] = t[r];
  }
  return T;
}

std::vector<int32_t> VoxelKeys(const std::vector<maps::MapVoxel>& voxels) {
  std::vector<int32_t> keys(3 * voxels.size());
  for (size_t j = 0; j < voxels.size(); ++j) {
    std::copy(voxels[j].key.data(), voxels[j].key.data() + 3, &keys[3 * j]);
  }
  return keys;
}

CorrespondenceSearch::~CorrespondenceSearch() = default;

Status CorrespondenceSearch::Find(const std::vector<Eigen::Vector3d>& source,
                                  const kernels::Rigid& T, bool fine, double max_d2,
                                  std::vector<int32_t>* best, NeighbourhoodCache* cache) const {
  best->assign(source.size(), -1);
  return FindNearest(source, T, fine, max_d2, best, cache);
}

HotPaths::~HotPaths() = default;

Status HotPaths::IndexKeys(const std::vector<maps::MapVoxel>& voxels, VoxelHash* index) const {
  *index = VoxelHash(voxels.size());
  return Index(voxels, index);
}

Status HotPaths::ProjectCandidates(const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                                   const Eigen::Matrix3d& R_map_sensor,
                                   const Eigen::Vector3d& t_map_sensor,
                                   const kernels::AngularGrid& grid, Projection* out,
                                   int threads) const {
  const size_t n = voxels.size();
  out->sensor.resize(n);
  out->range.resize(n);
  out->cell.resize(n);
  out->nearest.assign(size_t(grid.rows) * size_t(grid.cols), 1e300);
  return Project(voxels, voxel_m, RigidOf(R_map_sensor, t_map_sensor), grid, out, threads);
}

Status HotPaths::ClassifyPoints(const CandidateSearch& search, const ClassifyRadii& radii,
                                const ClassifyOut& out) const {
  if (!search.pts || !search.candidates || !out.explained || !out.marks) {
    return Status::InvalidArgument("classify: no points, candidates or outputs");
  }
  const size_t n = search.pts->size();
  out.explained->assign(n, 0);
  if (out.near) out.near->assign(n, 0);
  for (std::vector<uint8_t>* m : {&out.marks->nearest, &out.marks->close}) {
    m->assign(search.candidates->size(), 0);
  }
  out.marks->point_nearest.assign(n, -1);
  out.marks->point_second.assign(n, -1);
  return Classify(search, radii, out);
}

Status HotPaths::MarkNearCandidates(const CandidateSearch& search, double bound2,
                                    std::vector<uint8_t>* near,
                                    const std::vector<uint8_t>* known) const {
  if (!search.pts || !search.candidates) {
    return Status::InvalidArgument("near candidates: no points or candidates");
  }
  const std::vector<Eigen::Vector3f>& pts = *search.pts;
  if (!known) {
    near->assign(pts.size(), 0);
    return MarkNear(search, bound2, near);
  }
  if (known->size() != pts.size()) {
    return Status::InvalidArgument("near candidates: " + std::to_string(known->size()) +
                                   " known marks for " + std::to_string(pts.size()) + " points");
  }
  // The others alone are searched, then put back in place.
  std::vector<Eigen::Vector3f> rest;
  std::vector<uint32_t> from;
  for (size_t i = 0; i < pts.size(); ++i) {
    if ((*known)[i]) continue;
    rest.push_back(pts[i]);
    from.push_back(uint32_t(i));
  }
  CandidateSearch rest_search = search;
  rest_search.pts = &rest;
  std::vector<uint8_t> rest_near;
  DV_RETURN_IF_ERROR(MarkNearCandidates(rest_search, bound2, &rest_near));
  // A known point is marked as the search would mark it: only where its key leaves room for nb
  // voxels around it (the classification's smaller nb leaves room at keys where this one does
  // not).
  near->assign(pts.size(), 0);
  for (size_t i = 0; i < pts.size(); ++i) {
    if (!(*known)[i]) continue;
    const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
    int32_t k[3];
    (*near)[i] = kernels::NeighbourhoodKey(search.T_map_sensor, p, search.voxel_m, search.nb, k);
  }
  for (size_t k = 0; k < from.size(); ++k) (*near)[from[k]] = rest_near[k];
  return Status::Ok();
}

StatusOr<std::unique_ptr<CorrespondenceSearch>> HotPaths::CreateSearch(
    const std::vector<Eigen::Vector3d>& map_pts, const std::vector<maps::MapVoxel>& fine_voxels,
    const VoxelHash& fine_index, double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell,
    int coarse_levels, const SortedGrid* fine_grid) const {
  if (fine_voxels.size() > map_pts.size()) {
    return Status::InvalidArgument("correspondences: too few map points");
  }
  return NewSearch(map_pts, fine_voxels, fine_index, fine_voxel_m, coarse_voxel_m, coarse_per_cell,
                   coarse_levels, fine_grid);
}

}  // namespace dv::codec
