// The map-sync message parser on arbitrary bytes: no crash, no out-of-bounds read, a parsed
// chunk within its bounds, and what it parsed encodes to a message that parses again.
#include <cstddef>
#include <cstdint>

#include "dejaview/transport/map_sync.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = dv::transport::DecodeMapSync(data, size);
  if (!m.ok()) return 0;
  if (m->data.size() > dv::transport::kMaxMapChunkBytes) __builtin_trap();
  if (m->type == dv::transport::MapSyncType::kChunk && m->offset + m->data.size() > m->total)
    __builtin_trap();
  const auto again = dv::transport::EncodeMapSync(*m);
  if (!dv::transport::DecodeMapSync(again.data(), again.size()).ok()) __builtin_trap();
  return 0;
}
