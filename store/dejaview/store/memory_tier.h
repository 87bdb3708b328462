// Memory tier: a byte-bounded cache with least-recently-used eviction. It is never the only
// copy of an acknowledged object (the store acknowledges after the disk tier), so evicting is
// always safe.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "dejaview/store/tier.h"

namespace dv::store {

class MemoryTier : public Tier {
 public:
  explicit MemoryTier(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}
  const char* name() const override { return "memory"; }
  // An object larger than the whole budget is kOutOfRange (the cache stays as it was).
  Status Put(const ObjectId& id, const uint8_t* data, size_t size) override;
  StatusOr<uint64_t> Size(const ObjectId& id) override;
  Status ReadRange(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out) override;
  std::vector<ObjectId> List() override;
  Status Delete(const ObjectId& id) override;
  uint64_t bytes() override;
  uint64_t objects() override;

 private:
  using Bytes = std::shared_ptr<const std::vector<uint8_t>>;
  struct Entry {
    ObjectId id;
    Bytes data;
  };
  const uint64_t budget_bytes_;
  std::mutex mu_;
  std::list<Entry> lru_;  // front = most recently used
  std::unordered_map<ObjectId, std::list<Entry>::iterator, ObjectIdHash> index_;
  uint64_t bytes_ = 0;
};

}  // namespace dv::store
