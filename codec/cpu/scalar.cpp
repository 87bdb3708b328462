// The portable variants of cpu/kernels.h: plain C++, one element at a time, on every target (the
// only ones on arm64). The other variants must give their bits; their tails call these.
#include <cmath>

#include "cpu/classify.h"
#include "cpu/variants.h"
#include "dejaview/maps/key_floor.h"
#include "fill.h"

namespace dv::codec::cpu {
namespace scalar {

void Project(const maps::MapVoxel* voxels, size_t n, double voxel_m, const kernels::Rigid& T,
             const kernels::AngularGrid& grid, float* sensor, double* range, int32_t* cell) {
  for (size_t i = 0; i < n; ++i) {
    kernels::VoxelRecord v;
    std::memcpy(&v, &voxels[i], sizeof(v));
    kernels::Project(v, voxel_m, T.R, T.t, grid, sensor + 3 * i, &range[i], &cell[i]);
  }
}

namespace {

SortedGrid::Queries SortPoints(const SortedGrid& grid, const std::vector<Eigen::Vector3f>& pts,
                               const kernels::Rigid& T, double voxel_m, int nb, int parts) {
  return grid.SortBy(pts.size(), nb, parts, [&](size_t i, int32_t k[3]) {
    const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
    return kernels::NeighbourhoodKey(T, p, voxel_m, nb, k);
  });
}

// The nearest and second of each point by kernels::KeepNearestWithin, on the bits of the
// distances within the bound. The distances come first, in a loop of their own, with which lie
// within each radius as bits: a branch per candidate mispredicted on most of those that did.
void ClassifyVoxel(const VoxelJob& job, uint64_t* close) {
  // The job's fields as locals: the stores to d2 may alias them, and would load them again.
  const size_t n = job.n, words = (n + 63) / 64;
  const double *x = job.x, *y = job.y, *z = job.z;
  double* const d2 = job.d2;
  const double bound2 = job.bound2, select2 = job.select2;
  uint64_t bound_bits;
  std::memcpy(&bound_bits, &bound2, sizeof(bound_bits));
  for (size_t k = 0; k < job.count; ++k) {
    const uint32_t i = job.points[k];
    const double px = double(job.pts[i].x()), py = double(job.pts[i].y()),
                 pz = double(job.pts[i].z());
    int32_t best = -1, second = -1;
    uint64_t best_d2 = bound_bits, second_d2 = bound_bits;
    for (size_t w = 0; w < words; ++w) {
      const size_t base = 64 * w, end = std::min(n, base + 64);
      uint64_t in_select = 0, in_bound = 0;
      for (size_t a = base; a < end; ++a) {
        const double dx = x[a] - px, dy = y[a] - py, dz = z[a] - pz;
        d2[a] = dx * dx + dy * dy + dz * dz;
        in_select |= uint64_t(d2[a] <= select2) << (a - base);
        in_bound |= uint64_t(d2[a] <= bound2) << (a - base);
      }
      close[w] |= in_select;
      for (; in_bound != 0; in_bound &= in_bound - 1) {
        const size_t c = base + size_t(__builtin_ctzll(in_bound));
        uint64_t d;
        std::memcpy(&d, &d2[c], sizeof(d));
        kernels::KeepNearestWithin(job.near[c], d, &best, &best_d2, &second, &second_d2);
      }
    }
    KeepPoint(job, i, best, second);
  }
}

void Classify(const CandidateSearch& search, const ClassifyRadii& radii, const ClassifyOut& out) {
  ClassifyRuns<SortPoints, ClassifyVoxel>(search, radii, out);
}

// Each neighbour's key (variants.h RingContext), and the least by a tree of minima: a chain of 12
// would be as long as its dependencies.
int RingState(const float* h, const int32_t nb[kPaddedOffsets], size_t i) {
  uint32_t key[kCausalOffsets];
  unsigned signs = 0;
  int sel = 0;
  const float hi = h[i];
  for (int k = 0; k < kCausalOffsets; ++k) {
    const uint32_t hj = FloatBits(h[nb[k]]);
    key[k] = (FloatBits(std::fabs(BitsFloat(hj & ~kSignBit) - hi)) & ~15u) | uint32_t(k);
    signs |= (hj >> 31) << k;
    sel += int(hj >> 31);
  }
  const uint32_t level = std::min(std::min(key[1], key[4]), std::min(key[7], key[10]));
  const uint32_t rest = std::min(std::min(std::min(key[0], key[2]), std::min(key[3], key[5])),
                                 std::min(std::min(key[6], key[8]), std::min(key[9], key[11])));
  return RingContext(signs, std::min(std::min(level, rest), key[12]), level, key[kFaceZ], sel);
}

// RingState on the 13 cells as candidates 0..12 of a ring array, the candidate 13th: a cell at
// +infinity keys and signs as an absent neighbour (h[-1]) does.
int RingStatePlanes(const float* prev, const float* cur, float hi, unsigned* selected) {
  constexpr ptrdiff_t kRow = maps::kTileVoxels;
  float storage[kCausalOffsets + 2];
  storage[0] = HUGE_VALF;
  float* const h = storage + 1;
  int32_t nb[kPaddedOffsets];
  unsigned signs = 0;
  for (int k = 0; k < kPaddedOffsets; ++k) nb[k] = k < kCausalOffsets ? k : -1;
  for (int k = 0; k < kCausalOffsets; ++k) {
    const int8_t* o = kCausalOffset[k];
    h[k] = (o[0] < 0 ? prev : cur)[o[1] * kRow + o[2]];
    signs |= unsigned(std::signbit(h[k])) << RingLane(k);
  }
  h[kCausalOffsets] = hi;
  if (selected) *selected = signs;
  return RingState(h, nb, kCausalOffsets);
}

}  // namespace

void HorizontalRanges(const Eigen::Vector3f* sensor, size_t n, float* h) {
  for (size_t i = 0; i < n; ++i) {
    const double x = sensor[i].x(), y = sensor[i].y();
    h[i] = float(std::sqrt(x * x + y * y));
  }
}

void FillBins(const Candidates& cand, const SelectedPair* pairs, size_t n, float limit2,
              uint16_t* bin) {
  for (size_t k = 0; k < n; ++k) {
    const Eigen::Vector3f& a = cand.sensor[pairs[k].later];
    const Eigen::Vector3f& b = cand.sensor[pairs[k].earlier];
    const float dx = a.x() - b.x(), dy = a.y() - b.y(), dz = a.z() - b.z();
    const Eigen::Vector3f m = FillPoint(cand, pairs[k], 0);
    const float range2 = m.x() * m.x() + m.y() * m.y() + m.z() * m.z();
    const int near = range2 < float(kFillRangeBins - 1) ? int(range2) : kFillRangeBins - 1;
    bin[k] = uint16_t(dx * dx + dy * dy + dz * dz > limit2 ? kFillRangeBins : near);
  }
}

void CellKeys(const Eigen::Vector3f* pts, size_t n, double inv, uint64_t* keys) {
  for (size_t k = 0; k < n; ++k) {
    const double x = double(pts[k].x()), y = double(pts[k].y()), z = double(pts[k].z());
    keys[k] =
        kernels::PackKey(maps::KeyFloor(x * inv), maps::KeyFloor(y * inv), maps::KeyFloor(z * inv));
  }
}

}  // namespace scalar

const Kernels kScalarKernels = {
    "scalar",                  // name
    scalar::Project,           // project
    scalar::SortPoints,        // sort_points
    scalar::Classify,          // classify
    scalar::RingState,         // ring_state
    scalar::RingStatePlanes,   // ring_state_planes
    scalar::HorizontalRanges,  // horizontal_ranges
    scalar::FillBins,          // fill_bins
    scalar::CellKeys,          // cell_keys
};

}  // namespace dv::codec::cpu
