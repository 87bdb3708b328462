// Local disk tier: one file per object under DIR/<first two hex digits>/<id hex>, written with
// WriteFileAtomic (temporary name, fsync, rename, directory fsync), so a Put that returned ok
// survives a crash and a torn write leaves only a *.tmp file, removed at the next Open. The
// sharding keeps directories small (256 shards). The byte budget is a hard limit: a Put that
// would exceed it is kUnavailable and writes nothing; the store frees space by deleting objects
// that already reached the remote tier.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dejaview/store/tier.h"

namespace dv::store {

class DiskTier : public Tier {
 public:
  // Scans dir (created when missing) for the objects it holds. direct_io: reads bypass the page
  // cache (O_DIRECT), so that large training reads measure and use the device itself and do
  // not evict the server's hot pages.
  static StatusOr<std::unique_ptr<DiskTier>> Open(const std::string& dir, uint64_t budget_bytes,
                                                  bool direct_io = false);

  const char* name() const override { return "disk"; }
  Status Put(const ObjectId& id, const uint8_t* data, size_t size) override;
  StatusOr<uint64_t> Size(const ObjectId& id) override;
  Status ReadRange(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out) override;
  std::vector<ObjectId> List() override;
  Status Delete(const ObjectId& id) override;
  uint64_t bytes() override;
  uint64_t objects() override;
  uint64_t budget_bytes() const { return budget_bytes_; }

 private:
  DiskTier(std::string dir, uint64_t budget_bytes, bool direct_io)
      : dir_(std::move(dir)), budget_bytes_(budget_bytes), direct_io_(direct_io) {}
  std::string PathOf(const ObjectId& id) const;
  Status ReadDirect(int fd, const std::string& path, uint64_t offset, uint64_t length,
                    uint8_t* out);

  const std::string dir_;
  const uint64_t budget_bytes_;
  const bool direct_io_;
  std::mutex mu_;
  std::unordered_map<ObjectId, uint64_t, ObjectIdHash> sizes_;
  uint64_t bytes_ = 0;     // held, plus reserved by Puts in progress
  uint64_t reserved_ = 0;  // part of bytes_ that Puts in progress have claimed
};

}  // namespace dv::store
