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

}  // namespace

Subscriber::Subscriber(const AgentConfig& config, BoundedQueue<Frame>* queue, AgentStats* stats)
    : config_(config),
      queue_(queue),
      stats_(stats),
      // 10 s of poses at 100 Hz: enough for any frame still worth encoding.
      poses_(1000, config.pose_max_gap_ms * 1'000'000) {
  for (const SensorConfig& s : config.sensors) sensor_by_topic_[s.topic] = s.id;
}

void Subscriber::OnFrame(uint32_t sensor_id, const uint8_t* data, size_t size) {
  auto raw = transport::DecodeFrame(data, size, &counters_);
  StatusOr<PointCloud> cloud = raw.ok() ? transport::ToPointCloud(*raw, &counters_) : raw.status();
  if (!cloud.ok()) {
    if (rejected_++ % 100 == 0) spdlog::warn("agent: frame rejected: {}", cloud.status().message());
    return;
  }
  ++stats_->frames_in;
  Frame f;
  f.sensor_id = sensor_id;
  f.sequence = raw->header.sequence;
  f.timestamp_ns = raw->header.sensor_stamp_ns;
  f.cloud = std::move(cloud).value();
  if (raw->header.has_pose) {
    f.T_map_sensor = raw->header.T_map_sensor;
    queue_->Push(std::move(f));
    return;
  }
  pending_.emplace_back(NowMs(), std::move(f));
  while (pending_.size() > size_t(config_.queue_frames)) {
    pending_.pop_front();
    ++stats_->frames_no_pose;
  }
}

void Subscriber::ResolvePending(bool flush) {
  while (!pending_.empty()) {
    Frame& f = pending_.front().second;
    auto pose = poses_.At(f.timestamp_ns);
    if (pose.ok()) {
      f.T_map_sensor = *pose;
      queue_->Push(std::move(f));
    } else if (pose.status().code() == Status::Code::kUnavailable && !flush &&
               NowMs() - pending_.front().first < config_.pose_max_gap_ms) {
      return;  // its pose may still come
    } else {
      ++stats_->frames_no_pose;
    }
    pending_.pop_front();
  }
}

void Subscriber::Run(const std::atomic<bool>* stop) {
  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::rcvhwm, 64);
  sub.set(zmq::sockopt::subscribe, config_.pose_topic);
  for (const auto& [topic, id] : sensor_by_topic_) sub.set(zmq::sockopt::subscribe, topic);
  try {
    sub.connect(config_.lidar_endpoint);
  } catch (const zmq::error_t& e) {
    spdlog::error("agent: connect {}: {}", config_.lidar_endpoint, e.what());
    return;
  }
  spdlog::info("agent: subscribed to {} on {}", config_.sensors.front().topic,
               config_.lidar_endpoint);
  while (!stop->load()) {
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      for (int burst = 0; burst < 64 && (item.revents & ZMQ_POLLIN); ++burst) {
        zmq::message_t topic, body;
        if (!sub.recv(topic, zmq::recv_flags::dontwait)) break;
        if (!topic.more() || !sub.recv(body, zmq::recv_flags::none)) continue;
        while (body.more()) {
          zmq::message_t extra;
          (void)sub.recv(extra, zmq::recv_flags::none);
        }
        const std::string t = topic.to_string();
        const auto* data = static_cast<const uint8_t*>(body.data());
        if (t == config_.pose_topic) {
          auto pose = transport::DecodePose(data, body.size(), &counters_);
          if (pose.ok()) {
            poses_.Add(pose->stamp_ns, pose->T_map_sensor);
          } else {
            ++rejected_;
          }
        } else if (const auto it = sensor_by_topic_.find(t); it != sensor_by_topic_.end()) {
          OnFrame(it->second, data, body.size());
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
