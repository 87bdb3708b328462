// A drive: a directory of frames sorted by name, with optional poses, timestamps and labels.
// Layout (KITTI odometry style, spec in docs/formats.md):
//   DRIVE/velodyne/*.{bin,pcd,ply}  (or the frame files directly in DRIVE/)
//   DRIVE/poses.txt                 optional, one line per frame
//   DRIVE/poses_prior.txt           optional, the localisation prior (simulated drives)
//   DRIVE/timestamps.txt            optional, one line per frame
//   DRIVE/labels/<name>.label       optional, per frame
#pragma once

#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv {

struct Drive {
  std::string root;
  std::string frames_dir;
  std::vector<std::string> frame_names;  // file stems, sorted ("000000")
  std::vector<std::string> frame_paths;  // same order
  std::vector<Pose> poses;               // empty or one per frame
  std::vector<Pose> poses_prior;         // empty or one per frame
  std::vector<double> timestamps_s;      // empty or one per frame
  std::string labels_dir;                // empty when the drive has no labels

  size_t size() const { return frame_paths.size(); }
  // Only the simulator writes a localisation prior; its labels use its own classes (kitti.h).
  bool simulated() const { return !poses_prior.empty(); }
  std::string LabelPath(size_t i) const { return labels_dir + "/" + frame_names[i] + ".label"; }
};

// Opens a drive; a poses or timestamps file whose line count differs from the frame count is an
// error naming the file.
StatusOr<Drive> OpenDrive(const std::string& dir);

// Reads a frame by extension (.bin KITTI, .pcd, .ply).
StatusOr<PointCloud> ReadPointCloudFile(const std::string& path);
// Writes by extension; .pcd and .ply are written binary.
Status WritePointCloudFile(const std::string& path, const PointCloud& cloud);
// Writes by extension with the given body encoding; ascii for .bin is an error.
Status WritePointCloudFile(const std::string& path, const PointCloud& cloud,
                           CloudEncoding encoding);

}  // namespace dv
