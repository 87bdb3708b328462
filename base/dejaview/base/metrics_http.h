// A tiny HTTP/1.0 responder for Prometheus scrapes: GET or HEAD of exactly /metrics (a query
// string is ignored) answers render(); any other path is 404, any other method 405. Written by
// hand because Debian 12 packages neither prometheus-cpp nor an embeddable HTTP server the
// project already depends on; it serves one short request per connection.
//
// One thread, non-blocking sockets and poll: every connection reads its request and writes its
// answer as its socket allows, so a slow or silent client never delays another. Bounded: at most
// kMaxConnections at once (more are closed unanswered), kMaxRequestBytes of request each, and
// kConnectionDeadlineMs from accept to the last byte sent, after which the connection is dropped.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "dejaview/base/status.h"

namespace dv::metrics {

class MetricsHttp {
 public:
  static constexpr size_t kMaxConnections = 64;
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr int kConnectionDeadlineMs = 10000;

  // listen is "host:port"; port 0 picks a free one (see port()).
  static StatusOr<std::unique_ptr<MetricsHttp>> Start(const std::string& listen,
                                                      std::function<std::string()> render);
  ~MetricsHttp();
  int port() const { return port_; }

  // The response to one request (head included); public for the tests.
  static std::string Respond(const std::string& request,
                             const std::function<std::string()>& render);

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
