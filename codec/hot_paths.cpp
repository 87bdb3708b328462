#include "hot_paths.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "dejaview/base/fork_join.h"

#ifdef DEJAVIEW_HAVE_CUDA
#include "cuda/cuda_hot_paths.h"
#endif
// The AVX2 projection and classification need GCC's or clang's target attribute and an x86-64
// CPU.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DEJAVIEW_PROJECT_AVX2 1
#include <immintrin.h>
#else
#define DEJAVIEW_PROJECT_AVX2 0
#ifdef __SSE2__
#include <emmintrin.h>  // the classification's pairs of distances
#endif
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

Status IndexKeys(Backend backend, const std::vector<maps::MapVoxel>& voxels, VoxelHash* index) {
  *index = VoxelHash(voxels.size());
  if (backend == Backend::kCuda) {
#ifdef DEJAVIEW_HAVE_CUDA
    std::vector<uint64_t> packed(voxels.size());
    for (size_t i = 0; i < voxels.size(); ++i) packed[i] = PackKey(voxels[i].key);
    const kernels::HashView v = index->view();
    DV_RETURN_IF_ERROR(cuda::IndexKeys(packed.data(), packed.size(), index->slots(), v.shift,
                                       index->keys_data(), index->values_data()));
    index->set_size(voxels.size());
    return Status::Ok();
#else
    return NoCuda();
#endif
  }
  for (size_t i = 0; i < voxels.size(); ++i) index->Insert(PackKey(voxels[i].key), int32_t(i));
  return Status::Ok();
}

std::vector<int32_t> VoxelKeys(const std::vector<maps::MapVoxel>& voxels) {
  std::vector<int32_t> keys(3 * voxels.size());
  for (size_t j = 0; j < voxels.size(); ++j) {
    std::copy(voxels[j].key.data(), voxels[j].key.data() + 3, &keys[3 * j]);
  }
  return keys;
}

#ifdef __SSE2__
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
#endif

namespace {

// Where the classification leaves each point's result (ClassifyPoints).
struct VoxelOut {
  int32_t* point_nearest;
  int32_t* point_second;
  uint8_t* nearest;   // the candidates' marks
  uint8_t* near_out;  // null: no first gap test
};
// Point i's nearest and second (-1: none), from its distances d2 to the voxel's n candidates.
inline void KeepPoint(const VoxelOut& out, uint32_t i, int32_t best, int32_t second,
                      const double* d2, size_t n, double near2) {
  if (best >= 0) {
    out.nearest[size_t(best)] = 1;
  } else if (out.near_out) {
    // The first gap test's, on what is already here: most of its points end it here.
    uint8_t any = 0;
    for (size_t a = 0; a < n; ++a) any |= uint8_t(d2[a] <= near2);
    out.near_out[i] = any;
  }
  out.point_nearest[i] = best;
  out.point_second[i] = second;
}

}  // namespace

#if DEJAVIEW_PROJECT_AVX2
namespace {

// The classification of one voxel's points on an AVX2 CPU: ClassifyPoints' SSE2 loop four
// candidates at a time, the same IEEE operations lane by lane (this target has no FMA to
// contract into), so the same nearest, second, marks and flags (the classification 10.2 -> 9.35
// ms a frame, KITTI 00 at T = 0.12). One call a voxel, not a point. The n candidates'
// coordinates (x, y, z) are padded with +1e30 to a multiple of four: those lie beyond every
// radius, and the places found are among the first n. n <= 64: the close marks fit one word.
__attribute__((target("avx2"))) uint64_t ClassifyVoxelAvx2(
    const double* x, const double* y, const double* z, double* d2, size_t n, const int32_t* near,
    const uint32_t* points, size_t count, const Eigen::Vector3f* pts, double bound2, double select2,
    double near2, const VoxelOut& out) {
  const size_t n4 = (n + 3) & ~size_t(3);
  const __m256d inf = _mm256_set1_pd(HUGE_VAL), vs = _mm256_set1_pd(select2);
  uint64_t close = 0;
  for (size_t k = 0; k < count; ++k) {
    const uint32_t i = points[k];
    const __m256d vx = _mm256_set1_pd(double(pts[i].x())), vy = _mm256_set1_pd(double(pts[i].y())),
                  vz = _mm256_set1_pd(double(pts[i].z()));
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
    // The least of all, and the second least: the lanes' least values taken in two pairs (lo:
    // each pair's lesser, hi: its greater), the second least of the four is the lesser of lo's
    // greater and hi's lesser; a lane's own second least (next) may lie below it.
    const __m128d l0 = _mm256_castpd256_pd128(least), l1 = _mm256_extractf128_pd(least, 1);
    const __m128d lo = _mm_min_pd(l0, l1), hi = _mm_max_pd(l0, l1);
    const __m128d nx = _mm_min_pd(_mm256_castpd256_pd128(next), _mm256_extractf128_pd(next, 1));
    const double lo0 = _mm_cvtsd_f64(lo), lo1 = _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo));
    const double hi0 = _mm_cvtsd_f64(hi), hi1 = _mm_cvtsd_f64(_mm_unpackhi_pd(hi, hi));
    const double n0 = _mm_cvtsd_f64(nx), n1 = _mm_cvtsd_f64(_mm_unpackhi_pd(nx, nx));
    const double d_best = std::min(lo0, lo1);
    const double d_second =
        std::min(std::min(std::max(lo0, lo1), std::min(hi0, hi1)), std::min(n0, n1));
    int32_t best = -1, second = -1;
    if (d_best <= bound2) {
      // NearestAndSecond, four places at a time.
      const __m256d b = _mm256_set1_pd(d_best);
      const __m256d sc = _mm256_set1_pd(d_second <= bound2 ? d_second : -1.0);
      uint64_t at_best = 0, at_second = 0;
      for (size_t a = 0; a < n4; a += 4) {
        const __m256d d = _mm256_loadu_pd(d2 + a);
        at_best |= uint64_t(_mm256_movemask_pd(_mm256_cmp_pd(d, b, _CMP_EQ_OQ))) << a;
        at_second |= uint64_t(_mm256_movemask_pd(_mm256_cmp_pd(d, sc, _CMP_EQ_OQ))) << a;
      }
      best = near[__builtin_ctzll(at_best)];
      if (d_second <= bound2) {
        if (d_second == d_best) at_second &= at_second - 1;  // the least's first place is best's
        second = near[__builtin_ctzll(at_second)];
      }
    }
    KeepPoint(out, i, best, second, d2, n, near2);
  }
  return close;
}

}  // namespace
#endif

Status ClassifyPoints(Backend backend, const std::vector<Eigen::Vector3f>& pts,
                      const kernels::Rigid& T_map_sensor, const SortedGrid* grid,
                      [[maybe_unused]] const VoxelHash* index,
                      const std::vector<Eigen::Vector3f>& candidate_sensor, double voxel_m, int nb,
                      double bound2, double select2, std::vector<uint8_t>* explained,
                      CandidateMarks* marks, int threads, double near2,
                      std::vector<uint8_t>* near_out) {
  explained->assign(pts.size(), 0);
  if (near_out) near_out->assign(pts.size(), 0);
  for (std::vector<uint8_t>* m : {&marks->nearest, &marks->close}) {
    m->assign(candidate_sensor.size(), 0);
  }
  marks->point_nearest.assign(pts.size(), -1);
  marks->point_second.assign(pts.size(), -1);
  if (backend == Backend::kCuda) {
#ifdef DEJAVIEW_HAVE_CUDA
    if (!index) return Status::InvalidArgument("classify: the CUDA backend needs the voxel hash");
    return cuda::ClassifyPoints(Floats(pts), pts.size(), T_map_sensor, index->view(),
                                index->slots(), Floats(candidate_sensor), candidate_sensor.size(),
                                voxel_m, nb, bound2, select2, explained->data(),
                                marks->nearest.data(), marks->close.data(),
                                marks->point_nearest.data(), marks->point_second.data());
#else
    return NoCuda();
#endif
  }
  if (!grid || grid->max_nb() < nb) {
    return Status::InvalidArgument("classify: the CPU needs a sorted grid of max_nb >= " +
                                   std::to_string(nb));
  }
  const float* sensor = Floats(candidate_sensor);
  // A candidate near two runs' points is marked by both: each run past the first marks its own
  // copies (made by the run itself, for the runs the grid makes), ORed into the caller's after.
  // Per point, every run writes its own points only.
  const int runs = std::max(threads, 1);
  std::vector<CandidateMarks> own(size_t(runs - 1));
  // The points of a voxel share its candidates: their coordinates are laid out once a voxel, and
  // the distances to each point are taken in one loop the compiler vectorises (the same double
  // operations, so the same bits). Only the few within the bound (2.6 of 10 a point, KITTI 00 at
  // T = 0.1) count for the nearest and second (below), not a branch on each; the close marks are
  // ORed over a voxel's points as bits and stored once a voxel, not once a point (SelectOne's
  // marks, and its nearest and second, which lie within the bound).
  struct Scratch {
    std::vector<double> x, y, z, d2;
    std::vector<uint64_t> close;
  };
  std::vector<Scratch> scratch(static_cast<size_t>(runs));
#if DEJAVIEW_PROJECT_AVX2
  const bool avx2 = CpuHasAvx2();
#endif
  ForEachPointVoxel(
      pts, T_map_sensor, *grid, voxel_m, nb, runs,
      [&](int r, const uint32_t* points, size_t count, const SortedGrid::Items& near) {
        CandidateMarks& m = r == 0 ? *marks : own[size_t(r - 1)];
        if (m.nearest.empty()) {
          for (std::vector<uint8_t>* v : {&m.nearest, &m.close}) {
            v->assign(candidate_sensor.size(), 0);
          }
        }
        Scratch& s = scratch[size_t(r)];
        const size_t n = near.size(), words = (n + 63) / 64;
        if (s.x.size() < n + 3) {
          for (std::vector<double>* v : {&s.x, &s.y, &s.z, &s.d2}) v->resize(n + 3);
        }
        double* const x = s.x.data();
        double* const y = s.y.data();
        double* const z = s.z.data();
        double* const d2 = s.d2.data();
        for (size_t a = 0; a < n; ++a) {
          const float* c = sensor + 3 * size_t(near[a]);
          x[a] = double(c[0]);
          y[a] = double(c[1]);
          z[a] = double(c[2]);
        }
        const VoxelOut out{marks->point_nearest.data(), marks->point_second.data(),
                           m.nearest.data(), near_out ? near_out->data() : nullptr};
#if DEJAVIEW_PROJECT_AVX2
        if (avx2 && n <= 64) {
          for (size_t a = n; a < ((n + 3) & ~size_t(3)); ++a) x[a] = y[a] = z[a] = 1e30;
          const uint64_t close = ClassifyVoxelAvx2(x, y, z, d2, n, near.data(), points, count,
                                                   pts.data(), bound2, select2, near2, out);
          for (uint64_t b = close; b != 0; b &= b - 1) {
            m.close[size_t(near[size_t(__builtin_ctzll(b))])] = 1;
          }
          return;
        }
#endif
        s.close.assign(words, 0);
        for (size_t k = 0; k < count; ++k) {
          const uint32_t i = points[k];
          const double px = double(pts[i].x()), py = double(pts[i].y()), pz = double(pts[i].z());
          int32_t best = -1, second = -1;
#ifdef __SSE2__
          // The nearest and second (KeepNearest's: the first among equals, in item order) from
          // the least and second least distance within the bound, kept lane by lane as the
          // distances are taken, then found by position. KeepNearestWithin per candidate within
          // the bound was a chain of dependent selects, 8.3 a point at T = 0.3 (KITTI 00).
          // The distances within the bound are the least of all, so the least and second least
          // of all are theirs where they lie within it: the lanes keep those with no test of the
          // bound, and NearestAndSecond is told which do (3 instructions fewer a pair; a NaN
          // distance, which finite points never give, would change neither: minpd and maxpd give
          // their second operand then).
          const __m128d inf = _mm_set1_pd(HUGE_VAL);
          __m128d least = inf, next = inf;
          auto keep = [&](__m128d d) {
            next = _mm_min_pd(_mm_max_pd(least, d), next);
            least = _mm_min_pd(d, least);
          };
#else
          // The nearest and second by kernels::KeepNearestWithin, on the distances' bits.
          uint64_t best_d2 = 0, second_d2 = 0;
          std::memcpy(&best_d2, &bound2, 8);
          second_d2 = best_d2;
#endif
          // The distances (kernels::Dist2's operations, in its order), and which are within the
          // selection radius (and, on the portable path, the bound), as bits: a branch per
          // candidate mispredicted on most of those that were.
          for (size_t w = 0; w < words; ++w) {
            const size_t base = 64 * w, end = std::min(n, base + 64);
            uint64_t in_select = 0;
#ifndef __SSE2__
            uint64_t in_bound = 0;
#endif
            size_t a = base;
#ifdef __SSE2__
            // Two at a time, the same IEEE operations lane by lane, the masks by movmskpd: the
            // scalar compare-and-shift per candidate was most of this loop (KITTI 00, T = 0.2).
            const __m128d vx = _mm_set1_pd(px), vy = _mm_set1_pd(py), vz = _mm_set1_pd(pz);
            const __m128d vs = _mm_set1_pd(select2);
            for (; a + 2 <= end; a += 2) {
              const __m128d dx = _mm_sub_pd(_mm_loadu_pd(x + a), vx);
              const __m128d dy = _mm_sub_pd(_mm_loadu_pd(y + a), vy);
              const __m128d dz = _mm_sub_pd(_mm_loadu_pd(z + a), vz);
              const __m128d d = _mm_add_pd(_mm_add_pd(_mm_mul_pd(dx, dx), _mm_mul_pd(dy, dy)),
                                           _mm_mul_pd(dz, dz));
              _mm_storeu_pd(d2 + a, d);
              in_select |= uint64_t(_mm_movemask_pd(_mm_cmple_pd(d, vs))) << (a - base);
              keep(d);
            }
#endif
            for (; a < end; ++a) {
              const double dx = x[a] - px, dy = y[a] - py, dz = z[a] - pz;
              d2[a] = dx * dx + dy * dy + dz * dz;
              in_select |= uint64_t(d2[a] <= select2) << (a - base);
#ifdef __SSE2__
              // Lane 0 only: lane 1 stays as it was (+infinity changes neither).
              keep(_mm_set_pd(HUGE_VAL, d2[a]));
#else
              in_bound |= uint64_t(d2[a] <= bound2) << (a - base);
#endif
            }
            s.close[w] |= in_select;
#ifndef __SSE2__
            for (; in_bound != 0; in_bound &= in_bound - 1) {
              const size_t c = base + size_t(__builtin_ctzll(in_bound));
              uint64_t d;
              std::memcpy(&d, &d2[c], 8);
              kernels::KeepNearestWithin(near[c], d, &best, &best_d2, &second, &second_d2);
            }
#endif
          }
#ifdef __SSE2__
          const double l0 = _mm_cvtsd_f64(least), l1 = _mm_cvtsd_f64(_mm_unpackhi_pd(least, least));
          const double n0 = _mm_cvtsd_f64(next), n1 = _mm_cvtsd_f64(_mm_unpackhi_pd(next, next));
          const double d_best = std::min(l0, l1);
          const double d_second = std::min(std::max(l0, l1), std::min(n0, n1));
          if (d_best <= bound2) {
            NearestAndSecond(d2, near.data(), n, d_best, d_second <= bound2 ? d_second : -1.0,
                             &best, &second);
          }
#endif
          KeepPoint(out, i, best, second, d2, n, near2);
        }
        for (size_t w = 0; w < words; ++w) {
          for (uint64_t b = s.close[w]; b != 0; b &= b - 1) {
            m.close[size_t(near[64 * w + size_t(__builtin_ctzll(b))])] = 1;
          }
        }
      });
  // Each point's flag from its nearest, in order: written in the pass, it was a third scattered
  // store a point.
  for (size_t i = 0; i < pts.size(); ++i) (*explained)[i] = marks->point_nearest[i] >= 0;
  for (const CandidateMarks& m : own) {
    if (m.nearest.empty()) continue;  // a run the grid did not make
    for (size_t j = 0; j < candidate_sensor.size(); ++j) {
      marks->nearest[j] |= m.nearest[j];
      marks->close[j] |= m.close[j];
    }
  }
  return Status::Ok();
}

Status MarkNearCandidates(Backend backend, const std::vector<Eigen::Vector3f>& pts,
                          const kernels::Rigid& T_map_sensor, const SortedGrid* grid,
                          [[maybe_unused]] const VoxelHash* index,
                          const std::vector<Eigen::Vector3f>& candidate_sensor, double voxel_m,
                          int nb, double bound2, std::vector<uint8_t>* near, int threads,
                          const std::vector<uint8_t>* known) {
  if (known) {
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
    std::vector<uint8_t> rest_near;
    DV_RETURN_IF_ERROR(MarkNearCandidates(backend, rest, T_map_sensor, grid, index,
                                          candidate_sensor, voxel_m, nb, bound2, &rest_near,
                                          threads));
    // A known point is marked as the search would mark it: only where its key leaves room for
    // nb voxels around it (ClassifyPoints' smaller nb leaves room at keys where this one does not).
    near->assign(pts.size(), 0);
    for (size_t i = 0; i < pts.size(); ++i) {
      if (!(*known)[i]) continue;
      const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
      int32_t k[3];
      (*near)[i] = kernels::NeighbourhoodKey(T_map_sensor, p, voxel_m, nb, k);
    }
    for (size_t k = 0; k < from.size(); ++k) (*near)[from[k]] = rest_near[k];
    return Status::Ok();
  }
  near->assign(pts.size(), 0);
  if (backend == Backend::kCuda) {
#ifdef DEJAVIEW_HAVE_CUDA
    if (!index) return Status::InvalidArgument("near candidates: the CUDA backend needs the hash");
    return cuda::MarkNearCandidates(Floats(pts), pts.size(), T_map_sensor, index->view(),
                                    index->slots(), Floats(candidate_sensor),
                                    candidate_sensor.size(), voxel_m, nb, bound2, near->data());
#else
    return NoCuda();
#endif
  }
  if (!grid || grid->max_nb() < nb) {
    return Status::InvalidArgument("near candidates: the CPU needs a sorted grid of max_nb >= " +
                                   std::to_string(nb));
  }
  const float* sensor = Floats(candidate_sensor);
  // Neighbouring points are mostly near the same candidate: the last one found (by the run) is
  // tried first.
  std::vector<int32_t> last_hit(size_t(std::max(threads, 1)), -1);
  ForEachPointNeighbourhood(
      pts, T_map_sensor, *grid, voxel_m, nb, threads,
      [&](int r, uint32_t i, const SortedGrid::Items& around) {
        const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
        int32_t& last = last_hit[size_t(r)];
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
      });
  return Status::Ok();
}

#if DEJAVIEW_PROJECT_AVX2
namespace {

// maps::PortableAtan2, four lanes.
__attribute__((target("avx2"))) inline __m256d Atan2Avx2(__m256d y, __m256d x) {
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

// kernels::Project on voxels [0, n - n % 4), four at a time: the same IEEE operations in the same
// order, lane by lane, and no FMA (this target has none), so every bit is the scalar code's.
// Branches become selects, as they already are in PortableAtan2 and Project; a truncation is
// cvttpd, which gives the same integer wherever the scalar result is used (cells outside the
// grid are -1 whatever the row's integer).
__attribute__((target("avx2"))) void ProjectAvx2(const maps::MapVoxel* voxels, size_t n,
                                                 double voxel_m, const kernels::Rigid& T,
                                                 const kernels::AngularGrid& g, float* sensor,
                                                 double* range, int32_t* cell) {
  const __m256d half = _mm256_set1_pd(0.5), q_steps = _mm256_set1_pd(256.0);
  const __m256d res = _mm256_set1_pd(voxel_m), zero = _mm256_setzero_pd();
  const __m256d elev_min = _mm256_set1_pd(g.elev_min);
  const __m256d elev_span = _mm256_set1_pd(g.elev_max - g.elev_min);
  const __m256d rows = _mm256_set1_pd(double(g.rows)), cols = _mm256_set1_pd(double(g.cols));
  const __m256d two_pi = _mm256_set1_pd(2 * M_PI), m_pi = _mm256_set1_pd(M_PI);
  const __m128i cols_i = _mm_set1_epi32(g.cols), last_col = _mm_set1_epi32(g.cols - 1);
  __m256d R[9], t[3];
  for (int k = 0; k < 9; ++k) R[k] = _mm256_set1_pd(T.R[k]);
  for (int a = 0; a < 3; ++a) t[a] = _mm256_set1_pd(T.t[a]);
  for (size_t i = 0; i + 4 <= n; i += 4) {
    const maps::MapVoxel* v = voxels + i;
    __m256d d[3];
    for (int a = 0; a < 3; ++a) {
      const __m256d key =
          _mm256_cvtepi32_pd(_mm_setr_epi32(v[0].key[a], v[1].key[a], v[2].key[a], v[3].key[a]));
      const __m256d q =
          _mm256_cvtepi32_pd(_mm_setr_epi32(v[0].q[a], v[1].q[a], v[2].q[a], v[3].q[a]));
      const __m256d inside = _mm256_div_pd(_mm256_add_pd(q, half), q_steps);
      d[a] = _mm256_sub_pd(_mm256_mul_pd(_mm256_add_pd(key, inside), res), t[a]);
    }
    __m256d p[3];
    for (int r = 0; r < 3; ++r) {
      p[r] = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(R[r], d[0]), _mm256_mul_pd(R[3 + r], d[1])),
                           _mm256_mul_pd(R[6 + r], d[2]));
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
    const __m256d row = _mm256_mul_pd(
        _mm256_div_pd(_mm256_sub_pd(Atan2Avx2(p[2], rxy), elev_min), elev_span), rows);
    const __m256d col =
        _mm256_mul_pd(_mm256_div_pd(_mm256_add_pd(Atan2Avx2(p[1], p[0]), m_pi), two_pi), cols);
    const __m128i col_i = _mm_min_epi32(_mm256_cvttpd_epi32(col), last_col);
    const __m128i c = _mm_add_epi32(_mm_mullo_epi32(_mm256_cvttpd_epi32(row), cols_i), col_i);
    const __m256d in =
        _mm256_and_pd(_mm256_cmp_pd(row, zero, _CMP_GE_OQ), _mm256_cmp_pd(row, rows, _CMP_LT_OQ));
    // The four 64-bit masks to four 32-bit ones: their low halves.
    const __m128i in_i = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
        _mm256_castpd_si256(in), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(cell + i),
        _mm_or_si128(_mm_and_si128(in_i, c), _mm_andnot_si128(in_i, _mm_set1_epi32(-1))));
  }
}

}  // namespace
#endif

namespace {
std::atomic<bool> avx2_allowed{true};
}  // namespace

bool CpuHasAvx2() {
#if DEJAVIEW_PROJECT_AVX2
  static const bool has = __builtin_cpu_supports("avx2");
  return has && avx2_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void AllowAvx2(bool allow) { avx2_allowed.store(allow, std::memory_order_relaxed); }

void ProjectCpu(const maps::MapVoxel* voxels, size_t n, double voxel_m, const kernels::Rigid& T,
                const kernels::AngularGrid& grid, bool avx2, float* sensor, double* range,
                int32_t* cell) {
  size_t i = 0;
#if DEJAVIEW_PROJECT_AVX2
  if (avx2) {
    ProjectAvx2(voxels, n, voxel_m, T, grid, sensor, range, cell);
    i = n - n % 4;
  }
#else
  (void)avx2;
#endif
  for (; i < n; ++i) {
    kernels::VoxelRecord v;
    std::memcpy(&v, &voxels[i], sizeof(v));
    kernels::Project(v, voxel_m, T.R, T.t, grid, sensor + 3 * i, &range[i], &cell[i]);
  }
}

Status ProjectCandidates(Backend backend, const std::vector<maps::MapVoxel>& voxels, double voxel_m,
                         const Eigen::Matrix3d& R_map_sensor, const Eigen::Vector3d& t_map_sensor,
                         const kernels::AngularGrid& grid, Projection* out, int threads) {
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
  // Voxel by voxel: runs of them on threads of their own give the same bits.
  const bool avx2 = CpuHasAvx2();
  const int runs =
      int(std::max<size_t>(1, std::min(size_t(std::max(threads, 1)), n / kMinProjectRun)));
  ForkJoin(runs, [&](int r) {
    const size_t begin = n * size_t(r) / size_t(runs), end = n * size_t(r + 1) / size_t(runs);
    ProjectCpu(voxels.data() + begin, end - begin, voxel_m, T, grid, avx2,
               Floats(out->sensor) + 3 * begin, out->range.data() + begin,
               out->cell.data() + begin);
  });
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
    Backend backend, const std::vector<Eigen::Vector3d>& map_pts,
    const std::vector<maps::MapVoxel>& fine_voxels, const VoxelHash& fine_index,
    double fine_voxel_m, double coarse_voxel_m, int coarse_per_cell, int coarse_levels,
    const SortedGrid* fine_grid) {
  std::unique_ptr<CorrespondenceSearch> s(new CorrespondenceSearch());
  s->map_pts_ = &map_pts;
  s->fine_index_ = &fine_index;
  s->fine_voxel_m_ = fine_voxel_m;
  s->coarse_voxel_m_ = coarse_voxel_m;
  s->per_cell_ = coarse_per_cell;
  const size_t first = fine_voxels.size();
  if (first > map_pts.size()) return Status::InvalidArgument("correspondences: too few map points");
  s->coarse_first_ = first;
  if (backend == Backend::kCpu) {
    if (fine_grid == nullptr || fine_grid->max_nb() < 1) {
      s->own_fine_grid_ = std::make_unique<SortedGrid>(VoxelKeys(fine_voxels), 1, 0);
      fine_grid = s->own_fine_grid_.get();
    }
    s->fine_grid_ = fine_grid;
    std::vector<int32_t> keys(3 * (map_pts.size() - first));
    for (int level = 0; level <= coarse_levels; ++level) {
      const double voxel_m = std::ldexp(coarse_voxel_m, -level);
      for (size_t i = first; i < map_pts.size(); ++i) {
        const maps::VoxelKey k = maps::KeyOf(map_pts[i], voxel_m);
        std::copy(k.data(), k.data() + 3, &keys[3 * (i - first)]);
      }
      s->coarse_grids_.push_back(
          std::make_unique<SortedGrid>(keys, 1, level == 0 ? coarse_per_cell : 0));
    }
    return s;
  }
#ifdef DEJAVIEW_HAVE_CUDA
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
  s->device_ = std::make_unique<Device>();
  DV_ASSIGN_OR_RETURN(
      s->device_->search,
      cuda::Search::Create(map_pts.empty() ? nullptr : map_pts[0].data(), map_pts.size(),
                           s->Grid(true), fine_index.slots(), s->Grid(false),
                           s->coarse_hash_->slots(), s->coarse_cells_.size() / stride));
  return s;
#else
  return NoCuda();
#endif
}

#ifdef DEJAVIEW_HAVE_CUDA
kernels::NeighbourGrid CorrespondenceSearch::Grid(bool fine) const {
  if (fine) return {fine_index_->view(), fine_voxel_m_, nullptr, 0};
  return {coarse_hash_->view(), coarse_voxel_m_, coarse_cells_.data(), per_cell_};
}
#endif

Status CorrespondenceSearch::Find(const std::vector<Eigen::Vector3d>& source,
                                  const kernels::Rigid& T, bool fine, double max_d2,
                                  std::vector<int32_t>* best, NeighbourhoodCache* cache) const {
  best->assign(source.size(), -1);
#ifdef DEJAVIEW_HAVE_CUDA
  if (device_) {
    return device_->search->Find(source.empty() ? nullptr : source[0].data(), source.size(), T,
                                 fine, max_d2, best->data());
  }
#endif
  // kernels::Nearest's rule over the sorted grid: the nearest closer than sqrt(max_d2) in the 27
  // voxels around, the lowest index among equals.
  int level = 0;
  while (!fine && level + 1 < int(coarse_grids_.size()) &&
         std::ldexp(coarse_voxel_m_, -(level + 1)) >= std::sqrt(max_d2)) {
    ++level;
  }
  const SortedGrid& grid = fine ? *fine_grid_ : *coarse_grids_[size_t(level)];
  const double voxel_m = fine ? fine_voxel_m_ : std::ldexp(coarse_voxel_m_, -level);
  std::vector<double> moved(3 * source.size());
  std::vector<int32_t> keys(3 * source.size());
  std::vector<uint8_t> valid(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    double* p = &moved[3 * i];
    kernels::Transform(T, source[i].data(), p);
    bool ok = true;
    for (int a = 0; a < 3; ++a) ok = ok && std::abs(p[a] / voxel_m) < double(kPackBias);
    if (ok) kernels::KeyOf(p, voxel_m, &keys[3 * i]);
    valid[i] = ok;
  }
  // The coarse grid's items count from the first coarse point.
  const size_t base = fine ? 0 : coarse_first_;
  const double* map = map_pts_->size() > base ? (*map_pts_)[base].data() : nullptr;
  const int32_t offset = fine ? 0 : int32_t(coarse_first_);
  auto nearest = [&](uint32_t i, const SortedGrid::Items& near) {
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
  };
  // The coarsest grid's neighbourhoods hold dozens of centroids a cell: copying them into a cache
  // saved less than it cost (registration 0.4 ms a frame faster with them, 0.9 without; KITTI 00
  // at T = 0.1).
  if (!fine && level == 0) {
    // Dozens of centroids in each of the 27 cells (168 a query on KITTI 00), read in place: the
    // query's own column of cells first, then only the columns whose nearest side is nearer than
    // the best so far (the others hold no nearer centroid, nor an equal one: the sides are taken
    // a micrometre nearer than they are, against rounding). The same result as `nearest`, the
    // least (distance, index), which does not depend on the order; registration 7.9 -> 6.9 ms a
    // frame (KITTI 00, T = 0.2). Gathered into a list, pruned voxel by voxel (its own z too), it
    // took longer than before: the copies were the cost, not the distances.
    grid.ForEachQueryRuns(
        keys, valid, 1, [&](uint32_t i, const std::vector<SortedGrid::Run>& runs) {
          const double* p = &moved[3 * size_t(i)];
          const int32_t* k = &keys[3 * size_t(i)];
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
          (*best)[i] = bi < 0 ? -1 : bi + offset;
        });
    return Status::Ok();
  }
  if (!cache) {
    grid.ForEachQuery(keys, valid, 1, nearest);
    return Status::Ok();
  }
  // The points whose key is new look their neighbourhood up (none where the grid's pass lists
  // no items around them), then every valid point takes its nearest from the cache.
  NeighbourhoodCache& c = *cache;
  if (c.known_.size() != source.size() || c.grid_ != &grid) {
    c.grid_ = &grid;
    c.keys_.assign(3 * source.size(), 0);
    c.known_.assign(source.size(), 0);
    c.items_.assign(source.size(), {});
  }
  std::vector<uint8_t> changed(source.size(), 0);
  for (size_t i = 0; i < source.size(); ++i) {
    if (!valid[i]) continue;
    const int32_t* k = &keys[3 * i];
    int32_t* was = &c.keys_[3 * i];
    if (c.known_[i] && k[0] == was[0] && k[1] == was[1] && k[2] == was[2]) continue;
    changed[i] = 1;
    ++c.looked_up_;
    std::copy(k, k + 3, was);
    c.known_[i] = 1;
    c.items_[i].clear();
  }
  grid.ForEachQuery(keys, changed, 1, [&](uint32_t i, const SortedGrid::Items& near) {
    c.items_[i].assign(near.begin(), near.end());
  });
  for (size_t i = 0; i < source.size(); ++i) {
    if (valid[i]) nearest(uint32_t(i), SortedGrid::Items(c.items_[i].data(), c.items_[i].size()));
  }
  return Status::Ok();
}

}  // namespace dv::codec
