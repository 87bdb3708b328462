// replay -> record as two real processes over TCP loopback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "testutil.h"

namespace dv {
namespace {

// The first n frames of KITTI 00 as a drive of its own (the shared data is read-only).
std::string SmallKittiDrive(const std::string& dir, size_t n) {
  auto src = OpenDrive(test::KittiSeq("00"));
  EXPECT_TRUE(src.ok());
  EXPECT_TRUE(MakeDirs(dir + "/velodyne").ok());
  for (size_t i = 0; i < n; ++i) {
    std::filesystem::copy_file(src->frame_paths[i],
                               dir + "/velodyne/" + src->frame_names[i] + ".bin");
  }
  EXPECT_TRUE(
      WriteKittiPoses(dir + "/poses.txt", {src->poses.begin(), src->poses.begin() + n}).ok());
  EXPECT_TRUE(WriteTimestamps(dir + "/timestamps.txt",
                              {src->timestamps_s.begin(), src->timestamps_s.begin() + n})
                  .ok());
  return dir;
}

std::string Endpoint() { return "tcp://127.0.0.1:" + std::to_string(20000 + ::getpid() % 20000); }

TEST(WireReplayRecord, RoundTripsARealDriveBitExactly) {
  const std::string root = test::ScratchDir();
  const std::string in = SmallKittiDrive(root + "/in", 3);
  std::string rec_out, rep_out;
  int rec_rc = -1;
  // record first, replay waits (XPUB) until record has subscribed to both topics.
  std::thread recorder([&] {
    rec_rc = test::RunCli("record --quiet --endpoint " + Endpoint() + " --out " + root +
                              "/out --frames 3 --timeout-ms 20000",
                          &rec_out);
  });
  const int rep_rc = test::RunCli(
      "replay " + in + " --quiet --fast --lz4 --wait-ms 20000 --endpoint " + Endpoint(), &rep_out);
  recorder.join();
  ASSERT_EQ(rep_rc, 0) << rep_out;
  ASSERT_EQ(rec_rc, 0) << rec_out;
  EXPECT_NE(rep_out.find("published 3 frames and poses"), std::string::npos) << rep_out;
  EXPECT_NE(rec_out.find("recorded 3 frames with poses, 0 sequence gaps, 0 rejected"),
            std::string::npos)
      << rec_out;
  auto a = OpenDrive(in), b = OpenDrive(root + "/out");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(b->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ReadFileBytes(a->frame_paths[i]).value(), ReadFileBytes(b->frame_paths[i]).value());
    // Poses cross the wire bit-exactly; poses.txt holds 10 significant digits.
    EXPECT_TRUE(a->poses[i].isApprox(b->poses[i], 1e-9)) << i;
  }
  EXPECT_EQ(a->timestamps_s, b->timestamps_s);
  EXPECT_EQ(ReadFileBytes(in + "/timestamps.txt").value(),
            ReadFileBytes(root + "/out/timestamps.txt").value());
}

TEST(WireReplayRecord, BadArgumentsAreUsageErrors) {
  std::string out;
  EXPECT_EQ(test::RunCli("replay /nonexistent --endpoint tcp://127.0.0.1:1", &out), 1);
  EXPECT_NE(out.find("/nonexistent: not a directory"), std::string::npos) << out;
  EXPECT_EQ(test::RunCli("replay " + test::KittiSeq("00") + " --endpoint x --topic a", &out), 2);
  EXPECT_NE(out.find("topics must end in '/'"), std::string::npos) << out;
  EXPECT_EQ(test::RunCli("record --endpoint tcp://127.0.0.1:1 --out /tmp/x --frames many", &out),
            2);
  EXPECT_NE(out.find("--frames: 'many' is not an integer"), std::string::npos) << out;
}

}  // namespace
}  // namespace dv
