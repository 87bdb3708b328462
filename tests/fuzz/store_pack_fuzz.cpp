// The remote tier parses pack headers fetched from a bucket it does not control.
#include <cstddef>
#include <cstdint>

#include "dejaview/store/pack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header_len = dv::store::ParsePackPrefix(data, size, "fuzz");
  if (!header_len.ok()) return 0;
  const size_t available = size - dv::store::kPackPrefixBytes;
  const size_t want = size_t(*header_len) + 4;
  auto entries = dv::store::ParsePackHeader(data + dv::store::kPackPrefixBytes,
                                            want < available ? want : available, "fuzz");
  if (entries.ok() && entries->size() > *header_len / 33) __builtin_trap();
  return 0;
}
