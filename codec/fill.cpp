#include "fill.h"

#include <algorithm>
#include <cmath>

#include "dejaview/base/bytes.h"
#include "dejaview/base/kitti.h"
#include "sorted_grid.h"

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
  // one for about nine in ten; the rest in a grid of every original point with cells of bound_m,
  // where the 27 cells around a fill point's hold every point within bound_m of it.
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
  // The grid: points farther out than every candidate plus bound_m cannot be near a fill point
  // (each lies between two candidates) and stay out, so keys stay small.
  float reach = 0;
  for (const Eigen::Vector3f& p : cand.sensor) reach = std::max(reach, p.cwiseAbs().maxCoeff());
  const double far = double(reach) + 2 * bound_m;
  const double inv = 1.0 / bound_m;
  auto key = [&](const Eigen::Vector3f& p, int32_t* k) {
    for (int a = 0; a < 3; ++a) k[a] = int32_t(std::floor(double(p[a]) * inv));
  };
  std::vector<int32_t> item_keys;
  std::vector<uint32_t> item_point;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!(points[i].cwiseAbs().maxCoeff() <= far)) continue;
    int32_t k[3];
    key(points[i], k);
    item_keys.insert(item_keys.end(), k, k + 3);
    item_point.push_back(uint32_t(i));
  }
  const SortedGrid grid(item_keys, 1, 0);
  // Checked in chunks a little larger than what the budget still needs: past the budget the
  // decoder reads no more bits.
  std::vector<uint8_t> veto(order.size(), 1);
  std::vector<uint32_t> missed;
  std::vector<Eigen::Vector3f> missed_at;
  std::vector<int32_t> keys;
  size_t checked = 0, free = 0;
  while (free < budget && checked < order.size()) {
    const size_t need = budget - free;
    const size_t end = std::min(order.size(), checked + need + need / 16 + 256);
    missed.clear();
    missed_at.clear();
    for (size_t k = checked; k < end; ++k) {
      const SelectedPair& pr = pairs[order[k] >> 2];
      const Eigen::Vector3f m = FillPoint(cand, pr, order[k] & 3);
      if (near(pr.later, m.cast<double>()) || near(pr.earlier, m.cast<double>())) {
        veto[k] = 0;
      } else {
        missed.push_back(uint32_t(k));
        missed_at.push_back(m);
      }
    }
    keys.resize(3 * missed.size());
    for (size_t q = 0; q < missed.size(); ++q) key(missed_at[q], &keys[3 * q]);
    const std::vector<uint8_t> valid(missed.size(), 1);
    grid.ForEachQuery(keys, valid, 1, [&](uint32_t q, const std::vector<int32_t>& items) {
      const Eigen::Vector3d m = missed_at[q].cast<double>();
      for (int32_t it : items) {
        if ((points[item_point[size_t(it)]].cast<double>() - m).squaredNorm() <= bound2) {
          veto[missed[q]] = 0;
          return;
        }
      }
    });
    for (size_t k = checked; k < end; ++k) free += veto[k] == 0;
    checked = end;
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
