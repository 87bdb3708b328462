#include "hot_paths.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#ifdef DEJAVIEW_HAVE_CUDA
#include "cuda/cuda_hot_paths.h"
#endif

namespace dv::codec {

// The CUDA backend copies these arrays to the device byte for byte.
static_assert(sizeof(Eigen::Vector3f) == 3 * sizeof(float), "Vector3f arrays are float triples");
static_assert(sizeof(Eigen::Vector3d) == 3 * sizeof(double), "Vector3d arrays are double triples");
static_assert(sizeof(maps::MapVoxel) == sizeof(kernels::VoxelRecord) &&
                  alignof(maps::MapVoxel) == alignof(kernels::VoxelRecord) &&
                  offsetof(kernels::VoxelRecord, q) == sizeof(maps::VoxelKey),
              "kernels::VoxelRecord mirrors maps::MapVoxel");

namespace {

[[maybe_unused]] Status NoCuda() {
  return Status::InvalidArgument(
      "backend cuda: this build has no CUDA support (configure with -DDEJAVIEW_CUDA=ON)");
}

const float* Floats(const std::vector<Eigen::Vector3f>& v) {
  return v.empty() ? nullptr : v[0].data();
}
[[maybe_unused]] float* Floats(std::vector<Eigen::Vector3f>& v) {
  return v.empty() ? nullptr : v[0].data();
}

// Voxel keys packed into one integer that orders them as (x, then y, then z) does: each axis
// as its offset from lo, in just enough bits for the keys at hand (a frame spans a few thousand
// voxels per axis), so that a radix sort needs few passes and a neighbour's key is an addition.
struct KeyPacking {
  int32_t lo[3] = {0, 0, 0}, hi[3] = {-1, -1, -1};
  int bits[3] = {0, 0, 0};

  bool Holds(const int32_t k[3]) const {
    return k[0] >= lo[0] && k[0] <= hi[0] && k[1] >= lo[1] && k[1] <= hi[1] && k[2] >= lo[2] &&
           k[2] <= hi[2];
  }
  uint64_t Pack(const int32_t k[3]) const {
    return uint64_t(k[0] - lo[0]) << (bits[1] + bits[2]) | uint64_t(k[1] - lo[1]) << bits[2] |
           uint64_t(k[2] - lo[2]);
  }
  // Pack(k + (dx, dy, dz)) - Pack(k), for keys whose neighbour stays inside [lo, hi].
  int64_t Step(int dx, int dy, int dz) const {
    return int64_t(dx) * (int64_t(1) << (bits[1] + bits[2])) +
           int64_t(dy) * (int64_t(1) << bits[2]) + dz;
  }
};

// The box of the keys with valid[i], grown by margin on every side. Keys that pass
// kernels::KeyFits(k, margin) keep every axis below 2^21, so the packed key fits 63 bits.
KeyPacking PackingOf(const std::vector<int32_t>& keys, const std::vector<uint8_t>& valid,
                     int32_t margin) {
  KeyPacking p;
  bool any = false;
  for (size_t i = 0; i < valid.size(); ++i) {
    if (!valid[i]) continue;
    for (int a = 0; a < 3; ++a) {
      p.lo[a] = any ? std::min(p.lo[a], keys[3 * i + a]) : keys[3 * i + a];
      p.hi[a] = any ? std::max(p.hi[a], keys[3 * i + a]) : keys[3 * i + a];
    }
    any = true;
  }
  if (!any) return p;
  for (int a = 0; a < 3; ++a) {
    p.lo[a] -= margin;
    p.hi[a] += margin;
    while ((int64_t(p.hi[a]) - p.lo[a]) >> p.bits[a]) ++p.bits[a];
  }
  return p;
}

// Sorts (packed, index) pairs by packed: an LSD radix sort, 11 bits a pass. Written here because
// neither the standard library nor the Debian packages we use offer one; std::sort of the same
// pairs measured several times slower.
void RadixSort(int key_bits, std::vector<uint64_t>* packed, std::vector<uint32_t>* index) {
  constexpr int kDigit = 11;
  constexpr uint64_t kMask = (1u << kDigit) - 1;
  const size_t n = packed->size();
  std::vector<uint64_t> packed_tmp(n);
  std::vector<uint32_t> index_tmp(n);
  std::vector<uint32_t> start(size_t(1) << kDigit);
  for (int shift = 0; shift < key_bits; shift += kDigit) {
    std::fill(start.begin(), start.end(), 0);
    for (uint64_t k : *packed) ++start[(k >> shift) & kMask];
    uint32_t sum = 0;
    for (uint32_t& s : start) sum += std::exchange(s, sum);
    for (size_t m = 0; m < n; ++m) {
      const uint32_t to = start[((*packed)[m] >> shift) & kMask]++;
      packed_tmp[to] = (*packed)[m];
      index_tmp[to] = (*index)[m];
    }
    packed->swap(packed_tmp);
    index->swap(index_tmp);
  }
}

// The first position at or after c whose value is >= target, in a sorted array: a galloping
// search, so a cursor that moves a little costs a little and one that jumps costs a logarithm.
size_t Advance(const std::vector<uint64_t>& a, size_t c, uint64_t target) {
  const size_t n = a.size();
  if (c >= n || a[c] >= target) return c;
  size_t step = 1;
  while (c + step < n && a[c + step] < target) {
    c += step;
    step <<= 1;
  }
  const auto end = a.begin() + long(std::min(c + step, n));
  return size_t(std::lower_bound(a.begin() + long(c) + 1, end, target) - a.begin());
}

}  // namespace

Status CheckBackend(Backend backend) {
  if (backend == Backend::kCpu) return Status::Ok();
#ifdef DEJAVIEW_HAVE_CUDA
  return cuda::DeviceAvailable();
#else
  return NoCuda();
#endif
}

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

Status ClassifyPoints(Backend backend, const std::vector<Eigen::Vector3f>& pts,
                      const kernels::Rigid& T_map_sensor, const std::vector<maps::MapVoxel>& voxels,
                      const VoxelHash& index, const std::vector<Eigen::Vector3f>& candidate_sensor,
                      double voxel_m, int nb, double bound2, double select2,
                      std::vector<uint8_t>* explained, std::vector<uint8_t>* selected) {
  explained->assign(pts.size(), 0);
  selected->assign(candidate_sensor.size(), 0);
  if (backend == Backend::kCuda) {
#ifdef DEJAVIEW_HAVE_CUDA
    return cuda::ClassifyPoints(Floats(pts), pts.size(), T_map_sensor, index.view(), index.slots(),
                                Floats(candidate_sensor), candidate_sensor.size(), voxel_m, nb,
                                bound2, select2, explained->data(), selected->data());
#else
    return NoCuda();
#endif
  }
  const float* sensor = Floats(candidate_sensor);
  std::vector<int32_t> keys(3 * pts.size());
  std::vector<uint8_t> fits(pts.size());
  for (size_t i = 0; i < pts.size(); ++i) {
    const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
    fits[i] = kernels::NeighbourhoodKey(T_map_sensor, p, voxel_m, nb, &keys[3 * i]);
  }
  // No hash here: the points and the candidates are both sorted by voxel key, and for each
  // (dx, dy) a cursor walks the candidates forward to the run (x + dx, y + dy, z - nb .. z + nb)
  // of the point's voxel, which only moves forward as the points do. Each distinct voxel's
  // neighbourhood is gathered once, in (dx, dy, dz) order as a hash look-up would list it, so
  // the result is the same bits; hashing every neighbour measured 3x slower (codec_eval, 00,
  // T = 0.1): its probes miss the cache and mispredict.
  const KeyPacking packing = PackingOf(keys, fits, nb);
  std::vector<uint64_t> point_key, cand_key;
  std::vector<uint32_t> point_index, cand_index;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (!fits[i]) continue;
    point_key.push_back(packing.Pack(&keys[3 * i]));
    point_index.push_back(uint32_t(i));
  }
  for (size_t j = 0; j < voxels.size(); ++j) {
    const int32_t* k = voxels[j].key.data();
    if (!packing.Holds(k)) continue;
    cand_key.push_back(packing.Pack(k));
    cand_index.push_back(uint32_t(j));
  }
  const int key_bits = packing.bits[0] + packing.bits[1] + packing.bits[2];
  RadixSort(key_bits, &point_key, &point_index);
  RadixSort(key_bits, &cand_key, &cand_index);
  const int side = 2 * nb + 1;
  std::vector<size_t> cursor(size_t(side) * side, 0);
  std::vector<int32_t> near;
  for (size_t m = 0; m < point_key.size(); ++m) {
    const uint32_t i = point_index[m];
    if (m == 0 || point_key[m] != point_key[m - 1]) {
      near.clear();
      for (int dx = -nb; dx <= nb; ++dx) {
        for (int dy = -nb; dy <= nb; ++dy) {
          size_t& c = cursor[size_t((dx + nb) * side + dy + nb)];
          const uint64_t first = uint64_t(int64_t(point_key[m]) + packing.Step(dx, dy, -nb));
          c = Advance(cand_key, c, first);
          for (size_t e = c; e < cand_key.size() && cand_key[e] <= first + 2 * nb; ++e) {
            near.push_back(int32_t(cand_index[e]));
          }
        }
      }
    }
    const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
    int32_t best = -1;
    double best_d2 = bound2;
    kernels::SelectNear(sensor, near.data(), near.size(), p, bound2, select2, selected->data(),
                        &best, &best_d2);
    if (best >= 0) (*selected)[size_t(best)] = 1;
    (*explained)[i] = best >= 0;
  }
  return Status::Ok();
}

Status ProjectCandidates(Backend backend, const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                         const Eigen::Matrix3d& R_map_sensor, const Eigen::Vector3d& t_map_sensor,
                         const kernels::AngularGrid& grid, Projection* out) {
  const size_t n = voxels.size();
  out->sensor.resize(n);
  out->range.resize(n);
  out->cell.resize(n);
  out->nearest.assign(size_t(grid.rows) * size_t(grid.cols), 1e300);
  const kernels::Rigid T = RigidOf(R_map_sensor, t_map_sensor);
  if (backend == Backend::kCuda) {
#ifdef DEJAVIEW_HAVE_CUDA
    return cuda::ProjectCandidates(voxels.data(), n, voxel_m, T, grid, Floats(out->sensor),
                                   out->range.data(), out->cell.data(), out->nearest.data());
#else
    return NoCuda();
#endif
  }
  // Projected first, the nearest per cell after: two loops measured 0.3 ms less per decoded frame
  // than one (codec_eval, 00, T = 0.1).
  for (size_t i = 0; i < n; ++i) {
    kernels::VoxelRecord v;
    std::memcpy(&v, &voxels[i], sizeof(v));
    kernels::Project(v, voxel_m, T.R, T.t, grid, out->sensor[i].data(), &out->range[i],
                     &out->cell[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t c = out->cell[i];
    if (c >= 0) out->nearest[size_t(c)] = std::min(out->nearest[size_t(c)], out->range[i]);
  }
  return Status::Ok();
}

struct CorrespondenceSearch::Device {
#ifdef DEJAVIEW_HAVE_CUDA
  std::unique_ptr<cuda::Search> search;
#endif
};

CorrespondenceSearch::~CorrespondenceSearch() = default;

StatusOr<std::unique_ptr<CorrespondenceSearch>> CorrespondenceSearch::Create(
    Backend backend, const std::vector<Eigen::Vector3d>& map_pts, const VoxelHash& fine_index,
    double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell) {
  std::unique_ptr<CorrespondenceSearch> s(new CorrespondenceSearch());
  s->map_pts_ = &map_pts;
  s->fine_index_ = &fine_index;
  s->fine_voxel_m_ = fine_voxel_m;
  s->coarse_voxel_m_ = coarse_voxel_m;
  s->per_cell_ = coarse_per_cell;
  s->coarse_hash_ = std::make_unique<VoxelHash>(map_pts.size() / 4 + 16);
  const size_t stride = size_t(coarse_per_cell) + 1;
  for (size_t i = 0; i < map_pts.size(); ++i) {
    const uint64_t key = PackKey(maps::KeyOf(map_pts[i], coarse_voxel_m));
    const size_t count = s->coarse_cells_.size() / stride;
    const size_t cell = size_t(s->coarse_hash_->Insert(key, int32_t(count)));
    if (cell == count) s->coarse_cells_.resize(s->coarse_cells_.size() + stride, 0);
    int32_t* c = &s->coarse_cells_[cell * stride];
    if (c[0] < coarse_per_cell) c[1 + c[0]++] = int32_t(i);
  }
  if (backend == Backend::kCuda) {
#ifdef DEJAVIEW_HAVE_CUDA
    s->device_ = std::make_unique<Device>();
    DV_ASSIGN_OR_RETURN(
        s->device_->search,
        cuda::Search::Create(map_pts.empty() ? nullptr : map_pts[0].data(), map_pts.size(),
                             s->Grid(true), fine_index.slots(), s->Grid(false),
                             s->coarse_hash_->slots(), s->coarse_cells_.size() / stride));
#else
    return NoCuda();
#endif
  }
  return s;
}

kernels::NeighbourGrid CorrespondenceSearch::Grid(bool fine) const {
  if (fine) return {fine_index_->view(), fine_voxel_m_, nullptr, 0};
  return {coarse_hash_->view(), coarse_voxel_m_, coarse_cells_.data(), per_cell_};
}

Status CorrespondenceSearch::Find(const std::vector<Eigen::Vector3d>& source,
                                  const kernels::Rigid& T, bool fine, double max_d2,
                                  std::vector<int32_t>* best) const {
  best->resize(source.size());
#ifdef DEJAVIEW_HAVE_CUDA
  if (device_) {
    return device_->search->Find(source.empty() ? nullptr : source[0].data(), source.size(), T,
                                 fine, max_d2, best->data());
  }
#endif
  const kernels::NeighbourGrid grid = Grid(fine);
  const double* map = map_pts_->empty() ? nullptr : (*map_pts_)[0].data();
  for (size_t i = 0; i < source.size(); ++i) {
    double p[3];
    kernels::Transform(T, source[i].data(), p);
    (*best)[i] = kernels::Nearest(grid, map, p, max_d2);
  }
  return Status::Ok();
}

}  // namespace dv::codec
