// Refines a pose prior against the candidate map voxels: ICP with a Geman-McClure kernel and a
// coarse-to-fine correspondence distance, in the manner of KISS-ICP's Registration; the coarse
// stage matches points to the map's planar patches, the fine stage to its representatives.
// Only the encoder registers; the refined pose travels in the payload, so this need not be
// deterministic across machines.
#pragma once

#include <Eigen/Core>
#include <memory>
#include <vector>

#include "candidates.h"
#include "dejaview/base/pose.h"
#include "sorted_grid.h"

namespace dv::codec {

// One iteration's normal equations H dx = -b over (translation, rotation), from matches of the
// moved source point p with residual r, kept as the few sums they are made of, not as 6 x 6
// products per match (those were a large share of registration's time). A plane
// match (normal n, residual along it rn) adds w Jn Jn^T and w rn Jn with Jn = (n, p x n); a point
// match, with J = [I, -[p]x], adds w J^T J = w [[I, -[p]x], [[p]x, |p|^2 I - p p^T]] and
// w J^T r = w (r, p x r): its sums are those of w, w p, w p p^T, w r and w p x r.
class NormalSums {
 public:
  void AddPlane(const Eigen::Vector3d& p, const Eigen::Vector3d& n, double rn, double w);
  void AddPoint(const Eigen::Vector3d& p, const Eigen::Vector3d& r, double w);
  void Add(const NormalSums& other);
  size_t count() const { return count_; }  // matches added
  // H and b of every match added (both overwritten).
  void Build(Eigen::Matrix<double, 6, 6>* H, Eigen::Matrix<double, 6, 1>* b) const;

 private:
  double plane_[21] = {}, plane_b_[6] = {};  // upper triangle of sum w Jn Jn^T by rows; sum w rn Jn
  double w_ = 0, wpp_[6] = {};               // sum w; sum w p p^T (xx, xy, xz, yy, yz, zz)
  Eigen::Vector3d wp_ = Eigen::Vector3d::Zero(), wr_ = Eigen::Vector3d::Zero(),
                  wpr_ = Eigen::Vector3d::Zero();
  size_t count_ = 0;
};

struct RegistrationResult {
  Pose T_map_sensor = Pose::Identity();
  size_t correspondences = 0;
  bool converged = false;
};

// frame: sensor-frame points; candidates: derived around the prior (their map-frame
// representatives are used; with the index where hot.UsesCandidateIndex()). Returns the prior
// unchanged when too few correspondences exist. An error only when the backend fails. The
// correspondence searches are hot paths of `hot`.
StatusOr<RegistrationResult> RegisterFrame(const HotPaths& hot,
                                           const std::vector<Eigen::Vector3f>& frame,
                                           const Candidates& candidates,
                                           const Pose& T_map_sensor_prior);

// What RegisterFrame keeps of a ball of map voxels for the frames after it: the ball's
// candidates (voxels only) and, where the backend sorts keys (the CPU), the grid of their keys.
// Nulls before the first call.
struct KeptBall {
  const Candidates* candidates = nullptr;
  const SortedGrid* grid = nullptr;
};

// The map side of registration for one ball of map voxels, kept between frames: the encoder
// (codec.h Encoder) owns one per map.
struct RegistrationMap;
class RegistrationBall {
 public:
  RegistrationBall();
  ~RegistrationBall();
  RegistrationBall(const RegistrationBall&) = delete;
  RegistrationBall& operator=(const RegistrationBall&) = delete;
  KeptBall kept() const;

 private:
  friend StatusOr<RegistrationResult> RegisterFrame(const HotPaths&,
                                                    const std::vector<Eigen::Vector3f>&,
                                                    maps::RouteMap*, RegistrationBall*, const Pose&,
                                                    double, int, int);
  std::unique_ptr<RegistrationMap> map_;
};

// The same against the map voxels within radius_m of the prior's position. What registration
// derives from them alone (their representatives, the centroids of their planar patches, the
// correspondence grids over both) is kept in *ball for a ball kRegistrationReuseM wider, and
// serves every later frame whose ball lies inside it: rebuilt about every kRegistrationReuseM of
// travel, not every frame. The wider ball adds map voxels beyond radius_m, which only matches
// near the ball's edge can reach.
// On the CPU it also keeps a SortedGrid of the ball's keys with max_nb >= grid_nb, which its
// fine stage searches and the encoder's classification takes its grid from (KeptBall).
// Up to `threads` threads search correspondences; the result is the same with any number.
constexpr double kRegistrationReuseM = 10.0;
StatusOr<RegistrationResult> RegisterFrame(const HotPaths& hot,
                                           const std::vector<Eigen::Vector3f>& frame,
                                           maps::RouteMap* map, RegistrationBall* ball,
                                           const Pose& T_map_sensor_prior, double radius_m,
                                           int grid_nb = 1, int threads = 1);

}  // namespace dv::codec
