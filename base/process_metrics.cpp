#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dejaview/base/metrics.h"
#include "dejaview/base/version.h"

namespace dv::metrics {
namespace {

// A /proc file's text, at most max_bytes of it. /proc files report a size of 0, so they are read
// to their end rather than by ReadFileText's size.
std::string ReadProcText(const char* path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text(max_bytes, '\0');
  in.read(text.data(), std::streamsize(max_bytes));
  text.resize(size_t(in.gcount()));
  return text;
}

// Fields of /proc/self/stat after the command name (which may hold spaces and parentheses, so
// the text is split after its last ')'): index 0 is field 3, the state. proc(5).
std::vector<std::string> StatFields() {
  const std::string text = ReadProcText("/proc/self/stat", 4096);
  std::vector<std::string> fields;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return fields;
  size_t pos = close + 2;
  while (pos < text.size()) {
    const size_t end = std::min(text.find(' ', pos), text.size());
    fields.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return fields;
}

double FieldOrZero(const std::vector<std::string>& fields, size_t stat_field) {
  const size_t i = stat_field - 3;
  return i < fields.size() ? std::strtod(fields[i].c_str(), nullptr) : 0;
}

// Seconds since the epoch at which the system booted (btime in /proc/stat).
double BootTimeSeconds() {
  const std::string text = ReadProcText("/proc/stat", 1 << 20);
  const size_t at = text.find("\nbtime ");
  return at == std::string::npos ? 0 : std::strtod(text.c_str() + at + 7, nullptr);
}

}  // namespace

void UpdateProcessMetrics(Registry* r) {
  const std::vector<std::string> f = StatFields();
  const double ticks = double(::sysconf(_SC_CLK_TCK));
  const double page = double(::sysconf(_SC_PAGESIZE));
  // utime (14) + stime (15) in clock ticks; starttime (22) in ticks since boot; vsize (23) in
  // bytes; rss (24) in pages.
  r->GetCounter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")
      .SetTotal((FieldOrZero(f, 14) + FieldOrZero(f, 15)) / ticks);
  static const double start_s = BootTimeSeconds() + FieldOrZero(StatFields(), 22) / ticks;
  r->GetGauge("process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.")
      .Set(start_s);
  r->GetGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.")
      .Set(FieldOrZero(f, 23));
  r->GetGauge("process_resident_memory_bytes", "Resident memory size in bytes.")
      .Set(FieldOrZero(f, 24) * page);
  std::error_code ec;
  size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  r->GetGauge("process_open_fds", "Number of open file descriptors.").Set(double(fds));
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    r->GetGauge("process_max_fds", "Maximum number of open file descriptors.")
        .Set(limit.rlim_cur == RLIM_INFINITY ? -1 : double(limit.rlim_cur));
  }
}

void RegisterBuildInfo(Registry* r, const std::string& program) {
  r->GetGauge("dejaview_build_info", "Always 1: the running program and its version, as labels.",
              {{"program", program}, {"version", Version()}})
      .Set(1);
}

std::string RenderExposition(Registry* r) {
  UpdateProcessMetrics(r);
  return r->RenderText();
}

}  // namespace dv::metrics
