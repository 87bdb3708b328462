// Drives (docs/formats.md) from recordings (MCAP, ROS 2 .db3, ROS 1 .bag, Ouster captures), and
// to MCAP files and merged world-frame clouds (docs/recorded.md).
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
  // For a TFMessage channel: the sensor's pose is the chain of transforms parent -> ... ->
  // child, from that channel and /tf_static (static hops, holding at every stamp), each dynamic
  // hop interpolated on its own samples and the hops composed. Empty child: the clouds'
  // frame_id; empty parent: the root of the child's tree. A frame's parent is the first seen.
  std::string tf_parent, tf_child;
  // For an Ouster capture (.pcap): the sensor's metadata JSON (required).
  std::string ouster_metadata;
};

struct ImportStats {
  size_t frames = 0, posed = 0, pose_samples = 0;
  std::string cloud_topic, pose_topic;
};

// True for what ImportRecording reads: recordings (recording.h) and Ouster captures (.pcap).
bool IsImportable(const std::string& path);

// Reads an .mcap or a ROS 2 .db3 (recording.h) and writes DRIVE/velodyne/NNNNNN.bin (x y z
// intensity, docs/wire.md's mapping of the cloud's field table), timestamps.txt (the clouds' header
// stamps, epoch seconds to the nanosecond) and poses.txt when every frame has a pose: a sample at
// the frame's stamp, else the two around it interpolated. A cloud whose frame_id is the poses'
// parent frame (a world-frame cloud, as ExportDriveMcap writes) is taken back into the sensor frame
// by its pose's inverse.
// An Ouster capture (.pcap) is imported by ImportOusterCapture.
StatusOr<ImportStats> ImportRecording(const std::string& path, const std::string& out_dir,
                                      const ImportOptions& options);

// An Ouster capture (ouster.h): the lidar packets on the metadata's udp_port_lidar, batched into
// scans, each scan a frame: DRIVE/velodyne/NNNNNN.bin (x y z in the sensor frame, reflectivity as
// intensity; points with range > 0, column by column), timestamps.txt (each scan's first column
// timestamp, in the sensor's clock, seconds with nine decimals). No poses: a capture has none.
StatusOr<ImportStats> ImportOusterCapture(const std::string& pcap_path,
                                          const std::string& metadata_path,
                                          const std::string& out_dir);

// Writes a drive as MCAP (profile ros2, CDR): each frame a sensor_msgs/msg/PointCloud2 on
// /dejaview/points (x y z float64, intensity float32) in the world frame "map" when the drive
// has poses (in the sensor frame "velodyne" otherwise), and each pose a
// geometry_msgs/msg/PoseStamped on /dejaview/pose (frame "map"), stamped with the drive's
// timestamps (0.1 s apart without them).
Status ExportDriveMcap(const Drive& drive, const std::string& mcap_path);

struct MergeStats {
  size_t frames = 0, points_in = 0, points_out = 0, non_finite = 0;
};
// Every frame of a drive moved into the world frame by its pose (poses.txt required), as one
// cloud with intensity (x y z float32: a world coordinate keeps float32's 2^-24 relative
// precision, a millimetre at 16 km). With voxel_m > 0 only the first point, in frame order and
// then point order, of each cube of edge voxel_m (aligned on the world origin) is kept: no two
// kept points share a voxel and every point is within voxel_m * sqrt(3) of a kept one. Points
// with a non-finite coordinate are dropped and counted; a point more than 2^20 voxels from the
// origin is an error (OutOfRange).
StatusOr<PointCloud> MergeDrive(const Drive& drive, double voxel_m, MergeStats* stats);

}  // namespace dv::recorded
