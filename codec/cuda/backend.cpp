// The CUDA backend's host side (hot_paths.h HotPaths): each hot path hands plain arrays to
// cuda/cuda_hot_paths.h, whose kernels (cuda/hot_paths.cu) copy them to the device and back.
// Compiled only with -DDEJAVIEW_CUDA=ON.
#include "cuda/backend.h"

#include "cuda/cuda_hot_paths.h"

namespace dv::codec {
namespace {

const float* Floats(const std::vector<Eigen::Vector3f>& v) {
  return v.empty() ? nullptr : v[0].data();
}
float* Floats(std::vector<Eigen::Vector3f>& v) { return v.empty() ? nullptr : v[0].data(); }

// The correspondence grids hashed, as the kernels look them up, with device copies of both and
// of the map points (cuda::Search). The coarse grid alone: the CPU's finer coarse grids answer as
// it does (HotPaths::CreateSearch). No cache: every search looks every point up.
class CudaCorrespondenceSearch final : public CorrespondenceSearch {
 public:
  static StatusOr<std::unique_ptr<CorrespondenceSearch>> Create(
      const std::vector<Eigen::Vector3d>& map_pts, size_t first, const VoxelHash& fine_index,
      double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell) {
    std::unique_ptr<CudaCorrespondenceSearch> s(new CudaCorrespondenceSearch());
    s->fine_index_ = &fine_index;
    s->fine_voxel_m_ = fine_voxel_m;
    s->coarse_voxel_m_ = coarse_voxel_m;
    s->per_cell_ = coarse_per_cell;
    // Each coarse cell: [count, index x per_cell], its first per_cell points in point order.
    s->coarse_hash_ = std::make_unique<VoxelHash>((map_pts.size() - first) / 4 + 16);
    const size_t stride = size_t(coarse_per_cell) + 1;
    for (size_t i = first; i < map_pts.size(); ++i) {
      const uint64_t key = PackKey(maps::KeyOf(map_pts[i], coarse_voxel_m));
      const size_t count = s->coarse_cells_.size() / stride;
      const size_t cell = size_t(s->coarse_hash_->Insert(key, int32_t(count)));
      if (cell == count) s->coarse_cells_.resize(s->coarse_cells_.size() + stride, 0);
      int32_t* c = &s->coarse_cells_[cell * stride];
      if (c[0] < coarse_per_cell) c[1 + c[0]++] = int32_t(i);
    }
    DV_ASSIGN_OR_RETURN(
        s->search_,
        cuda::Search::Create(map_pts.empty() ? nullptr : map_pts[0].data(), map_pts.size(),
                             s->Grid(true), fine_index.slots(), s->Grid(false),
                             s->coarse_hash_->slots(), s->coarse_cells_.size() / stride));
    return std::unique_ptr<CorrespondenceSearch>(std::move(s));
  }

 protected:
  Status FindNearest(const std::vector<Eigen::Vector3d>& source, const kernels::Rigid& T, bool fine,
                     double max_d2, std::vector<int32_t>* best,
                     NeighbourhoodCache*) const override {
    return search_->Find(source.empty() ? nullptr : source[0].data(), source.size(), T, fine,
                         max_d2, best->data());
  }

 private:
  CudaCorrespondenceSearch() = default;
  kernels::NeighbourGrid Grid(bool fine) const {
    if (fine) return {fine_index_->view(), fine_voxel_m_, nullptr, 0};
    return {coarse_hash_->view(), coarse_voxel_m_, coarse_cells_.data(), per_cell_};
  }

  const VoxelHash* fine_index_ = nullptr;
  double fine_voxel_m_ = 0, coarse_voxel_m_ = 0;
  int per_cell_ = 0;
  std::unique_ptr<VoxelHash> coarse_hash_;
  std::vector<int32_t> coarse_cells_;
  std::unique_ptr<cuda::Search> search_;
};

class CudaHotPaths final : public HotPaths {
 public:
  CudaHotPaths() : HotPaths(cpu::Best()) {}
  Backend kind() const override { return Backend::kCuda; }
  bool UsesCandidateIndex() const override { return true; }

 protected:
  // Inserted on the device: on hundreds of thousands of candidates the CPU's insertions were a
  // large share of a frame on a GPU machine's CPU.
  Status Index(const std::vector<maps::MapVoxel>& voxels, VoxelHash* index) const override {
    std::vector<uint64_t> packed(voxels.size());
    for (size_t i = 0; i < voxels.size(); ++i) packed[i] = PackKey(voxels[i].key);
    const kernels::HashView v = index->view();
    DV_RETURN_IF_ERROR(cuda::IndexKeys(packed.data(), packed.size(), index->slots(), v.shift,
                                       index->keys_data(), index->values_data()));
    index->set_size(voxels.size());
    return Status::Ok();
  }

  Status Project(const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                 const kernels::Rigid& T_map_sensor, const kernels::AngularGrid& grid,
                 Projection* out, int) const override {
    return cuda::ProjectCandidates(voxels.data(), voxels.size(), voxel_m, T_map_sensor, grid,
                                   Floats(out->sensor), out->range.data(), out->cell.data(),
                                   out->nearest.data());
  }

  Status Classify(const CandidateSearch& search, const ClassifyRadii& radii,
                  const ClassifyOut& out) const override {
    if (!search.index)
      return Status::InvalidArgument("classify: the CUDA backend needs the voxel hash");
    const std::vector<Eigen::Vector3f>& pts = *search.pts;
    const std::vector<Eigen::Vector3f>& cand = *search.candidates;
    CandidateMarks& m = *out.marks;
    return cuda::ClassifyPoints(Floats(pts), pts.size(), search.T_map_sensor, search.index->view(),
                                search.index->slots(), Floats(cand), cand.size(), search.voxel_m,
                                search.nb, radii.bound2, radii.select2, out.explained->data(),
                                m.nearest.data(), m.close.data(), m.point_nearest.data(),
                                m.point_second.data());
  }

  Status MarkNear(const CandidateSearch& search, double bound2,
                  std::vector<uint8_t>* near) const override {
    if (!search.index)
      return Status::InvalidArgument("near candidates: the CUDA backend needs the hash");
    const std::vector<Eigen::Vector3f>& pts = *search.pts;
    const std::vector<Eigen::Vector3f>& cand = *search.candidates;
    return cuda::MarkNearCandidates(Floats(pts), pts.size(), search.T_map_sensor,
                                    search.index->view(), search.index->slots(), Floats(cand),
                                    cand.size(), search.voxel_m, search.nb, bound2, near->data());
  }

  StatusOr<std::unique_ptr<CorrespondenceSearch>> NewSearch(
      const std::vector<Eigen::Vector3d>& map_pts, const std::vector<maps::MapVoxel>& fine_voxels,
      const VoxelHash& fine_index, double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell,
      int, const SortedGrid*) const override {
    return CudaCorrespondenceSearch::Create(map_pts, fine_voxels.size(), fine_index, fine_voxel_m,
                                            coarse_voxel_m, coarse_per_cell);
  }
};

}  // namespace

StatusOr<std::unique_ptr<HotPaths>> MakeCudaHotPaths() {
  DV_RETURN_IF_ERROR(cuda::DeviceAvailable());
  return NewCudaHotPaths();
}

std::unique_ptr<HotPaths> NewCudaHotPaths() { return std::make_unique<CudaHotPaths>(); }

}  // namespace dv::codec
