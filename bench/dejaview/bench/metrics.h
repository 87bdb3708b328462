// The error metrics of BENCHMARK.md, exactly as defined there. For an original frame P and its
// reconstruction Q, nn(p, Q) is the Euclidean distance from p to its nearest point in Q.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "dejaview/base/point_cloud.h"

namespace dv::bench {

struct OneWayError {
  double mean_m = 0;
  double p99_m = 0;
  double max_m = 0;
  double rmse_m = 0;  // sqrt(mean of nn^2): DejaView's per-frame Chamfer term
  size_t points = 0;
};

// The index in Q of each p's nearest point (nanoflann k-d tree over Q); Q must not be empty.
std::vector<size_t> NearestIndices(const std::vector<Eigen::Vector3f>& P,
                                   const std::vector<Eigen::Vector3f>& Q);
// nn(p, Q) for every p in P (nanoflann k-d tree over Q). Q empty: every distance is +inf.
std::vector<double> NearestDistances(const std::vector<Eigen::Vector3f>& P,
                                     const std::vector<Eigen::Vector3f>& Q);
OneWayError Summarize(std::vector<double> distances);

struct FrameError {
  OneWayError p_to_q;  // original -> reconstruction
  OneWayError q_to_p;  // reconstruction -> original
  double hausdorff_m() const;
  // DejaView's per-frame CD: (RMSE(P->Q) + RMSE(Q->P)) / 2.
  double chamfer_m() const { return (p_to_q.rmse_m + q_to_p.rmse_m) / 2; }
};

FrameError CompareFrames(const std::vector<Eigen::Vector3f>& original,
                         const std::vector<Eigen::Vector3f>& reconstruction);

// Over a set of frames: each direction's RMSE is averaged over the frames, then
// CD = (mean RMSE(P->Q) + mean RMSE(Q->P)) / 2 (every frame counts).
double SetChamfer(const std::vector<FrameError>& frames);

}  // namespace dv::bench
