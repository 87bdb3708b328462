#include <chrono>
#include <cstdio>
#include <map>
#include <zmq.hpp>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/transport/wire.h"
#include "progress.h"

namespace dv::cli {

int RunRecord(int argc, char** argv) {
  auto args =
      Args::Parse(argc, argv, {"endpoint", "out", "frames", "timeout-ms", "topic", "pose-topic"},
                  {"help", "quiet"});
  if (!args.ok()) return Fail("record", args.status());
  if (args->Has("help") || !args->Has("endpoint") || !args->Has("out")) {
    std::printf(
        "usage: dejaview record --endpoint tcp://HOST:PORT --out DIR [--frames N] [--timeout-ms "
        "5000]\n"
        "         [--topic lidar/top/points/] [--pose-topic pose/]\n"
        "connects a SUB socket and writes DIR/{velodyne/*.bin, poses.txt, timestamps.txt}\n");
    return args->Has("help") ? kOk : kUsage;
  }
  auto max_frames = args->GetInt("frames", 0);
  auto timeout_ms = args->GetInt("timeout-ms", 5000);
  if (!max_frames.ok()) return Fail("record", max_frames.status());
  if (!timeout_ms.ok()) return Fail("record", timeout_ms.status());
  const std::string out = args->Get("out");
  const std::string topic = args->Get("topic", "lidar/top/points/");
  const std::string pose_topic = args->Get("pose-topic", "pose/");
  Progress progress("record", "frames", args->Has("quiet"));
  Status s = MakeDirs(out + "/velodyne");
  if (!s.ok()) return Fail("record", s);

  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::rcvtimeo, int(*timeout_ms));
  sub.set(zmq::sockopt::subscribe, topic);
  sub.set(zmq::sockopt::subscribe, pose_topic);
  try {
    sub.connect(args->Get("endpoint"));
  } catch (const zmq::error_t& e) {
    return Fail("record", Status::Unavailable(args->Get("endpoint") + ": " + e.what()));
  }
  transport::WireCounters counters;
  std::map<int64_t, Pose> pose_by_stamp;  // pose messages precede their frame
  std::vector<Pose> poses;
  std::vector<double> stamps_s;
  bool all_posed = true;
  uint64_t expected_seq = 0, gaps = 0;
  size_t frames = 0;
  while (*max_frames <= 0 || frames < size_t(*max_frames)) {
    zmq::message_t t, body;
    if (!sub.recv(t)) break;  // timeout: the stream has gone quiet
    if (!t.more() || !sub.recv(body)) continue;
    if (body.more()) {  // not a [topic][body] message: drain and drop it
      zmq::message_t junk;
      while (sub.recv(junk) && junk.more()) {
      }
      std::fprintf(stderr, "dejaview record: dropped a message of more than two parts\n");
      continue;
    }
    const std::string tp = t.to_string();
    const auto* data = static_cast<const uint8_t*>(body.data());
    if (tp == pose_topic) {
      auto p = transport::DecodePose(data, body.size(), &counters);
      if (!p.ok()) {
        std::fprintf(stderr, "dejaview record: dropped: %s\n", p.status().ToString().c_str());
        continue;
      }
      pose_by_stamp[p->stamp_ns] = p->T_map_sensor;
      continue;
    }
    auto frame = transport::DecodeFrame(data, body.size(), &counters);
    if (!frame.ok()) {
      std::fprintf(stderr, "dejaview record: dropped: %s\n", frame.status().ToString().c_str());
      continue;
    }
    auto cloud = transport::ToPointCloud(*frame, &counters);
    if (!cloud.ok()) {
      std::fprintf(stderr, "dejaview record: dropped: %s\n", cloud.status().ToString().c_str());
      continue;
    }
    const auto& h = frame->header;
    if (h.sequence != expected_seq)
      gaps += h.sequence > expected_seq ? h.sequence - expected_seq : 0;
    expected_seq = h.sequence + 1;
    char name[32];
    std::snprintf(name, sizeof(name), "/velodyne/%06zu.bin", frames);
    s = WriteKittiBin(out + name, *cloud);
    if (!s.ok()) return Fail("record", s);
    auto it = pose_by_stamp.find(h.sensor_stamp_ns);
    if (it != pose_by_stamp.end()) {
      poses.push_back(it->second);
      pose_by_stamp.erase(pose_by_stamp.begin(), ++it);
    } else if (h.has_pose) {
      poses.push_back(h.T_map_sensor);
    } else {
      all_posed = false;
    }
    stamps_s.push_back(double(h.sensor_stamp_ns) / 1e9);
    ++frames;
    progress.Update(frames, 0);
  }
  progress.Finish();
  if (all_posed && !poses.empty()) s = WriteKittiPoses(out + "/poses.txt", poses);
  if (s.ok() && frames > 0) s = WriteTimestamps(out + "/timestamps.txt", stamps_s);
  if (!s.ok()) return Fail("record", s);
  std::printf("recorded %zu frames%s, %llu sequence gaps, %llu rejected", frames,
              all_posed && !poses.empty() ? " with poses" : "", (unsigned long long)gaps,
              (unsigned long long)counters.Total());
  for (size_t r = 0; r < counters.rejected.size(); ++r) {
    if (counters.rejected[r]) {
      std::printf(" %s=%llu", transport::RejectName(transport::Reject(r)),
                  (unsigned long long)counters.rejected[r]);
    }
  }
  std::printf("\n");
  return frames > 0 ? kOk : kFailure;
}

}  // namespace dv::cli
