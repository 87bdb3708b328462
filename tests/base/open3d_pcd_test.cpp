// PCDs written by Open3D 0.16 (issue 54: every DATA kind written by PCL or Open3D reads
// identically). tests/data/pcd/write_open3d_fixtures.py wrote a 40-point cloud with Open3D's
// tensor API (x y z intensity) and legacy API (x y z, normals, packed rgb) in DATA ascii, binary
// and binary_compressed; the PCL counterparts are pinned in pcd_ply_test.cpp and
// organised_pcd_test.cpp. Open3D prints ASCII floats as %.10g, enough digits to come back as the
// same float32, so every file must read to the very bits the script started from, which this test
// recomputes without Open3D.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dejaview/base/pcd.h"
#include "testutil.h"

namespace dv {
namespace {

constexpr size_t kRegular = 32;
// Keep in step with SPECIAL_BITS in write_open3d_fixtures.py: bit patterns a text round trip
// can get wrong (denormals, whose strtof sets ERANGE; -0; the largest float; 2^24 + 2; 1 + ulp).
constexpr uint32_t kSpecialBits[] = {0x00000001, 0x007FFFFF, 0x00800000, 0x80000000,
                                     0x7F7FFFFF, 0xFF7FFFFF, 0x4B800001, 0x3F800001};
constexpr size_t kSpecial = sizeof(kSpecialBits) / sizeof(kSpecialBits[0]);
constexpr const char* kKinds[] = {"ascii", "binary", "binary_compressed"};

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// The script's cloud, one row of x y z intensity per point. The regular rows use only single
// float division, multiplication and addition, each correctly rounded the same way in numpy's
// float32 and C++ float (and no a * b + c a compiler could fuse).
std::vector<std::vector<float>> KnownCloud() {
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < kRegular; ++i) {
    const float f = float(i);
    rows.push_back({f / 7.0f, f * -0.1f, 1000.0f + f / 3.0f, f / 9.0f});
  }
  for (size_t k = 0; k < kSpecial; ++k) {
    std::vector<float> row;
    for (size_t c = 0; c < 4; ++c) row.push_back(FromBits(kSpecialBits[(k + c) % kSpecial]));
    rows.push_back(row);
  }
  return rows;
}

std::string Fixture(const std::string& writer, const std::string& kind) {
  return test::FixturePath("pcd/" + writer + kind + ".pcd");
}

// x y z (and intensity, when with_intensity) compared as bits: -0 is not 0, and a denormal read
// back as zero would fail.
void ExpectKnownBits(const PointCloud& cloud, bool with_intensity, const std::string& what) {
  const auto known = KnownCloud();
  ASSERT_EQ(cloud.size(), known.size()) << what;
  ASSERT_TRUE(cloud.consistent()) << what;
  EXPECT_FALSE(cloud.has_ring()) << what;
  EXPECT_TRUE(cloud.time_offset_s.empty()) << what;
  for (size_t i = 0; i < known.size(); ++i) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(Bits(cloud.xyz[i][c]), Bits(known[i][c])) << what << " point " << i << " " << c;
    }
    // Without an intensity field the reader gives +0 (point_cloud.h).
    const uint32_t intensity = with_intensity ? Bits(known[i][3]) : 0u;
    EXPECT_EQ(Bits(cloud.intensity[i]), intensity) << what << " point " << i;
  }
}

TEST(Open3dPcd, TensorWriterEveryDataKindReadsToTheKnownBits) {
  for (const char* kind : kKinds) {
    auto cloud = ReadPcd(Fixture("open3d_", kind));
    ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
    ExpectKnownBits(*cloud, true, kind);
  }
}

TEST(Open3dPcd, LegacyWriterEveryDataKindReadsToTheKnownBitsSkippingNormalsAndRgb) {
  for (const char* kind : kKinds) {
    auto cloud = ReadPcd(Fixture("open3d_legacy_", kind));
    ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
    ExpectKnownBits(*cloud, false, std::string("legacy ") + kind);
  }
}

// The records as they are, not only the fields PointCloud keeps: every DATA kind of one writer
// gives the same field table and the same record bytes, the legacy files' normals and rgb
// included (its ASCII file prints float64 normals with %.10g; for these values that reads back as
// the float32 its binary files cast them to).
TEST(Open3dPcd, EveryDataKindReadsToTheSameRecords) {
  auto tensor = ReadPcdTable(Fixture("open3d_", "binary"));
  ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
  EXPECT_EQ(tensor->width, 40u);
  EXPECT_EQ(tensor->height, 1u);
  EXPECT_EQ(tensor->record_bytes, 16u);
  ASSERT_EQ(tensor->fields.size(), 4u);
  EXPECT_EQ(tensor->fields[3].name, "intensity");
  EXPECT_EQ(tensor->fields[3].type, 'F');
  EXPECT_EQ(tensor->fields[3].offset, 12u);
  for (const char* kind : {"ascii", "binary_compressed"}) {
    auto other = ReadPcdTable(Fixture("open3d_", kind));
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_EQ(other->record_bytes, tensor->record_bytes) << kind;
    EXPECT_EQ(other->records, tensor->records) << kind;
  }

  auto legacy = ReadPcdTable(Fixture("open3d_legacy_", "binary"));
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  ASSERT_EQ(legacy->fields.size(), 7u);
  EXPECT_EQ(legacy->fields[3].name, "normal_x");
  EXPECT_EQ(legacy->fields[6].name, "rgb");
  EXPECT_EQ(legacy->record_bytes, 28u);
  for (const char* kind : {"ascii", "binary_compressed"}) {
    auto other = ReadPcdTable(Fixture("open3d_legacy_", kind));
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_EQ(other->record_bytes, legacy->record_bytes) << kind;
    EXPECT_EQ(other->records, legacy->records) << "legacy " << kind;
  }
}

}  // namespace
}  // namespace dv
