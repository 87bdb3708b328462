#include "dejaview/transport/upload.h"

#include <gtest/gtest.h>

namespace dv::transport {
namespace {

SpoolRecord Rec(uint64_t seq) {
  SpoolRecord r;
  r.id = seq + 100;
  r.meta.vehicle = "veh-1";
  r.meta.drive = "d1";
  r.meta.sensor_id = 2;
  r.meta.sequence = seq;
  r.meta.timestamp_ns = int64_t(seq) * 1000;
  r.payload.assign(size_t(10 + seq), uint8_t(seq));
  return r;
}

std::vector<Message> Examples() {
  std::vector<Message> out(6);
  out[0].type = MessageType::kHello;
  out[0].vehicle = "veh-1";
  out[0].sensor_ids = {0, 2, 70000};
  out[1].type = MessageType::kData;
  out[1].batch_id = 9;
  out[1].records = {Rec(1), Rec(2), Rec(3)};
  out[2].type = MessageType::kAck;
  out[2].batch_id = 9;
  out[2].stored = 2;
  out[2].duplicates = 1;
  out[3].type = MessageType::kNack;
  out[3].batch_id = 9;
  out[3].reason = NackReason::kStorage;
  out[3].detail = "disk full";
  out[4].type = MessageType::kPing;
  out[4].nonce = 0xfeedbeefcafeull;
  out[5].type = MessageType::kPong;
  out[5].nonce = 3;
  return out;
}

TEST(Upload, EveryMessageRoundTrips) {
  for (const Message& m : Examples()) {
    const auto bytes = EncodeMessage(m);
    auto d = DecodeMessage(bytes.data(), bytes.size());
    ASSERT_TRUE(d.ok()) << MessageTypeName(m.type) << ": " << d.status().ToString();
    EXPECT_EQ(d->type, m.type);
    EXPECT_EQ(d->vehicle, m.vehicle);
    EXPECT_EQ(d->sensor_ids, m.sensor_ids);
    EXPECT_EQ(d->batch_id, m.batch_id);
    EXPECT_EQ(d->stored, m.stored);
    EXPECT_EQ(d->duplicates, m.duplicates);
    EXPECT_EQ(d->reason, m.reason);
    EXPECT_EQ(d->detail, m.detail);
    EXPECT_EQ(d->nonce, m.nonce);
    ASSERT_EQ(d->records.size(), m.records.size());
    for (size_t i = 0; i < m.records.size(); ++i) {
      EXPECT_EQ(EncodeRecord(d->records[i]), EncodeRecord(m.records[i]));
    }
    // Strict: every proper prefix and any trailing byte is rejected.
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_FALSE(DecodeMessage(bytes.data(), n).ok())
          << MessageTypeName(m.type) << " prefix " << n;
    }
    auto longer = bytes;
    longer.push_back(0);
    const auto s = DecodeMessage(longer.data(), longer.size()).status();
    EXPECT_EQ(s.code(), Status::Code::kCorruption);
    EXPECT_NE(s.message().find("trailing"), std::string::npos) << s.message();
  }
}

TEST(Upload, RejectsWithMessagesNamingTheField) {
  auto hello = EncodeMessage(Examples()[0]);
  hello[0] = 2;
  auto s = DecodeMessage(hello.data(), hello.size()).status();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("protocol version 2"), std::string::npos) << s.message();

  auto data = EncodeMessage(Examples()[1]);
  data[1] = 42;
  s = DecodeMessage(data.data(), data.size()).status();
  EXPECT_NE(s.message().find("unknown type 42"), std::string::npos) << s.message();

  Message big;
  big.type = MessageType::kData;
  big.batch_id = 1;
  big.records.assign(kMaxBatchRecords + 1, Rec(0));
  auto bytes = EncodeMessage(big);
  s = DecodeMessage(bytes.data(), bytes.size()).status();
  EXPECT_NE(s.message().find("record count"), std::string::npos) << s.message();

  // A damaged record inside a batch names its index.
  Message m = Examples()[1];
  m.records[1].meta.vehicle = "bad/name";
  bytes = EncodeMessage(m);
  s = DecodeMessage(bytes.data(), bytes.size()).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("DATA record 1"), std::string::npos) << s.message();

  Message zero = Examples()[1];
  zero.batch_id = 0;
  bytes = EncodeMessage(zero);
  EXPECT_FALSE(DecodeMessage(bytes.data(), bytes.size()).ok());
}

}  // namespace
}  // namespace dv::transport
