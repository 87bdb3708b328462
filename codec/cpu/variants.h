// What the variant files of cpu/kernels.h share: the tables themselves, the entries one variant
// borrows from another (the AVX2 table's entries without an AVX2 variant, and its tails), and
// the inline steps every variant of an entry ends with, so that they end alike.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/kernels.h"

namespace dv::codec::cpu {

// One voxel of frame points in the CPU's classification (cpu/classify.h): the points
// points[0, count) (indices into pts, sensor frame) share the candidates near[0, n), whose
// representatives (sensor frame) the caller laid out in x, y and z, each with room for n + 3
// values (a variant may pad them); d2 has room for n + 3 distances. Each variant's
// ClassifyVoxel(job, close) finds each point's nearest candidate within sqrt(bound2) and the
// nearest of the others (kernels::KeepNearest's, the first in near's order among equals), marks
// its nearest in job.nearest, and sets close[w] bit b where candidate near[64 w + b] lies within
// sqrt(select2) of some point (close: at least one word and (n + 63) / 64, which the caller
// clears).
struct VoxelJob {
  const Eigen::Vector3f* pts = nullptr;  // null until the run's fields are set (StartJob)
  const uint32_t* points = nullptr;
  size_t count = 0;
  const int32_t* near = nullptr;
  size_t n = 0;
  double *x = nullptr, *y = nullptr, *z = nullptr, *d2 = nullptr;
  double bound2 = 0, select2 = 0, near2 = 0;  // ClassifyRadii's
  // Per point i: its nearest and second candidate (-1: none), and with near_out (null: no first
  // gap test) near_out[i] = 1 where it is unexplained and a candidate lies within sqrt(near2).
  int32_t* point_nearest = nullptr;
  int32_t* point_second = nullptr;
  uint8_t* near_out = nullptr;
  uint8_t* nearest = nullptr;  // the candidates' nearest marks (of the caller's run)
};

// scalar.cpp, sse2.cpp, avx2.cpp (the last two on x86-64 only: kernels.cpp names them there).
extern const Kernels kScalarKernels;
extern const Kernels kSse2Kernels;
extern const Kernels kAvx2Kernels;

// The scalar entries, one element at a time: the other variants' tails.
namespace scalar {
void Project(const maps::MapVoxel* voxels, size_t n, double voxel_m, const kernels::Rigid& T,
             const kernels::AngularGrid& grid, float* sensor, double* range, int32_t* cell);
void HorizontalRanges(const Eigen::Vector3f* sensor, size_t n, float* h);
void FillBins(const Candidates& cand, const SelectedPair* pairs, size_t n, float limit2,
              uint16_t* bin);
void CellKeys(const Eigen::Vector3f* pts, size_t n, double inv, uint64_t* keys);
}  // namespace scalar

// The SSE2 entries: the AVX2 table's where AVX2 has no variant of its own (and its
// classification's where a voxel has over 64 candidates).
namespace sse2 {
SortedGrid::Queries SortPoints(const SortedGrid& grid, const std::vector<Eigen::Vector3f>& pts,
                               const kernels::Rigid& T, double voxel_m, int nb, int parts);
void ClassifyVoxel(const VoxelJob& job, uint64_t* close);
int RingState(const float* h, const int32_t nb[kPaddedOffsets], size_t i);
int RingStatePlanes(const float* prev, const float* cur, float hi, unsigned* selected);
void HorizontalRanges(const Eigen::Vector3f* sensor, size_t n, float* h);
void FillBins(const Candidates& cand, const SelectedPair* pairs, size_t n, float limit2,
              uint16_t* bin);
void CellKeys(const Eigen::Vector3f* pts, size_t n, double inv, uint64_t* keys);
}  // namespace sse2

// A point's result, from its nearest and second (-1: none) and its distances d2 to the voxel's
// n candidates: its nearest marked; where it has none, the first gap test's flag from the same
// distances (most of the points that test marks are settled here).
inline void KeepPoint(const VoxelJob& job, uint32_t i, int32_t best, int32_t second) {
  if (best >= 0) {
    job.nearest[size_t(best)] = 1;
  } else if (job.near_out) {
    uint8_t any = 0;
    for (size_t a = 0; a < job.n; ++a) any |= uint8_t(job.d2[a] <= job.near2);
    job.near_out[i] = any;
  }
  job.point_nearest[i] = best;
  job.point_second[i] = second;
}

// ---- The ring state's keys and context, shared by its variants.

inline uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}
inline float BitsFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

constexpr uint32_t kSignBit = 0x80000000u, kInfinityBits = 0x7f800000u;

// The context from the least key (best), the least of the four at the candidate's height
// (level), the key of the neighbour below, the number selected and which are (signs: bit k for
// the neighbour whose key's low 4 bits are k): what the keys and signs say, no look-up again. A
// neighbour's key is (the bits of |its range - the candidate's| without their low 4, offset):
// non-negative floats order as their bit patterns, distances within 16 float steps tie and the
// lower offset wins, and an absent neighbour is at infinity. A state as a product, not a branch:
// whether a neighbour is there is data, and a branch on it mispredicts.
inline int RingContext(unsigned signs, uint32_t best, uint32_t level, uint32_t below, int sel) {
  auto state = [&](uint32_t k) {
    return int((k & ~15u) != kInfinityBits) * (1 + int((signs >> (k & 15)) & 1));
  };
  return ((state(best) * 3 + state(level)) * 4 + std::min(sel, 3)) * 3 + state(below);
}

}  // namespace dv::codec::cpu
