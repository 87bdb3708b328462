// Multi-day drives of one route: DIR/day_NN/{velodyne/*.bin, labels/*.label, poses.txt,
// poses_prior.txt, timestamps.txt} (spec: docs/simulator.md). Deterministic for a seed:
// frame i of day d depends only on (seed, d, i), so threads cannot change a byte.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "dejaview/base/status.h"
#include "dejaview/sim/lidar.h"
#include "dejaview/sim/world.h"

namespace dv::sim {

struct SimOptions {
  std::string out_dir;
  int days = 1;
  int frames = 100;  // per day, 10 Hz
  uint64_t seed = 1;
  LidarModel lidar;
  DayRates rates;
  int threads = 2;
  double speed_mps = 10.0;       // ego speed; each day varies it by +-10 %
  double route_length_m = 3000;  // grown when the frames need more road
  double prior_sigma_m = 0.3;    // localisation prior error, smooth in time
  double prior_yaw_deg = 1.0;
};

struct SimReport {
  size_t frames = 0;
  size_t points = 0;
  double seconds = 0;  // wall time of the ray casting and writing
};

// progress(day, frames done in that day) is called from the calling thread.
Status Simulate(const SimOptions& options, SimReport* report,
                const std::function<void(int, int)>& progress = nullptr);

// The ground-truth T_world_sensor of frame i on a day (exposed for tests).
Pose EgoPose(const World& world, const SimOptions& options, int day, int frame);

}  // namespace dv::sim
