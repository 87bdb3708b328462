// The batch command line of issue 11, run as real processes on real KITTI frames.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/bench/metrics.h"
#include "testutil.h"

namespace dv {
namespace {

namespace fs = std::filesystem;

// DIR/velodyne holds frames first, first + 2, ... of sequence 00, with their poses.
void CopyFrames(const std::string& dir, size_t first) {
  const std::string seq = test::KittiSeq("00");
  fs::create_directories(dir + "/velodyne");
  const Drive d = OpenDrive(seq).value();
  std::vector<Pose> poses;
  for (size_t i = first; i < d.size(); i += 4) {
    fs::copy_file(d.frame_paths[i], dir + "/velodyne/" + d.frame_names[i] + ".bin");
    poses.push_back(d.poses[i]);
  }
  ASSERT_TRUE(WriteKittiPoses(dir + "/poses.txt", poses).ok());
}

TEST(CliCodec, MapBuildEncodeDecodeInspect) {
  const std::string root = test::ScratchDir();
  CopyFrames(root + "/even", 0);
  CopyFrames(root + "/odd", 1);
  std::string out;
  ASSERT_EQ(
      test::RunCli("map build " + root + "/even --out " + root + "/map --resolution 0.25", &out), 0)
      << out;
  EXPECT_NE(out.find("version"), std::string::npos) << out;
  EXPECT_NE(out.find(" MB per metre)"), std::string::npos) << out;
  ASSERT_EQ(test::RunCli("map info " + root + "/map --json", &out), 0) << out;
  EXPECT_NE(out.find("\"resolution_m\": 0.25"), std::string::npos) << out;
  ASSERT_EQ(test::RunCli("encode " + root + "/odd --map " + root + "/map --out " + root +
                             "/delta --tolerance 0.25",
                         &out),
            0)
      << out;
  EXPECT_NE(out.find("encoded 3 frames (0 intra)"), std::string::npos) << out;
  // On threads the same bytes: among other things, registration's two subsamples of a real scan
  // taken in one pass (one thread) and in two (the threads' way).
  ASSERT_EQ(test::RunCli("encode " + root + "/odd --map " + root + "/map --out " + root +
                             "/delta2 --tolerance 0.25 --threads 2",
                         &out),
            0)
      << out;
  for (const auto& e : fs::directory_iterator(root + "/delta")) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(ReadFileBytes(e.path().string()).value(),
              ReadFileBytes(root + "/delta2/" + name).value())
        << name;
  }
  ASSERT_EQ(test::RunCli("inspect " + root + "/delta/000005.dvd", &out), 0) << out;
  EXPECT_NE(out.find("Hausdorff <= 0.250000 m"), std::string::npos) << out;
  EXPECT_NE(out.find("map "), std::string::npos) << out;
  ASSERT_EQ(
      test::RunCli("decode " + root + "/delta --map " + root + "/map --out " + root + "/dec", &out),
      0)
      << out;
  const Drive odd = OpenDrive(root + "/odd").value();
  for (size_t i = 0; i < odd.size(); ++i) {
    auto a = ReadKittiBin(odd.frame_paths[i]).value();
    auto b = ReadKittiBin(root + "/dec/velodyne/" + odd.frame_names[i] + ".bin").value();
    EXPECT_LE(bench::CompareFrames(a.xyz, b.xyz).hausdorff_m(), 0.25) << odd.frame_names[i];
  }

  // Wrong map, corrupt and truncated files: clear messages and the bad-input exit code.
  ASSERT_EQ(
      test::RunCli("map build " + root + "/odd --out " + root + "/other --resolution 0.25", &out),
      0);
  EXPECT_EQ(
      test::RunCli("decode " + root + "/delta --map " + root + "/other --out " + root + "/x", &out),
      2);
  EXPECT_NE(out.find("coded against map"), std::string::npos) << out;
  auto bytes = ReadFileBytes(root + "/delta/000001.dvd").value();
  bytes.resize(bytes.size() / 2);
  ASSERT_TRUE(WriteFileAtomic(root + "/bad.dvd", bytes).ok());
  EXPECT_EQ(test::RunCli("inspect " + root + "/bad.dvd", &out), 3);
  EXPECT_NE(out.find("truncated"), std::string::npos) << out;
  EXPECT_EQ(test::RunCli("encode " + root + "/odd --out " + root + "/d2 --tolerance 0", &out), 2);
  EXPECT_NE(out.find("tolerance"), std::string::npos) << out;
}

}  // namespace
}  // namespace dv
