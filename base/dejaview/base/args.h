// A small argument parser for dejaview's programs (the CLI's subcommands, the agent, the server):
// positionals, "--key value", "--key=value", "--flag", and "-h" for "--help" where a program
// has that flag. Kept rather than CLI11 (Debian's libcli11-dev 2.1.2 ships CLI11Config.cmake):
// every program's options are already declared here, their usage texts and exit codes are
// pinned by tests, and the grammar is this small; CLI11 would replace all seventeen parsers'
// declarations for no behaviour the programs lack.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dejaview/base/status.h"

namespace dv::cli {

// Exit codes shared by every subcommand.
enum Exit : int { kOk = 0, kFailure = 1, kUsage = 2, kBadInput = 3 };

class Args {
 public:
  // value_keys take a value ("--out DIR"); flag_keys do not ("--json"). Anything else starting
  // with "--" is a usage error naming the option.
  static StatusOr<Args> Parse(int argc, char** argv, const std::set<std::string>& value_keys,
                              const std::set<std::string>& flag_keys);

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& key) const { return values_.count(key) || flags_.count(key); }
  std::string Get(const std::string& key, const std::string& def = "") const;
  StatusOr<double> GetDouble(const std::string& key, double def) const;
  StatusOr<long> GetInt(const std::string& key, long def) const;
  // Every value of a key given several times ("--drive A --drive B").
  std::vector<std::string> GetAll(const std::string& key) const;

 private:
  std::vector<std::string> positional_;
  std::multimap<std::string, std::string> values_;
  std::set<std::string> flags_;
};

// Prints a status to stderr as "dejaview <cmd>: <message>" and returns the exit code for it.
int Fail(const std::string& cmd, const Status& s);

}  // namespace dv::cli
