// Map section body: one adaptive binary decision per candidate voxel, in canonical map order.
// Context = (static context of the candidate) x (state of its already-coded neighbours). The
// static context splats every candidate into an angular grid around the sensor and keeps, per
// cell, the nearest one: a voxel far behind the nearest surface in its direction is rarely seen.
#include "map_coder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "dejaview/codec/range_coder.h"
#include "hot_paths.h"

namespace dv::codec {
namespace {

constexpr int kCols = kAngularCols, kRows = 80;
constexpr double kElevMin = -0.45, kElevMax = 0.11;  // radians, an HDL-64E's field plus margin
constexpr int kVisStates = 4, kRangeStates = 4, kPersistStates = 4, kNeighbourStates = 27;
constexpr int kStaticStates = kVisStates * kRangeStates * kPersistStates;

// Context from the face neighbours that precede a voxel in (x, y, z) order (more neighbours
// cost more look-ups than they save bits). Version 3: each of the three is not coded (absent or
// later), unselected or selected, 27 states. Versions 1 and 2: 0 none coded yet, else
// 1 + min(selected, 3).
int NeighbourState(const std::array<int32_t, 3>& prev, const std::vector<uint8_t>& selected,
                   bool each_face) {
  int coded = 0, sel = 0, state = 0;
  for (int32_t j : prev) {
    const int s = j < 0 ? 0 : 1 + selected[size_t(j)];
    state = state * 3 + s;
    coded += s > 0;
    sel += s == 2;
  }
  if (each_face) return state;
  return coded == 0 ? 0 : 1 + std::min(sel, 3);
}

class SelectionContexts {
 public:
  BitModel* Get(uint8_t static_ctx, int neighbour) {
    return &m_[static_ctx * kNeighbourStates + neighbour];
  }

 private:
  BitModel m_[kStaticStates * kNeighbourStates];
};

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

Status DeriveCandidates(maps::RouteMap* map, const Eigen::Matrix3d& R, const Eigen::Vector3d& t,
                        double radius_m, Candidates* out, unsigned parts, Backend backend) {
  const bool with_index = (parts & kCandidateIndex) != 0;
  const double res = map->resolution_m();
  out->resolution_m = res;
  const maps::VoxelKey s = maps::KeyOf(t, res);
  const int n = int(std::ceil(radius_m / res)) + 1;
  if (!KeyInRange(s) || (s.array().abs() + n >= kPackBias - 2).any()) {
    return Status::InvalidArgument("sensor position outside the map's key range");
  }
  std::vector<maps::MapVoxel>& ball = out->voxels;  // the box, then filtered in place
  ball.clear();
  DV_RETURN_IF_ERROR(map->CollectBox(s.array() - n, s.array() + n, &ball));
  const int64_t n2 = int64_t(n) * n;
  ball.erase(std::remove_if(ball.begin(), ball.end(),
                            [&](const maps::MapVoxel& v) {
                              const Eigen::Matrix<int64_t, 3, 1> d = (v.key - s).cast<int64_t>();
                              return d.squaredNorm() > n2;
                            }),
             ball.end());
  const size_t count = out->voxels.size();
  if (with_index) {
    DV_RETURN_IF_ERROR(IndexKeys(backend, out->voxels, &out->index));
  } else {
    out->index = VoxelHash(0);
  }
  out->sensor.clear();
  out->context.clear();
  out->cell.clear();
  if ((parts & kCandidateProjection) == 0) return Status::Ok();
  out->context.resize(count);
  Projection proj;
  DV_RETURN_IF_ERROR(ProjectCandidates(backend, out->voxels, res, R, t,
                                       {kCols, kRows, kElevMin, kElevMax}, &proj));
  out->sensor = std::move(proj.sensor);
  const std::vector<double>& range = proj.range;
  out->cell = std::move(proj.cell);
  const std::vector<int32_t>& cell = out->cell;
  const std::vector<double>& nearest = proj.nearest;
  // Buckets as sums of comparisons, not chains of branches that mispredict on scattered voxels.
  for (size_t i = 0; i < count; ++i) {
    const int32_t c = cell[i];
    const double behind = range[i] - nearest[size_t(c >= 0 ? c : 0)];
    const int vis = c >= 0 ? 1 + (behind <= 3 * res) + (behind <= res) : 0;
    const int rb = (range[i] >= 10) + (range[i] >= 20) + (range[i] >= 40);
    const maps::MapVoxel& v = out->voxels[i];
    const int pb = v.seen_through > 0 ? 0 : std::min<int>(v.hits, 3);
    out->context[i] = uint8_t((vis * kRangeStates + rb) * kPersistStates + pb);
  }
  return Status::Ok();
}

// The candidates come tile by tile, each tile's voxels in KeyLess order. Inside a tile the
// neighbour at - e_z can only be the voxel just before; the one at - e_y lies in the same x slab
// and the one at - e_x in the slab before, and as the voxel moves forward so do they: a forward
// cursor per axis, reset to the start of its slab, finds each without hashing (each cursor
// crosses a slab once). A neighbour in the tile below along an axis is found by binary search
// in that tile's run, which came first. No voxel hash is needed, so the decoder builds none.
std::vector<std::array<int32_t, 3>> PrecedingNeighbours(const Candidates& c) {
  const std::vector<maps::MapVoxel>& v = c.voxels;
  // PackKey orders keys as KeyLess does (x, then y, then z), so one integer compare replaces three.
  std::vector<uint64_t> packed(v.size());
  for (size_t i = 0; i < v.size(); ++i) packed[i] = PackKey(v[i].key);
  std::vector<std::array<int32_t, 3>> prev(v.size());
  struct Run {
    maps::VoxelKey tile;
    size_t begin, end;
  };
  std::vector<Run> runs;  // tiles are few: a linear search finds one
  // The neighbour at - e_a when it lies in the tile below along a, which came first.
  auto below = [&](const maps::VoxelKey& k, int a, uint64_t n) -> int32_t {
    maps::VoxelKey t = k;
    --t[a];
    t = maps::TileOf(t);
    for (const Run& r : runs) {
      if (r.tile != t) continue;
      const auto it =
          std::lower_bound(packed.begin() + long(r.begin), packed.begin() + long(r.end), n);
      return it != packed.begin() + long(r.end) && *it == n ? int32_t(it - packed.begin()) : -1;
    }
    return -1;
  };
  static_assert(maps::kTileVoxels == 256, "tile arithmetic below: shifts and masks by 8 bits");
  constexpr int kLow = maps::kTileVoxels - 1;
  // Cursors on the neighbours at - e_x and - e_y, and where the current x slab began.
  size_t cx = 0, cy = 0, slab = 0;
  // PackKey(k) - kStepX, - kStepY and - 1 are the keys of k - e_x, - e_y and - e_z.
  constexpr uint64_t kStepX = uint64_t(1) << 42, kStepY = uint64_t(1) << 21;
  maps::VoxelKey tile(INT32_MIN, INT32_MIN, INT32_MIN);
  for (size_t i = 0; i < v.size(); ++i) {
    const maps::VoxelKey& k = v[i].key;
    const uint64_t p = packed[i];
    // Arithmetic shifts: floor division by 256 for negative keys too (two's complement).
    const maps::VoxelKey t(k.x() >> 8, k.y() >> 8, k.z() >> 8);
    if (t != tile) {
      tile = t;
      runs.push_back({t, i, i});
      cx = cy = slab = i;
    } else if (k.x() != v[i - 1].key.x()) {
      // A new x slab: the - e_x neighbours are in the slab just ended, if it is at x - 1.
      cx = v[i - 1].key.x() == k.x() - 1 ? slab : i;
      cy = slab = i;
    }
    runs.back().end = i + 1;
    std::array<int32_t, 3>& out = prev[i];
    if ((k.x() & kLow) == 0) {
      out[0] = below(k, 0, p - kStepX);
    } else {
      // packed[i] = p ends this scan and the next: no bound check needed.
      while (packed[cx] < p - kStepX) ++cx;
      out[0] = packed[cx] == p - kStepX ? int32_t(cx) : -1;
    }
    if ((k.y() & kLow) == 0) {
      out[1] = below(k, 1, p - kStepY);
    } else {
      while (packed[cy] < p - kStepY) ++cy;
      out[1] = packed[cy] == p - kStepY ? int32_t(cy) : -1;
    }
    if ((k.z() & kLow) == 0) {
      out[2] = below(k, 2, p - 1);
    } else {
      // Inside the tile the key - e_z can only be the one just before.
      out[2] = i > runs.back().begin && packed[i - 1] == p - 1 ? int32_t(i - 1) : -1;
    }
  }
  return prev;
}

std::vector<uint8_t> EncodeSelection(const Candidates& c, const std::vector<uint8_t>& selected,
                                     const SelectionModel& model) {
  RangeEncoder rc(model.adaptation);
  auto ctx = std::make_unique<SelectionContexts>();
  const std::vector<std::array<int32_t, 3>> prev = PrecedingNeighbours(c);
  for (size_t i = 0; i < c.voxels.size(); ++i) {
    rc.Encode(ctx->Get(c.context[i], NeighbourState(prev[i], selected, model.each_face)),
              selected[i]);
  }
  return rc.Finish();
}

Status DecodeSelection(const Candidates& c, const uint8_t* data, size_t size,
                       const SelectionModel& model, std::vector<uint8_t>* selected) {
  RangeDecoder rc(data, size, model.adaptation);
  auto ctx = std::make_unique<SelectionContexts>();
  selected->assign(c.voxels.size(), 0);
  const std::vector<std::array<int32_t, 3>> prev = PrecedingNeighbours(c);
  for (size_t i = 0; i < c.voxels.size(); ++i) {
    (*selected)[i] = uint8_t(
        rc.Decode(ctx->Get(c.context[i], NeighbourState(prev[i], *selected, model.each_face))));
  }
  if (rc.overrun() > 0) return Status::Corruption("map section truncated");
  return Status::Ok();
}

}  // namespace dv::codec
