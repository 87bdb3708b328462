#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <zmq.hpp>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/kitti.h"
#include "dejaview/base/pcd.h"
#include "dejaview/recorded/drive_mcap.h"
#include "dejaview/transport/wire.h"
#include "progress.h"

namespace dv::cli {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The slow-joiner problem: PUB drops what it sends before a subscriber is attached. XPUB sees
// the subscriptions, so replay starts once every topic it sends is subscribed (or on timeout).
bool WaitForSubscribers(zmq::socket_t& pub, const std::vector<std::string>& topics, int wait_ms) {
  std::vector<bool> covered(topics.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{pub.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    zmq::message_t sub;
    while (pub.recv(sub, zmq::recv_flags::dontwait)) {
      const std::string s = sub.to_string();
      if (s.empty() || s[0] != 1) continue;  // 1 = subscribe, 0 = unsubscribe
      for (size_t i = 0; i < topics.size(); ++i)
        covered[i] = covered[i] || topics[i].rfind(s.substr(1), 0) == 0;
    }
    bool all = true;
    for (bool c : covered) all = all && c;
    if (all) return true;
  }
  return false;
}

// The drive's poses as its rows are written. OpenDrive re-orthonormalises every pose
// (PoseFromKitti12); the wire carries a pose verbatim when its rotation passes the wire's check
// (docs/wire.md), so a row that passes is published bit for bit and only one that fails is
// replaced by the re-orthonormalised pose (counted in *replaced).
StatusOr<std::vector<Pose>> VerbatimPoses(const std::string& path,
                                          const std::vector<Pose>& orthonormalised,
                                          size_t* replaced) {
  DV_ASSIGN_OR_RETURN(const auto rows, ReadKittiPoseRows(path));
  if (rows.size() != orthonormalised.size())
    return Status::Corruption(path + ": changed while replaying");
  std::vector<Pose> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& v = rows[i];
    transport::PoseMessage p;
    p.T_map_sensor.linear() << v[0], v[1], v[2], v[4], v[5], v[6], v[8], v[9], v[10];
    p.T_map_sensor.translation() = Eigen::Vector3d(v[3], v[7], v[11]);
    const std::vector<uint8_t> body = transport::EncodePose(p);
    const bool on_wire = transport::DecodePose(body.data(), body.size(), nullptr).ok();
    out.push_back(on_wire ? p.T_map_sensor : orthonormalised[i]);
    *replaced += on_wire ? 0 : 1;
  }
  return out;
}

// A frame's points and field table (into h): a PCD's records as they are, its table mapped onto
// the wire's (docs/wire.md) so that every field a driver sent (reflectivity, ambient, range, ...)
// and every point (NaN included) travels; other files as PackPointCloud packs a cloud. A PCD
// field of 64-bit integers, which the wire has no type for, and padding ('_') stay as unnamed
// bytes of the record.
StatusOr<std::vector<uint8_t>> FramePoints(const std::string& path, transport::FrameHeader* h) {
  if (std::filesystem::path(path).extension() != ".pcd") {
    DV_ASSIGN_OR_RETURN(const PointCloud cloud, ReadPointCloudFile(path));
    return transport::PackPointCloud(cloud, h);
  }
  DV_ASSIGN_OR_RETURN(PcdTable table, ReadPcdTable(path));
  h->fields.clear();
  for (const PcdField& f : table.fields) {
    if (f.name == "_" || (f.size == 8 && f.type != 'F')) continue;
    const int bits = f.size * 8;
    transport::DataType type;
    if (f.type == 'F') {
      type = f.size == 4 ? transport::DataType::kFloat32 : transport::DataType::kFloat64;
    } else if (f.type == 'U') {
      type = bits == 8    ? transport::DataType::kUint8
             : bits == 16 ? transport::DataType::kUint16
                          : transport::DataType::kUint32;
    } else {
      type = bits == 8    ? transport::DataType::kInt8
             : bits == 16 ? transport::DataType::kInt16
                          : transport::DataType::kInt32;
    }
    h->fields.push_back({f.name, uint32_t(f.offset), type, f.count});
  }
  h->point_count = uint32_t(table.points());
  h->point_stride = uint32_t(table.record_bytes);
  return std::move(table.records);
}

// A recording (.mcap, ROS 2 .db3, ROS 1 .bag) or an Ouster capture is replayed from a drive folder
// it is first imported into (dejaview import), removed when replay ends.
class ImportedDrive {
 public:
  ~ImportedDrive() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  StatusOr<std::string> Import(const std::string& recording, const recorded::ImportOptions& o) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dejaview-replay-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      return Status::IoError(tmpl + ": " + std::strerror(errno));
    dir_ = tmpl;
    DV_ASSIGN_OR_RETURN(const auto stats, recorded::ImportRecording(recording, dir_, o));
    std::fprintf(stderr, "dejaview replay: %s: %zu frames from %s%s%s\n", recording.c_str(),
                 stats.frames, stats.cloud_topic.c_str(),
                 stats.posed == stats.frames && stats.frames > 0 ? ", poses from " : "",
                 stats.posed == stats.frames ? stats.pose_topic.c_str() : "");
    return dir_;
  }

 private:
  std::string dir_;
};

}  // namespace

int RunReplay(int argc, char** argv) {
  auto args = Args::Parse(argc, argv,
                          {"endpoint", "rate", "topic", "pose-topic", "wait-ms", "source-topic",
                           "source-pose-topic", "metadata"},
                          {"fast", "loop", "lz4", "help", "quiet", "prior"});
  if (!args.ok()) return Fail("replay", args.status());
  if (args->Has("help") || args->positional().size() != 1 || !args->Has("endpoint")) {
    std::printf(
        "usage: dejaview replay DRIVE --endpoint tcp://HOST:PORT [--rate 1.0|--fast] [--loop]\n"
        "         [--topic lidar/top/points/] [--pose-topic pose/] [--lz4] [--wait-ms 5000]\n"
        "         [--prior]   (publish poses_prior.txt, a localiser's estimate, not poses.txt)\n"
        "       DRIVE may be a recording, .mcap, ROS 2 .db3 or ROS 1 .bag (as dejaview import "
        "reads it; its\n"
        "         topics: [--source-topic T] [--source-pose-topic T]), or an Ouster capture .pcap\n"
        "         (with --metadata SENSOR.json)\n"
        "binds a PUB socket and publishes frames (and poses) at the recorded rate\n");
    return args->Has("help") ? kOk : kUsage;
  }
  auto rate = args->GetDouble("rate", 1.0);
  auto wait_ms = args->GetInt("wait-ms", 5000);
  if (!rate.ok()) return Fail("replay", rate.status());
  if (!wait_ms.ok()) return Fail("replay", wait_ms.status());
  if (*rate <= 0) return Fail("replay", Status::InvalidArgument("--rate must be > 0"));
  const std::string topic = args->Get("topic", "lidar/top/points/");
  const std::string pose_topic = args->Get("pose-topic", "pose/");
  if (topic.empty() || topic.back() != '/' || pose_topic.empty() || pose_topic.back() != '/') {
    return Fail("replay", Status::InvalidArgument("topics must end in '/' (docs/wire.md)"));
  }
  ImportedDrive imported;
  std::string source = args->positional()[0];
  if (recorded::IsImportable(source)) {
    recorded::ImportOptions o;
    o.cloud_topic = args->Get("source-topic");
    o.pose_topic = args->Get("source-pose-topic");
    o.ouster_metadata = args->Get("metadata");
    auto dir = imported.Import(source, o);
    if (!dir.ok()) return Fail("replay", dir.status());
    source = *dir;
  }
  auto drive = OpenDrive(source);
  if (!drive.ok()) return Fail("replay", drive.status());
  const bool fast = args->Has("fast"), loop = args->Has("loop"), quiet = args->Has("quiet");
  Progress progress("replay", "frames", quiet);
  if (args->Has("prior")) {
    if (drive->poses_prior.empty()) {
      return Fail("replay",
                  Status::NotFound(drive->root + ": --prior given but no poses_prior.txt"));
    }
    drive->poses = drive->poses_prior;
  }
  const bool has_poses = !drive->poses.empty();
  if (has_poses) {
    size_t replaced = 0;
    auto rows =
        VerbatimPoses(drive->root + (args->Has("prior") ? "/poses_prior.txt" : "/poses.txt"),
                      drive->poses, &replaced);
    if (!rows.ok()) return Fail("replay", rows.status());
    drive->poses = std::move(rows).value();
    if (replaced > 0 && !quiet) {
      std::fprintf(stderr,
                   "dejaview replay: %zu pose rows are not rotations to the wire's tolerance; "
                   "publishing them re-orthonormalised\n",
                   replaced);
    }
  }

  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  pub.set(zmq::sockopt::xpub_nodrop, 1);  // block instead of dropping when a subscriber lags
  pub.set(zmq::sockopt::sndhwm, 100);
  pub.set(zmq::sockopt::linger, 10000);  // let the last frames leave before exit
  try {
    pub.bind(args->Get("endpoint"));
  } catch (const zmq::error_t& e) {
    return Fail("replay", Status::Unavailable(args->Get("endpoint") + ": " + e.what()));
  }
  std::vector<std::string> topics = {topic};
  if (has_poses) topics.push_back(pose_topic);
  if (!WaitForSubscribers(pub, topics, int(*wait_ms)) && !quiet) {
    std::fprintf(stderr, "dejaview replay: no subscriber after %ld ms, publishing anyway\n",
                 *wait_ms);
  }
  const double period_s =
      drive->timestamps_s.size() > 1
          ? (drive->timestamps_s.back() - drive->timestamps_s.front()) / double(drive->size() - 1)
          : 0.1;
  uint64_t sequence = 0, bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int pass = 0; pass == 0 || loop; ++pass) {
    for (size_t i = 0; i < drive->size(); ++i, ++sequence) {
      const double t_s = drive->timestamps_s.empty() ? double(i) * 0.1 : drive->timestamps_s[i];
      // Loops continue the clock so that a recorder sees strictly increasing stamps.
      const double t_loop = t_s + pass * (double(drive->size()) * period_s);
      if (!fast) {
        const double t0 = drive->timestamps_s.empty() ? 0.0 : drive->timestamps_s.front();
        std::this_thread::sleep_until(start + std::chrono::duration<double>((t_loop - t0) / *rate));
      }
      transport::FrameHeader h;
      h.sequence = sequence;
      h.sensor_stamp_ns = std::llround(t_loop * 1e9);
      h.frame_id = "velodyne";
      h.lz4 = args->Has("lz4");
      if (has_poses) {
        h.has_pose = true;
        h.T_map_sensor = drive->poses[i];
        transport::PoseMessage p;
        p.stamp_ns = h.sensor_stamp_ns;
        p.T_map_sensor = drive->poses[i];
        const auto pb = transport::EncodePose(p);
        pub.send(zmq::buffer(pose_topic), zmq::send_flags::sndmore);
        pub.send(zmq::buffer(pb), zmq::send_flags::none);
      }
      auto points = FramePoints(drive->frame_paths[i], &h);
      if (!points.ok()) return Fail("replay", points.status());
      h.publish_stamp_ns = NowNs();
      auto msg = transport::EncodeFrame(h, points->data(), points->size());
      if (!msg.ok()) return Fail("replay", msg.status());
      pub.send(zmq::buffer(topic), zmq::send_flags::sndmore);
      pub.send(zmq::buffer(*msg), zmq::send_flags::none);
      bytes += msg->size();
      char mb[32];
      std::snprintf(mb, sizeof(mb), ", %.1f MB", double(bytes) / 1e6);
      progress.Update(size_t(sequence + 1), 0, mb);
    }
  }
  progress.Finish();
  std::printf("published %llu frames%s, %llu bytes, %.2f s\n", (unsigned long long)sequence,
              has_poses ? " and poses" : "", (unsigned long long)bytes,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return kOk;
}

}  // namespace dv::cli
