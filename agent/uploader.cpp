#include "dejaview/agent/uploader.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
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
         r == NackReason::kThrottled || r == NackReason::kQuota || r == NackReason::kUnknownMap;
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

// Why the uploader is not uploading, logged once each time it changes (never once per retry).
class UploadState {
 public:
  void Set(const std::string& state, bool error) {
    if (state == state_) return;
    state_ = state;
    if (error) {
      spdlog::warn("uploader: {}", state);
    } else {
      spdlog::info("uploader: {}", state);
    }
  }

 private:
  std::string state_;
};

// Handshake and disconnection events of the current DEALER (zmq_socket_monitor), so that a
// refused CURVE handshake and a lost server are known at once, not by silence.
class Monitor {
 public:
  Monitor(zmq::context_t* ctx, zmq::socket_t* dealer, uint64_t serial)
      : pair_(*ctx, zmq::socket_type::pair) {
    const std::string ep = "inproc://dejaview-upload-monitor-" + std::to_string(serial);
    if (zmq_socket_monitor(dealer->handle(), ep.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_DISCONNECTED) == 0) {
      pair_.set(zmq::sockopt::linger, 0);
      pair_.connect(ep);
      ok_ = true;
    }
  }
  void* handle() { return ok_ ? pair_.handle() : nullptr; }
  // The next event (0 when none is waiting); *value is the event's value (a ZMTP status code
  // for a failed handshake).
  uint16_t Next(uint32_t* value) {
    if (!ok_) return 0;
    zmq::message_t event, address;
    if (!pair_.recv(event, zmq::recv_flags::dontwait)) return 0;
    if (event.more()) (void)pair_.recv(address, zmq::recv_flags::none);
    if (event.size() < 6) return 0;
    uint16_t id = 0;
    std::memcpy(&id, event.data(), 2);
    std::memcpy(value, static_cast<const uint8_t*>(event.data()) + 2, 4);
    return id;
  }

 private:
  zmq::socket_t pair_;
  bool ok_ = false;
};

void Uploader::Run(const std::atomic<bool>* stop) {
  zmq::context_t ctx(1);
  std::unique_ptr<zmq::socket_t> dealer;
  std::unique_ptr<Monitor> monitor;
  uint64_t sockets_made = 0;
  std::unique_ptr<zmq::socket_t> link;
  bool link_up = false;
  UploadState state;
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
  Clock::time_point connected_at{}, hello_sent{}, reconnect_at = Clock::now();
  // Liveness: a PING goes out after timeout_ms without any answer from the server, and the
  // socket is replaced when that PING is not answered within timeout_ms either.
  Clock::time_point last_answer{}, ping_sent{};
  uint64_t ping_nonce = 0;
  int backoff_ms = config_.backoff_min_ms;
  // Refusals (rate, quota, revoked key, storage): every send waits until refused_until, and the
  // wait doubles with each refusal up to backoff_max_ms; an ACK of data resets it.
  int refusal_backoff_ms = config_.backoff_min_ms;
  Clock::time_point refused_until{};
  double tokens = 0;
  Clock::time_point last_refill = Clock::now();
  const auto timeout = std::chrono::milliseconds(config_.timeout_ms);
  const Clock::time_point never{};

  auto drop_socket = [&](const std::string& why) {
    state.Set(why + "; reconnecting with backoff", true);
    monitor.reset();
    dealer.reset();
    hello_ok = false;
    stats_.connected = false;
    reconnect_at = Clock::now() + std::chrono::milliseconds(backoff_ms);
    backoff_ms = std::min(backoff_ms * 2, config_.backoff_max_ms);
  };
  // The token bucket: every byte sent, first send or resend, is paid for; at most one second of
  // burst accumulates, whether or not a socket exists.
  auto refill = [&] {
    const double rate = double(config_.bandwidth_bytes_per_s);
    const Clock::time_point t = Clock::now();
    if (rate > 0) {
      tokens =
          std::min(rate, tokens + rate * std::chrono::duration<double>(t - last_refill).count());
    }
    last_refill = t;
  };
  auto may_send = [&] { return config_.bandwidth_bytes_per_s <= 0 || tokens >= 0; };
  auto send = [&](const std::vector<uint8_t>& bytes) {
    if (!TrySend(dealer.get(), bytes)) return false;
    if (config_.bandwidth_bytes_per_s > 0) tokens -= double(bytes.size());
    stats_.bytes_sent += bytes.size();
    return true;
  };

  while (!stop->load()) {
    const Clock::time_point now = Clock::now();
    bool gate = true;
    if (config_.gate == UploadConfig::Gate::kLink) gate = link_up;
    if (config_.gate == UploadConfig::Gate::kWindow) {
      gate = InUploadWindow(config_.window_start_min, config_.window_end_min, UtcMinuteOfDay());
    }
    stats_.gate_open = gate;
    refill();

    if (!dealer && gate && now >= reconnect_at) {
      auto connected = ConnectDealer(&ctx, config_.endpoint, config_, keys_);
      if (!connected.ok()) {
        state.Set(connected.status().message(), true);
        reconnect_at = now + std::chrono::milliseconds(config_.backoff_max_ms);
        continue;
      }
      dealer = std::move(connected).value();
      monitor = std::make_unique<Monitor>(&ctx, dealer.get(), ++sockets_made);
      ++stats_.reconnects;
      connected_at = now;
      hello_sent = never;  // HELLO as soon as the connection is up
      ping_sent = never;
    }

    std::vector<zmq::pollitem_t> items;
    if (dealer) items.push_back({dealer->handle(), 0, ZMQ_POLLIN, 0});
    if (monitor && monitor->handle()) items.push_back({monitor->handle(), 0, ZMQ_POLLIN, 0});
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
      zmq::message_t topic, part;
      if (!link->recv(topic, zmq::recv_flags::dontwait)) break;
      const bool two = topic.more() && link->recv(part, zmq::recv_flags::none);
      if (two && !part.more()) {
        const bool up = part.to_string() == "up";
        if (up != link_up) spdlog::info("uploader: link {}", up ? "up" : "down");
        link_up = up;
      }
      while (part.more()) (void)link->recv(part, zmq::recv_flags::none);
    }

    bool lost = false;
    for (uint32_t value = 0; monitor && !lost;) {
      const uint16_t event = monitor->Next(&value);
      if (event == 0) break;
      if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        ++stats_.auth_refused;
        drop_socket("the server refused this agent's CURVE key (ZAP status " +
                    std::to_string(value) + "): is it enrolled?");
        lost = true;
      } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
        drop_socket("handshake with the server failed (protocol error " + std::to_string(value) +
                    ")");
        lost = true;
      } else if (event == ZMQ_EVENT_DISCONNECTED) {
        drop_socket("disconnected from the server");
        lost = true;
      }
    }
    if (lost) continue;

    while (dealer) {
      zmq::message_t reply;
      if (!dealer->recv(reply, zmq::recv_flags::dontwait)) break;
      last_answer = Clock::now();
      ping_sent = never;
      auto m = transport::DecodeMessage(static_cast<const uint8_t*>(reply.data()), reply.size());
      if (!m.ok()) {
        spdlog::warn("uploader: unreadable reply: {}", m.status().message());
        continue;
      }
      if (m->type == MessageType::kPong) continue;
      if (m->type == MessageType::kAck && m->batch_id == 0) {
        hello_ok = true;
        stats_.connected = true;
        backoff_ms = config_.backoff_min_ms;
        state.Set("connected to " + config_.endpoint, false);
        for (auto& [id, b] : inflight) b.sent_at = never;  // resend all
        continue;
      }
      if (m->type == MessageType::kNack && m->batch_id == 0 &&
          m->reason == NackReason::kUnauthorized) {
        // The server does not take this key for this vehicle (not enrolled as it, or revoked):
        // nothing is dropped; the socket is replaced after the backoff and HELLO tried again,
        // until an operator enrols the key.
        ++stats_.auth_refused;
        drop_socket("HELLO refused: " + m->detail);
        break;
      }
      if (m->type == MessageType::kNack && m->reason == NackReason::kNoHello) {
        hello_ok = false;  // the server restarted behind the same connection
        stats_.connected = false;
        hello_sent = never;
        continue;
      }
      const auto it = inflight.find(m->batch_id);
      if (it == inflight.end()) continue;  // a late answer to a batch already resolved
      if (m->type == MessageType::kAck) {
        ++stats_.batches_acked;
        stats_.records_acked += m->stored + m->duplicates;
        stats_.records_duplicate += m->duplicates;
        if (m->rejected > 0) {
          // Not a delta frame the server can read: kept nowhere, so said loudly, every time.
          spdlog::error("uploader: the server refused {} records of spool ids {}-{}: {}",
                        m->rejected, it->second.first_id, it->second.end_id - 1, m->detail);
          stats_.records_rejected += m->rejected;
        }
        inflight.erase(it);
        refusal_backoff_ms = config_.backoff_min_ms;
        state.Set("connected to " + config_.endpoint + ", uploading", false);
      } else if (m->type == MessageType::kNack && Retryable(m->reason)) {
        ++stats_.batches_deferred;
        const Clock::time_point t = Clock::now();
        // The NACKs of one round of sends arrive together: the wait grows once per round.
        if (t >= refused_until) {
          refused_until = t + std::chrono::milliseconds(refusal_backoff_ms);
          refusal_backoff_ms = std::min(refusal_backoff_ms * 2, config_.backoff_max_ms);
        }
        state.Set(std::string("the server defers uploads (") +
                      transport::NackReasonName(m->reason) + "): " + m->detail +
                      "; retrying with backoff",
                  true);
        it->second.sent_at = never;
        it->second.retry_at = refused_until;
      } else if (m->type == MessageType::kNack) {
        // The server will never take this batch (its records failed the server's checks):
        // keeping it would stall the spool forever, so it is logged, counted and skipped.
        spdlog::error("uploader: batch {} (spool ids {}-{}) rejected: {}", m->batch_id,
                      it->second.first_id, it->second.end_id - 1, m->detail);
        ++stats_.batches_rejected;
        stats_.records_rejected += it->second.records;
        inflight.erase(it);
      }
    }

    if (dealer && !hello_ok) {
      if (hello_sent == never) {
        if (send(hello_bytes)) {
          hello_sent = Clock::now();
        } else if (Clock::now() - connected_at > timeout) {
          // With ZMQ_IMMEDIATE nothing can be sent before a connection has completed its
          // handshake: no server, or one that refuses this key.
          drop_socket("no connection to " + config_.endpoint + " within " +
                      std::to_string(config_.timeout_ms) + " ms");
          continue;
        }
      } else if (Clock::now() - hello_sent > timeout) {
        drop_socket("no answer to HELLO");
        continue;
      }
    }

    if (dealer && hello_ok) {
      const Clock::time_point t = Clock::now();
      bool timed_out = false;
      for (const auto& [id, b] : inflight) {
        timed_out |= b.sent_at != never && t - b.sent_at > timeout;
      }
      if (timed_out || (ping_sent != never && t - ping_sent > timeout)) {
        drop_socket(timed_out ? "a batch timed out" : "the server does not answer PING");
        continue;
      }
      if (ping_sent == never && t - last_answer > timeout) {
        Message ping;
        ping.type = MessageType::kPing;
        ping.nonce = ++ping_nonce;
        if (send(transport::EncodeMessage(ping))) ping_sent = t;
      }
    }

    if (dealer && hello_ok && gate && Clock::now() >= refused_until) {
      for (auto& [id, b] : inflight) {
        if (b.sent_at != never || Clock::now() < b.retry_at) continue;
        if (!may_send() || !send(b.message)) break;
        b.sent_at = Clock::now();
        ++stats_.batches_resent;
      }
      while (inflight.size() < size_t(config_.window) && may_send()) {
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
        if (!send(b.message)) break;  // not connected: try again later
        b.sent_at = Clock::now();
        next_read = b.end_id;
        ++stats_.batches_sent;
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
