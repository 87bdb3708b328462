// One read path of the multi-path reader (the MLP-Offload idea): a tier, a fixed pool of
// max_inflight worker threads (so at most that many requests hit the tier at once and tiers do
// not contend), a FIFO queue (requests run in the order readers will consume them), and a
// measured bandwidth two ways: aggregate, the MB/s the tier delivers while busy (an EWMA over
// 0.1 s windows of busy time), and per request, b (1 / an EWMA of completed requests' seconds per
// MB, with the path's other requests in flight). The planner sends each request to the path that
// would finish it first (EstimateFinishS): the bytes ahead of it drain at the aggregate rate, then
// the request itself takes its own length / b. The second term is why a slow tier with many
// workers only gets work once a fast tier's queue is long: an object waits for its slowest
// chunk, and the reader consumes objects in order.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "dejaview/store/config.h"
#include "dejaview/store/tier.h"

namespace dv::store {

// Seconds until a request of `bytes` finishes behind `queued_bytes` (queued and in flight) on a
// path that delivers aggregate_mbps in all and request_mbps to one request.
double EstimateFinishS(uint64_t queued_bytes, uint64_t bytes, double aggregate_mbps,
                       double request_mbps);

struct TierMetrics {
  const char* tier = "";
  uint64_t bytes = 0;    // held
  uint64_t objects = 0;  // held
  uint64_t hits = 0;     // objects read from this tier
  uint64_t misses = 0;   // lookups this tier could not serve
  uint64_t queue_depth = 0;
  uint64_t inflight = 0;
  uint64_t read_bytes = 0;
  double read_bandwidth_mbps = 0;  // EWMA of delivered MB/s while busy
};

class TierPath {
 public:
  TierPath(Tier* tier, const TierLimits& limits);
  ~TierPath();  // finishes queued requests, then joins
  TierPath(const TierPath&) = delete;
  TierPath& operator=(const TierPath&) = delete;

  Tier* tier() const { return tier_; }
  // Seconds until a request of bytes queued now would finish (the planner's estimate).
  double EstimatedFinishS(uint64_t bytes);
  // Queues a ranged read; done(status) runs on a worker thread.
  void Submit(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out,
              std::function<void(const Status&)> done);
  void CountHit() { hits_++; }
  void CountMiss() { misses_++; }
  TierMetrics Metrics();

 private:
  struct Request {
    ObjectId id;
    uint64_t offset, length;
    uint8_t* out;
    std::function<void(const Status&)> done;
  };
  void Work();

  Tier* const tier_;
  const int max_inflight_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  uint64_t queued_bytes_ = 0;  // queued plus in flight
  uint64_t inflight_ = 0;
  double aggregate_mbps_;  // EWMA of delivered MB/s per busy window
  // 1 / b, the seconds one request takes per MB with the others in flight. Averaged as time, not
  // rate: a throttled or jittery tier serves some requests at once and makes others wait, and an
  // average of rates would follow the fast ones.
  double s_per_mb_;
  std::chrono::steady_clock::time_point busy_since_;  // inflight_ went 0 -> 1, or window start
  double window_busy_s_ = 0;   // busy seconds of the current window before busy_since_
  uint64_t window_bytes_ = 0;  // delivered in the current window
  bool stop_ = false;
  std::atomic<uint64_t> hits_{0}, misses_{0}, read_bytes_{0};
  std::vector<std::thread> workers_;
};

}  // namespace dv::store
