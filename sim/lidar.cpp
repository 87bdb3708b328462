#include "dejaview/sim/lidar.h"

#include <algorithm>
#include <cmath>

#include "dejaview/sim/rng.h"

namespace dv::sim {

StatusOr<LidarModel> LidarPreset(const std::string& name) {
  LidarModel m;
  if (name == "hdl64") {
    // The HDL-64E's two laser blocks: 32 upper beams 1/3 deg apart from +2 deg, 32 lower beams
    // 1/2 deg apart down to -24.9 deg.
    for (int i = 0; i < 32; ++i) m.elevation_deg.push_back(2.0 - i * (10.33 / 31));
    for (int i = 0; i < 32; ++i) m.elevation_deg.push_back(-8.83 - i * (16.07 / 31));
    m.azimuth_steps = 2083;
    // KITTI's HDL-64E frames hold no return past about 80 m (00: 80.4, 07: 76.6 m, `dejaview
    // stats`): beyond, the road and dark facades fall under its detection threshold.
    m.max_range_m = 80.0;
    return m;
  }
  if (name == "os128") {
    for (int i = 0; i < 128; ++i) m.elevation_deg.push_back(22.5 - i * (45.0 / 127));
    m.azimuth_steps = 1024;
    m.range_noise_m = 0.03;
    m.divergence_mrad = 2.0;
    m.min_range_m = 1.5;
    return m;
  }
  return Status::InvalidArgument("unknown LiDAR preset '" + name + "' (hdl64, os128)");
}

LidarModel Reduced(const LidarModel& m, int beams, int azimuth_steps) {
  LidarModel r = m;
  if (beams > 0 && size_t(beams) < m.elevation_deg.size()) {
    r.elevation_deg.clear();
    const double step = double(m.elevation_deg.size()) / beams;
    for (int i = 0; i < beams; ++i) r.elevation_deg.push_back(m.elevation_deg[size_t(i * step)]);
  }
  if (azimuth_steps > 0) r.azimuth_steps = azimuth_steps;
  return r;
}

Scan ScanFrame(const World& world, const Pose& T_world_sensor,
               const std::vector<Primitive>& dynamic, const LidarModel& model, uint64_t rng_seed) {
  Rng rng(rng_seed);
  const Eigen::Vector3d origin = T_world_sensor.translation();
  const Eigen::Matrix3d R = T_world_sensor.linear();
  // Only movers within reach can be hit; testing the few nearby keeps a ray cheap.
  std::vector<Primitive> near;
  for (const Primitive& p : dynamic) {
    if ((p.center - origin).head<2>().norm() < model.max_range_m + p.Radius()) near.push_back(p);
  }
  std::vector<uint32_t> visited(world.static_size(), 0);
  uint32_t stamp = 0;
  Scan scan;
  const size_t rays = model.elevation_deg.size() * size_t(model.azimuth_steps);
  scan.cloud.reserve(rays);
  scan.cloud.ring.reserve(rays);
  scan.labels.reserve(rays);
  const double jitter = model.divergence_mrad * 1e-3 / 2;
  std::vector<double> calibration(model.elevation_deg.size());
  for (size_t b = 0; b < calibration.size(); ++b) {
    Rng beam(StreamSeed(0x6265616d, b));  // "beam": a property of the sensor, not of the seed
    calibration[b] = std::clamp(beam.Normal(), -2.0, 2.0) * model.beam_elevation_error_deg *
                     3.14159265358979323846 / 180;
  }
  for (int a = 0; a < model.azimuth_steps; ++a) {
    const double az = 2 * 3.14159265358979323846 * a / model.azimuth_steps;
    for (size_t b = 0; b < model.elevation_deg.size(); ++b) {
      double el = model.elevation_deg[b] * 3.14159265358979323846 / 180;
      double azj = az;
      if (jitter > 0) {  // where inside the divergent beam the return comes from
        el += jitter * rng.Normal();
        azj += jitter * rng.Normal();
      }
      const Eigen::Vector3d d_sensor(std::cos(el) * std::cos(azj), std::cos(el) * std::sin(azj),
                                     std::sin(el));
      const double el_true = el + calibration[b];
      const Eigen::Vector3d d =
          R * Eigen::Vector3d(std::cos(el_true) * std::cos(azj), std::cos(el_true) * std::sin(azj),
                              std::sin(el_true));
      Hit hit;
      const bool found = world.Cast(origin, d, model.max_range_m, near, &visited, ++stamp, &hit);
      const double u_drop = rng.Uniform(), n_range = rng.Normal(), n_int = rng.Normal();
      const double n_speckle = rng.Normal(), u_weak = rng.Uniform(), u_weak_level = rng.Uniform();
      if (!found || hit.range_m < model.min_range_m) continue;
      const double cos_inc = std::abs(hit.normal.dot(d));
      const double r_frac = hit.range_m / model.max_range_m;
      const double p_drop = model.dropout + 0.1 * r_frac * r_frac + (cos_inc < 0.05 ? 0.5 : 0.0);
      if (u_drop < p_drop) continue;
      const double range = hit.range_m + model.range_noise_m * n_range;
      // Rough surfaces (asphalt, concrete, foliage) return far more at grazing incidence than a
      // Lambertian cosine predicts; half diffuse-constant, half cosine matches the near-ground
      // reflectance of KITTI's HDL-64E (median about 0.3 at 5-15 m, docs/simulator.md).
      const double lambert =
          RetroReflective(hit.material) ? 0.8 + 0.2 * cos_inc : 0.5 + 0.5 * cos_inc;
      // Real returns scatter about that mean (speckle, surface texture: a log-normal factor), a
      // share are weak (KITTI: 3-9 % of the points within 30 m read zero, most beyond 50 m, half
      // of the points on cars, whose dark paint and glass return little), and the sensor reports
      // reflectance in steps of 0.01, rounding the weakest down to zero.
      double reflect = 1.1 * Reflectivity(hit.material) * lambert * std::exp(0.3 * n_speckle);
      if (hit.material == Material::kCarPaint && Mix(hit.object_id) % 2 == 0) reflect *= 0.1;
      const double p_weak = 0.08 + 0.87 * std::clamp((hit.range_m - 25) / 40, 0.0, 1.0);
      if (u_weak < p_weak) reflect *= 0.1 * u_weak_level;
      const double level = std::clamp(reflect + model.intensity_noise * n_int - 0.01, 0.0, 1.0);
      const float intensity = float(std::floor(level * 100) / 100);
      scan.cloud.push_back((d_sensor * range).cast<float>(), intensity);
      scan.cloud.ring.push_back(uint16_t(b));
      scan.labels.push_back(uint32_t(hit.label) | (uint32_t(hit.object_id) << 16));
    }
  }
  return scan;
}

}  // namespace dv::sim
