// A small synthetic street for fast, deterministic map and codec tests: a ray-cast scan (an
// HDL-64E-like pattern: 0.3 deg columns, 0.4 deg rows) of a ground plane, two facades and, in
// chosen frames, a car-sized box.
#pragma once

#include <Eigen/Geometry>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "dejaview/base/drive.h"
#include "dejaview/base/kitti.h"

namespace dv::test {

struct Box {
  Eigen::Vector3d lo, hi;
};
inline Box CarAt(double x, double y) { return {{x, y, -1.7}, {x + 4, y + 1.8, -0.2}}; }

inline Pose StreetPose(double x) {
  Pose T = Pose::Identity();
  T.translation() = Eigen::Vector3d(x, 0.3, 0.1);
  T.linear() = Eigen::AngleAxisd(0.02 * x, Eigen::Vector3d::UnitZ()).toRotationMatrix();
  return T;
}

// Ray-casts the street from T_world_sensor; points in the sensor frame.
// Pillars every 5 m: without them the street is a corridor along which registration cannot
// fix the position.
inline std::vector<Box> Pillars() {
  std::vector<Box> b;
  for (double x = -30; x < 40; x += 5) b.push_back({{x, 5.5, -1.7}, {x + 0.4, 5.9, 3}});
  for (double x = -29; x < 40; x += 6) b.push_back({{x, -8, -1.7}, {x + 2, -7, 4}});  // porches
  return b;
}

inline PointCloud StreetFrame(const Pose& T_world_sensor, std::vector<Box> boxes = {}) {
  for (const Box& p : Pillars()) boxes.push_back(p);
  std::mt19937 rng(uint32_t(T_world_sensor.translation().x() * 1000 + 17));
  std::normal_distribution<double> noise(0, 0.01);
  PointCloud cloud;
  const Eigen::Vector3d o = T_world_sensor.translation();
  for (int row = 0; row < 50; ++row) {
    const double e = (-20 + 0.4 * row) * M_PI / 180;
    for (int col = 0; col < 1200; ++col) {
      const double a = (-180 + 0.3 * col) * M_PI / 180;
      const Eigen::Vector3d ds(std::cos(e) * std::cos(a), std::cos(e) * std::sin(a), std::sin(e));
      const Eigen::Vector3d d = T_world_sensor.linear() * ds;
      double t = 1e9;
      if (d.z() < 0) t = std::min(t, (-1.7 - o.z()) / d.z());
      if (d.y() > 0) t = std::min(t, (8 - o.y()) / d.y());
      if (d.y() < 0) t = std::min(t, (-8 - o.y()) / d.y());
      for (const Box& b : boxes) {
        double t0 = 0, t1 = 1e9;
        for (int ax = 0; ax < 3; ++ax) {
          if (std::fabs(d[ax]) < 1e-12) {
            if (o[ax] < b.lo[ax] || o[ax] > b.hi[ax]) t0 = 2e9;
            continue;
          }
          double ta = (b.lo[ax] - o[ax]) / d[ax], tb = (b.hi[ax] - o[ax]) / d[ax];
          if (ta > tb) std::swap(ta, tb);
          t0 = std::max(t0, ta);
          t1 = std::min(t1, tb);
        }
        if (t0 <= t1 && t0 > 0) t = std::min(t, t0);
      }
      if (t > 30 || t < 1.5) continue;
      t += noise(rng);
      const Eigen::Vector3d hit = o + t * d;
      cloud.push_back((t * ds).cast<float>(), float(std::fmod(std::fabs(hit.x()) * 0.37, 1.0)));
    }
  }
  return cloud;
}

// Writes a drive (velodyne/*.bin + poses.txt) of the street seen from poses at the given x; the
// frame at car_frame (if any) also holds a car at (3, -4).
inline Drive WriteStreetDrive(const std::string& dir, const std::vector<double>& xs,
                              int car_frame = -1) {
  std::filesystem::create_directories(dir + "/velodyne");
  std::vector<Pose> poses;
  for (size_t i = 0; i < xs.size(); ++i) {
    poses.push_back(StreetPose(xs[i]));
    char name[48];
    std::snprintf(name, sizeof(name), "/velodyne/%06zu.bin", i);
    const auto boxes = int(i) == car_frame ? std::vector<Box>{CarAt(3, -4)} : std::vector<Box>();
    (void)WriteKittiBin(dir + name, StreetFrame(poses.back(), boxes));
  }
  (void)WriteKittiPoses(dir + "/poses.txt", poses);
  return OpenDrive(dir).value();
}

}  // namespace dv::test
