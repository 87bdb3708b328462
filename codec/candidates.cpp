// The candidates both sides derive from (map, pose, radius), their static contexts and their
// causal neighbours (candidates.h). The static context splats every candidate into an angular
// grid around the sensor and keeps, per cell, the nearest one: a voxel far behind the nearest
// surface in its direction is rarely seen.
#include "candidates.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>

#include "cpu/kernels.h"
#include "dejaview/codec/range_coder.h"
#include "hot_paths.h"

namespace dv::codec {
namespace {

constexpr int kCols = kAngularCols, kRows = 80;
constexpr double kElevMin = -0.45, kElevMax = 0.11;  // radians, an HDL-64E's field plus margin
constexpr int kVisStates = 4, kRangeStates = 4, kPersistStates = 4;
constexpr int kStaticStates = kVisStates * kRangeStates * kPersistStates;

static_assert(kStaticStates == kStaticContexts, "candidates.h");

}  // namespace

int AngularColumn(const Eigen::Vector3f& p) {
  return kernels::AngularColumn(double(p.x()), double(p.y()), kCols);
}

Eigen::Matrix3d RotationOf(const Eigen::Vector4d& q) {
  const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  const double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  Eigen::Matrix3d R;
  R(0, 0) = 1 - 2 * (y * y + z * z);
  R(0, 1) = 2 * (x * y - w * z);
  R(0, 2) = 2 * (x * z + w * y);
  R(1, 0) = 2 * (x * y + w * z);
  R(1, 1) = 1 - 2 * (x * x + z * z);
  R(1, 2) = 2 * (y * z - w * x);
  R(2, 0) = 2 * (x * z - w * y);
  R(2, 1) = 2 * (y * z + w * x);
  R(2, 2) = 1 - 2 * (x * x + y * y);
  return R;
}

bool BallHolds(const Candidates& c, const maps::VoxelKey& centre, int reach) {
  const int64_t spare = int64_t(c.reach) - reach;
  return c.reach >= 0 && spare >= 0 &&
         (c.centre - centre).cast<int64_t>().squaredNorm() <= spare * spare;
}

namespace {

// out->voxels: the map voxels within n of key s, taken from `around` where its ball holds this
// one (DeriveCandidatesWithin's *kept), else read from the map.
Status CollectVoxels(maps::RouteMap* map, const Candidates* around, const maps::VoxelKey& s, int n,
                     Candidates* out, std::vector<int32_t>* kept) {
  const int64_t n2 = int64_t(n) * n;
  auto outside = [&](const maps::MapVoxel& v) {
    const Eigen::Matrix<int64_t, 3, 1> d = (v.key - s).cast<int64_t>();
    return d.squaredNorm() > n2;
  };
  std::vector<maps::MapVoxel>& ball = out->voxels;
  ball.clear();
  kept->clear();
  if (!around || around->resolution_m != out->resolution_m || around->voxels.empty() ||
      !BallHolds(*around, s, n)) {
    return map->CollectBall(s, n, &ball);
  }
  kept->assign(around->voxels.size(), -1);
  // At most all of them: no copies as it grows.
  ball.reserve(around->voxels.size());
  for (size_t i = 0; i < around->voxels.size(); ++i) {
    if (outside(around->voxels[i])) continue;
    (*kept)[i] = int32_t(ball.size());
    ball.push_back(around->voxels[i]);
  }
  return Status::Ok();
}

// Each candidate's static context from its projection: how far behind the nearest candidate in
// its angular cell it lies (visibility), its range, and how persistent it was in the map. Buckets
// as sums of comparisons, not chains of branches that mispredict on scattered voxels. The arrays
// by local pointers: a store to context (bytes) may alias the vectors' own.
void StaticContexts(const Projection& proj, double res, Candidates* out) {
  const size_t count = out->voxels.size();
  out->context.resize(count);
  const double* range = proj.range.data();
  const int32_t* cell = out->cell.data();
  const double* nearest = proj.nearest.data();
  const maps::MapVoxel* voxels = out->voxels.data();
  uint8_t* context = out->context.data();
  for (size_t i = 0; i < count; ++i) {
    const int32_t c = cell[i];
    const double behind = range[i] - nearest[size_t(c >= 0 ? c : 0)];
    const int vis = c >= 0 ? 1 + (behind <= 3 * res) + (behind <= res) : 0;
    const int rb = (range[i] >= 10) + (range[i] >= 20) + (range[i] >= 40);
    const maps::MapVoxel& v = voxels[i];
    const int pb = v.seen_through > 0 ? 0 : std::min<int>(v.hits, 3);
    context[i] = uint8_t((vis * kRangeStates + rb) * kPersistStates + pb);
  }
}

}  // namespace

Status DeriveCandidates(const HotPaths& hot, maps::RouteMap* map, const Eigen::Matrix3d& R,
                        const Eigen::Vector3d& t, double radius_m, Candidates* out, unsigned parts,
                        int threads) {
  std::vector<int32_t> kept;
  return DeriveCandidatesWithin(hot, map, nullptr, R, t, radius_m, out, &kept, parts, threads);
}

Status DeriveCandidatesWithin(const HotPaths& hot, maps::RouteMap* map, const Candidates* around,
                              const Eigen::Matrix3d& R, const Eigen::Vector3d& t, double radius_m,
                              Candidates* out, std::vector<int32_t>* kept, unsigned parts,
                              int threads) {
  const double res = map->resolution_m();
  out->resolution_m = res;
  const maps::VoxelKey s = maps::KeyOf(t, res);
  const int n = BallReach(radius_m, res);
  if (!KeyInRange(s) || (s.array().abs() + n >= kPackBias - 2).any()) {
    return Status::InvalidArgument("sensor position outside the map's key range");
  }
  out->centre = s;
  out->reach = n;
  DV_RETURN_IF_ERROR(CollectVoxels(map, around, s, n, out, kept));
  if ((parts & kCandidateIndex) != 0) {
    DV_RETURN_IF_ERROR(hot.IndexKeys(out->voxels, &out->index));
  } else {
    out->index = VoxelHash(0);
  }
  out->sensor.clear();
  out->context.clear();
  out->cell.clear();
  if ((parts & kCandidateProjection) == 0) return Status::Ok();
  Projection proj;
  DV_RETURN_IF_ERROR(hot.ProjectCandidates(out->voxels, res, R, t,
                                           {kCols, kRows, kElevMin, kElevMax}, &proj, threads));
  out->sensor = std::move(proj.sensor);
  out->cell = std::move(proj.cell);
  StaticContexts(proj, res, out);
  return Status::Ok();
}

// The candidates come tile by tile, each tile's voxels in KeyLess order, so inside a tile every
// causal neighbour comes before the voxel and lies in its x slab or the one before. Two planes
// of the tile's (y, z) cells hold the indices of those two slabs' candidates (-1 elsewhere: a
// plane is emptied cell by cell of the slab it held before it takes another), so a look-up is one
// read, without hashing, searching or comparing. A neighbour in another tile is found by a search
// in that tile's run when the tile came earlier. The decoder builds no voxel hash.
namespace {
constexpr size_t kPlaneCells = size_t(maps::kTileVoxels) * maps::kTileVoxels;
}  // namespace

CausalNeighbours::CausalNeighbours(const Candidates& c, size_t begin, const float* ranges)
    : v_(c.voxels),
      prev_(kPlaneCells, -1),
      cur_(kPlaneCells, -1),
      ranges_(ranges),
      hprev_(ranges ? kPlaneCells + 1 : 0, HUGE_VALF),
      hcur_(ranges ? kPlaneCells + 1 : 0, HUGE_VALF),
      prev_begin_(int32_t(begin)),
      cur_begin_(int32_t(begin)),
      top_(kPlaneCells, -1),
      below_(kPlaneCells, -1) {
  static_assert(maps::kTileVoxels == 1 << kTileBits, "tile arithmetic: shifts and masks");
  static_assert(kBorderAt > kPlaneCells, "a border cell is no plane cell");
  std::fill(std::begin(border_prev_), std::end(border_prev_), -1);
  std::fill(std::begin(border_cur_), std::end(border_cur_), -1);
  std::fill(std::begin(border_hprev_), std::end(border_hprev_), HUGE_VALF);
  std::fill(std::begin(border_hcur_), std::end(border_hcur_), HUGE_VALF);
}

// Candidate i, at plane cell `at` of the current tile and slab, lx and ly inside the tile, lies
// on its bottom (lz 0) or top (lz 255) layer: its 13 causal neighbours copied to the border
// planes as NextSlow finds them (those at z - 1 of the bottom layer in below_, those at z + 1 of
// the top layer none), each with its range; the other cells of the border planes keep -1 and
// +infinity. The candidate's own cell in the planes is Locate's, kept before.
size_t CausalNeighbours::AtZBorder(size_t i, int lx, int ly, int lz, size_t at) {
  constexpr ptrdiff_t kRow = maps::kTileVoxels, kB = ptrdiff_t(kBorderRow);
  constexpr ptrdiff_t kCell = ptrdiff_t(kBorderCell);
  // The cells in the tile: z - 1 and z on the top layer, z and z + 1 on the bottom one (on the
  // top layer, z + 1 of row y + 1 would lie past the plane's last cell: it is never read).
  const ptrdiff_t first = lz == 0 ? 0 : -1, count = 2;
  auto window = [&](const std::vector<int32_t>& cells, const std::vector<float>& ranges,
                    int32_t* to, float* to_h, ptrdiff_t dy) {
    const ptrdiff_t from = ptrdiff_t(at) + dy * kRow + first, into = kCell + dy * kB + first;
    std::copy_n(cells.data() + from, count, to + into);
    if (ranges_) std::copy_n(ranges.data() + from, count, to_h + into);
  };
  for (ptrdiff_t dy = -1; dy <= 1; ++dy) window(prev_, hprev_, border_prev_, border_hprev_, dy);
  window(cur_, hcur_, border_cur_, border_hcur_, -1);
  // The cell at z - 1 of row y in slab x, and the cells of the layer beyond the tile.
  const ptrdiff_t beyond = lz == 0 ? -1 : 1;
  for (ptrdiff_t dy = -1; dy <= 1; ++dy) {
    const int32_t j = lz == 0 ? below_[size_t(lx - 1) << kTileBits | size_t(ly + dy)] : -1;
    border_prev_[kCell + dy * kB + beyond] = j;
    border_hprev_[kCell + dy * kB + beyond] = ranges_ && j >= 0 ? ranges_[j] : HUGE_VALF;
  }
  const int32_t row_below = lz == 0 ? below_[size_t(lx) << kTileBits | size_t(ly - 1)] : -1;
  border_cur_[kCell - kB + beyond] = row_below;
  border_hcur_[kCell - kB + beyond] = ranges_ && row_below >= 0 ? ranges_[row_below] : HUGE_VALF;
  const int32_t own_below =
      lz == 0 ? below_[size_t(lx) << kTileBits | size_t(ly)] : cur_[size_t(ptrdiff_t(at) - 1)];
  border_cur_[kCell - 1] = own_below;
  border_hcur_[kCell - 1] = !ranges_         ? HUGE_VALF
                            : lz != 0        ? hcur_[size_t(ptrdiff_t(at) - 1)]
                            : own_below >= 0 ? ranges_[own_below]
                                             : HUGE_VALF;
  if (lz == kTileMask) {
    const int32_t xy = lx << kTileBits | ly;
    top_[size_t(xy)] = int32_t(i);
    top_held_.push_back(xy);
  }
  return kBorderAt;
}

int32_t CausalNeighbours::InEarlierTile(int offset, const maps::VoxelKey& key) {
  const maps::VoxelKey t = maps::TileOf(key);
  Hint& h = hint_[offset];
  const size_t current = runs_.size() - 1;
  if (h.current != current || h.tile != t) {
    h.current = current;
    h.tile = t;
    h.run = SIZE_MAX;
    // Backwards: the tile below in z is the run just before, the one below in y a few before.
    for (size_t r = current; r-- > 0;) {
      if (runs_[r].tile == t) {
        h.run = r;
        h.pos = runs_[r].begin;
        break;
      }
    }
  }
  if (h.run == SIZE_MAX) return -1;
  // A tile's run is in KeyLess order.
  const Run& run = runs_[h.run];
  auto below = [&](size_t j) { return maps::KeyLess(v_[j].key, key); };
  if (h.pos >= run.end || maps::KeyLess(key, v_[h.pos].key)) h.pos = run.begin;
  // Galloping from the hint: short moves are the common case.
  size_t lo = h.pos, step = 1;
  while (lo + step < run.end && below(lo + step)) {
    lo += step;
    step <<= 1;
  }
  // Then binary search: the first of [lo, lo + step] not below the key.
  for (size_t hi = std::min(lo + step + 1, run.end); lo < hi;) {
    const size_t mid = lo + (hi - lo) / 2;
    if (below(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  h.pos = lo;
  return lo < run.end && v_[lo].key == key ? int32_t(lo) : -1;
}

void CausalNeighbours::Clear(std::vector<int32_t>* plane, std::vector<float>* ranges, int32_t begin,
                             int32_t end) {
  for (int32_t j = begin; j < end; ++j) {
    const maps::VoxelKey& k = v_[size_t(j)].key;
    const size_t at = size_t(k.y() & kTileMask) << kTileBits | size_t(k.z() & kTileMask);
    (*plane)[at] = -1;
    if (ranges_) (*ranges)[at] = HUGE_VALF;
  }
}

void CausalNeighbours::NewTile(const maps::VoxelKey& tile, size_t i) {
  const int32_t self = int32_t(i);
  // Both slab planes emptied of the slabs they held; the top layer becomes the layer below when
  // the new tile is the one above.
  Clear(&prev_, &hprev_, prev_begin_, cur_begin_);
  Clear(&cur_, &hcur_, cur_begin_, self);
  for (int32_t j : below_held_) below_[size_t(j)] = -1;
  below_held_.clear();
  if (!runs_.empty() && tile == runs_.back().tile + maps::VoxelKey(0, 0, 1)) {
    std::swap(top_, below_);
    std::swap(top_held_, below_held_);
  } else {
    for (int32_t j : top_held_) top_[size_t(j)] = -1;
    top_held_.clear();
  }
  // The run before ends here (Next's inline path leaves its end behind); InEarlierTile searches
  // only runs that have ended.
  if (!runs_.empty()) runs_.back().end = i;
  runs_.push_back({tile, i, i});
  tile_ = tile;
  prev_begin_ = cur_begin_ = self;
  slab_x_ = v_[i].key.x();
}

void CausalNeighbours::NextSlow(size_t i, int32_t out[kCausalOffsets]) {
  const maps::VoxelKey& k = v_[i].key;
  const int32_t self = int32_t(i);
  const maps::VoxelKey tile = maps::TileOf(k);
  if (runs_.empty() || tile != runs_.back().tile) {
    NewTile(tile, i);
  } else if (k.x() != slab_x_) {
    // A new slab: prev_ is emptied and becomes the new slab's plane; the slab just ended stays
    // as prev_ if it is x - 1, else it is emptied too.
    Clear(&prev_, &hprev_, prev_begin_, cur_begin_);
    if (k.x() != slab_x_ + 1) {
      Clear(&cur_, &hcur_, cur_begin_, self);
      prev_begin_ = self;
    } else {
      prev_begin_ = cur_begin_;
    }
    std::swap(prev_, cur_);
    std::swap(hprev_, hcur_);
    cur_begin_ = self;
    slab_x_ = k.x();
  }
  const int lx = k.x() & kTileMask, ly = k.y() & kTileMask, lz = k.z() & kTileMask;
  const size_t at = size_t(ly) << kTileBits | size_t(lz);
  if (lx >= 1 && ly >= 1 && ly < kTileMask && lz >= 1 && lz < kTileMask) {
    Inside(at, out);
  } else {
    // Near the tile's border: each neighbour in whichever tile holds it.
    for (int n = 0; n < kCausalOffsets; ++n) {
      const int8_t* o = kCausalOffset[n];
      const int nx = lx + o[0], ny = ly + o[1], nz = lz + o[2];
      if (((nx | ny) & ~kTileMask) != 0) {  // x or y left the tile: [0, 256)
        out[n] = InEarlierTile(n, k + maps::VoxelKey(o[0], o[1], o[2]));
      } else if (nz < 0) {
        out[n] = below_[size_t(nx) << kTileBits | size_t(ny)];
      } else if (nz > kTileMask) {
        out[n] = -1;  // the tile above comes later
      } else {
        out[n] = (o[0] < 0 ? prev_ : cur_)[size_t(ny) << kTileBits | size_t(nz)];
      }
    }
  }
  Keep(i, at);
  if (lz == kTileMask) {
    const int32_t xy = lx << kTileBits | ly;
    top_[size_t(xy)] = self;
    top_held_.push_back(xy);
  }
}

}  // namespace dv::codec
