#include "fill.h"

#include <algorithm>
#include <cmath>

#include "dejaview/base/bytes.h"
#include "dejaview/base/kitti.h"

namespace dv::codec {
namespace {

// Bins of squared range, 1 m^2 wide (5 cm of range at 10 m, 1 cm at 50 m): no square root, and
// finer than a scan ring's spacing where the budget runs out. Midpoints beyond 128 m share the
// last bin.
constexpr int kRangeBins = 1 << 14;

}  // namespace

std::vector<uint32_t> FillOrder(const Candidates& cand, const std::vector<SelectedPair>& pairs,
                                size_t budget) {
  if (pairs.size() >= (size_t(1) << 30)) return {};  // beyond any frame: no fill, on both sides
  const double limit = kFillPairFactor * cand.resolution_m;
  const float limit2 = float(limit * limit);
  // Nearest the sensor first, where the original points are densest: a counting sort by range
  // bin, stable, so the order within a bin is the coder's. Pairs too far apart go to a bin of
  // their own past the last, cut off at the end: no branch on the distance, which the data make
  // unpredictable (a quarter of the pairs on KITTI).
  std::vector<uint16_t> bin(pairs.size());
  std::vector<uint32_t> start(kRangeBins + 2, 0);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const Eigen::Vector3f& a = cand.sensor[pairs[k].later];
    const Eigen::Vector3f& b = cand.sensor[pairs[k].earlier];
    // Explicit float arithmetic in a fixed order: both sides must round alike.
    const float dx = a.x() - b.x(), dy = a.y() - b.y(), dz = a.z() - b.z();
    const Eigen::Vector3f m = FillPoint(cand, pairs[k], 0);
    const float range2 = m.x() * m.x() + m.y() * m.y() + m.z() * m.z();
    const int near = range2 < float(kRangeBins - 1) ? int(range2) : kRangeBins - 1;
    bin[k] = uint16_t(dx * dx + dy * dy + dz * dz > limit2 ? kRangeBins : near);
    ++start[size_t(bin[k]) + 1];
  }
  for (int b = 0; b <= kRangeBins; ++b) start[b + 1] += start[b];
  const size_t mids = start[kRangeBins];
  std::vector<uint32_t> order(pairs.size());
  for (size_t k = 0; k < pairs.size(); ++k) order[start[bin[k]]++] = uint32_t(k) << 2;
  // Where the budget exceeds the midpoints (T >= 0.3 on KITTI), the quarter points of the same
  // pairs follow, in the same order.
  order.resize(budget > mids ? 3 * mids : mids);
  if (budget > mids) {
    for (size_t e = 0; e < mids; ++e) {
      order[mids + 2 * e] = order[e] | 1;
      order[mids + 2 * e + 1] = order[e] | 2;
    }
  }
  return order;
}

std::vector<uint8_t> EncodeFill(const Candidates& cand, const std::vector<SelectedPair>& pairs,
                                const std::vector<Eigen::Vector3f>& points,
                                const std::vector<int32_t>& point_nearest, size_t decoded,
                                double bound_m, size_t* added) {
  ByteWriter w;
  w.Varint(points.size());
  *added = 0;
  if (points.size() <= decoded) return w.Take();
  const size_t budget = points.size() - decoded;
  const std::vector<uint32_t> order = FillOrder(cand, pairs, budget);
  if (order.empty()) return w.Take();
  const double bound2 = bound_m * bound_m;
  // veto[k]: no original point within bound_m of fill point k. First looked for among the points
  // whose nearest candidate is one of the pair's two voxels (CSR lists by candidate), which finds
  // one for about nine in ten; the rest as below.
  const size_t n = cand.voxels.size();
  std::vector<uint32_t> start(n + 1, 0), list(points.size());
  for (int32_t c : point_nearest) {
    if (c >= 0) ++start[size_t(c) + 1];
  }
  for (size_t c = 0; c < n; ++c) start[c + 1] += start[c];
  {
    std::vector<uint32_t> at(start.begin(), start.end() - 1);
    for (size_t i = 0; i < point_nearest.size(); ++i) {
      if (point_nearest[i] >= 0) list[at[size_t(point_nearest[i])]++] = uint32_t(i);
    }
  }
  auto near = [&](uint32_t c, const Eigen::Vector3d& m) {
    for (uint32_t k = start[c]; k < start[c + 1]; ++k) {
      if ((points[list[k]].cast<double>() - m).squaredNorm() <= bound2) return true;
    }
    return false;
  };
  // The rest are looked for among every original point, bucketed by a hash of its cell of side
  // bound_m (a counting sort): the 27 cells around a fill point hold every point within bound_m
  // of it, and their buckets hold those cells' points (and, where cells collide, others, which
  // the distance test rejects). Only a tenth of the fill points get here: with a sorted grid of
  // the points (sorted_grid.h) the fill stage took 6.8 ms a frame, with these 4.8 (KITTI 00,
  // T = 0.1). Points farther out than every candidate plus bound_m cannot be near a fill point
  // (each lies between two candidates) and stay out, so keys stay small.
  float reach = 0;
  for (const Eigen::Vector3f& p : cand.sensor) reach = std::max(reach, p.cwiseAbs().maxCoeff());
  const double far = double(reach) + 2 * bound_m;
  const double inv = 1.0 / bound_m;
  size_t buckets = 16;
  while (buckets < points.size()) buckets <<= 1;
  const uint32_t mask = uint32_t(buckets - 1);
  auto cell = [&](const Eigen::Vector3f& p, int32_t* k) {
    for (int a = 0; a < 3; ++a) k[a] = int32_t(std::floor(double(p[a]) * inv));
  };
  auto bucket = [&](int32_t x, int32_t y, int32_t z) {
    return (uint32_t(x) * 73856093u ^ uint32_t(y) * 19349663u ^ uint32_t(z) * 83492791u) & mask;
  };
  constexpr uint32_t kOut = UINT32_MAX;
  std::vector<uint32_t> point_bucket(points.size(), kOut), first(buckets + 1, 0);
  for (size_t i = 0; i < points.size(); ++i) {
    if (!(points[i].cwiseAbs().maxCoeff() <= far)) continue;
    int32_t k[3];
    cell(points[i], k);
    point_bucket[i] = bucket(k[0], k[1], k[2]);
    ++first[point_bucket[i] + 1];
  }
  for (size_t b = 0; b < buckets; ++b) first[b + 1] += first[b];
  std::vector<uint32_t> in_bucket(first[buckets]);
  {
    std::vector<uint32_t> at(first.begin(), first.end() - 1);
    for (size_t i = 0; i < points.size(); ++i) {
      if (point_bucket[i] != kOut) in_bucket[at[point_bucket[i]]++] = uint32_t(i);
    }
  }
  auto near_any = [&](const Eigen::Vector3f& mf) {
    const Eigen::Vector3d m = mf.cast<double>();
    int32_t k[3];
    cell(mf, k);
    for (int32_t dx = -1; dx <= 1; ++dx) {
      for (int32_t dy = -1; dy <= 1; ++dy) {
        for (int32_t dz = -1; dz <= 1; ++dz) {
          const uint32_t b = bucket(k[0] + dx, k[1] + dy, k[2] + dz);
          for (uint32_t e = first[b]; e < first[b + 1]; ++e) {
            if ((points[in_bucket[e]].cast<double>() - m).squaredNorm() <= bound2) return true;
          }
        }
      }
    }
    return false;
  };
  // Checked up to where the budget is met: past it the decoder reads no more bits.
  std::vector<uint8_t> veto(order.size(), 1);
  for (size_t k = 0, free = 0; k < order.size() && free < budget; ++k) {
    const SelectedPair& pr = pairs[order[k] >> 2];
    const Eigen::Vector3f m = FillPoint(cand, pr, order[k] & 3);
    const bool kept = near(pr.later, m.cast<double>()) || near(pr.earlier, m.cast<double>()) ||
                      (m.cwiseAbs().maxCoeff() <= far && near_any(m));
    veto[k] = !kept;
    free += kept;
  }
  RangeEncoder rc(Adaptation::kCounted);
  BitModel models[kFillModels];
  for (size_t k = 0; k < order.size() && *added < budget; ++k) {
    rc.Encode(&models[FillContext(cand, pairs[order[k] >> 2], order[k] & 3)], veto[k]);
    *added += veto[k] == 0;
  }
  const std::vector<uint8_t> bits = rc.Finish();
  w.Bytes(bits.data(), bits.size());
  return w.Take();
}

Status DecodeFill(const uint8_t* data, size_t size, const Candidates& cand,
                  const std::vector<SelectedPair>& pairs, bool intensity, PointCloud* cloud,
                  size_t* added) {
  *added = 0;
  ByteReader r(data, size);
  uint64_t points = 0;
  if (!r.Varint(&points) || points > kMaxPointsPerFrame) {
    return Status::Corruption("fill: bad point count");
  }
  const size_t decoded = cloud->size();
  const size_t budget = points > decoded ? size_t(points) - decoded : 0;
  std::vector<uint32_t> order;
  if (budget > 0) order = FillOrder(cand, pairs, budget);
  if (order.empty()) {
    if (r.remaining() != 0) return Status::Corruption("fill: trailing bytes");
    return Status::Ok();
  }
  RangeDecoder rc(r.position(), r.remaining(), Adaptation::kCounted);
  BitModel models[kFillModels];
  for (size_t k = 0; k < order.size() && *added < budget; ++k) {
    const SelectedPair& pr = pairs[order[k] >> 2];
    if (rc.Decode(&models[FillContext(cand, pr, order[k] & 3)]) != 0) continue;
    const float i2 = float(cand.voxels[pr.later].intensity + cand.voxels[pr.earlier].intensity);
    cloud->push_back(FillPoint(cand, pr, order[k] & 3), intensity ? i2 / 510.0f : 0.0f);
    ++*added;
  }
  if (rc.overrun() != 0) return Status::Corruption("fill: truncated stream");
  return Status::Ok();
}

}  // namespace dv::codec
