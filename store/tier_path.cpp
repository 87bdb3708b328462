#include "dejaview/store/tier_path.h"

#include <chrono>

namespace dv::store {

double EstimateFinishS(uint64_t queued_bytes, uint64_t bytes, double aggregate_mbps,
                       double request_mbps) {
  return double(queued_bytes) / (aggregate_mbps * 1e6) + double(bytes) / (request_mbps * 1e6);
}

// The configured bandwidth is the tier's aggregate guess; a request starts with its share.
TierPath::TierPath(Tier* tier, const TierLimits& limits)
    : tier_(tier),
      max_inflight_(limits.max_inflight),
      aggregate_mbps_(limits.bandwidth_mbps),
      s_per_mb_(limits.max_inflight / limits.bandwidth_mbps) {
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
  return EstimateFinishS(queued_bytes_, bytes, aggregate_mbps_, 1 / s_per_mb_);
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
      if (inflight_++ == 0) busy_since_ = std::chrono::steady_clock::now();
    }
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const Status st = tier_->ReadRange(req.id, req.offset, req.length, req.out);
    const auto end = Clock::now();
    const double s = std::chrono::duration<double>(end - start).count();
    if (st.ok()) read_bytes_ += req.length;
    {
      std::lock_guard<std::mutex> lock(mu_);
      inflight_--;
      queued_bytes_ -= req.length;
      // Tiny requests measure latency, not bandwidth; only requests of 64 KiB or more count.
      if (st.ok() && req.length >= (64u << 10) && s > 0) {
        s_per_mb_ = 0.8 * s_per_mb_ + 0.2 * (s / (double(req.length) / 1e6));
      }
      // Aggregate: bytes delivered per second of busy time (some request in flight), one sample
      // per kWindowS of it, so that a tier serving in bursts (a throttle's time slices, a
      // network's jitter) is measured by what it delivers, not by its fastest requests.
      constexpr double kWindowS = 0.1;
      if (st.ok()) window_bytes_ += req.length;
      double busy = window_busy_s_ + std::chrono::duration<double>(end - busy_since_).count();
      if (inflight_ == 0) window_busy_s_ = busy;
      if (busy >= kWindowS) {
        aggregate_mbps_ = 0.7 * aggregate_mbps_ + 0.3 * (double(window_bytes_) / busy / 1e6);
        window_bytes_ = 0;
        window_busy_s_ = 0;
        busy_since_ = end;
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
  m.read_bandwidth_mbps = aggregate_mbps_;
  return m;
}

}  // namespace dv::store
