// The SSE2 steps that the SSE2 variants (cpu/sse2.cpp) inline into their loops and the tests
// check on their own. x86-64 only: include it where SSE2 is (sse2.cpp; tests under __SSE2__).
#pragma once

#include <emmintrin.h>

#include <Eigen/Core>
#include <cstdint>

#include "hot_kernels.h"

namespace dv::codec::cpu::sse2 {

// maps::BoundedFloor of two doubles, as two int32 lanes (the low two): truncated, then one less
// where that is above the value (INT_MIN where a value is out of int's range or NaN).
inline __m128i BoundedFloor2(__m128d v) {
  const __m128i i = _mm_cvttpd_epi32(v);
  const __m128i above = _mm_castpd_si128(_mm_cmpgt_pd(_mm_cvtepi32_pd(i), v));
  return _mm_add_epi32(i, _mm_shuffle_epi32(above, _MM_SHUFFLE(2, 0, 2, 0)));
}

// kernels::NeighbourhoodKey of points a and b at once, lane by lane the same IEEE operations in
// the same order (Transform's products and sums, KeyOf's quotient, KeyFloor's clamp, truncation
// and correction): the keys at k[0..2] and k[3..5], whether each fits as bits 0 and 1. Inline:
// the key sort (SortPoints) makes one a pair of frame points, and the quotients were most of the
// classification's key work (three divisions a point; two lanes a division here).
inline unsigned NeighbourhoodKeys2(const kernels::Rigid& T, const Eigen::Vector3f& a,
                                   const Eigen::Vector3f& b, double voxel_m, int32_t nb,
                                   int32_t k[6]) {
  const __m128d p[3] = {_mm_setr_pd(double(a.x()), double(b.x())),
                        _mm_setr_pd(double(a.y()), double(b.y())),
                        _mm_setr_pd(double(a.z()), double(b.z()))};
  const __m128d v = _mm_set1_pd(voxel_m), lo = _mm_set1_pd(-double(1 << 30)),
                hi = _mm_set1_pd(double(1 << 30));
  alignas(16) int32_t lanes[3][4];
  for (int r = 0; r < 3; ++r) {
    const __m128d q =
        _mm_add_pd(_mm_add_pd(_mm_add_pd(_mm_mul_pd(_mm_set1_pd(T.R[3 * r]), p[0]),
                                         _mm_mul_pd(_mm_set1_pd(T.R[3 * r + 1]), p[1])),
                              _mm_mul_pd(_mm_set1_pd(T.R[3 * r + 2]), p[2])),
                   _mm_set1_pd(T.t[r]));
    // KeyFloor: maxpd gives its second operand where the first is NaN, so NaN clamps to -2^30.
    const __m128d c = _mm_min_pd(_mm_max_pd(_mm_div_pd(q, v), lo), hi);
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes[r]), BoundedFloor2(c));
  }
  for (int r = 0; r < 3; ++r) {
    k[r] = lanes[r][0];
    k[3 + r] = lanes[r][1];
  }
  return unsigned(kernels::KeyFits(k, nb)) | unsigned(kernels::KeyFits(k + 3, nb)) << 1;
}

}  // namespace dv::codec::cpu::sse2
