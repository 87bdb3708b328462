// Map section body: one adaptive binary decision per candidate voxel, in canonical map order.
// Context = (static context of the candidate) x (state of its already-coded neighbours). The
// static context splats every candidate into an angular grid around the sensor and keeps, per
// cell, the nearest one: a voxel far behind the nearest surface in its direction is rarely seen.
#include "map_coder.h"

#include <algorithm>
#include <cmath>

#include "dejaview/codec/range_coder.h"
#include "hot_paths.h"

namespace dv::codec {
namespace {

constexpr int kCols = 1024, kRows = 80;
constexpr double kElevMin = -0.45, kElevMax = 0.11;  // radians, an HDL-64E's field plus margin
constexpr int kVisStates = 4, kRangeStates = 4, kPersistStates = 4, kNeighbourStates = 5;
constexpr int kStaticStates = kVisStates * kRangeStates * kPersistStates;

// Face neighbours that precede a voxel in (x, y, z) order (more neighbours cost more look-ups
// than they save bits).
constexpr int kPrev[3][3] = {{-1, 0, 0}, {0, -1, 0}, {0, 0, -1}};

int NeighbourState(const Candidates& c, size_t i, const std::vector<uint8_t>& selected) {
  int coded = 0, sel = 0;
  const maps::VoxelKey& k = c.voxels[i].key;
  for (const auto& d : kPrev) {
    const int32_t j = c.index.Find(PackKey(k + maps::VoxelKey(d[0], d[1], d[2])));
    if (j >= 0 && size_t(j) < i) {
      ++coded;
      sel += selected[size_t(j)];
    }
  }
  if (coded == 0) return 0;
  return 1 + std::min(sel, 3);
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
                        double radius_m, Candidates* out, Backend backend) {
  const double res = map->resolution_m();
  out->resolution_m = res;
  const maps::VoxelKey s = maps::KeyOf(t, res);
  const int n = int(std::ceil(radius_m / res)) + 1;
  if (!KeyInRange(s) || (s.array().abs() + n >= kPackBias - 2).any()) {
    return Status::InvalidArgument("sensor position outside the map's key range");
  }
  std::vector<maps::MapVoxel> box;
  DV_RETURN_IF_ERROR(map->CollectBox(s.array() - n, s.array() + n, &box));
  const int64_t n2 = int64_t(n) * n;
  out->voxels.clear();
  for (const maps::MapVoxel& v : box) {
    const Eigen::Matrix<int64_t, 3, 1> d = (v.key - s).cast<int64_t>();
    if (d.squaredNorm() <= n2) out->voxels.push_back(v);
  }
  const size_t count = out->voxels.size();
  out->context.resize(count);
  out->index = VoxelHash(count);
  for (size_t i = 0; i < count; ++i) out->index.Insert(PackKey(out->voxels[i].key), int32_t(i));
  Projection proj;
  DV_RETURN_IF_ERROR(ProjectCandidates(backend, out->voxels, res, R, t,
                                       {kCols, kRows, kElevMin, kElevMax}, &proj));
  out->sensor = std::move(proj.sensor);
  const std::vector<double>& range = proj.range;
  const std::vector<int32_t>& cell = proj.cell;
  const std::vector<double>& nearest = proj.nearest;
  for (size_t i = 0; i < count; ++i) {
    int vis = 0;
    if (cell[i] >= 0) {
      const double behind = range[i] - nearest[size_t(cell[i])];
      vis = behind <= res ? 3 : (behind <= 3 * res ? 2 : 1);
    }
    const int rb = range[i] < 10 ? 0 : (range[i] < 20 ? 1 : (range[i] < 40 ? 2 : 3));
    const maps::MapVoxel& v = out->voxels[i];
    const int pb = v.seen_through > 0 ? 0 : std::min<int>(v.hits, 3);
    out->context[i] = uint8_t((vis * kRangeStates + rb) * kPersistStates + pb);
  }
  return Status::Ok();
}

std::vector<uint8_t> EncodeSelection(const Candidates& c, const std::vector<uint8_t>& selected) {
  RangeEncoder rc;
  SelectionContexts ctx;
  for (size_t i = 0; i < c.voxels.size(); ++i) {
    rc.Encode(ctx.Get(c.context[i], NeighbourState(c, i, selected)), selected[i]);
  }
  return rc.Finish();
}

Status DecodeSelection(const Candidates& c, const uint8_t* data, size_t size,
                       std::vector<uint8_t>* selected) {
  RangeDecoder rc(data, size);
  SelectionContexts ctx;
  selected->assign(c.voxels.size(), 0);
  for (size_t i = 0; i < c.voxels.size(); ++i) {
    (*selected)[i] = uint8_t(rc.Decode(ctx.Get(c.context[i], NeighbourState(c, i, *selected))));
  }
  if (rc.overrun() > 0) return Status::Corruption("map section truncated");
  return Status::Ok();
}

}  // namespace dv::codec
