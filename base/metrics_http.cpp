#include "dejaview/base/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dv::metrics {

StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const std::string& listen,
                                                          std::function<std::string()> render) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidArgument("metrics address '" + listen + "' is not host:port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const std::string host = listen.substr(0, colon);
  char* end = nullptr;
  const long port = std::strtol(listen.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535 ||
      inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("metrics address '" + listen + "' is not IPv4-address:port");
  }
  addr.sin_port = htons(uint16_t(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("metrics: socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 8) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    return Status::IoError("metrics: listen on " + listen + ": " + err);
  }
  return std::unique_ptr<MetricsHttp>(new MetricsHttp(fd, ntohs(addr.sin_port), std::move(render)));
}

MetricsHttp::MetricsHttp(int fd, int port, std::function<std::string()> render)
    : fd_(fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttp::~MetricsHttp() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

void MetricsHttp::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // One request line is all we need; a slow or silent client gets 1 s, then is dropped.
    char req[1024];
    size_t got = 0;
    while (got < sizeof(req) - 1) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 1000) <= 0) break;
      const ssize_t n = ::recv(c, req + got, sizeof(req) - 1 - got, 0);
      if (n <= 0) break;
      got += size_t(n);
      req[got] = '\0';
      if (std::strstr(req, "\r\n\r\n") || std::strstr(req, "\n\n")) break;
    }
    req[got] = '\0';
    const bool ok = std::strncmp(req, "GET /metrics", 12) == 0;
    const std::string body = ok ? render_() : "not found\n";
    const std::string head =
        std::string(ok ? "HTTP/1.0 200 OK\r\n" : "HTTP/1.0 404 Not Found\r\n") +
        "Content-Type: text/plain; version=0.0.4\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    const std::string out = head + body;
    size_t sent = 0;
    while (sent < out.size()) {
      const ssize_t n = ::send(c, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += size_t(n);
    }
    ::close(c);
  }
}

}  // namespace dv::metrics
