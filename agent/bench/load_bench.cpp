// dejaview_load_bench: the agent under a live sensor load, as real processes. It builds a route
// map from the even frames of a drive (or, with --map-drives, from whole earlier drives of the
// same route: the real revisit, every frame of the drive live, with its localiser prior where
// the drive has poses_prior.txt), starts dejaview-server and dejaview-agent, and publishes the
// live frames (cycled) on N LiDAR topics at R Hz each over ZeroMQ, as a driver would, each
// frame carrying its pose and a wall-clock stamp. While it runs it samples the agent's CPU
// (/proc/PID/stat) and its /metrics (queue depth); a reader of the server's frame index sees
// each frame arrive, so latency is publish -> encoded -> spooled -> uploaded -> fsync'd and
// indexed on the server. After the load it waits for the backlog to drain and prints a table.
//   dejaview_load_bench [--drive DIR] [--map-drives DIR,DIR...] [--sensors 2] [--hz 10]
//                       [--seconds 20] [--threads 2] [--tolerance 0.1] [--queue 8] [--dir DIR]
//                       [--selection-radius R]   (default: the agent's own, agent.yaml)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/percentile.h"
#include "dejaview/base/testing/process_util.h"
#include "dejaview/maps/route_map.h"
#include "dejaview/store/frame_index.h"
#include "dejaview/transport/wire.h"

namespace dv {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string drive = DEJAVIEW_DATA_DIR "/kitti-odometry-mini/00";
  std::vector<std::string> map_drives;  // empty: the map from the drive's even frames
  int sensors = 2;
  double hz = 10;
  double seconds = 20;
  int threads = 2;
  double tolerance = 0.1;
  double selection_radius = -1;  // agent config selection_radius_m; < 0: the agent's default
  int queue = 8;
  std::string dir = (std::filesystem::temp_directory_path() / "dejaview-load-bench").string();
};

int64_t WallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// utime + stime of a process, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::vector<std::string> f;
  std::string cur;
  for (size_t i = close + 2; i < s.size(); ++i) {
    if (s[i] == ' ') {
      f.push_back(cur);
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  if (f.size() < 13) return 0;  // fields 14 and 15 of proc(5), counted after the name
  return double(std::atoll(f[11].c_str()) + std::atoll(f[12].c_str())) /
         double(sysconf(_SC_CLK_TCK));
}

struct Frame {
  std::vector<uint8_t> points;
  transport::FrameHeader header;
};

int Main(const Args& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(args.dir, ec);
  if (!MakeDirs(args.dir).ok()) return 1;
  auto drive = OpenDrive(args.drive);
  if (!drive.ok() || drive->poses.empty()) {
    std::fprintf(stderr, "load_bench: %s\n",
                 drive.ok() ? "the drive has no poses.txt" : drive.status().ToString().c_str());
    return 1;
  }
  maps::BuildOptions mo;
  std::vector<Drive> map_drives;
  for (const std::string& dir : args.map_drives) {
    auto d = OpenDrive(dir);
    if (!d.ok()) {
      std::fprintf(stderr, "load_bench: %s\n", d.status().ToString().c_str());
      return 1;
    }
    map_drives.push_back(std::move(*d));
  }
  const bool revisit = !map_drives.empty();
  if (!revisit) {
    mo.every = 2;  // even frames build the map, odd frames are the live load
    map_drives.push_back(*drive);
  }
  const std::string map_dir = args.dir + "/map";
  if (const Status s = maps::BuildMap(map_drives, mo, map_dir); !s.ok()) {
    std::fprintf(stderr, "load_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  const bool prior = revisit && drive->poses_prior.size() == drive->size();
  std::vector<Frame> frames;
  for (size_t i = revisit ? 0 : 1; i < drive->size(); i += revisit ? 1 : 2) {
    auto cloud = ReadPointCloudFile(drive->frame_paths[i]);
    if (!cloud.ok()) {
      std::fprintf(stderr, "load_bench: %s\n", cloud.status().ToString().c_str());
      return 1;
    }
    Frame f;
    f.header.frame_id = "velodyne";
    f.header.has_pose = true;
    f.header.T_map_sensor = prior ? drive->poses_prior[i] : drive->poses[i];
    f.points = transport::PackPointCloud(*cloud, &f.header);
    frames.push_back(std::move(f));
  }

  test::Process server({DEJAVIEW_SERVER_BIN, "--store", args.dir + "/store", "--listen",
                        "tcp://127.0.0.1:0", "--port-file", args.dir + "/server.port"},
                       args.dir + "/server.log");
  if (!test::WaitUntil([&] { return !test::ReadTrimmed(args.dir + "/server.port").empty(); })) {
    std::fprintf(stderr, "load_bench: the server did not start (%s/server.log)\n",
                 args.dir.c_str());
    return 1;
  }
  zmq::context_t ctx(1);
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  pub.set(zmq::sockopt::sndhwm, 1000);
  pub.bind("tcp://127.0.0.1:0");
  const std::string lidar = pub.get(zmq::sockopt::last_endpoint);
  std::vector<std::string> topics;
  std::string sensors_yaml;
  for (int s = 0; s < args.sensors; ++s) {
    topics.push_back("lidar/s" + std::to_string(s) + "/");
    sensors_yaml += (s ? ", " : "") + std::string("{id: ") + std::to_string(s) +
                    ", topic: " + topics.back() + "}";
  }
  {
    std::ofstream y(args.dir + "/agent.yaml");
    y << "vehicle: bench\ndrive: load\nsensors: [" << sensors_yaml << "]\nlidar_endpoint: \""
      << lidar << "\"\nmap_dir: " << map_dir << "\ntolerance_m: " << args.tolerance
      << (args.selection_radius >= 0
              ? "\nselection_radius_m: " + std::to_string(args.selection_radius)
              : std::string())
      << "\nencoder_threads: " << args.threads << "\nqueue_frames: " << args.queue
      << "\nspool: {dir: " << args.dir << "/spool}\nupload: {endpoint: \""
      << test::ReadTrimmed(args.dir + "/server.port") << "\"}\nmetrics_listen: 127.0.0.1:0\n";
  }
  test::Process agent({DEJAVIEW_AGENT_BIN, "--config", args.dir + "/agent.yaml",
                       "--metrics-port-file", args.dir + "/agent.port"},
                      args.dir + "/agent.log");
  if (!test::WaitUntil([&] { return !test::ReadTrimmed(args.dir + "/agent.port").empty(); })) {
    std::fprintf(stderr, "load_bench: the agent did not start (%s/agent.log)\n", args.dir.c_str());
    return 1;
  }
  const int metrics_port = std::atoi(test::ReadTrimmed(args.dir + "/agent.port").c_str());
  // Every topic subscribed before the clock starts (PUB drops what it sends earlier).
  std::set<std::string> subscribed;
  test::WaitUntil(
      [&] {
        zmq::message_t sub;
        while (pub.recv(sub, zmq::recv_flags::dontwait)) {
          const std::string m = sub.to_string();
          if (!m.empty() && m[0] == 1) subscribed.insert(m.substr(1));
        }
        for (const std::string& t : topics) {
          bool covered = false;
          for (const std::string& prefix : subscribed) covered |= t.rfind(prefix, 0) == 0;
          if (!covered) return false;
        }
        return true;
      },
      10);

  // Samplers: queue depth and agent CPU every 250 ms, arrivals in the index every 50 ms.
  std::atomic<bool> stop_sampling{false};
  std::mutex mu;
  std::vector<double> depths, latencies_ms;
  std::set<std::pair<uint32_t, uint64_t>> arrived;
  std::thread sampler([&] {
    auto index = store::OpenSqliteFrameIndex(args.dir + "/store/index.sqlite");
    auto last_depth = Clock::now();
    while (!stop_sampling) {
      if (Clock::now() - last_depth > std::chrono::milliseconds(250)) {
        last_depth = Clock::now();
        const auto m = test::ScrapeMetrics(metrics_port);
        const auto it = m.find("dejaview_agent_queue_depth");
        if (it != m.end()) {
          std::lock_guard<std::mutex> l(mu);
          depths.push_back(it->second);
        }
      }
      if (!index.ok()) index = store::OpenSqliteFrameIndex(args.dir + "/store/index.sqlite");
      if (index.ok()) {
        auto rows = (*index)->Query({});
        const int64_t now = WallNs();
        std::lock_guard<std::mutex> l(mu);
        for (const auto& r : rows.ok() ? *rows : std::vector<store::FrameRecord>{}) {
          if (arrived.insert({r.sensor_id, r.sequence}).second) {
            latencies_ms.push_back(double(now - r.timestamp_ns) / 1e6);
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  const double cpu0 = CpuSeconds(agent.pid());
  const auto start = Clock::now();
  const double period = 1.0 / args.hz;
  uint64_t published = 0;
  const auto ticks = uint64_t(args.seconds * args.hz);
  for (uint64_t k = 0; k < ticks; ++k) {
    for (int s = 0; s < args.sensors; ++s) {
      // Sensors spread over the period, as unsynchronised spinning LiDARs are.
      std::this_thread::sleep_until(
          start + std::chrono::duration<double>(period * (double(k) + double(s) / args.sensors)));
      Frame& f = frames[k % frames.size()];
      f.header.sequence = k;
      f.header.sensor_stamp_ns = WallNs();
      f.header.publish_stamp_ns = f.header.sensor_stamp_ns;
      auto msg = transport::EncodeFrame(f.header, f.points.data(), f.points.size());
      if (!msg.ok()) return 1;
      pub.send(zmq::buffer(topics[size_t(s)]), zmq::send_flags::sndmore);
      pub.send(zmq::buffer(*msg), zmq::send_flags::none);
      ++published;
    }
  }
  const double load_s = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu_load = CpuSeconds(agent.pid()) - cpu0;
  // Drain: every frame published reaches the agent, and everything it encoded reaches the
  // index (bounded waits: a frame lost on the way shows as published > received).
  std::map<std::string, double> m;
  test::WaitUntil(
      [&] {
        m = test::ScrapeMetrics(metrics_port);
        return m["dejaview_agent_frames_in_total"] >= double(published);
      },
      10);
  test::WaitUntil(
      [&] {
        m = test::ScrapeMetrics(metrics_port);
        std::lock_guard<std::mutex> l(mu);
        const double settled = m["dejaview_agent_frames_encoded_total"] +
                               m["dejaview_agent_frames_dropped_queue_total"] +
                               m["dejaview_agent_frames_failed_total"];
        return !m.empty() && settled >= m["dejaview_agent_frames_in_total"] &&
               double(arrived.size()) >= m["dejaview_agent_frames_encoded_total"];
      },
      120);
  const double drain_s = std::chrono::duration<double>(Clock::now() - start).count() - load_s;
  stop_sampling = true;
  sampler.join();
  std::lock_guard<std::mutex> l(mu);
  double depth_mean = 0;
  for (double d : depths) depth_mean += d / double(std::max<size_t>(1, depths.size()));
  const double enc_n = m["dejaview_agent_encode_seconds_count"];
  std::printf(
      "| sensors x Hz | published | received | encoded | dropped (queue) | on server | agent CPU "
      "(%% of %u cores) | queue depth mean / max (of %d) | latency p50 / p99 ms | encode mean ms "
      "| drain s |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
      std::thread::hardware_concurrency(), args.queue);
  std::printf(
      "| %d x %g | %llu | %.0f | %.0f | %.0f | %zu | %.0f%% | %.1f / %.0f | %.0f / %.0f | %.0f | "
      "%.1f |\n",
      args.sensors, args.hz, (unsigned long long)published, m["dejaview_agent_frames_in_total"],
      m["dejaview_agent_frames_encoded_total"], m["dejaview_agent_frames_dropped_queue_total"],
      arrived.size(), 100.0 * cpu_load / load_s / std::thread::hardware_concurrency(), depth_mean,
      depths.empty() ? 0.0 : *std::max_element(depths.begin(), depths.end()),
      NearestRank(latencies_ms, 0.5), NearestRank(latencies_ms, 0.99),
      enc_n > 0 ? 1000.0 * m["dejaview_agent_encode_seconds_sum"] / enc_n : 0.0, drain_s);
  agent.Signal(SIGTERM);
  agent.Wait(30);
  return 0;
}

}  // namespace
}  // namespace dv

int main(int argc, char** argv) {
  dv::Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--drive") {
      a.drive = v;
    } else if (k == "--map-drives") {
      for (size_t b = 0, e; b <= v.size(); b = e + 1) {
        e = std::min(v.find(',', b), v.size());
        if (e > b) a.map_drives.push_back(v.substr(b, e - b));
      }
    } else if (k == "--sensors") {
      a.sensors = std::atoi(v.c_str());
    } else if (k == "--hz") {
      a.hz = std::atof(v.c_str());
    } else if (k == "--seconds") {
      a.seconds = std::atof(v.c_str());
    } else if (k == "--threads") {
      a.threads = std::atoi(v.c_str());
    } else if (k == "--tolerance") {
      a.tolerance = std::atof(v.c_str());
    } else if (k == "--selection-radius") {
      a.selection_radius = std::atof(v.c_str());
    } else if (k == "--queue") {
      a.queue = std::atoi(v.c_str());
    } else if (k == "--dir") {
      a.dir = v;
    } else {
      std::fprintf(stderr, "load_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.sensors < 1 || a.sensors > 64 || !(a.hz > 0) || !(a.seconds > 0) || a.threads < 1 ||
      a.queue < 1) {
    std::fprintf(stderr, "load_bench: sensors 1..64, positive hz, seconds, threads and queue\n");
    return 2;
  }
  return dv::Main(a);
}
