#include "dejaview/store/remote_tier.h"

namespace dv::store {

StatusOr<std::unique_ptr<RemoteTier>> RemoteTier::Open(const S3Config& config,
                                                       const std::string& prefix) {
  std::unique_ptr<RemoteTier> tier(new RemoteTier(config, prefix));
  DV_ASSIGN_OR_RETURN(const std::vector<std::string> keys,
                      tier->client_.ListKeys(prefix + "packs/"));
  for (const std::string& key : keys) {
    // A pack whose header cannot be read is one whose upload was cut off (the uploader died
    // mid-PUT and the server exposed the partial object) or is still in flight from another
    // server. It is left out of the index, not fatal: its copy intent is still in the journal,
    // so recovery re-uploads it under the same content-hash key.
    auto entries = tier->ReadPackIndex(key);
    if (!entries.ok()) {
      tier->unreadable_packs_.push_back(entries.status().ToString());
      continue;
    }
    tier->Index(key, *entries);
  }
  return tier;
}

StatusOr<std::vector<PackEntry>> RemoteTier::ReadPackIndex(const std::string& key) {
  uint8_t prefix[kPackPrefixBytes];
  DV_RETURN_IF_ERROR(client_.GetRange(key, 0, sizeof prefix, prefix));
  DV_ASSIGN_OR_RETURN(const uint32_t header_len, ParsePackPrefix(prefix, sizeof prefix, key));
  std::vector<uint8_t> header(header_len + 4);
  DV_RETURN_IF_ERROR(client_.GetRange(key, kPackPrefixBytes, header.size(), header.data()));
  return ParsePackHeader(header.data(), header.size(), key);
}

void RemoteTier::Index(const std::string& key, const std::vector<PackEntry>& entries) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pack_members_.emplace(key, entries.size()).second) return;
  for (const PackEntry& e : entries) {
    if (index_.emplace(e.id, Location{key, e.offset, e.length}).second) bytes_ += e.length;
  }
}

std::string RemoteTier::PackKey(const std::vector<uint8_t>& pack) const {
  return prefix_ + "packs/" + ComputeId(pack.data(), pack.size()).Hex();
}

StatusOr<std::string> RemoteTier::PutPack(const std::vector<PackMember>& members) {
  const std::vector<uint8_t> pack = BuildPack(members);
  DV_RETURN_IF_ERROR(PutPackBytes(pack));
  return PackKey(pack);
}

Status RemoteTier::PutPackBytes(const std::vector<uint8_t>& pack) {
  const std::string key = PackKey(pack);
  DV_ASSIGN_OR_RETURN(const uint32_t header_len, ParsePackPrefix(pack.data(), pack.size(), key));
  if (pack.size() < kPackPrefixBytes + header_len + 4) {
    return Status::InvalidArgument(key + ": pack shorter than its header");
  }
  DV_ASSIGN_OR_RETURN(const std::vector<PackEntry> entries,
                      ParsePackHeader(pack.data() + kPackPrefixBytes, header_len + 4, key));
  DV_RETURN_IF_ERROR(client_.PutObject(key, pack.data(), pack.size()));
  Index(key, entries);
  return Status::Ok();
}

Status RemoteTier::Put(const ObjectId& id, const uint8_t* data, size_t size) {
  if (Has(id)) return Status::Ok();
  return PutPack({{id, data, size}}).status();
}

StatusOr<uint64_t> RemoteTier::Size(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return Status::NotFound("remote tier: no object " + id.Hex());
  return it->second.length;
}

Status RemoteTier::ReadRange(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out) {
  Location loc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return Status::NotFound("remote tier: no object " + id.Hex());
    loc = it->second;
  }
  DV_RETURN_IF_ERROR(CheckRange(name(), id, loc.length, offset, length));
  return client_.GetRange(loc.pack, loc.offset + offset, length, out);
}

std::vector<ObjectId> RemoteTier::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectId> ids;
  ids.reserve(index_.size());
  for (const auto& [id, loc] : index_) ids.push_back(id);
  return ids;
}

Status RemoteTier::Delete(const ObjectId& id) {
  Location loc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return Status::NotFound("remote tier: no object " + id.Hex());
    loc = it->second;
    if (pack_members_[loc.pack] != 1) {
      return Status::InvalidArgument("remote tier: object " + id.Hex() + " shares pack " +
                                     loc.pack + " with other objects; packs are deleted whole");
    }
  }
  DV_RETURN_IF_ERROR(client_.DeleteObject(loc.pack));
  std::lock_guard<std::mutex> lock(mu_);
  index_.erase(id);
  pack_members_.erase(loc.pack);
  bytes_ -= loc.length;
  return Status::Ok();
}

uint64_t RemoteTier::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

uint64_t RemoteTier::objects() {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

uint64_t RemoteTier::packs() {
  std::lock_guard<std::mutex> lock(mu_);
  return pack_members_.size();
}

bool RemoteTier::HasPack(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return pack_members_.count(key) != 0;
}

}  // namespace dv::store
