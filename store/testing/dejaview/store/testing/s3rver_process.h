// Runs a real S3-compatible server (s3rver, installed by scripts/install-deps.sh into
// .deps/node_modules) as a child process on an ephemeral port, for the tests and the benchmark.
// It speaks the S3 REST API over HTTP (path-style requests, ranged GETs, ListObjectsV2) and
// rejects unknown access keys; it does not verify V4 signatures (see tests/store/s3_test.cpp).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "dejaview/base/status.h"
#include "dejaview/store/object_id.h"
#include "dejaview/store/s3_client.h"

namespace dv::store {

class S3rverProcess {
 public:
  // Starts s3rver over data_dir with one bucket; kUnavailable (naming the missing path and the
  // install command) when s3rver or node is not installed.
  static StatusOr<std::unique_ptr<S3rverProcess>> Start(const std::string& data_dir,
                                                        const std::string& bucket);
  ~S3rverProcess();  // SIGTERM, then waits
  S3rverProcess(const S3rverProcess&) = delete;
  S3rverProcess& operator=(const S3rverProcess&) = delete;

  // Endpoint, bucket and s3rver's fixed credentials (S3RVER / S3RVER); also exported to the
  // environment as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for config loading.
  const S3Config& config() const { return config_; }

 private:
  S3rverProcess(pid_t pid, int out_fd, S3Config config)
      : pid_(pid), out_fd_(out_fd), config_(std::move(config)) {}
  pid_t pid_;
  int out_fd_;  // kept open: a closed pipe would kill s3rver at its next log line (EPIPE)
  S3Config config_;
};

// Every pack's members under prefix, read straight from the bucket: how many times each id was
// uploaded (1 everywhere when nothing is duplicated).
StatusOr<std::map<ObjectId, int>> AuditPacks(const S3Config& config, const std::string& prefix);

}  // namespace dv::store
