// Drives (docs/formats.md) from recordings (MCAP, ROS 2 .db3) and to MCAP files
// (docs/recorded.md).
#pragma once

#include <cstddef>
#include <string>

#include "dejaview/base/drive.h"
#include "dejaview/base/status.h"

namespace dv::recorded {

struct ImportOptions {
  // A sensor_msgs/msg/PointCloud2 channel; empty: the file's only one.
  std::string cloud_topic;
  // A geometry_msgs/msg/PoseStamped, nav_msgs/msg/Odometry or tf2_msgs/msg/TFMessage channel;
  // empty: the file's only PoseStamped or Odometry channel, else no poses.
  std::string pose_topic;
  // For a TFMessage channel: the transforms parent -> child taken as the sensor's pose (one
  // hop). Empty child: the clouds' frame_id; empty parent: the first parent seen for the child.
  std::string tf_parent, tf_child;
};

struct ImportStats {
  size_t frames = 0, posed = 0, pose_samples = 0;
  std::string cloud_topic, pose_topic;
};

// Reads an .mcap or a ROS 2 .db3 (recording.h) and writes DRIVE/velodyne/NNNNNN.bin (x y z
// intensity, docs/wire.md's mapping of the cloud's field table), timestamps.txt (the clouds' header
// stamps, epoch seconds to the nanosecond) and poses.txt when every frame has a pose: a sample at
// the frame's stamp, else the two around it interpolated. A cloud whose frame_id is the poses'
// parent frame (a world-frame cloud, as ExportDriveMcap writes) is taken back into the sensor frame
// by its pose's inverse.
StatusOr<ImportStats> ImportRecording(const std::string& path, const std::string& out_dir,
                                      const ImportOptions& options);

// Writes a drive as MCAP (profile ros2, CDR): each frame a sensor_msgs/msg/PointCloud2 on
// /dejaview/points (x y z float64, intensity float32) in the world frame "map" when the drive
// has poses (in the sensor frame "velodyne" otherwise), and each pose a
// geometry_msgs/msg/PoseStamped on /dejaview/pose (frame "map"), stamped with the drive's
// timestamps (0.1 s apart without them).
Status ExportDriveMcap(const Drive& drive, const std::string& mcap_path);

}  // namespace dv::recorded
