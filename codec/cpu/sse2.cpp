// The SSE2 variants of cpu/kernels.h: two doubles or four floats an instruction, x86-64's
// baseline (every x86-64 CPU runs them; CMake compiles this file for x86-64 alone). Each takes the
// scalar variant's IEEE operations in the same order lane by lane, and the build contracts
// nothing into FMAs, so every bit is the scalar variant's.
#include <emmintrin.h>

#include <cmath>

#include "cpu/classify.h"
#include "cpu/sse2.h"
#include "cpu/variants.h"
#include "fill.h"
#include "popcount.h"

namespace dv::codec::cpu {
namespace sse2 {
SortedGrid::Queries SortPoints(const SortedGrid& grid, const std::vector<Eigen::Vector3f>& pts,
                               const kernels::Rigid& T, double voxel_m, int nb, int parts) {
  auto key = [&](size_t i, int32_t k[3]) {
    const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
    return kernels::NeighbourhoodKey(T, p, voxel_m, nb, k);
  };
  return grid.SortBy(pts.size(), nb, parts, key, [&](size_t i, int32_t k[6]) {
    return NeighbourhoodKeys2(T, pts[i], pts[i + 1], voxel_m, nb, k);
  });
}

namespace {

// The first of the n items (in order) at distance d_best, and the first other one at d_second
// (-1: none), by masks of equal distances: the nearest and second KeepNearest keeps where d_best
// and d_second are the least and second least of the distances within its bound (d_second ==
// d_best where the least comes twice).
void NearestAndSecond(const double* d2, const int32_t* near, size_t n, double d_best,
                      double d_second, int32_t* best, int32_t* second) {
  const __m128d b = _mm_set1_pd(d_best), s = _mm_set1_pd(d_second);
  const bool tie = d_second == d_best;
  for (size_t base = 0; base < n; base += 64) {
    const size_t end = std::min(n, base + 64);
    uint64_t at_best = 0, at_second = 0;
    size_t a = base;
    for (; a + 2 <= end; a += 2) {
      const __m128d d = _mm_loadu_pd(d2 + a);
      at_best |= uint64_t(_mm_movemask_pd(_mm_cmpeq_pd(d, b))) << (a - base);
      at_second |= uint64_t(_mm_movemask_pd(_mm_cmpeq_pd(d, s))) << (a - base);
    }
    for (; a < end; ++a) {
      at_best |= uint64_t(d2[a] == d_best) << (a - base);
      at_second |= uint64_t(d2[a] == d_second) << (a - base);
    }
    if (*best < 0 && at_best != 0) {
      *best = near[base + size_t(__builtin_ctzll(at_best))];
      if (tie) at_second &= at_second - 1;  // the least's first place is the nearest's
    }
    if (*second < 0 && at_second != 0) *second = near[base + size_t(__builtin_ctzll(at_second))];
    if (*best >= 0 && (*second >= 0 || d_second < 0)) return;
  }
}

}  // namespace

// The nearest and second (KeepNearest's: the first among equals, in item order) from the least
// and second least distance, kept lane by lane as the distances are taken (minpd, maxpd), then
// found by position (NearestAndSecond): no chain of dependent selects per candidate within the
// bound, as the scalar variant's. The distances within the bound are the least of all, so the
// least and second least of all are theirs where they lie within it: the lanes keep those with no
// test of the bound. A NaN distance, which finite points never give, would change neither: minpd
// and maxpd give their second operand then.
void ClassifyVoxel(const VoxelJob& job, uint64_t* close) {
  // The job's fields as locals: the stores to d2 may alias them, and would load them again.
  const size_t n = job.n, words = (n + 63) / 64;
  const double *x = job.x, *y = job.y, *z = job.z;
  double* const d2 = job.d2;
  const double bound2 = job.bound2, select2 = job.select2;
  const __m128d inf = _mm_set1_pd(HUGE_VAL), vs = _mm_set1_pd(select2);
  for (size_t k = 0; k < job.count; ++k) {
    const uint32_t i = job.points[k];
    const double px = double(job.pts[i].x()), py = double(job.pts[i].y()),
                 pz = double(job.pts[i].z());
    const __m128d vx = _mm_set1_pd(px), vy = _mm_set1_pd(py), vz = _mm_set1_pd(pz);
    __m128d least = inf, next = inf;
    auto keep = [&](__m128d d) {
      next = _mm_min_pd(_mm_max_pd(least, d), next);
      least = _mm_min_pd(d, least);
    };
    // The distances (kernels::Dist2's operations, in its order) two at a time, and which lie
    // within the selection radius as bits (movmskpd).
    for (size_t w = 0; w < words; ++w) {
      const size_t base = 64 * w, end = std::min(n, base + 64);
      uint64_t in_select = 0;
      size_t a = base;
      for (; a + 2 <= end; a += 2) {
        const __m128d dx = _mm_sub_pd(_mm_loadu_pd(x + a), vx);
        const __m128d dy = _mm_sub_pd(_mm_loadu_pd(y + a), vy);
        const __m128d dz = _mm_sub_pd(_mm_loadu_pd(z + a), vz);
        const __m128d d =
            _mm_add_pd(_mm_add_pd(_mm_mul_pd(dx, dx), _mm_mul_pd(dy, dy)), _mm_mul_pd(dz, dz));
        _mm_storeu_pd(d2 + a, d);
        in_select |= uint64_t(_mm_movemask_pd(_mm_cmple_pd(d, vs))) << (a - base);
        keep(d);
      }
      for (; a < end; ++a) {
        const double dx = x[a] - px, dy = y[a] - py, dz = z[a] - pz;
        d2[a] = dx * dx + dy * dy + dz * dz;
        in_select |= uint64_t(d2[a] <= select2) << (a - base);
        keep(_mm_set_pd(HUGE_VAL, d2[a]));  // lane 0 only: +infinity changes neither
      }
      close[w] |= in_select;
    }
    const double l0 = _mm_cvtsd_f64(least), l1 = _mm_cvtsd_f64(_mm_unpackhi_pd(least, least));
    const double n0 = _mm_cvtsd_f64(next), n1 = _mm_cvtsd_f64(_mm_unpackhi_pd(next, next));
    const double d_best = std::min(l0, l1);
    const double d_second = std::min(std::max(l0, l1), std::min(n0, n1));
    int32_t best = -1, second = -1;
    if (d_best <= bound2) {
      NearestAndSecond(d2, job.near, n, d_best, d_second <= bound2 ? d_second : -1.0, &best,
                       &second);
    }
    KeepPoint(job, i, best, second);
  }
}

namespace {

void Classify(const CandidateSearch& search, const ClassifyRadii& radii, const ClassifyOut& out) {
  ClassifyRuns<SortPoints, ClassifyVoxel>(search, radii, out);
}

}  // namespace

namespace {

// Four neighbours' keys (variants.h RingContext) from their ranges x, the candidate's range hi in
// every lane, and each lane's low four bits.
inline __m128i RingKeys(__m128 x, __m128 hi, __m128i low_bits) {
  const __m128 sign = _mm_castsi128_ps(_mm_set1_epi32(int(kSignBit)));
  const __m128 d = _mm_andnot_ps(sign, _mm_sub_ps(_mm_andnot_ps(sign, x), hi));
  return _mm_or_si128(_mm_and_si128(_mm_castps_si128(d), _mm_set1_epi32(~15)), low_bits);
}

// The lesser of each lane; signed compares order the keys, which are below 2^31.
inline __m128i Lesser(__m128i a, __m128i b) {
  const __m128i greater = _mm_cmpgt_epi32(a, b);
  return _mm_or_si128(_mm_and_si128(greater, b), _mm_andnot_si128(greater, a));
}

}  // namespace

// The scalar keys four at a time: half its instructions. The three padding offsets (13..15, no
// neighbour) make keys above every real one.
int RingState(const float* h, const int32_t nb[kPaddedOffsets], size_t i) {
  alignas(16) float hv[kPaddedOffsets];
  for (int k = 0; k < kPaddedOffsets; ++k) hv[k] = h[nb[k]];
  const __m128 hi = _mm_set1_ps(h[i]);
  alignas(16) uint32_t key[kPaddedOffsets];
  unsigned selected = 0;
  __m128i least = _mm_set1_epi32(0x7fffffff);
  for (int v = 0; v < 4; ++v) {
    const __m128 x = _mm_load_ps(hv + 4 * v);
    selected |= unsigned(_mm_movemask_ps(x)) << (4 * v);
    const __m128i k = RingKeys(x, hi, _mm_setr_epi32(4 * v, 4 * v + 1, 4 * v + 2, 4 * v + 3));
    _mm_store_si128(reinterpret_cast<__m128i*>(key + 4 * v), k);
    least = Lesser(least, k);
  }
  // Shifts by immediates: clang wants constants, not a loop variable.
  least = Lesser(least, _mm_srli_si128(least, 8));
  least = Lesser(least, _mm_srli_si128(least, 4));
  const uint32_t best = uint32_t(_mm_cvtsi128_si32(least));
  const uint32_t level = std::min(std::min(key[1], key[4]), std::min(key[7], key[10]));
  return RingContext(selected, best, level, key[kFaceZ], Popcount16(selected));
}

// The 13 neighbours as five loads of four cells, not thirteen look-ups.
int RingStatePlanes(const float* prev, const float* cur, float hi, unsigned* selected) {
  constexpr ptrdiff_t kRow = maps::kTileVoxels;
  const __m128 inf = _mm_set1_ps(HUGE_VALF);
  const __m128 low3 = _mm_castsi128_ps(_mm_setr_epi32(-1, -1, -1, 0));
  // Slab x - 1's rows y - 1, y, y + 1 at z - 1 .. z + 1 (offsets 0..8, three a row), a padding
  // lane (+infinity) fourth in each.
  auto row = [&](const float* p) {
    return _mm_or_ps(_mm_and_ps(low3, _mm_loadu_ps(p - 1)), _mm_andnot_ps(low3, inf));
  };
  const __m128 r0 = row(prev - kRow), r1 = row(prev), r2 = row(prev + kRow);
  // Slab x's row y - 1 (offsets 9..11), and the cell below (offset 12) in the fourth lane.
  const __m128 c = _mm_loadu_ps(cur - kRow - 1);
  const __m128 u = _mm_shuffle_ps(c, _mm_load_ss(cur - 1), _MM_SHUFFLE(0, 0, 2, 2));
  const __m128 r3 = _mm_shuffle_ps(c, u, _MM_SHUFFLE(2, 0, 1, 0));
  // RingState's keys, each with its lane's position (0..15, row by row) in place of the offset:
  // positions rise with offsets as offsets do, so the least finite key is the same neighbour's,
  // and where none is finite every state is 0 whichever lane holds the least. The lanes' sign
  // bits are then the neighbours' states by position, without a shuffle.
  const __m128 h = _mm_set1_ps(hi);
  const __m128i k0 = RingKeys(r0, h, _mm_setr_epi32(0, 1, 2, 3));
  const __m128i k1 = RingKeys(r1, h, _mm_setr_epi32(4, 5, 6, 7));
  const __m128i k2 = RingKeys(r2, h, _mm_setr_epi32(8, 9, 10, 11));
  const __m128i k3 = RingKeys(r3, h, _mm_setr_epi32(12, 13, 14, 15));
  // Lane by lane the least of the four rows; lane 1 holds offsets 1, 4, 7 and 10, the four at
  // the candidate's height.
  __m128i least = Lesser(Lesser(k0, k1), Lesser(k2, k3));
  const uint32_t level = uint32_t(_mm_cvtsi128_si32(_mm_shuffle_epi32(least, 1)));
  least = Lesser(least, _mm_srli_si128(least, 8));
  least = Lesser(least, _mm_srli_si128(least, 4));
  const uint32_t best = uint32_t(_mm_cvtsi128_si32(least));
  const uint32_t below = uint32_t(_mm_cvtsi128_si32(_mm_shuffle_epi32(k3, 3)));
  // Sign bits by position (a padding lane, +infinity, has none).
  const unsigned signs = unsigned(_mm_movemask_ps(r0) | _mm_movemask_ps(r1) << 4 |
                                  _mm_movemask_ps(r2) << 8 | _mm_movemask_ps(r3) << 12);
  if (selected) *selected = signs;
  return RingContext(signs, best, level, below, Popcount16(signs));
}

// Two roots an instruction: one at a time, each waiting on the last, they were a large share of
// the selection coder's time.
void HorizontalRanges(const Eigen::Vector3f* sensor, size_t n, float* h) {
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const double x0 = sensor[i].x(), y0 = sensor[i].y();
    const double x1 = sensor[i + 1].x(), y1 = sensor[i + 1].y();
    const __m128d r = _mm_sqrt_pd(_mm_setr_pd(x0 * x0 + y0 * y0, x1 * x1 + y1 * y1));
    h[i] = float(_mm_cvtsd_f64(r));
    h[i + 1] = float(_mm_cvtsd_f64(_mm_unpackhi_pd(r, r)));
  }
  scalar::HorizontalRanges(sensor + i, n - i, h + i);
}

// Four pairs at a time: the scalar loop was a large share of the decoder's instructions.
void FillBins(const Candidates& cand, const SelectedPair* pairs, size_t n, float limit2,
              uint16_t* bin) {
  const __m128 half = _mm_set1_ps(0.5f), far2 = _mm_set1_ps(limit2);
  const __m128 last_near = _mm_set1_ps(float(kFillRangeBins - 1));
  const __m128i beyond = _mm_set1_epi32(kFillRangeBins);
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const Eigen::Vector3f* a[4];
    const Eigen::Vector3f* b[4];
    for (int j = 0; j < 4; ++j) {
      a[j] = &cand.sensor[pairs[k + size_t(j)].later];
      b[j] = &cand.sensor[pairs[k + size_t(j)].earlier];
    }
    auto lanes = [](const Eigen::Vector3f* const* v, int axis) {
      return _mm_setr_ps((*v[0])[axis], (*v[1])[axis], (*v[2])[axis], (*v[3])[axis]);
    };
    const __m128 ax = lanes(a, 0), ay = lanes(a, 1), az = lanes(a, 2);
    const __m128 bx = lanes(b, 0), by = lanes(b, 1), bz = lanes(b, 2);
    const __m128 dx = _mm_sub_ps(ax, bx), dy = _mm_sub_ps(ay, by), dz = _mm_sub_ps(az, bz);
    const __m128 d2 =
        _mm_add_ps(_mm_add_ps(_mm_mul_ps(dx, dx), _mm_mul_ps(dy, dy)), _mm_mul_ps(dz, dz));
    const __m128 mx = _mm_mul_ps(_mm_add_ps(ax, bx), half);
    const __m128 my = _mm_mul_ps(_mm_add_ps(ay, by), half);
    const __m128 mz = _mm_mul_ps(_mm_add_ps(az, bz), half);
    const __m128 r2 =
        _mm_add_ps(_mm_add_ps(_mm_mul_ps(mx, mx), _mm_mul_ps(my, my)), _mm_mul_ps(mz, mz));
    // minps gives its second operand where the first is not below it, as the scalar test does;
    // truncation as int().
    const __m128i near = _mm_cvttps_epi32(_mm_min_ps(r2, last_near));
    const __m128i apart = _mm_castps_si128(_mm_cmpgt_ps(d2, far2));
    alignas(16) int32_t out[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(out),
                    _mm_or_si128(_mm_and_si128(apart, beyond), _mm_andnot_si128(apart, near)));
    for (int j = 0; j < 4; ++j) bin[k + size_t(j)] = uint16_t(out[j]);
  }
  scalar::FillBins(cand, pairs + k, n - k, limit2, bin + k);
}

namespace {

// kernels::PackKey of the cells of two points (x, y, z, a lane each) of side 1 / inv, at out.
inline void PackKeys2(__m128d x, __m128d y, __m128d z, double inv, uint64_t* out) {
  const __m128d s = _mm_set1_pd(inv);
  const __m128i bias = _mm_set1_epi32(kernels::kPackBias), zero = _mm_setzero_si128();
  // Each key plus the bias, non-negative: zero-extended to 64 bits.
  auto lane64 = [&](__m128d v) {
    return _mm_unpacklo_epi32(_mm_add_epi32(BoundedFloor2(_mm_mul_pd(v, s)), bias), zero);
  };
  const __m128i packed = _mm_or_si128(
      _mm_or_si128(_mm_slli_epi64(lane64(x), 42), _mm_slli_epi64(lane64(y), 21)), lane64(z));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed);
}

}  // namespace

// Two points at a time. Out of reach the vector conversion gives INT_MIN where the scalar
// variant clamps (maps::KeyFloor): keys no caller uses (cpu/kernels.h cell_keys).
void CellKeys(const Eigen::Vector3f* f, size_t n, double inv, uint64_t* keys) {
  size_t k = 0;
  for (; k + 2 <= n; k += 2) {
    const __m128d x = _mm_setr_pd(double(f[k].x()), double(f[k + 1].x()));
    const __m128d y = _mm_setr_pd(double(f[k].y()), double(f[k + 1].y()));
    const __m128d z = _mm_setr_pd(double(f[k].z()), double(f[k + 1].z()));
    PackKeys2(x, y, z, inv, keys + k);
  }
  scalar::CellKeys(f + k, n - k, inv, keys + k);
}

}  // namespace sse2

const Kernels kSse2Kernels = {
    "sse2",                  // name
    scalar::Project,         // project
    sse2::SortPoints,        // sort_points
    sse2::Classify,          // classify
    sse2::RingState,         // ring_state
    sse2::RingStatePlanes,   // ring_state_planes
    sse2::HorizontalRanges,  // horizontal_ranges
    sse2::FillBins,          // fill_bins
    sse2::CellKeys,          // cell_keys
};

}  // namespace dv::codec::cpu
