#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "dejaview/agent/agent.h"
#include "dejaview/agent/bounded_queue.h"
#include "dejaview/agent/config.h"
#include "dejaview/agent/pose_buffer.h"
#include "dejaview/agent/uploader.h"

namespace dv::agent {
namespace {

TEST(BoundedQueue, DropsOldestAndCountsWhenFull) {
  BoundedQueue<int> q(3);
  for (int i = 0; i < 5; ++i) q.Push(i);
  EXPECT_EQ(q.dropped(), 2u);
  EXPECT_EQ(q.high_water(), 3u);
  q.Close();  // closing drains what is queued
  EXPECT_EQ(*q.Pop(), 2);
  EXPECT_EQ(*q.Pop(), 3);
  EXPECT_EQ(*q.Pop(), 4);
  EXPECT_FALSE(q.Pop().has_value());
  EXPECT_FALSE(q.PushWait(9));
}

TEST(PoseBuffer, InterpolatesAtTheFrameStamp) {
  PoseBuffer b(4, 200'000'000);
  Pose a = Pose::Identity(), c = Pose::Identity();
  c.translation() = Eigen::Vector3d(10, 0, 0);
  c.linear() = Eigen::AngleAxisd(0.5, Eigen::Vector3d::UnitZ()).toRotationMatrix();
  b.Add(100'000'000, a);
  b.Add(200'000'000, c);
  auto p = b.At(125'000'000);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->translation().x(), 2.5, 1e-12);
  EXPECT_NEAR(Eigen::AngleAxisd(p->rotation()).angle(), 0.125, 1e-12);
  EXPECT_EQ(b.At(250'000'000).status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(b.At(50'000'000).status().code(), Status::Code::kNotFound);
  b.Add(150'000'000, a);  // out of order: ignored and counted
  EXPECT_EQ(b.out_of_order(), 1u);
  b.Add(900'000'000, a);  // a 700 ms gap is not interpolated across
  EXPECT_EQ(b.At(500'000'000).status().code(), Status::Code::kNotFound);
}

// config/agent.yaml says every key but vehicle and spool.dir holds the built-in default.
TEST(AgentConfig, ShippedFileHoldsTheBuiltInDefaults) {
  auto c = LoadAgentConfig(DEJAVIEW_SOURCE_DIR "/config/agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const AgentConfig d;
  EXPECT_EQ(c->lidar_endpoint, d.lidar_endpoint);
  EXPECT_EQ(c->pose_max_gap_ms, d.pose_max_gap_ms);
  EXPECT_EQ(c->map_memory_bytes, d.map_memory_bytes);
  EXPECT_EQ(c->tolerance_m, d.tolerance_m);
  EXPECT_EQ(c->residual_precision_m, d.residual_precision_m);
  EXPECT_EQ(c->selection_radius_m, d.selection_radius_m);
  EXPECT_EQ(c->intensity, d.intensity);
  EXPECT_EQ(c->encoder_backend, d.encoder_backend);
  EXPECT_EQ(c->encoder_threads, d.encoder_threads);
  EXPECT_EQ(c->frame_threads, d.frame_threads);
  EXPECT_EQ(c->queue_frames, d.queue_frames);
  EXPECT_EQ(c->spool.budget_bytes, d.spool.budget_bytes);
  EXPECT_EQ(c->spool.sync, d.spool.sync);
  EXPECT_EQ(c->upload.endpoint, d.upload.endpoint);
  EXPECT_EQ(c->upload.window, d.upload.window);
}

TEST(AgentConfig, ParsesAndNamesBadKeys) {
  auto c = ParseAgentConfig(R"(
vehicle: veh-7
sensors: [{id: 0, topic: lidar/top}, {id: 1, topic: lidar/rear}]
spool: {dir: /tmp/x, budget_kb: 65536, segment_kb: 1024, sync: every_record}
upload: {endpoint: "tcp://h:1", window: 8, gate: window, window_start_utc: "22:00", window_end_utc: "06:30", bandwidth_bytes_per_s: 1000000}
frame_threads: 3
)",
                            "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sensors.size(), 2u);
  EXPECT_EQ(c->sensors[1].topic, "lidar/rear");
  EXPECT_EQ(c->spool.budget_bytes, uint64_t(64) << 20);
  EXPECT_EQ(c->spool.sync, transport::SpoolOptions::Sync::kEveryRecord);
  EXPECT_EQ(c->upload.gate, UploadConfig::Gate::kWindow);
  EXPECT_EQ(c->upload.window_start_min, 22 * 60);
  EXPECT_EQ(c->upload.window_end_min, 6 * 60 + 30);
  EXPECT_EQ(c->encoder_backend, codec::Backend::kCpu);
  EXPECT_EQ(c->frame_threads, 3);
  EXPECT_EQ(c->encoder_threads, 1);

  const std::pair<const char*, const char*> bad[] = {
      {"vehicle: v\nspool: {dir: /x}\nfrobnicate: 1\n", "frobnicate: unknown key"},
      {"spool: {dir: /x}\n", "vehicle: required"},
      {"vehicle: v\n", "spool.dir: required"},
      {"vehicle: v\nspool: {dir: /x, sync: sometimes}\n", "spool.sync"},
      {"vehicle: v\nspool: {dir: /x}\nupload: {window: many}\n",
       "agent.yaml:3:18: upload.window: expected an integer, got 'many'"},
      {"vehicle: v\nspool: {dir: /x}\nupload: {gate: link}\n", "upload.link_endpoint"},
      {"vehicle: v\nspool: {dir: /x}\nupload: {window_start_utc: '25:00'}\n", "window_start_utc"},
      {"vehicle: 'a/b'\nspool: {dir: /x}\n",
       "agent.yaml:1:1: vehicle: 'a/b' has a character outside [A-Za-z0-9._-]"},
      {"vehicle: [unclosed\n", "YAML syntax error"},
      {"vehicle: v\nspool: {dir: /x}\nencoder_backend: tpu\n",
       "agent.yaml:3:18: encoder_backend: 'tpu' is not one of cpu, cuda"},
      {"vehicle: v\nspool: {dir: /x}\nframe_threads: 0\n",
       "agent.yaml:3:16: frame_threads: 0 is out of range [1, 16]"},
  };
  for (const auto& [text, expect] : bad) {
    auto r = ParseAgentConfig(text, "agent.yaml");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("agent.yaml"), std::string::npos) << r.status().message();
  }
}

// The five ways an operator breaks a config file, each with two instances: every problem is
// reported at once, at its line and column, the valid parts of the file notwithstanding.
TEST(AgentConfig, EveryErrorOfABrokenFileIsReportedWithItsLine) {
  const std::pair<const char*, const char*> broken[] = {
      // A typo in a key: the nearest valid one is suggested (and a typo'd required key is
      // also missing).
      {"vehicle: veh-7\n"
       "spool:\n"
       "  dri: /var/spool\n"
       "upload:\n"
       "  windw: 8\n",
       "a.yaml:3:3: spool.dri: unknown key (did you mean 'dir'?)\n"
       "a.yaml:3:3: spool.dir: required key missing\n"
       "a.yaml:5:3: upload.windw: unknown key (did you mean 'window'?)"},
      // A value of the wrong type.
      {"vehicle: veh-7\n"
       "intensity: maybe\n"
       "spool:\n"
       "  dir: /var/spool\n"
       "  budget_kb: lots\n",
       "a.yaml:2:12: intensity: expected true or false, got 'maybe'\n"
       "a.yaml:5:14: spool.budget_kb: expected an integer, got 'lots'"},
      // Values out of range, and a rule spanning keys.
      {"vehicle: veh-7\n"
       "frame_threads: 99\n"
       "spool: {dir: /var/spool}\n"
       "upload:\n"
       "  window: 0\n"
       "  gate: link\n",
       "a.yaml:2:16: frame_threads: 99 is out of range [1, 16]\n"
       "a.yaml:5:11: upload.window: 0 is out of range [1, 1024]\n"
       "a.yaml:6:3: upload.gate: link needs upload.link_endpoint"},
      // Required keys missing: the top level's and a section's.
      {"sensors: [{id: 0, topic: lidar/}]\n"
       "spool:\n"
       "  budget_kb: 1024\n",
       "a.yaml:3:3: spool.dir: required key missing\n"
       "a.yaml:1:1: vehicle: required key missing"},
      // Duplicate keys: the second of each is refused.
      {"vehicle: veh-7\n"
       "spool: {dir: /var/spool}\n"
       "vehicle: veh-8\n"
       "upload: {window: 2, window: 3}\n",
       "a.yaml:3:1: vehicle: duplicate key\n"
       "a.yaml:4:21: upload.window: duplicate key"},
  };
  for (const auto& [text, errors] : broken) {
    auto r = ParseAgentConfig(text, "a.yaml");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(), errors) << text;
  }
}

// The annotated example operators start from loads, and says what it says.
TEST(AgentConfig, TheShippedExampleLoads) {
  auto c = LoadAgentConfig(std::string(DEJAVIEW_FIXTURE_DIR) + "/../../config/agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->vehicle, "veh-001");
  EXPECT_EQ(c->spool.dir, "/var/lib/dejaview/spool");
  EXPECT_EQ(c->spool.budget_bytes, uint64_t(1) << 30);
  EXPECT_EQ(c->map_memory_bytes, int64_t(512) << 20);
  EXPECT_EQ(c->map_sync.chunk_bytes, 256 << 10);
  EXPECT_EQ(c->log.format, "text");
}

// Asking for CUDA where it cannot run stops the agent before it opens anything, naming the key.
TEST(AgentConfig, CudaBackendWithoutADeviceRefusesToStart) {
  const Status cuda = codec::CheckBackend(codec::Backend::kCuda);
  if (cuda.ok()) GTEST_SKIP() << "a CUDA device is present";
  AgentConfig c;
  c.vehicle = "v";
  c.spool.dir = ::testing::TempDir() + "/cuda_refused_spool";
  c.encoder_backend = codec::Backend::kCuda;
  Agent agent(c);
  const std::atomic<bool> stop{true};
  const Status s = agent.Run(&stop, {});
  EXPECT_EQ(s.code(), cuda.code());
  EXPECT_EQ(s.message(), "encoder_backend: " + cuda.message());
  EXPECT_FALSE(std::filesystem::exists(c.spool.dir));
}

TEST(Uploader, TimeWindowGate) {
  EXPECT_TRUE(InUploadWindow(0, 0, 700));
  EXPECT_TRUE(InUploadWindow(60, 120, 60));
  EXPECT_FALSE(InUploadWindow(60, 120, 120));
  EXPECT_TRUE(InUploadWindow(22 * 60, 6 * 60, 23 * 60));
  EXPECT_TRUE(InUploadWindow(22 * 60, 6 * 60, 5 * 60));
  EXPECT_FALSE(InUploadWindow(22 * 60, 6 * 60, 12 * 60));
}

}  // namespace
}  // namespace dv::agent
