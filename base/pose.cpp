#include "dejaview/base/pose.h"

#include <algorithm>
#include <cmath>

namespace dv {

Pose PoseFromKitti12(const std::array<double, 12>& v) {
  Eigen::Matrix3d R;
  R << v[0], v[1], v[2], v[4], v[5], v[6], v[8], v[9], v[10];
  // KITTI ground truth is written with ~1e-6 precision, so re-orthonormalise.
  Eigen::Quaterniond q(R);
  q.normalize();
  Pose T = Pose::Identity();
  T.linear() = q.toRotationMatrix();
  T.translation() = Eigen::Vector3d(v[3], v[7], v[11]);
  return T;
}

std::array<double, 12> PoseToKitti12(const Pose& T) {
  std::array<double, 12> v{};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) v[r * 4 + c] = T.linear()(r, c);
    v[r * 4 + 3] = T.translation()(r);
  }
  return v;
}

Pose InterpolatePose(const Pose& a, const Pose& b, double t) {
  Eigen::Quaterniond qa(a.linear()), qb(b.linear());
  Pose T = Pose::Identity();
  T.linear() = qa.slerp(t, qb).toRotationMatrix();
  T.translation() = (1.0 - t) * a.translation() + t * b.translation();
  return T;
}

double RotationAngleRad(const Pose& T) {
  const double c = (T.linear().trace() - 1.0) / 2.0;
  return std::acos(std::clamp(c, -1.0, 1.0));
}

double TranslationNorm(const Pose& T) { return T.translation().norm(); }

}  // namespace dv
