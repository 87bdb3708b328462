// Every dejaview subcommand: argv excludes the program and subcommand names.
#pragma once

namespace dv::cli {

int RunInfo(int argc, char** argv);
int RunMap(int argc, char** argv);
int RunEncode(int argc, char** argv);
int RunDecode(int argc, char** argv);
int RunInspect(int argc, char** argv);

}  // namespace dv::cli
