#include "fill.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "cpu/kernels.h"
#include "dejaview/base/bytes.h"
#include "dejaview/base/kitti.h"
#include "dejaview/maps/key_floor.h"

namespace dv::codec {
namespace {

// Pairs sorted by bin, stably (SortMidpoints): counted and placed in four quarters of the pairs,
// each with counts of its own: neighbouring pairs (the coder's order) often share a bin, and with
// one count each increment waited on the one before. Quarter q's pairs of a bin go after those of
// the quarters before it. Only the first whole bins that hold at least `wanted` pairs (all where
// fewer) are placed in order; the pairs of the bins past them share the end of the array, in pair
// order, and are cut off: the decoder needs the order only a little past its budget.
std::vector<uint32_t> SortByBin(const std::vector<uint16_t>& bin, size_t wanted) {
  constexpr size_t kWays = 4, kBins = size_t(kFillRangeBins) + 1;
  const size_t n = bin.size();
  size_t from[kWays + 1];
  for (size_t q = 0; q <= kWays; ++q) from[q] = n * q / kWays;
  std::vector<uint32_t> counts(kWays * kBins, 0);
  const size_t len = from[1];  // the shortest quarter's length (the first)
  for (size_t m = 0; m < len; ++m) {
    for (size_t q = 0; q < kWays; ++q) ++counts[q * kBins + bin[from[q] + m]];
  }
  for (size_t q = 0; q < kWays; ++q) {
    for (size_t m = from[q] + len; m < from[q + 1]; ++m) ++counts[q * kBins + bin[m]];
  }
  auto total = [&](size_t b) {
    return size_t(counts[b]) + counts[kBins + b] + counts[2 * kBins + b] + counts[3 * kBins + b];
  };
  size_t last = 0, kept = total(0);
  while (last + 1 < size_t(kFillRangeBins) && kept < wanted) kept += total(++last);
  // Each quarter's counts become where its pairs of each bin go, bin last + 1 standing for every
  // bin past the last kept.
  uint32_t at = 0, rest[kWays];
  for (size_t q = 0; q < kWays; ++q) rest[q] = uint32_t(from[q + 1] - from[q]);
  for (size_t b = 0; b <= last; ++b) {
    for (size_t q = 0; q < kWays; ++q) {
      rest[q] -= counts[q * kBins + b];
      at += std::exchange(counts[q * kBins + b], at);
    }
  }
  for (size_t q = 0; q < kWays; ++q) {
    counts[q * kBins + last + 1] = at;
    at += rest[q];
  }
  std::vector<uint32_t> order(n);
  auto place = [&](size_t q, size_t p) {
    order[counts[q * kBins + std::min<size_t>(bin[p], last + 1)]++] = uint32_t(p) << 2;
  };
  for (size_t m = 0; m < len; ++m) {
    for (size_t q = 0; q < kWays; ++q) place(q, from[q] + m);
  }
  for (size_t q = 0; q < kWays; ++q) {
    for (size_t m = from[q] + len; m < from[q + 1]; ++m) place(q, m);
  }
  order.resize(kept);
  return order;
}

// The midpoints in their order (FillOrder's first part), for any budget; or only the first
// whole bins that hold at least `wanted` of them (all where fewer), which are the first
// entries of the whole order. Nearest the sensor first, where the original points are densest:
// a counting sort by range bin, stable, so the order within a bin is the coder's. Pairs too far
// apart go to a bin of their own past the last, cut off at the end: no branch on the distance,
// which the data make unpredictable (a quarter of the pairs on KITTI). The bins are the CPU
// variants' (cpu/kernels.h fill_bins), the same on every machine.
std::vector<uint32_t> SortMidpoints(const cpu::Kernels& k, const Candidates& cand,
                                    const std::vector<SelectedPair>& pairs,
                                    size_t wanted = SIZE_MAX) {
  if (pairs.size() >= (size_t(1) << 30)) return {};  // beyond any frame: no fill, on both sides
  const double limit = kFillPairFactor * cand.resolution_m;
  std::vector<uint16_t> bin(pairs.size());
  k.fill_bins(cand, pairs.data(), pairs.size(), float(limit * limit), bin.data());
  return SortByBin(bin, wanted);
}

// FillEncoder's cells are this much over twice the bound: a fill point's ball stays inside the
// eight cells on its side by 5e-7 of a cell (the keys' rounding is 1e-16 of them).
constexpr double kCellSlack = 1 + 1e-6;

// How many fill points ahead of the one it checks the encoder fetches what a point reads, a step
// at a time (FillEncoder::Encode; the decoder, which reads less a point, ran no faster with it).
constexpr size_t kFillAhead = 8;

// FillOrder's second part: where the budget exceeds the midpoints (T >= 0.3 on KITTI), the
// quarter points of the same pairs follow, in the same order.
std::vector<uint32_t> WithQuarterPoints(std::vector<uint32_t> order, size_t budget) {
  const size_t mids = order.size();
  if (budget <= mids) return order;
  order.resize(3 * mids);
  for (size_t e = 0; e < mids; ++e) {
    order[mids + 2 * e] = order[e] | 1;
    order[mids + 2 * e + 1] = order[e] | 2;
  }
  return order;
}

}  // namespace

std::vector<uint32_t> FillOrder(const Candidates& cand, const std::vector<SelectedPair>& pairs,
                                size_t budget) {
  return WithQuarterPoints(SortMidpoints(cpu::Best(), cand, pairs), budget);
}

FillEncoder::FillEncoder(const Candidates& cand, const std::vector<Eigen::Vector3f>& points,
                         double bound_m)
    : cand_(cand),
      points_(points),
      cpu_(cpu::Best()),
      bound_m_(bound_m),
      bound2_(bound_m * bound_m),
      inv_(1.0 / (2 * bound_m * kCellSlack)) {}

void FillEncoder::Order(const std::vector<SelectedPair>& pairs) {
  pairs_ = &pairs;
  order_ = SortMidpoints(cpu_, cand_, pairs);
}

void FillEncoder::Index(const std::vector<int32_t>& nearest_start,
                        const std::vector<int32_t>& nearest_points) {
  const Candidates& cand = cand_;
  const std::vector<Eigen::Vector3f>& points = points_;
  const double bound_m = bound_m_;
  // A fill point's original point within bound_m is first looked for among the points whose
  // nearest candidate is one of its pair's two voxels (CSR lists by candidate, of the points
  // themselves: a list of indices cost a dependent miss more a check), which finds one for about
  // nine in ten; the rest as below. The lists are the selection coder's too: made once, not a
  // CSR of the fill's own beside them.
  own_start_ = nearest_start.data();
  own_points_.resize(nearest_points.size());
  for (size_t k = 0; k < nearest_points.size(); ++k) {
    own_points_[k] = points[size_t(nearest_points[k])];
  }
  // The rest are looked for among every original point, bucketed by a hash of its cell of side
  // a little over 2 bound_m (a counting sort): the cell of a fill point and the 7 beside the
  // octant it lies in hold every point within bound_m of it, and their buckets hold those cells'
  // points (and, where cells collide, others, which the distance test rejects). Only a tenth of
  // the fill points get here, for which a sorted grid of the points (sorted_grid.h) cost more
  // than it saved. Points farther out than every candidate plus bound_m cannot be near a fill
  // point (each lies between two candidates) and stay out, so keys stay small.
  float reach = 0;
  for (const Eigen::Vector3f& p : cand.sensor) reach = std::max(reach, p.cwiseAbs().maxCoeff());
  far_ = double(reach) + 2 * bound_m;
  // A bucket for every four points: a cell holds several (2.5 a voxel of side bound_m on KITTI
  // 00 at T = 0.12, eight times as many voxels a cell), and a smaller table is read from cache.
  size_t buckets = 16;
  while (4 * buckets < points.size()) buckets <<= 1;
  mask_ = uint32_t(buckets - 1);
  constexpr uint32_t kOut = UINT32_MAX;
  std::vector<uint32_t> point_bucket(points.size(), kOut);
  first_.assign(buckets + 1, 0);
  for (size_t i = 0; i < points.size(); ++i) {
    if (!(points[i].cwiseAbs().maxCoeff() <= far_)) continue;
    int32_t k[3];
    Cell(points[i], k);
    point_bucket[i] = Bucket(k[0], k[1], k[2]);
    ++first_[point_bucket[i] + 1];
  }
  for (size_t b = 0; b < buckets; ++b) first_[b + 1] += first_[b];
  in_bucket_.resize(first_[buckets]);
  std::vector<uint32_t> at(first_.begin(), first_.end() - 1);
  for (size_t i = 0; i < points.size(); ++i) {
    if (point_bucket[i] != kOut) in_bucket_[at[point_bucket[i]]++] = uint32_t(i);
  }
}

// Only for points within far_ of the sensor (the candidates' reach, under the 300 m of their ball,
// plus 2 bound_m), in cells of 0.9 mm or more: keys within int's range, so no clamp (std::floor
// without SSE4.1 is a dozen instructions and branches).
void FillEncoder::Cell(const Eigen::Vector3f& p, int32_t* k) const {
  for (int a = 0; a < 3; ++a) k[a] = maps::BoundedFloor(double(p[a]) * inv_);
}

uint32_t FillEncoder::Bucket(int32_t x, int32_t y, int32_t z) const {
  return (uint32_t(x) * 73856093u ^ uint32_t(y) * 19349663u ^ uint32_t(z) * 83492791u) & mask_;
}

bool FillEncoder::NearOwn(uint32_t c, const Eigen::Vector3d& m) const {
  for (int32_t k = own_start_[c]; k < own_start_[c + 1]; ++k) {
    if ((own_points_[k].cast<double>() - m).squaredNorm() <= bound2_) return true;
  }
  return false;
}

bool FillEncoder::NearAny(const Eigen::Vector3f& mf) const {
  if (!(mf.cwiseAbs().maxCoeff() <= far_)) return false;
  const Eigen::Vector3d m = mf.cast<double>();
  // The cell, and per axis the neighbour on the side of the cell's middle the point lies on: the
  // cell's side, 2 bound_m kCellSlack, leaves the far side at least bound_m away, with room for
  // rounding. The point's own cell first, where a near point mostly is: the answer is whether
  // any is, so the order changes nothing but how soon it is found.
  int32_t k[3], side[3];
  for (int a = 0; a < 3; ++a) {
    const double c = double(mf[a]) * inv_;
    k[a] = maps::BoundedFloor(c);
    side[a] = c - double(k[a]) < 0.5 ? -1 : 1;
  }
  for (int o = 0; o < 8; ++o) {
    const uint32_t b =
        Bucket(k[0] + (o & 1) * side[0], k[1] + (o >> 1 & 1) * side[1], k[2] + (o >> 2) * side[2]);
    for (uint32_t e = first_[b]; e < first_[b + 1]; ++e) {
      if ((points_[in_bucket_[e]].cast<double>() - m).squaredNorm() <= bound2_) return true;
    }
  }
  return false;
}

std::vector<uint8_t> FillEncoder::Encode(size_t decoded, size_t* added) const {
  ByteWriter w;
  w.Varint(points_.size());
  *added = 0;
  if (points_.size() <= decoded) return w.Take();
  const size_t budget = points_.size() - decoded;
  // The midpoints alone where they meet the budget (T <= 0.2 on KITTI): no copy of them.
  std::vector<uint32_t> with_quarters;
  if (budget > order_.size()) with_quarters = WithQuarterPoints(order_, budget);
  const std::vector<uint32_t>& order = budget > order_.size() ? with_quarters : order_;
  if (order.empty()) return w.Take();  // no bits: the decoder reads none
  // Each point checked and coded in turn, up to where the budget is met: past it the decoder reads
  // no more bits. The checks split between two threads (up to a little past the budget, then one
  // by one) ran slower than this: the second core had none of the index in its cache.
  RangeEncoder rc;
  BitModel models[kFillModels];
  const std::vector<SelectedPair>& pairs = *pairs_;
  for (size_t k = 0; k < order.size() && *added < budget; ++k) {
    // The order is by range, so each point reads its pair, its two voxels and their own points
    // at random: fetched ahead in three steps, each needing what the one before fetched.
    if (k + 3 * kFillAhead < order.size()) {
      __builtin_prefetch(&pairs[order[k + 3 * kFillAhead] >> 2]);
    }
    if (k + 2 * kFillAhead < order.size()) {
      const SelectedPair& q = pairs[order[k + 2 * kFillAhead] >> 2];
      for (uint32_t c : {q.later, q.earlier}) {
        __builtin_prefetch(&cand_.sensor[c]);
        __builtin_prefetch(&cand_.context[c]);
        __builtin_prefetch(&own_start_[c]);
      }
    }
    if (k + kFillAhead < order.size()) {
      const SelectedPair& q = pairs[order[k + kFillAhead] >> 2];
      // (A voxel with no points of its own starts at the end, which is not read.)
      __builtin_prefetch(own_points_.data() + own_start_[q.later]);
      __builtin_prefetch(own_points_.data() + own_start_[q.earlier]);
    }
    const SelectedPair& pr = pairs[order[k] >> 2];
    const Eigen::Vector3f m = FillPoint(cand_, pr, order[k] & 3);
    const int veto = !(NearOwn(pr.later, m.cast<double>()) ||
                       NearOwn(pr.earlier, m.cast<double>()) || NearAny(m));
    rc.Encode(&models[FillContext(cand_, pr, order[k] & 3)], veto);
    *added += veto == 0;
  }
  const std::vector<uint8_t> bits = rc.Finish();
  w.Bytes(bits.data(), bits.size());
  return w.Take();
}

Status DecodeFill(const uint8_t* data, size_t size, const Candidates& cand,
                  const std::vector<SelectedPair>& pairs, bool intensity, PointCloud* cloud,
                  size_t* added) {
  *added = 0;
  const cpu::Kernels& variants = cpu::Best();
  ByteReader r(data, size);
  uint64_t points = 0;
  if (!r.Varint(&points) || points > kMaxPointsPerFrame) {
    return Status::Corruption("fill: bad point count");
  }
  const size_t decoded = cloud->size();
  const size_t budget = points > decoded ? size_t(points) - decoded : 0;
  // The order up to a little past the budget, the rest only where vetoes use that up.
  std::vector<uint32_t> order;
  bool whole = true;
  if (budget > 0) {
    const size_t wanted = budget + budget / 16 + 256;
    order = SortMidpoints(variants, cand, pairs, wanted);
    whole = order.size() < wanted;
    if (whole) order = WithQuarterPoints(std::move(order), budget);
  }
  if (order.empty()) {
    if (r.remaining() != 0) return Status::Corruption("fill: trailing bytes");
    return Status::Ok();
  }
  RangeDecoder rc(r.position(), r.remaining());
  BitModel models[kFillModels];
  for (size_t k = 0; *added < budget; ++k) {
    if (k == order.size()) {
      if (whole) break;
      order = WithQuarterPoints(SortMidpoints(variants, cand, pairs), budget);
      whole = true;
      if (k == order.size()) break;
    }
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
