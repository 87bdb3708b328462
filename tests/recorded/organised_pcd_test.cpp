// Organised PCDs with a driver's fields (an Ouster-like 8 x 4 scan: x y z intensity t reflectivity
// ring ambient range, NaN where there was no return), written by hand in ASCII and saved by PCL
// 1.13 as binary and binary_compressed (tests/data/pcd/ouster_organised_*.pcd): every DATA kind
// reads to the same records; convert keeps WIDTH x HEIGHT, every field and the NaN points; replay
// publishes every field and point with the PCD's own field table.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>
#include <zmq.hpp>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/pcd.h"
#include "dejaview/transport/wire.h"
#include "testutil.h"

namespace dv {
namespace {

std::string Golden(const std::string& kind) {
  return test::FixturePath("pcd/ouster_organised_" + kind + ".pcd");
}

// Equal tables: the same fields and organisation, and records equal value for value (a NaN
// equal to a NaN: the ASCII "nan" and PCL's NaN need not share their bits).
void ExpectSameTable(const PcdTable& a, const PcdTable& b) {
  ASSERT_EQ(a.width, b.width);
  ASSERT_EQ(a.height, b.height);
  ASSERT_EQ(a.record_bytes, b.record_bytes);
  ASSERT_EQ(a.fields.size(), b.fields.size());
  for (size_t f = 0; f < a.fields.size(); ++f) {
    EXPECT_EQ(a.fields[f].name, b.fields[f].name);
    EXPECT_EQ(a.fields[f].type, b.fields[f].type);
    EXPECT_EQ(a.fields[f].size, b.fields[f].size);
    EXPECT_EQ(a.fields[f].count, b.fields[f].count);
    EXPECT_EQ(a.fields[f].offset, b.fields[f].offset);
  }
  ASSERT_EQ(a.records.size(), b.records.size());
  for (size_t i = 0; i < a.points(); ++i) {
    for (const PcdField& f : a.fields) {
      const uint8_t* pa = a.records.data() + i * a.record_bytes + f.offset;
      const uint8_t* pb = b.records.data() + i * b.record_bytes + f.offset;
      if (f.type == 'F' && f.size == 4) {
        float va, vb;
        std::memcpy(&va, pa, 4);
        std::memcpy(&vb, pb, 4);
        EXPECT_TRUE(va == vb || (std::isnan(va) && std::isnan(vb))) << i << " " << f.name;
      } else {
        EXPECT_EQ(std::memcmp(pa, pb, size_t(f.size) * f.count), 0) << i << " " << f.name;
      }
    }
  }
}

TEST(OrganisedPcd, EveryDataKindReadsToTheSameRecords) {
  auto binary = ReadPcdTable(Golden("binary"));
  ASSERT_TRUE(binary.ok()) << binary.status().ToString();
  EXPECT_EQ(binary->width, 8u);
  EXPECT_EQ(binary->height, 4u);
  EXPECT_EQ(binary->record_bytes, 30u);
  ASSERT_EQ(binary->fields.size(), 9u);
  EXPECT_EQ(binary->fields[5].name, "reflectivity");
  EXPECT_EQ(binary->fields[8].name, "range");
  for (const char* kind : {"ascii", "binary_compressed"}) {
    auto other = ReadPcdTable(Golden(kind));
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    ExpectSameTable(*binary, *other);
  }
  // The points dejaview's PointCloud reader sees: all 32, the NaN ones kept.
  auto cloud = ReadPointCloudFile(Golden("binary_compressed"));
  ASSERT_TRUE(cloud.ok());
  EXPECT_EQ(cloud->size(), 32u);
  EXPECT_EQ(RemoveNonFinite(&*cloud), 6u);
}

TEST(OrganisedPcd, ConvertKeepsOrganisationFieldsAndNaNPoints) {
  const std::string dir = test::ScratchDir();
  auto want = ReadPcdTable(Golden("binary"));
  ASSERT_TRUE(want.ok());
  for (const char* kind : {"ascii", "binary", "binary_compressed"}) {
    for (const char* encoding : {"--binary", "--ascii"}) {
      const std::string out = dir + "/" + kind + encoding + ".pcd";
      std::string log;
      ASSERT_EQ(
          test::RunCli(std::string("convert ") + Golden(kind) + " " + out + " " + encoding, &log),
          0)
          << log;
      EXPECT_NE(log.find("8 x 4 points, 9 fields kept"), std::string::npos) << log;
      auto got = ReadPcdTable(out);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectSameTable(*want, *got);
    }
  }
}

TEST(OrganisedPcd, ReplayPublishesEveryFieldAndPoint) {
  const std::string dir = test::ScratchDir();
  ASSERT_TRUE(MakeDirs(dir + "/drive/velodyne").ok());
  std::filesystem::copy_file(Golden("binary_compressed"), dir + "/drive/velodyne/000000.pcd");
  std::filesystem::copy_file(Golden("ascii"), dir + "/drive/velodyne/000001.pcd");
  auto want = ReadPcdTable(Golden("binary"));
  ASSERT_TRUE(want.ok());
  const std::string endpoint =
      "tcp://127.0.0.1:" + std::to_string(20000 + (::getpid() * 13 + 5) % 20000);
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "lidar/");
  sub.set(zmq::sockopt::rcvtimeo, 30000);
  sub.connect(endpoint);
  std::string log;
  int rc = -1;
  std::thread replay([&] {
    rc = test::RunCli(
        "replay " + dir + "/drive --fast --quiet --wait-ms 30000 --endpoint " + endpoint, &log);
  });
  for (int i = 0; i < 2; ++i) {
    zmq::message_t topic, body;
    ASSERT_TRUE(sub.recv(topic));
    ASSERT_TRUE(sub.recv(body));
    auto frame =
        transport::DecodeFrame(static_cast<const uint8_t*>(body.data()), body.size(), nullptr);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    const transport::FrameHeader& h = frame->header;
    EXPECT_EQ(h.point_count, 32u);
    EXPECT_EQ(h.point_stride, 30u);
    const std::vector<std::pair<std::string, transport::DataType>> fields = {
        {"x", transport::DataType::kFloat32},   {"y", transport::DataType::kFloat32},
        {"z", transport::DataType::kFloat32},   {"intensity", transport::DataType::kFloat32},
        {"t", transport::DataType::kUint32},    {"reflectivity", transport::DataType::kUint16},
        {"ring", transport::DataType::kUint16}, {"ambient", transport::DataType::kUint16},
        {"range", transport::DataType::kUint32}};
    ASSERT_EQ(h.fields.size(), fields.size());
    for (size_t f = 0; f < fields.size(); ++f) {
      EXPECT_EQ(h.fields[f].name, fields[f].first);
      EXPECT_EQ(h.fields[f].type, fields[f].second);
      EXPECT_EQ(h.fields[f].offset, want->fields[f].offset);
    }
    PcdTable got = *want;
    got.records = frame->points;
    ExpectSameTable(*want, got);
  }
  replay.join();
  EXPECT_EQ(rc, 0) << log;
}

}  // namespace
}  // namespace dv
