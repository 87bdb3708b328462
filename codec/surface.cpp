// The second gap test, the map's ground profile and the surface split (surface.h).
#include "surface.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "container.h"
#include "octree_coder.h"

namespace dv::codec {
namespace {

// A bin's sample (h, z) packed so that the lowest z, then the least h, is the least integer:
// the bins fill by std::min, without a branch on each candidate, which the candidates' order
// would leave unpredictable. z < 0 here: its sign-magnitude bits, inverted, ascend with z; h >= +0:
// its bits ascend with h. kEmpty is no sample's key (it would be z = +0).
constexpr uint64_t kEmpty = ~uint64_t(0);
uint64_t Pack(float h, float z) {
  uint32_t hb, zb;
  std::memcpy(&hb, &h, 4);
  std::memcpy(&zb, &z, 4);
  return uint64_t(~zb) << 32 | hb;
}
float H(uint64_t key) {
  const uint32_t hb = uint32_t(key);
  float h;
  std::memcpy(&h, &hb, 4);
  return h;
}
float Z(uint64_t key) {
  const uint32_t zb = ~uint32_t(key >> 32);
  float z;
  std::memcpy(&z, &zb, 4);
  return z;
}

float SurfaceCentre(double v, double step_m) {
  return float((std::floor(v / step_m) + 0.5) * step_m);
}

}  // namespace

void MarkOnMapSurface(const std::vector<Eigen::Vector3f>& pts, const Candidates& cand, double gap_m,
                      std::vector<uint8_t>* near) {
  if (std::find(near->begin(), near->end(), 0) == near->end()) return;
  // The candidates bucketed by column and by the square of their horizontal distance, in bins of
  // a factor sqrt(2) (the float's exponent and top mantissa bit: no root, no division; a
  // counting sort), so that a point scans three buckets of its column: they hold every sample
  // within kSurfaceWindow of its distance (squares 0.81 to 1.21 times its own, less than a bin
  // either way), at any height. Bucketed by height instead, a point would scan its column's
  // dense ground near the sensor.
  constexpr int kBins = 56;                      // squares from 2^-6 (h = 0.125 m) to 2^22
  constexpr uint32_t kFirst = (127u - 6u) << 1;  // bin 0: exponent 2^-6, top bit 0
  auto bin = [](float h2) {
    uint32_t b;
    std::memcpy(&b, &h2, 4);  // h2 >= 0 (or +inf): the bits order as the values do
    const uint32_t k = b >> 22;
    return k < kFirst ? 0u : std::min(k - kFirst, uint32_t(kBins - 1));
  };
  auto h2_of = [](const Eigen::Vector3f& p) { return p.x() * p.x() + p.y() * p.y(); };
  // Per point tested, the buckets it scans (its own and the two beside it in its column); only
  // those are filled.
  struct Tested {
    size_t i;
    uint32_t lo, hi;
  };
  std::vector<Tested> tested;
  std::vector<uint8_t> wanted(size_t(kAngularCols) * kBins, 0);
  for (size_t i = 0; i < pts.size(); ++i) {
    if ((*near)[i]) continue;
    const uint32_t b = bin(h2_of(pts[i]));
    const uint32_t column_start = uint32_t(AngularColumn(pts[i])) * kBins;
    const uint32_t lo = column_start + (b > 0 ? b - 1 : 0);
    const uint32_t hi = column_start + std::min(b + 2, uint32_t(kBins));
    std::fill(wanted.begin() + ptrdiff_t(lo), wanted.begin() + ptrdiff_t(hi), uint8_t(1));
    tested.push_back({i, lo, hi});
  }
  struct Sample {
    float h, z;
  };
  std::vector<uint32_t> start(wanted.size() + 1, 0);
  std::vector<uint32_t> where(cand.cell.size());
  for (size_t j = 0; j < cand.cell.size(); ++j) {
    // Outside the grid: bucket 0 of column 0 with nothing to count (wanted or not, never filled).
    const bool in = cand.cell[j] >= 0;
    where[j] = in ? uint32_t(cand.cell[j] % kAngularCols) * kBins + bin(h2_of(cand.sensor[j]))
                  : uint32_t(wanted.size());
  }
  wanted.push_back(0);  // the bucket of candidates outside the grid
  for (size_t j = 0; j < where.size(); ++j) start[where[j]] += wanted[where[j]];
  uint32_t sum = 0;
  for (uint32_t& s : start) sum += std::exchange(s, sum);
  std::vector<Sample> samples(sum);
  for (size_t j = 0; j < where.size(); ++j) {
    if (!wanted[where[j]]) continue;
    const Eigen::Vector3f& q = cand.sensor[j];
    samples[start[where[j]]++] = {std::sqrt(h2_of(q)), q.z()};
  }
  // start[b] is now where bucket b ends, the start of b + 1.
  const float dz = float(gap_m);
  for (const auto& [i, lo, hi] : tested) {
    const Eigen::Vector3f& p = pts[i];
    const float h = std::sqrt(h2_of(p)), z = p.z();
    const float w = float(kSurfaceWindow) * h;
    bool nearer = false, farther = false;
    for (uint32_t k = lo > 0 ? start[lo - 1] : 0; k < start[hi - 1] && !(nearer && farther); ++k) {
      const Sample& q = samples[k];
      if (std::fabs(q.z - z) > dz || std::fabs(q.h - h) > w) continue;
      (q.h < h ? nearer : farther) = true;
    }
    (*near)[i] = nearer && farther;
  }
}

SurfaceProfile::SurfaceProfile(const Candidates& cand, const std::vector<Eigen::Vector3f>& at)
    : bins_(size_t(kAngularCols) * kBins, kEmpty),
      lo_(kAngularCols, std::numeric_limits<float>::infinity()),
      hi_(kAngularCols, -std::numeric_limits<float>::infinity()) {
  at_column_.resize(at.size());
  at_h_.resize(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    const float h = std::sqrt(at[i].x() * at[i].x() + at[i].y() * at[i].y());
    const int32_t c = AngularColumn(Eigen::Vector3f(at[i].x(), at[i].y(), 0));
    at_column_[i] = c;
    at_h_[i] = h;
    lo_[size_t(c)] = std::min(lo_[size_t(c)], h - float(kProfileWindow) * h);
    hi_[size_t(c)] = std::max(hi_[size_t(c)], h + float(kProfileWindow) * h);
  }
  // Whole bins around each column's span, with a bin to spare against rounding.
  for (size_t c = 0; c < lo_.size(); ++c) {
    if (lo_[c] > hi_[c]) continue;
    lo_[c] = std::max(lo_[c] - 2 * kProfileBinM, 0.0f);
    hi_[c] += 2 * kProfileBinM;
    lo_[c] *= lo_[c];
    hi_[c] *= hi_[c];
  }
  for (size_t j = 0; j < cand.cell.size(); ++j) {
    // Only samples below the sensor: the ground under a vehicle's LiDAR.
    if (cand.cell[j] < 0 || !(cand.sensor[j].z() < 0)) continue;
    const size_t c = size_t(cand.cell[j] % kAngularCols);
    const Eigen::Vector3f& q = cand.sensor[j];
    const float h2 = q.x() * q.x() + q.y() * q.y();
    if (!(h2 >= lo_[c] && h2 <= hi_[c])) continue;
    const float h = std::sqrt(h2);
    const int b = int(h / kProfileBinM);
    if (b >= kBins) continue;
    // Lowest first; the nearer among equals, so the result is free of the candidates' order.
    uint64_t& s = bins_[c * kBins + size_t(b)];
    s = std::min(s, Pack(h, q.z()));
  }
}

bool SurfaceProfile::HeightAt(size_t i, float* z) const {
  const int32_t column = at_column_[i];
  const float h = at_h_[i];
  const float w = float(kProfileWindow) * h;
  const int b = int(h / kProfileBinM);
  if (b >= kBins) return false;
  const uint64_t* col = &bins_[size_t(column) * kBins];
  float below_h = 0, below_z = 0, above_h = 0, above_z = 0;
  bool below = false, above = false;
  for (int k = b; k >= 0; --k) {
    if (col[k] == kEmpty) continue;
    const float sh = H(col[k]);
    if (sh >= h) continue;
    if (h - sh <= w) below = true, below_h = sh, below_z = Z(col[k]);
    break;
  }
  for (int k = b; k < kBins; ++k) {
    if (col[k] == kEmpty) continue;
    const float sh = H(col[k]);
    if (sh < h) continue;
    if (sh - h <= w) above = true, above_h = sh, above_z = Z(col[k]);
    break;
  }
  if (!below || !above) return false;
  // below_h < h <= above_h: a positive span.
  *z = below_z + (above_z - below_z) * ((h - below_h) / (above_h - below_h));
  return true;
}

double SurfaceStep(double bound_m) { return kSurfaceStepFactor * (bound_m - kMarginM); }

void SplitSurface(const Candidates& cand, double tol, std::vector<Eigen::Vector3f>* gap,
                  std::vector<float>* gap_i, std::vector<Eigen::Vector3f>* surface,
                  std::vector<float>* surface_i) {
  const double step = SurfaceStep(tol), bound2 = (tol - kMarginM) * (tol - kMarginM);
  std::vector<Eigen::Vector3f> centres(gap->size());
  for (size_t i = 0; i < gap->size(); ++i) {
    const Eigen::Vector3f& p = (*gap)[i];
    centres[i] = {SurfaceCentre(double(p.x()), step), SurfaceCentre(double(p.y()), step), 0};
  }
  const SurfaceProfile profile(cand, centres);
  size_t kept = 0;
  std::vector<float> heights;  // each surface point's cell's, for DropCoveredCells
  for (size_t i = 0; i < gap->size(); ++i) {
    const Eigen::Vector3f p = (*gap)[i];
    const float cx = centres[i].x(), cy = centres[i].y();
    float z = 0;
    if (profile.HeightAt(i, &z)) {
      const double dx = double(cx) - p.x(), dy = double(cy) - p.y(), dz = double(z) - p.z();
      if (dx * dx + dy * dy + dz * dz <= bound2) {
        surface->push_back(p);
        surface_i->push_back((*gap_i)[i]);
        heights.push_back(z);
        continue;
      }
    }
    (*gap)[kept] = p;
    (*gap_i)[kept++] = (*gap_i)[i];
  }
  gap->resize(kept);
  gap_i->resize(kept);
  // A cell's height is the profile's at its centre, which HeightAt found at each of its points.
  DropCoveredCells(step, tol - kMarginM, surface, surface_i, &heights);
  for (Eigen::Vector3f& p : *surface) p.z() = 0;
}

}  // namespace dv::codec
