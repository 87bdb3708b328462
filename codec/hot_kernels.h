// The per-element work of the encoder's hot paths (hot_paths.h) as inline functions on plain
// arrays. The CPU loops and the CUDA kernels (codec/cuda) call these same functions, so both
// backends compute the same bits (dejaview/base/host_device.h); sums are written out in one fixed
// order, left to right. No Eigen here: nvcc compiles this header as it is.
#pragma once

#include <cmath>
#include <cstdint>

#include "dejaview/base/host_device.h"
#include "dejaview/maps/key_floor.h"
#include "dejaview/maps/portable_atan2.h"

namespace dv::codec::kernels {

// Keys pack into 21 bits per axis (keys within +-2^20).
constexpr int32_t kPackBias = 1 << 20;

DV_HOST_DEVICE inline uint64_t PackKey(int32_t x, int32_t y, int32_t z) {
  return uint64_t(x + kPackBias) << 42 | uint64_t(y + kPackBias) << 21 | uint64_t(z + kPackBias);
}

// Whether |k| + margin < kPackBias - 2 on every axis (written without abs, which overflows at
// INT32_MIN).
DV_HOST_DEVICE inline bool KeyFits(const int32_t k[3], int32_t margin) {
  const int32_t lim = kPackBias - 2 - margin;
  // -lim < k < lim as one unsigned compare an axis (k >= -2^30: no overflow), not a chain of
  // branches per frame point in the classification's loop.
  const uint32_t to = uint32_t(2 * lim - 2);
  return (uint32_t(k[0] + lim - 1) <= to) & (uint32_t(k[1] + lim - 1) <= to) &
         (uint32_t(k[2] + lim - 1) <= to);
}

// maps::KeyOf's rule: a far point's key is clamped and then fails KeyFits.
DV_HOST_DEVICE inline void KeyOf(const double p[3], double voxel_m, int32_t k[3]) {
  for (int a = 0; a < 3; ++a) k[a] = maps::KeyFloor(p[a] / voxel_m);
}

// The storage of a VoxelHash (voxel_hash.h), as the device reads it after a byte copy.
constexpr uint64_t kEmptyKey = ~uint64_t(0);
struct HashView {
  const uint64_t* keys;
  const int32_t* values;
  uint64_t mask;
  int32_t shift;
};

// Runs of 8 consecutive z share a hashed base and sit in one cache line: the neighbour loops
// probe (x, y, z-1..z+1) together. Fibonacci hashing keeps the product's top bits, which depend
// on every bit of the key.
DV_HOST_DEVICE inline uint64_t HashSlot(uint64_t key, int32_t shift, uint64_t mask) {
  return ((((key >> 3) * 0x9E3779B97F4A7C15ull) >> shift) << 3 | (key & 7)) & mask;
}

DV_HOST_DEVICE inline int32_t HashFind(const HashView& h, uint64_t key) {
  uint64_t i = HashSlot(key, h.shift, h.mask);
  while (h.keys[i] != kEmptyKey) {
    if (h.keys[i] == key) return h.values[i];
    i = (i + 1) & h.mask;
  }
  return -1;
}

// q = R p + t, R row-major.
struct Rigid {
  double R[9];
  double t[3];
};

DV_HOST_DEVICE inline void Transform(const Rigid& T, const double p[3], double q[3]) {
  for (int r = 0; r < 3; ++r) {
    q[r] = T.R[3 * r] * p[0] + T.R[3 * r + 1] * p[1] + T.R[3 * r + 2] * p[2] + T.t[r];
  }
}

DV_HOST_DEVICE inline double Dist2(const double a[3], const double b[3]) {
  const double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
  return dx * dx + dy * dy + dz * dz;
}

// ---- Classification (encoder.cpp DeltaEncoder::Classify): is a frame point explained by a
// candidate voxel?

// The key of p's voxel in the map frame; false when the (2 nb + 1)^3 neighbourhood around it
// leaves the key range (the point is then a residual).
DV_HOST_DEVICE inline bool NeighbourhoodKey(const Rigid& T_map_sensor, const double p[3],
                                            double voxel_m, int32_t nb, int32_t k[3]) {
  double q[3];
  Transform(T_map_sensor, p, q);
  KeyOf(q, voxel_m, k);
  return KeyFits(k, nb);
}

// Whether candidate j's decoded representative (sensor frame) lies within sqrt(bound2) of p.
DV_HOST_DEVICE inline bool Explains(const float* sensor, int32_t j, const double p[3],
                                    double bound2) {
  const double s[3] = {double(sensor[3 * j]), double(sensor[3 * j + 1]), double(sensor[3 * j + 2])};
  return Dist2(s, p) <= bound2;
}

// SelectOne's nearest and second alone: they change only where d2 <= bound2.
DV_HOST_DEVICE inline void KeepNearest(int32_t j, double d2, double bound2, int32_t* best,
                                       double* best_d2, int32_t* second, double* second_d2) {
  if (d2 < *best_d2 || (*best < 0 && d2 <= bound2)) {
    // The one it displaces came first among the nearest so far: it is the nearest of the rest.
    *second = *best;
    *second_d2 = *best_d2;
    *best = j;
    *best_d2 = d2;
  } else if (d2 < *second_d2 || (*second < 0 && d2 <= bound2)) {
    *second = j;
    *second_d2 = d2;
  }
}

// KeepNearest's rule for a candidate j whose squared distance d2 is within bound2, on the
// distances' bits (>= +0: the bits order as the values do; *best_bits and *second_bits start as
// bound2's), kept by masks, not branches: which candidate is nearer is the data's, and a branch
// on it mispredicts. Written with ?: the same selects became branches again (GCC). Within the
// bound, KeepNearest's clause "none yet and d2 <= bound2" is "none yet". The classification's
// scalar variant (cpu/scalar.cpp); the SSE2 and AVX2 ones keep the least distances lane by lane
// instead, without this chain of selects (cpu/sse2.cpp, cpu/avx2.cpp).
DV_HOST_DEVICE inline void KeepNearestWithin(int32_t j, uint64_t d2_bits, int32_t* best,
                                             uint64_t* best_bits, int32_t* second,
                                             uint64_t* second_bits) {
  const uint64_t mf = uint64_t(0) - uint64_t((d2_bits < *best_bits) | (*best < 0));
  const uint64_t mn = (uint64_t(0) - uint64_t((d2_bits < *second_bits) | (*second < 0))) & ~mf;
  const uint64_t ms = ~(mf | mn);
  const uint32_t jj = uint32_t(j), b = uint32_t(*best), s = uint32_t(*second);
  *second_bits = (*best_bits & mf) | (d2_bits & mn) | (*second_bits & ms);
  *second = int32_t((b & uint32_t(mf)) | (jj & uint32_t(mn)) | (s & uint32_t(ms)));
  *best_bits = (d2_bits & mf) | (*best_bits & ~mf);
  *best = int32_t((jj & uint32_t(mf)) | (b & ~uint32_t(mf)));
}

// ClassifyPoints' rule for one candidate j at squared distance d2 from a point p: marks j in
// `close` when d2 <= select2, and keeps in *best (its squared distance in *best_d2) the nearest
// within sqrt(bound2) so far, the first among equals, and in *second (*second_d2) the nearest of
// the others, the first among equals. Start with *best = *second = -1 and *best_d2 = *second_d2 =
// bound2 and call it for p's candidates in (dx, dy, dz) order; after the last the caller marks
// *best as a nearest (-1: p is not explained). A candidate beyond both radii changes nothing, so a
// caller may leave those out.
DV_HOST_DEVICE inline void SelectOne(int32_t j, double d2, double bound2, double select2,
                                     uint8_t* close, int32_t* best, double* best_d2,
                                     int32_t* second, double* second_d2) {
  // Every writer stores 1: an OR, free of order.
  if (d2 <= select2) close[j] = 1;
  KeepNearest(j, d2, bound2, best, best_d2, second, second_d2);
}

// SelectOne over the candidates `near` (indices into sensor, x y z each) of point p, in order.
DV_HOST_DEVICE inline void SelectNear(const float* sensor, const int32_t* near, size_t count,
                                      const double p[3], double bound2, double select2,
                                      uint8_t* close, int32_t* best, double* best_d2,
                                      int32_t* second, double* second_d2) {
  for (size_t m = 0; m < count; ++m) {
    const int32_t j = near[m];
    const double s[3] = {double(sensor[3 * j]), double(sensor[3 * j + 1]),
                         double(sensor[3 * j + 2])};
    SelectOne(j, Dist2(s, p), bound2, select2, close, best, best_d2, second, second_d2);
  }
}

// ---- Candidate projection (candidates.cpp DeriveCandidates).

// The bytes of maps::MapVoxel (hot_paths.cpp checks the layout).
struct VoxelRecord {
  int32_t key[3];
  uint8_t q[3];
  uint8_t intensity;
  uint16_t hits;
  uint16_t seen_through;
};

// The angular grid of the visibility context: elevation rows x azimuth columns.
struct AngularGrid {
  int32_t cols, rows;
  double elev_min, elev_max;  // radians
};

// The azimuth column of sensor-frame (x, y) among `cols`: floor of a value >= 0 is its
// truncation; azimuth +pi lands in the last column.
DV_HOST_DEVICE inline int32_t AngularColumn(double x, double y, int32_t cols) {
  const int32_t c = int32_t((maps::PortableAtan2(y, x) + M_PI) / (2 * M_PI) * cols);
  return c < cols - 1 ? c : cols - 1;
}

// Candidate v's representative in the sensor frame (R_map_sensor row-major, t_map_sensor), its
// range and its angular cell (-1 outside the grid).
DV_HOST_DEVICE inline void Project(const VoxelRecord& v, double voxel_m, const double R[9],
                                   const double t[3], const AngularGrid& g, float sensor[3],
                                   double* range, int32_t* cell) {
  double d[3];
  for (int a = 0; a < 3; ++a) d[a] = (double(v.key[a]) + (v.q[a] + 0.5) / 256.0) * voxel_m - t[a];
  // p_sensor = R^T (p_map - t).
  const double x = R[0] * d[0] + R[3] * d[1] + R[6] * d[2];
  const double y = R[1] * d[0] + R[4] * d[1] + R[7] * d[2];
  const double z = R[2] * d[0] + R[5] * d[1] + R[8] * d[2];
  sensor[0] = float(x);
  sensor[1] = float(y);
  sensor[2] = float(z);
  const double rxy = std::sqrt(x * x + y * y);
  *range = std::sqrt(rxy * rxy + z * z);
  const double rows =
      (maps::PortableAtan2(z, rxy) - g.elev_min) / (g.elev_max - g.elev_min) * g.rows;
  // The cell of floor(rows), floor(cols), without branches: floor(rows) is in [0, g.rows) exactly
  // when rows is in [0, g.rows), and floor of a value >= 0 is its truncation.
  const bool inside = (rows >= 0) & (rows < double(g.rows));
  *cell = inside ? int(rows) * g.cols + AngularColumn(x, y, g.cols) : -1;
}

// ---- Correspondences (registration.cpp RegisterFrame).

// Map points bucketed by voxel: the hash maps a voxel key either to a point index (per_cell 0)
// or to a cell of `cells` laid out as [count, index x per_cell].
struct NeighbourGrid {
  HashView hash;
  double voxel_m;
  const int32_t* cells;
  int32_t per_cell;
};

// Index of the map point nearest to p among the 27 voxels around p's, closer than
// sqrt(max_d2); -1 when none. Ties go to the lowest index, whatever order the voxels are visited
// in, so that grids of other voxel sizes give the same answer (CorrespondenceSearch).
DV_HOST_DEVICE inline int32_t Nearest(const NeighbourGrid& g, const double* map_pts,
                                      const double p[3], double max_d2) {
  int32_t k[3];
  KeyOf(p, g.voxel_m, k);
  double best = max_d2;
  int32_t best_i = -1;
  for (int dx = -1; dx <= 1; ++dx) {
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dz = -1; dz <= 1; ++dz) {
        const int32_t v = HashFind(g.hash, PackKey(k[0] + dx, k[1] + dy, k[2] + dz));
        if (v < 0) continue;
        const int32_t* cell = g.per_cell > 0 ? g.cells + size_t(v) * (g.per_cell + 1) : nullptr;
        const int32_t n = cell ? cell[0] : 1;
        for (int32_t j = 0; j < n; ++j) {
          const int32_t i = cell ? cell[1 + j] : v;
          const double d2 = Dist2(map_pts + 3 * size_t(i), p);
          if (d2 < best || (d2 == best && i < best_i)) {
            best = d2;
            best_i = i;
          }
        }
      }
    }
  }
  return best_i;
}

}  // namespace dv::codec::kernels
