#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dv
