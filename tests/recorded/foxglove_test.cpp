// foxglove.PointCloud in MCAP, protobuf and JSON, as written by the reference implementations
// (tests/recorded/write_foxglove_mcap.js: @mcap/core, @foxglove/schemas, protobufjs): imported
// to the exact points (moved by the cloud's pose where it has one), stamps and field table;
// cut and corrupt messages are errors naming the field and offset.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/recorded/foxglove.h"
#include "dejaview/recorded/mcap.h"
#include "testutil.h"

namespace dv::recorded {
namespace {

using nlohmann::json;

class FoxgloveMcap : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = test::ScratchDir();
    std::string out;
    ASSERT_EQ(test::RunCommand(
                  "node " DEJAVIEW_SOURCE_DIR "/tests/recorded/write_foxglove_mcap.js " + Mcap() +
                      " " + dir_ + "/ref.json " DEJAVIEW_NODE_MODULES " " + GetParam(),
                  &out),
              0)
        << out << "(are @foxglove/schemas and protobufjs installed? bash scripts/install-deps.sh)";
    expected_ = json::parse(std::ifstream(dir_ + "/ref.json"));
  }
  std::string Mcap() const { return dir_ + "/fg.mcap"; }

  // The messages of the file, each with its schema's encoding.
  std::vector<std::vector<uint8_t>> Messages() {
    std::vector<std::vector<uint8_t>> all;
    EXPECT_TRUE(ReadMcapMessages(Mcap(), [&](const McapMessageView& v) {
                  EXPECT_EQ(*v.schema_name, kFoxglovePointCloudType);
                  EXPECT_EQ(*v.schema_encoding, GetParam() == "json" ? "jsonschema" : "protobuf");
                  all.emplace_back(v.message->data.data,
                                   v.message->data.data + v.message->data.size);
                  return Status::Ok();
                }).ok());
    return all;
  }

  std::string dir_;
  json expected_;
};

TEST_P(FoxgloveMcap, ImportsThePointsMovedByTheirPose) {
  std::string out;
  ASSERT_EQ(test::RunCli("import " + Mcap() + " --out " + dir_ + "/d", &out), 0) << out;
  EXPECT_NE(out.find("imported 3 frames from /points"), std::string::npos) << out;
  auto drive = OpenDrive(dir_ + "/d");
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  ASSERT_EQ(drive->size(), 3u);
  EXPECT_EQ(ReadFileText(dir_ + "/d/timestamps.txt").value(),
            "1700000000.000000000\n1700000000.100000000\n1700000000.200000000\n");
  for (size_t i = 0; i < 3; ++i) {
    const json& frame = expected_["frames"][i];
    Pose T = Pose::Identity();
    if (!frame["pose"].is_null()) {
      const json& p = frame["pose"]["position"];
      const json& q = frame["pose"]["orientation"];
      T.linear() = Eigen::Quaterniond(q["w"].get<double>(), q["x"].get<double>(),
                                      q["y"].get<double>(), q["z"].get<double>())
                       .normalized()
                       .toRotationMatrix();
      T.translation() =
          Eigen::Vector3d(p["x"].get<double>(), p["y"].get<double>(), p["z"].get<double>());
    }
    auto cloud = ReadPointCloudFile(drive->frame_paths[i]);
    ASSERT_TRUE(cloud.ok());
    ASSERT_EQ(cloud->size(), frame["points"].size());
    for (size_t k = 0; k < cloud->size(); ++k) {
      const json& p = frame["points"][k];
      const Eigen::Vector3d want =
          T * Eigen::Vector3d(p["x"].get<float>(), p["y"].get<float>(), p["z"].get<float>());
      if (frame["pose"].is_null()) {
        EXPECT_EQ(cloud->xyz[k], want.cast<float>()) << i << "/" << k;
      } else {
        // The moved point rounded once to float32.
        EXPECT_LE((cloud->xyz[k].cast<double>() - want).cwiseAbs().maxCoeff(), 1e-6)
            << i << "/" << k;
      }
      EXPECT_EQ(cloud->intensity[k], p["intensity"].get<float>());
    }
  }
}

// The field table as sent: NumericType mapped to the wire's codes, ring through the wire's
// mapping, a float64 field and padding kept in place.
TEST_P(FoxgloveMcap, FieldTableMapsOntoTheWires) {
  const auto messages = Messages();
  ASSERT_EQ(messages.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto cloud = DecodeFoxglovePointCloud(messages[i].data(), messages[i].size(), GetParam(), "m");
    ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
    const transport::FrameHeader& h = cloud->frame.header;
    EXPECT_EQ(h.frame_id, "lidar");
    EXPECT_EQ(h.sensor_stamp_ns, 1700000000000000000 + int64_t(i) * 100000000);
    EXPECT_EQ(h.point_stride, 28u);
    EXPECT_EQ(h.point_count, 4u);
    ASSERT_EQ(h.fields.size(), 6u);
    EXPECT_EQ(h.fields[4].name, "ring");
    EXPECT_EQ(h.fields[4].type, transport::DataType::kUint16);
    EXPECT_EQ(h.fields[5].name, "range");
    EXPECT_EQ(h.fields[5].offset, 20u);
    EXPECT_EQ(h.fields[5].type, transport::DataType::kFloat64);
    auto points = transport::ToPointCloud(cloud->frame, nullptr);
    ASSERT_TRUE(points.ok());
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(points->ring[k], expected_["frames"][i]["points"][k]["ring"].get<uint16_t>());
      double range;
      std::memcpy(&range, cloud->frame.points.data() + k * 28 + 20, 8);
      EXPECT_EQ(range, expected_["frames"][i]["points"][k]["range"].get<double>());
    }
  }
}

// Every cut of a message is an error naming the message, or (protobuf, cut between two fields)
// a smaller message the wire accepts; a cut inside the points names the data field's offset.
TEST_P(FoxgloveMcap, CutMessagesAreErrorsNamingTheField) {
  const auto messages = Messages();
  const std::vector<uint8_t>& m = messages[1];
  // protobufjs writes data (4 points of 28 bytes, a 1-byte key and 1-byte length) last.
  const size_t data_key = m.size() - 4 * 28 - 2;
  for (size_t cut = 0; cut < m.size(); ++cut) {
    auto cloud = DecodeFoxglovePointCloud(m.data(), cut, GetParam(), "m");
    if (GetParam() == "json") {
      EXPECT_NE(cloud.status().ToString().find("m: not a JSON object"), std::string::npos) << cut;
    } else if (cut > data_key + 2) {
      EXPECT_NE(cloud.status().ToString().find("m: field 'PointCloud' at offset " +
                                               std::to_string(data_key)),
                std::string::npos)
          << cut;
    } else if (!cloud.ok()) {
      EXPECT_EQ(cloud.status().message().rfind("m: ", 0), 0u) << cut;
    }
  }
  auto wrong = DecodeFoxglovePointCloud(m.data(), m.size(), "cdr", "m");
  EXPECT_NE(wrong.status().ToString().find("encoding 'cdr' of foxglove.PointCloud"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Encodings, FoxgloveMcap, ::testing::Values("protobuf", "json"),
                         [](const auto& p) { return std::string(p.param); });

TEST(Foxglove, CorruptFieldsAreClearErrors) {
  // point_stride (field 4, fixed32) given as a varint: the wire type is named.
  const uint8_t varint_stride[] = {0x20, 0x10};
  EXPECT_NE(DecodeFoxglovePointCloud(varint_stride, sizeof(varint_stride), "protobuf", "m")
                .status()
                .ToString()
                .find("m: field 'point_stride' at offset 0: unexpected wire type"),
            std::string::npos);
  // data (field 6) claiming more bytes than follow.
  const uint8_t long_data[] = {0x32, 0x7f, 0x00};
  EXPECT_NE(DecodeFoxglovePointCloud(long_data, sizeof(long_data), "protobuf", "m")
                .status()
                .ToString()
                .find("m: field 'PointCloud' at offset 0"),
            std::string::npos);
  const std::string bad_base64 =
      R"({"timestamp":{"sec":1,"nsec":0},"frame_id":"a","point_stride":4,)"
      R"("fields":[{"name":"x","offset":0,"type":7}],"data":"AAA*"})";
  EXPECT_NE(DecodeFoxglovePointCloud(reinterpret_cast<const uint8_t*>(bad_base64.data()),
                                     bad_base64.size(), "json", "m")
                .status()
                .ToString()
                .find("JSON key 'data'"),
            std::string::npos);
}

}  // namespace
}  // namespace dv::recorded
