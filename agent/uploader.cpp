#include "dejaview/agent/uploader.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <thread>
#include <zmq.hpp>

#include "dejaview/transport/upload.h"

namespace dv::agent {

using Clock = std::chrono::steady_clock;
using transport::Message;
using transport::MessageType;
using transport::NackReason;

bool InUploadWindow(int start_min, int end_min, int now_min) {
  if (start_min == end_min) return true;
  if (start_min < end_min) return now_min >= start_min && now_min < end_min;
  return now_min >= start_min || now_min < end_min;
}

namespace {

// NACKs that say "not now" rather than "never": the batch stays in the spool and is resent
// after the backoff, so a limit, a storage hiccup or a revoked key never loses a record.
bool Retryable(NackReason r) {
  return r == NackReason::kStorage || r == NackReason::kUnauthorized ||
         r == NackReason::kThrottled || r == NackReason::kQuota;
}

struct Batch {
  uint64_t first_id = 0;  // spool ids [first_id, end_id)
  uint64_t end_id = 0;
  uint32_t records = 0;
  std::vector<uint8_t> message;
  Clock::time_point sent_at;  // epoch: to be (re)sent once retry_at has passed
  Clock::time_point retry_at;
};

int UtcMinuteOfDay() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm.tm_hour * 60 + tm.tm_min;
}

// Sends without blocking; with ZMQ_IMMEDIATE a missing connection is EAGAIN, which the caller
// treats like a lost message (the batch times out and is resent).
bool TrySend(zmq::socket_t* s, const std::vector<uint8_t>& bytes) {
  try {
    return s->send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t&) {
    return false;
  }
}

}  // namespace

StatusOr<std::unique_ptr<zmq::socket_t>> ConnectDealer(zmq::context_t* ctx,
                                                       const std::string& endpoint,
                                                       const UploadConfig& config,
                                                       const transport::CurveKeys& keys) {
  auto dealer = std::make_unique<zmq::socket_t>(*ctx, zmq::socket_type::dealer);
  try {
    dealer->set(zmq::sockopt::linger, 0);
    dealer->set(zmq::sockopt::immediate, 1);
    if (!config.curve_server_key.empty()) {
      dealer->set(zmq::sockopt::curve_serverkey, config.curve_server_key);
      dealer->set(zmq::sockopt::curve_publickey, keys.public_z85);
      dealer->set(zmq::sockopt::curve_secretkey, keys.secret_z85);
    }
    dealer->connect(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("connect " + endpoint + ": " + e.what());
  }
  return dealer;
}

void Uploader::Run(const std::atomic<bool>* stop) {
  zmq::context_t ctx(1);
  std::unique_ptr<zmq::socket_t> dealer;
  std::unique_ptr<zmq::socket_t> link;
  bool link_up = false;
  if (config_.gate == UploadConfig::Gate::kLink) {
    link = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::sub);
    link->set(zmq::sockopt::linger, 0);
    link->set(zmq::sockopt::subscribe, config_.link_topic);
    try {
      link->connect(config_.link_endpoint);
    } catch (const zmq::error_t& e) {
      spdlog::error("uploader: link gate {}: {}; the gate stays closed", config_.link_endpoint,
                    e.what());
    }
  }
  Message hello;
  hello.type = MessageType::kHello;
  hello.vehicle = vehicle_;
  hello.sensor_ids = sensor_ids_;
  const std::vector<uint8_t> hello_bytes = transport::EncodeMessage(hello);

  std::map<uint64_t, Batch> inflight;  // by batch id; first ids increase with batch ids
  uint64_t next_batch_id = 1;
  uint64_t next_read = spool_->stats().acked_below;
  uint64_t acked_cursor = next_read;
  bool hello_ok = false;
  Clock::time_point hello_sent{}, reconnect_at = Clock::now();
  int backoff_ms = config_.backoff_min_ms;
  double tokens = 0;
  Clock::time_point last_refill = Clock::now();
  const auto timeout = std::chrono::milliseconds(config_.timeout_ms);

  auto drop_socket = [&](const char* why) {
    if (dealer) spdlog::warn("uploader: {}; reconnecting in {} ms", why, backoff_ms);
    dealer.reset();
    hello_ok = false;
    stats_.connected = false;
    reconnect_at = Clock::now() + std::chrono::milliseconds(backoff_ms);
    backoff_ms = std::min(backoff_ms * 2, config_.backoff_max_ms);
  };

  while (!stop->load()) {
    const Clock::time_point now = Clock::now();
    bool gate = true;
    if (config_.gate == UploadConfig::Gate::kLink) gate = link_up;
    if (config_.gate == UploadConfig::Gate::kWindow) {
      gate = InUploadWindow(config_.window_start_min, config_.window_end_min, UtcMinuteOfDay());
    }
    stats_.gate_open = gate;

    if (!dealer && gate && now >= reconnect_at) {
      auto connected = ConnectDealer(&ctx, config_.endpoint, config_, keys_);
      if (!connected.ok()) {
        spdlog::error("uploader: {}", connected.status().message());
        reconnect_at = now + std::chrono::milliseconds(config_.backoff_max_ms);
        continue;
      }
      dealer = std::move(connected).value();
      ++stats_.reconnects;
      hello_sent = Clock::time_point{};  // HELLO as soon as the connection is up
    }

    std::vector<zmq::pollitem_t> items;
    if (dealer) items.push_back({dealer->handle(), 0, ZMQ_POLLIN, 0});
    if (link) items.push_back({link->handle(), 0, ZMQ_POLLIN, 0});
    try {
      if (items.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } else {
        zmq::poll(items.data(), items.size(), std::chrono::milliseconds(20));
      }
    } catch (const zmq::error_t&) {
      continue;  // EINTR from a signal: the loop re-checks stop
    }

    // The link topic: [topic, "up" | "down"].
    while (link) {
      zmq::message_t topic, state;
      if (!link->recv(topic, zmq::recv_flags::dontwait)) break;
      if (topic.more() && link->recv(state, zmq::recv_flags::none)) {
        const bool up = state.to_string() == "up";
        if (up != link_up) spdlog::info("uploader: link {}", up ? "up" : "down");
        link_up = up;
      }
      while (state.more()) (void)link->recv(state, zmq::recv_flags::none);
    }

    while (dealer) {
      zmq::message_t reply;
      if (!dealer->recv(reply, zmq::recv_flags::dontwait)) break;
      auto m = transport::DecodeMessage(static_cast<const uint8_t*>(reply.data()), reply.size());
      if (!m.ok()) {
        spdlog::warn("uploader: unreadable reply: {}", m.status().message());
        continue;
      }
      if (m->type == MessageType::kAck && m->batch_id == 0) {
        hello_ok = true;
        stats_.connected = true;
        backoff_ms = config_.backoff_min_ms;
        for (auto& [id, b] : inflight) b.sent_at = Clock::time_point{};  // resend all
        continue;
      }
      if (m->type == MessageType::kNack && m->batch_id == 0 &&
          m->reason == NackReason::kUnauthorized) {
        // The server does not take this key for this vehicle (not enrolled as it, or revoked):
        // nothing is dropped; the HELLO times out and is retried with backoff until an operator
        // enrols the key.
        spdlog::error("uploader: HELLO refused: {}", m->detail);
        ++stats_.auth_refused;
        continue;
      }
      if (m->type == MessageType::kNack && m->reason == NackReason::kNoHello) {
        hello_ok = false;  // the server restarted behind the same connection
        hello_sent = Clock::time_point{};
        continue;
      }
      const auto it = inflight.find(m->batch_id);
      if (it == inflight.end()) continue;  // a late answer to a batch already resolved
      if (m->type == MessageType::kAck) {
        ++stats_.batches_acked;
        stats_.records_acked += m->stored + m->duplicates;
        stats_.records_duplicate += m->duplicates;
        inflight.erase(it);
      } else if (m->type == MessageType::kNack && Retryable(m->reason)) {
        if (m->reason != NackReason::kStorage) {
          spdlog::warn("uploader: batch {} deferred: {}", m->batch_id, m->detail);
          ++stats_.batches_deferred;
        }
        it->second.sent_at = Clock::time_point{};
        it->second.retry_at = Clock::now() + std::chrono::milliseconds(backoff_ms);
      } else if (m->type == MessageType::kNack) {
        // The server will never take this batch (our own records failed its checks): keeping
        // it would stall the spool forever, so it is logged, counted and skipped.
        spdlog::error("uploader: batch {} rejected: {}", m->batch_id, m->detail);
        ++stats_.batches_rejected;
        inflight.erase(it);
      }
    }

    if (dealer && !hello_ok) {
      if (hello_sent == Clock::time_point{}) {
        if (TrySend(dealer.get(), hello_bytes)) hello_sent = Clock::now();
      } else if (Clock::now() - hello_sent > timeout) {
        drop_socket("no answer to HELLO");
      }
    }

    if (dealer && hello_ok && gate) {
      bool lost = false;
      for (const auto& [id, b] : inflight) {
        lost |= b.sent_at != Clock::time_point{} && Clock::now() - b.sent_at > timeout;
      }
      if (lost) {
        drop_socket("a batch timed out");
        continue;
      }
      for (auto& [id, b] : inflight) {
        if (b.sent_at != Clock::time_point{} || Clock::now() < b.retry_at) continue;
        if (!TrySend(dealer.get(), b.message)) break;
        b.sent_at = Clock::now();
        ++stats_.batches_resent;
        stats_.bytes_sent += b.message.size();
      }
      // Token bucket: at most one second of burst.
      const double rate = double(config_.bandwidth_bytes_per_s);
      const Clock::time_point t = Clock::now();
      if (rate > 0) {
        tokens =
            std::min(rate, tokens + rate * std::chrono::duration<double>(t - last_refill).count());
      }
      last_refill = t;
      while (inflight.size() < size_t(config_.window) && (rate <= 0 || tokens >= 0)) {
        auto recs =
            spool_->Read(next_read, size_t(config_.batch_records), size_t(config_.batch_bytes));
        if (!recs.ok()) {
          spdlog::error("uploader: spool read: {}", recs.status().ToString());
          break;
        }
        if (recs->empty()) break;
        Batch b;
        b.first_id = recs->front().id;
        b.end_id = recs->back().id + 1;
        b.records = uint32_t(recs->size());
        Message data;
        data.type = MessageType::kData;
        data.batch_id = next_batch_id;
        data.records = std::move(recs).value();
        b.message = transport::EncodeMessage(data);
        if (!TrySend(dealer.get(), b.message)) break;  // not connected: try again later
        b.sent_at = Clock::now();
        next_read = b.end_id;
        tokens -= double(b.message.size());
        ++stats_.batches_sent;
        stats_.bytes_sent += b.message.size();
        inflight.emplace(next_batch_id++, std::move(b));
      }
    }
    stats_.inflight = inflight.size();

    // The cursor: everything before the oldest unACKed batch (or everything read) is on the server.
    const uint64_t cursor = inflight.empty() ? next_read : inflight.begin()->second.first_id;
    if (cursor > acked_cursor) {
      const Status s = spool_->Ack(cursor);
      if (s.ok()) {
        acked_cursor = cursor;
      } else {
        spdlog::error("uploader: {}", s.ToString());
      }
    }
    // Records the budget dropped are skipped, not waited for.
    next_read = std::max(next_read, spool_->stats().acked_below);
  }
}

}  // namespace dv::agent
