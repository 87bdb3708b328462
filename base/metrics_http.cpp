#include "dejaview/base/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

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

namespace {

using Clock = std::chrono::steady_clock;

// One accepted connection: it reads until the request's blank line (or the byte limit), then
// writes its whole answer.
struct Connection {
  int fd;
  Clock::time_point deadline;
  std::string in;
  std::string out;  // empty while reading
  size_t sent = 0;
};

// false when the connection is finished (answered, closed by the peer, or failed).
bool ReadRequest(Connection* c, const std::function<std::string()>& render) {
  char buf[2048];
  const ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c->in.append(buf, size_t(n));  // at most kMaxRequestBytes + sizeof(buf) in all
  const bool complete = c->in.find("\r\n\r\n") != std::string::npos ||
                        c->in.find("\n\n") != std::string::npos ||
                        c->in.size() >= MetricsHttp::kMaxRequestBytes;
  if (complete) c->out = MetricsHttp::Respond(c->in, render);
  return true;
}

bool WriteAnswer(Connection* c) {
  const ssize_t n = ::send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c->sent += size_t(n);
  return c->sent < c->out.size();
}

}  // namespace

std::string MetricsHttp::Respond(const std::string& request,
                                 const std::function<std::string()>& render) {
  const size_t line_end = request.find_first_of("\r\n");
  const std::string line = request.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  const std::string method = line.substr(0, sp1);
  std::string path = sp1 == std::string::npos ? "" : line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  const bool head = method == "HEAD";
  std::string status = "200 OK", body, extra;
  if (method != "GET" && !head) {
    status = "405 Method Not Allowed";
    body = "method not allowed\n";
    extra = "Allow: GET, HEAD\r\n";
  } else if (path != "/metrics") {
    status = "404 Not Found";
    body = "not found\n";
  } else {
    body = render();
  }
  const std::string out = "HTTP/1.0 " + status + "\r\n" + extra +
                          "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n" +
                          "Content-Length: " + std::to_string(body.size()) +
                          "\r\nConnection: close\r\n\r\n";
  return head ? out : out + body;
}

void MetricsHttp::Serve() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.assign(1, pollfd{fd_, POLLIN, 0});
    for (const Connection& c : conns) {
      fds.push_back(pollfd{c.fd, short(c.out.empty() ? POLLIN : POLLOUT), 0});
    }
    // The timeout bounds how late stop_ and the connections' deadlines are noticed.
    if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) break;
    const Clock::time_point now = Clock::now();
    std::vector<Connection> kept;
    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      bool open = now < c.deadline;
      if (open && (fds[i + 1].revents & (POLLERR | POLLHUP | POLLNVAL)) && c.out.empty()) {
        open = false;
      } else if (open && fds[i + 1].revents) {
        open = c.out.empty() ? ReadRequest(&c, render_) : WriteAnswer(&c);
      }
      if (open) {
        kept.push_back(std::move(c));
      } else {
        ::close(c.fd);
      }
    }
    conns = std::move(kept);
    if (fds[0].revents & POLLIN) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c >= 0 && conns.size() >= kMaxConnections) {
        ::close(c);
      } else if (c >= 0) {
        conns.push_back(
            Connection{c, now + std::chrono::milliseconds(kConnectionDeadlineMs), {}, {}, 0});
      }
    }
  }
  for (const Connection& c : conns) ::close(c.fd);
}

}  // namespace dv::metrics
