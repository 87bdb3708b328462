// The CUDA backend of the encoder's hot paths: one thread per frame point, candidate or source
// point, each running the hot_kernels.h function the CPU loop runs. Built with --fmad=false (see
// codec/CMakeLists.txt) so that every double operation rounds as on the CPU. Work runs on the
// calling thread's default stream (cudaStreamPerThread), so encoder threads do not serialise on
// one stream, and device memory comes from the stream-ordered pool (cudaMallocAsync), which
// recycles the per-frame buffers without a device-wide allocation each time.
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <utility>

#include "cuda_hot_paths.h"

namespace dv::codec::cuda {
namespace {

constexpr int kThreads = 256;

Status Failed(const char* what, cudaError_t e) {
  return Status::Unavailable(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}

#define DV_CUDA_RETURN_IF_ERROR(call)                                  \
  do {                                                                 \
    const cudaError_t dv_cuda_err = (call);                            \
    if (dv_cuda_err != cudaSuccess) return Failed(#call, dv_cuda_err); \
  } while (0)

unsigned Blocks(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// A device array from the stream-ordered pool, released in stream order.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { Release(); }

  // Grows to at least n elements (never to zero bytes: an empty input is a valid call).
  Status Reserve(size_t n) {
    if (n <= size_ && p_ != nullptr) return Status::Ok();
    Release();
    void* p = nullptr;
    DV_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&p, (n > 0 ? n : 1) * sizeof(T), cudaStreamPerThread));
    p_ = static_cast<T*>(p);
    size_ = n;
    return Status::Ok();
  }
  Status Upload(const T* host, size_t n) {
    DV_RETURN_IF_ERROR(Reserve(n));
    if (n == 0) return Status::Ok();
    DV_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(p_, host, n * sizeof(T), cudaMemcpyHostToDevice, cudaStreamPerThread));
    return Status::Ok();
  }
  Status Download(T* host, size_t n) const {
    if (n == 0) return Status::Ok();
    DV_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost, cudaStreamPerThread));
    return Status::Ok();
  }
  T* get() const { return p_; }

 private:
  void Release() {
    if (p_ != nullptr) cudaFreeAsync(p_, cudaStreamPerThread);
    p_ = nullptr;
    size_ = 0;
  }
  T* p_ = nullptr;
  size_t size_ = 0;
};

// Device copy of a VoxelHash's storage; view() points into it.
struct DeviceHash {
  DeviceArray<uint64_t> keys;
  DeviceArray<int32_t> values;
  kernels::HashView view{nullptr, nullptr, 0, 0};

  Status Upload(const kernels::HashView& host, size_t slots) {
    DV_RETURN_IF_ERROR(keys.Upload(host.keys, slots));
    DV_RETURN_IF_ERROR(values.Upload(host.values, slots));
    view = {keys.get(), values.get(), host.mask, host.shift};
    return Status::Ok();
  }
};

Status Launched() {
  DV_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

Status Finish() {
  DV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamPerThread));
  return Status::Ok();
}

__global__ void ClassifyKernel(const float* pts, size_t n, kernels::Rigid T,
                               kernels::HashView index, const float* sensor, double voxel_m,
                               int32_t nb, double bound2, double select2, uint8_t* explained,
                               uint8_t* nearest, uint8_t* close, int32_t* point_nearest,
                               int32_t* point_second) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double p[3] = {double(pts[3 * i]), double(pts[3 * i + 1]), double(pts[3 * i + 2])};
  int32_t k[3];
  uint8_t e = 0;
  int32_t best = -1, second = -1;
  if (kernels::NeighbourhoodKey(T, p, voxel_m, nb, k)) {
    // The candidates around p in (dx, dy, dz) order, as the CPU lists them, in runs of a fixed
    // size (the thread's memory stays fixed); SelectNear carries the nearest across runs.
    constexpr int kChunk = 32;
    int32_t near[kChunk];
    int count = 0;
    double best_d2 = bound2, second_d2 = bound2;
    auto flush = [&]() {
      kernels::SelectNear(sensor, near, size_t(count), p, bound2, select2, close, &best, &best_d2,
                          &second, &second_d2);
      count = 0;
    };
    for (int dx = -nb; dx <= nb; ++dx) {
      for (int dy = -nb; dy <= nb; ++dy) {
        for (int dz = -nb; dz <= nb; ++dz) {
          const int32_t j =
              kernels::HashFind(index, kernels::PackKey(k[0] + dx, k[1] + dy, k[2] + dz));
          if (j < 0) continue;
          near[count++] = j;
          if (count == kChunk) flush();
        }
      }
    }
    flush();
    if (best >= 0) nearest[best] = 1;
    e = best >= 0;
  }
  explained[i] = e;
  point_nearest[i] = best;
  point_second[i] = second;
}

// Whether any candidate around the point is within the bound: the search stops at the first.
__global__ void NearKernel(const float* pts, size_t n, kernels::Rigid T, kernels::HashView index,
                           const float* sensor, double voxel_m, int32_t nb, double bound2,
                           uint8_t* near) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double p[3] = {double(pts[3 * i]), double(pts[3 * i + 1]), double(pts[3 * i + 2])};
  int32_t k[3];
  uint8_t found = 0;
  if (kernels::NeighbourhoodKey(T, p, voxel_m, nb, k)) {
    for (int dx = -nb; dx <= nb && !found; ++dx) {
      for (int dy = -nb; dy <= nb && !found; ++dy) {
        for (int dz = -nb; dz <= nb && !found; ++dz) {
          const int32_t j =
              kernels::HashFind(index, kernels::PackKey(k[0] + dx, k[1] + dy, k[2] + dz));
          found = j >= 0 && kernels::Explains(sensor, j, p, bound2);
        }
      }
    }
  }
  near[i] = found;
}

// Linear probing as VoxelHash::Insert, the empty slot claimed by a compare-and-swap: which of two
// colliding keys gets the first slot depends on timing, what a look-up finds does not.
__global__ void InsertKernel(const uint64_t* packed, size_t n, unsigned long long* keys,
                             int32_t* values, uint64_t mask, int32_t shift) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned long long key = packed[i], empty = kernels::kEmptyKey;
  uint64_t s = kernels::HashSlot(key, shift, mask);
  for (;;) {
    const unsigned long long prev = atomicCAS(&keys[s], empty, key);
    if (prev == empty || prev == key) {
      values[s] = int32_t(i);
      return;
    }
    s = (s + 1) & mask;
  }
}

__global__ void FillKernel(unsigned long long* a, size_t n, unsigned long long v) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) a[i] = v;
}

// The nearest range per cell is a minimum over non-negative doubles, whose bit patterns order
// as the values do: atomicMin on the bits is exact and free of order.
__global__ void ProjectKernel(const kernels::VoxelRecord* voxels, size_t n, double voxel_m,
                              kernels::Rigid T, kernels::AngularGrid grid, float* sensor,
                              double* range, int32_t* cell, unsigned long long* nearest_bits) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  kernels::Project(voxels[i], voxel_m, T.R, T.t, grid, sensor + 3 * i, &range[i], &cell[i]);
  if (cell[i] >= 0) {
    atomicMin(&nearest_bits[cell[i]],
              static_cast<unsigned long long>(__double_as_longlong(range[i])));
  }
}

__global__ void NearestKernel(const double* src, size_t n, kernels::Rigid T,
                              kernels::NeighbourGrid grid, const double* map_pts, double max_d2,
                              int32_t* best) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double p[3];
  kernels::Transform(T, src + 3 * i, p);
  best[i] = kernels::Nearest(grid, map_pts, p, max_d2);
}

}  // namespace

Status DeviceAvailable() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clears the sticky error, so a later call asks afresh
    return Status::Unavailable(std::string("no CUDA device: ") + cudaGetErrorString(e));
  }
  if (count == 0) return Status::Unavailable("no CUDA device: cudaGetDeviceCount found none");
  return Status::Ok();
}

Status ClassifyPoints(const float* pts, size_t n, const kernels::Rigid& T_map_sensor,
                      const kernels::HashView& index, size_t slots, const float* sensor,
                      size_t candidates, double voxel_m, int32_t nb, double bound2, double select2,
                      uint8_t* explained, uint8_t* nearest, uint8_t* close, int32_t* point_nearest,
                      int32_t* point_second) {
  DeviceArray<float> d_pts, d_sensor;
  DeviceArray<uint8_t> d_explained, d_marks[2];  // nearest, close
  DeviceArray<int32_t> d_point[2];               // point_nearest, point_second
  DeviceHash d_index;
  DV_RETURN_IF_ERROR(d_pts.Upload(pts, 3 * n));
  DV_RETURN_IF_ERROR(d_sensor.Upload(sensor, 3 * candidates));
  DV_RETURN_IF_ERROR(d_index.Upload(index, slots));
  DV_RETURN_IF_ERROR(d_explained.Reserve(n));
  for (DeviceArray<int32_t>& a : d_point) DV_RETURN_IF_ERROR(a.Reserve(n));
  for (DeviceArray<uint8_t>& m : d_marks) {
    DV_RETURN_IF_ERROR(m.Reserve(candidates));
    DV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m.get(), 0, candidates, cudaStreamPerThread));
  }
  if (n > 0) {
    ClassifyKernel<<<Blocks(n), kThreads, 0, cudaStreamPerThread>>>(
        d_pts.get(), n, T_map_sensor, d_index.view, d_sensor.get(), voxel_m, nb, bound2, select2,
        d_explained.get(), d_marks[0].get(), d_marks[1].get(), d_point[0].get(), d_point[1].get());
    DV_RETURN_IF_ERROR(Launched());
  }
  DV_RETURN_IF_ERROR(d_explained.Download(explained, n));
  DV_RETURN_IF_ERROR(d_point[0].Download(point_nearest, n));
  DV_RETURN_IF_ERROR(d_point[1].Download(point_second, n));
  DV_RETURN_IF_ERROR(d_marks[0].Download(nearest, candidates));
  DV_RETURN_IF_ERROR(d_marks[1].Download(close, candidates));
  return Finish();
}

Status IndexKeys(const uint64_t* packed, size_t n, size_t slots, int32_t shift, uint64_t* keys,
                 int32_t* values) {
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "64-bit keys");
  // A table at most half full (VoxelHash's sizing), so every probe sequence ends.
  if (slots == 0 || (slots & (slots - 1)) != 0 || 2 * n > slots) {
    return Status::InvalidArgument("cuda: IndexKeys: table of " + std::to_string(slots) +
                                   " slots for " + std::to_string(n) + " keys");
  }
  DeviceArray<uint64_t> d_packed;
  DeviceArray<unsigned long long> d_keys;
  DeviceArray<int32_t> d_values;
  DV_RETURN_IF_ERROR(d_packed.Upload(packed, n));
  DV_RETURN_IF_ERROR(d_keys.Reserve(slots));
  DV_RETURN_IF_ERROR(d_values.Reserve(slots));
  // All ones: kEmptyKey in every key, -1 in every value.
  DV_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(d_keys.get(), 0xff, slots * sizeof(uint64_t), cudaStreamPerThread));
  DV_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(d_values.get(), 0xff, slots * sizeof(int32_t), cudaStreamPerThread));
  if (n > 0) {
    InsertKernel<<<Blocks(n), kThreads, 0, cudaStreamPerThread>>>(d_packed.get(), n, d_keys.get(),
                                                                  d_values.get(), slots - 1, shift);
    DV_RETURN_IF_ERROR(Launched());
  }
  DV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(keys, d_keys.get(), slots * sizeof(uint64_t),
                                          cudaMemcpyDeviceToHost, cudaStreamPerThread));
  DV_RETURN_IF_ERROR(d_values.Download(values, slots));
  return Finish();
}

Status MarkNearCandidates(const float* pts, size_t n, const kernels::Rigid& T_map_sensor,
                          const kernels::HashView& index, size_t slots, const float* sensor,
                          size_t candidates, double voxel_m, int32_t nb, double bound2,
                          uint8_t* near) {
  DeviceArray<float> d_pts, d_sensor;
  DeviceArray<uint8_t> d_near;
  DeviceHash d_index;
  DV_RETURN_IF_ERROR(d_pts.Upload(pts, 3 * n));
  DV_RETURN_IF_ERROR(d_sensor.Upload(sensor, 3 * candidates));
  DV_RETURN_IF_ERROR(d_index.Upload(index, slots));
  DV_RETURN_IF_ERROR(d_near.Reserve(n));
  if (n > 0) {
    NearKernel<<<Blocks(n), kThreads, 0, cudaStreamPerThread>>>(d_pts.get(), n, T_map_sensor,
                                                                d_index.view, d_sensor.get(),
                                                                voxel_m, nb, bound2, d_near.get());
    DV_RETURN_IF_ERROR(Launched());
  }
  DV_RETURN_IF_ERROR(d_near.Download(near, n));
  return Finish();
}

Status ProjectCandidates(const void* voxels, size_t n, double voxel_m, const kernels::Rigid& T,
                         const kernels::AngularGrid& grid, float* sensor, double* range,
                         int32_t* cell, double* nearest) {
  const size_t cells = size_t(grid.rows) * size_t(grid.cols);
  DeviceArray<kernels::VoxelRecord> d_voxels;
  DeviceArray<float> d_sensor;
  DeviceArray<double> d_range;
  DeviceArray<int32_t> d_cell;
  DeviceArray<unsigned long long> d_nearest;
  DV_RETURN_IF_ERROR(d_voxels.Upload(static_cast<const kernels::VoxelRecord*>(voxels), n));
  DV_RETURN_IF_ERROR(d_sensor.Reserve(3 * n));
  DV_RETURN_IF_ERROR(d_range.Reserve(n));
  DV_RETURN_IF_ERROR(d_cell.Reserve(n));
  DV_RETURN_IF_ERROR(d_nearest.Reserve(cells));
  const double none = 1e300;
  unsigned long long none_bits = 0;
  static_assert(sizeof(none_bits) == sizeof(none), "64-bit doubles");
  std::memcpy(&none_bits, &none, sizeof(none));
  if (cells > 0) {
    FillKernel<<<Blocks(cells), kThreads, 0, cudaStreamPerThread>>>(d_nearest.get(), cells,
                                                                    none_bits);
    DV_RETURN_IF_ERROR(Launched());
  }
  if (n > 0) {
    ProjectKernel<<<Blocks(n), kThreads, 0, cudaStreamPerThread>>>(
        d_voxels.get(), n, voxel_m, T, grid, d_sensor.get(), d_range.get(), d_cell.get(),
        d_nearest.get());
    DV_RETURN_IF_ERROR(Launched());
  }
  DV_RETURN_IF_ERROR(d_sensor.Download(sensor, 3 * n));
  DV_RETURN_IF_ERROR(d_range.Download(range, n));
  DV_RETURN_IF_ERROR(d_cell.Download(cell, n));
  static_assert(sizeof(double) == sizeof(unsigned long long), "64-bit doubles");
  DV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(nearest, d_nearest.get(), cells * sizeof(double),
                                          cudaMemcpyDeviceToHost, cudaStreamPerThread));
  return Finish();
}

struct Search::Impl {
  DeviceArray<double> map_pts;
  DeviceHash fine_hash, coarse_hash;
  DeviceArray<int32_t> coarse_cells;
  kernels::NeighbourGrid fine{}, coarse{};
  // Per call: the source points and the answers.
  mutable DeviceArray<double> src;
  mutable DeviceArray<int32_t> best;
};

Search::Search(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Search::~Search() = default;

StatusOr<std::unique_ptr<Search>> Search::Create(const double* map_pts, size_t n,
                                                 const kernels::NeighbourGrid& fine,
                                                 size_t fine_slots,
                                                 const kernels::NeighbourGrid& coarse,
                                                 size_t coarse_slots, size_t coarse_cells) {
  auto impl = std::make_unique<Impl>();
  DV_RETURN_IF_ERROR(impl->map_pts.Upload(map_pts, 3 * n));
  DV_RETURN_IF_ERROR(impl->fine_hash.Upload(fine.hash, fine_slots));
  DV_RETURN_IF_ERROR(impl->coarse_hash.Upload(coarse.hash, coarse_slots));
  DV_RETURN_IF_ERROR(
      impl->coarse_cells.Upload(coarse.cells, coarse_cells * size_t(coarse.per_cell + 1)));
  impl->fine = {impl->fine_hash.view, fine.voxel_m, nullptr, 0};
  impl->coarse = {impl->coarse_hash.view, coarse.voxel_m, impl->coarse_cells.get(),
                  coarse.per_cell};
  DV_RETURN_IF_ERROR(Finish());
  return std::unique_ptr<Search>(new Search(std::move(impl)));
}

Status Search::Find(const double* src, size_t n, const kernels::Rigid& T, bool fine, double max_d2,
                    int32_t* best) const {
  DV_RETURN_IF_ERROR(impl_->src.Upload(src, 3 * n));
  DV_RETURN_IF_ERROR(impl_->best.Reserve(n));
  if (n > 0) {
    NearestKernel<<<Blocks(n), kThreads, 0, cudaStreamPerThread>>>(
        impl_->src.get(), n, T, fine ? impl_->fine : impl_->coarse, impl_->map_pts.get(), max_d2,
        impl_->best.get());
    DV_RETURN_IF_ERROR(Launched());
  }
  DV_RETURN_IF_ERROR(impl_->best.Download(best, n));
  return Finish();
}

}  // namespace dv::codec::cuda
