// Rigid poses on Eigen. Naming convention: T_a_b takes coordinates in frame b to frame a, so
// p_map = T_map_sensor * p_sensor and T_a_c = T_a_b * T_b_c.
#pragma once

#include <Eigen/Geometry>
#include <array>

namespace dv {

using Pose = Eigen::Isometry3d;

// KITTI odometry order: the 3x4 matrix row-major, 12 numbers.
Pose PoseFromKitti12(const std::array<double, 12>& v);
std::array<double, 12> PoseToKitti12(const Pose& T);

// Pose at fraction t in [0, 1] between a and b (slerp on rotation, lerp on translation).
Pose InterpolatePose(const Pose& a, const Pose& b, double t);

// Rotation angle of T in radians and translation norm in metres: the size of a pose error.
double RotationAngleRad(const Pose& T);
double TranslationNorm(const Pose& T);

}  // namespace dv
