// A tiny HTTP/1.0 responder for Prometheus scrapes: GET /metrics answers render(), anything
// else 404. Written by hand because Debian 12 packages neither prometheus-cpp nor an embeddable
// HTTP server the project already depends on; it serves one short request per connection.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "dejaview/base/status.h"

namespace dv::metrics {

class MetricsHttp {
 public:
  // listen is "host:port"; port 0 picks a free one (see port()).
  static StatusOr<std::unique_ptr<MetricsHttp>> Start(const std::string& listen,
                                                      std::function<std::string()> render);
  ~MetricsHttp();
  int port() const { return port_; }

 private:
  MetricsHttp(int fd, int port, std::function<std::string()> render);
  void Serve();
  int fd_;
  int port_;
  std::function<std::string()> render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dv::metrics
