#include "registration.h"

#include <Eigen/Cholesky>
#include <Eigen/Geometry>
#include <array>
#include <cmath>

namespace dv::codec {
namespace {

constexpr double kSourceVoxelM = 1.0;  // frame subsample of the coarse stage (one point per cell)
constexpr double kFineSourceVoxelM = 0.5;  // and of the fine stage
constexpr double kCoarseVoxelM = 0.5;      // correspondence hash of the coarse iterations
constexpr int kCoarsePerCell = 8;
constexpr int kCoarseIterations = 6;
constexpr int kMaxFineIterations = 8;
// The fine stage stops once an update moves points less than this (metres at 10 m).
constexpr double kConvergedM = 2e-4;
constexpr size_t kMinCorrespondences = 100;

// Correspondence store for the coarse stage: at most kCoarsePerCell map points per cell.
class CoarseGrid {
 public:
  explicit CoarseGrid(const std::vector<Eigen::Vector3d>& pts) : hash_(pts.size() / 4 + 16) {
    for (size_t i = 0; i < pts.size(); ++i) {
      const uint64_t key = PackKey(maps::KeyOf(pts[i], kCoarseVoxelM));
      const int32_t cell = hash_.Insert(key, int32_t(cells_.size()));
      if (size_t(cell) == cells_.size()) cells_.push_back({});
      Cell& c = cells_[size_t(cell)];
      if (c.n < kCoarsePerCell) c.idx[c.n++] = int32_t(i);
    }
  }
  template <typename F>
  void ForNeighbours(const Eigen::Vector3d& p, F&& f) const {
    const maps::VoxelKey k = maps::KeyOf(p, kCoarseVoxelM);
    for (int dx = -1; dx <= 1; ++dx) {
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dz = -1; dz <= 1; ++dz) {
          const int32_t cell = hash_.Find(PackKey(k + maps::VoxelKey(dx, dy, dz)));
          if (cell < 0) continue;
          const Cell& c = cells_[size_t(cell)];
          for (int j = 0; j < c.n; ++j) f(c.idx[j]);
        }
      }
    }
  }

 private:
  struct Cell {
    std::array<int32_t, kCoarsePerCell> idx;
    int n = 0;
  };
  VoxelHash hash_;
  std::vector<Cell> cells_;
};

// One point per cell of side voxel_m, between 3 and 80 m from the sensor.
std::vector<Eigen::Vector3d> Subsample(const std::vector<Eigen::Vector3f>& frame, double voxel_m) {
  std::vector<Eigen::Vector3d> out;
  VoxelHash seen(frame.size() / 8 + 16);
  for (const Eigen::Vector3f& p : frame) {
    const Eigen::Vector3d pd = p.cast<double>();
    const double r = pd.norm();
    if (r < 3 || r > 80) continue;
    const maps::VoxelKey k = maps::KeyOf(pd, voxel_m);
    if (!KeyInRange(k)) continue;
    const int32_t id = int32_t(out.size());
    if (seen.Insert(PackKey(k), id) == id) out.push_back(pd);
  }
  return out;
}

Eigen::Matrix3d Skew(const Eigen::Vector3d& v) {
  Eigen::Matrix3d S;
  S << 0, -v.z(), v.y(), v.z(), 0, -v.x(), -v.y(), v.x(), 0;
  return S;
}

}  // namespace

RegistrationResult RegisterFrame(const std::vector<Eigen::Vector3f>& frame, const Candidates& c,
                                 const Pose& prior) {
  RegistrationResult result;
  result.T_map_sensor = prior;
  if (c.voxels.empty()) return result;
  std::vector<Eigen::Vector3d> map_pts(c.voxels.size());
  for (size_t i = 0; i < c.voxels.size(); ++i) {
    map_pts[i] = maps::Representative(c.voxels[i], c.resolution_m);
  }
  const std::vector<Eigen::Vector3d> coarse_source = Subsample(frame, kSourceVoxelM);
  const std::vector<Eigen::Vector3d> fine_source = Subsample(frame, kFineSourceVoxelM);
  const CoarseGrid coarse(map_pts);
  Pose T = prior;
  const double res = c.resolution_m;
  for (int it = 0; it < kCoarseIterations + kMaxFineIterations; ++it) {
    const bool fine = it >= kCoarseIterations;
    const double max_dist = fine ? std::max(res, 0.1) : std::max(0.3, 1.0 * std::pow(0.75, it));
    const double kernel = max_dist / 3;
    Eigen::Matrix<double, 6, 6> H = Eigen::Matrix<double, 6, 6>::Zero();
    Eigen::Matrix<double, 6, 1> b = Eigen::Matrix<double, 6, 1>::Zero();
    size_t used = 0;
    for (const Eigen::Vector3d& ps : fine ? fine_source : coarse_source) {
      const Eigen::Vector3d p = T * ps;
      double best = max_dist * max_dist;
      int32_t best_i = -1;
      auto consider = [&](int32_t i) {
        const double d2 = (map_pts[size_t(i)] - p).squaredNorm();
        if (d2 < best) {
          best = d2;
          best_i = i;
        }
      };
      if (fine) {
        const maps::VoxelKey k = maps::KeyOf(p, res);
        for (int dx = -1; dx <= 1; ++dx) {
          for (int dy = -1; dy <= 1; ++dy) {
            for (int dz = -1; dz <= 1; ++dz) {
              const int32_t i = c.index.Find(PackKey(k + maps::VoxelKey(dx, dy, dz)));
              if (i >= 0) consider(i);
            }
          }
        }
      } else {
        coarse.ForNeighbours(p, consider);
      }
      if (best_i < 0) continue;
      const Eigen::Vector3d r = p - map_pts[size_t(best_i)];
      Eigen::Matrix<double, 3, 6> J;
      J.leftCols<3>().setIdentity();
      J.rightCols<3>() = -Skew(p);
      const double w = kernel * kernel / ((kernel + r.squaredNorm()) * (kernel + r.squaredNorm()));
      H += w * J.transpose() * J;
      b += w * J.transpose() * r;
      ++used;
    }
    result.correspondences = used;
    if (used < kMinCorrespondences) return result;
    const Eigen::Matrix<double, 6, 1> dx = -H.ldlt().solve(b);
    Pose step = Pose::Identity();
    const double angle = dx.tail<3>().norm();
    if (angle > 0)
      step.linear() = Eigen::AngleAxisd(angle, dx.tail<3>() / angle).toRotationMatrix();
    step.translation() = dx.head<3>();
    T = step * T;
    if (fine && dx.head<3>().norm() + 10 * angle < kConvergedM) break;
  }
  // A refinement far from the prior is a failure (wrong place in the map), not a correction.
  const Pose delta = prior.inverse() * T;
  if (TranslationNorm(delta) > 2.0 || RotationAngleRad(delta) > 0.1) return result;
  result.T_map_sensor = T;
  result.converged = true;
  return result;
}

}  // namespace dv::codec
