// A storage tier holds sealed objects by id. Tiers are shared by the writer, the background
// copier and readers, so every method is thread-safe. A caller may rely on: Put of an id that is
// already present succeeds without rewriting it (objects are immutable); ReadRange never reads
// outside the object (an out-of-range request is kOutOfRange, not a short read).
#pragma once

#include <cstdint>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/store/object_id.h"

namespace dv::store {

class Tier {
 public:
  virtual ~Tier() = default;
  virtual const char* name() const = 0;
  virtual Status Put(const ObjectId& id, const uint8_t* data, size_t size) = 0;
  // Size of a held object; kNotFound when this tier does not hold it.
  virtual StatusOr<uint64_t> Size(const ObjectId& id) = 0;
  virtual Status ReadRange(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out) = 0;
  virtual std::vector<ObjectId> List() = 0;
  virtual Status Delete(const ObjectId& id) = 0;
  // Bytes and objects held now.
  virtual uint64_t bytes() = 0;
  virtual uint64_t objects() = 0;

  bool Has(const ObjectId& id) { return Size(id).ok(); }
  StatusOr<std::vector<uint8_t>> Get(const ObjectId& id);
};

// Shared bounds check of ReadRange implementations.
Status CheckRange(const char* tier, const ObjectId& id, uint64_t size, uint64_t offset,
                  uint64_t length);

}  // namespace dv::store
