#include "dejaview/bench/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace dv::bench {
namespace {

std::vector<double> BruteForce(const std::vector<Eigen::Vector3f>& P,
                               const std::vector<Eigen::Vector3f>& Q) {
  std::vector<double> d;
  for (const auto& p : P) {
    double best = INFINITY;
    for (const auto& q : Q) best = std::min(best, (p.cast<double>() - q.cast<double>()).norm());
    d.push_back(best);
  }
  return d;
}

std::vector<Eigen::Vector3f> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-5, 5);
  std::vector<Eigen::Vector3f> v(n);
  for (auto& p : v) p = {u(rng), u(rng), u(rng)};
  return v;
}

TEST(Metrics, NearestDistancesMatchBruteForce) {
  const auto P = Random(300, 1), Q = Random(200, 2);
  const auto fast = NearestDistances(P, Q);
  const auto slow = BruteForce(P, Q);
  ASSERT_EQ(fast.size(), slow.size());
  for (size_t i = 0; i < fast.size(); ++i) EXPECT_DOUBLE_EQ(fast[i], slow[i]) << i;
}

TEST(Metrics, HandComputedFrame) {
  // P = {0, 1, 2} on the x axis, Q = {0, 2.5}: P->Q = {0, 1, 0.5}, Q->P = {0, 0.5}.
  const std::vector<Eigen::Vector3f> P = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}};
  const std::vector<Eigen::Vector3f> Q = {{0, 0, 0}, {2.5f, 0, 0}};
  const FrameError e = CompareFrames(P, Q);
  EXPECT_DOUBLE_EQ(e.p_to_q.mean_m, 0.5);
  EXPECT_DOUBLE_EQ(e.p_to_q.max_m, 1.0);
  EXPECT_DOUBLE_EQ(e.p_to_q.rmse_m, std::sqrt(1.25 / 3));
  EXPECT_DOUBLE_EQ(e.q_to_p.max_m, 0.5);
  EXPECT_DOUBLE_EQ(e.q_to_p.rmse_m, std::sqrt(0.25 / 2));
  EXPECT_DOUBLE_EQ(e.hausdorff_m(), 1.0);
  EXPECT_DOUBLE_EQ(e.chamfer_m(), (std::sqrt(1.25 / 3) + std::sqrt(0.125)) / 2);
}

TEST(Metrics, P99AndSetChamfer) {
  std::vector<double> d(200);
  for (size_t i = 0; i < d.size(); ++i) d[i] = double(i + 1);  // 1..200
  const OneWayError e = Summarize(d);
  EXPECT_DOUBLE_EQ(e.p99_m, 198.0);  // ceil(0.99 * 200) = 198th smallest
  EXPECT_DOUBLE_EQ(e.max_m, 200.0);
  FrameError a, b;
  a.p_to_q.rmse_m = 0.1;
  a.q_to_p.rmse_m = 0.3;
  b.p_to_q.rmse_m = 0.2;
  b.q_to_p.rmse_m = 0.0;
  EXPECT_DOUBLE_EQ(SetChamfer({a, b}), (0.15 + 0.15) / 2);
}

TEST(Metrics, EmptyReconstructionIsInfinite) {
  const FrameError e = CompareFrames(Random(5, 3), {});
  EXPECT_TRUE(std::isinf(e.p_to_q.max_m));
  EXPECT_EQ(e.q_to_p.points, 0u);
}

}  // namespace
}  // namespace dv::bench
