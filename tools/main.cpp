// dejaview: one executable, one subcommand per task (see README.md and --help).
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "dejaview/base/log.h"
#include "dejaview/base/memory.h"
#include "dejaview/base/version.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int, char**);
};

// One line per subcommand; each lives in its own cmd_*.cpp.
constexpr Command kCommands[] = {
    {"info", "describe a frame file or a drive (points, fields, bounds, poses)", dv::cli::RunInfo},
    {"map", "build a route map (map build), describe one (map info), publish it (map publish)",
     dv::cli::RunMap},
    {"encode", "code frames as deltas against a route map, within a tolerance", dv::cli::RunEncode},
    {"decode", "reconstruct frames from delta files", dv::cli::RunDecode},
    {"inspect", "show a delta file's header, pose, bound and section sizes", dv::cli::RunInspect},
    {"compare",
     "errors of a reconstructed drive against its original (as BENCHMARK.md defines them)",
     dv::cli::RunCompare},
    {"bench", "measure ratio, error and speed of dejaview and its peers", dv::cli::RunBench},
    {"query", "find stored frames by vehicle, time and place; --export a drive", dv::cli::RunQuery},
    {"export", "stream a query's frames as training batches (KITTI or packed)", dv::cli::RunExport},
    {"convert", "convert a frame between KITTI .bin, PCD and PLY (or a whole drive)",
     dv::cli::RunConvert},
    {"keygen", "make a CURVE key pair for the agent-server upload link", dv::cli::RunKeygen},
    {"simulate", "generate simulated multi-day drives of one route", dv::cli::RunSimulate},
    {"replay", "publish a drive's frames and poses over ZeroMQ", dv::cli::RunReplay},
    {"record", "subscribe to frames and poses and write a drive", dv::cli::RunRecord},
    {"render", "draw frames side by side (top-down, sensor view) into a PNG", dv::cli::RunRender},
    {"import", "a recording (MCAP, ROS 2 .db3) into a drive folder", dv::cli::RunImport},
    {"stats", "statistics of a drive's frames, to compare simulated with real ones",
     dv::cli::RunStats},
};

void PrintHelp() {
  std::printf(
      "usage: dejaview <command> [options]   (dejaview <command> --help for details)\n"
      "       dejaview --version\n\n");
  for (const Command& c : kCommands) std::printf("  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  dv::RetainFreedMemory();
  if (argc == 2 && !std::strcmp(argv[1], "--version")) {
    std::printf("dejaview %s\n", dv::Version());
    return 0;
  }
  // Every subcommand logs as the services do: UTC, to stderr, DEJAVIEW_LOG choosing level and
  // format.
  const dv::Status logging = dv::SetupLogging(dv::LogOptions{}, "dejaview");
  if (!logging.ok()) {
    std::fprintf(stderr, "dejaview: %s\n", logging.ToString().c_str());
    return 2;
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    PrintHelp();
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (std::string(argv[1]) == c.name) return c.run(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "dejaview: unknown command '%s'\n\n", argv[1]);
  PrintHelp();
  return 2;
}
