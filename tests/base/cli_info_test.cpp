#include <gtest/gtest.h>

#include "testutil.h"

namespace dv {
namespace {

TEST(CliInfo, ReportsTheRealFrame) {
  std::string out;
  ASSERT_EQ(test::RunCli("info " + test::KittiSeq("00") + "/velodyne/000000.bin", &out), 0) << out;
  EXPECT_NE(out.find("points:     124668 (0 non-finite)"), std::string::npos) << out;
  EXPECT_NE(out.find("bounds:"), std::string::npos) << out;
}

TEST(CliInfo, ReportsTheDrive) {
  std::string out;
  ASSERT_EQ(test::RunCli("info " + test::KittiSeq("00") + " --json", &out), 0) << out;
  EXPECT_NE(out.find("\"frames\": 10"), std::string::npos) << out;
  EXPECT_NE(out.find("\"poses\": true"), std::string::npos) << out;
  EXPECT_NE(out.find("\"timestamps\": true"), std::string::npos) << out;
  EXPECT_NE(out.find("\"labels\": true"), std::string::npos) << out;
}

TEST(CliInfo, MissingFileExitsWithAMessage) {
  std::string out;
  EXPECT_EQ(test::RunCli("info /nonexistent/x.bin", &out), 1);
  EXPECT_NE(out.find("/nonexistent/x.bin: no such file"), std::string::npos) << out;
}

}  // namespace
}  // namespace dv
