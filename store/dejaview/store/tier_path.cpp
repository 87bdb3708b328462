#include "dejaview/store/tier_path.h"

#include <chrono>

namespace dv::store {

TierPath::TierPath(Tier* tier, const TierLimits& limits)
    : tier_(tier), max_inflight_(limits.max_inflight), bandwidth_mbps_(limits.bandwidth_mbps) {
  for (int i = 0; i < max_inflight_; ++i) workers_.emplace_back([this] { Work(); });
}

TierPath::~TierPath() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

double TierPath::EstimatedFinishS(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return double(queued_bytes_ + bytes) / (bandwidth_mbps_ * 1e6);
}

void TierPath::Submit(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out,
                      std::function<void(const Status&)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({id, offset, length, out, std::move(done)});
    queued_bytes_ += length;
  }
  cv_.notify_one();
}

void TierPath::Work() {
  for (;;) {
    Request req;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      req = std::move(queue_.front());
      queue_.pop_front();
      inflight_++;
    }
    const auto start = std::chrono::steady_clock::now();
    const Status st = tier_->ReadRange(req.id, req.offset, req.length, req.out);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (st.ok()) read_bytes_ += req.length;
    {
      std::lock_guard<std::mutex> lock(mu_);
      inflight_--;
      queued_bytes_ -= req.length;
      // Tiny requests measure latency, not bandwidth; only requests of 64 KiB or more count.
      if (st.ok() && req.length >= (64u << 10) && s > 0) {
        bandwidth_mbps_ = 0.8 * bandwidth_mbps_ + 0.2 * (double(req.length) / s / 1e6);
      }
    }
    req.done(st);
  }
}

TierMetrics TierPath::Metrics() {
  TierMetrics m;
  m.tier = tier_->name();
  m.bytes = tier_->bytes();
  m.objects = tier_->objects();
  m.hits = hits_;
  m.misses = misses_;
  m.read_bytes = read_bytes_;
  std::lock_guard<std::mutex> lock(mu_);
  m.queue_depth = queue_.size();
  m.inflight = inflight_;
  m.read_bandwidth_mbps = bandwidth_mbps_;
  return m;
}

}  // namespace dv::store
