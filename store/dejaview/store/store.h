// The tiered store of the server's training side. Write path (the DataStates-LLM idea): Put
// acknowledges once the object is durable on the local disk tier (fsync); a background copier
// then moves sealed objects to the remote tier lazily, coalescing small ones into packs, with at
// most copy_concurrency uploads at once, recording each pack in a durable journal so that a
// restart resumes the copies and never uploads an object twice. Read path (the MLP-Offload
// idea): a reader names the objects it will consume; the store serves each from whichever tiers
// hold it, splitting large objects into chunks spread over the tiers by measured bandwidth, each
// tier with a bounded number of requests in flight, and prefetches in request order.
//
// A caller may rely on: an id returned by Put is readable after any crash and restart; objects
// read back are verified against their id (ReadOptions::verify).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "dejaview/store/config.h"
#include "dejaview/store/copy_journal.h"
#include "dejaview/store/disk_tier.h"
#include "dejaview/store/memory_tier.h"
#include "dejaview/store/remote_tier.h"
#include "dejaview/store/tier_path.h"

namespace dv::store {

struct StoreMetrics {
  std::vector<TierMetrics> tiers;  // memory, disk, remote (when configured)
  uint64_t copy_pending_objects = 0;
  uint64_t copy_pending_bytes = 0;  // copy lag in bytes
  double copy_lag_s = 0;            // age of the oldest object not yet remote
  uint64_t objects_copied = 0;      // since Open
  uint64_t packs_uploaded = 0;      // since Open
  uint64_t copy_errors = 0;
  std::string last_copy_error;
};

struct ReadOptions {
  bool use_memory = true;
  bool use_disk = true;
  bool use_remote = true;
  size_t prefetch_objects = 8;  // objects requested ahead of the one being consumed
  bool verify = true;           // check each object against its id
};

class Store;

// Objects of one read, in the order asked. Not thread-safe (one consumer).
class Reader {
 public:
  ~Reader();
  bool Done() const { return next_ >= ids_.size(); }
  // The next object; an object no allowed tier holds is kNotFound.
  StatusOr<std::vector<uint8_t>> Next();

 private:
  friend class Store;
  struct Slot;
  Reader(Store* store, std::vector<ObjectId> ids, const ReadOptions& options);
  void Plan(size_t index);

  Store* store_;
  std::vector<ObjectId> ids_;
  ReadOptions options_;
  std::deque<std::shared_ptr<Slot>> window_;
  size_t planned_ = 0;
  size_t next_ = 0;
};

class Store {
 public:
  static StatusOr<std::unique_ptr<Store>> Open(const StoreConfig& config);
  // Stops the copier after the uploads in progress; what is pending resumes at the next Open.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Seals data as an object; returns once it is durable (on disk, or already remote). With
  // hold_copy the copier leaves it alone until ReleaseCopies: a caller that records a reference
  // elsewhere first (the frame index) releases what it committed and discards what another
  // writer had already stored, so that a shared bucket never receives the object twice.
  StatusOr<ObjectId> Put(const uint8_t* data, size_t size, bool hold_copy = false);
  void ReleaseCopies(const std::vector<ObjectId>& ids);
  // Deletes a held object from memory and disk; one already queued or copied is kept.
  Status Discard(const ObjectId& id);
  StatusOr<std::vector<uint8_t>> Get(const ObjectId& id);
  std::unique_ptr<Reader> Read(std::vector<ObjectId> ids, const ReadOptions& options = {});
  // Waits until every acknowledged object is remote; kUnavailable after timeout_ms.
  Status Flush(int timeout_ms);
  StoreMetrics Metrics();

  MemoryTier* memory() { return memory_.get(); }
  DiskTier* disk() { return disk_.get(); }
  RemoteTier* remote() { return remote_.get(); }  // null without a remote block

 private:
  friend class Reader;
  using Clock = std::chrono::steady_clock;
  struct Pending {
    ObjectId id;
    uint64_t size;
    Clock::time_point since;
  };
  struct Batch {
    CopyIntent intent;  // pack_key empty until built
    std::vector<Pending> members;
  };

  explicit Store(const StoreConfig& config) : config_(config) {}
  Status Recover(JournalState state);
  void CopyWorker();
  bool TakeBatch(std::unique_lock<std::mutex>& lock, Batch* batch);
  Status CopyBatch(Batch* batch);
  void FreeDisk(uint64_t need);

  const StoreConfig config_;
  std::unique_ptr<MemoryTier> memory_;
  std::unique_ptr<DiskTier> disk_;
  std::unique_ptr<RemoteTier> remote_;
  std::unique_ptr<CopyJournal> journal_;
  std::vector<std::unique_ptr<TierPath>> paths_;  // after the tiers: destroyed before them

  std::mutex mu_;
  std::condition_variable copy_cv_;   // work for the copier, or stop
  std::condition_variable flush_cv_;  // a batch finished
  std::deque<Pending> pending_;
  std::deque<Batch> redo_;  // unfinished intents from the journal, copied first
  std::unordered_set<ObjectId, ObjectIdHash> queued_;  // pending or in a batch: never twice
  std::unordered_set<ObjectId, ObjectIdHash> copied_;
  std::deque<ObjectId> evictable_;  // on disk and remote, oldest first
  uint64_t pending_bytes_ = 0;
  int batches_in_flight_ = 0;
  bool stop_ = false;
  int flushing_ = 0;            // Flush calls waiting: the idle gate is open for them
  Clock::time_point last_put_;  // the idle gate (copier.idle_ms) waits for quiet after it
  uint64_t objects_copied_ = 0, packs_uploaded_ = 0, copy_errors_ = 0;
  std::string last_copy_error_;
  std::vector<std::thread> copiers_;
};

}  // namespace dv::store
