// The MCAP writer and reader against each other, and the reader on corrupt and truncated input.
#include <gtest/gtest.h>

#include <cstring>

#include "dejaview/recorded/mcap.h"
#include "dejaview/recorded/mcap_writer.h"

namespace dv::recorded {
namespace {

struct Written {
  uint16_t channel;
  uint64_t log_time;
  std::string data;
};

// Three messages on two channels, then many more so that small chunks close several times.
std::vector<uint8_t> WriteSample(const std::string& compression, std::vector<Written>* sent) {
  std::vector<uint8_t> file;
  McapWriterOptions options;
  options.compression = compression;
  options.chunk_bytes = 256;
  McapWriter w(
      [&](const uint8_t* d, size_t n) {
        file.insert(file.end(), d, d + n);
        return Status::Ok();
      },
      options);
  const uint16_t schema = w.AddSchema("sensor_msgs/msg/PointCloud2", "ros2msg", "uint32 x");
  const uint16_t a = w.AddChannel(schema, "/points", "cdr", {{"k", "v"}});
  const uint16_t b = w.AddChannel(0, "/raw", "", {});
  for (uint64_t i = 0; i < 40; ++i) {
    const Written m{i % 3 == 0 ? b : a, 1000 + i, std::string(size_t(i * 7 % 50), char('a' + i))};
    EXPECT_TRUE(w.WriteMessage(m.channel, m.log_time, m.log_time + 1,
                               reinterpret_cast<const uint8_t*>(m.data.data()), m.data.size())
                    .ok());
    sent->push_back(m);
  }
  EXPECT_TRUE(w.Finish().ok());
  return file;
}

std::vector<Written> ReadBack(const std::vector<uint8_t>& file, Status* status) {
  std::vector<Written> got;
  *status = ReadMcapMessages(file.data(), file.size(), "t.mcap", [&](const McapMessageView& v) {
    got.push_back(
        {v.message->channel_id, v.message->log_time,
         std::string(reinterpret_cast<const char*>(v.message->data.data), v.message->data.size)});
    EXPECT_EQ(v.message->publish_time, v.message->log_time + 1);
    EXPECT_EQ(*v.schema_name, v.channel->topic == "/points" ? "sensor_msgs/msg/PointCloud2" : "");
    return Status::Ok();
  });
  return got;
}

bool Same(const std::vector<Written>& a, const std::vector<Written>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].channel != b[i].channel || a[i].log_time != b[i].log_time || a[i].data != b[i].data)
      return false;
  }
  return true;
}

TEST(Mcap, WriterOutputReadsBackForEveryCompression) {
  for (const std::string c : {"", "lz4", "zstd"}) {
    std::vector<Written> sent;
    const auto file = WriteSample(c, &sent);
    Status s;
    const auto got = ReadBack(file, &s);
    ASSERT_TRUE(s.ok()) << c << ": " << s.ToString();
    EXPECT_TRUE(Same(got, sent)) << c;
    // Summary: Statistics counts every message and chunk.
    size_t chunk_indexes = 0;
    uint64_t messages = 0, chunks = 0;
    ASSERT_TRUE(ReadMcap(file.data(), file.size(), "t.mcap", [&](const McapRecord& r) {
                  if (std::holds_alternative<McapChunkIndex>(r)) ++chunk_indexes;
                  if (const auto* st = std::get_if<McapStatistics>(&r)) {
                    messages = st->message_count;
                    chunks = st->chunk_count;
                    EXPECT_EQ(st->channel_message_counts.size(), 2u);
                  }
                  return Status::Ok();
                }).ok());
    EXPECT_EQ(messages, 40u);
    EXPECT_GT(chunk_indexes, 1u) << c;
    EXPECT_EQ(chunks, chunk_indexes) << c;
  }
}

TEST(Mcap, EveryTruncationIsAnErrorNamingFileAndOffset) {
  std::vector<Written> sent;
  const auto file = WriteSample("zstd", &sent);
  for (size_t n = 0; n < file.size(); ++n) {
    const std::vector<uint8_t> cut(file.begin(), file.begin() + long(n));
    Status s;
    ReadBack(cut, &s);
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << n;
    EXPECT_EQ(s.message().rfind("t.mcap: offset ", 0), 0u) << s.message();
  }
}

TEST(Mcap, EveryFlippedByteIsCaughtOrHarmless) {
  // Each byte flipped in turn: the reader either fails with a message or yields records (a
  // flipped timestamp or padding byte is not detectable), and never crashes. With CRCs present,
  // a flip inside the data section is always caught.
  std::vector<Written> sent;
  const auto file = WriteSample("lz4", &sent);
  size_t data_end = 0;  // the DataEnd record: opcode 0x0F, length 4
  for (size_t i = 8; i + 8 < file.size(); ++i) {
    if (file[i] == 0x0F && file[i + 1] == 4 && std::memcmp(&file[i + 2], "\0\0\0\0\0\0\0", 7) == 0)
      data_end = i;
  }
  ASSERT_GT(data_end, 8u);
  for (size_t i = 0; i < file.size(); ++i) {
    auto bad = file;
    bad[i] ^= 0x5a;
    Status s;
    ReadBack(bad, &s);
    if (i < data_end) {
      EXPECT_FALSE(s.ok()) << "flip at " << i << " not caught";
    }
  }
}

TEST(Mcap, ChunkClaimingMoreThanItsBytesCanHoldIsRejectedBeforeAllocating) {
  // A chunk of 8 zstd bytes claiming 1 TiB uncompressed.
  std::vector<uint8_t> f = {0x89, 'M', 'C', 'A', 'P', '0', '\r', '\n'};
  const auto u64 = [&](uint64_t v) {
    for (int k = 0; k < 8; ++k) f.push_back(uint8_t(v >> (8 * k)));
  };
  const auto u32 = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) f.push_back(uint8_t(v >> (8 * k)));
  };
  f.push_back(0x06);
  u64(8 + 8 + 8 + 4 + 4 + 4 + 8 + 8);
  u64(0);
  u64(0);
  u64(uint64_t(1) << 40);
  u32(0);
  u32(4);
  f.insert(f.end(), {'z', 's', 't', 'd'});
  u64(8);
  u64(0);
  const Status s =
      ReadMcap(f.data(), f.size(), "big.mcap", [](const McapRecord&) { return Status::Ok(); });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "big.mcap: offset 8: chunk uncompressed_size 1099511627776 is more than 8 zstd bytes "
            "can hold");
}

TEST(Mcap, RecordLongerThanTheFileIsRejected) {
  std::vector<uint8_t> f = {0x89, 'M', 'C', 'A', 'P', '0', '\r', '\n', 0x01};
  for (int k = 0; k < 8; ++k) f.push_back(0xff);
  f.insert(f.end(), 8, 0);
  const Status s =
      ReadMcap(f.data(), f.size(), "long.mcap", [](const McapRecord&) { return Status::Ok(); });
  EXPECT_EQ(s.message(),
            "long.mcap: offset 8: Header record of 18446744073709551615 bytes runs past the end "
            "of the file (25 bytes)");
}

TEST(Mcap, MissingFileIsAnIoError) {
  const Status s =
      ReadMcapFile("/nonexistent/x.mcap", [](const McapRecord&) { return Status::Ok(); });
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_NE(s.message().find("/nonexistent/x.mcap"), std::string::npos);
}

}  // namespace
}  // namespace dv::recorded
