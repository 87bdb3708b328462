// The command line's conventions, on the real `dejaview` binary: --version, -h, --key=value,
// progress that stays line-oriented off a terminal, and read-only commands that create nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "dejaview/base/version.h"
#include "testutil.h"

namespace dv {
namespace {

TEST(CliConventions, VersionAndDashH) {
  std::string out;
  ASSERT_EQ(test::RunCli("--version", &out), 0) << out;
  EXPECT_EQ(out, std::string("dejaview ") + Version() + "\n");
  // Every subcommand answers -h with its usage, and exit 0.
  for (const char* command : {"info", "map", "map build", "map info", "map publish", "encode",
                              "decode", "inspect", "compare", "bench", "query", "export", "convert",
                              "keygen", "simulate", "replay", "record", "render", "stats"}) {
    EXPECT_EQ(test::RunCli(std::string(command) + " -h", &out), 0) << command << ": " << out;
    const std::string name = std::string(command).substr(0, std::string(command).find(' '));
    EXPECT_EQ(out.rfind("usage: dejaview " + name, 0), 0u) << command << ": " << out;
  }
  ASSERT_EQ(test::RunCli("info --json=yes x.bin", &out), 2) << out;
  EXPECT_NE(out.find("option --json takes no value"), std::string::npos) << out;
}

// Off a terminal (here a pipe) progress is one line per tenth of the work, each a count that
// grows, and never a carriage return; --quiet writes none. The options use --key=value.
TEST(CliConventions, ProgressOffATerminalIsLineOriented) {
  const std::string root = test::ScratchDir();
  const std::string run =
      "simulate --out=" + root + " --days=2 --frames=10 --beams=8 --azimuth-steps=90 --seed=3";
  std::string out;
  ASSERT_EQ(test::RunCli(run, &out), 0) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  std::istringstream lines(out);
  std::string line;
  std::vector<int> done;
  const std::regex progress(R"(simulate: (\d+)/20 frames)");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, progress)) done.push_back(std::stoi(m[1]));
  }
  ASSERT_FALSE(done.empty()) << out;
  EXPECT_LE(done.size(), 11u) << out;
  EXPECT_EQ(done.back(), 20) << out;
  for (size_t i = 1; i < done.size(); ++i) {
    EXPECT_GT(done[i] * 10 / 20, done[i - 1] * 10 / 20) << "two lines in one tenth:\n" << out;
  }
  EXPECT_NE(out.find("simulated 20 frames (2 days)"), std::string::npos) << out;
  ASSERT_EQ(test::RunCli(run + " --quiet", &out), 0) << out;
  EXPECT_EQ(out.find("simulate: "), std::string::npos) << out;
}

TEST(CliConventions, ReadOnlyCommandsCreateNothing) {
  const std::string typo = test::ScratchDir() + "/no-such-store";
  std::string out;
  EXPECT_EQ(test::RunCli("query --store " + typo, &out), 1) << out;
  EXPECT_NE(out.find(typo + ": no such store"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(typo));
  EXPECT_EQ(test::RunCli("query --db " + typo + "/index.sqlite", &out), 1) << out;
  EXPECT_FALSE(std::filesystem::exists(typo));
}

}  // namespace
}  // namespace dv
