#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace dv::cli {

Progress::Progress(std::string what, std::string unit, bool quiet)
    : Progress(std::move(what), std::move(unit), quiet, ::isatty(STDERR_FILENO) == 1) {}

Progress::Progress(std::string what, std::string unit, bool quiet, bool terminal)
    : what_(std::move(what)), unit_(std::move(unit)), quiet_(quiet), terminal_(terminal) {}

Progress::~Progress() { Finish(); }

void Progress::Update(size_t done, size_t total, const std::string& extra) {
  if (quiet_) return;
  const std::string count =
      total ? std::to_string(done) + "/" + std::to_string(total) : std::to_string(done);
  const std::string line = what_ + ": " + count + " " + unit_ + extra;
  if (terminal_) {
    std::fprintf(stderr, "\r%s", line.c_str());
    open_line_ = true;
    return;
  }
  if (total == 0) return;
  const int decile = int(10 * done / total);
  if (decile <= last_decile_) return;
  last_decile_ = decile;
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Progress::Finish() {
  if (!open_line_) return;
  std::fprintf(stderr, "\n");
  open_line_ = false;
}

}  // namespace dv::cli
