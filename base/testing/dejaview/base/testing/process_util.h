// A child process for tests and benchmarks that run the real binaries (agent, server, CLI):
// fork + execv with stdout and stderr appended to a log file, SIGKILL and reaping at scope
// exit; and what such tests read from them (small files, a Prometheus scrape of /metrics).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dejaview/base/file_util.h"

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
  pid_t pid() const { return pid_; }
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

// A small file's text without trailing newlines or spaces; empty when it cannot be read (yet).
inline std::string ReadTrimmed(const std::string& path) {
  auto t = dv::ReadFileText(path, 4096);
  if (!t.ok()) return "";
  std::string s = *t;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// GET /metrics from 127.0.0.1:port -> {series: value}; empty when nothing answers.
inline std::map<std::string, double> ScrapeMetrics(int port) {
  std::map<std::string, double> out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return out;
  }
  const std::string req = "GET /metrics HTTP/1.0\r\n\r\n";
  (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string body;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) body.append(buf, size_t(n));
  ::close(fd);
  const size_t head = body.find("\r\n\r\n");
  if (head == std::string::npos) return out;
  std::istringstream in(body.substr(head + 4));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

}  // namespace dv::test
