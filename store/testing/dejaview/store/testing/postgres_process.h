// Runs a throw-away PostgreSQL server (Debian's postgresql package) for the tests: initdb into a
// temporary directory, then pg_ctl start listening only on a Unix socket in that directory, so
// that parallel tests never share a port. As root (PostgreSQL refuses to run as root) the server
// runs as the "postgres" system user.
#pragma once

#include <memory>
#include <string>

#include "dejaview/base/status.h"

namespace dv::store {

class PostgresProcess {
 public:
  // kUnavailable naming the missing binaries and the install command when not installed.
  static StatusOr<std::unique_ptr<PostgresProcess>> Start(const std::string& dir);
  ~PostgresProcess();  // pg_ctl stop -m immediate
  PostgresProcess(const PostgresProcess&) = delete;
  PostgresProcess& operator=(const PostgresProcess&) = delete;

  // libpq conninfo of the server's "postgres" database.
  const std::string& conninfo() const { return conninfo_; }

 private:
  PostgresProcess(std::string stop_command, std::string conninfo)
      : stop_command_(std::move(stop_command)), conninfo_(std::move(conninfo)) {}
  std::string stop_command_;
  std::string conninfo_;
};

}  // namespace dv::store
