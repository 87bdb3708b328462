#include "dejaview/transport/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "dejaview/base/file_util.h"
#include "testutil.h"

namespace dv::transport {
namespace {

namespace fs = std::filesystem;

RecordMeta Meta(uint64_t seq) {
  RecordMeta m;
  m.vehicle = "veh-1";
  m.drive = "drive-20261202";
  m.sensor_id = 3;
  m.sequence = seq;
  m.timestamp_ns = 1'700'000'000'000'000'000 + int64_t(seq) * 100'000'000;
  m.map_version = "a1b2c3";
  m.T_map_sensor = Pose::Identity();
  m.T_map_sensor.translation() = Eigen::Vector3d(1.5 * double(seq), -2.0, 0.25);
  m.T_map_sensor.linear() =
      Eigen::AngleAxisd(0.1 * double(seq), Eigen::Vector3d::UnitZ()).toRotationMatrix();
  return m;
}

// Deterministic payload for record seq, so a read can be checked byte for byte.
std::vector<uint8_t> Payload(uint64_t seq, size_t size) {
  std::vector<uint8_t> p(size);
  for (size_t i = 0; i < size; ++i) p[i] = uint8_t((seq * 131 + i * 7) & 0xff);
  return p;
}

SpoolOptions Options(const std::string& dir) {
  SpoolOptions o;
  o.dir = dir;
  o.sync = SpoolOptions::Sync::kEveryRecord;
  o.segment_bytes = 64 * 1024;
  o.budget_bytes = 64 * 1024 * 1024;
  return o;
}

void AppendN(Spool* spool, uint64_t first_seq, size_t n, size_t size) {
  for (uint64_t s = first_seq; s < first_seq + n; ++s) {
    const auto p = Payload(s, size);
    ASSERT_TRUE(spool->Append(Meta(s), p.data(), p.size()).ok());
  }
}

std::vector<SpoolRecord> ReadAll(Spool* spool) {
  auto r = spool->Read(0, 1'000'000, SIZE_MAX);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<SpoolRecord>{};
}

std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".log") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Extent {
  uint64_t id;
  uint64_t begin;  // offset of the record's first fragment
  uint64_t end;    // offset just past its last fragment
};

// Where each record of a segment lies, read with the log reader alone.
std::vector<Extent> Extents(const std::string& segment) {
  std::vector<Extent> out;
  auto reader = LogReader::Open(segment);
  EXPECT_TRUE(reader.ok());
  if (!reader.ok()) return out;
  std::vector<uint8_t> body;
  uint64_t offset = 0;
  while (*reader->Next(&body, &offset)) {
    const auto rec = DecodeRecord(body.data(), body.size());
    EXPECT_TRUE(rec.ok());
    out.push_back({rec.ok() ? rec->id : UINT64_MAX, offset, reader->end_of_last_record()});
  }
  return out;
}

void FlipBit(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(std::streamoff(offset));
  char c;
  f.get(c);
  f.seekp(std::streamoff(offset));
  f.put(char(c ^ 1));
}

std::vector<uint64_t> Ids(const std::vector<SpoolRecord>& records) {
  std::vector<uint64_t> ids;
  for (const auto& r : records) ids.push_back(r.id);
  return ids;
}

void ExpectRecord(const SpoolRecord& r, uint64_t seq, size_t size) {
  const RecordMeta m = Meta(seq);
  EXPECT_EQ(r.meta.vehicle, m.vehicle);
  EXPECT_EQ(r.meta.drive, m.drive);
  EXPECT_EQ(r.meta.sensor_id, m.sensor_id);
  EXPECT_EQ(r.meta.sequence, seq);
  EXPECT_EQ(r.meta.timestamp_ns, m.timestamp_ns);
  EXPECT_EQ(r.meta.map_version, m.map_version);
  EXPECT_LT((r.meta.T_map_sensor.matrix() - m.T_map_sensor.matrix()).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_EQ(r.payload, Payload(seq, size));
}

TEST(Spool, RoundTripsRecordsAcrossBlocksAndSegments) {
  const std::string dir = test::ScratchDir();
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok()) << spool.status().ToString();
  // 50000 bytes spans two block boundaries (FIRST, MIDDLE, LAST); 20 of them need many segments.
  AppendN(spool->get(), 0, 20, 50000);
  const auto all = ReadAll(spool->get());
  ASSERT_EQ(all.size(), 20u);
  for (uint64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(all[i].id, i);
    ExpectRecord(all[i], i, 50000);
  }
  EXPECT_GT(Segments(dir).size(), 5u);
  const auto batch = (*spool)->Read(7, 3, SIZE_MAX);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 3u);
  EXPECT_EQ((*batch)[0].id, 7u);
  EXPECT_EQ((*batch)[2].id, 9u);
  // Sequential batches (the uploader's pattern, served from the read hint) see every record once.
  uint64_t next = 0;
  std::vector<uint64_t> ids;
  for (;;) {
    auto b = (*spool)->Read(next, 3, SIZE_MAX);
    ASSERT_TRUE(b.ok());
    if (b->empty()) break;
    for (const auto& r : *b) {
      ids.push_back(r.id);
      ExpectRecord(r, r.id, 50000);
    }
    next = b->back().id + 1;
  }
  std::vector<uint64_t> want(20);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(ids, want);
}

TEST(Spool, TruncatesTornTailAndKeepsEverythingBefore) {
  const std::string dir = test::ScratchDir();
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok());
    AppendN(spool->get(), 0, 10, 3000);
  }
  const std::string seg = Segments(dir).back();
  const uint64_t full = fs::file_size(seg);
  fs::resize_file(seg, full - 1000);  // the last record lost its end, as in a crash mid-write
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok()) << spool.status().ToString();
    const SpoolStats st = (*spool)->stats();
    EXPECT_EQ(st.next_id, 9u);
    EXPECT_EQ(st.corrupt_blocks, 0u);
    EXPECT_EQ(st.torn_tail_bytes, full - 1000 - fs::file_size(seg));
    EXPECT_GT(st.torn_tail_bytes, 0u);
    const auto all = ReadAll(spool->get());
    ASSERT_EQ(all.size(), 9u);
    for (uint64_t i = 0; i < 9; ++i) ExpectRecord(all[i], i, 3000);
    // Appends continue on the truncated file and are readable after another restart.
    AppendN(spool->get(), 9, 2, 3000);
  }
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok());
  EXPECT_EQ((*spool)->stats().torn_tail_bytes, 0u);
  const auto all = ReadAll(spool->get());
  ASSERT_EQ(all.size(), 11u);
  for (uint64_t i = 0; i < 11; ++i) ExpectRecord(all[i], i, 3000);
}

TEST(Spool, GarbageTailIsTornNotCorrupt) {
  const std::string dir = test::ScratchDir();
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok());
    AppendN(spool->get(), 0, 4, 1000);
  }
  const std::string seg = Segments(dir).back();
  const uint64_t good = fs::file_size(seg);
  {
    std::ofstream out(seg, std::ios::binary | std::ios::app);
    out << std::string(500, '\x5a');
  }
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok());
  EXPECT_EQ((*spool)->stats().torn_tail_bytes, 500u);
  EXPECT_EQ((*spool)->stats().corrupt_blocks, 0u);
  EXPECT_EQ(fs::file_size(seg), good);
  EXPECT_EQ(ReadAll(spool->get()).size(), 4u);
}

TEST(Spool, SkipsCorruptedBlockInTheMiddleAndCountsIt) {
  const std::string dir = test::ScratchDir();
  SpoolOptions o = Options(dir);
  o.segment_bytes = 1 << 20;  // one segment, several blocks
  {
    auto spool = Spool::Open(o);
    ASSERT_TRUE(spool.ok());
    AppendN(spool->get(), 0, 30, 5000);
  }
  const std::string seg = Segments(dir).back();
  const std::vector<Extent> extent = Extents(seg);
  ASSERT_EQ(extent.size(), 30u);
  FlipBit(seg, kLogBlockSize);  // the CRC of the first fragment in block 1
  std::set<uint64_t> expected;
  for (const Extent& e : extent) {
    const bool touches_block1 = e.begin < 2 * kLogBlockSize && e.end > kLogBlockSize;
    if (!touches_block1) expected.insert(e.id);
  }
  ASSERT_LT(expected.size(), 30u);
  ASSERT_GT(expected.size(), 20u);
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok());
  const SpoolStats st = (*spool)->stats();
  EXPECT_EQ(st.corrupt_blocks, 1u);
  EXPECT_EQ(st.torn_tail_bytes, 0u);
  EXPECT_EQ(st.next_id, 30u);
  EXPECT_EQ(st.records_lost_corrupt, 30 - expected.size());
  EXPECT_EQ(st.records_pending, expected.size());
  std::set<uint64_t> got;
  for (const auto& r : ReadAll(spool->get())) {
    ExpectRecord(r, r.id, 5000);
    got.insert(r.id);
  }
  EXPECT_EQ(got, expected);
}

TEST(Spool, RestartKeepsCursorAndDenseIds) {
  const std::string dir = test::ScratchDir();
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok());
    AppendN(spool->get(), 0, 40, 5000);
    const size_t before = Segments(dir).size();
    ASSERT_TRUE((*spool)->Ack(25).ok());
    EXPECT_LT(Segments(dir).size(), before);  // whole acknowledged segments are deleted
  }
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok());
  EXPECT_EQ((*spool)->stats().acked_below, 25u);
  EXPECT_EQ((*spool)->stats().next_id, 40u);
  AppendN(spool->get(), 40, 5, 5000);
  const auto all = ReadAll(spool->get());
  ASSERT_EQ(all.size(), 20u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].id, 25 + i);
    ExpectRecord(all[i], 25 + i, 5000);
  }
  // Acknowledging everything seals and deletes every segment but a fresh, empty one.
  ASSERT_TRUE((*spool)->Ack(45).ok());
  EXPECT_EQ(Segments(dir).size(), 1u);
  EXPECT_EQ(fs::file_size(Segments(dir)[0]), 0u);
  EXPECT_TRUE(ReadAll(spool->get()).empty());
}

TEST(Spool, CursorIsReplacedAtomically) {
  const std::string dir = test::ScratchDir();
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok());
    AppendN(spool->get(), 0, 10, 100);
    ASSERT_TRUE((*spool)->Ack(4).ok());
  }
  // A crash while writing the next cursor leaves only the temporary file: the old cursor holds.
  ASSERT_TRUE(WriteFileAtomic(dir + "/CURSOR.tmp", std::string("half-written")).ok());
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok());
    EXPECT_EQ((*spool)->stats().acked_below, 4u);
    EXPECT_EQ(ReadAll(spool->get()).front().id, 4u);
    EXPECT_EQ((*spool)->stats().cursor_resets, 0u);
  }
}

// 40 records over several segments, acknowledged up to 25 so that the oldest segments are gone;
// returns the first id of the oldest segment left.
uint64_t SpoolAckedTo25(const std::string& dir) {
  auto spool = Spool::Open(Options(dir));
  EXPECT_TRUE(spool.ok());
  if (!spool.ok()) return 0;
  AppendN(spool->get(), 0, 40, 5000);
  EXPECT_TRUE((*spool)->Ack(25).ok());
  const std::vector<Extent> oldest = Extents(Segments(dir).front());
  EXPECT_FALSE(oldest.empty());
  return oldest.empty() ? 0 : oldest.front().id;
}

// After a cursor reset every record still in the segments is pending again, from the oldest
// (the server deduplicates the resent ones), and the rewritten cursor holds on the next Open.
void ExpectCursorReset(const std::string& dir, uint64_t oldest) {
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok()) << spool.status().ToString();
    const SpoolStats st = (*spool)->stats();
    EXPECT_EQ(st.cursor_resets, 1u);
    EXPECT_EQ(st.acked_below, oldest);
    EXPECT_EQ(st.next_id, 40u);
    EXPECT_EQ(st.records_pending, 40 - oldest);
    EXPECT_EQ(st.oldest_unacked_timestamp_ns, Meta(oldest).timestamp_ns);
    const auto all = ReadAll(spool->get());
    std::vector<uint64_t> want(40 - oldest);
    std::iota(want.begin(), want.end(), oldest);
    EXPECT_EQ(Ids(all), want);
    for (const auto& r : all) ExpectRecord(r, r.id, 5000);
  }
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok());
  EXPECT_EQ((*spool)->stats().cursor_resets, 0u);
  EXPECT_EQ((*spool)->stats().acked_below, oldest);
}

TEST(Spool, CursorWithAFlippedByteResendsFromTheOldestSegment) {
  const std::string dir = test::ScratchDir();
  const uint64_t oldest = SpoolAckedTo25(dir);
  ASSERT_GT(oldest, 0u);
  ASSERT_LT(oldest, 25u);
  FlipBit(dir + "/CURSOR", 9);  // inside acked_below: only the CRC tells
  ExpectCursorReset(dir, oldest);
}

TEST(Spool, TruncatedEmptyOrMissingCursorResendsFromTheOldestSegment) {
  for (const uint64_t size : {uint64_t(10), uint64_t(0), UINT64_MAX}) {
    SCOPED_TRACE(size == UINT64_MAX ? std::string("missing") : std::to_string(size) + " bytes");
    const std::string dir = test::ScratchDir();
    const uint64_t oldest = SpoolAckedTo25(dir);
    ASSERT_GT(oldest, 0u);
    if (size == UINT64_MAX) {
      fs::remove(dir + "/CURSOR");
    } else {
      fs::resize_file(dir + "/CURSOR", size);
    }
    ExpectCursorReset(dir, oldest);
  }
}

TEST(Spool, CursorThatIsNotAFileIsAnError) {
  const std::string dir = test::ScratchDir();
  fs::create_directories(dir + "/CURSOR");
  auto spool = Spool::Open(Options(dir));
  ASSERT_FALSE(spool.ok());
  EXPECT_NE(spool.status().message().find("CURSOR"), std::string::npos);
}

// Records 0..39 over several 64 KiB segments; returns the extents of the segment at index.
std::vector<Extent> FortyRecords(const std::string& dir, size_t index) {
  {
    auto spool = Spool::Open(Options(dir));
    EXPECT_TRUE(spool.ok());
    if (spool.ok()) AppendN(spool->get(), 0, 40, 5000);
  }
  const auto segs = Segments(dir);
  EXPECT_GT(segs.size(), index + 1);  // a sealed segment, not the last
  return segs.size() > index + 1 ? Extents(segs[index]) : std::vector<Extent>{};
}

TEST(Spool, DamageInTheLastBlockOfASealedSegmentIsCountedNotTorn) {
  const std::string dir = test::ScratchDir();
  const std::vector<Extent> extent = FortyRecords(dir, 0);
  ASSERT_FALSE(extent.empty());
  const std::string seg = Segments(dir)[0];
  const uint64_t last_block = (fs::file_size(seg) - 1) / kLogBlockSize * kLogBlockSize;
  ASSERT_GT(last_block, 0u);
  FlipBit(seg, last_block);  // the CRC of the first fragment in the segment's last block
  ASSERT_EQ(extent.back().id + 1, extent.size());  // the oldest segment holds ids 0, 1, ...
  std::vector<uint64_t> intact, lost;
  for (uint64_t id = 0; id < 40; ++id) {
    const bool in_last_block = id < extent.size() && extent[id].end > last_block;
    (in_last_block ? lost : intact).push_back(id);
  }
  ASSERT_GE(lost.size(), 2u);
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok());
  SpoolStats st = (*spool)->stats();
  EXPECT_EQ(st.corrupt_blocks, 1u);
  EXPECT_EQ(st.records_lost_corrupt, lost.size());
  EXPECT_EQ(st.torn_tail_bytes, 0u);
  EXPECT_EQ(st.next_id, 40u);
  EXPECT_EQ(st.records_pending, intact.size());
  const auto all = ReadAll(spool->get());
  EXPECT_EQ(Ids(all), intact);
  for (const auto& r : all) ExpectRecord(r, r.id, 5000);
  // Reading over the damage again finds nothing new.
  EXPECT_EQ((*spool)->stats().corrupt_blocks, 1u);
  EXPECT_EQ((*spool)->stats().records_lost_corrupt, lost.size());
  // Acknowledging up to the lost records moves the cursor past them: nothing waits for them.
  ASSERT_TRUE((*spool)->Ack(lost.front()).ok());
  st = (*spool)->stats();
  EXPECT_EQ(st.acked_below, lost.back() + 1);
  EXPECT_EQ(st.records_pending, 40 - lost.back() - 1);
  EXPECT_EQ(st.oldest_unacked_timestamp_ns, Meta(lost.back() + 1).timestamp_ns);
  EXPECT_EQ(Ids(ReadAll(spool->get())).front(), lost.back() + 1);
}

TEST(Spool, TruncatedSealedSegmentIsCountedNotTorn) {
  const std::string dir = test::ScratchDir();
  const std::vector<Extent> extent = FortyRecords(dir, 0);
  ASSERT_FALSE(extent.empty());
  const std::string seg = Segments(dir)[0];
  fs::resize_file(seg, fs::file_size(seg) - 1000);  // the last record loses its end
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok());
  const SpoolStats st = (*spool)->stats();
  EXPECT_EQ(st.corrupt_blocks, 1u);
  EXPECT_EQ(st.records_lost_corrupt, 1u);
  EXPECT_EQ(st.torn_tail_bytes, 0u);
  EXPECT_EQ(st.records_pending, 39u);
  std::vector<uint64_t> want;
  for (uint64_t id = 0; id < 40; ++id) {
    if (id != extent.back().id) want.push_back(id);
  }
  EXPECT_EQ(Ids(ReadAll(spool->get())), want);
}

TEST(Spool, ReadCountsDamageFoundAfterOpenOnce) {
  const std::string dir = test::ScratchDir();
  {
    auto spool = Spool::Open(Options(dir));
    ASSERT_TRUE(spool.ok());
    AppendN(spool->get(), 0, 40, 5000);
  }
  const auto segs = Segments(dir);
  ASSERT_GT(segs.size(), 2u);
  auto spool = Spool::Open(Options(dir));
  ASSERT_TRUE(spool.ok());
  ASSERT_EQ((*spool)->stats().corrupt_blocks, 0u);
  // Damage while the spool is open: the last block of the second (sealed) segment.
  const std::vector<Extent> extent = Extents(segs[1]);
  const uint64_t last_block = (fs::file_size(segs[1]) - 1) / kLogBlockSize * kLogBlockSize;
  ASSERT_GT(last_block, 0u);
  FlipBit(segs[1], last_block);
  std::set<uint64_t> lost;
  for (const Extent& e : extent) {
    if (e.end > last_block) lost.insert(e.id);
  }
  ASSERT_GE(lost.size(), 2u);
  for (int pass = 0; pass < 2; ++pass) {
    const auto all = ReadAll(spool->get());
    EXPECT_EQ(all.size(), 40 - lost.size());
    for (const auto& r : all) EXPECT_EQ(lost.count(r.id), 0u);
    const SpoolStats st = (*spool)->stats();
    EXPECT_EQ(st.corrupt_blocks, 1u);
    EXPECT_EQ(st.records_lost_corrupt, lost.size());
    EXPECT_EQ(st.records_pending, 40 - lost.size());
  }
}

TEST(Spool, BudgetDropsOldestSegmentsAndCountsRecords) {
  const std::string dir = test::ScratchDir();
  SpoolOptions o = Options(dir);
  o.segment_bytes = 64 * 1024;
  o.budget_bytes = 3 * 64 * 1024;
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok());
  AppendN(spool->get(), 0, 200, 5000);  // ~1 MB into a 192 KiB budget
  const SpoolStats st = (*spool)->stats();
  EXPECT_LE(st.bytes_on_disk, o.budget_bytes);
  EXPECT_GT(st.segments_dropped_budget, 0u);
  const auto all = ReadAll(spool->get());
  ASSERT_FALSE(all.empty());
  // Exactly the oldest records are gone, each counted once; the newest are all there.
  EXPECT_EQ(st.records_dropped_budget + all.size(), 200u);
  EXPECT_EQ(all.front().id, st.records_dropped_budget);
  EXPECT_EQ(all.back().id, 199u);
  EXPECT_EQ(st.acked_below, st.records_dropped_budget);
  for (const auto& r : all) ExpectRecord(r, r.id, 5000);
}

TEST(Spool, RejectsBadOptionsAndNames) {
  SpoolOptions o = Options(test::ScratchDir());
  o.budget_bytes = o.segment_bytes;
  EXPECT_EQ(Spool::Open(o).status().code(), Status::Code::kInvalidArgument);
  auto spool = Spool::Open(Options(test::ScratchDir()));
  ASSERT_TRUE(spool.ok());
  RecordMeta m = Meta(1);
  m.vehicle = "../etc";
  const auto s = (*spool)->Append(m, nullptr, 0);
  EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.status().message().find("vehicle"), std::string::npos);
}

TEST(SpoolRecord, DecodeRejectsEveryTruncation) {
  SpoolRecord rec;
  rec.id = 77;
  rec.meta = Meta(5);
  rec.payload = Payload(5, 64);
  const auto bytes = EncodeRecord(rec);
  auto ok = DecodeRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->id, 77u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeRecord(bytes.data(), n).ok()) << "prefix " << n;
  }
}

}  // namespace
}  // namespace dv::transport
