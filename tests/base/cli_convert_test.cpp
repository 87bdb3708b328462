// `dejaview convert` as a process: file to file through every format, and drive to drive.
#include <gtest/gtest.h>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "testutil.h"

namespace dv {
namespace {

TEST(CliConvert, RealFrameThroughPcdAndPlyIsBitExact) {
  const std::string dir = test::ScratchDir();
  const std::string src = test::KittiSeq("00") + "/velodyne/000000.bin";
  std::string out;
  ASSERT_EQ(test::RunCli("convert " + src + " " + dir + "/a.pcd", &out), 0) << out;
  EXPECT_EQ(out, src + " -> " + dir + "/a.pcd: 124668 points (0 non-finite kept), 1994900 bytes\n");
  ASSERT_EQ(test::RunCli("convert " + dir + "/a.pcd " + dir + "/b.ply --ascii", &out), 0) << out;
  ASSERT_EQ(test::RunCli("convert " + dir + "/b.ply " + dir + "/c.ply --binary", &out), 0) << out;
  ASSERT_EQ(test::RunCli("convert " + dir + "/c.ply " + dir + "/d.bin", &out), 0) << out;
  auto a = ReadFileBytes(src);
  auto d = ReadFileBytes(dir + "/d.bin");
  ASSERT_TRUE(a.ok() && d.ok());
  EXPECT_EQ(*a, *d);
}

TEST(CliConvert, UsageErrorsExitWithTwo) {
  const std::string dir = test::ScratchDir();
  const std::string src = test::FixturePath("kitti_tiny.bin");
  std::string out;
  EXPECT_EQ(test::RunCli("convert " + src, &out), 2);
  EXPECT_EQ(test::RunCli("convert " + src + " " + dir + "/x.pcd --ascii --binary", &out), 2);
  EXPECT_NE(out.find("--ascii and --binary exclude each other"), std::string::npos) << out;
  EXPECT_EQ(test::RunCli("convert " + src + " " + dir + "/x.bin --ascii", &out), 2);
  EXPECT_NE(out.find("x.bin: KITTI .bin has no ascii form"), std::string::npos) << out;
  EXPECT_EQ(test::RunCli("convert " + src + " " + dir + "/x.pcd --bogus", &out), 2);
  EXPECT_EQ(test::RunCli("convert --help", &out), 0);
  EXPECT_NE(out.find("usage: dejaview convert IN OUT"), std::string::npos) << out;
}

TEST(CliConvert, DriveToDriveKeepsFramesPosesAndLabels) {
  const std::string dir = test::ScratchDir();
  const std::string seq = test::KittiSeq("07");
  std::string out;
  ASSERT_EQ(test::RunCli("convert " + seq + " " + dir + "/ply --to ply", &out), 0) << out;
  EXPECT_EQ(out, seq + " -> " + dir + "/ply: 10 frames as .ply\n");
  auto original = OpenDrive(seq);
  auto copy = OpenDrive(dir + "/ply");
  ASSERT_TRUE(original.ok() && copy.ok()) << copy.status().ToString();
  ASSERT_EQ(copy->size(), 10u);
  EXPECT_EQ(copy->frame_paths[3], dir + "/ply/velodyne/000003.ply");
  EXPECT_EQ(copy->poses.size(), 10u);
  EXPECT_EQ(copy->timestamps_s, original->timestamps_s);
  EXPECT_FALSE(copy->labels_dir.empty());
  auto a = ReadPointCloudFile(original->frame_paths[3]);
  auto b = ReadPointCloudFile(copy->frame_paths[3]);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->xyz, b->xyz);
  EXPECT_EQ(a->intensity, b->intensity);
  EXPECT_EQ(test::RunCli("convert " + seq + " " + dir + "/x", &out), 2);
  EXPECT_NE(out.find("converting a drive needs --to bin, pcd or ply (got '')"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace dv
