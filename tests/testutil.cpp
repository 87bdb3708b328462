#include "testutil.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>

namespace dv::test {

std::string KittiSeq(const std::string& seq) {
  const std::string dir = std::string(DEJAVIEW_DATA_DIR) + "/kitti-odometry-mini/" + seq;
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << "shared KITTI data missing: " << dir;
  return dir;
}

std::string FixturePath(const std::string& name) {
  return std::string(DEJAVIEW_FIXTURE_DIR) + "/" + name;
}

std::string ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const auto dir = std::filesystem::temp_directory_path() /
                   ("dejaview-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

int RunCli(const std::string& args, std::string* output) {
#ifndef DEJAVIEW_CLI  // the vehicle-only build has no CLI (tests/vehicle)
  *output = "no dejaview CLI in this build";
  (void)args;
  return -1;
#else
  return RunCommand(std::string(DEJAVIEW_CLI) + " " + args, output);
#endif
}

int RunCommand(const std::string& command, std::string* output) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf{};
  output->clear();
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) output->append(buf.data(), n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace dv::test
