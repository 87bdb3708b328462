// The store end to end on real files, a real s3rver and real processes: lazy copy with packs,
// restart recovery from the copy journal, a SIGKILL in the middle of copying, multi-path reads.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <thread>

#include "dejaview/base/testing/process_util.h"
#include "dejaview/store/store.h"
#include "dejaview/store/testing/s3rver_process.h"
#include "testutil.h"

namespace dv::store {
namespace {

std::vector<uint8_t> Object(int index, size_t size) {
  std::mt19937 rng{uint32_t(index)};
  std::vector<uint8_t> b(size);
  for (auto& v : b) v = uint8_t(rng());
  return b;
}

StoreConfig Config(const std::string& dir, const S3rverProcess* s3) {
  StoreConfig c;
  c.disk.dir = dir + "/disk";
  c.memory.budget_bytes = 1 << 20;
  if (s3) {
    static_cast<S3Config&>(c.remote) = s3->config();
    c.remote.prefix = "t/";
  }
  c.copier.pack_target_bytes = 64 << 10;
  c.copier.small_object_bytes = 32 << 10;
  c.copier.coalesce_ms = 5;
  c.copier.idle_ms = 0;  // copies alongside puts: the kill tests need them mid-ingest
  c.copier.concurrency = 2;
  c.read.chunk_bytes = 16 << 10;
  return c;
}

// Every pack's members, read straight from the bucket: how many times each id was uploaded.
std::map<ObjectId, int> AuditBucket(const S3rverProcess& s3, const std::string& prefix) {
  auto count = AuditPacks(s3.config(), prefix);
  EXPECT_TRUE(count.ok()) << count.status().ToString();
  return count.ok() ? *count : std::map<ObjectId, int>{};
}

// dir: the test's scratch directory (ScratchDir empties it, so each test calls it once).
std::unique_ptr<S3rverProcess> StartS3rver(const std::string& dir) {
  auto s3 = S3rverProcess::Start(dir + "/s3", "dv-store");
  EXPECT_TRUE(s3.ok()) << s3.status().ToString();
  return s3.ok() ? std::move(*s3) : nullptr;
}

TEST(Store, AcknowledgesOnDiskAndCopiesLazilyInPacks) {
  const std::string dir = test::ScratchDir();
  auto s3 = StartS3rver(dir);
  ASSERT_TRUE(s3);
  std::vector<ObjectId> ids;
  {
    auto store = Store::Open(Config(dir, s3.get()));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int i = 0; i < 40; ++i) {
      const auto b = Object(i, i % 10 == 0 ? 100000 : 3000);  // 4 large, 36 small
      auto id = (*store)->Put(b.data(), b.size());
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids.push_back(*id);
      EXPECT_TRUE((*store)->disk()->Has(*id));  // acknowledged means on disk
    }
    const auto again = Object(1, 3000);  // same bytes: same id, stored once
    EXPECT_EQ(*(*store)->Put(again.data(), again.size()), ids[1]);
    ASSERT_TRUE((*store)->Flush(20000).ok());
    const StoreMetrics m = (*store)->Metrics();
    EXPECT_EQ(m.objects_copied, 40u);
    EXPECT_EQ(m.copy_pending_objects, 0u);
    EXPECT_EQ(m.copy_pending_bytes, 0u);
    // 36 x 3000 bytes pack into 64 KiB packs (at least 2); each large object is its own pack.
    EXPECT_GE(m.packs_uploaded, 4u + 2u);
    EXPECT_LT(m.packs_uploaded, 4u + 36u);
    EXPECT_EQ((*store)->remote()->objects(), 40u);
  }
  const auto count = AuditBucket(*s3, "t/");
  EXPECT_EQ(count.size(), 40u);
  for (const auto& [id, n] : count) EXPECT_EQ(n, 1) << id.Hex();
  // Reopen: nothing is copied again.
  auto store = Store::Open(Config(dir, s3.get()));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Metrics().copy_pending_objects, 0u);
}

// copier.idle_ms: copies wait for a pause in puts (bounded by max_delay_ms); Flush opens the gate.
TEST(Store, IdleGateHoldsCopiesUntilPutsPauseAndFlushOpensIt) {
  const std::string dir = test::ScratchDir();
  auto s3 = StartS3rver(dir);
  ASSERT_TRUE(s3);
  StoreConfig held = Config(dir + "/held", s3.get());
  held.copier.idle_ms = 600'000;       // ten minutes: nothing can be copied within this test but
  held.copier.max_delay_ms = 600'000;  // through Flush
  auto store = Store::Open(held);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (int i = 0; i < 3; ++i) {
    const auto b = Object(i, 3000);
    ASSERT_TRUE((*store)->Put(b.data(), b.size()).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // well past coalesce_ms (5)
  EXPECT_EQ((*store)->Metrics().objects_copied, 0u);
  EXPECT_EQ((*store)->Metrics().copy_pending_objects, 3u);
  ASSERT_TRUE((*store)->Flush(20000).ok());
  EXPECT_EQ((*store)->Metrics().objects_copied, 3u);

  StoreConfig bounded = Config(dir + "/bounded", s3.get());
  bounded.remote.prefix = "b/";
  bounded.copier.idle_ms = 600'000;
  bounded.copier.max_delay_ms = 100;  // continuous ingest still gets its copies this late
  auto store2 = Store::Open(bounded);
  ASSERT_TRUE(store2.ok()) << store2.status().ToString();
  const auto b = Object(9, 3000);
  ASSERT_TRUE((*store2)->Put(b.data(), b.size()).ok());
  EXPECT_TRUE(test::WaitUntil([&] { return (*store2)->Metrics().objects_copied == 1; }, 20));
}

TEST(Store, ReadsFromEveryTierAndSplitsLargeObjects) {
  const std::string dir = test::ScratchDir();
  auto s3 = StartS3rver(dir);
  ASSERT_TRUE(s3);
  StoreConfig config = Config(dir, s3.get());
  config.memory.budget_bytes = 0;  // keep reads on disk and remote
  auto store = Store::Open(config);
  ASSERT_TRUE(store.ok());
  std::vector<ObjectId> ids;
  std::vector<std::vector<uint8_t>> objects;
  for (int i = 0; i < 6; ++i) {
    objects.push_back(Object(100 + i, i < 3 ? 200000 : 5000));
    ids.push_back(*(*store)->Put(objects.back().data(), objects.back().size()));
  }
  ASSERT_TRUE((*store)->Flush(20000).ok());
  struct Case {
    bool disk, remote;
  };
  for (const Case c : {Case{true, false}, Case{false, true}, Case{true, true}}) {
    ReadOptions options;
    options.use_disk = c.disk;
    options.use_remote = c.remote;
    options.prefetch_objects = 3;
    auto reader = (*store)->Read(ids, options);
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_FALSE(reader->Done());
      auto got = reader->Next();
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, objects[i]) << "object " << i;
    }
    EXPECT_TRUE(reader->Done());
    EXPECT_EQ(reader->Next().status().code(), Status::Code::kOutOfRange);
  }
  const StoreMetrics m = (*store)->Metrics();
  ASSERT_EQ(m.tiers.size(), 3u);
  EXPECT_STREQ(m.tiers[1].tier, "disk");
  EXPECT_STREQ(m.tiers[2].tier, "remote");
  const uint64_t total = 3 * 200000 + 3 * 5000;
  // Disk-only and remote-only each read everything once; the multi-path read read every byte once
  // more, from one tier or the other (how it splits depends on measured bandwidth).
  EXPECT_EQ(m.tiers[1].read_bytes + m.tiers[2].read_bytes, 3 * total);
  EXPECT_GE(m.tiers[1].read_bytes, total);
  EXPECT_GE(m.tiers[2].read_bytes, total);
  EXPECT_EQ(m.tiers[0].misses, 18u);  // memory held nothing, asked for every object 3 times
  EXPECT_EQ(m.tiers[0].hits, 0u);
  // Nothing holds an unknown id.
  const auto none = Object(999, 10);
  EXPECT_EQ((*store)->Get(ComputeId(none.data(), none.size())).status().code(),
            Status::Code::kNotFound);
}

TEST(Store, DiskBudgetEvictsOnlyCopiedObjects) {
  const std::string dir = test::ScratchDir();
  auto s3 = StartS3rver(dir);
  ASSERT_TRUE(s3);
  StoreConfig config = Config(dir, s3.get());
  config.disk.budget_bytes = 50000;
  config.memory.budget_bytes = 0;
  auto store = Store::Open(config);
  ASSERT_TRUE(store.ok());
  std::vector<ObjectId> ids;
  for (int i = 0; i < 4; ++i) {
    const auto b = Object(200 + i, 20000);
    auto id = (*store)->Put(b.data(), b.size());
    if (i == 2) {
      // Two pending objects fill 40000 of 50000 bytes; a third cannot be acknowledged until
      // the copier has made the first ones evictable.
      if (!id.ok()) {
        EXPECT_EQ(id.status().code(), Status::Code::kUnavailable) << id.status().ToString();
        ASSERT_TRUE((*store)->Flush(20000).ok());
        id = (*store)->Put(b.data(), b.size());
      }
    }
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
    ASSERT_TRUE((*store)->Flush(20000).ok());
  }
  EXPECT_LE((*store)->disk()->bytes(), 50000u);
  for (int i = 0; i < 4; ++i) {
    auto got = (*store)->Get(ids[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Object(200 + i, 20000));
  }
  EXPECT_LT((*store)->disk()->objects(), 4u);
}

// A crash after the intent was journaled: with and without the PUT having reached the bucket.
TEST(Store, RestartRedoesUnfinishedIntentWithoutDuplicating) {
  const std::string scratch = test::ScratchDir();
  for (const bool put_before_crash : {false, true}) {
    const std::string dir = scratch + (put_before_crash ? "/put" : "/noput");
    auto s3 = StartS3rver(dir);
    ASSERT_TRUE(s3);
    StoreConfig config = Config(dir, nullptr);
    std::vector<std::vector<uint8_t>> objects;
    std::vector<PackMember> members;
    {
      auto store = Store::Open(config);  // no remote: objects only on disk
      ASSERT_TRUE(store.ok());
      for (int i = 0; i < 3; ++i) objects.push_back(Object(300 + i, 1000));
      for (const auto& o : objects) {
        members.push_back({*(*store)->Put(o.data(), o.size()), o.data(), o.size()});
      }
    }
    auto remote = RemoteTier::Open(s3->config(), "t/");
    ASSERT_TRUE(remote.ok());
    const std::vector<uint8_t> pack = BuildPack(members);
    const std::string key = (*remote)->PackKey(pack);
    if (put_before_crash) {
      ASSERT_TRUE((*remote)->PutPackBytes(pack).ok());
    }
    {
      JournalState st;
      auto journal = CopyJournal::Open(config.disk.dir + "/copy.journal", &st);
      ASSERT_TRUE(journal.ok());
      ASSERT_TRUE(
          (*journal)->AppendIntent({key, {members[0].id, members[1].id, members[2].id}}).ok());
    }
    static_cast<S3Config&>(config.remote) = s3->config();
    config.remote.prefix = "t/";
    auto store = Store::Open(config);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Flush(20000).ok());
    const auto count = AuditBucket(*s3, "t/");
    ASSERT_EQ(count.size(), 3u);
    for (const auto& [id, n] : count) EXPECT_EQ(n, 1);
    auto keys = (*remote)->client().ListKeys("t/packs/");
    ASSERT_TRUE(keys.ok());
    EXPECT_EQ(*keys, std::vector<std::string>{key});  // the same pack, not a second one
  }
}

// A real server process is SIGKILLed while it keeps acknowledging and copying; the restarted
// store must hold every acknowledged object, and the bucket must hold each at most once.
TEST(Store, SigkillDuringCopyLosesNothingAndDuplicatesNothing) {
  const std::string dir = test::ScratchDir();
  auto s3 = StartS3rver(dir);
  ASSERT_TRUE(s3);
  // The killed server's copier only uploads full packs, so some acknowledged objects are always
  // waiting for copy when the kill lands; the restarted one also flushes partial packs.
  StoreConfig killed_config = Config(dir, s3.get());
  killed_config.copier.coalesce_ms = 600000;
  const StoreConfig config = Config(dir, s3.get());
  int acks[2];
  ASSERT_EQ(::pipe(acks), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(acks[0]);
    auto store = Store::Open(killed_config);
    if (!store.ok()) ::_exit(2);
    for (int32_t i = 0;; ++i) {  // until killed
      const auto b = Object(i, 1000 + size_t(i % 7) * 3000);
      if (!(*store)->Put(b.data(), b.size()).ok()) ::_exit(3);
      if (::write(acks[1], &i, sizeof i) != sizeof i) ::_exit(4);
    }
  }
  ::close(acks[1]);
  // Kill once the child has acknowledged 300 objects and at least 3 packs are in the bucket.
  S3Client client(s3->config());
  int32_t acked = -1;
  for (int round = 0; round < 100000; ++round) {
    int32_t i;
    ASSERT_EQ(::read(acks[0], &i, sizeof i), ssize_t(sizeof i)) << "server child died";
    acked = i;
    if (acked >= 300 && acked % 20 == 0) {
      auto keys = client.ListKeys("t/packs/");
      ASSERT_TRUE(keys.ok());
      if (keys->size() >= 3) break;
    }
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ::close(acks[0]);

  auto store = Store::Open(config);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_GT((*store)->Metrics().copy_pending_objects, 0u) << "the kill was not mid-copy";
  ASSERT_TRUE((*store)->Flush(30000).ok());
  const auto count = AuditBucket(*s3, "t/");
  for (const auto& [id, n] : count) EXPECT_EQ(n, 1) << id.Hex();
  ReadOptions remote_only;
  remote_only.use_memory = remote_only.use_disk = false;
  std::vector<ObjectId> ids;
  for (int32_t i = 0; i <= acked; ++i) {
    const auto b = Object(i, 1000 + size_t(i % 7) * 3000);
    ids.push_back(ComputeId(b.data(), b.size()));
    EXPECT_EQ(count.count(ids.back()), 1u) << "acknowledged object " << i << " not remote";
  }
  auto reader = (*store)->Read(ids, remote_only);
  for (int32_t i = 0; i <= acked; ++i) {
    auto got = reader->Next();
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    EXPECT_EQ(got->size(), 1000 + size_t(i % 7) * 3000);
  }
}

}  // namespace
}  // namespace dv::store
