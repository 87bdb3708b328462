#include <gtest/gtest.h>

#include <filesystem>

#include "testutil.h"

namespace dv {
namespace {

TEST(CliBench, QuickModeWritesTablesAndFiles) {
  const std::string out = test::ScratchDir();
  std::string log;
  ASSERT_EQ(test::RunCli("bench quick " + test::KittiSeq("07") +
                             " --codec grid+zstd --knob 0.1 --frames 1 --out " + out,
                         &log),
            0)
      << log;
  EXPECT_NE(log.find("| grid+zstd | step_m=0.1 |"), std::string::npos) << log;
  EXPECT_NE(log.find("Ratio at equal error"), std::string::npos) << log;
  EXPECT_NE(log.find("[bench] 07 grid+zstd step_m=0.1: 07/000001 (1/1)"), std::string::npos) << log;
  for (const char* f :
       {"settings.csv", "frames.csv", "equal_error.csv", "results.json", "tables.md"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  }
}

TEST(CliBench, BadArgumentsAreUsageErrors) {
  std::string log;
  EXPECT_EQ(test::RunCli("bench revisit " + test::KittiSeq("07") + " --threads 2", &log), 2);
  EXPECT_NE(log.find("only 1 is accepted"), std::string::npos) << log;
  EXPECT_EQ(test::RunCli("bench revisit " + test::KittiSeq("07") + " --codecs gzip", &log), 2);
  EXPECT_NE(log.find("unknown or not built-in codec 'gzip'"), std::string::npos) << log;
  EXPECT_EQ(
      test::RunCli("bench revisit " + test::KittiSeq("07") + " --knobs 1,x --codecs zstd", &log),
      2);
  EXPECT_NE(log.find("--knobs: 'x' is not a number"), std::string::npos) << log;
  EXPECT_EQ(test::RunCli("bench revisit /nonexistent/drive", &log), 1);
  EXPECT_NE(log.find("/nonexistent/drive"), std::string::npos) << log;
  EXPECT_EQ(test::RunCli("bench sideways", &log), 2);
}

}  // namespace
}  // namespace dv
