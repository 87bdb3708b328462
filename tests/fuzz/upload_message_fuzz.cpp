// The upload protocol parser on arbitrary bytes: no crash, no out-of-bounds read, and a parsed
// batch never holds more records than the protocol allows.
#include <cstddef>
#include <cstdint>

#include "dejaview/transport/upload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = dv::transport::DecodeMessage(data, size);
  if (!m.ok()) return 0;
  if (m->records.size() > dv::transport::kMaxBatchRecords) __builtin_trap();
  return 0;
}
