#include "dejaview/recorded/drive_mcap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/recorded/foxglove.h"
#include "dejaview/recorded/mcap_writer.h"
#include "dejaview/recorded/recording.h"
#include "dejaview/recorded/ros_messages.h"

namespace dv::recorded {
namespace {

constexpr const char* kWorldFrame = "map";
constexpr const char* kSensorFrame = "velodyne";
constexpr const char* kPointsTopic = "/dejaview/points";
constexpr const char* kPoseTopic = "/dejaview/pose";
constexpr const char* kTfStaticTopic = "/tf_static";
constexpr int64_t kDefaultPeriodNs = 100000000;  // 10 Hz when a drive has no timestamps

std::string What(const std::string& path, const RecordedMessage& m) {
  return path + ": " + *m.topic + " message at log time " + std::to_string(m.log_time_ns);
}

// Every channel's schema name by topic, and every pose sample of every pose channel by topic
// (poses are small next to clouds, so all are kept: bounded by the file's size).
struct FirstPass {
  std::map<std::string, std::string> types;
  std::map<std::string, std::vector<StampedPose>> poses;
};

StatusOr<FirstPass> ReadChannelsAndPoses(const std::string& path) {
  FirstPass pass;
  const Status read = ReadRecordedMessages(path, [&](const RecordedMessage& m) -> Status {
    const std::string type = CanonicalRosType(*m.type);
    pass.types.emplace(*m.topic, type);
    if (!IsPoseType(type)) return Status::Ok();
    DV_ASSIGN_OR_RETURN(const RosEncoding encoding, RosEncodingOf(*m.encoding, What(path, m)));
    DV_ASSIGN_OR_RETURN(auto poses,
                        DecodePoses(type, m.data.data, m.data.size, What(path, m), encoding));
    auto& all = pass.poses[*m.topic];
    all.insert(all.end(), poses.begin(), poses.end());
    return Status::Ok();
  });
  if (!read.ok()) return read;
  return pass;
}

std::string TopicsOf(const FirstPass& pass) {
  std::string list;
  for (const auto& [topic, type] : pass.types) list += " " + topic + " (" + type + ")";
  return list.empty() ? " none" : list;
}

StatusOr<std::string> ChooseTopic(const FirstPass& pass, const std::string& path,
                                  const std::string& wanted, const char* option,
                                  bool (*fits)(const std::string&), bool required) {
  if (!wanted.empty()) {
    const auto it = pass.types.find(wanted);
    if (it == pass.types.end() || !fits(it->second))
      return Status::NotFound(path + ": " + option + " " + wanted +
                              ": no such channel of a fitting type; channels:" + TopicsOf(pass));
    return wanted;
  }
  std::vector<std::string> found;
  for (const auto& [topic, type] : pass.types) {
    if (fits(type)) found.push_back(topic);
  }
  if (found.size() == 1) return found[0];
  if (found.empty() && !required) return std::string();
  return Status::InvalidArgument(path + ": " + std::to_string(found.size()) +
                                 " candidate channels, choose one with " + option +
                                 "; channels:" + TopicsOf(pass));
}

bool IsCloud(const std::string& type) {
  return type == kPointCloud2Type || type == kFoxglovePointCloudType;
}
bool IsPoseChannel(const std::string& type) {
  return type == kPoseStampedType || type == kOdometryType;
}
bool IsAnyPose(const std::string& type) { return IsPoseType(type); }

// Samples sorted by stamp; a later sample with an equal stamp is dropped.
std::vector<StampedPose> ByStamp(std::vector<StampedPose> samples) {
  std::stable_sort(samples.begin(), samples.end(), [](const StampedPose& a, const StampedPose& b) {
    return a.stamp_ns < b.stamp_ns;
  });
  samples.erase(std::unique(samples.begin(), samples.end(),
                            [](const StampedPose& a, const StampedPose& b) {
                              return a.stamp_ns == b.stamp_ns;
                            }),
                samples.end());
  return samples;
}

// The sample at stamp_ns, else the two around it interpolated; none outside the samples.
std::optional<Pose> SampleAt(const std::vector<StampedPose>& samples, int64_t stamp_ns) {
  const auto it = std::lower_bound(samples.begin(), samples.end(), stamp_ns,
                                   [](const StampedPose& s, int64_t t) { return s.stamp_ns < t; });
  if (it == samples.end()) return std::nullopt;
  if (it->stamp_ns == stamp_ns) return it->T_parent_child;
  if (it == samples.begin()) return std::nullopt;
  const auto prev = it - 1;
  const double t = double(stamp_ns - prev->stamp_ns) / double(it->stamp_ns - prev->stamp_ns);
  return InterpolatePose(prev->T_parent_child, it->T_parent_child, t);
}

// The pose of one sensor over time: a pose channel's samples, or a chain of tf transforms
// root -> ... -> sensor (map -> odom -> base_link -> lidar), each hop static (one transform, at
// every stamp, as tf2 treats /tf_static) or dynamic (its own samples, interpolated on their own:
// the hops of a real tree are published at different rates).
class PoseTrack {
 public:
  // A PoseStamped or Odometry channel: one hop, every sample.
  explicit PoseTrack(std::vector<StampedPose> samples) {
    if (!samples.empty()) parent_ = samples.back().parent_frame;
    hops_.push_back({ByStamp(std::move(samples)), false});
  }

  // Transforms from TFMessage channels, dynamic and static: the chain from child up to parent
  // (empty: up to the root, the first frame without a parent). As in tf2's tree a frame has one
  // parent, the first seen (static transforms first), and one kind of hop; other transforms of
  // that frame are ignored, and a static hop is the frame's last static transform (tf2 replaces
  // one by the next). No chain (a parent that is not an ancestor, a loop): no samples.
  PoseTrack(const std::vector<StampedPose>& dynamic, const std::vector<StampedPose>& fixed,
            const std::string& parent, const std::string& child) {
    std::map<std::string, Hop> hop_of;  // by child frame
    std::map<std::string, std::string> parent_of;
    const auto add = [&](const StampedPose& s, bool is_static) {
      const auto [it, first] = parent_of.emplace(s.child_frame, s.parent_frame);
      if (it->second != s.parent_frame) return;
      Hop& hop = hop_of[s.child_frame];
      if (first) hop.is_static = is_static;
      if (hop.is_static != is_static) return;
      if (is_static) hop.samples.clear();
      hop.samples.push_back(s);
    };
    for (const StampedPose& s : fixed) add(s, true);
    for (const StampedPose& s : dynamic) add(s, false);
    std::string frame = child;
    std::set<std::string> seen = {child};
    std::vector<Hop> up;  // child first
    while (frame != parent) {
      const auto it = hop_of.find(frame);
      if (it == hop_of.end()) break;
      up.push_back(std::move(it->second));
      frame = parent_of[frame];
      if (!seen.insert(frame).second) return;
    }
    if (up.empty() || (!parent.empty() && frame != parent)) return;
    parent_ = frame;
    for (auto hop = up.rbegin(); hop != up.rend(); ++hop) {
      if (!hop->is_static) hop->samples = ByStamp(std::move(hop->samples));
      hops_.push_back(std::move(*hop));
    }
  }

  // Samples over every hop (a static hop counts one).
  size_t size() const {
    size_t n = 0;
    for (const Hop& hop : hops_) n += hop.samples.size();
    return n;
  }
  // The root frame: the poses' parent.
  const std::string& parent() const { return parent_; }
  // The hops' transforms at stamp_ns composed root first; none when a dynamic hop has none.
  // One hop returns its sample untouched (no product with an identity to round or sign zeros).
  std::optional<Pose> At(int64_t stamp_ns) const {
    std::optional<Pose> T;
    for (const Hop& hop : hops_) {
      const std::optional<Pose> step = hop.is_static
                                           ? std::optional<Pose>(hop.samples.back().T_parent_child)
                                           : SampleAt(hop.samples, stamp_ns);
      if (!step) return std::nullopt;
      T = T ? Pose(*T * *step) : *step;
    }
    return T;
  }

 private:
  struct Hop {
    std::vector<StampedPose> samples;
    bool is_static = false;
  };
  std::vector<Hop> hops_;  // root first
  std::string parent_;
};

double ReadFloat(const uint8_t* p, transport::DataType type) {
  if (type == transport::DataType::kFloat64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

void WriteFloat(double v, transport::DataType type, uint8_t* p) {
  if (type == transport::DataType::kFloat64) {
    std::memcpy(p, &v, 8);
  } else {
    const float f = float(v);
    std::memcpy(p, &f, 4);
  }
}

// The frame's x y z moved by T, on their own values in double precision, before ToPointCloud
// rounds them to float32: a cloud that ExportDriveMcap moved into the world frame (in double,
// kept as float64) returns to its float32 sensor coordinates exactly under the inverse pose.
// Frames whose x y z are not float types are left to ToPointCloud to reject.
void TransformFrame(const Pose& T, transport::RawFrame* frame) {
  const transport::Field* axes[3] = {};
  for (const transport::Field& f : frame->header.fields) {
    const int k = f.name == "x" ? 0 : f.name == "y" ? 1 : f.name == "z" ? 2 : -1;
    if (k >= 0) axes[k] = &f;
  }
  for (const transport::Field* f : axes) {
    if (f == nullptr ||
        (f->type != transport::DataType::kFloat32 && f->type != transport::DataType::kFloat64))
      return;
  }
  for (size_t i = 0; i < frame->header.point_count; ++i) {
    uint8_t* point = frame->points.data() + i * frame->header.point_stride;
    Eigen::Vector3d p;
    for (int k = 0; k < 3; ++k) p[k] = ReadFloat(point + axes[k]->offset, axes[k]->type);
    p = T * p;
    for (int k = 0; k < 3; ++k) WriteFloat(p[k], axes[k]->type, point + axes[k]->offset);
  }
}

// A cloud message as a wire frame in its frame_id: a PointCloud2 as it is, a
// foxglove.PointCloud moved by its pose (its origin in frame_id).
StatusOr<transport::RawFrame> DecodeCloud(const std::string& type, const RecordedMessage& m,
                                          const std::string& what) {
  if (type == kFoxglovePointCloudType) {
    DV_ASSIGN_OR_RETURN(FoxglovePointCloud cloud,
                        DecodeFoxglovePointCloud(m.data.data, m.data.size, *m.encoding, what));
    if (!cloud.T_frame_cloud.matrix().isIdentity(0))
      TransformFrame(cloud.T_frame_cloud, &cloud.frame);
    return std::move(cloud.frame);
  }
  DV_ASSIGN_OR_RETURN(const RosEncoding encoding, RosEncodingOf(*m.encoding, what));
  return DecodePointCloud2(m.data.data, m.data.size, what, encoding);
}

bool IsOusterCapture(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".pcap") == 0;
}

}  // namespace

bool IsImportable(const std::string& path) { return IsRecording(path) || IsOusterCapture(path); }

StatusOr<ImportStats> ImportRecording(const std::string& path, const std::string& out_dir,
                                      const ImportOptions& options) {
  if (IsOusterCapture(path)) {
    if (options.ouster_metadata.empty())
      return Status::InvalidArgument(path +
                                     ": an Ouster capture needs its sensor's metadata "
                                     "JSON (--metadata)");
    return ImportOusterCapture(path, options.ouster_metadata, out_dir);
  }
  DV_ASSIGN_OR_RETURN(FirstPass pass, ReadChannelsAndPoses(path));
  ImportStats stats;
  DV_ASSIGN_OR_RETURN(stats.cloud_topic,
                      ChooseTopic(pass, path, options.cloud_topic, "--topic", IsCloud, true));
  DV_ASSIGN_OR_RETURN(stats.pose_topic,
                      ChooseTopic(pass, path, options.pose_topic, "--pose-topic",
                                  options.pose_topic.empty() ? IsPoseChannel : IsAnyPose, false));
  const bool is_tf = !stats.pose_topic.empty() && pass.types[stats.pose_topic] == kTfMessageType;
  const std::string cloud_type = pass.types[stats.cloud_topic];
  std::optional<PoseTrack> track;
  DV_RETURN_IF_ERROR(MakeDirs(out_dir + "/velodyne"));
  std::vector<int64_t> stamps_ns;
  std::vector<Pose> poses;
  const Status read = ReadRecordedMessages(path, [&](const RecordedMessage& m) -> Status {
    if (*m.topic != stats.cloud_topic) return Status::Ok();
    const std::string what = What(path, m);
    DV_ASSIGN_OR_RETURN(transport::RawFrame frame, DecodeCloud(cloud_type, m, what));
    const transport::FrameHeader& h = frame.header;
    if (!track && !stats.pose_topic.empty()) {
      if (is_tf) {
        // tf2 listens to /tf_static beside /tf: a chain's fixed hops (base_link -> lidar) are
        // published there once, stamped whenever, and hold at every stamp.
        const auto statics = pass.types.find(kTfStaticTopic);
        const bool has_statics = statics != pass.types.end() && statics->second == kTfMessageType;
        track.emplace(stats.pose_topic == kTfStaticTopic ? std::vector<StampedPose>()
                                                         : pass.poses[stats.pose_topic],
                      has_statics ? pass.poses[kTfStaticTopic] : std::vector<StampedPose>(),
                      options.tf_parent, options.tf_child.empty() ? h.frame_id : options.tf_child);
      } else {
        track.emplace(std::move(pass.poses[stats.pose_topic]));
      }
      stats.pose_samples = track->size();
    }
    const std::optional<Pose> pose = track ? track->At(h.sensor_stamp_ns) : std::nullopt;
    if (track && !track->parent().empty() && h.frame_id == track->parent()) {
      if (!pose)
        return Status::NotFound(what + ": a cloud in the poses' frame '" + h.frame_id +
                                "' with no pose at its stamp");
      TransformFrame(pose->inverse(), &frame);
    }
    auto cloud = transport::ToPointCloud(frame, nullptr);
    if (!cloud.ok()) return cloud.status().WithContext(what);
    char name[32];
    std::snprintf(name, sizeof(name), "/velodyne/%06zu.bin", stats.frames);
    DV_RETURN_IF_ERROR(WriteKittiBin(out_dir + name, *cloud));
    stamps_ns.push_back(h.sensor_stamp_ns);
    if (pose) poses.push_back(*pose);
    ++stats.frames;
    return Status::Ok();
  });
  if (!read.ok()) return read;
  stats.posed = poses.size();
  if (stats.frames > 0)
    DV_RETURN_IF_ERROR(WriteTimestampsNs(out_dir + "/timestamps.txt", stamps_ns));
  if (stats.frames > 0 && stats.posed == stats.frames)
    DV_RETURN_IF_ERROR(WriteKittiPoses(out_dir + "/poses.txt", poses));
  return stats;
}

Status ExportDriveMcap(const Drive& drive, const std::string& mcap_path) {
  McapWriterOptions options;
  options.profile = "ros2";
  const bool posed = !drive.poses.empty();
  return WriteMcapFile(mcap_path, options, [&](McapWriter& w) -> Status {
    const uint16_t points = w.AddChannel(
        w.AddSchema(kPointCloud2Type, "ros2msg", PointCloud2Schema()), kPointsTopic, "cdr");
    const uint16_t pose_channel =
        posed ? w.AddChannel(w.AddSchema(kPoseStampedType, "ros2msg", PoseStampedSchema()),
                             kPoseTopic, "cdr")
              : 0;
    for (size_t i = 0; i < drive.size(); ++i) {
      const int64_t stamp_ns = drive.timestamps_s.empty()
                                   ? int64_t(i) * kDefaultPeriodNs
                                   : std::llround(drive.timestamps_s[i] * 1e9);
      if (stamp_ns < 0)
        return Status::InvalidArgument(drive.root + ": frame " + drive.frame_names[i] +
                                       ": negative timestamp");
      DV_ASSIGN_OR_RETURN(const PointCloud cloud, ReadPointCloudFile(drive.frame_paths[i]));
      std::vector<Eigen::Vector3d> xyz(cloud.size());
      for (size_t k = 0; k < cloud.size(); ++k) {
        const Eigen::Vector3d p = cloud.xyz[k].cast<double>();
        xyz[k] = posed ? Eigen::Vector3d(drive.poses[i] * p) : p;
      }
      // The pose first, so that a reader that streams has it before the frame.
      if (posed) {
        const auto body = EncodePoseStamped({stamp_ns, kWorldFrame, "", drive.poses[i]});
        DV_RETURN_IF_ERROR(w.WriteMessage(pose_channel, uint64_t(stamp_ns), uint64_t(stamp_ns),
                                          body.data(), body.size()));
      }
      const auto body =
          EncodePointCloud2(stamp_ns, posed ? kWorldFrame : kSensorFrame, xyz, cloud.intensity);
      DV_RETURN_IF_ERROR(
          w.WriteMessage(points, uint64_t(stamp_ns), uint64_t(stamp_ns), body.data(), body.size()));
    }
    return Status::Ok();
  });
}

}  // namespace dv::recorded
