#include "dejaview/store/testing/postgres_process.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "dejaview/base/file_util.h"

namespace dv::store {
namespace {

// Debian installs the server binaries under /usr/lib/postgresql/<major>/bin, not on PATH.
std::string FindBinDir() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    if (std::filesystem::exists(e.path() / "bin" / "initdb")) return (e.path() / "bin").string();
  }
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<PostgresProcess>> PostgresProcess::Start(const std::string& dir) {
  const std::string bin = FindBinDir();
  if (bin.empty()) {
    return Status::Unavailable(
        "PostgreSQL server not installed (/usr/lib/postgresql/*/bin/initdb missing): run "
        "scripts/install-deps.sh");
  }
  DV_RETURN_IF_ERROR(MakeDirs(dir));
  std::string as_user;
  if (::geteuid() == 0) {
    if (std::system(("chown postgres " + dir).c_str()) != 0) {
      return Status::Unavailable("postgres: cannot hand " + dir + " to the postgres user");
    }
    as_user = "runuser -u postgres -- ";
  }
  const std::string data = dir + "/data";
  const std::string init = as_user + bin + "/initdb -D " + data +
                           " -U dejaview -A trust -E UTF8 --no-sync >" + dir + "/initdb.log 2>&1";
  if (std::system(init.c_str()) != 0) {
    return Status::Unavailable("postgres: initdb failed, see " + dir + "/initdb.log");
  }
  const std::string start = as_user + bin + "/pg_ctl -D " + data + " -l " + dir +
                            "/server.log -w -o \"-c listen_addresses='' -k " + dir +
                            " -c fsync=off\" start >/dev/null 2>&1";
  if (std::system(start.c_str()) != 0) {
    return Status::Unavailable("postgres: pg_ctl start failed, see " + dir + "/server.log");
  }
  return std::unique_ptr<PostgresProcess>(new PostgresProcess(
      as_user + bin + "/pg_ctl -D " + data + " -m immediate stop >/dev/null 2>&1",
      "host=" + dir + " port=5432 user=dejaview dbname=postgres"));
}

PostgresProcess::~PostgresProcess() {
  if (std::system(stop_command_.c_str()) != 0) std::fprintf(stderr, "postgres: stop failed\n");
}

}  // namespace dv::store
