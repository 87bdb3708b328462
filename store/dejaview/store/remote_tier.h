// Remote tier: objects in an S3-compatible object store, coalesced into packs (pack.h). The
// tier's index (object id -> pack key, offset, length) is rebuilt at Open from the pack headers
// (one LIST, two ranged GETs per pack), so several servers sharing a bucket see each other's
// objects and nothing besides the packs needs to be kept consistent remotely.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dejaview/store/pack.h"
#include "dejaview/store/s3_client.h"
#include "dejaview/store/tier.h"

namespace dv::store {

class RemoteTier : public Tier {
 public:
  // prefix: key prefix inside the bucket ("" or "fleet-a/"); packs live under prefix + "packs/".
  static StatusOr<std::unique_ptr<RemoteTier>> Open(const S3Config& config,
                                                    const std::string& prefix);

  const char* name() const override { return "remote"; }
  // One object as a pack of one.
  Status Put(const ObjectId& id, const uint8_t* data, size_t size) override;
  // Uploads members as one pack, then indexes them. Returns the pack key.
  StatusOr<std::string> PutPack(const std::vector<PackMember>& members);
  // Uploads a pack built by BuildPack under PackKey(pack), then indexes its members.
  Status PutPackBytes(const std::vector<uint8_t>& pack);
  StatusOr<uint64_t> Size(const ObjectId& id) override;
  Status ReadRange(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out) override;
  std::vector<ObjectId> List() override;
  // Deletes the object's pack when it is the only member; packs are immutable, so deleting one
  // member of a larger pack is kInvalidArgument.
  Status Delete(const ObjectId& id) override;
  uint64_t bytes() override;
  uint64_t objects() override;
  uint64_t packs();
  bool HasPack(const std::string& key);
  // Key a pack with these bytes has.
  std::string PackKey(const std::vector<uint8_t>& pack) const;
  // Reads the header entries of one pack (used by Open and by tests that audit the bucket).
  StatusOr<std::vector<PackEntry>> ReadPackIndex(const std::string& key);
  S3Client& client() { return client_; }
  const std::string& prefix() const { return prefix_; }

 private:
  struct Location {
    std::string pack;
    uint64_t offset;
    uint64_t length;
  };
  RemoteTier(const S3Config& config, std::string prefix)
      : client_(config), prefix_(std::move(prefix)) {}
  void Index(const std::string& key, const std::vector<PackEntry>& entries);

  S3Client client_;
  const std::string prefix_;
  std::mutex mu_;
  std::unordered_map<ObjectId, Location, ObjectIdHash> index_;
  std::unordered_map<std::string, uint64_t> pack_members_;
  uint64_t bytes_ = 0;
};

}  // namespace dv::store
