// One read path of the multi-path reader (the MLP-Offload idea): a tier, a fixed pool of
// max_inflight worker threads (so at most that many requests hit the tier at once and tiers do
// not contend), a FIFO queue (requests run in the order readers will consume them), and a
// measured bandwidth. The planner estimates when a new request would finish on each path,
//   (queued bytes + request bytes) / (bandwidth per request x max_inflight),
// and sends it to the earliest; bandwidth is an EWMA (alpha 0.2) of completed requests' MB/s.
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

struct TierMetrics {
  const char* tier = "";
  uint64_t bytes = 0;    // held
  uint64_t objects = 0;  // held
  uint64_t hits = 0;     // objects read from this tier
  uint64_t misses = 0;   // lookups this tier could not serve
  uint64_t queue_depth = 0;
  uint64_t inflight = 0;
  uint64_t read_bytes = 0;
  double read_bandwidth_mbps = 0;  // EWMA of delivered MB/s
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
  double bandwidth_mbps_;
  std::chrono::steady_clock::time_point last_completion_;
  std::chrono::steady_clock::time_point busy_since_;  // when inflight_ last went 0 -> 1
  bool stop_ = false;
  std::atomic<uint64_t> hits_{0}, misses_{0}, read_bytes_{0};
  std::vector<std::thread> workers_;
};

}  // namespace dv::store
