#include "dejaview/base/kitti.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "testutil.h"

namespace dv {
namespace {

TEST(KittiBin, ReadsTheRealFrame) {
  auto cloud = ReadKittiBin(test::KittiSeq("00") + "/velodyne/000000.bin");
  ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
  EXPECT_EQ(cloud->size(), 124668u);
  EXPECT_TRUE(cloud->consistent());
}

TEST(KittiBin, WriteReadIsBitExact) {
  auto cloud = ReadKittiBin(test::FixturePath("kitti_tiny.bin"));
  ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
  const std::string out = test::ScratchDir() + "/copy.bin";
  ASSERT_TRUE(WriteKittiBin(out, *cloud).ok());
  auto a = ReadFileBytes(test::FixturePath("kitti_tiny.bin"));
  auto b = ReadFileBytes(out);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(KittiBin, RejectsATruncatedFile) {
  const std::string path = test::ScratchDir() + "/bad.bin";
  ASSERT_TRUE(WriteFileAtomic(path, std::string(17, 'x')).ok());
  auto cloud = ReadKittiBin(path);
  ASSERT_FALSE(cloud.ok());
  EXPECT_EQ(cloud.status().code(), Status::Code::kCorruption);
  EXPECT_NE(cloud.status().message().find(path), std::string::npos);
  EXPECT_NE(cloud.status().message().find("not a multiple of 16"), std::string::npos);
}

TEST(KittiPoses, RoundTripAndErrors) {
  auto poses = ReadKittiPoses(test::KittiSeq("00") + "/poses.txt");
  ASSERT_TRUE(poses.ok()) << poses.status().ToString();
  ASSERT_EQ(poses->size(), 10u);
  const std::string dir = test::ScratchDir();
  ASSERT_TRUE(WriteKittiPoses(dir + "/p.txt", *poses).ok());
  auto again = ReadKittiPoses(dir + "/p.txt");
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < poses->size(); ++i) {
    EXPECT_LT(((*poses)[i].matrix() - (*again)[i].matrix()).cwiseAbs().maxCoeff(), 1e-8);
  }
  ASSERT_TRUE(WriteFileAtomic(dir + "/short.txt", std::string("1 0 0 0 0 1 0 0 0 0 1\n")).ok());
  auto bad = ReadKittiPoses(dir + "/short.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("short.txt:1: expected 12 numbers, got 11"),
            std::string::npos)
      << bad.status().message();
  ASSERT_TRUE(WriteFileAtomic(dir + "/nan.txt", std::string("1 0 0 0 0 1 0 0 0 0 1 nan\n")).ok());
  EXPECT_FALSE(ReadKittiPoses(dir + "/nan.txt").ok());
}

// Epoch nanoseconds are written exactly, from the integer, signs and extremes included; the
// reader takes each line to the nearest double.
TEST(KittiTimestamps, NanosecondsAreWrittenExactly) {
  const std::string path = test::ScratchDir() + "/timestamps.txt";
  ASSERT_TRUE(WriteTimestampsNs(path, {1700000000123456789, 0, 999999999, -5, INT64_MIN}).ok());
  EXPECT_EQ(ReadFileText(path).value(),
            "1700000000.123456789\n0.000000000\n0.999999999\n-0.000000005\n"
            "-9223372036.854775808\n");
  auto back = ReadTimestamps(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, (std::vector<double>{1700000000.123456789, 0, 0.999999999, -5e-9,
                                        -9223372036.854775808}));
}

TEST(Labels, CountMustMatchThePoints) {
  const std::string seq = test::KittiSeq("00");
  auto labels = ReadLabels(seq + "/labels/000000.label", 124668);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  auto wrong = ReadLabels(seq + "/labels/000000.label", 1000);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("the frame has 1000 points"), std::string::npos);
}

TEST(Drive, OpensTheKittiSequence) {
  auto d = OpenDrive(test::KittiSeq("07"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->size(), 10u);
  EXPECT_EQ(d->poses.size(), 10u);
  EXPECT_EQ(d->timestamps_s.size(), 10u);
  EXPECT_FALSE(d->labels_dir.empty());
  EXPECT_EQ(d->frame_names[3], "000003");
}

TEST(Drive, PoseCountMismatchIsAnError) {
  const std::string dir = test::ScratchDir();
  ASSERT_TRUE(MakeDirs(dir + "/velodyne").ok());
  PointCloud c;
  c.push_back({1, 2, 3}, 0.5f);
  ASSERT_TRUE(WriteKittiBin(dir + "/velodyne/000000.bin", c).ok());
  ASSERT_TRUE(WriteKittiBin(dir + "/velodyne/000001.bin", c).ok());
  ASSERT_TRUE(WriteKittiPoses(dir + "/poses.txt", {Pose::Identity()}).ok());
  auto d = OpenDrive(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("1 poses for 2 frames"), std::string::npos);
}

TEST(PointCloud, RemoveNonFiniteCounts) {
  PointCloud c;
  c.push_back({1, 2, 3}, 1);
  c.push_back({NAN, 0, 0}, 2);
  c.push_back({0, INFINITY, 0}, 3);
  c.push_back({4, 5, 6}, 4);
  EXPECT_EQ(RemoveNonFinite(&c), 2u);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.intensity[1], 4);
}

}  // namespace
}  // namespace dv
