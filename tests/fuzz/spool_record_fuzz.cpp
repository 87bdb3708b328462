// The spool record reader on arbitrary bytes: log framing, then the record body of each
// complete record. Neither may crash, read out of bounds or allocate beyond its stated bounds.
#include <cstddef>
#include <cstdint>

#include "dejaview/transport/spool.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reader = dv::transport::LogReader::FromBytes(std::vector<uint8_t>(data, data + size));
  std::vector<uint8_t> body;
  uint64_t offset = 0;
  for (;;) {
    auto more = reader.Next(&body, &offset);
    if (!more.ok() || !*more) break;
    if (body.size() > size || offset >= size) __builtin_trap();
    auto rec = dv::transport::DecodeRecord(body.data(), body.size());
    if (rec.ok() && rec->payload.size() > body.size()) __builtin_trap();
  }
  if (reader.end_of_last_record() > size) __builtin_trap();
  return 0;
}
