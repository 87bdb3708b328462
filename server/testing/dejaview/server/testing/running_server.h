// A real dejaview server (RunServer) on a loopback ephemeral port, in a thread of the test or
// benchmark, stopped at scope exit; endpoint() is empty when it failed to start.
#pragma once

#include <atomic>
#include <future>
#include <string>
#include <thread>

#include "dejaview/server/ingest.h"

namespace dv::server {

class RunningServer {
 public:
  explicit RunningServer(const std::string& dir, ServerOptions o = {}) {
    o.listen = "tcp://127.0.0.1:0";
    o.store_dir = dir;
    std::promise<std::string> bound;
    auto endpoint = bound.get_future();
    thread_ = std::thread([this, o, &bound] {
      status_ = RunServer(o, &stop_, [&](const std::string& e) { bound.set_value(e); });
      if (!status_.ok()) bound.set_value("");
    });
    endpoint_ = endpoint.get();
  }
  ~RunningServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::string endpoint_;
  Status status_;
};

}  // namespace dv::server
