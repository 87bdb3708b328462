// A spinning LiDAR model: an elevation table, azimuth steps, range limits and the imperfections
// a codec must live with (range noise, dropouts, beam divergence, intensity by material and
// incidence angle).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"
#include "dejaview/sim/world.h"

namespace dv::sim {

struct LidarModel {
  std::vector<double> elevation_deg;  // one per beam, top first
  int azimuth_steps = 2083;
  double min_range_m = 2.0;  // the ego vehicle's roof and body are never returned
  double max_range_m = 120.0;
  double range_noise_m = 0.02;    // Gaussian sigma
  double dropout = 0.02;          // base probability; grows with range and grazing incidence
  double divergence_mrad = 3.0;   // 0 disables the beam-direction jitter
  double intensity_noise = 0.02;  // Gaussian sigma on the 0..1 reflectance
  // Each beam's true elevation differs from the table by a fixed calibration error (Gaussian,
  // clipped at 2 sigma, the same on every day and seed): the sensor reports points along the
  // table's direction, so each ring sits a few cm off the ground its neighbours see, as KITTI's
  // rings do 4-12 m away.
  double beam_elevation_error_deg = 0.06;
};

// "hdl64": HDL-64E-like (64 beams, +2 to -24.9 deg, 0.1728 deg azimuth, 80 m as KITTI);
// "os128": OS1-128-like (128 beams, +-22.5 deg, 1024 azimuth steps, 120 m).
StatusOr<LidarModel> LidarPreset(const std::string& name);
// Keeps every k-th beam to reach `beams`, and sets the azimuth steps (0 keeps either): small
// tests run the same model at a fraction of the cost.
LidarModel Reduced(const LidarModel& m, int beams, int azimuth_steps);

struct Scan {
  PointCloud cloud;              // sensor frame, ring set
  std::vector<uint32_t> labels;  // class | object_id << 16, one per point
};

// One sweep from T_world_sensor; dynamic holds the moving objects at the sweep time. rng_seed
// fixes the noise, so a (seed, day, frame) triple gives the same bytes on any thread.
Scan ScanFrame(const World& world, const Pose& T_world_sensor,
               const std::vector<Primitive>& dynamic, const LidarModel& model, uint64_t rng_seed);

}  // namespace dv::sim
