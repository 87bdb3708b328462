// Recordings replayed into the running system: an MCAP written by the reference writer
// (@mcap/core, tests/recorded/write_pointcloud2_mcap.js) and a ROS 1 bag of the same messages
// written by python3-rosbag (write_ros1_bag.py) go through `dejaview replay` into a live
// dejaview-agent, whose uploads reach a dejaview-server: the server's index holds each frame
// at its stamp with its pose, and the stored frames reconstruct within the agent's tolerance.
// Real processes on loopback sockets; waits are bounded polls on the server's index.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/testing/process_util.h"
#include "dejaview/server/storage.h"
#include "testutil.h"

namespace dv::recorded {
namespace {

using nlohmann::json;
using test::Process;
using test::ReadTrimmed;

constexpr double kToleranceM = 0.01;

bool WaitFor(const std::function<bool()>& cond, double timeout_s = 60) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

class ReplayIntoSystem : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::ScratchDir();
    std::string out;
    ASSERT_EQ(
        test::RunCommand("node " DEJAVIEW_SOURCE_DIR "/tests/recorded/write_pointcloud2_mcap.js " +
                             dir_ + "/ref.mcap " + dir_ + "/ref.json " DEJAVIEW_NODE_MODULES,
                         &out),
        0)
        << out;
    ASSERT_EQ(test::RunCommand("/usr/bin/python3 " DEJAVIEW_SOURCE_DIR
                               "/tests/recorded/write_ros1_bag.py " +
                                   dir_ + "/ref.bag lz4",
                               &out),
              0)
        << out;
    expected_ = json::parse(std::ifstream(dir_ + "/ref.json"));
  }

  // The server, the agent subscribed to replay's endpoint, then replay of the recording; once
  // the agent has had its 3 frames acknowledged, the server's index and store are checked.
  void ReplayThroughTheSystem(const std::string& recording, const std::string& name) {
    const std::string root = dir_ + "/" + name, store = root + "/store";
    ASSERT_TRUE(MakeDirs(root).ok());
    Process server({DEJAVIEW_SERVER_BIN, "--store", store, "--listen", "tcp://127.0.0.1:0",
                    "--port-file", root + "/server.port"},
                   root + "/server.log");
    ASSERT_TRUE(WaitFor([&] { return !ReadTrimmed(root + "/server.port").empty(); }));
    const std::string lidar =
        "tcp://127.0.0.1:" + std::to_string(20000 + (::getpid() * 7 + int(name.size())) % 20000);
    std::ofstream(root + "/agent.yaml")
        << "vehicle: veh-1\nsensors: [{id: 0, topic: lidar/top/points/}]\nlidar_endpoint: \""
        << lidar << "\"\ntolerance_m: " << kToleranceM << "\nspool: {dir: " << root
        << "/spool}\nupload: {endpoint: \"" << ReadTrimmed(root + "/server.port")
        << "\", gate: always}\nmetrics_listen: 127.0.0.1:0\n";
    Process agent({DEJAVIEW_AGENT_BIN, "--config", root + "/agent.yaml", "--metrics-port-file",
                   root + "/agent.port"},
                  root + "/agent.log");
    ASSERT_TRUE(WaitFor([&] { return !ReadTrimmed(root + "/agent.port").empty(); }));
    std::string out;
    ASSERT_EQ(test::RunCli("replay " + recording +
                               " --quiet --fast --wait-ms 30000 --source-topic /lidar/points "
                               "--source-pose-topic /odom --endpoint " +
                               lidar,
                           &out),
              0)
        << out;
    EXPECT_NE(out.find("published 3 frames and poses"), std::string::npos) << out;
    // Acknowledged by the server means stored and indexed (docs/upload-protocol.md).
    const int port = std::atoi(ReadTrimmed(root + "/agent.port").c_str());
    ASSERT_TRUE(WaitFor([&] {
      auto m = test::ScrapeMetrics(port);
      return m["dejaview_agent_frames_encoded_total"] == 3 &&
             m["dejaview_agent_spool_records_pending"] == 0;
    })) << "see "
        << root << "/agent.log and server.log";
    agent.Signal(SIGTERM);
    EXPECT_EQ(agent.Wait(), 0);
    server.Signal(SIGTERM);
    EXPECT_EQ(server.Wait(), 0);
    auto storage = server::OpenStorage(store, "", "");
    ASSERT_TRUE(storage.ok()) << storage.status().ToString();
    const auto rows = storage->index->Query({});
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      const store::FrameRecord& r = (*rows)[i];
      // replay's stamps pass through a double of epoch seconds (a 238 ns grid at 1.7e9 s).
      EXPECT_NEAR(double(r.timestamp_ns - 1700000000000000000) * 1e-9, 0.1 * double(i), 1e-6);
      EXPECT_EQ(r.sequence, i);
      const Eigen::Vector3d t(2.0 * double(i), 0.5 * double(i), 0.25);
      EXPECT_LT((r.T_map_sensor.translation() - t).norm(), 1e-9) << i;
    }
    ASSERT_TRUE(MakeDirs(root + "/maps").ok());
    ASSERT_EQ(
        test::RunCli(
            "export --store " + store + " --maps " + root + "/maps --out " + root + "/back", &out),
        0)
        << out;
    ExpectWithinTolerance(root + "/back");
  }

  // Each reconstructed frame and the written one: every point of either within the tolerance
  // of a point of the other.
  void ExpectWithinTolerance(const std::string& drive_dir) {
    auto drive = OpenDrive(drive_dir);
    ASSERT_TRUE(drive.ok()) << drive.status().ToString();
    ASSERT_EQ(drive->size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      auto got = ReadPointCloudFile(drive->frame_paths[i]);
      ASSERT_TRUE(got.ok());
      std::vector<Eigen::Vector3f> want;
      for (const json& p : expected_["frames"][i])
        want.emplace_back(p["x"].get<float>(), p["y"].get<float>(), p["z"].get<float>());
      const auto nearest = [](const Eigen::Vector3f& p, const std::vector<Eigen::Vector3f>& q) {
        float best = std::numeric_limits<float>::infinity();
        for (const auto& x : q) best = std::min(best, (p - x).norm());
        return best;
      };
      for (const auto& p : want) EXPECT_LE(nearest(p, got->xyz), kToleranceM) << i;
      for (const auto& p : got->xyz) EXPECT_LE(nearest(p, want), kToleranceM) << i;
    }
  }

  std::string dir_;
  json expected_;
};

TEST_F(ReplayIntoSystem, McapFromTheReferenceWriterReachesTheServer) {
  ReplayThroughTheSystem(dir_ + "/ref.mcap", "mcap");
}

TEST_F(ReplayIntoSystem, Ros1BagFromRosbagReachesTheServer) {
  ReplayThroughTheSystem(dir_ + "/ref.bag", "bag");
}

}  // namespace
}  // namespace dv::recorded
