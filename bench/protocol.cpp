#include "dejaview/bench/protocol.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "dejaview/base/kitti.h"

namespace dv::bench {

Pose PerturbPose(const Pose& T_world_sensor, const PoseNoise& noise, uint64_t frame_index) {
  std::seed_seq seq{noise.seed, uint32_t(frame_index), uint32_t(frame_index >> 32)};
  std::mt19937_64 rng(seq);
  std::normal_distribution<double> g(0.0, 1.0);
  const Eigen::Vector3d dt(noise.sigma_xy_m * g(rng), noise.sigma_xy_m * g(rng),
                           noise.sigma_z_m * g(rng));
  const double yaw = noise.sigma_yaw_deg * M_PI / 180.0 * g(rng);
  Pose T = T_world_sensor;
  T.translation() += dt;
  T.linear() = T.linear() * Eigen::AngleAxisd(yaw, Eigen::Vector3d::UnitZ()).toRotationMatrix();
  return T;
}

Drive SubDrive(const Drive& drive, const std::vector<size_t>& indices) {
  Drive d = drive;
  d.frame_names.clear();
  d.frame_paths.clear();
  d.poses.clear();
  d.poses_prior.clear();
  d.timestamps_s.clear();
  for (size_t i : indices) {
    d.frame_names.push_back(drive.frame_names[i]);
    d.frame_paths.push_back(drive.frame_paths[i]);
    if (!drive.poses.empty()) d.poses.push_back(drive.poses[i]);
    if (!drive.poses_prior.empty()) d.poses_prior.push_back(drive.poses_prior[i]);
    if (!drive.timestamps_s.empty()) d.timestamps_s.push_back(drive.timestamps_s[i]);
  }
  return d;
}

StatusOr<BenchFrame> LoadFrame(const Drive& drive, size_t i, const std::string& prefix) {
  DV_ASSIGN_OR_RETURN(PointCloud raw, ReadPointCloudFile(drive.frame_paths[i]));
  std::vector<uint32_t> labels;
  if (!drive.labels_dir.empty()) {
    DV_ASSIGN_OR_RETURN(labels, ReadLabels(drive.LabelPath(i), raw.size()));
  }
  BenchFrame f;
  f.name = prefix + drive.frame_names[i];
  f.sequence = i;
  f.simulated = drive.simulated();
  if (!drive.timestamps_s.empty()) f.timestamp_ns = std::llround(drive.timestamps_s[i] * 1e9);
  // RemoveNonFinite cannot keep the labels aligned, so filter both here.
  f.cloud.reserve(raw.size());
  for (size_t k = 0; k < raw.size(); ++k) {
    if (!raw.xyz[k].allFinite()) {
      ++f.non_finite;
      continue;
    }
    f.cloud.push_back(raw.xyz[k], raw.intensity[k]);
    if (!labels.empty()) f.labels.push_back(labels[k]);
  }
  return f;
}

namespace {

Status NeedPoses(const Drive& d) {
  if (d.poses.empty())
    return Status::InvalidArgument(d.root +
                                   ": no poses.txt (the bench needs "
                                   "ground-truth poses)");
  return Status::Ok();
}

// Loads the coded frames with their priors: the drive's own prior when it has one, else noise.
Status LoadCoded(const Drive& drive, const std::vector<size_t>& indices, const std::string& prefix,
                 const PoseNoise& noise, std::vector<BenchFrame>* out) {
  for (size_t i : indices) {
    DV_ASSIGN_OR_RETURN(BenchFrame f, LoadFrame(drive, i, prefix));
    f.T_world_sensor_prior =
        drive.poses_prior.empty() ? PerturbPose(drive.poses[i], noise, i) : drive.poses_prior[i];
    out->push_back(std::move(f));
  }
  return Status::Ok();
}

std::string BaseName(const std::string& dir) {
  std::filesystem::path p(dir);
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace

StatusOr<Workload> PseudoRevisit(const std::string& drive_dir, int stride, size_t max_frames,
                                 const PoseNoise& noise) {
  if (stride < 2) return Status::InvalidArgument("--stride must be at least 2");
  DV_ASSIGN_OR_RETURN(Drive drive, OpenDrive(drive_dir));
  DV_RETURN_IF_ERROR(NeedPoses(drive));
  std::vector<size_t> map_idx, coded_idx;
  for (size_t i = 0; i < drive.size(); ++i) {
    if (i % size_t(stride) == 0) {
      map_idx.push_back(i);
    } else if (max_frames == 0 || coded_idx.size() < max_frames) {
      coded_idx.push_back(i);
    }
  }
  if (coded_idx.empty()) return Status::InvalidArgument(drive_dir + ": no frame left to code");
  Workload w;
  w.name = BaseName(drive_dir);
  w.map_drives.push_back(SubDrive(drive, map_idx));
  DV_RETURN_IF_ERROR(LoadCoded(drive, coded_idx, w.name + "/", noise, &w.frames));
  return w;
}

namespace {

// The drives in dir in name order: its day_* folders (days), or every folder holding velodyne/.
StatusOr<std::vector<std::string>> Drives(const std::string& dir, bool days_only) {
  std::vector<std::string> drives;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (!e.is_directory()) continue;
    const bool taken = days_only ? e.path().filename().string().rfind("day_", 0) == 0
                                 : std::filesystem::is_directory(e.path() / "velodyne");
    if (taken) drives.push_back(e.path().string());
  }
  if (ec) return Status::IoError(dir + ": " + ec.message());
  std::sort(drives.begin(), drives.end());
  if (drives.size() < 2) {
    return Status::InvalidArgument(dir + (days_only
                                              ? ": needs at least two day_NN/"
                                              : ": needs at least two drives (DIR/velodyne)"));
  }
  return drives;
}

StatusOr<std::vector<std::string>> Days(const std::string& days_dir) {
  return Drives(days_dir, true);
}

// The map from drives 1..k (map_drives == 0: all but the last), drive `coded` (0: k + 1) coded.
StatusOr<Workload> EarlierDrivesMap(const std::vector<std::string>& drives, int map_drives,
                                    int coded_drive, size_t max_frames, const PoseNoise& noise,
                                    const std::string& flag) {
  const int n = int(drives.size());
  const int k = map_drives == 0 ? n - 1 : map_drives;
  if (k < 1 || k >= n) {
    return Status::InvalidArgument(flag + " must be in 1.." + std::to_string(n - 1));
  }
  const int coded = coded_drive == 0 ? k + 1 : coded_drive;
  if (coded <= k || coded > n) {
    return Status::InvalidArgument("coded drive must be in " + std::to_string(k + 1) + ".." +
                                   std::to_string(n));
  }
  Workload w;
  for (int d = 0; d < k; ++d) {
    DV_ASSIGN_OR_RETURN(Drive drive, OpenDrive(drives[size_t(d)]));
    DV_RETURN_IF_ERROR(NeedPoses(drive));
    w.map_drives.push_back(std::move(drive));
  }
  const std::string& coded_dir = drives[size_t(coded - 1)];
  DV_ASSIGN_OR_RETURN(Drive drive, OpenDrive(coded_dir));
  DV_RETURN_IF_ERROR(NeedPoses(drive));
  std::vector<size_t> idx;
  for (size_t i = 0; i < drive.size() && (max_frames == 0 || idx.size() < max_frames); ++i) {
    idx.push_back(i);
  }
  w.name = BaseName(coded_dir) + " (map: " + BaseName(drives.front()) +
           (k > 1 ? ".." + BaseName(drives[size_t(k - 1)]) : std::string()) + ")";
  DV_RETURN_IF_ERROR(LoadCoded(drive, idx, BaseName(coded_dir) + "/", noise, &w.frames));
  return w;
}

}  // namespace

StatusOr<int> CountDays(const std::string& days_dir) {
  DV_ASSIGN_OR_RETURN(auto days, Days(days_dir));
  return int(days.size());
}

StatusOr<Workload> MultiDay(const std::string& days_dir, int map_days, int coded_day,
                            size_t max_frames, const PoseNoise& noise) {
  DV_ASSIGN_OR_RETURN(auto days, Days(days_dir));
  return EarlierDrivesMap(days, map_days, coded_day, max_frames, noise, "--map-days");
}

StatusOr<Workload> Passes(const std::string& dir, int map_passes, size_t max_frames,
                          const PoseNoise& noise) {
  DV_ASSIGN_OR_RETURN(auto passes, Drives(dir, false));
  return EarlierDrivesMap(passes, map_passes, 0, max_frames, noise, "--map-passes");
}

}  // namespace dv::bench
