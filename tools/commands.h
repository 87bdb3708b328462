// Every dejaview subcommand: argv excludes the program and subcommand names.
#pragma once

#include <string>

namespace dv::cli {

class Args;

int RunInfo(int argc, char** argv);
int RunCompare(int argc, char** argv);
int RunMap(int argc, char** argv);
int RunEncode(int argc, char** argv);
int RunDecode(int argc, char** argv);
int RunInspect(int argc, char** argv);
int RunBench(int argc, char** argv);
int RunQuery(int argc, char** argv);
int RunExport(int argc, char** argv);
int RunConvert(int argc, char** argv);
int RunKeygen(int argc, char** argv);
int RunSimulate(int argc, char** argv);
int RunReplay(int argc, char** argv);
int RunRecord(int argc, char** argv);
int RunRender(int argc, char** argv);
int RunImport(int argc, char** argv);
int RunStats(int argc, char** argv);
// dejaview export --format mcap (cmd_export_mcap.cpp), given export's parsed arguments.
int RunExportMcap(const Args& args);
// dejaview export --format mcap|ply|pcd (cmd_export_mcap.cpp), given export's parsed arguments.
int RunExportDrive(const Args& args, const std::string& format);

}  // namespace dv::cli
