// Shared test helpers: where the data is, scratch directories, running the CLI as a process.
#pragma once

#include <string>

namespace dv::test {

// ../shared/data/kitti-odometry-mini/<seq>; the shared KITTI extract is part of the test
// environment (CI runs with ../shared beside the repo), so a missing folder fails the test.
std::string KittiSeq(const std::string& seq);
std::string FixturePath(const std::string& name);
// A fresh, empty directory under the system temp dir, unique per test.
std::string ScratchDir();
// Runs the dejaview CLI with args; returns the exit status and captures stdout+stderr.
int RunCli(const std::string& args, std::string* output);
// Runs a shell command line likewise.
int RunCommand(const std::string& command, std::string* output);

}  // namespace dv::test
