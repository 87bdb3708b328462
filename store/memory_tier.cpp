#include "dejaview/store/memory_tier.h"

#include <cstring>
#include <string>

namespace dv::store {

Status MemoryTier::Put(const ObjectId& id, const uint8_t* data, size_t size) {
  if (size > budget_bytes_) {
    return Status::OutOfRange("memory tier: object " + id.Hex() + " of " + std::to_string(size) +
                              " bytes exceeds the budget of " + std::to_string(budget_bytes_));
  }
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return Status::Ok();
  }
  while (bytes_ + size > budget_bytes_) {
    bytes_ -= lru_.back().data->size();
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
  lru_.push_front({id, std::move(bytes)});
  index_[id] = lru_.begin();
  bytes_ += size;
  return Status::Ok();
}

StatusOr<uint64_t> MemoryTier::Size(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return Status::NotFound("memory tier: no object " + id.Hex());
  return uint64_t(it->second->data->size());
}

Status MemoryTier::ReadRange(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out) {
  Bytes data;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return Status::NotFound("memory tier: no object " + id.Hex());
    lru_.splice(lru_.begin(), lru_, it->second);
    data = it->second->data;
  }
  // Copy outside the lock: the shared_ptr keeps the bytes alive if another thread evicts them.
  DV_RETURN_IF_ERROR(CheckRange(name(), id, data->size(), offset, length));
  if (length > 0) std::memcpy(out, data->data() + offset, length);
  return Status::Ok();
}

std::vector<ObjectId> MemoryTier::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectId> ids;
  for (const Entry& e : lru_) ids.push_back(e.id);
  return ids;
}

Status MemoryTier::Delete(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return Status::NotFound("memory tier: no object " + id.Hex());
  bytes_ -= it->second->data->size();
  lru_.erase(it->second);
  index_.erase(it);
  return Status::Ok();
}

uint64_t MemoryTier::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

uint64_t MemoryTier::objects() {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

}  // namespace dv::store
