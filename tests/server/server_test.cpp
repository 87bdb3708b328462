#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <thread>
#include <zmq.hpp>

#include "dejaview/base/file_util.h"
#include "dejaview/server/ingest.h"
#include "testutil.h"

namespace dv::server {
namespace {

using transport::Message;
using transport::MessageType;
using transport::NackReason;

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
  r.payload.assign(100 + seq, uint8_t(seq));
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

// A real server on a loopback ephemeral port, in a thread, stopped at scope exit.
class RunningServer {
 public:
  explicit RunningServer(const std::string& dir, ServerOptions o = {}) {
    o.listen = "tcp://127.0.0.1:0";
    o.store_dir = dir;
    std::promise<std::string> bound;
    auto endpoint = bound.get_future();
    thread_ = std::thread([this, o, &bound] {
      status_ = RunServer(o, &stop_, [&](const std::string& e) { bound.set_value(e); });
      if (!status_.ok()) bound.set_value("");
    });
    endpoint_ = endpoint.get();
  }
  ~RunningServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::string endpoint_;
  Status status_;
};

Message Exchange(zmq::socket_t* dealer, const Message& m) {
  const auto bytes = transport::EncodeMessage(m);
  dealer->send(zmq::buffer(bytes), zmq::send_flags::none);
  zmq::message_t reply;
  EXPECT_TRUE(dealer->recv(reply, zmq::recv_flags::none));
  auto d = transport::DecodeMessage(static_cast<const uint8_t*>(reply.data()), reply.size());
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Message{};
}

TEST(Server, AcksAfterStoringAndDeduplicatesOverRealSockets) {
  const std::string dir = test::ScratchDir();
  zmq::context_t ctx(1);
  {
    RunningServer server(dir);
    ASSERT_FALSE(server.endpoint().empty());
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(server.endpoint());

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
  auto index = FrameIndex::Open(dir + "/index.sqlite");
  ASSERT_TRUE(index.ok());
  auto rows = (*index)->Query({});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);
  auto store = DeltaStore::Open(dir);
  ASSERT_TRUE(store.ok());
  for (const FrameRow& row : *rows) {
    auto rec = (*store)->ReadAt(row.file, row.offset);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_EQ(transport::EncodeRecord(*rec),
              transport::EncodeRecord(Rec(row.meta.sensor_id, row.meta.sequence)));
  }
  index->reset();
  RunningServer server(dir);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(server.endpoint());
  Exchange(&dealer, Hello());
  const Message r = Exchange(&dealer, Data(1, {Rec(0, 1), Rec(0, 4)}));
  EXPECT_EQ(r.stored, 1u);
  EXPECT_EQ(r.duplicates, 1u);
}

TEST(Server, CurveAdmitsOnlyAllowedAgentKeys) {
  const std::string dir = test::ScratchDir();
  auto server_keys = transport::GenerateCurveKeys();
  auto good = transport::GenerateCurveKeys();
  auto bad = transport::GenerateCurveKeys();
  ASSERT_TRUE(server_keys.ok() && good.ok() && bad.ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/server.secret", server_keys->secret_z85 + "\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/allow", "# agents\n" + good->public_z85 + "\n").ok());
  ServerOptions o;
  o.curve_key_file = dir + "/server.secret";
  o.curve_allow_file = dir + "/allow";
  RunningServer server(dir + "/store", o);
  ASSERT_FALSE(server.endpoint().empty());
  zmq::context_t ctx(1);
  auto dealer = [&](const transport::CurveKeys& k) {
    auto s = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    s->set(zmq::sockopt::rcvtimeo, 500);
    s->set(zmq::sockopt::curve_serverkey, server_keys->public_z85);
    s->set(zmq::sockopt::curve_publickey, k.public_z85);
    s->set(zmq::sockopt::curve_secretkey, k.secret_z85);
    s->connect(server.endpoint());
    return s;
  };
  auto ok = dealer(*good);
  const Message r = Exchange(ok.get(), Hello());
  EXPECT_EQ(r.type, MessageType::kAck);
  // An unknown key never completes the handshake: its HELLO gets no answer.
  auto refused = dealer(*bad);
  const auto bytes = transport::EncodeMessage(Hello());
  refused->send(zmq::buffer(bytes), zmq::send_flags::none);
  zmq::message_t reply;
  EXPECT_FALSE(refused->recv(reply, zmq::recv_flags::none).has_value());
  // A malformed allow list is an error naming the line.
  ASSERT_TRUE(WriteFileAtomic(dir + "/allow2", good->public_z85 + "\nnot-a-key\n").ok());
  auto list = transport::LoadCurveAllowList(dir + "/allow2");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("allow2:2"), std::string::npos) << list.status().message();
}

TEST(Server, RecoveryIndexesUnindexedRecordsAndTruncatesTornTail) {
  const std::string dir = test::ScratchDir();
  {
    // A crash after the store's fsync but before the index commit: records only in the store.
    auto store = DeltaStore::Open(dir);
    ASSERT_TRUE(store.ok());
    for (uint64_t s = 0; s < 5; ++s) ASSERT_TRUE((*store)->Append(Rec(0, s)).ok());
    ASSERT_TRUE((*store)->SyncTouched().ok());
  }
  const std::string file = dir + "/veh-1/d1/deltas.log";
  const uint64_t good = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, good + 77);  // and a torn append after them (zeros)
  auto store = DeltaStore::Open(dir);
  auto index = FrameIndex::Open(dir + "/index.sqlite");
  ASSERT_TRUE(store.ok() && index.ok());
  Ingest ingest(store->get(), index->get());
  ASSERT_TRUE(ingest.Recover().ok());
  EXPECT_EQ(ingest.stats().recovered_records, 5u);
  EXPECT_EQ(ingest.stats().recovered_torn_bytes, 77u);
  EXPECT_EQ(std::filesystem::file_size(file), good);
  EXPECT_EQ(*(*index)->Count(), 5u);
  // A second recovery has nothing left to do.
  Ingest again(store->get(), index->get());
  ASSERT_TRUE(again.Recover().ok());
  EXPECT_EQ(again.stats().recovered_records, 0u);
}

TEST(FrameIndex, QueriesByVehicleTimeAndDistance) {
  auto index = FrameIndex::Open(test::ScratchDir() + "/index.sqlite");
  ASSERT_TRUE(index.ok());
  std::vector<FrameRow> rows;
  for (uint64_t s = 0; s < 20; ++s) rows.push_back({Rec(0, s).meta, 10, "f", s});
  transport::RecordMeta other = Rec(0, 3).meta;
  other.vehicle = "veh-2";
  rows.push_back({other, 10, "g", 0});
  ASSERT_TRUE((*index)->Insert(rows, {}).ok());
  FrameQuery q;
  q.vehicle = "veh-1";
  q.from_ns = 5 * 100'000'000;
  q.to_ns = 15 * 100'000'000;
  q.near = Eigen::Vector3d(10, 0.5, 0);
  q.radius_m = 3;  // x in [10 - sqrt(8.75), 10 + sqrt(8.75)] -> sequences 8..12
  auto got = (*index)->Query(q);
  ASSERT_TRUE(got.ok());
  std::vector<uint64_t> seqs;
  for (const auto& r : *got) seqs.push_back(r.meta.sequence);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{8, 9, 10, 11, 12}));
  q = FrameQuery{};
  q.vehicle = "veh-2";
  EXPECT_EQ((*index)->Query(q)->size(), 1u);
}

}  // namespace
}  // namespace dv::server
