// Tiers, packs, the copy journal and the config parser, without a remote server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "dejaview/base/file_util.h"
#include "dejaview/store/config.h"
#include "dejaview/store/copy_journal.h"
#include "dejaview/store/disk_tier.h"
#include "dejaview/store/memory_tier.h"
#include "dejaview/store/pack.h"
#include "dejaview/store/tier_path.h"
#include "testutil.h"

namespace dv::store {
namespace {

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(seed * 31 + i * 7 + (i >> 8));
  return b;
}

TEST(ObjectId, HashAndHexRoundTrip) {
  const auto b = Bytes(100, 1);
  const ObjectId id = ComputeId(b.data(), b.size());
  // BLAKE2b-256 of the empty string, from RFC 7693's reference implementation.
  EXPECT_EQ(ComputeId(nullptr, 0).Hex(),
            "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
  auto back = ObjectId::FromHex(id.Hex());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, id);
  EXPECT_EQ(ObjectId::FromHex("xyz").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ObjectId::FromHex(std::string(64, 'G')).status().code(),
            Status::Code::kInvalidArgument);
}

TEST(TierPath, EstimateDrainsTheQueueAtTheAggregateRateThenServesTheRequest) {
  EXPECT_DOUBLE_EQ(EstimateFinishS(0, 1000000, 4000, 1000), 0.001);
  EXPECT_DOUBLE_EQ(EstimateFinishS(4000000, 1000000, 4000, 1000), 0.002);
  EXPECT_DOUBLE_EQ(EstimateFinishS(8000000, 2000000, 4000, 500), 0.006);
  // The store bench's tiers: disk 4000 MB/s, 1000 per request; remote 320, 40 per request; 1 MiB
  // chunks. A chunk waits for a remote request's own 26 ms, so the prefetch window (16 objects of
  // 4 MiB) stays on disk and the remote tier takes work only behind a longer disk queue.
  const uint64_t chunk = 1 << 20;
  const double remote_idle = EstimateFinishS(0, chunk, 320, 40);
  EXPECT_LT(EstimateFinishS(64 * chunk, chunk, 4000, 1000), remote_idle);
  EXPECT_GT(EstimateFinishS(128 * chunk, chunk, 4000, 1000), remote_idle);
  // Equal aggregate rates: an idle path of slow requests loses to a busy path of fast ones until
  // the busy one's queue costs more than the slow request.
  EXPECT_LT(EstimateFinishS(3 * chunk, chunk, 400, 100), EstimateFinishS(0, chunk, 400, 50));
  EXPECT_GT(EstimateFinishS(5 * chunk, chunk, 400, 100), EstimateFinishS(0, chunk, 400, 50));
}

TEST(MemoryTier, EvictsLeastRecentlyUsedWithinBudget) {
  MemoryTier tier(250);
  const auto a = Bytes(100, 1), b = Bytes(100, 2), c = Bytes(100, 3);
  const ObjectId ia = ComputeId(a.data(), a.size()), ib = ComputeId(b.data(), b.size()),
                 ic = ComputeId(c.data(), c.size());
  ASSERT_TRUE(tier.Put(ia, a.data(), a.size()).ok());
  ASSERT_TRUE(tier.Put(ib, b.data(), b.size()).ok());
  ASSERT_TRUE(tier.Get(ia).ok());  // a is now more recent than b
  ASSERT_TRUE(tier.Put(ic, c.data(), c.size()).ok());
  EXPECT_TRUE(tier.Has(ia));
  EXPECT_FALSE(tier.Has(ib));
  EXPECT_TRUE(tier.Has(ic));
  EXPECT_EQ(tier.bytes(), 200u);
  EXPECT_EQ(tier.objects(), 2u);
  uint8_t out[10];
  ASSERT_TRUE(tier.ReadRange(ic, 90, 10, out).ok());
  EXPECT_TRUE(std::equal(out, out + 10, c.begin() + 90));
  EXPECT_EQ(tier.ReadRange(ic, 95, 10, out).code(), Status::Code::kOutOfRange);
  const auto big = Bytes(300, 4);
  EXPECT_EQ(tier.Put(ComputeId(big.data(), big.size()), big.data(), big.size()).code(),
            Status::Code::kOutOfRange);
  EXPECT_EQ(tier.objects(), 2u);
}

TEST(DiskTier, PersistsShardsAndEnforcesBudget) {
  const std::string dir = test::ScratchDir() + "/disk";
  const auto a = Bytes(1000, 1), b = Bytes(600, 2);
  const ObjectId ia = ComputeId(a.data(), a.size()), ib = ComputeId(b.data(), b.size());
  {
    auto tier = DiskTier::Open(dir, 1500);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    ASSERT_TRUE((*tier)->Put(ia, a.data(), a.size()).ok());
    ASSERT_TRUE((*tier)->Put(ia, a.data(), a.size()).ok());  // idempotent
    const Status full = (*tier)->Put(ib, b.data(), b.size());
    EXPECT_EQ(full.code(), Status::Code::kUnavailable) << full.ToString();
    EXPECT_EQ((*tier)->bytes(), 1000u);
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + ia.Hex().substr(0, 2) + "/" + ia.Hex()));
  // A torn write leaves a .tmp file: Open removes it and does not count it.
  std::ofstream(dir + "/ab.tmp") << "torn";
  auto tier = DiskTier::Open(dir, 1500);
  ASSERT_TRUE(tier.ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/ab.tmp"));
  EXPECT_EQ((*tier)->objects(), 1u);
  auto got = (*tier)->Get(ia);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, a);
  uint8_t out[3];
  ASSERT_TRUE((*tier)->ReadRange(ia, 997, 3, out).ok());
  EXPECT_TRUE(std::equal(out, out + 3, a.begin() + 997));
  ASSERT_TRUE((*tier)->Delete(ia).ok());
  EXPECT_EQ((*tier)->bytes(), 0u);
  EXPECT_EQ((*tier)->Delete(ia).code(), Status::Code::kNotFound);
  // A stray file is not silently adopted.
  std::ofstream(dir + "/notes.txt") << "x";
  auto bad = DiskTier::Open(dir, 1500);
  EXPECT_EQ(bad.status().code(), Status::Code::kCorruption);
  EXPECT_NE(bad.status().message().find("notes.txt"), std::string::npos);
}

TEST(DiskTier, DirectIoReadsUnalignedRanges) {
  auto tier = DiskTier::Open(test::ScratchDir() + "/disk", 1 << 20, /*direct_io=*/true);
  ASSERT_TRUE(tier.ok());
  const auto a = Bytes(10000, 5);  // not a multiple of the 4096-byte block
  const ObjectId id = ComputeId(a.data(), a.size());
  ASSERT_TRUE((*tier)->Put(id, a.data(), a.size()).ok());
  for (const auto& [offset, length] :
       std::vector<std::pair<uint64_t, uint64_t>>{{0, 10000}, {1, 4095}, {4095, 2}, {8191, 1809}}) {
    std::vector<uint8_t> out(length);
    ASSERT_TRUE((*tier)->ReadRange(id, offset, length, out.data()).ok()) << offset;
    EXPECT_TRUE(std::equal(out.begin(), out.end(), a.begin() + long(offset))) << offset;
  }
  uint8_t one;
  EXPECT_EQ((*tier)->ReadRange(id, 10000, 1, &one).code(), Status::Code::kOutOfRange);
}

TEST(Pack, RoundTripAndMalformedHeaders) {
  const auto a = Bytes(10, 1), b = Bytes(0, 2), c = Bytes(77, 3);
  const std::vector<PackMember> members = {{ComputeId(a.data(), a.size()), a.data(), a.size()},
                                           {ComputeId(b.data(), b.size()), b.data(), b.size()},
                                           {ComputeId(c.data(), c.size()), c.data(), c.size()}};
  const std::vector<uint8_t> pack = BuildPack(members);
  auto header_len = ParsePackPrefix(pack.data(), pack.size(), "p");
  ASSERT_TRUE(header_len.ok());
  auto entries = ParsePackHeader(pack.data() + kPackPrefixBytes, *header_len + 4, "p");
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const PackEntry& e = (*entries)[i];
    EXPECT_EQ(e.id, members[i].id);
    ASSERT_EQ(e.length, members[i].size);
    EXPECT_TRUE(std::equal(pack.begin() + long(e.offset), pack.begin() + long(e.offset + e.length),
                           members[i].data));
  }
  EXPECT_EQ(pack.size(), (*entries)[2].offset + 77);
  // Truncated prefix, bad magic, flipped header bit, and a header_len beyond the limit.
  EXPECT_EQ(ParsePackPrefix(pack.data(), 8, "p").status().code(), Status::Code::kCorruption);
  auto bad = pack;
  bad[0] ^= 1;
  EXPECT_NE(ParsePackPrefix(bad.data(), bad.size(), "p").status().message().find("magic"),
            std::string::npos);
  bad = pack;
  bad[kPackPrefixBytes + 3] ^= 1;
  EXPECT_NE(ParsePackHeader(bad.data() + kPackPrefixBytes, *header_len + 4, "p")
                .status()
                .message()
                .find("CRC"),
            std::string::npos);
  bad = pack;
  bad[11] = 0x7f;
  EXPECT_EQ(ParsePackPrefix(bad.data(), bad.size(), "p").status().code(),
            Status::Code::kCorruption);
}

TEST(CopyJournal, ReplaysAndDropsTornTail) {
  const std::string path = test::ScratchDir() + "/copy.journal";
  const auto a = Bytes(5, 1), b = Bytes(5, 2), c = Bytes(5, 3);
  const ObjectId ia = ComputeId(a.data(), 5), ib = ComputeId(b.data(), 5),
                 ic = ComputeId(c.data(), 5);
  {
    JournalState st;
    auto j = CopyJournal::Open(path, &st);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    EXPECT_TRUE(st.copied.empty());
    ASSERT_TRUE((*j)->AppendIntent({"packs/1", {ia, ib}}).ok());
    ASSERT_TRUE((*j)->AppendDone("packs/1").ok());
    ASSERT_TRUE((*j)->AppendIntent({"packs/2", {ic}}).ok());
  }
  auto bytes = ReadFileBytes(path);
  ASSERT_TRUE(bytes.ok());
  JournalState full = ReplayJournal(bytes->data(), bytes->size());
  EXPECT_EQ(full.copied.size(), 2u);
  ASSERT_EQ(full.unfinished.size(), 1u);
  EXPECT_EQ(full.unfinished[0].pack_key, "packs/2");
  EXPECT_EQ(full.unfinished[0].members, std::vector<ObjectId>{ic});
  EXPECT_EQ(full.dropped_tail_bytes, 0u);
  // Every truncation of the last record drops exactly that record and keeps the rest.
  const size_t last_record = 4 + 4 + 1 + 1 + 7 + 1 + 32;
  for (size_t cut = 1; cut < last_record; ++cut) {
    JournalState s = ReplayJournal(bytes->data(), bytes->size() - cut);
    EXPECT_EQ(s.copied.size(), 2u);
    EXPECT_TRUE(s.unfinished.empty());
    EXPECT_EQ(s.dropped_tail_bytes, last_record - cut);
  }
  // Reopening compacts to a snapshot and keeps the unfinished intent.
  JournalState st;
  ASSERT_TRUE(CopyJournal::Open(path, &st).ok());
  EXPECT_EQ(st.copied.size(), 2u);
  ASSERT_EQ(st.unfinished.size(), 1u);
  auto again = ReadFileBytes(path);
  JournalState re = ReplayJournal(again->data(), again->size());
  EXPECT_EQ(re.copied, st.copied);
  EXPECT_EQ(re.unfinished.size(), 1u);
}

TEST(StoreConfig, ParsesTiersAndNamesBadKeys) {
  ::setenv("AWS_ACCESS_KEY_ID", "k", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
  auto c = ParseStoreConfig(R"(
memory: {budget_bytes: 1000, max_inflight: 2}
disk: {dir: /tmp/x, budget_bytes: 5000}
remote: {endpoint: "http://127.0.0.1:9", bucket: b, prefix: "p/", max_inflight: 3}
copier: {concurrency: 2, pack_target_bytes: 4096}
read: {chunk_bytes: 65536}
)",
                            "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->memory.budget_bytes, 1000u);
  EXPECT_EQ(c->memory.max_inflight, 2);
  EXPECT_EQ(c->disk.dir, "/tmp/x");
  EXPECT_TRUE(c->remote.enabled());
  EXPECT_EQ(c->remote.access_key, "k");
  EXPECT_EQ(c->remote.max_inflight, 3);
  EXPECT_EQ(c->copier.concurrency, 2);
  EXPECT_EQ(c->read.chunk_bytes, 65536u);
  const std::pair<const char*, const char*> bad[] = {
      {"memory: {budget_bytes: 1}", "t.yaml: disk.dir: required"},
      {"disk: {dir: /x, budget_bytes: lots}",
       "t.yaml:1:31: disk.budget_bytes: expected an integer, got 'lots'"},
      {"disk: {dir: /x, colour: red}", "t.yaml:1:17: disk.colour: unknown key"},
      {"disk: {dir: /x, max_inflight: 0}",
       "t.yaml:1:31: disk.max_inflight: 0 is out of range [1, 256]"},
      {"disk: {dir: /x}\nremote: {endpoint: nowhere, bucket: b}",
       "t.yaml: remote.endpoint: expected http://host:port, got 'nowhere'"},
      {"disk: {dir: /x}\nremote: {endpoint: 'http://h:1'}", "t.yaml: remote.bucket: required"},
      {"disk: [1, 2", "t.yaml:1:1: YAML syntax error: end of sequence flow not found"},
      {"- 1\n- 2", "t.yaml:1:1: (top level): expected a mapping, got a list"},
  };
  for (const auto& [yaml, want] : bad) {
    auto r = ParseStoreConfig(yaml, "t.yaml");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  auto no_creds =
      ParseStoreConfig("disk: {dir: /x}\nremote: {endpoint: 'http://h:1', bucket: b}", "t.yaml");
  EXPECT_NE(no_creds.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
}

}  // namespace
}  // namespace dv::store
