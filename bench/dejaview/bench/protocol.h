// Bench protocols: which frames build the map, which frames are coded, and the pose prior each
// coded frame gets.
//   pseudo-revisit  one KITTI-style drive: the map from frames i % stride == 0, the others coded
//                   (stride 2: map from the even frames, odd frames coded), prior = poses.txt
//                   plus seeded Gaussian noise;
//   multi-day       a folder of drives day_NN/: the map from days 1..k, day k+1 coded; prior =
//                   the day's poses_prior.txt when it has one (the simulator's localiser), else
//                   poses.txt plus noise;
//   passes          a folder of two or more recorded passes of the same place (every folder in it
//                   that holds velodyne/, in name order: a repeated drive, or the two sides of a
//                   loop closure cut into drives of their own): the map from passes 1..k, pass
//                   k + 1 coded; prior as multi-day's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/drive.h"
#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv::bench {

// The localisation error model: per horizontal axis, vertical, and yaw, one sigma each.
struct PoseNoise {
  double sigma_xy_m = 0.15;
  double sigma_z_m = 0.05;
  double sigma_yaw_deg = 0.5;
  uint32_t seed = 1;
};

// Translation noise in the world frame (x, y horizontal, z up as in KITTI); yaw about the
// sensor's own vertical axis, so the perturbation does not swing the pose around the world origin.
// Deterministic in (noise.seed, frame_index).
Pose PerturbPose(const Pose& T_world_sensor, const PoseNoise& noise, uint64_t frame_index);

struct BenchFrame {
  std::string name;              // "00/000001"
  PointCloud cloud;              // sensor frame, finite points only
  size_t non_finite = 0;         // points removed before measuring
  std::vector<uint32_t> labels;  // empty, or one label per point of cloud
  bool simulated = false;        // labels use the simulator's classes, not SemanticKITTI's
  Pose T_world_sensor_prior;
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
};

struct Workload {
  std::string name;                // "00", "multi-day day_03"
  std::vector<Drive> map_drives;   // what a map-based codec builds its map from
  std::vector<BenchFrame> frames;  // what every codec codes
};

// Keeps only the frames at `indices` (frame files, poses, priors, timestamps stay aligned).
Drive SubDrive(const Drive& drive, const std::vector<size_t>& indices);

// Loads frame i: non-finite points removed (labels kept aligned) and counted.
StatusOr<BenchFrame> LoadFrame(const Drive& drive, size_t i, const std::string& prefix);

// max_frames == 0: every eligible frame.
StatusOr<Workload> PseudoRevisit(const std::string& drive_dir, int stride, size_t max_frames,
                                 const PoseNoise& noise);
// The days are the day_* folders of days_dir in name order, numbered from 1. map_days == 0:
// every day but the last builds the map; coded_day == 0: the day after the map's last. A later
// coded_day measures an older map (how the ratio changes as the map ages).
StatusOr<Workload> MultiDay(const std::string& days_dir, int map_days, int coded_day,
                            size_t max_frames, const PoseNoise& noise);
// The passes are the drives in dir (folders holding velodyne/) in name order, numbered from 1.
// map_passes == 0: every pass but the last builds the map, the last is coded.
StatusOr<Workload> Passes(const std::string& dir, int map_passes, size_t max_frames,
                          const PoseNoise& noise);
// How many day_* folders days_dir holds.
StatusOr<int> CountDays(const std::string& days_dir);

}  // namespace dv::bench
