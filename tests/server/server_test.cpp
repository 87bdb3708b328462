#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <thread>
#include <zmq.hpp>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/codec/codec.h"
#include "dejaview/server/export.h"
#include "dejaview/server/ingest.h"
#include "dejaview/server/storage.h"
#include "running_server.h"
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
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(server.endpoint());
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
    auto delta = codec::Encode(*cloud, Pose::Identity(), {}, {}, nullptr);  // intra: no map
    EXPECT_TRUE(delta.ok()) << delta.status().ToString();
    auto decoded = codec::Decode(delta->data(), delta->size(), nullptr);
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
    char name[32];
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

TEST(Export, NamesTheMissingMapVersion) {
  const std::string dir = test::ScratchDir();
  auto storage = OpenStorage(dir, "", "");
  ASSERT_TRUE(storage.ok());
  transport::SpoolRecord rec = Rec(0, 5);
  rec.meta.map_version = "00ff00ff00ff00ff";
  const auto body = transport::EncodeRecord(rec);
  store::FrameRecord row;
  row.vehicle = rec.meta.vehicle;
  row.sequence = 5;
  row.object = *storage->store->Put(body.data(), body.size());
  MapVersions maps(dir + "/maps");
  auto st = ExportFrames(storage->store.get(), {row}, &maps, {}, dir + "/out");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("00ff00ff00ff00ff"), std::string::npos);
  row.sequence = 6;  // the index row and the stored record disagree
  st = ExportFrames(storage->store.get(), {row}, &maps, {}, dir + "/out");
  EXPECT_EQ(st.status().code(), Status::Code::kCorruption) << st.status().ToString();
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
}

}  // namespace
}  // namespace dv::server
