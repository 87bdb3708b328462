#include "dejaview/store/store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace dv::store {

struct Reader::Slot {
  ObjectId id;
  std::vector<uint8_t> bytes;
  std::mutex mu;
  std::condition_variable cv;
  int chunks_left = 0;
  Status status;
};

StatusOr<std::unique_ptr<Store>> Store::Open(const StoreConfig& config) {
  std::unique_ptr<Store> store(new Store(config));
  store->memory_ = std::make_unique<MemoryTier>(config.memory.budget_bytes);
  // Objects and the journal side by side: the tier owns every file under objects/.
  DV_ASSIGN_OR_RETURN(store->disk_,
                      DiskTier::Open(config.disk.dir + "/objects", config.disk.budget_bytes,
                                     config.disk.direct_io));
  store->paths_.push_back(std::make_unique<TierPath>(store->memory_.get(), config.memory.limits()));
  store->paths_.push_back(std::make_unique<TierPath>(store->disk_.get(), config.disk.limits()));
  if (config.remote.enabled()) {
    DV_ASSIGN_OR_RETURN(store->remote_, RemoteTier::Open(config.remote, config.remote.prefix));
    for (const std::string& why : store->remote_->unreadable_packs()) {
      spdlog::warn("remote tier: pack left out of the index until its copy is redone: {}", why);
    }
    store->paths_.push_back(
        std::make_unique<TierPath>(store->remote_.get(), config.remote.limits()));
    JournalState state;
    const std::string journal =
        config.copier.journal.empty() ? config.disk.dir + "/copy.journal" : config.copier.journal;
    DV_ASSIGN_OR_RETURN(store->journal_, CopyJournal::Open(journal, &state));
    if (state.dropped_tail_bytes > 0) {
      spdlog::warn("{}: dropped a torn tail of {} bytes", journal, state.dropped_tail_bytes);
    }
    DV_RETURN_IF_ERROR(store->Recover(std::move(state)));
    for (int i = 0; i < config.copier.concurrency; ++i) {
      store->copiers_.emplace_back([s = store.get()] { s->CopyWorker(); });
    }
  }
  return store;
}

// Rebuilds the copier's queues: unfinished intents first (same members, same order), then every
// object on disk that is neither copied nor already in the remote index (another server sharing
// the bucket may have uploaded it: content ids make that a deduplication, not a conflict).
Status Store::Recover(JournalState state) {
  std::unordered_set<ObjectId, ObjectIdHash> in_intent;
  const auto now = Clock::now();
  for (CopyIntent& intent : state.unfinished) {
    Batch b;
    for (const ObjectId& id : intent.members) {
      in_intent.insert(id);
      queued_.insert(id);
      auto size = disk_->Size(id);
      b.members.push_back({id, size.ok() ? *size : 0, now});
    }
    b.intent = std::move(intent);
    redo_.push_back(std::move(b));
  }
  copied_ = std::move(state.copied);
  for (const ObjectId& id : disk_->List()) {
    if (in_intent.count(id)) continue;
    if (copied_.count(id) || remote_->Has(id)) {
      copied_.insert(id);
      evictable_.push_back(id);
      continue;
    }
    const uint64_t size = *disk_->Size(id);
    queued_.insert(id);
    pending_.push_back({id, size, now});
    pending_bytes_ += size;
  }
  return Status::Ok();
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  copy_cv_.notify_all();
  for (std::thread& t : copiers_) t.join();
}

void Store::FreeDisk(uint64_t need) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!evictable_.empty() && disk_->bytes() + need > disk_->budget_bytes()) {
    const ObjectId id = evictable_.front();
    evictable_.pop_front();
    const Status st = disk_->Delete(id);
    if (!st.ok() && st.code() != Status::Code::kNotFound) spdlog::warn("{}", st.ToString());
  }
}

StatusOr<ObjectId> Store::Put(const uint8_t* data, size_t size, bool hold_copy) {
  const ObjectId id = ComputeId(data, size);
  memory_->Put(id, data, size).ok();  // a cache: an object over its budget simply is not kept
  if (!disk_->Has(id)) {
    if (remote_) {
      std::lock_guard<std::mutex> lock(mu_);
      last_put_ = Clock::now();
      if (copied_.count(id) || remote_->Has(id)) return id;
    }
    FreeDisk(size);
    DV_RETURN_IF_ERROR(disk_->Put(id, data, size));
  }
  if (!hold_copy) ReleaseCopies({id});
  return id;
}

void Store::ReleaseCopies(const std::vector<ObjectId>& ids) {
  if (!remote_) return;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const ObjectId& id : ids) {
      if (copied_.count(id) || remote_->Has(id)) continue;
      auto size = disk_->Size(id);
      if (!size.ok() || !queued_.insert(id).second) continue;  // not here, or already queued
      pending_.push_back({id, *size, Clock::now()});
      pending_bytes_ += *size;
      queued = true;
    }
  }
  if (queued) copy_cv_.notify_all();
}

Status Store::Discard(const ObjectId& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_.count(id) || copied_.count(id)) return Status::Ok();
  }
  (void)memory_->Delete(id);
  const Status st = disk_->Delete(id);
  return st.code() == Status::Code::kNotFound ? Status::Ok() : st;
}

// Takes the next batch: a redo, one large object, or small objects up to pack_target_bytes.
// Small objects wait up to coalesce_ms from the oldest one's arrival for a pack to fill.
bool Store::TakeBatch(std::unique_lock<std::mutex>& lock, Batch* batch) {
  for (;;) {
    if (stop_) return false;
    if (!redo_.empty()) {
      *batch = std::move(redo_.front());
      redo_.pop_front();
      return true;
    }
    if (pending_.empty()) {
      copy_cv_.wait(lock);
      continue;
    }
    uint64_t small_bytes = 0;
    bool large = pending_.front().size > config_.copier.small_object_bytes;
    for (size_t i = 0;
         !large && i < pending_.size() && small_bytes < config_.copier.pack_target_bytes; ++i) {
      small_bytes += pending_[i].size;
    }
    const auto deadline =
        pending_.front().since + std::chrono::milliseconds(config_.copier.coalesce_ms);
    if (!large && small_bytes < config_.copier.pack_target_bytes && Clock::now() < deadline) {
      copy_cv_.wait_until(lock, deadline);
      continue;
    }
    if (config_.copier.idle_ms > 0 && flushing_ == 0) {
      const auto quiet = last_put_ + std::chrono::milliseconds(config_.copier.idle_ms);
      const auto forced =
          pending_.front().since + std::chrono::milliseconds(config_.copier.max_delay_ms);
      if (Clock::now() < std::min(quiet, forced)) {
        copy_cv_.wait_until(lock, std::min(quiet, forced));
        continue;
      }
    }
    uint64_t bytes = 0;
    while (!pending_.empty()) {
      const Pending& p = pending_.front();
      const bool is_large = p.size > config_.copier.small_object_bytes;
      if (!batch->members.empty() &&
          (is_large || bytes + p.size > config_.copier.pack_target_bytes)) {
        break;
      }
      batch->members.push_back(p);
      bytes += p.size;
      pending_.pop_front();
      if (is_large) break;
    }
    return true;
  }
}

Status Store::CopyBatch(Batch* batch) {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<PackMember> members;
  for (const Pending& p : batch->members) {
    DV_ASSIGN_OR_RETURN(std::vector<uint8_t> b, disk_->Get(p.id));
    bytes.push_back(std::move(b));
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    members.push_back({batch->members[i].id, bytes[i].data(), bytes[i].size()});
  }
  const std::vector<uint8_t> pack = BuildPack(members);
  const std::string key = remote_->PackKey(pack);
  if (batch->intent.pack_key.empty()) {
    batch->intent.pack_key = key;
    for (const Pending& p : batch->members) batch->intent.members.push_back(p.id);
    DV_RETURN_IF_ERROR(journal_->AppendIntent(batch->intent));
  } else if (batch->intent.pack_key != key) {
    return Status::Corruption("copy journal: redo of pack " + batch->intent.pack_key +
                              " rebuilt different bytes (" + key + ")");
  }
  // A redo whose PUT completed before the crash is already indexed: only its done is missing.
  if (!remote_->HasPack(key)) DV_RETURN_IF_ERROR(remote_->PutPackBytes(pack));
  return journal_->AppendDone(key);
}

void Store::CopyWorker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Batch batch;
    if (!TakeBatch(lock, &batch)) return;
    batches_in_flight_++;
    lock.unlock();
    const Status st = CopyBatch(&batch);
    lock.lock();
    batches_in_flight_--;
    if (st.ok()) {
      for (const Pending& p : batch.members) {
        copied_.insert(p.id);
        queued_.erase(p.id);
        evictable_.push_back(p.id);
        pending_bytes_ -= std::min(pending_bytes_, p.size);
      }
      objects_copied_ += batch.members.size();
      packs_uploaded_++;
    } else {
      copy_errors_++;
      last_copy_error_ = st.ToString();
      spdlog::warn("copier: {}", last_copy_error_);
      if (st.code() == Status::Code::kNotFound || st.code() == Status::Code::kCorruption) {
        // A member's disk copy is gone or differs: retrying now cannot help. The error stays
        // in the metrics; objects still on disk are queued again at the next Open.
        for (const Pending& p : batch.members) {
          queued_.erase(p.id);
          pending_bytes_ -= std::min(pending_bytes_, p.size);
        }
      } else {
        // Unavailable remote: retry later, in the same pack (its intent may be journaled).
        redo_.push_front(std::move(batch));
        copy_cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
      }
    }
    flush_cv_.notify_all();
  }
}

Status Store::Flush(int timeout_ms) {
  if (!remote_) return Status::Ok();
  std::unique_lock<std::mutex> lock(mu_);
  ++flushing_;
  copy_cv_.notify_all();  // copiers held by the idle gate start now
  const bool done = flush_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] {
    return pending_.empty() && redo_.empty() && batches_in_flight_ == 0;
  });
  --flushing_;
  if (done) return Status::Ok();
  return Status::Unavailable("store flush: " + std::to_string(pending_.size() + redo_.size()) +
                             " copies still pending after " + std::to_string(timeout_ms) + " ms" +
                             (last_copy_error_.empty() ? "" : "; last error: " + last_copy_error_));
}

StoreMetrics Store::Metrics() {
  StoreMetrics m;
  for (auto& path : paths_) m.tiers.push_back(path->Metrics());
  std::lock_guard<std::mutex> lock(mu_);
  m.copy_pending_objects = pending_.size();
  for (const Batch& b : redo_) m.copy_pending_objects += b.members.size();
  m.copy_pending_bytes = pending_bytes_;
  if (!pending_.empty()) {
    m.copy_lag_s = std::chrono::duration<double>(Clock::now() - pending_.front().since).count();
  }
  m.objects_copied = objects_copied_;
  m.packs_uploaded = packs_uploaded_;
  m.copy_errors = copy_errors_;
  m.last_copy_error = last_copy_error_;
  return m;
}

StatusOr<std::vector<uint8_t>> Store::Get(const ObjectId& id) {
  ReadOptions options;
  options.prefetch_objects = 0;
  return Read({id}, options)->Next();
}

std::unique_ptr<Reader> Store::Read(std::vector<ObjectId> ids, const ReadOptions& options) {
  return std::unique_ptr<Reader>(new Reader(this, std::move(ids), options));
}

Reader::Reader(Store* store, std::vector<ObjectId> ids, const ReadOptions& options)
    : store_(store), ids_(std::move(ids)), options_(options) {
  while (planned_ < ids_.size() && planned_ <= options_.prefetch_objects) Plan(planned_++);
}

Reader::~Reader() {
  // Chunks still in flight write into their slots; wait so no worker outlives its buffer owner
  // in a way that matters (slots are shared, but the store may be closed right after).
  for (auto& slot : window_) {
    std::unique_lock<std::mutex> lock(slot->mu);
    slot->cv.wait(lock, [&] { return slot->chunks_left == 0; });
  }
}

// Splits one object into chunks and sends each to the path that would finish it first.
void Reader::Plan(size_t index) {
  auto slot = std::make_shared<Slot>();
  slot->id = ids_[index];
  window_.push_back(slot);
  const bool allowed[3] = {options_.use_memory, options_.use_disk, options_.use_remote};
  std::vector<TierPath*> sources;
  uint64_t size = 0;
  for (size_t i = 0; i < store_->paths_.size(); ++i) {
    if (!allowed[i]) continue;
    TierPath* path = store_->paths_[i].get();
    auto s = path->tier()->Size(slot->id);
    if (s.ok()) {
      sources.push_back(path);
      size = *s;
    } else {
      path->CountMiss();
    }
  }
  if (sources.empty()) {
    slot->status = Status::NotFound("store: object " + slot->id.Hex() + " is in no tier read");
    return;
  }
  slot->bytes.resize(size);
  const uint64_t chunk = store_->config_.read.chunk_bytes;
  const uint64_t chunks = size == 0 ? 1 : (size + chunk - 1) / chunk;  // an empty object: one
  // Each chunk is queued as soon as it is placed, so the next one sees it in the queue estimate.
  slot->chunks_left = int(chunks);
  std::vector<bool> used(sources.size(), false);
  for (uint64_t c = 0; c < chunks; ++c) {
    const uint64_t off = c * chunk;
    const uint64_t len = std::min(chunk, size - off);
    size_t best = 0;
    double best_s = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < sources.size(); ++i) {
      const double s = sources[i]->EstimatedFinishS(len);
      if (s < best_s) {
        best_s = s;
        best = i;
      }
    }
    used[best] = true;
    sources[best]->Submit(slot->id, off, len, slot->bytes.data() + off, [slot](const Status& st) {
      std::lock_guard<std::mutex> lock(slot->mu);
      if (!st.ok() && slot->status.ok()) slot->status = st;
      if (--slot->chunks_left == 0) slot->cv.notify_all();
    });
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    if (used[i]) sources[i]->CountHit();
  }
}

StatusOr<std::vector<uint8_t>> Reader::Next() {
  if (Done()) return Status::OutOfRange("reader: no objects left");
  std::shared_ptr<Slot> slot = window_.front();
  window_.pop_front();
  next_++;
  if (planned_ < ids_.size()) Plan(planned_++);
  {
    std::unique_lock<std::mutex> lock(slot->mu);
    slot->cv.wait(lock, [&] { return slot->chunks_left == 0; });
  }
  if (!slot->status.ok()) return slot->status;
  if (options_.verify && ComputeId(slot->bytes.data(), slot->bytes.size()) != slot->id) {
    return Status::Corruption("store: object " + slot->id.Hex() + " read back with other bytes");
  }
  return std::move(slot->bytes);
}

}  // namespace dv::store
