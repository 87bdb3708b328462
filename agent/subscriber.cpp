#include "dejaview/agent/subscriber.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <zmq.hpp>

namespace dv::agent {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Parts of one message beyond the two a well-formed one has are received and freed, never kept:
// a publisher cannot make the agent hold more than two parts of any message.
constexpr size_t kKeptParts = 2;

}  // namespace

Subscriber::Subscriber(const AgentConfig& config, BoundedQueue<Frame>* queue, AgentStats* stats,
                       EpochSource* epochs)
    : config_(config),
      queue_(queue),
      stats_(stats),
      epochs_(epochs),
      // 10 s of poses at 100 Hz: enough for any frame still worth encoding.
      poses_(1000, config.pose_max_gap_ms * 1'000'000) {
  for (const SensorConfig& s : config.sensors) sensor_by_topic_[s.topic] = s.id;
}

void Subscriber::NewEpoch(const std::string& why) {
  Status persisted;
  epoch_ = epochs_->Next(&persisted);
  last_sequence_.clear();
  ++stats_->source_epochs;
  if (!persisted.ok()) {
    ++stats_->epoch_write_errors;
    spdlog::error("agent: source epoch {} not persisted: {}", epoch_, persisted.ToString());
  }
  spdlog::info("agent: source epoch {} ({})", epoch_, why);
}

void Subscriber::Reject(transport::Reject why, const std::string& message) {
  ++counters_.rejected[size_t(why)];
  PublishCounters();
  LogRejected(message);
}

void Subscriber::LogRejected(const std::string& message) {
  // At most one line a second, saying how many were not logged in between: a flood of bad
  // messages must not become a flood of log lines. The counters have every one.
  const int64_t now = NowMs();
  if (now - last_reject_log_ms_ < 1000) {
    ++unlogged_rejects_;
    return;
  }
  spdlog::warn("agent: message rejected: {}{}", message,
               unlogged_rejects_ ? " (and " + std::to_string(unlogged_rejects_) +
                                       " more rejections since the last line)"
                                 : std::string());
  last_reject_log_ms_ = now;
  unlogged_rejects_ = 0;
}

void Subscriber::PublishCounters() {
  for (size_t i = 0; i < counters_.rejected.size(); ++i)
    stats_->wire_rejected[i].store(counters_.rejected[i], std::memory_order_relaxed);
}

void Subscriber::OnFrame(uint32_t sensor_id, const uint8_t* data, size_t size) {
  auto raw = transport::DecodeFrame(data, size, &counters_);
  StatusOr<PointCloud> cloud = raw.ok() ? transport::ToPointCloud(*raw, &counters_) : raw.status();
  PublishCounters();  // the decoders counted the reason of a rejection
  if (!cloud.ok()) {
    LogRejected(cloud.status().message());
    return;
  }
  ++stats_->frames_in;
  const uint64_t sequence = raw->header.sequence;
  if (const auto last = last_sequence_.find(sensor_id);
      last != last_sequence_.end() && sequence <= last->second) {
    NewEpoch("sensor " + std::to_string(sensor_id) + "'s sequence went from " +
             std::to_string(last->second) + " to " + std::to_string(sequence) +
             ": its driver restarted");
  }
  last_sequence_[sensor_id] = sequence;
  Frame f;
  f.sensor_id = sensor_id;
  f.source_epoch = epoch_;
  f.sequence = sequence;
  f.timestamp_ns = raw->header.sensor_stamp_ns;
  f.cloud = std::move(cloud).value();
  if (raw->header.has_pose) {
    f.T_map_sensor = raw->header.T_map_sensor;
    f.has_pose = true;
    queue_->Push(std::move(f));
    return;
  }
  pending_.emplace_back(NowMs(), std::move(f));
  ResolvePending(false);
}

void Subscriber::ResolvePending(bool flush) {
  while (!pending_.empty()) {
    Frame& f = pending_.front().second;
    auto pose = poses_.At(f.timestamp_ns);
    if (pose.ok()) {
      f.T_map_sensor = *pose;
      f.has_pose = true;
    } else if (pose.status().code() == Status::Code::kUnavailable && !flush &&
               pending_.size() <= size_t(config_.queue_frames) &&
               NowMs() - pending_.front().first < config_.pose_max_gap_ms) {
      return;  // its pose may still come
    } else {
      // Every frame is coded: one without a usable pose is coded intra (no map), counted.
      ++stats_->frames_no_pose;
    }
    queue_->Push(std::move(f));
    pending_.pop_front();
  }
}

void Subscriber::Run(const std::atomic<bool>* stop) {
  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::rcvhwm, 64);
  // A frame is at most kMaxPointBytes of points plus its header; bigger messages are refused by
  // libzmq before they are allocated (the connection is dropped and re-made).
  sub.set(zmq::sockopt::maxmsgsize, int64_t(transport::kMaxPointBytes + (1 << 20)));
  sub.set(zmq::sockopt::subscribe, config_.pose_topic);
  for (const auto& [topic, id] : sensor_by_topic_) sub.set(zmq::sockopt::subscribe, topic);
  try {
    sub.connect(config_.lidar_endpoint);
  } catch (const zmq::error_t& e) {
    spdlog::error("agent: connect {}: {}", config_.lidar_endpoint, e.what());
    return;
  }
  NewEpoch("subscribed to " + config_.lidar_endpoint);
  while (!stop->load()) {
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      for (int burst = 0; burst < 64 && (item.revents & ZMQ_POLLIN); ++burst) {
        // One whole message: libzmq delivers multipart messages atomically, so once the first
        // part is here the others are too.
        zmq::message_t parts[kKeptParts];
        size_t count = 0;
        for (bool more = true; more; ++count) {
          zmq::message_t part;
          const auto flags = count == 0 ? zmq::recv_flags::dontwait : zmq::recv_flags::none;
          if (!sub.recv(part, flags)) break;
          more = part.more();
          if (count < kKeptParts) parts[count] = std::move(part);
        }
        if (count == 0) break;
        if (count != kKeptParts) {
          Reject(transport::Reject::kWrongShape,
                 "a message of " + std::to_string(count) + " parts (expected [topic] [body])");
          continue;
        }
        const std::string t = parts[0].to_string();
        const auto* data = static_cast<const uint8_t*>(parts[1].data());
        if (t == config_.pose_topic) {
          auto pose = transport::DecodePose(data, parts[1].size(), &counters_);
          PublishCounters();
          if (pose.ok()) {
            poses_.Add(pose->stamp_ns, pose->T_map_sensor);
          } else {
            LogRejected(pose.status().message());
          }
        } else if (const auto it = sensor_by_topic_.find(t); it != sensor_by_topic_.end()) {
          OnFrame(it->second, data, parts[1].size());
        } else {
          Reject(transport::Reject::kUnknownTopic, "topic '" + t.substr(0, 64) + "'");
        }
      }
    } catch (const zmq::error_t&) {
      continue;  // EINTR
    }
    ResolvePending(false);
  }
  ResolvePending(true);
}

}  // namespace dv::agent
