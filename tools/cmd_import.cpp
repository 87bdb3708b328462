// dejaview import: a recording (MCAP, ROS 2 .db3, ROS 1 .bag) or an Ouster capture (pcap + metadata
// JSON) into a drive folder that replay, encode and bench read.
#include <cstdio>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/recorded/drive_mcap.h"

namespace dv::cli {

int RunImport(int argc, char** argv) {
  auto args = Args::Parse(
      argc, argv, {"out", "topic", "pose-topic", "tf-parent", "tf-child", "metadata"}, {"help"});
  if (!args.ok()) return Fail("import", args.status());
  if (args->Has("help") || args->positional().size() != 1 || !args->Has("out")) {
    std::printf(
        "usage: dejaview import SRC.mcap|SRC.db3|SRC.bag --out DRIVE [--topic /points] "
        "[--pose-topic "
        "/odom]\n"
        "         [--tf-parent map] [--tf-child lidar]   (with a tf2_msgs/TFMessage pose topic)\n"
        "writes DRIVE/{velodyne/*.bin, timestamps.txt, poses.txt} from the "
        "sensor_msgs/PointCloud2\n"
        "topic (default: the only one) and the pose topic (PoseStamped, Odometry or TFMessage;\n"
        "default: the only PoseStamped or Odometry topic; a TFMessage topic's chain parent -> ...\n"
        "-> child is composed, with /tf_static's static hops)\n"
        "       dejaview import CAPTURE.pcap --metadata SENSOR.json --out DRIVE\n"
        "writes an Ouster capture's scans (x y z reflectivity, sensor clock stamps); spec:\n"
        "docs/recorded.md\n");
    return args->Has("help") ? kOk : kUsage;
  }
  recorded::ImportOptions options;
  options.cloud_topic = args->Get("topic");
  options.pose_topic = args->Get("pose-topic");
  options.tf_parent = args->Get("tf-parent");
  options.tf_child = args->Get("tf-child");
  options.ouster_metadata = args->Get("metadata");
  auto stats = recorded::ImportRecording(args->positional()[0], args->Get("out"), options);
  if (!stats.ok()) return Fail("import", stats.status());
  std::printf("imported %zu frames from %s", stats->frames, stats->cloud_topic.c_str());
  if (!stats->pose_topic.empty()) {
    std::printf(", poses from %s (%zu samples, %zu frames posed%s)", stats->pose_topic.c_str(),
                stats->pose_samples, stats->posed,
                stats->posed == stats->frames ? "" : ": no poses.txt written");
  }
  std::printf(" to %s\n", args->Get("out").c_str());
  return kOk;
}

}  // namespace dv::cli
