// Fault tests of the running system (issue: "Fault and load tests"): dejaview-agent and
// dejaview-server as real processes on loopback sockets with real spool and store files,
// killed with SIGKILL at pseudo-random (seeded) points. Waits are bounded polls on observable
// state (files, /metrics), never timing assertions.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/base/testing/process_util.h"
#include "dejaview/base/version.h"
#include "dejaview/server/storage.h"
#include "dejaview/transport/spool.h"
#include "dejaview/transport/upload.h"
#include "dejaview/transport/wire.h"
#include "testutil.h"

namespace dv {
namespace {

namespace fs = std::filesystem;

// A synthetic drive: n frames of `points` points, 10 Hz, a straight line.
std::string MakeDrive(const std::string& dir, size_t n, size_t points) {
  const std::string drive = dir + "/drive";
  EXPECT_TRUE(MakeDirs(drive + "/velodyne").ok());
  std::vector<Pose> poses;
  std::vector<double> times;
  for (size_t i = 0; i < n; ++i) {
    PointCloud c;
    for (size_t p = 0; p < points; ++p) {
      // Scattered points (a fixed hash), so that frames do not compress to nothing.
      const uint32_t h = uint32_t(p * 2654435761u) ^ uint32_t(i * 40503u);
      c.push_back(
          Eigen::Vector3f(float(h % 4001) * 0.01f, float((h >> 12) % 3001) * 0.01f, float(i)),
          float(p % 7) / 7.0f);
    }
    char name[48];
    std::snprintf(name, sizeof(name), "/velodyne/%06zu.bin", i);
    EXPECT_TRUE(WriteKittiBin(drive + name, c).ok());
    Pose T = Pose::Identity();
    T.translation() = Eigen::Vector3d(double(i), 0, 0);
    poses.push_back(T);
    times.push_back(0.1 * double(i));
  }
  EXPECT_TRUE(WriteKittiPoses(drive + "/poses.txt", poses).ok());
  EXPECT_TRUE(WriteTimestamps(drive + "/timestamps.txt", times).ok());
  return drive;
}

using test::Process;
using test::ReadTrimmed;

bool WaitFor(const std::function<bool()>& cond, double timeout_s = 20) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

struct Config {
  std::string drive, spool, endpoint;
  std::string lidar;  // the live source's PUB endpoint; empty: drive (or no source)
  double rate_hz = 0;
  std::string sync = "every_record";
  int budget_kb = 65536;
  int segment_kb = 256;
  std::string gate = "gate: always";
  int timeout_ms = 300;
};

std::string WriteConfig(const std::string& path, const Config& c) {
  std::ofstream out(path);
  out << "vehicle: veh-1\nsensors: [{id: 0, topic: lidar/}]\nsource_drive: \"" << c.drive
      << "\"\nsource_rate_hz: " << c.rate_hz << "\nqueue_frames: 4\nspool: {dir: " << c.spool
      << ", sync: " << c.sync << ", budget_kb: " << c.budget_kb << ", segment_kb: " << c.segment_kb
      << "}\nupload: {endpoint: \"" << c.endpoint
      << "\", window: 3, batch_records: 4, timeout_ms: " << c.timeout_ms
      << ", backoff_min_ms: 50, backoff_max_ms: 400, " << c.gate
      << "}\nmetrics_listen: 127.0.0.1:0\nlidar_endpoint: \"" << c.lidar << "\"\n";
  return path;
}

// A LiDAR driver as docs/wire.md describes it: an XPUB (a PUB that also reports subscriptions,
// so that nothing is published before the agent listens) sending [topic] [body] messages.
class Driver {
 public:
  Driver() : pub_(ctx_, zmq::socket_type::xpub) {
    pub_.set(zmq::sockopt::linger, 0);
    pub_.set(zmq::sockopt::xpub_verbose, 1);  // every subscription, also a repeated one
    pub_.set(zmq::sockopt::rcvtimeo, 200);
    pub_.bind("tcp://127.0.0.1:0");
  }
  std::string endpoint() { return pub_.get(zmq::sockopt::last_endpoint); }
  // Waits for a subscription to the frame topic (a new or restarted agent's).
  bool WaitSubscribed(double timeout_s = 20) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      zmq::message_t m;
      if (!pub_.recv(m, zmq::recv_flags::none)) continue;
      if (m.size() >= 1 && static_cast<const char*>(m.data())[0] == 1 &&
          m.to_string().substr(1) == "lidar/")
        return true;
    }
    return false;
  }
  void Send(const std::vector<std::string>& parts) {
    for (size_t i = 0; i < parts.size(); ++i) {
      pub_.send(zmq::buffer(parts[i]),
                i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  // Frame `seq` of a synthetic scan (its content depends on salt), with a pose or without.
  std::string Frame(uint64_t seq, uint32_t salt, bool with_pose, uint32_t nan_points = 0) {
    PointCloud c;
    for (uint32_t p = 0; p < 800; ++p) {
      const uint32_t h = p * 2654435761u ^ (uint32_t(seq) * 40503u + salt);
      const float x =
          p < nan_points ? std::numeric_limits<float>::quiet_NaN() : float(h % 4001) * 0.01f;
      c.push_back(Eigen::Vector3f(x, float((h >> 12) % 3001) * 0.01f, 1.0f), 0.25f);
    }
    transport::FrameHeader h;
    h.sequence = seq;
    h.sensor_stamp_ns = int64_t(1'700'000'000'000'000'000) + int64_t(seq) * 100'000'000;
    h.has_pose = with_pose;
    const std::vector<uint8_t> points = transport::PackPointCloud(c, &h);
    auto body = transport::EncodeFrame(h, points.data(), points.size());
    EXPECT_TRUE(body.ok()) << body.status().ToString();
    return std::string(body->begin(), body->end());
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t pub_;
};

class System : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::ScratchDir();
    store_ = dir_ + "/store";
  }
  // Starts the server; the first start picks a free port, restarts reuse it.
  void StartServer(const std::vector<std::string>& extra = {}) {
    const std::string listen = endpoint_.empty() ? "tcp://127.0.0.1:0" : endpoint_;
    fs::remove(dir_ + "/server.port");
    std::vector<std::string> argv = {DEJAVIEW_SERVER_BIN,  "--store", store_,
                                     "--listen",           listen,    "--port-file",
                                     dir_ + "/server.port"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<Process>(argv, dir_ + "/server.log");
    ASSERT_TRUE(WaitFor([&] { return !ReadTrimmed(dir_ + "/server.port").empty(); }));
    endpoint_ = ReadTrimmed(dir_ + "/server.port");
  }
  std::unique_ptr<Process> StartAgent(const std::string& config, bool exit_when_drained,
                                      int* metrics_port) {
    fs::remove(dir_ + "/agent.port");
    std::vector<std::string> argv = {DEJAVIEW_AGENT_BIN, "--config", config, "--metrics-port-file",
                                     dir_ + "/agent.port"};
    if (exit_when_drained) argv.push_back("--exit-when-drained");
    auto p = std::make_unique<Process>(argv, dir_ + "/agent.log");
    EXPECT_TRUE(WaitFor([&] { return !ReadTrimmed(dir_ + "/agent.port").empty(); }));
    *metrics_port = std::atoi(ReadTrimmed(dir_ + "/agent.port").c_str());
    return p;
  }
  // Every (sensor, sequence) on the server, and the number of objects in its store (equal to
  // the set's size exactly when nothing was stored twice and no object is left unindexed).
  // Every (source epoch, sequence) on the server.
  std::multiset<std::pair<uint64_t, uint64_t>> ServerFrames(size_t* store_records) {
    auto storage = server::OpenStorage(store_, "", "");
    EXPECT_TRUE(storage.ok()) << storage.status().ToString();
    std::multiset<std::pair<uint64_t, uint64_t>> out;
    const auto rows = storage->index->Query({});
    EXPECT_TRUE(rows.ok());
    for (const auto& r : *rows) out.insert({r.source_epoch, r.sequence});
    *store_records = storage->store->disk()->objects();
    return out;
  }
  std::multiset<uint64_t> ServerSequences(size_t* store_records) {
    auto storage = server::OpenStorage(store_, "", "");
    EXPECT_TRUE(storage.ok()) << storage.status().ToString();
    std::multiset<uint64_t> seqs;
    const auto rows = storage->index->Query({});
    for (const auto& r : *rows) seqs.insert(r.sequence);
    *store_records = storage->store->disk()->objects();
    return seqs;
  }
  static std::set<uint64_t> PendingInSpool(const std::string& spool_dir) {
    transport::SpoolOptions o;
    o.dir = spool_dir;
    o.segment_bytes = 256 << 10;
    o.budget_bytes = uint64_t(64) << 20;
    auto spool = transport::Spool::Open(o);
    EXPECT_TRUE(spool.ok()) << spool.status().ToString();
    std::set<uint64_t> out;
    const auto records = (*spool)->Read(0, 1'000'000, SIZE_MAX);
    for (const auto& r : *records) out.insert(r.meta.sequence);
    return out;
  }

  std::string dir_, store_, endpoint_;
  std::unique_ptr<Process> server_;
};

TEST_F(System, AgentKilledAtRandomPointsLosesNothingThatReachedTheSpool) {
  const size_t n = 120;
  Config c;
  c.drive = MakeDrive(dir_, n, 1500);
  c.spool = dir_ + "/spool";
  c.rate_hz = 150;
  StartServer();
  c.endpoint = endpoint_;
  const std::string config = WriteConfig(dir_ + "/agent.yaml", c);
  std::mt19937 rng(20261202);
  std::set<uint64_t> spooled_at_kill;
  for (int round = 0; round < 3; ++round) {
    int port = 0;
    auto agent = StartAgent(config, false, &port);
    // A random point of progress: after k frames reached the spool this run.
    const double k = std::uniform_int_distribution<int>(5, int(n) - 10)(rng);
    ASSERT_TRUE(WaitFor(
        [&] { return test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"] >= k; }));
    agent->Signal(SIGKILL);
    EXPECT_EQ(agent->Wait(), 128 + SIGKILL);
    const std::set<uint64_t> pending = PendingInSpool(c.spool);
    spooled_at_kill.insert(pending.begin(), pending.end());
  }
  std::printf("records pending in the spool at the kills: %zu\n", spooled_at_kill.size());
  // The last run reads the whole drive unpaced (no queue drops) and exits once all is acked.
  c.rate_hz = 0;
  int port = 0;
  auto agent = StartAgent(WriteConfig(dir_ + "/agent-final.yaml", c), true, &port);
  ASSERT_EQ(agent->Wait(), 0) << "agent did not drain; see " << dir_ << "/agent.log";
  server_->Signal(SIGTERM);
  ASSERT_EQ(server_->Wait(), 0);
  size_t store_records = 0;
  const std::multiset<uint64_t> on_server = ServerSequences(&store_records);
  // Exactly once: every frame of the drive (the last run read it all), no duplicates, and every
  // record the kills left in the spool is among them.
  EXPECT_EQ(on_server.size(), n);
  EXPECT_EQ(std::set<uint64_t>(on_server.begin(), on_server.end()).size(), n);
  EXPECT_EQ(store_records, n);
  for (uint64_t s : spooled_at_kill) EXPECT_EQ(on_server.count(s), 1u) << "sequence " << s;
  EXPECT_TRUE(PendingInSpool(c.spool).empty());
}

TEST_F(System, LinkCutAndServerKilledSpoolGrowsThenDrains) {
  const size_t n = 150;
  Config c;
  c.drive = MakeDrive(dir_, n, 1500);
  c.spool = dir_ + "/spool";
  // 3.75 s of source: frames must still be coming when the server is killed, or the spool cannot
  // grow. At 100 Hz (1.5 s) a slow run under TSan had spooled the last frame before the kill.
  c.rate_hz = 40;
  c.sync = "group_commit";
  zmq::context_t ctx(1);
  zmq::socket_t link(ctx, zmq::socket_type::pub);
  link.set(zmq::sockopt::linger, 0);
  link.bind("tcp://127.0.0.1:0");
  const std::string link_ep = link.get(zmq::sockopt::last_endpoint);
  auto say = [&](const char* state) {
    link.send(zmq::str_buffer("link"), zmq::send_flags::sndmore);
    link.send(zmq::buffer(std::string(state)), zmq::send_flags::none);
  };
  StartServer();
  c.endpoint = endpoint_;
  c.gate = "gate: link, link_endpoint: \"" + link_ep + "\", link_topic: link";
  int port = 0;
  auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), true, &port);
  // Link down (no "up" yet): the spool grows and nothing leaves the vehicle.
  ASSERT_TRUE(WaitFor(
      [&] { return test::ScrapeMetrics(port)["dejaview_agent_spool_records_pending"] >= 40; }));
  EXPECT_EQ(test::ScrapeMetrics(port)["dejaview_agent_upload_batches_sent_total"], 0);
  // Link up: uploads start; the server is killed mid-stream and comes back later.
  ASSERT_TRUE(WaitFor([&] {
    say("up");
    return test::ScrapeMetrics(port)["dejaview_agent_upload_batches_acked_total"] >= 3;
  }));
  server_->Signal(SIGKILL);
  EXPECT_EQ(server_->Wait(), 128 + SIGKILL);
  const double pending_at_kill = test::ScrapeMetrics(port)["dejaview_agent_spool_records_pending"];
  ASSERT_TRUE(WaitFor([&] {
    say("up");
    return test::ScrapeMetrics(port)["dejaview_agent_spool_records_pending"] > pending_at_kill;
  }));
  StartServer();
  ASSERT_TRUE(WaitFor(
      [&] {
        say("up");
        return !agent->running();
      },
      30));
  EXPECT_EQ(agent->Wait(), 0);
  server_->Signal(SIGTERM);
  ASSERT_EQ(server_->Wait(), 0);
  size_t store_records = 0;
  const std::multiset<uint64_t> on_server = ServerSequences(&store_records);
  EXPECT_EQ(on_server.size(), n);
  EXPECT_EQ(std::set<uint64_t>(on_server.begin(), on_server.end()).size(), n);
  EXPECT_EQ(store_records, n);
}

TEST_F(System, DiskBudgetDropsOldestCountsAndKeepsRunning) {
  const size_t n = 100;
  Config c;
  c.drive = MakeDrive(dir_, n, 2000);  // several 32 kB segments' worth into a 96 kB budget
  c.spool = dir_ + "/spool";
  c.endpoint = "tcp://127.0.0.1:9";  // nobody listens: nothing is ever acknowledged
  c.budget_kb = 96;
  c.segment_kb = 32;
  c.sync = "group_commit";
  int port = 0;
  auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), false, &port);
  ASSERT_TRUE(WaitFor(
      [&] { return test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"] == n; }));
  const auto m = test::ScrapeMetrics(port);
  EXPECT_TRUE(agent->running());
  EXPECT_GT(m.at("dejaview_agent_spool_records_dropped_budget_total"), 0);
  EXPECT_LE(m.at("dejaview_agent_spool_bytes"), 96 << 10);
  // Every frame is either still spooled or counted as dropped, never both, never neither.
  EXPECT_EQ(m.at("dejaview_agent_spool_records_dropped_budget_total") +
                m.at("dejaview_agent_spool_records_pending"),
            double(n));
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(), 0);
  const std::set<uint64_t> left = PendingInSpool(c.spool);
  ASSERT_FALSE(left.empty());
  EXPECT_EQ(*left.rbegin(), n - 1);  // the newest frames are the ones kept
  EXPECT_EQ(left.size(), n - size_t(m.at("dejaview_agent_spool_records_dropped_budget_total")));
}

TEST_F(System, TornAndCorruptedSpoolIsRecoveredAndUploaded) {
  const size_t n = 40;
  Config c;
  c.drive = MakeDrive(dir_, n, 3000);  // several encoded frames per 32 kB block
  c.spool = dir_ + "/spool";
  c.endpoint = "tcp://127.0.0.1:9";
  c.segment_kb = 1024;
  {
    int port = 0;
    auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), false, &port);
    ASSERT_TRUE(WaitFor(
        [&] { return test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"] == n; }));
    agent->Signal(SIGTERM);
    ASSERT_EQ(agent->Wait(), 0);
  }
  std::vector<std::string> segs;
  for (const auto& e : fs::directory_iterator(c.spool)) {
    if (e.path().extension() == ".log") segs.push_back(e.path().string());
  }
  ASSERT_EQ(segs.size(), 1u);
  {
    // Damage block 1 (a flipped CRC bit) and leave half a record at the end (a torn write).
    ASSERT_GT(fs::file_size(segs[0]), 3 * transport::kLogBlockSize);
    std::fstream f(segs[0], std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(transport::kLogBlockSize);
    char b;
    f.get(b);
    f.seekp(transport::kLogBlockSize);
    f.put(char(b ^ 0x10));
  }
  {
    std::ofstream f(segs[0], std::ios::binary | std::ios::app);
    const std::string half(9000, '\x33');
    f << half;
  }
  // What recovery must keep, computed independently on a copy with the reader alone.
  std::set<uint64_t> intact;
  {
    auto r = transport::LogReader::Open(segs[0]);
    std::vector<uint8_t> body;
    uint64_t off;
    while (*r->Next(&body, &off))
      intact.insert(transport::DecodeRecord(body.data(), body.size())->meta.sequence);
    EXPECT_EQ(r->corrupt_blocks(), 1u);
  }
  ASSERT_GT(intact.size(), n / 2);
  ASSERT_LT(intact.size(), n);
  // Upload what is left, with no source this time.
  StartServer();
  c.endpoint = endpoint_;
  c.drive = "";
  int port = 0;
  auto agent = StartAgent(WriteConfig(dir_ + "/agent2.yaml", c), true, &port);
  ASSERT_EQ(agent->Wait(), 0);
  server_->Signal(SIGTERM);
  ASSERT_EQ(server_->Wait(), 0);
  size_t store_records = 0;
  const std::multiset<uint64_t> on_server = ServerSequences(&store_records);
  EXPECT_EQ(std::set<uint64_t>(on_server.begin(), on_server.end()), intact);
  EXPECT_EQ(on_server.size(), intact.size());
  const std::string log = *ReadFileText(dir_ + "/agent.log");
  EXPECT_NE(log.find("1 corrupt blocks skipped, 9000 torn bytes truncated"), std::string::npos)
      << log;
}

// Messages of any shape on the frame and pose topics are rejected, counted by reason, and the
// agent goes on taking frames; a frame without a pose is coded intra, never dropped; NaN points
// are counted; SIGTERM still stops the agent cleanly.
TEST_F(System, MalformedMessagesAreCountedAndTheAgentCarriesOn) {
  Driver driver;
  Config c;
  c.spool = dir_ + "/spool";
  c.endpoint = "tcp://127.0.0.1:9";  // nobody listens: everything stays in the spool
  c.lidar = driver.endpoint();
  int port = 0;
  auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), false, &port);
  ASSERT_TRUE(driver.WaitSubscribed());
  const std::string good = driver.Frame(0, 1, true);
  driver.Send({"lidar/", good, "extra"});  // three parts
  driver.Send({"pose/", "x", "y"});
  driver.Send({"lidar/"});  // one part
  driver.Send({"lidar/", "DVXX" + good.substr(4)});
  driver.Send({"lidar/zzz", good});  // shares the subscribed prefix only
  // One at a time, each waited for: the queue's drop-oldest policy is not under test here.
  auto publish = [&](const std::string& body) {
    const double want = test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"] + 1;
    driver.Send({"lidar/", body});
    return WaitFor(
        [&] { return test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"] == want; });
  };
  for (uint64_t seq = 1; seq <= 5; ++seq) ASSERT_TRUE(publish(driver.Frame(seq, 1, true)));
  ASSERT_TRUE(publish(driver.Frame(6, 1, true, 3)));
  // No pose in the frame and none on the pose topic: coded intra after pose_max_gap_ms.
  for (uint64_t seq = 7; seq <= 8; ++seq) ASSERT_TRUE(publish(driver.Frame(seq, 1, false)));
  auto m = test::ScrapeMetrics(port);
  EXPECT_EQ(m["dejaview_agent_frames_in_total"], 8);
  EXPECT_EQ(m["dejaview_agent_frames_no_pose_total"], 2);
  EXPECT_EQ(m["dejaview_agent_points_non_finite_total"], 3);
  EXPECT_EQ(m["dejaview_agent_wire_rejected_total{reason=\"wrong_shape\"}"], 3);
  EXPECT_EQ(m["dejaview_agent_wire_rejected_total{reason=\"bad_magic\"}"], 1);
  EXPECT_EQ(m["dejaview_agent_wire_rejected_total{reason=\"unknown_topic\"}"], 1);
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(), 0);
  EXPECT_EQ(PendingInSpool(c.spool).size(), 8u);
}

// The driver restarts mid-drive and numbers its frames from 0 again, the agent is killed and
// the server too, at seeded random points: every frame the agent received and spooled is on
// the server exactly once (the restarted driver's frames are new frames, not resends).
TEST_F(System, RestartedSourceAndKillsLoseNoFrameAndStoreNoneTwice) {
  Driver driver;
  Config c;
  c.spool = dir_ + "/spool";
  c.lidar = driver.endpoint();
  c.sync = "group_commit";
  StartServer();
  c.endpoint = endpoint_;
  const std::string config = WriteConfig(dir_ + "/agent.yaml", c);
  std::mt19937 rng(20261207);
  const uint64_t n = 20;
  const uint64_t agent_kill = std::uniform_int_distribution<uint64_t>(3, n - 3)(rng);
  const uint64_t server_kill = std::uniform_int_distribution<uint64_t>(3, n - 3)(rng);
  int port = 0;
  auto agent = StartAgent(config, false, &port);
  ASSERT_TRUE(driver.WaitSubscribed());
  double encoded_before = 0;  // by earlier runs of the agent
  // Publishes one frame and waits until this run of the agent has spooled it.
  auto publish = [&](uint64_t seq, uint32_t run) {
    const double want = test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"] + 1;
    driver.Send({"lidar/", driver.Frame(seq, run, true)});
    return WaitFor(
        [&] { return test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"] == want; });
  };
  for (uint64_t seq = 0; seq < n; ++seq) {
    ASSERT_TRUE(publish(seq, 1)) << "frame " << seq;
    if (seq == agent_kill) {
      encoded_before += test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"];
      agent->Signal(SIGKILL);
      EXPECT_EQ(agent->Wait(), 128 + SIGKILL);
      agent = StartAgent(config, false, &port);
      ASSERT_TRUE(driver.WaitSubscribed());
    }
  }
  // The driver restarts: sequence numbers from 0 again, other scans.
  for (uint64_t seq = 0; seq < n; ++seq) {
    ASSERT_TRUE(publish(seq, 2)) << "frame " << seq << " after the restart";
    if (seq == server_kill) {
      server_->Signal(SIGKILL);
      EXPECT_EQ(server_->Wait(), 128 + SIGKILL);
    }
  }
  StartServer();
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto m = test::ScrapeMetrics(port);
        return m.count("dejaview_agent_spool_records_pending") &&
               m.at("dejaview_agent_spool_records_pending") == 0;
      },
      30));
  EXPECT_EQ(encoded_before + test::ScrapeMetrics(port)["dejaview_agent_frames_encoded_total"],
            double(2 * n));
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(), 0);
  server_->Signal(SIGTERM);
  ASSERT_EQ(server_->Wait(), 0);
  size_t store_records = 0;
  const auto on_server = ServerFrames(&store_records);
  EXPECT_EQ(on_server.size(), 2 * n);
  using Key = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(std::set<Key>(on_server.begin(), on_server.end()).size(), 2 * n);
  EXPECT_EQ(store_records, 2 * n);
  // Three subscriptions (start, restart after the kill, and the driver's restart): every
  // sequence number is on the server twice, under two different epochs.
  std::map<uint64_t, std::set<uint64_t>> epochs_of;
  for (const auto& [epoch, seq] : on_server) epochs_of[seq].insert(epoch);
  ASSERT_EQ(epochs_of.size(), n);
  for (const auto& [seq, epochs] : epochs_of) EXPECT_EQ(epochs.size(), 2u) << "sequence " << seq;
}

// The uploader's state lines in an agent log, in order (what follows "uploader: "). It logs a
// state each time it changes, never twice in a row; on a loaded machine other states (a slow
// handshake's timeout) may come between two of the same, so tests check the order, not a count.
std::vector<std::string> UploaderStates(const std::string& log) {
  std::vector<std::string> states;
  std::istringstream lines(log);
  const std::string tag = "uploader: ";
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(tag);
    if (at != std::string::npos) states.push_back(line.substr(at + tag.size()));
  }
  return states;
}

// Each state is logged once per change: never the same state twice in a row, and `what` at least
// once.
void ExpectLoggedOncePerChange(const std::string& log, const std::string& what) {
  const std::vector<std::string> states = UploaderStates(log);
  size_t seen = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    seen += states[i].find(what) != std::string::npos;
    if (i > 0) {
      EXPECT_NE(states[i], states[i - 1]) << "logged twice in a row:\n" << log;
    }
  }
  EXPECT_GE(seen, 1u) << log;
}

// An agent started before its key is enrolled keeps trying (with backoff, saying so once) and
// uploads everything as soon as the key is enrolled and the server reloads its keys.
TEST_F(System, AgentStartedBeforeItsKeyIsEnrolledUploadsOnceEnrolled) {
  const auto server_keys = transport::GenerateCurveKeys().value();
  const auto agent_keys = transport::GenerateCurveKeys().value();
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/server.secret", server_keys.secret_z85 + "\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/agent.secret", agent_keys.secret_z85 + "\n").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/keys").ok());
  const size_t n = 12;
  Config c;
  c.drive = MakeDrive(dir_, n, 500);
  c.spool = dir_ + "/spool";
  StartServer({"--curve-key", dir_ + "/server.secret", "--keys-dir", dir_ + "/keys"});
  c.endpoint = endpoint_;
  c.gate = "gate: always, curve_server_key: \"" + server_keys.public_z85 +
           "\", curve_key_file: \"" + dir_ + "/agent.secret\"";
  int port = 0;
  auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), true, &port);
  ASSERT_TRUE(WaitFor(
      [&] { return test::ScrapeMetrics(port)["dejaview_agent_upload_auth_refused_total"] >= 3; }));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/keys/veh-1.public", agent_keys.public_z85 + "\n").ok());
  server_->Signal(SIGHUP);
  ASSERT_EQ(agent->Wait(), 0) << "not drained after the enrolment; see " << dir_ << "/agent.log";
  server_->Signal(SIGTERM);
  ASSERT_EQ(server_->Wait(), 0);
  size_t store_records = 0;
  EXPECT_EQ(ServerSequences(&store_records).size(), n);
  const std::string log = *ReadFileText(dir_ + "/agent.log");
  ExpectLoggedOncePerChange(log, "refused this agent's CURVE key");
}

// A server that refuses every batch (quota) is retried with a wait that doubles: the agent's
// NACKs stay within what backoff allows in the time it took, and it says so once.
TEST_F(System, RefusalsBackOffAndAreLoggedOncePerState) {
  Config c;
  c.drive = MakeDrive(dir_, 40, 500);
  c.spool = dir_ + "/spool";
  StartServer({"--vehicle-quota", "1"});
  c.endpoint = endpoint_;
  int port = 0;
  const auto start = std::chrono::steady_clock::now();
  auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), false, &port);
  const double want = 30;
  ASSERT_TRUE(WaitFor(
      [&] {
        return test::ScrapeMetrics(port)["dejaview_agent_upload_batches_deferred_total"] >= want;
      },
      60));
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // backoff_min_ms 50 doubling to backoff_max_ms 400: at most 4 + t / 0.4 rounds of at most a
  // window (3) of batches each, whatever the machine's speed (a slower one sends fewer).
  const double deferred = test::ScrapeMetrics(port)["dejaview_agent_upload_batches_deferred_total"];
  EXPECT_LE(deferred, 3 * (4 + t / 0.4) + 3) << "in " << t << " s";
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(), 0);
  const std::string log = *ReadFileText(dir_ + "/agent.log");
  ExpectLoggedOncePerChange(log, "the server defers uploads (quota)");
  EXPECT_EQ(PendingInSpool(c.spool).size(), 40u);  // nothing dropped
}

// The bandwidth cap holds across server restarts (resends are paid for too), and the agent
// notices a server that went away although nothing is in flight.
TEST_F(System, BandwidthCapHoldsAcrossRestartsAndALostServerIsNoticed) {
  const size_t n = 60;
  const double rate = 40'000;
  Config c;
  c.drive = MakeDrive(dir_, n, 1500);
  c.spool = dir_ + "/spool";
  StartServer();
  c.endpoint = endpoint_;
  c.gate = "gate: always, bandwidth_bytes_per_s: 40000";
  int port = 0;
  const auto start = std::chrono::steady_clock::now();
  auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), false, &port);
  auto metric = [&](const std::string& name) {
    return test::ScrapeMetrics(port)["dejaview_agent_" + name];
  };
  for (double acked = 4; acked <= 12; acked += 4) {
    ASSERT_TRUE(WaitFor([&] { return metric("upload_batches_acked_total") >= acked; }, 60));
    server_->Signal(SIGKILL);
    EXPECT_EQ(server_->Wait(), 128 + SIGKILL);
    StartServer();
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        return metric("frames_encoded_total") == double(n) && metric("spool_records_pending") == 0;
      },
      120));
  const double bytes = metric("upload_bytes_total");
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The bucket holds one second of burst and may go into debt by one message (a batch of at
  // most 4 frames, well under one second's worth here).
  EXPECT_LE(bytes, rate * (t + 2)) << bytes << " bytes in " << t << " s";
  // Idle, then the server goes away: the agent says so without anything in flight.
  ASSERT_EQ(metric("upload_connected"), 1);
  server_->Signal(SIGKILL);
  EXPECT_EQ(server_->Wait(), 128 + SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return metric("upload_connected") == 0; }));
  StartServer();
  EXPECT_TRUE(WaitFor([&] { return metric("upload_connected") == 1; }));
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(), 0);
}

// The whole exposition of a running process's /metrics, head included.
std::string Http(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, size_t(n));
  }
  ::close(fd);
  return out;
}

// promtool (Debian's prometheus package) lints an exposition: HELP and TYPE on every family,
// counter names, units. Its findings and exit status.
std::pair<int, std::string> Promtool(const std::string& exposition, const std::string& file) {
  EXPECT_TRUE(WriteFileAtomic(file, exposition).ok());
  const std::string cmd = "promtool check metrics < '" + file + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// Both endpoints, serving real traffic: promtool finds nothing, only the exact path answers,
// HEAD answers without a body, and each has the process and build-info series.
TEST_F(System, MetricsEndpointsPassPromtoolAndServeOnlyTheirPath) {
  ASSERT_EQ(std::system("command -v promtool >/dev/null"), 0)
      << "promtool is missing: apt-get install prometheus (scripts/install-deps.sh)";
  const size_t n = 12;
  Config c;
  c.drive = MakeDrive(dir_, n, 1500);
  c.spool = dir_ + "/spool";
  StartServer({"--metrics", "127.0.0.1:0", "--metrics-port-file", dir_ + "/server-metrics.port"});
  ASSERT_TRUE(WaitFor([&] { return !ReadTrimmed(dir_ + "/server-metrics.port").empty(); }));
  const int server_port = std::atoi(ReadTrimmed(dir_ + "/server-metrics.port").c_str());
  c.endpoint = endpoint_;
  int agent_port = 0;
  auto agent = StartAgent(WriteConfig(dir_ + "/agent.yaml", c), false, &agent_port);
  ASSERT_TRUE(WaitFor([&] {
    return test::ScrapeMetrics(agent_port)["dejaview_agent_upload_records_acked_total"] == n;
  }));
  for (const auto& [port, program] : {std::pair<int, std::string>{agent_port, "dejaview-agent"},
                                      {server_port, "dejaview-server"}}) {
    const std::string got = Http(port, "GET /metrics HTTP/1.0\r\n\r\n");
    ASSERT_EQ(got.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << program << ": " << got;
    const std::string body = got.substr(got.find("\r\n\r\n") + 4);
    const auto [status, findings] = Promtool(body, dir_ + "/" + program + ".prom");
    EXPECT_EQ(status, 0) << program << ":\n" << findings;
    EXPECT_EQ(findings, "") << program;
    EXPECT_NE(body.find("dejaview_build_info{program=\"" + program + "\",version=\""),
              std::string::npos)
        << program;
    EXPECT_NE(body.find("\nprocess_resident_memory_bytes "), std::string::npos) << program;
    EXPECT_EQ(Http(port, "GET /metricsXYZ HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 404 ", 0), 0u);
    const std::string head = Http(port, "HEAD /metrics HTTP/1.0\r\n\r\n");
    EXPECT_EQ(head.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << program;
    EXPECT_EQ(head.find("\r\n\r\n") + 4, head.size()) << program << ": HEAD has a body";
  }
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(), 0);
}

// Runs a binary to completion; its exit status and everything it wrote.
std::pair<int, std::string> RunToEnd(const std::vector<std::string>& argv, const std::string& log) {
  std::filesystem::remove(log);
  Process p(argv, log);
  const int status = p.Wait();
  auto text = ReadFileText(log, 1 << 20);
  return {status, text.ok() ? *text : ""};
}

// --version, and --check-config reporting every problem of a file (or of the server's options)
// and starting nothing: no spool, no store.
TEST_F(System, ServicesCheckTheirConfigAndSayTheirVersion) {
  const std::string log = dir_ + "/run.log";
  for (const char* bin : {DEJAVIEW_AGENT_BIN, DEJAVIEW_SERVER_BIN}) {
    const auto [status, out] = RunToEnd({bin, "--version"}, log);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out, fs::path(bin).filename().string() + " " + Version() + "\n");
  }
  Config c;
  c.spool = dir_ + "/spool";
  c.endpoint = "tcp://127.0.0.1:9";
  const std::string good = WriteConfig(dir_ + "/good.yaml", c);
  auto [ok_status, ok_out] =
      RunToEnd({DEJAVIEW_AGENT_BIN, "--config=" + good, "--check-config"}, log);
  EXPECT_EQ(ok_status, 0) << ok_out;
  EXPECT_EQ(ok_out, good + ": ok\n");
  const std::string bad = dir_ + "/bad.yaml";
  ASSERT_TRUE(WriteFileAtomic(
                  bad, std::string("vehicel: v\nqueue_frames: 0\nspool: {dir: " + c.spool + "}\n"))
                  .ok());
  auto [bad_status, bad_out] =
      RunToEnd({DEJAVIEW_AGENT_BIN, "--config", bad, "--check-config"}, log);
  EXPECT_EQ(bad_status, 2) << bad_out;
  EXPECT_EQ(bad_out, "dejaview agent: invalid argument: " + bad +
                         ":1:1: vehicel: unknown key (did you mean 'vehicle'?)\n" + bad +
                         ":2:15: queue_frames: 0 is out of range [1, 10000]\n" + bad +
                         ":1:1: vehicle: required key missing\n");
  EXPECT_FALSE(fs::exists(c.spool));

  const std::string tiers = dir_ + "/tiers.yaml";
  ASSERT_TRUE(WriteFileAtomic(tiers, std::string("disk: {budget_byte: 5}\n")).ok());
  auto [server_status, server_out] = RunToEnd(
      {DEJAVIEW_SERVER_BIN, "--store", store_, "--store-config", tiers, "--check-config"}, log);
  EXPECT_EQ(server_status, 2) << server_out;
  EXPECT_EQ(server_out, "dejaview server: invalid argument: " + tiers +
                            ":1:8: disk.budget_byte: unknown key (did you mean 'budget_bytes'?)\n");
  EXPECT_FALSE(fs::exists(store_));
}

}  // namespace
}  // namespace dv
