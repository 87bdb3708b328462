#include "dejaview/store/tier.h"

#include <string>

namespace dv::store {

StatusOr<std::vector<uint8_t>> Tier::Get(const ObjectId& id) {
  DV_ASSIGN_OR_RETURN(const uint64_t size, Size(id));
  std::vector<uint8_t> out(size);
  DV_RETURN_IF_ERROR(ReadRange(id, 0, size, out.data()));
  return out;
}

Status CheckRange(const char* tier, const ObjectId& id, uint64_t size, uint64_t offset,
                  uint64_t length) {
  if (offset > size || length > size - offset) {
    return Status::OutOfRange(std::string(tier) + " tier: object " + id.Hex() + ": range [" +
                              std::to_string(offset) + ", +" + std::to_string(length) +
                              ") outside its " + std::to_string(size) + " bytes");
  }
  return Status::Ok();
}

}  // namespace dv::store
