#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "dejaview/base/crc32c.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/base/testing/process_util.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/map_root.h"
#include "dejaview/maps/route_map.h"
#include "dejaview/server/export.h"
#include "dejaview/server/ingest.h"
#include "dejaview/server/storage.h"
#include "dejaview/server/testing/running_server.h"
#include "testutil.h"

namespace dv::server {
namespace {

using transport::Message;
using transport::MessageType;
using transport::NackReason;

// A real delta frame (intra-coded, so no map is needed) of `points` points: the server refuses
// payloads that are not one. Its size grows with points.
std::vector<uint8_t> IntraPayload(size_t points, uint64_t seed) {
  PointCloud c;
  for (size_t p = 0; p < points; ++p) {
    const uint32_t h = uint32_t(p * 2654435761u) ^ uint32_t(seed * 40503u);
    c.push_back(Eigen::Vector3f(float(h % 4001) * 0.01f, float((h >> 12) % 3001) * 0.01f,
                                float(h % 7) * 0.1f),
                0.5f);
  }
  auto delta = codec::Encoder(nullptr).Encode(c, Pose::Identity(), {}, {});
  EXPECT_TRUE(delta.ok()) << delta.status().ToString();
  return delta.ok() ? std::move(delta).value() : std::vector<uint8_t>{};
}

transport::SpoolRecord Rec(uint32_t sensor, uint64_t seq) {
  transport::SpoolRecord r;
  r.id = seq;
  r.meta.vehicle = "veh-1";
  r.meta.drive = "d1";
  r.meta.sensor_id = sensor;
  r.meta.sequence = seq;
  r.meta.timestamp_ns = int64_t(seq) * 100'000'000;
  r.meta.map_version = "m1";
  r.meta.T_map_sensor.translation() = Eigen::Vector3d(double(seq), 0, 0);
  r.payload = IntraPayload(10 + seq, seq);
  return r;
}

Message Hello() {
  Message m;
  m.type = MessageType::kHello;
  m.vehicle = "veh-1";
  m.sensor_ids = {0, 1};
  return m;
}

Message Data(uint64_t batch, std::vector<transport::SpoolRecord> recs) {
  Message m;
  m.type = MessageType::kData;
  m.batch_id = batch;
  m.records = std::move(recs);
  return m;
}

Message Exchange(zmq::socket_t* dealer, const Message& m) {
  const auto bytes = transport::EncodeMessage(m);
  dealer->send(zmq::buffer(bytes), zmq::send_flags::none);
  zmq::message_t reply;
  EXPECT_TRUE(dealer->recv(reply, zmq::recv_flags::none));
  auto d = transport::DecodeMessage(static_cast<const uint8_t*>(reply.data()), reply.size());
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Message{};
}

// A DEALER connected to the server at `endpoint`, in the clear.
zmq::socket_t ConnectedDealer(zmq::context_t& ctx, const std::string& endpoint) {
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  return dealer;
}

TEST(Server, AcksAfterStoringAndDeduplicatesOverRealSockets) {
  const std::string dir = test::ScratchDir();
  zmq::context_t ctx(1);
  {
    RunningServer server(dir);
    ASSERT_FALSE(server.endpoint().empty());
    zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());

    Message r = Exchange(&dealer, Data(1, {Rec(0, 1)}));
    EXPECT_EQ(r.type, MessageType::kNack);
    EXPECT_EQ(r.reason, NackReason::kNoHello);

    r = Exchange(&dealer, Hello());
    EXPECT_EQ(r.type, MessageType::kAck);
    EXPECT_EQ(r.batch_id, 0u);

    r = Exchange(&dealer, Data(1, {Rec(0, 1), Rec(0, 2), Rec(1, 1), Rec(0, 2)}));
    ASSERT_EQ(r.type, MessageType::kAck);
    EXPECT_EQ(r.batch_id, 1u);
    EXPECT_EQ(r.stored, 3u);
    EXPECT_EQ(r.duplicates, 1u);  // (0, 2) twice in one batch

    r = Exchange(&dealer, Data(2, {Rec(0, 2), Rec(0, 3)}));  // a resend overlapping the last
    EXPECT_EQ(r.stored, 1u);
    EXPECT_EQ(r.duplicates, 1u);

    r = Exchange(&dealer, Data(3, {Rec(7, 1)}));
    EXPECT_EQ(r.type, MessageType::kNack);
    EXPECT_EQ(r.reason, NackReason::kInvalidRecord);

    const std::vector<uint8_t> junk = {1, 2, 0xff};
    dealer.send(zmq::buffer(junk), zmq::send_flags::none);
    zmq::message_t reply;
    ASSERT_TRUE(dealer.recv(reply, zmq::recv_flags::none));
    auto nack = transport::DecodeMessage(static_cast<const uint8_t*>(reply.data()), reply.size());
    ASSERT_TRUE(nack.ok());
    EXPECT_EQ(nack->reason, NackReason::kBadMessage);

    Message ping;
    ping.type = MessageType::kPing;
    ping.nonce = 99;
    r = Exchange(&dealer, ping);
    EXPECT_EQ(r.type, MessageType::kPong);
    EXPECT_EQ(r.nonce, 99u);
  }
  // After a restart the stored frames are there, byte for byte, and still deduplicate.
  auto storage = OpenStorage(dir, "", "");
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  auto rows = storage->index->Query({});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ(storage->store->disk()->objects(), 4u);
  for (const store::FrameRecord& row : *rows) {
    auto object = storage->store->Get(row.object);
    ASSERT_TRUE(object.ok()) << object.status().ToString();
    EXPECT_EQ(*object, transport::EncodeRecord(Rec(row.sensor_id, row.sequence)));
    EXPECT_EQ(row.bytes, Rec(row.sensor_id, row.sequence).payload.size());
    EXPECT_EQ(row.drive, "d1");
  }
  storage->store.reset();
  storage->index.reset();
  RunningServer server(dir);
  zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());
  Exchange(&dealer, Hello());
  const Message r = Exchange(&dealer, Data(1, {Rec(0, 1), Rec(0, 4)}));
  EXPECT_EQ(r.stored, 1u);
  EXPECT_EQ(r.duplicates, 1u);
}

// Before an ACK says "stored" the server checks each record: a payload that is not a delta
// frame is refused (counted, named in the ACK) while the rest of its batch is stored; a map
// version the server does not have defers the batch; a restarted source (a new epoch) is new
// data, never a resend.
TEST(Server, ChecksRecordsBeforeAckingAndTellsARestartedSourceFromAResend) {
  const std::string dir = test::ScratchDir();
  ASSERT_TRUE(MakeDirs(dir + "/maps/m1").ok());
  ServerOptions o;
  IngestStats stats;
  o.stats_out = &stats;
  o.maps_root = dir + "/maps";
  zmq::context_t ctx(1);
  {
    RunningServer server(dir, o);
    zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());
    ASSERT_EQ(Exchange(&dealer, Hello()).type, MessageType::kAck);
    transport::SpoolRecord junk = Rec(0, 2);
    std::mt19937 rng(7);
    for (uint8_t& b : junk.payload) b = uint8_t(rng());
    Message r = Exchange(&dealer, Data(1, {Rec(0, 1), junk, Rec(0, 3)}));
    ASSERT_EQ(r.type, MessageType::kAck);
    EXPECT_EQ(r.stored, 2u);
    EXPECT_EQ(r.duplicates, 0u);
    EXPECT_EQ(r.rejected, 1u);
    EXPECT_EQ(r.detail.rfind("veh-1/0/2: ", 0), 0u) << r.detail;

    // The driver restarted: sequence 1 again, in the agent's new epoch.
    transport::SpoolRecord restarted = Rec(0, 1);
    restarted.meta.source_epoch = 1'700'000'000'000'000'000;
    r = Exchange(&dealer, Data(2, {restarted}));
    EXPECT_EQ(r.stored, 1u);
    r = Exchange(&dealer, Data(3, {restarted}));  // its resend
    EXPECT_EQ(r.stored, 0u);
    EXPECT_EQ(r.duplicates, 1u);

    transport::SpoolRecord newer_map = Rec(0, 9);
    newer_map.meta.map_version = "m2";
    r = Exchange(&dealer, Data(4, {newer_map}));
    EXPECT_EQ(r.type, MessageType::kNack);
    EXPECT_EQ(r.reason, NackReason::kUnknownMap);
    EXPECT_EQ(r.detail, "map version 'm2' is not in the server's maps root");
    ASSERT_TRUE(MakeDirs(dir + "/maps/m2").ok());
    r = Exchange(&dealer, Data(4, {newer_map}));
    EXPECT_EQ(r.type, MessageType::kAck);
    EXPECT_EQ(r.stored, 1u);
  }
  EXPECT_EQ(stats.records_stored, 4u);
  EXPECT_EQ(stats.records_rejected, 1u);
  EXPECT_EQ(stats.unknown_map, 1u);
  auto storage = OpenStorage(dir, "", "");
  ASSERT_TRUE(storage.ok());
  auto rows = storage->index->Query({});
  ASSERT_TRUE(rows.ok());
  std::multiset<std::pair<uint64_t, uint64_t>> keys;  // (epoch, sequence)
  for (const auto& row : *rows) keys.insert({row.source_epoch, row.sequence});
  EXPECT_EQ(keys, (std::multiset<std::pair<uint64_t, uint64_t>>{
                      {0, 1}, {0, 3}, {0, 9}, {1'700'000'000'000'000'000, 1}}));
}

TEST(Server, MetricsEndpointCountsIngestAndStoreTiers) {
  const std::string dir = test::ScratchDir();
  ServerOptions o;
  o.metrics_listen = "127.0.0.1:0";
  o.metrics_port_file = dir + "/metrics.port";
  RunningServer server(dir + "/store", o);
  zmq::context_t ctx(1);
  zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());
  Exchange(&dealer, Hello());
  EXPECT_EQ(Exchange(&dealer, Data(1, {Rec(0, 1), Rec(0, 2)})).stored, 2u);
  EXPECT_EQ(Exchange(&dealer, Data(2, {Rec(0, 2)})).duplicates, 1u);
  auto port = ReadFileText(dir + "/metrics.port", 64);
  ASSERT_TRUE(port.ok());
  std::map<std::string, double> m;
  // Published from the server loop every 500 ms, one series after another (a scrape can fall
  // between two of them): a bounded wait for the last one, not a timing assertion.
  EXPECT_TRUE(test::WaitUntil(
      [&] {
        m = test::ScrapeMetrics(std::atoi(port->c_str()));
        return m["dejaview_server_records_duplicate_total"] == 1 &&
               m["dejaview_store_tier_objects{tier=\"disk\"}"] == 2;
      },
      10));
  EXPECT_EQ(m["dejaview_server_records_stored_total"], 2);
  EXPECT_EQ(m["dejaview_server_batches_acked_total"], 2);
  EXPECT_EQ(m["dejaview_store_tier_objects{tier=\"disk\"}"], 2);
  EXPECT_EQ(m["dejaview_store_copy_pending_objects"], 0);  // no remote tier configured
}

// CURVE with a keys directory, over real TCP sockets: keys and the server's secret written the
// way `dejaview keygen` writes them, one VEHICLE.public file per enrolled vehicle.
class Auth : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::ScratchDir();
    ASSERT_TRUE(MakeDirs(dir_ + "/keys").ok());
    auto k = transport::GenerateCurveKeys();
    ASSERT_TRUE(k.ok());
    server_keys_ = *k;
    ASSERT_TRUE(
        WriteFileAtomic(dir_ + "/server.secret", server_keys_.secret_z85 + "\n", 0600).ok());
    options_.curve_key_file = dir_ + "/server.secret";
    options_.keys_dir = dir_ + "/keys";
    options_.reload = &reload_;
    options_.stats_out = &stats_;
  }
  transport::CurveKeys Enrol(const std::string& vehicle) {
    auto k = transport::GenerateCurveKeys();
    EXPECT_TRUE(k.ok());
    EXPECT_TRUE(WriteFileAtomic(dir_ + "/keys/" + vehicle + ".public", k->public_z85 + "\n").ok());
    return *k;
  }
  // A DEALER with the given CURVE keys (none: a client in the clear). It does not reconnect
  // during a test, so each refused handshake is counted exactly once.
  std::unique_ptr<zmq::socket_t> Dealer(const std::string& endpoint,
                                        const transport::CurveKeys* keys) {
    auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    s->set(zmq::sockopt::rcvtimeo, 700);
    s->set(zmq::sockopt::sndtimeo, 700);  // a refused peer may leave no pipe to queue into
    s->set(zmq::sockopt::reconnect_ivl, 60'000);
    if (keys) {
      s->set(zmq::sockopt::curve_serverkey, server_keys_.public_z85);
      s->set(zmq::sockopt::curve_publickey, keys->public_z85);
      s->set(zmq::sockopt::curve_secretkey, keys->secret_z85);
    }
    s->connect(endpoint);
    return s;
  }
  // True when the message got no answer at all (the handshake never completed).
  static bool Unanswered(zmq::socket_t* s, const Message& m) {
    const auto bytes = transport::EncodeMessage(m);
    if (!s->send(zmq::buffer(bytes), zmq::send_flags::none)) return true;
    zmq::message_t reply;
    return !s->recv(reply, zmq::recv_flags::none).has_value();
  }
  std::string dir_;
  transport::CurveKeys server_keys_;
  ServerOptions options_;
  std::atomic<bool> reload_{false};
  IngestStats stats_;
  zmq::context_t ctx_{1};
};

TEST_F(Auth, EnrolledKeyIsServedAndAnUnknownKeyIsRefusedAndCounted) {
  const transport::CurveKeys veh1 = Enrol("veh-1");
  auto stranger = transport::GenerateCurveKeys();
  ASSERT_TRUE(stranger.ok());
  {
    RunningServer server(dir_ + "/store", options_);
    ASSERT_FALSE(server.endpoint().empty());
    auto ok = Dealer(server.endpoint(), &veh1);
    EXPECT_EQ(Exchange(ok.get(), Hello()).type, MessageType::kAck);
    const Message r = Exchange(ok.get(), Data(1, {Rec(0, 1)}));
    EXPECT_EQ(r.type, MessageType::kAck);
    EXPECT_EQ(r.stored, 1u);
    auto refused = Dealer(server.endpoint(), &*stranger);
    EXPECT_TRUE(Unanswered(refused.get(), Hello()));
  }
  EXPECT_EQ(stats_.auth_refused, 1u);
  EXPECT_EQ(stats_.records_stored, 1u);
}

TEST_F(Auth, ClientWithoutCurveIsRefused) {
  Enrol("veh-1");
  {
    RunningServer server(dir_ + "/store", options_);
    auto plain = Dealer(server.endpoint(), nullptr);
    EXPECT_TRUE(Unanswered(plain.get(), Hello()));
    EXPECT_TRUE(Unanswered(plain.get(), Data(1, {Rec(0, 1)})));
  }
  EXPECT_EQ(stats_.batches_acked, 0u);
  EXPECT_EQ(stats_.records_stored, 0u);
  EXPECT_EQ(stats_.bytes_received, 0u);  // not one message of it reached the ingest
}

TEST_F(Auth, EnrolledVehicleClaimingAnotherVehicleIdIsRefusedAndCounted) {
  Enrol("veh-1");
  const transport::CurveKeys veh2 = Enrol("veh-2");
  {
    RunningServer server(dir_ + "/store", options_);
    auto impostor = Dealer(server.endpoint(), &veh2);
    const Message hello = Exchange(impostor.get(), Hello());  // Hello() claims veh-1
    EXPECT_EQ(hello.type, MessageType::kNack);
    EXPECT_EQ(hello.reason, NackReason::kUnauthorized);
    EXPECT_EQ(hello.detail, "HELLO claims vehicle 'veh-1', this key is enrolled as 'veh-2'");
    // No HELLO was taken, so veh-1's records cannot ride on this connection either.
    EXPECT_EQ(Exchange(impostor.get(), Data(1, {Rec(0, 1)})).reason, NackReason::kNoHello);
    // Its own id is fine; records naming veh-1 are still not its to send.
    Message own = Hello();
    own.vehicle = "veh-2";
    EXPECT_EQ(Exchange(impostor.get(), own).type, MessageType::kAck);
    EXPECT_EQ(Exchange(impostor.get(), Data(2, {Rec(0, 1)})).reason, NackReason::kInvalidRecord);
  }
  EXPECT_EQ(stats_.auth_impersonation, 1u);
  EXPECT_EQ(stats_.records_stored, 0u);
}

TEST_F(Auth, RevokedKeyStopsWorkingAfterReloadAndARotatedKeyWorks) {
  const transport::CurveKeys old_key = Enrol("veh-1");
  Enrol("veh-2");
  {
    RunningServer server(dir_ + "/store", options_);
    auto open = Dealer(server.endpoint(), &old_key);
    EXPECT_EQ(Exchange(open.get(), Hello()).type, MessageType::kAck);
    EXPECT_EQ(Exchange(open.get(), Data(1, {Rec(0, 1)})).stored, 1u);
    // Rotation: veh-1 gets a new key, the old one is revoked; a bad file is skipped, counted.
    const transport::CurveKeys new_key = Enrol("veh-1");
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/keys/bad.public", "not a key\n").ok());
    reload_ = true;  // what SIGHUP does in dejaview-server
    const Message after = Exchange(open.get(), Data(2, {Rec(0, 2)}));
    EXPECT_EQ(after.type, MessageType::kNack);
    EXPECT_EQ(after.reason, NackReason::kUnauthorized);
    auto reconnect = Dealer(server.endpoint(), &old_key);
    EXPECT_TRUE(Unanswered(reconnect.get(), Hello()));
    auto rotated = Dealer(server.endpoint(), &new_key);
    EXPECT_EQ(Exchange(rotated.get(), Hello()).type, MessageType::kAck);
    EXPECT_EQ(Exchange(rotated.get(), Data(3, {Rec(0, 2)})).stored, 1u);
  }
  EXPECT_EQ(stats_.key_reloads, 1u);
  EXPECT_EQ(stats_.key_files_rejected, 1u);
  EXPECT_EQ(stats_.auth_revoked, 1u);
  EXPECT_EQ(stats_.auth_refused, 1u);
  EXPECT_EQ(stats_.records_stored, 2u);
}

TEST_F(Auth, KeysDirectoryProblemsNameTheFile) {
  const transport::CurveKeys k = Enrol("veh-1");
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/keys/veh-2.public", k.public_z85 + "\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/keys/a b.public", "x\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/keys/README", "not a key file: ignored\n").ok());
  std::vector<std::string> problems;
  auto ring = KeyRing::Load(dir_ + "/keys", &problems);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  EXPECT_EQ(ring->size(), 1u);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], dir_ +
                             "/keys/a b.public: vehicle id: 'a b' has a character outside "
                             "[A-Za-z0-9._-]");
  EXPECT_EQ(problems[1], dir_ +
                             "/keys/veh-2.public: the same key as vehicle 'veh-1'; one key "
                             "identifies one vehicle");
  EXPECT_FALSE(KeyRing::Load(dir_ + "/missing", &problems).ok());
  // A server with CURVE and no keys directory does not start.
  options_.keys_dir.clear();
  options_.store_dir = dir_ + "/store";
  std::atomic<bool> stop{true};
  const Status s = RunServer(options_, &stop, [](const std::string&) {});
  EXPECT_EQ(s.message(), "server: CURVE needs a keys directory (--keys-dir)");
}

// "veh-001-dup.public" sorts before "veh-001.public" ('-' < '.'): a copy of a vehicle's key
// under another name must not take that vehicle's identity. The times are set, not waited for:
// the loader knows the order of creation only by them, and two files written in a row may share
// one timestamp tick.
TEST_F(Auth, DuplicateKeyFileIsRefusedAndTheFileModifiedFirstKeepsTheKey) {
  namespace fs = std::filesystem;
  const transport::CurveKeys k = Enrol("veh-001");
  const std::string original = dir_ + "/keys/veh-001.public";
  const std::string copy = dir_ + "/keys/veh-001-dup.public";
  ASSERT_TRUE(WriteFileAtomic(copy, k.public_z85 + "\n").ok());
  const fs::file_time_type t0 = fs::last_write_time(original);
  const fs::file_time_type t1 = t0 + std::chrono::seconds(1);
  struct Case {
    fs::file_time_type original, copy;
    std::string kept, refused;
  };
  for (const Case& c : {Case{t0, t1, "veh-001", copy},          // the copy made later
                        Case{t1, t0, "veh-001-dup", original},  // the other file made later
                        Case{t0, t0, "veh-001", copy}}) {       // same time: the smaller name
    SCOPED_TRACE(c.kept);
    fs::last_write_time(original, c.original);
    fs::last_write_time(copy, c.copy);
    std::vector<std::string> problems;
    auto ring = KeyRing::Load(dir_ + "/keys", &problems);
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    EXPECT_EQ(ring->size(), 1u);
    ASSERT_NE(ring->VehicleOf(k.public_z85), nullptr);
    EXPECT_EQ(*ring->VehicleOf(k.public_z85), c.kept);
    EXPECT_EQ(problems, std::vector<std::string>{c.refused + ": the same key as vehicle '" +
                                                 c.kept + "'; one key identifies one vehicle"});
  }
}

// On a reload, a key stays with the vehicle it is enrolled as, even against a copy that claims
// to be older (restored from a backup with its times, say); a fresh start has only the times.
TEST_F(Auth, OnReloadAKeyKeepsTheVehicleItIsEnrolledAs) {
  namespace fs = std::filesystem;
  const transport::CurveKeys k = Enrol("veh-001");
  const std::string original = dir_ + "/keys/veh-001.public";
  const std::string copy = dir_ + "/keys/veh-001-dup.public";
  std::vector<std::string> problems;
  auto in_force = KeyRing::Load(dir_ + "/keys", &problems);
  ASSERT_TRUE(in_force.ok()) << in_force.status().ToString();
  ASSERT_TRUE(WriteFileAtomic(copy, k.public_z85 + "\n").ok());
  fs::last_write_time(copy, fs::last_write_time(original) - std::chrono::hours(1));
  auto reloaded = KeyRing::Load(dir_ + "/keys", &problems, &*in_force);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_TRUE(reloaded->Enrolled("veh-001", k.public_z85));
  EXPECT_EQ(problems,
            std::vector<std::string>{copy + ": the same key as vehicle 'veh-001'; one key "
                                            "identifies one vehicle"});
  problems.clear();
  auto fresh = KeyRing::Load(dir_ + "/keys", &problems);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_TRUE(fresh->Enrolled("veh-001-dup", k.public_z85));
  // The server's reload (SIGHUP) passes the ring in force: the vehicle is served throughout.
  ASSERT_TRUE(fs::remove(copy));
  {
    RunningServer server(dir_ + "/store", options_);
    auto open = Dealer(server.endpoint(), &k);
    Message hello = Hello();
    hello.vehicle = "veh-001";
    EXPECT_EQ(Exchange(open.get(), hello).type, MessageType::kAck);
    ASSERT_TRUE(WriteFileAtomic(copy, k.public_z85 + "\n").ok());
    fs::last_write_time(copy, fs::last_write_time(original) - std::chrono::hours(1));
    reload_ = true;  // what SIGHUP does in dejaview-server
    // Every message is bound to the vehicle the ring in force names for its key.
    EXPECT_EQ(Exchange(open.get(), hello).type, MessageType::kAck);
    auto reconnect = Dealer(server.endpoint(), &k);
    EXPECT_EQ(Exchange(reconnect.get(), hello).type, MessageType::kAck);
  }
  EXPECT_EQ(stats_.key_reloads, 1u);
  EXPECT_EQ(stats_.key_files_rejected, 1u);
  EXPECT_EQ(stats_.auth_impersonation, 0u);
  EXPECT_EQ(stats_.auth_revoked, 0u);
  EXPECT_EQ(stats_.auth_refused, 0u);
}

// Names become paths on the server (drive folders, map versions): a record naming a parent
// directory is refused whole, with the field named, before anything is stored.
TEST(Limits, NamesThatWouldEscapeTheirFolderAreRefused) {
  const std::string dir = test::ScratchDir();
  ServerOptions o;
  IngestStats stats;
  o.stats_out = &stats;
  {
    RunningServer server(dir, o);
    zmq::context_t ctx(1);
    zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());
    Exchange(&dealer, Hello());
    for (const char* field : {"drive", "map_version"}) {
      transport::SpoolRecord r = Rec(0, 1);
      (std::string(field) == "drive" ? r.meta.drive : r.meta.map_version) = "../../etc";
      const Message m = Exchange(&dealer, Data(1, {r}));
      EXPECT_EQ(m.reason, NackReason::kBadMessage);
      EXPECT_NE(m.detail.find(std::string(field) + ": starts with '.'"), std::string::npos)
          << m.detail;
    }
  }
  EXPECT_EQ(stats.records_stored, 0u);
  EXPECT_EQ(stats.batches_nacked, 2u);
}

TEST(Limits, RateLimitDefersABatchAndItsResendIsStored) {
  const std::string dir = test::ScratchDir();
  ServerOptions o;
  IngestStats stats;
  o.stats_out = &stats;
  transport::SpoolRecord big = Rec(0, 1);
  big.payload = IntraPayload(20'000, 1);
  // 1.5 s of the rate in one batch: the bucket goes into debt.
  o.limits.vehicle_bytes_per_s = big.payload.size() * 2 / 3;
  {
    RunningServer server(dir, o);
    zmq::context_t ctx(1);
    zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());
    Exchange(&dealer, Hello());
    EXPECT_EQ(Exchange(&dealer, Data(1, {big})).stored, 1u);
    const Message deferred = Exchange(&dealer, Data(2, {Rec(0, 2)}));
    EXPECT_EQ(deferred.reason, NackReason::kThrottled);
    EXPECT_EQ(deferred.detail, "vehicle 'veh-1' is above " +
                                   std::to_string(o.limits.vehicle_bytes_per_s) +
                                   " bytes/s; retry later");
    std::this_thread::sleep_for(std::chrono::milliseconds(1600));  // the debt is repaid
    EXPECT_EQ(Exchange(&dealer, Data(2, {Rec(0, 2)})).stored, 1u);
  }
  EXPECT_EQ(stats.throttled, 1u);
  EXPECT_EQ(stats.records_stored, 2u);
}

TEST(Limits, QuotaRefusesNewFramesAcksResendsAndHoldsAcrossRestarts) {
  const std::string dir = test::ScratchDir();
  ServerOptions o;
  IngestStats stats;
  o.stats_out = &stats;
  const std::vector<transport::SpoolRecord> first = {Rec(0, 1), Rec(0, 2), Rec(0, 3)};
  const std::vector<transport::SpoolRecord> second = {Rec(0, 4), Rec(0, 5)};
  auto bytes = [](const std::vector<transport::SpoolRecord>& recs) {
    uint64_t n = 0;
    for (const auto& r : recs) n += r.payload.size();
    return n;
  };
  // The first batch and frame 6 fit; the second batch, larger than frame 6, does not.
  const uint64_t sixth = Rec(0, 6).payload.size();
  ASSERT_GT(bytes(second), sixth);
  o.limits.vehicle_quota_bytes = bytes(first) + sixth;
  const std::string quota = std::to_string(o.limits.vehicle_quota_bytes);
  zmq::context_t ctx(1);
  for (int run = 0; run < 2; ++run) {
    RunningServer server(dir, o);
    zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());
    Exchange(&dealer, Hello());
    const Message a = Exchange(&dealer, Data(1, first));
    EXPECT_EQ(a.type, MessageType::kAck);
    EXPECT_EQ(a.stored, run == 0 ? 3u : 0u);
    EXPECT_EQ(a.duplicates, run == 0 ? 0u : 3u);
    const Message b = Exchange(&dealer, Data(2, second));
    EXPECT_EQ(b.reason, NackReason::kQuota);
    // The second run reads what is stored from the frame index: the first batch and frame 6.
    EXPECT_EQ(b.detail, "vehicle 'veh-1' has " +
                            std::to_string(run == 0 ? bytes(first) : bytes(first) + sixth) +
                            " of its " + quota + " bytes stored");
    const Message c = Exchange(&dealer, Data(3, {Rec(0, 6)}));  // still fits
    EXPECT_EQ(c.type, MessageType::kAck);
    EXPECT_EQ(c.stored, run == 0 ? 1u : 0u);
  }
  EXPECT_EQ(stats.over_quota, 1u);  // of the second run
  EXPECT_EQ(stats.records_stored, 0u);
}

// A server killed after a record reached its disk but before the index commit: the batch was
// never ACKed, the agent resends it, and the frame is stored (and indexed) exactly once.
TEST(Server, CrashBetweenDiskAndIndexStoresTheResendOnce) {
  const std::string dir = test::ScratchDir();
  {
    auto storage = OpenStorage(dir, "", "");
    ASSERT_TRUE(storage.ok());
    const auto body = transport::EncodeRecord(Rec(0, 1));
    ASSERT_TRUE(storage->store->Put(body.data(), body.size(), /*hold_copy=*/true).ok());
  }
  zmq::context_t ctx(1);
  {
    RunningServer server(dir);
    zmq::socket_t dealer = ConnectedDealer(ctx, server.endpoint());
    Exchange(&dealer, Hello());
    const Message r = Exchange(&dealer, Data(1, {Rec(0, 1), Rec(0, 2)}));
    ASSERT_EQ(r.type, MessageType::kAck);
    EXPECT_EQ(r.stored, 2u);
    EXPECT_EQ(r.duplicates, 0u);
  }
  auto storage = OpenStorage(dir, "", "");
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ(*storage->index->Count(), 2u);
  EXPECT_EQ(storage->store->disk()->objects(), 2u);
}

// Six stored frames (two real KITTI scans, intra-coded, under three sequences each).
struct ExportFixture {
  std::string dir;
  Storage storage;
  std::vector<store::FrameRecord> rows;
  std::vector<PointCloud> expected;  // decoded clouds, by row
};

ExportFixture MakeExportFixture() {
  ExportFixture f;
  f.dir = test::ScratchDir();
  f.storage = std::move(OpenStorage(f.dir + "/store", "", "")).value();
  for (int scan = 0; scan < 2; ++scan) {
    char name[32];
    std::snprintf(name, sizeof(name), "/velodyne/%06d.bin", scan);
    auto cloud = ReadKittiBin(test::KittiSeq("00") + name);
    EXPECT_TRUE(cloud.ok());
    auto delta = codec::Encoder(nullptr).Encode(*cloud, Pose::Identity(), {}, {});  // intra
    EXPECT_TRUE(delta.ok()) << delta.status().ToString();
    auto decoded = codec::Decoder(nullptr).Decode(delta->data(), delta->size());
    EXPECT_TRUE(decoded.ok());
    for (uint64_t k = 0; k < 3; ++k) {
      transport::SpoolRecord rec = Rec(0, uint64_t(scan) * 3 + k);
      rec.meta.map_version = "";
      rec.payload = *delta;
      const auto body = transport::EncodeRecord(rec);
      store::FrameRecord row;
      row.vehicle = rec.meta.vehicle;
      row.drive = rec.meta.drive;
      row.sequence = rec.meta.sequence;
      row.timestamp_ns = rec.meta.timestamp_ns;
      row.T_map_sensor = rec.meta.T_map_sensor;
      row.object = *f.storage.store->Put(body.data(), body.size());
      EXPECT_TRUE(*f.storage.index->Insert(row));
      f.expected.push_back(decoded->cloud);
    }
  }
  f.rows = *f.storage.index->Query({});
  return f;
}

TEST(Export, WritesKittiAndPackedBatchesBitExactInSeededOrder) {
  ExportFixture f = MakeExportFixture();
  ASSERT_EQ(f.rows.size(), 6u);
  MapVersions maps(f.dir + "/maps");
  auto st = ExportFrames(f.storage.store.get(), f.rows, &maps, {}, f.dir + "/kitti");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->frames, 6u);
  for (size_t i = 0; i < 6; ++i) {
    char name[48];
    std::snprintf(name, sizeof(name), "/kitti/velodyne/%06zu.bin", i);
    auto got = ReadFileBytes(f.dir + name);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, EncodeKittiBin(f.expected[i])) << name;  // bit-exact, index order
  }
  ExportOptions packed;
  packed.layout = "packed";
  packed.batch_frames = 4;
  packed.shuffle = true;
  packed.seed = 7;
  const std::vector<size_t> order = ExportOrder(6, true, 7);
  ASSERT_NE(order, ExportOrder(6, false, 0));
  EXPECT_EQ(order, ExportOrder(6, true, 7));
  std::vector<size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, ExportOrder(6, false, 0));  // a permutation
  std::vector<std::vector<uint8_t>> first;
  for (const char* out : {"/packed", "/packed2"}) {
    st = ExportFrames(f.storage.store.get(), f.rows, &maps, packed, f.dir + out);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->batches, 2u);
    size_t k = 0;
    for (const char* batch : {"/batch-000000.dvxb", "/batch-000001.dvxb"}) {
      auto bytes = ReadFileBytes(f.dir + out + batch);
      ASSERT_TRUE(bytes.ok());
      if (first.size() < 2) {
        first.push_back(*bytes);
      } else {
        EXPECT_EQ(*bytes, first[k / 4]) << "a rerun writes the same bytes";
      }
      auto frames = DecodeBatch(bytes->data(), bytes->size());
      ASSERT_TRUE(frames.ok()) << frames.status().ToString();
      for (const BatchFrame& fr : *frames) {
        EXPECT_EQ(fr.sequence, f.rows[order[k]].sequence);
        EXPECT_EQ(EncodeKittiBin(fr.cloud), EncodeKittiBin(f.expected[order[k]]));
        ++k;
      }
    }
    EXPECT_EQ(k, 6u);
  }
  packed.layout = "parquet";
  EXPECT_EQ(
      ExportFrames(f.storage.store.get(), f.rows, &maps, packed, f.dir + "/x").status().code(),
      Status::Code::kInvalidArgument);
}

// `dejaview query --json`: every index field of every frame, positions and times at full
// precision, parsed back by a JSON parser.
TEST(Query, JsonListsEveryIndexFieldExactly) {
  ExportFixture f = MakeExportFixture();
  store::FrameRecord odd = f.rows[0];
  odd.vehicle = "veh-2";
  odd.sensor_id = 3;
  odd.source_epoch = 17;
  odd.sequence = 1ull << 60;
  odd.timestamp_ns = 1700000000123456789;
  odd.map_version = "00ff00ff00ff00ff00ff00ff00ff00ff";
  odd.bytes = 4321;
  odd.T_map_sensor.translation() = Eigen::Vector3d(1.0 / 3, -2e-7, 12345.678901234);
  odd.T_map_sensor.linear() = Eigen::AngleAxisd(0.3, Eigen::Vector3d::UnitZ()).toRotationMatrix();
  ASSERT_TRUE(*f.storage.index->Insert(odd));
  store::FrameQuery by_vehicle;
  by_vehicle.vehicle = "veh-2";
  auto rows = f.storage.index->Query(by_vehicle);
  ASSERT_TRUE(rows.ok() && rows->size() == 1u);
  const Pose stored_pose = (*rows)[0].T_map_sensor;  // as the index keeps it
  ASSERT_TRUE(stored_pose.isApprox(odd.T_map_sensor, 1e-12));
  std::string out;
  ASSERT_EQ(test::RunCli("query --store " + f.dir + "/store --vehicle veh-2 --json", &out), 0)
      << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "not JSON: " << out;
  ASSERT_EQ(j.at("count"), 1);
  ASSERT_EQ(j.at("frames").size(), 1u);
  const nlohmann::json& r = j.at("frames")[0];
  EXPECT_EQ(r.at("vehicle"), "veh-2");
  EXPECT_EQ(r.at("sensor_id"), 3);
  EXPECT_EQ(r.at("source_epoch"), 17);
  EXPECT_EQ(r.at("sequence").get<uint64_t>(), 1ull << 60);
  EXPECT_EQ(r.at("drive"), odd.drive);
  EXPECT_EQ(r.at("timestamp_ns").get<int64_t>(), 1700000000123456789);
  EXPECT_EQ(r.at("map_version"), odd.map_version);
  EXPECT_EQ(r.at("bytes"), 4321);
  EXPECT_EQ(r.at("object"), odd.object.Hex());
  ASSERT_EQ(r.at("T_map_sensor").size(), 12u);
  for (int k = 0; k < 12; ++k) {
    EXPECT_EQ(r.at("T_map_sensor")[k].get<double>(), stored_pose.matrix()(k / 4, k % 4)) << k;
  }
  ASSERT_EQ(test::RunCli("query --store " + f.dir + "/store --vehicle veh-1 --json", &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out).at("count"), 6);
  ASSERT_EQ(test::RunCli("query --store " + f.dir + "/store --vehicle nobody --json", &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out), nlohmann::json::parse(R"({"count": 0, "frames": []})"));
}

// A frame that cannot be reconstructed is skipped and reported; the rest of the drive is
// exported (the frames in between, one before and one after, are not lost with it).
TEST(Export, SkipsAndNamesFramesItCannotReconstruct) {
  const std::string dir = test::ScratchDir();
  auto storage = OpenStorage(dir, "", "");
  ASSERT_TRUE(storage.ok());
  auto put = [&](const transport::SpoolRecord& rec, uint64_t row_sequence) {
    const auto body = transport::EncodeRecord(rec);
    store::FrameRecord row;
    row.vehicle = rec.meta.vehicle;
    row.sequence = row_sequence;
    row.object = *storage->store->Put(body.data(), body.size());
    return row;
  };
  transport::SpoolRecord good = Rec(0, 4);
  good.meta.map_version = "";
  transport::SpoolRecord missing_map = Rec(0, 5);
  missing_map.meta.map_version = "00ff00ff00ff00ff";
  good.meta.sequence = 4;
  const std::vector<store::FrameRecord> rows = {
      put(good, 4), put(missing_map, 5),
      put(good, 6),  // the index row and the stored record disagree
      put(good, 4)};
  MapVersions maps(dir + "/maps");
  auto st = ExportFrames(storage->store.get(), rows, &maps, {}, dir + "/out");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->frames, 2u);
  EXPECT_EQ(st->frames_skipped, 2u);
  ASSERT_EQ(st->skipped.size(), 2u);
  EXPECT_NE(st->skipped[0].find("00ff00ff00ff00ff"), std::string::npos) << st->skipped[0];
  EXPECT_NE(st->skipped[1].find("holds another frame"), std::string::npos) << st->skipped[1];
  auto list = ReadFileText(dir + "/out/frames.txt");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(std::count(list->begin(), list->end(), '\n'), 2);
}

// An epoch time in nanoseconds has 19 significant digits; timestamps.txt keeps all of them.
TEST(Export, TimestampsKeepEveryNanosecond) {
  const std::string dir = test::ScratchDir();
  auto storage = OpenStorage(dir + "/store", "", "");
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  PointCloud cloud;
  cloud.push_back(Eigen::Vector3f(1, 2, 3), 0.5f);
  cloud.push_back(Eigen::Vector3f(-4, 5, 6), 0.25f);
  auto delta = codec::Encoder(nullptr).Encode(cloud, Pose::Identity(), {}, {});  // intra
  ASSERT_TRUE(delta.ok()) << delta.status().ToString();
  transport::SpoolRecord rec = Rec(0, 1);
  rec.meta.map_version = "";
  rec.meta.timestamp_ns = 1700000000123456789;
  rec.payload = *delta;
  const auto body = transport::EncodeRecord(rec);
  store::FrameRecord row;
  row.vehicle = rec.meta.vehicle;
  row.drive = rec.meta.drive;
  row.sequence = rec.meta.sequence;
  row.timestamp_ns = rec.meta.timestamp_ns;
  row.T_map_sensor = rec.meta.T_map_sensor;
  row.object = *storage->store->Put(body.data(), body.size());
  MapVersions maps(dir + "/maps");
  auto st = ExportFrames(storage->store.get(), {row}, &maps, {}, dir + "/out");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(ReadFileText(dir + "/out/timestamps.txt", 1024).value(), "1700000000.123456789\n");
  // The drive reader takes it to the nearest double, which is all a double holds (1.7e9 s to
  // 2^-22 s, about 238 ns).
  auto drive = OpenDrive(dir + "/out");
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  EXPECT_EQ(drive->timestamps_s, std::vector<double>{1700000000.123456789});
}

TEST(BatchFormat, RoundTripsAndRejectsMalformedInput) {
  BatchFrame a;
  a.vehicle = "veh-1";
  a.drive = "d1";
  a.map_version = "m";
  a.sensor_id = 2;
  a.sequence = 9;
  a.timestamp_ns = -5;
  a.T_map_sensor.translation() = Eigen::Vector3d(1, 2, 3);
  a.cloud.push_back(Eigen::Vector3f(1, 2, 3), 0.5f);
  a.cloud.push_back(Eigen::Vector3f(-1, 0, 7), 0.25f);
  BatchFrame b = a;
  b.sequence = 10;
  const std::vector<uint8_t> bytes = EncodeBatch({a, b});
  auto back = DecodeBatch(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].sequence, 10u);
  EXPECT_EQ(EncodeBatch(*back), bytes);
  for (size_t n = 0; n < bytes.size(); ++n) {  // every truncation
    EXPECT_EQ(DecodeBatch(bytes.data(), n).status().code(), Status::Code::kCorruption) << n;
  }
  const std::pair<size_t, const char*> flips[] = {
      {0, "bad magic"}, {4, "version"}, {10, "frame count"}, {30, "CRC mismatch"}};
  for (const auto& [at, want] : flips) {
    std::vector<uint8_t> bad = bytes;
    bad[at] ^= 0x40;
    auto r = DecodeBatch(bad.data(), bad.size());
    ASSERT_FALSE(r.ok()) << at;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  std::vector<uint8_t> trailing = bytes;
  trailing.push_back(0);
  EXPECT_NE(DecodeBatch(trailing.data(), trailing.size()).status().message().find("trailing"),
            std::string::npos);
  // A padding byte that is not zero, under a CRC that matches it.
  auto views = ParseBatch(bytes.data(), bytes.size());
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  const size_t pad_at = (*views)[0].points_offset - 1;
  ASSERT_EQ(bytes[pad_at], 0) << "the first frame has padding (its header ends off a boundary)";
  std::vector<uint8_t> bad_pad = bytes;
  bad_pad[pad_at] = 1;
  const uint32_t body_length = uint32_t(bad_pad[12]) | uint32_t(bad_pad[13]) << 8;
  const uint32_t crc = crc32c::Mask(crc32c::Value(bad_pad.data() + 20, body_length));
  std::memcpy(bad_pad.data() + 16, &crc, 4);
  auto r = DecodeBatch(bad_pad.data(), bad_pad.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("frame 0: bad padding"), std::string::npos)
      << r.status().message();
}

// Every frame's points start at a file offset that is a multiple of 16, whatever the lengths of
// the names before them, and ParseBatch finds them where DecodeBatch reads them.
TEST(BatchFormat, PointArraysAre16ByteAligned) {
  std::vector<BatchFrame> frames;
  for (size_t n = 0; n < 40; ++n) {
    BatchFrame f;
    f.vehicle = std::string(n % 17, 'v');
    f.drive = std::string(n / 3, 'd');
    f.map_version = std::string(n % 5, 'm');
    f.sequence = n;
    for (size_t p = 0; p < n % 4; ++p)
      f.cloud.push_back(Eigen::Vector3f(float(n), float(p), 1), 0.5f);
    frames.push_back(std::move(f));
  }
  const std::vector<uint8_t> bytes = EncodeBatch(frames);
  auto views = ParseBatch(bytes.data(), bytes.size());
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  ASSERT_EQ(views->size(), frames.size());
  for (size_t n = 0; n < frames.size(); ++n) {
    const BatchFrameView& v = (*views)[n];
    EXPECT_EQ(v.points_offset % 16, 0u) << n;
    EXPECT_EQ(v.vehicle, frames[n].vehicle);
    ASSERT_EQ(v.points, frames[n].cloud.size());
    for (size_t p = 0; p < v.points; ++p) {
      float xyzi[4];
      std::memcpy(xyzi, bytes.data() + v.points_offset + 16 * p, 16);
      EXPECT_EQ(Eigen::Vector3f(xyzi[0], xyzi[1], xyzi[2]), frames[n].cloud.xyz[p]);
      EXPECT_EQ(xyzi[3], frames[n].cloud.intensity[p]);
    }
  }
}

// The fuzz seed was written from docs/export-format.md by an independent (Python) writer, so this
// pins the spec to the code.
TEST(BatchFormat, DecodesAFileWrittenFromTheSpec) {
  auto bytes =
      ReadFileBytes(test::FixturePath("../fuzz/corpus/fuzz_export_batch/two_frames"), 4096);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto frames = DecodeBatch(bytes->data(), bytes->size());
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 2u);
  const BatchFrame& f = (*frames)[0];
  EXPECT_EQ(f.vehicle, "veh-1");
  EXPECT_EQ(f.drive, "drive-0");
  EXPECT_EQ(f.sensor_id, 3u);
  EXPECT_EQ(f.sequence, 7u);
  EXPECT_EQ(f.timestamp_ns, 1700000000000000007);
  EXPECT_EQ(f.map_version, "00ff00ff00ff00ff");
  EXPECT_EQ(f.T_map_sensor.translation(), Eigen::Vector3d(10.5, -2, 1.7));
  ASSERT_EQ(f.cloud.size(), 2u);
  EXPECT_EQ(f.cloud.xyz[1], Eigen::Vector3f(4, 5, 6));
  EXPECT_EQ(f.cloud.intensity[1], 0.25f);
  EXPECT_EQ((*frames)[1].sequence, 8u);
  EXPECT_EQ((*frames)[1].cloud.xyz[0], Eigen::Vector3f(-1, 0, 0.5f));
  EXPECT_EQ(EncodeBatch(*frames), *bytes);
  auto views = ParseBatch(bytes->data(), bytes->size());
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  EXPECT_EQ((*views)[0].points_offset, 0xb0u);  // after 5 bytes of padding
  EXPECT_EQ((*views)[1].points_offset % 16, 0u);
}

// A file of the format before the padding (version 1) is refused as such.
TEST(BatchFormat, RefusesVersion1) {
  auto bytes = ReadFileBytes(test::FixturePath("../fuzz/corpus/fuzz_export_batch/version_1"), 4096);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto frames = DecodeBatch(bytes->data(), bytes->size());
  ASSERT_FALSE(frames.ok());
  EXPECT_EQ(frames.status().message(), "batch: version 1, expected 2");
}

}  // namespace
}  // namespace dv::server
