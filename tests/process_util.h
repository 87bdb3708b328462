// A child process for tests that run the real binaries (server, CLI): fork + execv with stdout
// and stderr appended to a log file, SIGKILL and reaping at scope exit.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace dv::test {

class Process {
 public:
  Process(std::vector<std::string> argv, const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Process() {
    Signal(SIGKILL);
    Wait();
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  void Signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Exit status (or 128 + signal); -1 when it is still running after timeout_s.
  int Wait(double timeout_s = 30) {
    if (pid_ <= 0) return status_;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }
  // True while the child runs; once it has exited, reaps it and keeps its status for Wait().
  bool running() {
    if (pid_ <= 0) return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == 0) return true;
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

// Polls done every millisecond until it holds or timeout_s passes (a bounded wait, not a timing
// assertion).
inline bool WaitUntil(const std::function<bool()>& done, double timeout_s = 30) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace dv::test
