// The AVX2 variants of cpu/kernels.h (the projection and the classification; the rest of the
// AVX2 table is SSE2's), four doubles an instruction, for x86-64 CPUs that have AVX2
// (cpu::Best asks the CPU once). Each takes the scalar variant's IEEE operations in the same
// order lane by lane, and AVX2 has no FMA to contract into, so every bit is the scalar variant's.
//
// Each function that uses AVX2 says so with its own target attribute, not the file with -mavx2:
// the inline functions of the headers (Eigen's, the standard library's, hot_kernels.h's) would
// then be compiled for AVX2 here too, and the linker keeps one copy of each, which could be this
// one, called on a CPU without AVX2.
#include <immintrin.h>

#include <cmath>

#include "cpu/classify.h"
#include "cpu/variants.h"

namespace dv::codec::cpu {
namespace avx2 {
namespace {

// maps::PortableAtan2, four lanes.
__attribute__((target("avx2"))) inline __m256d Atan2(__m256d y, __m256d x) {
  const __m256d zero = _mm256_setzero_pd(), sign = _mm256_set1_pd(-0.0);
  const __m256d ax = _mm256_andnot_pd(sign, x), ay = _mm256_andnot_pd(sign, y);
  const __m256d x_wins = _mm256_cmp_pd(ax, ay, _CMP_GT_OQ);
  const __m256d mx = _mm256_blendv_pd(ay, ax, x_wins);
  const __m256d a = _mm256_div_pd(_mm256_blendv_pd(ax, ay, x_wins), mx);
  const __m256d s = _mm256_mul_pd(a, a);
  __m256d r = _mm256_sub_pd(_mm256_mul_pd(_mm256_set1_pd(0.0208351), s), _mm256_set1_pd(0.085133));
  r = _mm256_add_pd(_mm256_mul_pd(r, s), _mm256_set1_pd(0.180141));
  r = _mm256_sub_pd(_mm256_mul_pd(r, s), _mm256_set1_pd(0.3302995));
  r = _mm256_add_pd(_mm256_mul_pd(r, s), _mm256_set1_pd(0.999866));
  r = _mm256_mul_pd(r, a);
  r = _mm256_blendv_pd(r, _mm256_sub_pd(_mm256_set1_pd(1.57079632679489662), r),
                       _mm256_cmp_pd(ay, ax, _CMP_GT_OQ));
  r = _mm256_blendv_pd(r, _mm256_sub_pd(_mm256_set1_pd(3.14159265358979324), r),
                       _mm256_cmp_pd(x, zero, _CMP_LT_OQ));
  r = _mm256_blendv_pd(r, _mm256_xor_pd(r, sign), _mm256_cmp_pd(y, zero, _CMP_LT_OQ));
  return _mm256_blendv_pd(r, zero, _mm256_cmp_pd(mx, zero, _CMP_EQ_OQ));
}

// The projection's constants in every lane, made once a call, as locals: the loop's stores to
// range, sensor and cell may alias T's and the grid's fields, which would be loaded again each
// time.
struct Lanes {
  __attribute__((target("avx2")))
  Lanes(double voxel_m, const kernels::Rigid& T, const kernels::AngularGrid& g)
      : res(_mm256_set1_pd(voxel_m)),
        elev_min(_mm256_set1_pd(g.elev_min)),
        elev_span(_mm256_set1_pd(g.elev_max - g.elev_min)),
        rows(_mm256_set1_pd(double(g.rows))),
        cols(_mm256_set1_pd(double(g.cols))),
        cols_i(_mm_set1_epi32(g.cols)),
        last_col(_mm_set1_epi32(g.cols - 1)) {
    for (int k = 0; k < 9; ++k) R[k] = _mm256_set1_pd(T.R[k]);
    for (int a = 0; a < 3; ++a) t[a] = _mm256_set1_pd(T.t[a]);
  }
  __m256d res, elev_min, elev_span, rows, cols;
  __m128i cols_i, last_col;
  __m256d R[9], t[3];
};

// Four voxels' offsets from the sensor in the map frame (kernels::Project's d).
__attribute__((target("avx2"))) inline void Offsets(const maps::MapVoxel* v, const Lanes& c,
                                                    __m256d d[3]) {
  const __m256d half = _mm256_set1_pd(0.5), q_steps = _mm256_set1_pd(256.0);
  for (int a = 0; a < 3; ++a) {
    const __m256d key =
        _mm256_cvtepi32_pd(_mm_setr_epi32(v[0].key[a], v[1].key[a], v[2].key[a], v[3].key[a]));
    const __m256d q =
        _mm256_cvtepi32_pd(_mm_setr_epi32(v[0].q[a], v[1].q[a], v[2].q[a], v[3].q[a]));
    const __m256d inside = _mm256_div_pd(_mm256_add_pd(q, half), q_steps);
    d[a] = _mm256_sub_pd(_mm256_mul_pd(_mm256_add_pd(key, inside), c.res), c.t[a]);
  }
}

// Four cells from the sensor-frame points p (x, y, z) and their horizontal ranges rxy: -1 outside
// the grid. A truncation is cvttpd, which gives the same integer wherever the scalar result is
// used (cells outside the grid are -1 whatever the row's integer).
__attribute__((target("avx2"))) inline __m128i Cells(const __m256d p[3], __m256d rxy,
                                                     const Lanes& c) {
  const __m256d zero = _mm256_setzero_pd();
  const __m256d two_pi = _mm256_set1_pd(2 * M_PI), m_pi = _mm256_set1_pd(M_PI);
  const __m256d row = _mm256_mul_pd(
      _mm256_div_pd(_mm256_sub_pd(Atan2(p[2], rxy), c.elev_min), c.elev_span), c.rows);
  const __m256d col =
      _mm256_mul_pd(_mm256_div_pd(_mm256_add_pd(Atan2(p[1], p[0]), m_pi), two_pi), c.cols);
  const __m128i col_i = _mm_min_epi32(_mm256_cvttpd_epi32(col), c.last_col);
  const __m128i cell = _mm_add_epi32(_mm_mullo_epi32(_mm256_cvttpd_epi32(row), c.cols_i), col_i);
  const __m256d in =
      _mm256_and_pd(_mm256_cmp_pd(row, zero, _CMP_GE_OQ), _mm256_cmp_pd(row, c.rows, _CMP_LT_OQ));
  // The four 64-bit masks to four 32-bit ones: their low halves.
  const __m128i in_i = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
      _mm256_castpd_si256(in), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
  return _mm_or_si128(_mm_and_si128(in_i, cell), _mm_andnot_si128(in_i, _mm_set1_epi32(-1)));
}

// kernels::Project on voxels [0, n - n % 4), four at a time. Branches become selects, as they
// already are in PortableAtan2 and Project.
__attribute__((target("avx2"))) void ProjectQuads(const maps::MapVoxel* voxels, size_t n,
                                                  double voxel_m, const kernels::Rigid& T,
                                                  const kernels::AngularGrid& g, float* sensor,
                                                  double* range, int32_t* cell) {
  const Lanes c(voxel_m, T, g);
  for (size_t i = 0; i + 4 <= n; i += 4) {
    __m256d d[3], p[3];
    Offsets(voxels + i, c, d);
    // p_sensor = R^T (p_map - t).
    for (int r = 0; r < 3; ++r) {
      p[r] =
          _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(c.R[r], d[0]), _mm256_mul_pd(c.R[3 + r], d[1])),
                        _mm256_mul_pd(c.R[6 + r], d[2]));
    }
    const __m256d rxy =
        _mm256_sqrt_pd(_mm256_add_pd(_mm256_mul_pd(p[0], p[0]), _mm256_mul_pd(p[1], p[1])));
    _mm256_storeu_pd(range + i, _mm256_sqrt_pd(_mm256_add_pd(_mm256_mul_pd(rxy, rxy),
                                                             _mm256_mul_pd(p[2], p[2]))));
    float xyz[3][4];
    for (int a = 0; a < 3; ++a) _mm_storeu_ps(xyz[a], _mm256_cvtpd_ps(p[a]));
    for (int k = 0; k < 4; ++k) {
      for (int a = 0; a < 3; ++a) sensor[3 * (i + size_t(k)) + size_t(a)] = xyz[a][k];
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(cell + i), Cells(p, rxy, c));
  }
}

void Project(const maps::MapVoxel* voxels, size_t n, double voxel_m, const kernels::Rigid& T,
             const kernels::AngularGrid& grid, float* sensor, double* range, int32_t* cell) {
  ProjectQuads(voxels, n, voxel_m, T, grid, sensor, range, cell);
  const size_t done = n - n % 4;
  scalar::Project(voxels + done, n - done, voxel_m, T, grid, sensor + 3 * done, range + done,
                  cell + done);
}

// The least and second least of the eight values the lanes of least and next keep (each lane its
// least and second least): the lanes' least values taken in two pairs (lo: each pair's lesser,
// hi: its greater), the second least of the four is the lesser of lo's greater and hi's lesser;
// a lane's own second least (next) may lie below it.
__attribute__((target("avx2"))) inline void LeastTwo(__m256d least, __m256d next, double* d_best,
                                                     double* d_second) {
  const __m128d l0 = _mm256_castpd256_pd128(least), l1 = _mm256_extractf128_pd(least, 1);
  const __m128d lo = _mm_min_pd(l0, l1), hi = _mm_max_pd(l0, l1);
  const __m128d nx = _mm_min_pd(_mm256_castpd256_pd128(next), _mm256_extractf128_pd(next, 1));
  const double lo0 = _mm_cvtsd_f64(lo), lo1 = _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo));
  const double hi0 = _mm_cvtsd_f64(hi), hi1 = _mm_cvtsd_f64(_mm_unpackhi_pd(hi, hi));
  const double n0 = _mm_cvtsd_f64(nx), n1 = _mm_cvtsd_f64(_mm_unpackhi_pd(nx, nx));
  *d_best = std::min(lo0, lo1);
  *d_second = std::min(std::min(std::max(lo0, lo1), std::min(hi0, hi1)), std::min(n0, n1));
}

// The SSE2 variant's NearestAndSecond, four places at a time, for d_best within the bound.
__attribute__((target("avx2"))) inline void NearestAndSecond(const VoxelJob& job, size_t n4,
                                                             double d_best, double d_second,
                                                             int32_t* best, int32_t* second) {
  const __m256d b = _mm256_set1_pd(d_best);
  const __m256d sc = _mm256_set1_pd(d_second <= job.bound2 ? d_second : -1.0);
  uint64_t at_best = 0, at_second = 0;
  for (size_t a = 0; a < n4; a += 4) {
    const __m256d d = _mm256_loadu_pd(job.d2 + a);
    at_best |= uint64_t(_mm256_movemask_pd(_mm256_cmp_pd(d, b, _CMP_EQ_OQ))) << a;
    at_second |= uint64_t(_mm256_movemask_pd(_mm256_cmp_pd(d, sc, _CMP_EQ_OQ))) << a;
  }
  *best = job.near[__builtin_ctzll(at_best)];
  if (d_second <= job.bound2) {
    if (d_second == d_best) at_second &= at_second - 1;  // the least's first place is best's
    *second = job.near[__builtin_ctzll(at_second)];
  }
}

// The SSE2 variant four candidates at a time, one call a voxel, not a point. The n <= 64
// candidates' coordinates are padded with +1e30 to a multiple of four: those lie beyond every
// radius, and the places found are among the first n. Returns the close marks, one word.
__attribute__((target("avx2"))) uint64_t ClassifyVoxel64(const VoxelJob& job) {
  // The job's fields as locals: the stores to d2 may alias them, and would load them again.
  const size_t n4 = (job.n + 3) & ~size_t(3);
  const double *x = job.x, *y = job.y, *z = job.z;
  double* const d2 = job.d2;
  const double bound2 = job.bound2;
  const __m256d inf = _mm256_set1_pd(HUGE_VAL), vs = _mm256_set1_pd(job.select2);
  uint64_t close = 0;
  for (size_t k = 0; k < job.count; ++k) {
    const uint32_t i = job.points[k];
    const __m256d vx = _mm256_set1_pd(double(job.pts[i].x())),
                  vy = _mm256_set1_pd(double(job.pts[i].y())),
                  vz = _mm256_set1_pd(double(job.pts[i].z()));
    __m256d least = inf, next = inf;
    for (size_t a = 0; a < n4; a += 4) {
      const __m256d dx = _mm256_sub_pd(_mm256_loadu_pd(x + a), vx);
      const __m256d dy = _mm256_sub_pd(_mm256_loadu_pd(y + a), vy);
      const __m256d dz = _mm256_sub_pd(_mm256_loadu_pd(z + a), vz);
      const __m256d d = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)),
                                      _mm256_mul_pd(dz, dz));
      _mm256_storeu_pd(d2 + a, d);
      close |= uint64_t(_mm256_movemask_pd(_mm256_cmp_pd(d, vs, _CMP_LE_OQ))) << a;
      next = _mm256_min_pd(_mm256_max_pd(least, d), next);
      least = _mm256_min_pd(d, least);
    }
    double d_best, d_second;
    LeastTwo(least, next, &d_best, &d_second);
    int32_t best = -1, second = -1;
    if (d_best <= bound2) NearestAndSecond(job, n4, d_best, d_second, &best, &second);
    KeepPoint(job, i, best, second);
  }
  return close;
}

void ClassifyVoxel(const VoxelJob& job, uint64_t* close) {
  if (job.n > 64) return sse2::ClassifyVoxel(job, close);
  for (size_t a = job.n; a < ((job.n + 3) & ~size_t(3)); ++a) job.x[a] = job.y[a] = job.z[a] = 1e30;
  close[0] |= ClassifyVoxel64(job);
}

// The SSE2 key sort: AVX2 has no variant of its own.
void Classify(const CandidateSearch& search, const ClassifyRadii& radii, const ClassifyOut& out) {
  ClassifyRuns<sse2::SortPoints, ClassifyVoxel>(search, radii, out);
}

}  // namespace
}  // namespace avx2

const Kernels kAvx2Kernels = {
    "avx2",                  // name
    avx2::Project,           // project
    sse2::SortPoints,        // sort_points
    avx2::Classify,          // classify
    sse2::RingState,         // ring_state
    sse2::RingStatePlanes,   // ring_state_planes
    sse2::HorizontalRanges,  // horizontal_ranges
    sse2::FillBins,          // fill_bins
    sse2::CellKeys,          // cell_keys
};

}  // namespace dv::codec::cpu
