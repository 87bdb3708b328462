// The queue between the agent's sources and its encoder workers. Bounded, because a vehicle
// computer must not grow memory when encoding falls behind; the policy when full is explicit:
// Push drops the oldest waiting frame (the newest sensor data is the most useful and a stale
// frame would be late anyway) and counts it; PushWait blocks instead (offline replay, where no
// frame may be lost).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace dv::agent {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // Returns false when the queue was full and the oldest item was dropped to make room.
  bool Push(T item) {
    std::lock_guard<std::mutex> lock(mu_);
    bool dropped = false;
    if (q_.size() >= capacity_) {
      q_.pop_front();
      ++dropped_;
      dropped = true;
    }
    q_.push_back(std::move(item));
    high_water_ = std::max(high_water_, q_.size());
    ready_.notify_one();
    return !dropped;
  }
  // Waits for room; false when the queue is closed.
  bool PushWait(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [&] { return closed_ || q_.size() < capacity_; });
    if (closed_) return false;
    q_.push_back(std::move(item));
    high_water_ = std::max(high_water_, q_.size());
    ready_.notify_one();
    return true;
  }
  // Waits for an item; nullopt once the queue is closed and empty (closing drains, not drops).
  std::optional<T> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return std::nullopt;
    T item = std::move(q_.front());
    q_.pop_front();
    room_.notify_one();
    return item;
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    ready_.notify_all();
    room_.notify_all();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return q_.size();
  }
  uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }
  size_t high_water() const {
    std::lock_guard<std::mutex> lock(mu_);
    return high_water_;
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<T> q_;
  bool closed_ = false;
  uint64_t dropped_ = 0;
  size_t high_water_ = 0;
};

}  // namespace dv::agent
