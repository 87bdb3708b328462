// dejaview import and replay on an MCAP written by the reference implementations (@mcap/core,
// @foxglove/cdr), and on ROS 1 bags of the same messages written by python3-rosbag, as real
// processes: the frames come out exactly as written, with the poses of whichever pose topic is
// chosen.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/recorded/mcap.h"
#include "dejaview/recorded/recording.h"
#include "dejaview/recorded/ros_messages.h"
#include "testutil.h"

namespace dv::recorded {
namespace {

using nlohmann::json;

class ReferenceMcap : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::ScratchDir();
    WriteReference(Mcap(), "");
    std::ifstream in(dir_ + "/ref.json");
    expected_ = json::parse(in);
  }
  // compression: "" (none), "zstd" or "lz4" (chunks compressed by Debian's tools).
  void WriteReference(const std::string& path, const std::string& compression) {
    std::string out;
    ASSERT_EQ(test::RunCommand(
                  "node " DEJAVIEW_SOURCE_DIR "/tests/recorded/write_pointcloud2_mcap.js " + path +
                      " " + dir_ + "/ref.json " DEJAVIEW_NODE_MODULES " " + compression,
                  &out),
              0)
        << out << "(are @mcap/core and @foxglove/cdr installed? bash scripts/install-deps.sh)";
  }
  std::string Mcap() const { return dir_ + "/ref.mcap"; }

  // The drive's frames are the written ones, point for point, at the written stamps.
  void ExpectFrames(const std::string& drive_dir) {
    auto drive = OpenDrive(drive_dir);
    ASSERT_TRUE(drive.ok()) << drive.status().ToString();
    const auto& frames = expected_["frames"];
    ASSERT_EQ(drive->size(), frames.size());
    for (size_t i = 0; i < drive->size(); ++i) {
      auto cloud = ReadPointCloudFile(drive->frame_paths[i]);
      ASSERT_TRUE(cloud.ok());
      ASSERT_EQ(cloud->size(), frames[i].size());
      for (size_t k = 0; k < cloud->size(); ++k) {
        const json& p = frames[i][k];
        EXPECT_EQ(cloud->xyz[k],
                  Eigen::Vector3f(p["x"].get<float>(), p["y"].get<float>(), p["z"].get<float>()))
            << i << "/" << k;
        EXPECT_EQ(cloud->intensity[k], p["intensity"].get<float>());
      }
    }
    EXPECT_EQ(ReadFileBytes(drive_dir + "/timestamps.txt").value(),
              ToBytes("1700000000.000000000\n1700000000.100000000\n1700000000.200000000\n"));
  }

  // The drive's poses: yaw about z and a translation per frame, within poses.txt's precision
  // (%.9e: 10 significant digits, so a coordinate v comes back within 5e-10 * |v|): absolute
  // 1e-9, or with scaled, 1e-9 * max(1, |v|) for translations of tens of metres.
  void ExpectPoses(const std::string& drive_dir, const std::vector<double>& yaw,
                   const std::vector<Eigen::Vector3d>& t, bool scaled = false) {
    auto drive = OpenDrive(drive_dir);
    ASSERT_TRUE(drive.ok());
    ASSERT_EQ(drive->poses.size(), yaw.size());
    for (size_t i = 0; i < yaw.size(); ++i) {
      Pose want = Pose::Identity();
      want.linear() = Eigen::AngleAxisd(yaw[i], Eigen::Vector3d::UnitZ()).toRotationMatrix();
      want.translation() = t[i];
      const Eigen::Matrix4d bound =
          scaled ? Eigen::Matrix4d(want.matrix().cwiseAbs().cwiseMax(1.0) * 1e-9)
                 : Eigen::Matrix4d::Constant(1e-9);
      EXPECT_TRUE(
          ((drive->poses[i].matrix() - want.matrix()).cwiseAbs().array() < bound.array()).all())
          << i << "\n"
          << drive->poses[i].matrix() << "\n"
          << want.matrix();
    }
  }

  static std::vector<uint8_t> ToBytes(const std::string& s) { return {s.begin(), s.end()}; }

  std::string dir_;
  json expected_;
};

const std::vector<double> kFrameYaw = {0.0, 0.1, 0.2};
const std::vector<Eigen::Vector3d> kFrameT = {{0, 0, 0.25}, {2, 0.5, 0.25}, {4, 1, 0.25}};
// The frames' poses from the /pose topic's two PoseStamped samples, at -50 ms (x = -1) and
// +250 ms (x = 3), both at yaw 0.3: the frames at 0, 100 and 200 ms lie 1/6, 1/2 and 5/6 between.
const std::vector<double> kStampedYaw = {0.3, 0.3, 0.3};
const std::vector<Eigen::Vector3d> kStampedT = {
    {-1 + 4.0 / 6, 0, 0}, {-1 + 4.0 / 2, 0, 0}, {-1 + 4.0 * 5 / 6, 0, 0}};

TEST_F(ReferenceMcap, ImportsPointCloud2WithOdometryPoses) {
  std::string out;
  ASSERT_EQ(test::RunCli("import " + Mcap() + " --out " + dir_ + "/d --topic /lidar/points " +
                             "--pose-topic /odom",
                         &out),
            0)
      << out;
  EXPECT_NE(out.find("imported 3 frames from /lidar/points, poses from /odom (3 samples, 3 "
                     "frames posed) to "),
            std::string::npos)
      << out;
  ExpectFrames(dir_ + "/d");
  ExpectPoses(dir_ + "/d", kFrameYaw, kFrameT);
}

TEST_F(ReferenceMcap, ChunksCompressedByTheZstdAndLz4ToolsImportTheSame) {
  for (const std::string compression : {"zstd", "lz4"}) {
    const std::string mcap = dir_ + "/" + compression + ".mcap";
    WriteReference(mcap, compression);
    size_t compressed_chunks = 0;
    ASSERT_TRUE(ReadMcapFile(mcap, [&](const McapRecord& r) {
                  const auto* index = std::get_if<McapChunkIndex>(&r);
                  compressed_chunks += index && index->compression == compression;
                  return Status::Ok();
                }).ok());
    EXPECT_GT(compressed_chunks, 1u) << compression;
    std::string out;
    ASSERT_EQ(test::RunCli("import " + mcap + " --out " + dir_ + "/" + compression +
                               " --topic /lidar/points --pose-topic /odom",
                           &out),
              0)
        << out;
    ExpectFrames(dir_ + "/" + compression);
    ExpectPoses(dir_ + "/" + compression, kFrameYaw, kFrameT);
  }
}

TEST_F(ReferenceMcap, ImportsTfPosesOfTheCloudsFrame) {
  std::string out;
  ASSERT_EQ(test::RunCli("import " + Mcap() + " --out " + dir_ + "/d --topic /lidar/points " +
                             "--pose-topic /tf",
                         &out),
            0)
      << out;
  ExpectFrames(dir_ + "/d");
  ExpectPoses(dir_ + "/d", kFrameYaw, kFrameT);  // map -> lidar, not map -> base_link
}

// A tf tree as robots record it (tests/recorded/write_tf_chain_mcap.js): map -> odom and
// odom -> base_link on /tf at different stamps, base_link -> lidar once on /tf_static, stamped
// before every frame. The clouds' pose is the chain composed, each dynamic hop interpolated on
// its own samples; --tf-parent cuts the chain short.
TEST_F(ReferenceMcap, ComposesATfChainWithStaticHops) {
  const std::string mcap = dir_ + "/chain.mcap";
  std::string out;
  ASSERT_EQ(test::RunCommand("node " DEJAVIEW_SOURCE_DIR "/tests/recorded/write_tf_chain_mcap.js " +
                                 mcap + " " DEJAVIEW_NODE_MODULES,
                             &out),
            0)
      << out;
  const auto yaw = [](double a) { return Eigen::AngleAxisd(a, Eigen::Vector3d::UnitZ()); };
  const Eigen::Vector3d lidar_in_base(1.5, 0, 2);  // /tf_static, yaw 0.25
  std::vector<double> map_yaw, odom_yaw;
  std::vector<Eigen::Vector3d> map_t, odom_t;
  for (int i = 0; i < 3; ++i) {
    // odom -> base_link halfway between its samples i and i + 1: t (i + 0.5, -(i + 0.5), 0).
    const Eigen::Vector3d base_in_odom(i + 0.5, -(i + 0.5), 0);
    odom_yaw.push_back(0.3 + 0.25);
    odom_t.push_back(base_in_odom + yaw(0.3) * lidar_in_base);
    map_yaw.push_back(0.2 * i + 0.3 + 0.25);
    map_t.push_back(Eigen::Vector3d(10 * i, 1, 0) + yaw(0.2 * i) * odom_t.back());
  }
  ASSERT_EQ(test::RunCli("import " + mcap + " --out " + dir_ + "/map --pose-topic /tf", &out), 0)
      << out;
  // 3 map -> odom, 4 odom -> base_link, 1 static base_link -> lidar.
  EXPECT_NE(out.find("poses from /tf (8 samples, 3 frames posed)"), std::string::npos) << out;
  ExpectPoses(dir_ + "/map", map_yaw, map_t, true);
  ASSERT_EQ(test::RunCli("import " + mcap + " --out " + dir_ + "/odom --pose-topic /tf " +
                             "--tf-parent odom --tf-child lidar",
                         &out),
            0)
      << out;
  ExpectPoses(dir_ + "/odom", odom_yaw, odom_t, true);
  // A parent the chain does not reach: no poses (as a one-hop transform that is not recorded).
  ASSERT_EQ(
      test::RunCli("import " + mcap + " --out " + dir_ + "/none --pose-topic /tf --tf-parent imu",
                   &out),
      0)
      << out;
  EXPECT_NE(out.find("(0 samples, 0 frames posed: no poses.txt written)"), std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/none/poses.txt"));
}

TEST_F(ReferenceMcap, InterpolatesPoseStampedBetweenSamples) {
  std::string out;
  ASSERT_EQ(test::RunCli("import " + Mcap() + " --out " + dir_ + "/d --topic /lidar/points " +
                             "--pose-topic /pose",
                         &out),
            0)
      << out;
  ExpectPoses(dir_ + "/d", kStampedYaw, kStampedT);
}

TEST_F(ReferenceMcap, RingAndTimeMapAsTheWireMapsThem) {
  size_t frames = 0;
  ASSERT_TRUE(ReadMcapMessages(Mcap(), [&](const McapMessageView& v) {
                if (v.channel->topic != "/lidar/points") return Status::Ok();
                auto frame = DecodePointCloud2(v.message->data.data, v.message->data.size, "m");
                EXPECT_TRUE(frame.ok()) << frame.status().ToString();
                auto cloud = transport::ToPointCloud(*frame, nullptr);
                EXPECT_TRUE(cloud.ok());
                const json& want = expected_["frames"][frames++];
                EXPECT_EQ(frame->header.frame_id, "lidar");
                EXPECT_EQ(frame->header.point_stride, 32u);
                EXPECT_EQ(frame->header.fields.size(), 6u);
                for (size_t k = 0; k < cloud->size(); ++k) {
                  EXPECT_EQ(cloud->ring[k], want[k]["ring"].get<uint16_t>());
                  EXPECT_EQ(cloud->time_offset_s[k], want[k]["time"].get<float>());
                }
                return Status::Ok();
              }).ok());
  EXPECT_EQ(frames, 3u);
}

TEST_F(ReferenceMcap, AmbiguousOrMissingTopicsAndCorruptFilesAreClearErrors) {
  std::string out;
  EXPECT_EQ(test::RunCli("import " + Mcap() + " --out " + dir_ + "/d", &out), 2);
  EXPECT_NE(out.find("2 candidate channels, choose one with --topic; channels: /lidar/points "
                     "(sensor_msgs/msg/PointCloud2) /lidar/points_raw"),
            std::string::npos)
      << out;
  EXPECT_EQ(test::RunCli("import " + Mcap() + " --out " + dir_ + "/d --topic /nope", &out), 1);
  EXPECT_NE(out.find("--topic /nope: no such channel"), std::string::npos) << out;
  auto bytes = ReadFileBytes(Mcap()).value();
  bytes.resize(bytes.size() / 2);
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/cut.mcap", bytes).ok());
  EXPECT_EQ(test::RunCli("import " + dir_ + "/cut.mcap --out " + dir_ + "/d2 --topic /x", &out), 3);
  EXPECT_NE(out.find(dir_ + "/cut.mcap: offset "), std::string::npos) << out;
}

// rosbag2's sqlite3 storage (its schema as rosbag2 creates it), holding every message of the
// reference MCAP byte for byte.
void WriteDb3(const std::string& mcap, const std::string& db3) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db3.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db,
                   "CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT "
                   "NOT NULL, serialization_format TEXT NOT NULL, offered_qos_profiles TEXT "
                   "NOT NULL);"
                   "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, "
                   "timestamp INTEGER NOT NULL, data BLOB NOT NULL);",
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  std::map<std::string, int64_t> ids;
  sqlite3_stmt *topic = nullptr, *message = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO topics VALUES(?, ?, ?, ?, '')", -1, &topic, nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO messages(topic_id, timestamp, data) VALUES(?, ?, ?)", -1,
                     &message, nullptr);
  ASSERT_TRUE(ReadRecordedMessages(mcap, [&](const RecordedMessage& m) {
                if (!ids.count(*m.topic)) {
                  const int64_t id = int64_t(ids.size()) + 1;
                  ids[*m.topic] = id;
                  sqlite3_bind_int64(topic, 1, id);
                  sqlite3_bind_text(topic, 2, m.topic->c_str(), -1, SQLITE_TRANSIENT);
                  sqlite3_bind_text(topic, 3, m.type->c_str(), -1, SQLITE_TRANSIENT);
                  sqlite3_bind_text(topic, 4, m.encoding->c_str(), -1, SQLITE_TRANSIENT);
                  EXPECT_EQ(sqlite3_step(topic), SQLITE_DONE);
                  sqlite3_reset(topic);
                }
                sqlite3_bind_int64(message, 1, ids[*m.topic]);
                sqlite3_bind_int64(message, 2, int64_t(m.log_time_ns));
                sqlite3_bind_blob(message, 3, m.data.data, int(m.data.size), SQLITE_TRANSIENT);
                EXPECT_EQ(sqlite3_step(message), SQLITE_DONE);
                sqlite3_reset(message);
                return Status::Ok();
              }).ok());
  sqlite3_finalize(topic);
  sqlite3_finalize(message);
  sqlite3_close(db);
}

TEST_F(ReferenceMcap, ImportsTheSameFromARos2BagOfTheSameMessages) {
  WriteDb3(Mcap(), dir_ + "/bag.db3");
  std::string out;
  ASSERT_EQ(test::RunCli("import " + dir_ + "/bag.db3 --out " + dir_ +
                             "/d --topic /lidar/points --pose-topic /tf",
                         &out),
            0)
      << out;
  ExpectFrames(dir_ + "/d");
  ExpectPoses(dir_ + "/d", kFrameYaw, kFrameT);
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/junk.db3", std::string(4096, 'x')).ok());
  EXPECT_EQ(test::RunCli("import " + dir_ + "/junk.db3 --out " + dir_ + "/j", &out), 3);
  EXPECT_NE(out.find(dir_ + "/junk.db3: "), std::string::npos) << out;
}

// The same scene written as a ROS 1 bag by the reference writer (Debian's python3-rosbag): the
// same frames and poses from each pose topic, with chunks uncompressed, bz2 and lz4.
TEST_F(ReferenceMcap, Ros1BagsOfTheSameMessagesImportTheSame) {
  for (const std::string compression : {"none", "bz2", "lz4"}) {
    const std::string bag = dir_ + "/" + compression + ".bag";
    std::string out;
    ASSERT_EQ(test::RunCommand("/usr/bin/python3 " DEJAVIEW_SOURCE_DIR
                               "/tests/recorded/write_ros1_bag.py " +
                                   bag + " " + compression,
                               &out),
              0)
        << out << "(is python3-rosbag installed? bash scripts/install-deps.sh)";
    const auto bytes = ReadFileBytes(bag).value();
    const std::string marker = "compression=" + compression;
    EXPECT_NE(std::search(bytes.begin(), bytes.end(), marker.begin(), marker.end()), bytes.end());
    const std::string d = dir_ + "/" + compression;
    ASSERT_EQ(test::RunCli("import " + bag + " --out " + d +
                               " --topic /lidar/points --pose-topic "
                               "/odom",
                           &out),
              0)
        << out;
    ExpectFrames(d);
    ExpectPoses(d, kFrameYaw, kFrameT);
    ASSERT_EQ(test::RunCli("import " + bag + " --out " + d + "-tf --topic /lidar/points " +
                               "--pose-topic /tf",
                           &out),
              0)
        << out;
    ExpectPoses(d + "-tf", kFrameYaw, kFrameT);
    ASSERT_EQ(test::RunCli("import " + bag + " --out " + d + "-pose --topic /lidar/points " +
                               "--pose-topic /pose",
                           &out),
              0)
        << out;
    ExpectPoses(d + "-pose", kStampedYaw, kStampedT);
  }
}

// Ring and time come through a bag's field table as through the MCAP's.
TEST_F(ReferenceMcap, Ros1BagRingAndTimeAndMessageEncoding) {
  const std::string bag = dir_ + "/b.bag";
  std::string out;
  ASSERT_EQ(test::RunCommand("/usr/bin/python3 " DEJAVIEW_SOURCE_DIR
                             "/tests/recorded/write_ros1_bag.py " +
                                 bag + " none",
                             &out),
            0)
      << out;
  size_t frames = 0;
  ASSERT_TRUE(ReadRecordedMessages(bag, [&](const RecordedMessage& m) {
                EXPECT_EQ(*m.encoding, "ros1");
                if (*m.topic != "/lidar/points") return Status::Ok();
                EXPECT_EQ(*m.type, "sensor_msgs/PointCloud2");
                EXPECT_EQ(m.log_time_ns, 1700000000000000000ull + frames * 100000000ull);
                auto frame = DecodePointCloud2(m.data.data, m.data.size, "m", RosEncoding::kRos1);
                EXPECT_TRUE(frame.ok()) << frame.status().ToString();
                auto cloud = transport::ToPointCloud(*frame, nullptr);
                EXPECT_TRUE(cloud.ok());
                const json& want = expected_["frames"][frames++];
                EXPECT_EQ(frame->header.frame_id, "lidar");
                for (size_t k = 0; k < cloud->size(); ++k) {
                  EXPECT_EQ(cloud->ring[k], want[k]["ring"].get<uint16_t>());
                  EXPECT_EQ(cloud->time_offset_s[k], want[k]["time"].get<float>());
                }
                return Status::Ok();
              }).ok());
  EXPECT_EQ(frames, 3u);
}

// A bag cut anywhere inside a record, or with a flipped length, is an error naming the file and
// the record's offset; never a crash.
TEST_F(ReferenceMcap, CutOrCorruptRos1BagsAreClearErrors) {
  const std::string bag = dir_ + "/b.bag";
  std::string out;
  ASSERT_EQ(test::RunCommand("/usr/bin/python3 " DEJAVIEW_SOURCE_DIR
                             "/tests/recorded/write_ros1_bag.py " +
                                 bag + " bz2",
                             &out),
            0)
      << out;
  const auto bytes = ReadFileBytes(bag).value();
  // Where the top-level records end (header_len u32, header, data_len u32, data): a bag cut
  // there is whole up to the cut, and reads.
  std::set<size_t> ends;
  for (size_t at = 13; at + 4 <= bytes.size();) {
    uint32_t header_len = 0, data_len = 0;
    std::memcpy(&header_len, bytes.data() + at, 4);
    std::memcpy(&data_len, bytes.data() + at + 4 + header_len, 4);
    at += 8 + header_len + data_len;
    ends.insert(at);
  }
  size_t expected = 0, cuts = 0;
  for (size_t cut = 20; cut < bytes.size(); cut += 7) {
    ++cuts;
    const Status s = ReadRos1Bag(bytes.data(), cut, "b.bag",
                                 [](const RecordedMessage&) { return Status::Ok(); });
    expected += ends.count(cut)
                    ? s.ok()
                    : s.ToString().find("b.bag: record at byte offset ") != std::string::npos;
  }
  EXPECT_EQ(expected, cuts);
  ASSERT_TRUE(
      WriteFileAtomic(dir_ + "/cut.bag", std::vector<uint8_t>(bytes.begin(), bytes.begin() + 5000))
          .ok());
  EXPECT_EQ(test::RunCli("import " + dir_ + "/cut.bag --out " + dir_ + "/d --topic /x", &out), 3);
  EXPECT_NE(out.find(dir_ + "/cut.bag: record at byte offset "), std::string::npos) << out;
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/junk.bag", std::string(100, 'x')).ok());
  EXPECT_EQ(test::RunCli("import " + dir_ + "/junk.bag --out " + dir_ + "/d --topic /x", &out), 3);
  EXPECT_NE(out.find("not a ROS 1 bag of format 2.0"), std::string::npos) << out;
}

TEST_F(ReferenceMcap, ReplaysAnMcapIntoARecorder) {
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(40000 + ::getpid() % 20000);
  std::string rec_out, rep_out;
  int rec_rc = -1;
  std::thread recorder([&] {
    rec_rc = test::RunCli("record --quiet --endpoint " + endpoint + " --out " + dir_ +
                              "/rec --frames 3 --timeout-ms 20000",
                          &rec_out);
  });
  const int rep_rc = test::RunCli("replay " + Mcap() +
                                      " --quiet --fast --wait-ms 20000 --source-topic /lidar/points"
                                      " --source-pose-topic /odom --endpoint " +
                                      endpoint,
                                  &rep_out);
  recorder.join();
  ASSERT_EQ(rep_rc, 0) << rep_out;
  ASSERT_EQ(rec_rc, 0) << rec_out;
  EXPECT_NE(rep_out.find("published 3 frames and poses"), std::string::npos) << rep_out;
  ExpectPoses(dir_ + "/rec", kFrameYaw, kFrameT);
  auto drive = OpenDrive(dir_ + "/rec");
  ASSERT_TRUE(drive.ok());
  ASSERT_EQ(drive->size(), 3u);
  auto first = ReadPointCloudFile(drive->frame_paths[0]);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->xyz[1], Eigen::Vector3f(0.5f, -0.25f, 0.225f));
}

}  // namespace
}  // namespace dv::recorded
