#include "dejaview/transport/wire.h"

#include <gtest/gtest.h>

#include <lz4.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <tuple>
#include <utility>

#include "dejaview/base/bytes.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "testutil.h"

namespace dv::transport {
namespace {

// An independent, unchecked writer of the docs/wire.md layout, so that tests can build every
// malformed message the encoder refuses to emit.
struct RawMsg {
  uint32_t magic = kFrameMagic;
  uint8_t major = 1, minor = 0;
  uint16_t flags = 0;
  std::string frame_id = "velodyne";
  std::vector<double> pose;  // 48 doubles when flags has the pose bit
  uint32_t count = 2, stride = 16;
  struct F {
    std::string name;
    uint32_t offset;
    uint8_t type;
    uint32_t count;
  };
  std::vector<F> fields = {{"x", 0, 7, 1}, {"y", 4, 7, 1}, {"z", 8, 7, 1}, {"intensity", 12, 7, 1}};
  std::vector<uint8_t> points = std::vector<uint8_t>(32, 0);
  bool lz4 = false;
  int64_t lz4_size_delta = 0;

  std::vector<uint8_t> Bytes() const {
    ByteWriter w;
    w.U32(magic);
    w.U8(major);
    w.U8(minor);
    w.U16(flags | (lz4 ? 2 : 0));
    w.U64(3);
    w.I64(100);
    w.I64(200);
    w.U8(uint8_t(frame_id.size()));
    w.Bytes(frame_id.data(), frame_id.size());
    for (double v : pose) w.F64(v);
    w.U32(count);
    w.U32(stride);
    w.U8(uint8_t(fields.size()));
    for (const F& f : fields) {
      w.U8(uint8_t(f.name.size()));
      w.Bytes(f.name.data(), f.name.size());
      w.U32(f.offset);
      w.U8(f.type);
      w.U32(f.count);
    }
    if (!lz4) {
      w.Bytes(points.data(), points.size());
    } else {
      std::vector<char> packed(size_t(LZ4_compressBound(int(points.size()))));
      const int n = LZ4_compress_default(reinterpret_cast<const char*>(points.data()),
                                         packed.data(), int(points.size()), int(packed.size()));
      w.U32(uint32_t(n + lz4_size_delta));
      w.Bytes(packed.data(), size_t(n));
    }
    return w.Take();
  }
};

PointCloud SmallCloud() {
  PointCloud c;
  c.push_back({1.5f, -2.25f, 0.125f}, 0.5f);
  c.push_back({-10.0f, 20.0f, -1.75f}, 0.0f);
  c.push_back({30.0f, 0.0f, 3.0f}, 1.0f);
  return c;
}

FrameHeader BaseHeader() {
  FrameHeader h;
  h.sequence = 42;
  h.sensor_stamp_ns = 1'000'000'000;
  h.publish_stamp_ns = 1'000'250'000;
  h.frame_id = "velodyne";
  return h;
}

// An Ouster-like driver layout: padding after xyz, float intensity, uint32 ns time,
// uint16 reflectivity, ring and ambient, trailing padding to a 32-byte stride.
std::vector<uint8_t> OusterPoints(FrameHeader* h) {
  h->fields = {{"x", 0, DataType::kFloat32, 1},    {"y", 4, DataType::kFloat32, 1},
               {"z", 8, DataType::kFloat32, 1},    {"intensity", 16, DataType::kFloat32, 1},
               {"t", 20, DataType::kUint32, 1},    {"reflectivity", 24, DataType::kUint16, 1},
               {"ring", 26, DataType::kUint16, 1}, {"ambient", 28, DataType::kUint16, 1}};
  h->point_count = 4;
  h->point_stride = 32;
  std::vector<uint8_t> pts(4 * 32, 0xee);  // padding bytes are kept verbatim
  for (uint32_t i = 0; i < 4; ++i) {
    uint8_t* p = pts.data() + i * 32;
    const float xyz[3] = {float(i) + 0.5f, -float(i), 2.0f * float(i)};
    const float intensity = 10.0f * float(i);
    const uint32_t t_ns = 25'000u * i;
    const uint16_t refl = uint16_t(100 + i), ring = uint16_t(i * 31), ambient = 7;
    std::memcpy(p, xyz, 12);
    std::memcpy(p + 16, &intensity, 4);
    std::memcpy(p + 20, &t_ns, 4);
    std::memcpy(p + 24, &refl, 2);
    std::memcpy(p + 26, &ring, 2);
    std::memcpy(p + 28, &ambient, 2);
  }
  return pts;
}

// A float64 layout with uint8 intensity and float64 seconds (as some Hesai/Livox drivers send).
std::vector<uint8_t> Float64Points(FrameHeader* h) {
  h->fields = {{"x", 0, DataType::kFloat64, 1},
               {"y", 8, DataType::kFloat64, 1},
               {"z", 16, DataType::kFloat64, 1},
               {"intensity", 24, DataType::kUint8, 1},
               {"time", 32, DataType::kFloat64, 1}};
  h->point_count = 2;
  h->point_stride = 40;
  std::vector<uint8_t> pts(2 * 40, 0);
  for (int i = 0; i < 2; ++i) {
    uint8_t* p = pts.data() + i * 40;
    const double xyz[3] = {0.1 * (i + 1), 0.2 * (i + 1), -0.3};
    const uint8_t intensity = uint8_t(200 + i);
    const double t = 0.05 * i;
    std::memcpy(p, xyz, 24);
    p[24] = intensity;
    std::memcpy(p + 32, &t, 8);
  }
  return pts;
}

PoseMessage SamplePose() {
  PoseMessage p;
  p.stamp_ns = 1'000'000'000;
  p.T_map_sensor =
      Eigen::Translation3d(12.5, -3.25, 1.73) * Eigen::AngleAxisd(0.3, Eigen::Vector3d::UnitZ());
  p.covariance = Covariance6::Identity() * 0.01;
  p.covariance(0, 1) = p.covariance(1, 0) = 0.002;
  return p;
}

struct Golden {
  const char* name;
  std::vector<uint8_t> bytes;
};

std::vector<Golden> GoldenMessages() {
  std::vector<Golden> out;
  {
    FrameHeader h = BaseHeader();
    const auto pts = PackPointCloud(SmallCloud(), &h);
    out.push_back({"frame_xyzi.bin", EncodeFrame(h, pts.data(), pts.size()).value()});
  }
  {
    FrameHeader h = BaseHeader();
    h.frame_id = "os_sensor";
    h.has_pose = true;
    h.T_map_sensor = SamplePose().T_map_sensor;
    h.covariance = SamplePose().covariance;
    h.lz4 = true;
    const auto pts = OusterPoints(&h);
    out.push_back({"frame_ouster_pose_lz4.bin", EncodeFrame(h, pts.data(), pts.size()).value()});
  }
  {
    FrameHeader h = BaseHeader();
    const auto pts = Float64Points(&h);
    out.push_back({"frame_float64.bin", EncodeFrame(h, pts.data(), pts.size()).value()});
  }
  out.push_back({"pose.bin", EncodePose(SamplePose())});
  return out;
}

TEST(WireGolden, ReencodingMatchesTheGoldenFiles) {
  const bool regenerate = std::getenv("DEJAVIEW_REGENERATE_GOLDEN") != nullptr;
  for (const Golden& g : GoldenMessages()) {
    const std::string path = test::FixturePath(std::string("wire/") + g.name);
    if (regenerate) {
      ASSERT_TRUE(WriteFileAtomic(path, g.bytes).ok());
    }
    auto bytes = ReadFileBytes(path);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(*bytes, g.bytes) << g.name << ": the wire format changed; bump the version";
  }
}

TEST(WireGolden, OusterLayoutMapsToPointCloud) {
  auto bytes = ReadFileBytes(test::FixturePath("wire/frame_ouster_pose_lz4.bin"));
  ASSERT_TRUE(bytes.ok());
  WireCounters counters;
  auto frame = DecodeFrame(bytes->data(), bytes->size(), &counters);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(counters.accepted, 1u);
  EXPECT_TRUE(frame->header.lz4);
  ASSERT_TRUE(frame->header.has_pose);
  EXPECT_EQ(frame->header.T_map_sensor.matrix(), SamplePose().T_map_sensor.matrix());
  EXPECT_EQ(frame->header.covariance, SamplePose().covariance);
  EXPECT_EQ(frame->header.frame_id, "os_sensor");
  FrameHeader h;
  EXPECT_EQ(frame->points, OusterPoints(&h));
  auto cloud = ToPointCloud(*frame, nullptr);
  ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
  ASSERT_EQ(cloud->size(), 4u);
  ASSERT_TRUE(cloud->has_ring() && cloud->has_time());
  EXPECT_EQ(cloud->xyz[3], Eigen::Vector3f(3.5f, -3.0f, 6.0f));
  EXPECT_EQ(cloud->intensity[3], 30.0f);  // "intensity" wins over "reflectivity"
  EXPECT_EQ(cloud->ring[3], 93);
  EXPECT_FLOAT_EQ(cloud->time_offset_s[3], 75e-6f);  // uint32 ns -> seconds
}

TEST(WireGolden, Float64LayoutMapsToPointCloud) {
  auto bytes = ReadFileBytes(test::FixturePath("wire/frame_float64.bin"));
  ASSERT_TRUE(bytes.ok());
  auto frame = DecodeFrame(bytes->data(), bytes->size(), nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  auto cloud = ToPointCloud(*frame, nullptr);
  ASSERT_TRUE(cloud.ok());
  ASSERT_EQ(cloud->size(), 2u);
  EXPECT_EQ(cloud->xyz[1], Eigen::Vector3f(0.2f, 0.4f, -0.3f));
  EXPECT_EQ(cloud->intensity[1], float(201.0 / 255.0));  // uint8: divided by 255
  EXPECT_FALSE(cloud->has_ring());
  EXPECT_EQ(cloud->time_offset_s[1], 0.05f);
}

// The intensities ToPointCloud makes of `values` stored as an intensity field of `type` (at
// offset 12 of the 16-byte x y z float32 layout).
std::vector<float> IntensitiesOf(uint8_t type, const std::vector<double>& values) {
  RawMsg m;
  m.count = uint32_t(values.size());
  m.fields[3].type = type;
  m.points.assign(values.size() * 16, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = m.points.data() + i * 16 + 12;
    const double v = values[i];
    const auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
    switch (DataType(type)) {
      case DataType::kInt8:
        put(int8_t(v));
        break;
      case DataType::kUint8:
        put(uint8_t(v));
        break;
      case DataType::kInt16:
        put(int16_t(v));
        break;
      case DataType::kUint16:
        put(uint16_t(v));
        break;
      case DataType::kInt32:
        put(int32_t(v));
        break;
      case DataType::kUint32:
        put(uint32_t(v));
        break;
      case DataType::kFloat32:
        put(float(v));
        break;
      case DataType::kFloat64:
        ADD_FAILURE() << "float64 does not fit 4 bytes";
        break;
    }
  }
  const auto bytes = m.Bytes();
  auto frame = DecodeFrame(bytes.data(), bytes.size(), nullptr);
  EXPECT_TRUE(frame.ok()) << frame.status().ToString();
  auto cloud = ToPointCloud(*frame, nullptr);
  EXPECT_TRUE(cloud.ok()) << cloud.status().ToString();
  return cloud->intensity;
}

TEST(WireMapping, IntegerIntensityIsDividedByTheLargestValueOfItsType) {
  std::vector<double> every_u16(65536);
  for (size_t v = 0; v < every_u16.size(); ++v) every_u16[v] = double(v);
  const std::vector<float> got = IntensitiesOf(uint8_t(DataType::kUint16), every_u16);
  ASSERT_EQ(got.size(), every_u16.size());
  for (size_t v = 0; v < got.size(); ++v) {
    ASSERT_EQ(got[v], float(double(v) / 65535.0)) << v;
    // Within half the codec's intensity step: it codes round(63 * intensity) (delta-format.md).
    ASSERT_LE(std::abs(std::round(63.0 * got[v]) / 63.0 - double(v) / 65535.0), 0.5 / 63 + 1e-7)
        << v;
  }
  EXPECT_EQ(got.front(), 0.0f);
  EXPECT_EQ(got.back(), 1.0f);
  // Every integer type: its largest value is 1, 0 is 0, a signed type's lowest is below 0.
  const struct {
    DataType type;
    double lowest, largest;
  } types[] = {{DataType::kInt8, -128, 127},
               {DataType::kUint8, 0, 255},
               {DataType::kInt16, -32768, 32767},
               {DataType::kInt32, -2147483648.0, 2147483647.0},
               {DataType::kUint32, 0, 4294967295.0}};
  for (const auto& t : types) {
    const auto v = IntensitiesOf(uint8_t(t.type), {t.lowest, 0, t.largest, 100});
    EXPECT_EQ(v,
              (std::vector<float>{float(t.lowest / t.largest), 0.0f, 1.0f, float(100 / t.largest)}))
        << int(t.type);
  }
  // Floats are taken as they are (the codec clamps to [0, 1]).
  EXPECT_EQ(IntensitiesOf(uint8_t(DataType::kFloat32), {0.25, 30.0, -1.0, 0.1}),
            (std::vector<float>{0.25f, 30.0f, -1.0f, 0.1f}));
}

TEST(WireRoundTrip, RealKittiFrameIsBitExactWithAndWithoutLz4) {
  auto cloud = ReadKittiBin(test::KittiSeq("00") + "/velodyne/000000.bin");
  ASSERT_TRUE(cloud.ok());
  const std::vector<uint8_t> kitti = EncodeKittiBin(*cloud);
  size_t sizes[2] = {0, 0};
  for (bool lz4 : {false, true}) {
    FrameHeader h = BaseHeader();
    h.lz4 = lz4;
    const auto pts = PackPointCloud(*cloud, &h);
    EXPECT_EQ(pts, kitti);  // the dejaview layout is the KITTI record
    auto msg = EncodeFrame(h, pts.data(), pts.size());
    ASSERT_TRUE(msg.ok());
    sizes[lz4] = msg->size();
    auto frame = DecodeFrame(msg->data(), msg->size(), nullptr);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ(frame->points, kitti);
    EXPECT_EQ(frame->header.sequence, 42u);
    EXPECT_EQ(frame->header.sensor_stamp_ns, 1'000'000'000);
    EXPECT_EQ(frame->header.publish_stamp_ns, 1'000'250'000);
    auto back = ToPointCloud(*frame, nullptr);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(EncodeKittiBin(*back), kitti);
  }
  EXPECT_LT(sizes[1], sizes[0]);
}

TEST(WireRoundTrip, RingAndTimeSurvive) {
  PointCloud c = SmallCloud();
  c.ring = {0, 63, 7};
  c.time_offset_s = {0.0f, 0.05f, 0.099f};
  FrameHeader h = BaseHeader();
  const auto pts = PackPointCloud(c, &h);
  EXPECT_EQ(h.point_stride, 24u);
  auto msg = EncodeFrame(h, pts.data(), pts.size());
  ASSERT_TRUE(msg.ok());
  auto frame = DecodeFrame(msg->data(), msg->size(), nullptr);
  ASSERT_TRUE(frame.ok());
  auto back = ToPointCloud(*frame, nullptr);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ring, c.ring);
  EXPECT_EQ(back->time_offset_s, c.time_offset_s);
  EXPECT_EQ(back->xyz, c.xyz);
}

TEST(WireRoundTrip, EncoderRefusesWhatTheDecoderWouldReject) {
  FrameHeader h = BaseHeader();
  auto pts = PackPointCloud(SmallCloud(), &h);
  EXPECT_FALSE(EncodeFrame(h, pts.data(), pts.size() - 1).ok());
  h.fields[3].offset = 14;
  EXPECT_FALSE(EncodeFrame(h, pts.data(), pts.size()).ok());
}

struct BadCase {
  const char* what;
  RawMsg msg;
  Reject reason;
  const char* message;  // substring the Status must contain
};

std::vector<BadCase> BadFrames() {
  std::vector<BadCase> cases;
  const auto add = [&](const char* what, Reject reason, const char* message, auto&& mutate) {
    RawMsg m;
    mutate(m);
    cases.push_back({what, m, reason, message});
  };
  add("wrong magic", Reject::kBadMagic, "bad magic", [](RawMsg& m) { m.magic = 0x12345678; });
  add("pose message on the frame topic", Reject::kBadMagic, "pose message",
      [](RawMsg& m) { m.magic = kPoseMagic; });
  add("major version 2", Reject::kBadVersion, "major version 2", [](RawMsg& m) { m.major = 2; });
  add("unknown flag bit", Reject::kBadFlags, "unknown flag bits 8", [](RawMsg& m) { m.flags = 8; });
  add("points cut short", Reject::kTruncated, "truncated at points",
      [](RawMsg& m) { m.points.resize(31); });
  add("bytes after the points", Reject::kTrailingBytes, "1 bytes after the points",
      [](RawMsg& m) { m.points.resize(33); });
  add("newer minor may append", Reject::kCount, "",
      [](RawMsg& m) { m.minor = 1, m.points.resize(40); });
  add("field past the stride", Reject::kBadFieldTable, "'intensity' (offset 14, 4 bytes) ends past",
      [](RawMsg& m) { m.fields[3].offset = 14; });
  add("overlapping fields", Reject::kBadFieldTable, "fields overlap at offset 8",
      [](RawMsg& m) { m.fields[1].offset = 6; });
  add("datatype 9", Reject::kBadFieldTable, "'z' datatype 9 is not 1..8",
      [](RawMsg& m) { m.fields[2].type = 9; });
  add("element count 0", Reject::kBadFieldTable, "'y' count 0",
      [](RawMsg& m) { m.fields[1].count = 0; });
  add("element count overflow", Reject::kBadFieldTable, "'y' (offset 4, 17179869180 bytes)",
      [](RawMsg& m) { m.fields[1].count = 0xffffffffu; });
  add("duplicate field", Reject::kBadFieldTable, "'x' appears twice",
      [](RawMsg& m) { m.fields[1].name = "x"; });
  add("empty field name", Reject::kBadName, "field name of 0 bytes",
      [](RawMsg& m) { m.fields[0].name = ""; });
  add("stride 0 with points", Reject::kBadFieldTable, "point_stride is 0",
      [](RawMsg& m) { m.stride = 0, m.fields.clear(); });
  add("absurd point count", Reject::kTooLarge, "point_count 4294967295 exceeds",
      [](RawMsg& m) { m.count = 0xffffffffu; });
  add("absurd stride", Reject::kTooLarge, "point_stride 65536 exceeds",
      [](RawMsg& m) { m.stride = 65536; });
  add("count*stride too big", Reject::kTooLarge, "point_count * point_stride exceeds",
      [](RawMsg& m) { m.count = 1u << 24, m.stride = 1000; });
  add("too many fields", Reject::kTooLarge, "field_count 40 exceeds", [](RawMsg& m) {
    m.stride = 1000;
    m.fields.clear();
    for (uint32_t i = 0; i < 40; ++i) m.fields.push_back({"f" + std::to_string(i), i * 4, 7, 1});
  });
  add("lz4 size beyond the bound", Reject::kBadLz4, "exceeds the bound",
      [](RawMsg& m) { m.lz4 = true, m.lz4_size_delta = 1000; });
  add("lz4 size cut short", Reject::kBadLz4, "lz4 points decode to",
      [](RawMsg& m) { m.lz4 = true, m.lz4_size_delta = -1; });
  add("lz4 raw size lie", Reject::kBadLz4, "header says point_count * point_stride = 48",
      [](RawMsg& m) { m.lz4 = true, m.count = 3; });
  add("pose not a rotation", Reject::kBadPose, "rotation is not orthonormal", [](RawMsg& m) {
    m.flags = 1;
    m.pose.assign(48, 0.0);
    m.pose[0] = 2.0;
  });
  add("pose NaN", Reject::kBadPose, "non-finite", [](RawMsg& m) {
    m.flags = 1;
    m.pose.assign(48, 0.0);
    m.pose[0] = m.pose[5] = m.pose[10] = 1.0;
    m.pose[3] = std::nan("");
  });
  return cases;
}

TEST(WireMalformed, EveryCaseIsRejectedWithItsReasonAndCounted) {
  WireCounters counters;
  std::array<uint64_t, size_t(Reject::kCount)> expected{};
  uint64_t accepted = 0;
  for (const BadCase& c : BadFrames()) {
    const auto bytes = c.msg.Bytes();
    auto frame = DecodeFrame(bytes.data(), bytes.size(), &counters);
    if (c.reason == Reject::kCount) {
      EXPECT_TRUE(frame.ok()) << c.what << ": " << frame.status().ToString();
      ++accepted;
      continue;
    }
    ++expected[size_t(c.reason)];
    ASSERT_FALSE(frame.ok()) << c.what;
    EXPECT_NE(frame.status().message().find(c.message), std::string::npos)
        << c.what << ": " << frame.status().message();
    std::printf("| %-32s | %-15s | %s |\n", c.what, RejectName(c.reason),
                frame.status().ToString().c_str());
  }
  EXPECT_EQ(counters.rejected, expected);
  EXPECT_EQ(counters.accepted, accepted);
}

TEST(WireMalformed, EveryPrefixOfEveryGoldenIsTruncated) {
  for (const Golden& g : GoldenMessages()) {
    WireCounters counters;
    const bool pose = std::string(g.name) == "pose.bin";
    for (size_t n = 0; n < g.bytes.size(); ++n) {
      if (pose) {
        EXPECT_FALSE(DecodePose(g.bytes.data(), n, &counters).ok());
      } else {
        EXPECT_FALSE(DecodeFrame(g.bytes.data(), n, &counters).ok());
      }
    }
    EXPECT_EQ(
        counters.rejected[size_t(Reject::kTruncated)] + counters.rejected[size_t(Reject::kBadLz4)],
        g.bytes.size())
        << g.name;
  }
}

TEST(WireMalformed, UnmappableLayoutsNameTheField) {
  RawMsg m;
  m.fields[0].name = "a";
  auto bytes = m.Bytes();
  auto frame = DecodeFrame(bytes.data(), bytes.size(), nullptr);
  ASSERT_TRUE(frame.ok());
  WireCounters counters;
  EXPECT_EQ(ToPointCloud(*frame, &counters).status().message(), "wire frame: no field 'x'");
  EXPECT_EQ(counters.rejected[size_t(Reject::kNotMappable)], 1u);
  RawMsg n;
  n.fields[1].type = 5;
  bytes = n.Bytes();
  frame = DecodeFrame(bytes.data(), bytes.size(), nullptr);
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(ToPointCloud(*frame, nullptr).status().message(),
            "wire frame: field 'y' must be float32 or float64");
}

// Found by fuzz_wire_frame: a signed ring field holding -98 (converting it was undefined).
TEST(WireMalformed, RingOutsideUint16IsRejectedWithThePoint) {
  for (const auto& [type, byte, text] :
       {std::tuple<uint8_t, uint8_t, const char*>{1, 0x9e, "ring -98"},  // int8 -98
        std::tuple<uint8_t, uint8_t, const char*>{2, 0x9e, nullptr}}) {  // uint8 158: fine
    RawMsg m;
    m.fields.push_back({"ring", 13, type, 1});
    m.fields[3].type = 2;      // intensity: uint8 at 12, so the ring fits before the stride ends
    m.points[16 + 13] = byte;  // the second point's ring
    const auto bytes = m.Bytes();
    auto frame = DecodeFrame(bytes.data(), bytes.size(), nullptr);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    WireCounters counters;
    auto cloud = ToPointCloud(*frame, &counters);
    if (text) {
      EXPECT_EQ(cloud.status().message(),
                std::string("wire frame: point 1: ") + text + " outside [0, 65535]");
      EXPECT_EQ(counters.rejected[size_t(Reject::kNotMappable)], 1u);
    } else {
      ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
      EXPECT_EQ(cloud->ring[1], 158);
    }
  }
}

TEST(WirePose, RoundTripAndRejections) {
  const auto bytes = EncodePose(SamplePose());
  EXPECT_EQ(bytes.size(), 400u);
  WireCounters counters;
  auto p = DecodePose(bytes.data(), bytes.size(), &counters);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stamp_ns, SamplePose().stamp_ns);
  EXPECT_EQ(p->T_map_sensor.matrix(), SamplePose().T_map_sensor.matrix());
  EXPECT_EQ(p->covariance, SamplePose().covariance);

  auto bad = bytes;
  bad[0] ^= 1;
  EXPECT_NE(DecodePose(bad.data(), bad.size(), &counters).status().message().find("bad magic"),
            std::string::npos);
  bad = bytes;
  bad[4] = 9;
  EXPECT_NE(
      DecodePose(bad.data(), bad.size(), &counters).status().message().find("major version 9"),
      std::string::npos);
  bad = bytes;
  bad.push_back(0);
  EXPECT_NE(DecodePose(bad.data(), bad.size(), &counters).status().message().find("1 bytes after"),
            std::string::npos);
  EXPECT_NE(DecodePose(bytes.data(), 399, &counters).status().message().find("399 of 400 bytes"),
            std::string::npos);
  EXPECT_EQ(counters.rejected[size_t(Reject::kBadMagic)], 1u);
  EXPECT_EQ(counters.rejected[size_t(Reject::kBadVersion)], 1u);
  EXPECT_EQ(counters.rejected[size_t(Reject::kTrailingBytes)], 1u);
  EXPECT_EQ(counters.rejected[size_t(Reject::kTruncated)], 1u);
  EXPECT_EQ(counters.Total(), 4u);
}

// A pose body carrying the rotation R (translation 1 2 3, covariance 0), and whether the wire
// takes it: accepted poses must come back bit-exactly.
bool PoseAccepted(const Eigen::Matrix3d& R) {
  PoseMessage p;
  p.T_map_sensor.linear() = R;
  p.T_map_sensor.translation() = Eigen::Vector3d(1, 2, 3);
  const auto bytes = EncodePose(p);
  auto back = DecodePose(bytes.data(), bytes.size(), nullptr);
  if (!back.ok()) {
    EXPECT_NE(back.status().message().find("rotation is not orthonormal"), std::string::npos)
        << back.status().message();
    return false;
  }
  EXPECT_EQ(back->T_map_sensor.matrix(), p.T_map_sensor.matrix());
  return true;
}

TEST(WirePose, OrthonormalMeansEveryElementOfRtRMinusIWithin1e5) {
  // R = I but R(0, 1) = e: R^T R - I has e at (0, 1) and (1, 0), e^2 at (1, 1), so its max-abs
  // norm is e (its Frobenius norm is 1.41 e).
  for (const auto& [e, ok] : {std::pair{0.99e-5, true}, std::pair{1.01e-5, false}}) {
    Eigen::Matrix3d R = Eigen::Matrix3d::Identity();
    R(0, 1) = e;
    EXPECT_EQ(PoseAccepted(R), ok) << e;
  }
  EXPECT_FALSE(PoseAccepted(Eigen::Vector3d(1, 1, -1).asDiagonal()));  // a reflection
  EXPECT_FALSE(PoseAccepted(1.00001 * Eigen::Matrix3d::Identity()));   // a 1e-5 scale
}

TEST(WirePose, RotationsStoredAsFloatOrWith6To9DigitsCrossVerbatim) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> angle(-EIGEN_PI, EIGEN_PI);
  const auto printed = [](const char* format) {
    return [format](double v) {
      char buf[40];
      std::snprintf(buf, sizeof(buf), format, v);
      return std::strtod(buf, nullptr);
    };
  };
  const std::vector<std::pair<const char*, std::function<double(double)>>> storages = {
      {"float32", [](double v) { return double(float(v)); }},
      {"6 digits", printed("%.5e")},
      {"7 digits", printed("%.6e")},
      {"9 digits", printed("%.8e")},
      {"6 decimals", printed("%.6f")}};
  for (int i = 0; i < 2000; ++i) {
    const Eigen::Matrix3d R = (Eigen::AngleAxisd(angle(rng), Eigen::Vector3d::UnitZ()) *
                               Eigen::AngleAxisd(angle(rng) / 2, Eigen::Vector3d::UnitY()) *
                               Eigen::AngleAxisd(angle(rng), Eigen::Vector3d::UnitX()))
                                  .toRotationMatrix();
    for (const auto& [name, store] : storages) {
      ASSERT_TRUE(PoseAccepted(R.unaryExpr(store))) << name << ", rotation " << i;
    }
  }
}

TEST(WirePose, KittiPosesTxtRowsCrossVerbatim) {
  auto text = ReadFileText(test::KittiSeq("00") + "/poses.txt");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  std::istringstream in(*text);
  std::array<double, 12> v{};
  size_t rows = 0;
  while (in >> v[0]) {
    for (int k = 1; k < 12; ++k) ASSERT_TRUE(in >> v[k]);
    Eigen::Matrix3d R;
    R << v[0], v[1], v[2], v[4], v[5], v[6], v[8], v[9], v[10];
    EXPECT_TRUE(PoseAccepted(R)) << "row " << rows;
    ++rows;
  }
  EXPECT_GT(rows, 0u);
}

}  // namespace
}  // namespace dv::transport
