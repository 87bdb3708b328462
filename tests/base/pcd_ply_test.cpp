// PCD and PLY: exact round trips on the real KITTI frame, and the variants other tools write
// (padding, extra fields, other types, organised clouds, mesh elements, CRLF, trailing bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "dejaview/base/bytes.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/base/pcd.h"
#include "dejaview/base/ply.h"
#include "testutil.h"

namespace dv {
namespace {

void ExpectSameBits(const PointCloud& a, const PointCloud& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_TRUE(b.consistent());
  EXPECT_EQ(std::memcmp(a.xyz.data(), b.xyz.data(), a.size() * sizeof(a.xyz[0])), 0);
  EXPECT_EQ(std::memcmp(a.intensity.data(), b.intensity.data(), a.size() * 4), 0);
  EXPECT_EQ(a.ring, b.ring);
  ASSERT_EQ(a.time_offset_s.size(), b.time_offset_s.size());
  // memcmp on an empty vector's null data() is undefined, so only compare what exists.
  if (!a.time_offset_s.empty()) {
    EXPECT_EQ(
        std::memcmp(a.time_offset_s.data(), b.time_offset_s.data(), a.time_offset_s.size() * 4), 0);
  }
}

// .bin -> .pcd -> .ply -> .bin through the files, comparing the final file's bytes.
void RoundTripThroughFiles(const std::string& source, CloudEncoding encoding) {
  const std::string dir = test::ScratchDir();
  auto cloud = ReadPointCloudFile(source);
  ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
  ASSERT_TRUE(WritePointCloudFile(dir + "/a.pcd", *cloud, encoding).ok());
  auto pcd = ReadPointCloudFile(dir + "/a.pcd");
  ASSERT_TRUE(pcd.ok()) << pcd.status().ToString();
  ASSERT_TRUE(WritePointCloudFile(dir + "/b.ply", *pcd, encoding).ok());
  auto ply = ReadPointCloudFile(dir + "/b.ply");
  ASSERT_TRUE(ply.ok()) << ply.status().ToString();
  ASSERT_TRUE(WritePointCloudFile(dir + "/c.bin", *ply).ok());
  auto original = ReadFileBytes(source);
  auto copy = ReadFileBytes(dir + "/c.bin");
  ASSERT_TRUE(original.ok() && copy.ok());
  EXPECT_EQ(*original, *copy);
  ExpectSameBits(*cloud, *ply);
}

TEST(PcdPly, RealFrameRoundTripsBitExactBinary) {
  RoundTripThroughFiles(test::KittiSeq("00") + "/velodyne/000000.bin", CloudEncoding::kBinary);
}

TEST(PcdPly, RealFrameRoundTripsBitExactAscii) {
  RoundTripThroughFiles(test::KittiSeq("00") + "/velodyne/000000.bin", CloudEncoding::kAscii);
}

TEST(PcdPly, TinyFixtureRoundTripsBitExact) {
  RoundTripThroughFiles(test::FixturePath("kitti_tiny.bin"), CloudEncoding::kBinary);
  RoundTripThroughFiles(test::FixturePath("kitti_tiny.bin"), CloudEncoding::kAscii);
}

// Values that stress %.9g: denormals, extremes, negative zero, non-finite (kept, not dropped).
PointCloud AwkwardCloud() {
  PointCloud c;
  const float vals[] = {0.1f,        -0.0f,        1e-45f, 3.4028235e38f, -1.17549435e-38f,
                        16777216.0f, 0.333333343f, NAN,    INFINITY,      -INFINITY};
  for (float v : vals) c.push_back({v, -v, v * 0.5f}, v);
  c.ring.resize(c.size());
  c.time_offset_s.resize(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    c.ring[i] = uint16_t(i * 7000);
    c.time_offset_s[i] = float(i) * 1e-5f;
  }
  return c;
}

TEST(PcdPly, RingTimeAndAwkwardFloatsRoundTripInEveryEncoding) {
  const PointCloud c = AwkwardCloud();
  for (CloudEncoding e : {CloudEncoding::kBinary, CloudEncoding::kAscii}) {
    auto pcd = EncodePcd(c, e);
    auto a = ParsePcd(pcd.data(), pcd.size(), "a.pcd");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto ply = EncodePly(c, e);
    auto b = ParsePly(ply.data(), ply.size(), "b.ply");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    for (const PointCloud* got : {&*a, &*b}) {
      ASSERT_EQ(got->size(), c.size());
      EXPECT_EQ(got->ring, c.ring);
      for (size_t i = 0; i < c.size(); ++i) {
        for (int k = 0; k < 3; ++k) {
          const float want = c.xyz[i][k], have = got->xyz[i][k];
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(have));
          } else {
            EXPECT_EQ(std::memcmp(&want, &have, 4), 0) << i << " " << k << " " << want;
          }
        }
        EXPECT_EQ(got->time_offset_s[i], c.time_offset_s[i]);
      }
    }
  }
  const auto text = EncodePcd(c, CloudEncoding::kAscii);
  PointCloud finite = *ParsePcd(text.data(), text.size(), "a.pcd");
  EXPECT_EQ(RemoveNonFinite(&finite), 3u);  // NaN, +inf, -inf rows
  EXPECT_EQ(finite.size(), c.size() - 3);
}

// PCL's own files (tests/data/README.md): the compressed one reads to the same bits as the binary
// and ASCII ones, with ring and time.
TEST(PcdPly, PclBinaryCompressedReadsAsItsBinaryAndAscii) {
  auto ascii = ReadPcd(test::FixturePath("pcd/pcl_ascii.pcd"));
  auto binary = ReadPcd(test::FixturePath("pcd/pcl_binary.pcd"));
  auto compressed = ReadPcd(test::FixturePath("pcd/pcl_binary_compressed.pcd"));
  ASSERT_TRUE(ascii.ok() && binary.ok()) << ascii.status().ToString() << binary.status().ToString();
  ASSERT_TRUE(compressed.ok()) << compressed.status().ToString();
  ASSERT_EQ(compressed->size(), 100u);
  ExpectSameBits(*ascii, *compressed);
  ExpectSameBits(*binary, *compressed);
  EXPECT_EQ(compressed->ring[33], 1u);
  EXPECT_EQ(compressed->xyz[0], Eigen::Vector3f(10.0f, 0.0f, -1.5f));
}

TEST(PcdPly, CorruptBinaryCompressedNamesTheOffset) {
  auto bytes = ReadFileBytes(test::FixturePath("pcd/pcl_binary_compressed.pcd")).value();
  const std::string text(bytes.begin(), bytes.end());
  const size_t body = text.find("DATA binary_compressed\n") + 23;
  auto cut = bytes;
  cut.resize(body + 40);
  auto s = ParsePcd(cut.data(), cut.size(), "c.pcd").status();
  EXPECT_EQ(s.message(), "c.pcd: offset " + std::to_string(body) + ": compressed size " +
                             std::to_string(bytes[body] | bytes[body + 1] << 8) +
                             " runs past the end of the file");
  auto flipped = bytes;
  flipped[body + 8] = 0xff;  // an LZF back reference before any output
  s = ParsePcd(flipped.data(), flipped.size(), "f.pcd").status();
  EXPECT_EQ(s.message(), "f.pcd: offset " + std::to_string(body + 8) +
                             ": LZF data does not decompress to 2200 bytes");
  auto huge = bytes;
  huge[body + 4] = 0xff;  // a decompressed size the header does not make
  s = ParsePcd(huge.data(), huge.size(), "h.pcd").status();
  EXPECT_NE(s.message().find("h.pcd: offset " + std::to_string(body + 4) + ": decompressed size"),
            std::string::npos)
      << s.message();
}

TEST(PcdPly, EmptyCloudRoundTrips) {
  const PointCloud empty;
  for (CloudEncoding e : {CloudEncoding::kBinary, CloudEncoding::kAscii}) {
    auto pcd = EncodePcd(empty, e);
    auto ply = EncodePly(empty, e);
    auto a = ParsePcd(pcd.data(), pcd.size(), "e.pcd");
    auto b = ParsePly(ply.data(), ply.size(), "e.ply");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->size(), 0u);
    EXPECT_EQ(b->size(), 0u);
  }
}

// PCL's Velodyne layout with padding, an extra rgb field and a 3-count field, a double x,
// uint8 intensity, and trailing garbage after POINTS records.
TEST(Pcd, ReadsFieldsByNameSkippingPaddingAndUnknownFields) {
  ByteWriter w;
  const std::string header =
      "# PCL writes this comment\n"
      "VERSION .7\n"
      "FIELDS _ y normal z x rgb intensity ring time\n"
      "SIZE 1 4 4 4 8 4 1 2 4\n"
      "TYPE U F F F F F U U F\n"
      "COUNT 3 1 3 1 1 1 1 1 1\n"
      "WIDTH 2\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 2\nDATA binary\n";
  w.Bytes(header.data(), header.size());
  for (int i = 0; i < 2; ++i) {
    w.Bytes("\xAA\xBB\xCC", 3);
    w.F32(2.5f + float(i));
    for (int k = 0; k < 3; ++k) w.F32(-9.0f);
    w.F32(-1.25f);
    w.F64(0.1 * (i + 1));
    w.F32(123.0f);
    w.U8(uint8_t(200 + i));
    w.U16(uint16_t(63 - i));
    w.F32(0.05f * float(i));
  }
  w.Bytes("TRAILING JUNK", 13);
  auto c = ParsePcd(w.buffer().data(), w.size(), "v.pcd");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ(c->xyz[1], Eigen::Vector3f(0.2f, 3.5f, -1.25f));
  EXPECT_EQ(c->intensity[1], 201.0f);
  EXPECT_EQ(c->ring, (std::vector<uint16_t>{63, 62}));
  EXPECT_EQ(c->time_offset_s[1], 0.05f);
}

// Ouster's layout: t is uint32 nanoseconds, ring uint16, and the ASCII body has CRLF endings,
// blank lines and extra lines after the declared points; WIDTH x HEIGHT organised.
TEST(Pcd, ReadsAnOrganisedAsciiCloudWithIntegerTime) {
  const std::string text =
      "VERSION 0.7\r\nFIELDS x y z intensity t reflectivity ring\r\n"
      "SIZE 4 4 4 4 4 2 2\r\nTYPE F F F F U U U\r\nCOUNT 1 1 1 1 1 1 1\r\n"
      "WIDTH 2\r\nHEIGHT 2\r\nPOINTS 4\r\nDATA ascii\r\n"
      "1 2 3 4 1000 9 0\r\n\r\n5 6 7 8 2000 9 1\r\n-1 -2 -3 0 3000 9 2\r\n"
      "nan nan nan 0 4000 9 3\r\n99 99 99 99 99 99 99\r\n";
  auto c = ParsePcd(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "o.pcd");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->size(), 4u);
  EXPECT_EQ(c->xyz[2], Eigen::Vector3f(-1, -2, -3));
  EXPECT_EQ(c->time_offset_s[1], float(2000 * 1e-9));
  EXPECT_EQ(c->ring[3], 3);
  EXPECT_TRUE(std::isnan(c->xyz[3].x()));
}

// A double beyond float's range becomes infinity (a non-finite point, kept), not undefined
// behaviour; integer coordinates convert exactly.
TEST(Pcd, OutOfRangeDoublesSaturateToInfinity) {
  const std::string text =
      "FIELDS x y z\nSIZE 8 8 2\nTYPE F F I\nWIDTH 1\nDATA ascii\n1e300 -1e300 -32768\n";
  auto c = ParsePcd(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "d.pcd");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->xyz[0], Eigen::Vector3f(INFINITY, -INFINITY, -32768.0f));
}

// A mesh: an element with a list before the vertices (skipped row by row), extra vertex
// properties of several types, double coordinates, and faces after the vertices.
std::string MeshHeader(const char* format, const std::string& counts) {
  return std::string("ply\nformat ") + format +
         " 1.0\ncomment made by hand\nobj_info test\n"
         "element material " +
         counts +
         "\nproperty uchar id\nproperty list uint8 int32 refs\n"
         "element vertex 2\nproperty double x\nproperty double y\nproperty double z\n"
         "property uchar red\nproperty float intensity\nproperty int16 nx\n"
         "element face 1\nproperty list uchar int vertex_indices\nend_header\n";
}

TEST(Ply, SkipsOtherElementsAndPropertiesBinary) {
  ByteWriter w;
  const std::string header = MeshHeader("binary_little_endian", "2");
  w.Bytes(header.data(), header.size());
  w.U8(1);
  w.U8(2);
  w.U32(7);
  w.U32(8);  // material 0: id 1, refs [7, 8]
  w.U8(2);
  w.U8(0);  // material 1: id 2, refs []
  for (int i = 0; i < 2; ++i) {
    w.F64(1.5 + i);
    w.F64(-2.0);
    w.F64(1e-3);
    w.U8(255);
    w.F32(0.25f * float(i));
    w.U16(uint16_t(-3));
  }
  w.U8(3);  // face: 3 indices
  w.U32(0);
  w.U32(1);
  w.U32(0);
  auto c = ParsePly(w.buffer().data(), w.size(), "m.ply");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ(c->xyz[1], Eigen::Vector3f(2.5f, -2.0f, float(1e-3)));
  EXPECT_EQ(c->intensity[1], 0.25f);
  EXPECT_FALSE(c->has_ring());
}

TEST(Ply, SkipsOtherElementsAndPropertiesAscii) {
  const std::string text = MeshHeader("ascii", "2") +
                           "1 2 7 8\n\n2 0\n1.5 -2 0.001 255 0 -3\n2.5 -2 0.001 255 0.25 -3\n"
                           "3 0 1 0\n";
  auto c = ParsePly(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "m.ply");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ(c->xyz[1], Eigen::Vector3f(2.5f, -2.0f, float(1e-3)));
  EXPECT_EQ(c->intensity[1], 0.25f);
}

TEST(Ply, MissingIntensityReadsAsZero) {
  const std::string text =
      "ply\nformat ascii 1.0\nelement vertex 1\nproperty float32 x\nproperty float32 y\n"
      "property float32 z\nend_header\n1 2 3\n";
  auto c = ParsePly(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "n.ply");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->intensity, std::vector<float>{0.0f});
}

}  // namespace
}  // namespace dv
