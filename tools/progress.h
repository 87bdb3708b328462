// Progress of a long command, on stderr. On a terminal one line rewritten in place; anywhere
// else (a log file, a pipe) one line per 10% of a known total and nothing for an open-ended
// count, so that logs stay one record per line; nothing at all with --quiet. The final summary
// a command prints on stdout is not progress and is unaffected.
#pragma once

#include <cstddef>
#include <string>

namespace dv::cli {

class Progress {
 public:
  // what: the line's prefix ("map build"); unit: what is counted ("frames").
  Progress(std::string what, std::string unit, bool quiet);
  Progress(std::string what, std::string unit, bool quiet, bool terminal);  // for the tests
  ~Progress();
  // total 0: an open-ended count (written on a terminal only).
  void Update(size_t done, size_t total, const std::string& extra = "");
  // Ends the in-place line on a terminal (the destructor does it too).
  void Finish();

 private:
  std::string what_, unit_;
  bool quiet_, terminal_;
  bool open_line_ = false;
  int last_decile_ = -1;
};

}  // namespace dv::cli
