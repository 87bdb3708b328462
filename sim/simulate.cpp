#include "dejaview/sim/simulate.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/sim/rng.h"

namespace dv::sim {
namespace {

constexpr double kSensorHeight = 1.73;  // KITTI's Velodyne mount
constexpr double kHalfWheelbase = 1.35, kHalfTrack = 0.8;
constexpr double kMountPitchDeg = 0.6, kMountRollDeg = -1.2, kBodySwayDeg = 0.7;
constexpr double kFrameS = 0.1;

std::string FrameName(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%06d", i);
  return buf;
}

double DaySpeed(const SimOptions& o, int day) {
  Rng r(StreamSeed(o.seed, uint64_t(day) + 1, 0x65676f));  // "ego"
  return o.speed_mps * r.Uniform(0.9, 1.1);
}

// A smooth error signal in [-1, 1]: three sines with per-day phases, so the prior drifts the
// way a localiser does instead of jumping frame to frame.
double Smooth(uint64_t seed, int day, int axis, double t) {
  Rng r(StreamSeed(seed, uint64_t(day) + 1, 0x707269 + uint64_t(axis)));  // "pri"
  double v = 0;
  for (int k = 0; k < 3; ++k) v += std::sin(r.Uniform(0.05, 0.4) * t + r.Uniform(0, 6.3)) / 3;
  return v;
}

}  // namespace

Pose EgoPose(const World& world, const SimOptions& o, int day, int frame) {
  const double t = frame * kFrameS;
  const double s = 20.0 + 1.3 * day + DaySpeed(o, day) * t;
  const double lateral = -1.75 + 0.25 * Smooth(o.seed, day, 9, t);
  const double h = world.route().HeadingAt(s);
  const Eigen::Vector2d fwd(std::cos(h), std::sin(h)), left(-std::sin(h), std::cos(h));
  const Eigen::Vector2d p = world.route().PointAt(s) + lateral * left;
  // The body rests on its four wheels: it pitches with the road's grade and rolls with its
  // camber, and the sensor sits its mount height above the ground along the body's up axis.
  Eigen::Vector3d w[4];
  for (int k = 0; k < 4; ++k) {
    const Eigen::Vector2d q = p + (k & 1 ? -kHalfWheelbase : kHalfWheelbase) * fwd +
                              (k & 2 ? -kHalfTrack : kHalfTrack) * left;
    w[k] = Eigen::Vector3d(q.x(), q.y(), world.BaseHeight(q.x(), q.y()));
  }
  const Eigen::Vector3d along = (w[0] + w[2]) - (w[1] + w[3]);   // rear to front
  const Eigen::Vector3d across = (w[0] + w[1]) - (w[2] + w[3]);  // right to left
  const Eigen::Vector3d up = along.cross(across).normalized();
  const Eigen::Vector3d x_axis = (along - along.dot(up) * up).normalized();
  Pose T = Pose::Identity();
  T.linear().col(0) = x_axis;
  T.linear().col(1) = up.cross(x_axis);
  T.linear().col(2) = up;
  T.translation() = (w[0] + w[1] + w[2] + w[3]) / 4 + kSensorHeight * up;
  // The sensor is not level with the road under the wheels: the body pitches and rolls on its
  // suspension, and the mount has its own small tilt. KITTI's ground 4-8 m away is a plane
  // tilted 0.3-2 deg in the sensor frame.
  const double pitch = (kMountPitchDeg + kBodySwayDeg * Smooth(o.seed, day, 10, t)) * M_PI / 180;
  const double roll = (kMountRollDeg + kBodySwayDeg * Smooth(o.seed, day, 11, t)) * M_PI / 180;
  T.linear() = T.linear() * (Eigen::AngleAxisd(pitch, Eigen::Vector3d::UnitY()) *
                             Eigen::AngleAxisd(roll, Eigen::Vector3d::UnitX()))
                                .toRotationMatrix();
  return T;
}

Status Simulate(const SimOptions& o, SimReport* report,
                const std::function<void(int, int)>& progress) {
  if (o.days < 1 || o.frames < 1)
    return Status::InvalidArgument("--days and --frames must be >= 1");
  if (o.lidar.elevation_deg.empty() || o.lidar.azimuth_steps < 1) {
    return Status::InvalidArgument("LiDAR model has no beams");
  }
  const double needed = 20.0 + 1.3 * o.days + o.speed_mps * 1.1 * o.frames * kFrameS + 50.0;
  const double length = std::max(o.route_length_m, needed);
  const auto start = std::chrono::steady_clock::now();
  SimReport rep;
  for (int day = 0; day < o.days; ++day) {
    char dname[16];
    std::snprintf(dname, sizeof(dname), "day_%02d", day);
    const std::string dir = o.out_dir + "/" + dname;
    DV_RETURN_IF_ERROR(MakeDirs(dir + "/velodyne"));
    DV_RETURN_IF_ERROR(MakeDirs(dir + "/labels"));
    const World world(o.seed, day, length, o.rates);
    std::vector<Pose> gt(size_t(o.frames)), prior(size_t(o.frames));
    std::vector<double> stamps(size_t(o.frames));
    for (int i = 0; i < o.frames; ++i) {
      const double t = i * kFrameS;
      gt[i] = EgoPose(world, o, day, i);
      const Eigen::Vector3d e(Smooth(o.seed, day, 0, t), Smooth(o.seed, day, 1, t),
                              0.3 * Smooth(o.seed, day, 2, t));
      const double yaw_err = o.prior_yaw_deg * M_PI / 180 * Smooth(o.seed, day, 3, t);
      prior[i] = gt[i];
      prior[i].translation() += o.prior_sigma_m * e;
      prior[i].linear() = Eigen::AngleAxisd(yaw_err, Eigen::Vector3d::UnitZ()) * gt[i].linear();
      stamps[i] = t;
    }
    std::atomic<int> next{0}, done{0};
    std::atomic<size_t> points{0};
    std::mutex mu;
    Status first_error;
    const auto work = [&] {
      for (int i = next++; i < o.frames; i = next++) {
        const Scan scan =
            ScanFrame(world, gt[i], world.DynamicAt(i * kFrameS), o.lidar,
                      StreamSeed(o.seed, uint64_t(day) + 1, 0x66726d00 + uint64_t(i)));
        Status s = WriteKittiBin(dir + "/velodyne/" + FrameName(i) + ".bin", scan.cloud);
        if (s.ok()) s = WriteLabels(dir + "/labels/" + FrameName(i) + ".label", scan.labels);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.ok()) first_error = s;
          next = o.frames;
        }
        points += scan.cloud.size();
        ++done;
      }
    };
    std::vector<std::thread> pool;
    for (int k = 0; k < std::max(1, o.threads); ++k) pool.emplace_back(work);
    int shown = -1;
    while (done < o.frames && first_error.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (progress && done != shown) progress(day, shown = done);
    }
    for (auto& t : pool) t.join();
    DV_RETURN_IF_ERROR(first_error);
    if (progress) progress(day, o.frames);
    DV_RETURN_IF_ERROR(WriteKittiPoses(dir + "/poses.txt", gt));
    DV_RETURN_IF_ERROR(WriteKittiPoses(dir + "/poses_prior.txt", prior));
    DV_RETURN_IF_ERROR(WriteTimestamps(dir + "/timestamps.txt", stamps));
    rep.frames += size_t(o.frames);
    rep.points += points;
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (report) *report = rep;
  return Status::Ok();
}

}  // namespace dv::sim
