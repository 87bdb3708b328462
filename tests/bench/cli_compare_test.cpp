#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "testutil.h"

namespace dv {
namespace {

TEST(CliCompare, ADriveAgainstItselfHasNoError) {
  std::string out;
  const std::string seq = test::KittiSeq("07");
  ASSERT_EQ(test::RunCli("compare " + seq + " " + seq, &out), 0) << out;
  EXPECT_NE(out.find("| 10 | 1224820 / 1224820 | 0.0000 | 0.0000 / 0.0000 | 0.0000 / 0.0000 | "
                     "0.0000 | 1792: 0.0000 |"),
            std::string::npos)
      << out;
}

TEST(CliCompare, AShiftedPointIsTheHausdorffDistance) {
  const std::string dir = test::ScratchDir();
  PointCloud a;
  a.push_back({0, 0, 0}, 0);
  a.push_back({10, 0, 0}, 0);
  PointCloud b = a;
  b.xyz[1].x() = 10.25f;  // exactly representable: the error is 0.25 m both ways
  ASSERT_TRUE(MakeDirs(dir + "/a/velodyne").ok() && MakeDirs(dir + "/b/velodyne").ok());
  ASSERT_TRUE(WriteKittiBin(dir + "/a/velodyne/000000.bin", a).ok());
  ASSERT_TRUE(WriteKittiBin(dir + "/b/velodyne/000000.bin", b).ok());
  std::string out;
  ASSERT_EQ(test::RunCli("compare " + dir + "/a " + dir + "/b --json", &out), 0) << out;
  EXPECT_NE(out.find("\"hausdorff_m\": 0.25"), std::string::npos) << out;
  EXPECT_NE(out.find("\"p_to_q_max_m\": 0.25"), std::string::npos) << out;
}

TEST(CliCompare, NoCommonFramesIsAnError) {
  const std::string dir = test::ScratchDir();
  PointCloud a;
  a.push_back({0, 0, 0}, 0);
  ASSERT_TRUE(MakeDirs(dir + "/a/velodyne").ok());
  ASSERT_TRUE(WriteKittiBin(dir + "/a/velodyne/999999.bin", a).ok());
  std::string out;
  EXPECT_EQ(test::RunCli("compare " + test::KittiSeq("07") + " " + dir + "/a", &out), 1);
  EXPECT_NE(out.find("no frame names in common"), std::string::npos) << out;
}

// PNG header: 8-byte signature, then the IHDR chunk whose first fields are big-endian width and
// height.
uint32_t BigEndian32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | b[at + 3];
}

TEST(CliRender, OneRowOfThreePanelsPerFrame) {
  const std::string dir = test::ScratchDir();
  const std::string frame = test::KittiSeq("07") + "/velodyne/000000.bin";
  std::string out;
  ASSERT_EQ(test::RunCli("render " + frame + " " + test::FixturePath("kitti_tiny.bin") +
                             " --title \"it's real\" --out " + dir + "/two.png",
                         &out),
            0)
      << out;
  EXPECT_NE(out.find("(2 frames)"), std::string::npos) << out;
  auto png = ReadFileBytes(dir + "/two.png", 64 << 20);
  ASSERT_TRUE(png.ok()) << png.status().ToString();
  ASSERT_GT(png->size(), 24u);
  const std::vector<uint8_t> signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  EXPECT_TRUE(std::equal(signature.begin(), signature.end(), png->begin()));
  EXPECT_EQ(BigEndian32(*png, 16), 2400u);
  EXPECT_EQ(BigEndian32(*png, 20), 2u * 560u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/two.png.render.dat"));  // temporaries removed
}

TEST(CliRender, ABadFrameIsNamed) {
  const std::string dir = test::ScratchDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/bad.bin", std::string(17, 'x')).ok());
  std::string out;
  EXPECT_EQ(test::RunCli("render " + dir + "/bad.bin --out " + dir + "/x.png", &out),
            3);  // bad input
  EXPECT_NE(out.find(dir + "/bad.bin"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.png"));
  EXPECT_EQ(test::RunCli("render " + dir + "/bad.bin", &out), 2);  // no --out: usage
}

}  // namespace
}  // namespace dv
