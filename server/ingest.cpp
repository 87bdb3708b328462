#include "dejaview/server/ingest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <tuple>
#include <zmq.hpp>

#include "dejaview/base/file_util.h"
#include "dejaview/base/metrics_http.h"
#include "dejaview/codec/codec.h"
#include "dejaview/server/map_service.h"
#include "dejaview/server/server_metrics.h"
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
// client's 32-byte public key for CURVE). Reply: version, request id, status, text, User-Id,
// metadata. The User-Id is the Z85 key itself, not the vehicle: Ingest resolves it against the
// key ring current at each message, so a key revoked or rotated by a reload stops working on
// connections that are already open. Returns false when it refused the handshake.
bool AnswerZap(zmq::socket_t* zap, const KeyRing& keys) {
  std::vector<zmq::message_t> req;
  for (bool more = true; more;) {  // libzmq sends 7 frames; a few more are kept, never unbounded
    zmq::message_t part;
    if (!zap->recv(part, zmq::recv_flags::dontwait)) return true;
    more = part.more();
    if (req.size() < 8) req.push_back(std::move(part));
  }
  bool ok = false;
  std::string who = "?";
  if (req.size() >= 7 && req[5].to_string() == "CURVE" && req[6].size() == 32) {
    char z85[41];
    zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
    who = z85;
    ok = keys.VehicleOf(who) != nullptr;
  }
  if (!ok) spdlog::warn("server: CURVE key {} is not enrolled: refused", who);
  const std::string id = req.size() > 1 ? req[1].to_string() : "";
  const std::string parts[] = {
      "1.0", id, ok ? "200" : "400", ok ? "OK" : "key not enrolled", ok ? who : "", ""};
  for (size_t i = 0; i < 6; ++i) {
    zap->send(zmq::buffer(parts[i]), i < 5 ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  return ok;
}

// The key a message's connection authenticated with; empty without CURVE.
std::string UserId(zmq::message_t* msg) {
  const char* v = zmq_msg_gets(msg->handle(), "User-Id");
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

Message Ingest::Handle(const std::string& peer, const std::string& key, const uint8_t* data,
                       size_t size) {
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
  // Bound to the key, never to what the message says: the vehicle a key is enrolled as now.
  const std::string* vehicle = keys_ ? keys_->VehicleOf(key) : nullptr;
  if (keys_ && !vehicle) {
    ++stats_.batches_nacked;
    ++stats_.auth_revoked;
    peers_.erase(peer);
    spdlog::warn("ingest: a message with key {}, which is no longer enrolled: refused", key);
    return Nack(msg.batch_id, NackReason::kUnauthorized, "this key is no longer enrolled");
  }
  switch (msg.type) {
    case MessageType::kHello: {
      if (vehicle && msg.vehicle != *vehicle) {
        ++stats_.batches_nacked;
        ++stats_.auth_impersonation;
        peers_.erase(peer);
        spdlog::warn("ingest: HELLO claims vehicle {} on a connection enrolled as {}: refused",
                     msg.vehicle, *vehicle);
        return Nack(0, NackReason::kUnauthorized,
                    "HELLO claims vehicle '" + msg.vehicle + "', this key is enrolled as '" +
                        *vehicle + "'");
      }
      Peer& p = peers_[peer];
      p.vehicle = msg.vehicle;
      p.sensors = std::set<uint32_t>(msg.sensor_ids.begin(), msg.sensor_ids.end());
      spdlog::info("ingest: HELLO from vehicle {} ({} sensors)", msg.vehicle, p.sensors.size());
      Message ack;
      ack.type = MessageType::kAck;
      return ack;
    }
    case MessageType::kData:
      return HandleData(peer, std::move(msg), size);
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

bool Ingest::Admit(Vehicle* v, size_t bytes) {
  if (limits_.vehicle_bytes_per_s == 0) return true;
  const auto now = std::chrono::steady_clock::now();
  const double rate = double(limits_.vehicle_bytes_per_s);
  if (v->refilled == std::chrono::steady_clock::time_point{}) {
    v->tokens = rate;  // a vehicle starts with one second's burst
  } else {
    v->tokens += rate * std::chrono::duration<double>(now - v->refilled).count();
    v->tokens = std::min(v->tokens, rate);
  }
  v->refilled = now;
  if (v->tokens < 0) return false;
  v->tokens -= double(bytes);
  return true;
}

bool Ingest::MapKnown(const std::string& version) {
  if (maps_root_.empty() || version.empty() || known_maps_.count(version)) return true;
  std::error_code ec;
  if (!std::filesystem::is_directory(maps_root_ + "/" + version, ec)) return false;
  known_maps_.insert(version);
  return true;
}

Message Ingest::HandleData(const std::string& peer, Message msg, size_t size) {
  const auto it = peers_.find(peer);
  if (it == peers_.end()) {
    ++stats_.batches_nacked;
    return Nack(msg.batch_id, NackReason::kNoHello, "DATA before HELLO");
  }
  Vehicle& vehicle = vehicles_[it->second.vehicle];
  if (!Admit(&vehicle, size)) {
    ++stats_.batches_nacked;
    ++stats_.throttled;
    return Nack(msg.batch_id, NackReason::kThrottled,
                "vehicle '" + it->second.vehicle + "' is above " +
                    std::to_string(limits_.vehicle_bytes_per_s) + " bytes/s; retry later");
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
  for (const auto& rec : msg.records) {
    if (!MapKnown(rec.meta.map_version)) {
      ++stats_.batches_nacked;
      ++stats_.unknown_map;
      return Nack(msg.batch_id, NackReason::kUnknownMap,
                  "map version '" + rec.meta.map_version + "' is not in the server's maps root");
    }
  }
  std::set<std::tuple<std::string, uint32_t, uint64_t, uint64_t>> seen;
  std::vector<store::FrameRecord> rows;
  uint32_t dups = 0, rejected = 0;
  std::string rejected_why;
  auto storage_failure = [&](const Status& s) {
    ++stats_.batches_nacked;
    spdlog::error("ingest: batch {}: {}", msg.batch_id, s.ToString());
    return Nack(msg.batch_id, NackReason::kStorage, s.ToString());
  };
  std::vector<const transport::SpoolRecord*> todo;
  uint64_t todo_bytes = 0;
  for (const auto& rec : msg.records) {
    const auto k = std::make_tuple(rec.meta.vehicle, rec.meta.sensor_id, rec.meta.source_epoch,
                                   rec.meta.sequence);
    if (!seen.insert(k).second) {
      ++dups;
      continue;
    }
    auto has =
        index_->Has(rec.meta.vehicle, rec.meta.sensor_id, rec.meta.source_epoch, rec.meta.sequence);
    if (!has.ok()) return storage_failure(has.status());
    if (*has) {
      ++dups;
      continue;
    }
    // The container and its CRC: a payload the server could never reconstruct is refused
    // before anything says it is stored (the map-dependent sections are checked at decode).
    const auto header = codec::DecodeHeader(rec.payload.data(), rec.payload.size());
    if (!header.ok()) {
      if (rejected++ == 0) {
        rejected_why = rec.meta.vehicle + "/" + std::to_string(rec.meta.sensor_id) + "/" +
                       std::to_string(rec.meta.sequence) + ": " + header.status().message();
      }
      spdlog::warn("ingest: batch {}: record {}/{}/{} refused: {}", msg.batch_id, rec.meta.vehicle,
                   rec.meta.sensor_id, rec.meta.sequence, header.status().message());
      continue;
    }
    todo.push_back(&rec);
    todo_bytes += rec.payload.size();
  }
  // After deduplication, so that the resend of a batch stored before the quota ran out is
  // still ACKed (as duplicates) and leaves the agent's spool.
  if (limits_.vehicle_quota_bytes > 0 && !todo.empty()) {
    if (!vehicle.quota_loaded) {
      auto stored = index_->StoredBytes(it->second.vehicle);
      if (!stored.ok()) return storage_failure(stored.status());
      vehicle.stored_bytes = *stored;
      vehicle.quota_loaded = true;
    }
    if (vehicle.stored_bytes + todo_bytes > limits_.vehicle_quota_bytes) {
      ++stats_.batches_nacked;
      ++stats_.over_quota;
      return Nack(msg.batch_id, NackReason::kQuota,
                  "vehicle '" + it->second.vehicle + "' has " +
                      std::to_string(vehicle.stored_bytes) + " of its " +
                      std::to_string(limits_.vehicle_quota_bytes) + " bytes stored");
    }
  }
  for (const transport::SpoolRecord* rec : todo) {
    // Durable (fsync'd) before the index refers to it; its copy waits for the commit.
    const std::vector<uint8_t> body = transport::EncodeRecord(*rec);
    auto id = store_->Put(body.data(), body.size(), /*hold_copy=*/true);
    if (!id.ok()) return storage_failure(id.status());
    store::FrameRecord row;
    row.vehicle = rec->meta.vehicle;
    row.drive = rec->meta.drive;
    row.sensor_id = rec->meta.sensor_id;
    row.source_epoch = rec->meta.source_epoch;
    row.sequence = rec->meta.sequence;
    row.timestamp_ns = rec->meta.timestamp_ns;
    row.map_version = rec->meta.map_version;
    row.T_map_sensor = rec->meta.T_map_sensor;
    row.bytes = rec->payload.size();
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
      vehicle.stored_bytes += rows[i].bytes;
      continue;
    }
    ++dups;
    const Status st = store_->Discard(rows[i].object);
    if (!st.ok()) spdlog::warn("ingest: {}", st.ToString());
  }
  store_->ReleaseCopies(committed);
  stats_.records_stored += committed.size();
  stats_.records_duplicate += dups;
  stats_.records_rejected += rejected;
  ++stats_.batches_acked;
  Message ack;
  ack.type = MessageType::kAck;
  ack.batch_id = msg.batch_id;
  ack.stored = uint32_t(committed.size());
  ack.duplicates = dups;
  ack.rejected = rejected;
  ack.detail = rejected_why;
  return ack;
}

Status RunServer(const ServerOptions& options, const std::atomic<bool>* stop,
                 const std::function<void(const std::string&)>& on_listening) {
  DV_ASSIGN_OR_RETURN(Storage storage,
                      OpenStorage(options.store_dir, options.store_config, options.index_path));
  Ingest ingest(storage.store.get(), storage.index.get(), options.limits);
  ingest.SetMapsRoot(options.maps_root);
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
  std::unique_ptr<KeyRing> keys;
  // Keeps the ring of the last good load when a reload fails: a typo in the keys directory
  // must not lock the fleet out.
  auto load_keys = [&]() -> Status {
    std::vector<std::string> problems;
    auto ring = KeyRing::Load(options.keys_dir, &problems, keys.get());
    for (const std::string& p : problems) spdlog::warn("server: keys: {} (skipped)", p);
    ingest.mutable_stats()->key_files_rejected += problems.size();
    if (!ring.ok()) return ring.status();
    keys = std::make_unique<KeyRing>(std::move(ring).value());
    ingest.SetKeys(keys.get());
    spdlog::info("server: {} vehicles enrolled from {}", keys->size(), options.keys_dir);
    return Status::Ok();
  };
  const bool curve = !options.curve_key_file.empty();
  if (curve) {
    if (options.keys_dir.empty()) {
      return Status::InvalidArgument("server: CURVE needs a keys directory (--keys-dir)");
    }
    DV_ASSIGN_OR_RETURN(const transport::CurveKeys server_keys,
                        transport::LoadCurveKeyFile(options.curve_key_file));
    DV_RETURN_IF_ERROR(load_keys());
    try {
      zap.bind("inproc://zeromq.zap.01");
      router.set(zmq::sockopt::curve_server, 1);
      router.set(zmq::sockopt::curve_secretkey, server_keys.secret_z85);
      router.set(zmq::sockopt::zap_domain, "dejaview");
    } catch (const zmq::error_t& e) {
      return Status::Unavailable(std::string("server: CURVE setup: ") + e.what());
    }
    spdlog::info("server: CURVE on, public key {}", server_keys.public_z85);
  } else if (!options.keys_dir.empty()) {
    return Status::InvalidArgument("server: --keys-dir needs --curve-key (the server's secret)");
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
  metrics::Registry registry;
  metrics::RegisterBuildInfo(&registry, "dejaview-server");
  ServerMetrics published(&registry);
  published.Update(ingest.stats(), storage.store->Metrics(), map_service.stats());
  std::unique_ptr<metrics::MetricsHttp> http;
  if (!options.metrics_listen.empty()) {
    DV_ASSIGN_OR_RETURN(http, metrics::MetricsHttp::Start(options.metrics_listen, [&] {
                          return metrics::RenderExposition(&registry);
                        }));
    spdlog::info("server: metrics on http://{}/metrics (port {})", options.metrics_listen,
                 http->port());
    if (!options.metrics_port_file.empty()) {
      DV_RETURN_IF_ERROR(
          WriteFileAtomic(options.metrics_port_file, std::to_string(http->port()) + "\n"));
    }
  }
  auto last_published = std::chrono::steady_clock::now();
  on_listening(endpoint);
  uint64_t last_logged = 0;
  while (!stop->load()) {
    if (std::chrono::steady_clock::now() - last_published > std::chrono::milliseconds(500)) {
      last_published = std::chrono::steady_clock::now();
      published.Update(ingest.stats(), storage.store->Metrics(), map_service.stats());
    }
    zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0},
                               {zap.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, curve ? 2 : 1, std::chrono::milliseconds(100));
      // After the poll, before any message: a reload asked for before a message was sent is in
      // force when that message is answered.
      if (curve && options.reload && options.reload->exchange(false)) {
        ++ingest.mutable_stats()->key_reloads;
        const Status r = load_keys();
        if (!r.ok())
          spdlog::error("server: keys reload failed, keeping the old ones: {}", r.ToString());
      }
      if (curve && (items[1].revents & ZMQ_POLLIN) && !AnswerZap(&zap, *keys)) {
        ++ingest.mutable_stats()->auth_refused;
      }
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
              ? map_service.Handle(UserId(&body), keys.get(), bytes, body.size())
              : transport::EncodeMessage(ingest.Handle(peer, UserId(&body), bytes, body.size()));
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
  const IngestStats& st = ingest.stats();
  published.Update(st, storage.store->Metrics(), map_service.stats());
  spdlog::info(
      "server: stopping; {} stored, {} duplicates; refused: {} keys, {} impersonations, {} "
      "revoked, {} throttled, {} over quota",
      st.records_stored, st.records_duplicate, st.auth_refused, st.auth_impersonation,
      st.auth_revoked, st.throttled, st.over_quota);
  if (options.stats_out) *options.stats_out = st;
  return Status::Ok();
}

}  // namespace dv::server
