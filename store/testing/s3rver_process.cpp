#include "dejaview/store/testing/s3rver_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "dejaview/base/file_util.h"
#include "dejaview/store/remote_tier.h"

namespace dv::store {

StatusOr<std::unique_ptr<S3rverProcess>> S3rverProcess::Start(const std::string& data_dir,
                                                              const std::string& bucket) {
  const std::string script = DEJAVIEW_S3RVER_JS;
  if (!std::filesystem::exists(script)) {
    return Status::Unavailable("s3rver is not installed (" + script +
                               " missing): run scripts/install-deps.sh");
  }
  DV_RETURN_IF_ERROR(MakeDirs(data_dir));
  int out[2];
  if (::pipe(out) != 0) return Status::IoError("s3rver: pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) return Status::IoError("s3rver: fork failed");
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(out[0]);
    ::close(out[1]);
    ::execlp("node", "node", script.c_str(), "-d", data_dir.c_str(), "-a", "127.0.0.1", "-p", "0",
             "-s", "--configure-bucket", bucket.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  // s3rver prints "S3rver listening on 127.0.0.1:PORT" once it accepts connections.
  std::string text;
  std::string port;
  while (port.empty()) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) break;
    char buf[256];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, size_t(n));
    const size_t at = text.find("listening on 127.0.0.1:");
    if (at != std::string::npos) {
      size_t i = at + 23;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
        port += text[i++];
      if (i == text.size()) port.clear();  // the number may continue in the next read
    }
  }
  if (port.empty()) {
    ::close(out[0]);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status::Unavailable("s3rver did not start (is node installed?): " + text);
  }
  S3Config c;
  c.endpoint = "http://127.0.0.1:" + port;
  c.bucket = bucket;
  c.access_key = "S3RVER";
  c.secret_key = "S3RVER";
  ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  return std::unique_ptr<S3rverProcess>(new S3rverProcess(pid, out[0], c));
}

S3rverProcess::~S3rverProcess() {
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  ::close(out_fd_);
}

StatusOr<std::map<ObjectId, int>> AuditPacks(const S3Config& config, const std::string& prefix) {
  DV_ASSIGN_OR_RETURN(auto tier, RemoteTier::Open(config, prefix));
  DV_ASSIGN_OR_RETURN(const auto keys, tier->client().ListKeys(prefix + "packs/"));
  std::map<ObjectId, int> count;
  for (const std::string& key : keys) {
    DV_ASSIGN_OR_RETURN(const auto entries, tier->ReadPackIndex(key));
    for (const PackEntry& e : entries) count[e.id]++;
  }
  return count;
}

}  // namespace dv::store
