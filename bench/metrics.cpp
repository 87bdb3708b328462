#include "dejaview/bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include "cloud_tree.h"

namespace dv::bench {
namespace {

using KdTree = CloudTree<3>;

}  // namespace

std::vector<size_t> NearestIndices(const std::vector<Eigen::Vector3f>& P,
                                   const std::vector<Eigen::Vector3f>& Q) {
  CloudAdaptor adaptor{Q};
  KdTree tree(3, adaptor, nanoflann::KDTreeSingleIndexAdaptorParams(16));
  tree.buildIndex();
  std::vector<size_t> out(P.size());
  for (size_t i = 0; i < P.size(); ++i) {
    size_t idx = 0;
    float dist2 = 0;
    nanoflann::KNNResultSet<float> result(1);
    result.init(&idx, &dist2);
    tree.findNeighbors(result, P[i].data(), nanoflann::SearchParams());
    out[i] = idx;
  }
  return out;
}

std::vector<double> NearestDistances(const std::vector<Eigen::Vector3f>& P,
                                     const std::vector<Eigen::Vector3f>& Q) {
  std::vector<double> d(P.size(), std::numeric_limits<double>::infinity());
  if (Q.empty()) return d;
  const std::vector<size_t> nearest = NearestIndices(P, Q);
  // Recomputed in double from the chosen neighbour so the metric does not inherit float
  // accumulation error from the tree's distance.
  for (size_t i = 0; i < P.size(); ++i)
    d[i] = (P[i].cast<double>() - Q[nearest[i]].cast<double>()).norm();
  return d;
}

OneWayError Summarize(std::vector<double> distances) {
  OneWayError e;
  e.points = distances.size();
  if (distances.empty()) return e;
  double sum = 0, sum2 = 0;
  for (double v : distances) {
    sum += v;
    sum2 += v * v;
  }
  e.mean_m = sum / double(distances.size());
  e.rmse_m = std::sqrt(sum2 / double(distances.size()));
  // p99: the smallest value with at least 99% of the distances at or below it.
  const size_t k = size_t(std::ceil(0.99 * double(distances.size()))) - 1;
  std::nth_element(distances.begin(), distances.begin() + long(k), distances.end());
  e.p99_m = distances[k];
  e.max_m = *std::max_element(distances.begin() + long(k), distances.end());
  return e;
}

double FrameError::hausdorff_m() const { return std::max(p_to_q.max_m, q_to_p.max_m); }

FrameError CompareFrames(const std::vector<Eigen::Vector3f>& original,
                         const std::vector<Eigen::Vector3f>& reconstruction) {
  FrameError e;
  e.p_to_q = Summarize(NearestDistances(original, reconstruction));
  e.q_to_p = Summarize(NearestDistances(reconstruction, original));
  return e;
}

double SetChamfer(const std::vector<FrameError>& frames) {
  if (frames.empty()) return 0;
  double pq = 0, qp = 0;
  for (const auto& f : frames) {
    pq += f.p_to_q.rmse_m;
    qp += f.q_to_p.rmse_m;
  }
  return (pq + qp) / (2.0 * double(frames.size()));
}

}  // namespace dv::bench
