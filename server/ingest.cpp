#include "dejaview/server/ingest.h"

#include <spdlog/spdlog.h>

#include <tuple>
#include <zmq.hpp>

#include "dejaview/server/map_service.h"
#include "dejaview/server/storage.h"

namespace dv::server {

using transport::Message;
using transport::MessageType;
using transport::NackReason;

namespace {

Message Nack(uint64_t batch, NackReason reason, const std::string& detail) {
  Message m;
  m.type = MessageType::kNack;
  m.batch_id = batch;
  m.reason = reason;
  m.detail = detail;
  return m;
}

// Frames: version, request id, domain, address, identity, mechanism, credentials (the
// client's 32-byte public key for CURVE). Reply: version, request id, status, text, user, meta.
void AnswerZap(zmq::socket_t* zap, const std::set<std::string>& allowed) {
  std::vector<zmq::message_t> req;
  do {
    req.emplace_back();
    if (!zap->recv(req.back(), zmq::recv_flags::dontwait)) return;
  } while (req.back().more());
  bool ok = false;
  std::string who = "?";
  if (req.size() >= 7 && req[5].to_string() == "CURVE" && req[6].size() == 32) {
    char z85[41];
    zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
    who = z85;
    ok = allowed.empty() || allowed.count(who);
  }
  if (!ok) spdlog::warn("server: CURVE key {} refused", who);
  const std::string id = req.size() > 1 ? req[1].to_string() : "";
  const std::string parts[] = {"1.0",         id, ok ? "200" : "400", ok ? "OK" : "unknown key",
                               ok ? who : "", ""};
  for (size_t i = 0; i < 6; ++i) {
    zap->send(zmq::buffer(parts[i]), i < 5 ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

}  // namespace

Message Ingest::Handle(const std::string& peer, const uint8_t* data, size_t size) {
  stats_.bytes_received += size;
  auto parsed = transport::DecodeMessage(data, size);
  if (!parsed.ok()) {
    ++stats_.batches_nacked;
    const bool version = parsed.status().code() == Status::Code::kInvalidArgument;
    spdlog::warn("ingest: peer message rejected: {}", parsed.status().message());
    return Nack(0, version ? NackReason::kVersion : NackReason::kBadMessage,
                parsed.status().message());
  }
  Message msg = std::move(parsed).value();
  switch (msg.type) {
    case MessageType::kHello: {
      Peer& p = peers_[peer];
      p.vehicle = msg.vehicle;
      p.sensors = std::set<uint32_t>(msg.sensor_ids.begin(), msg.sensor_ids.end());
      spdlog::info("ingest: HELLO from vehicle {} ({} sensors)", msg.vehicle, p.sensors.size());
      Message ack;
      ack.type = MessageType::kAck;
      return ack;
    }
    case MessageType::kData:
      return HandleData(peer, std::move(msg));
    case MessageType::kPing: {
      Message pong;
      pong.type = MessageType::kPong;
      pong.nonce = msg.nonce;
      return pong;
    }
    case MessageType::kAck:
    case MessageType::kNack:
    case MessageType::kPong:
      break;
  }
  ++stats_.batches_nacked;
  return Nack(msg.batch_id, NackReason::kBadMessage,
              std::string(transport::MessageTypeName(msg.type)) + " is not sent to a server");
}

Message Ingest::HandleData(const std::string& peer, Message msg) {
  const auto it = peers_.find(peer);
  if (it == peers_.end()) {
    ++stats_.batches_nacked;
    return Nack(msg.batch_id, NackReason::kNoHello, "DATA before HELLO");
  }
  for (const auto& rec : msg.records) {
    if (rec.meta.vehicle != it->second.vehicle || !it->second.sensors.count(rec.meta.sensor_id)) {
      ++stats_.batches_nacked;
      return Nack(msg.batch_id, NackReason::kInvalidRecord,
                  "record " + rec.meta.vehicle + "/" + std::to_string(rec.meta.sensor_id) + "/" +
                      std::to_string(rec.meta.sequence) +
                      " is not from the HELLO's vehicle/sensors");
    }
  }
  std::set<std::tuple<std::string, uint32_t, uint64_t>> seen;
  std::vector<store::FrameRecord> rows;
  uint32_t dups = 0;
  auto storage_failure = [&](const Status& s) {
    ++stats_.batches_nacked;
    spdlog::error("ingest: batch {}: {}", msg.batch_id, s.ToString());
    return Nack(msg.batch_id, NackReason::kStorage, s.ToString());
  };
  for (const auto& rec : msg.records) {
    const auto key = std::make_tuple(rec.meta.vehicle, rec.meta.sensor_id, rec.meta.sequence);
    if (!seen.insert(key).second) {
      ++dups;
      continue;
    }
    auto has = index_->Has(rec.meta.vehicle, rec.meta.sensor_id, rec.meta.sequence);
    if (!has.ok()) return storage_failure(has.status());
    if (*has) {
      ++dups;
      continue;
    }
    // Durable (fsync'd) before the index refers to it; its copy waits for the commit.
    const std::vector<uint8_t> body = transport::EncodeRecord(rec);
    auto id = store_->Put(body.data(), body.size(), /*hold_copy=*/true);
    if (!id.ok()) return storage_failure(id.status());
    store::FrameRecord row;
    row.vehicle = rec.meta.vehicle;
    row.drive = rec.meta.drive;
    row.sensor_id = rec.meta.sensor_id;
    row.sequence = rec.meta.sequence;
    row.timestamp_ns = rec.meta.timestamp_ns;
    row.map_version = rec.meta.map_version;
    row.T_map_sensor = rec.meta.T_map_sensor;
    row.bytes = rec.payload.size();
    row.object = *id;
    rows.push_back(std::move(row));
  }
  auto fresh = index_->Insert(rows);
  if (!fresh.ok()) return storage_failure(fresh.status());
  // A frame another server indexed between our look-up and our commit is its to copy.
  std::vector<store::ObjectId> committed;
  for (size_t i = 0; i < rows.size(); ++i) {
    if ((*fresh)[i]) {
      committed.push_back(rows[i].object);
      continue;
    }
    ++dups;
    const Status st = store_->Discard(rows[i].object);
    if (!st.ok()) spdlog::warn("ingest: {}", st.ToString());
  }
  store_->ReleaseCopies(committed);
  stats_.records_stored += committed.size();
  stats_.records_duplicate += dups;
  ++stats_.batches_acked;
  Message ack;
  ack.type = MessageType::kAck;
  ack.batch_id = msg.batch_id;
  ack.stored = uint32_t(committed.size());
  ack.duplicates = dups;
  return ack;
}

Status RunServer(const ServerOptions& options, const std::atomic<bool>* stop,
                 const std::function<void(const std::string&)>& on_listening) {
  DV_ASSIGN_OR_RETURN(Storage storage,
                      OpenStorage(options.store_dir, options.store_config, options.index_path));
  Ingest ingest(storage.store.get(), storage.index.get());
  MapService map_service(options.maps_root);
  if (!options.maps_root.empty()) spdlog::info("server: serving maps from {}", options.maps_root);
  {
    const store::StoreMetrics m = storage.store->Metrics();
    spdlog::info("server: store open, {} objects on disk, {} copies to resume",
                 storage.store->disk()->objects(), m.copy_pending_objects);
  }
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  // The ZAP handler (RFC 27) runs in this loop: libzmq asks it about every CURVE handshake.
  zmq::socket_t zap(ctx, zmq::socket_type::rep);
  std::set<std::string> allowed;
  bool curve = false;
  if (!options.curve_key_file.empty()) {
    DV_ASSIGN_OR_RETURN(const transport::CurveKeys keys,
                        transport::LoadCurveKeyFile(options.curve_key_file));
    if (!options.curve_allow_file.empty()) {
      DV_ASSIGN_OR_RETURN(const auto list, transport::LoadCurveAllowList(options.curve_allow_file));
      allowed.insert(list.begin(), list.end());
    } else {
      spdlog::warn("server: CURVE without an allow list: any agent key is accepted");
    }
    curve = true;
    try {
      zap.bind("inproc://zeromq.zap.01");
      router.set(zmq::sockopt::curve_server, 1);
      router.set(zmq::sockopt::curve_secretkey, keys.secret_z85);
      router.set(zmq::sockopt::zap_domain, "dejaview");
    } catch (const zmq::error_t& e) {
      return Status::Unavailable(std::string("server: CURVE setup: ") + e.what());
    }
    spdlog::info("server: CURVE on, public key {}, {} allowed agents", keys.public_z85,
                 allowed.size());
  }
  std::string endpoint;
  // cppzmq reports socket errors as exceptions; they stop here and become a Status.
  try {
    router.set(zmq::sockopt::maxmsgsize, int64_t(transport::kMaxMessageBytes));
    router.set(zmq::sockopt::linger, 0);
    router.bind(options.listen);
    endpoint = router.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("server: bind " + options.listen + ": " + e.what());
  }
  on_listening(endpoint);
  uint64_t last_logged = 0;
  while (!stop->load()) {
    zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0},
                               {zap.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, curve ? 2 : 1, std::chrono::milliseconds(100));
      if (curve && (items[1].revents & ZMQ_POLLIN)) AnswerZap(&zap, allowed);
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      zmq::message_t id, body;
      if (!router.recv(id, zmq::recv_flags::dontwait)) continue;
      // A peer sends exactly one frame per message; anything else is drained and ignored.
      if (!id.more() || !router.recv(body, zmq::recv_flags::none)) continue;
      bool extra = false;
      while (body.more()) {
        zmq::message_t junk;
        (void)router.recv(junk, zmq::recv_flags::none);
        extra = true;
      }
      const std::string peer(static_cast<const char*>(id.data()), id.size());
      const auto* bytes = static_cast<const uint8_t*>(body.data());
      // Map-sync requests share the socket (and its CURVE/ZAP): their first byte tells them
      // apart from upload messages (docs/map-sync.md).
      const std::vector<uint8_t> out =
          extra ? transport::EncodeMessage(Nack(0, NackReason::kBadMessage, "more than one frame"))
          : body.size() > 0 && bytes[0] == transport::kMapSyncMagic
              ? map_service.Handle(bytes, body.size())
              : transport::EncodeMessage(ingest.Handle(peer, bytes, body.size()));
      router.send(zmq::buffer(id.data(), id.size()), zmq::send_flags::sndmore);
      router.send(zmq::buffer(out), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::IoError(std::string("server: socket: ") + e.what());
    }
    if (ingest.stats().records_stored / 100 != last_logged) {
      last_logged = ingest.stats().records_stored / 100;
      spdlog::info("server: {} stored, {} duplicates, {} batches acked",
                   ingest.stats().records_stored, ingest.stats().records_duplicate,
                   ingest.stats().batches_acked);
    }
  }
  spdlog::info("server: stopping; {} stored, {} duplicates", ingest.stats().records_stored,
               ingest.stats().records_duplicate);
  return Status::Ok();
}

}  // namespace dv::server
