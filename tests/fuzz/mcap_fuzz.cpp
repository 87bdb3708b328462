#include <cstddef>
#include <cstdint>

#include "dejaview/recorded/mcap.h"

// Any input either walks to its Footer or fails with a Status naming an offset; never a crash,
// a leak, or an allocation (a chunk's decompressed size) that the input's size does not justify.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t bytes = 0;
  const auto s = dv::recorded::ReadMcapMessages(
      data, size, "fuzz.mcap", [&](const dv::recorded::McapMessageView& v) {
        bytes += v.message->data.size + v.channel->topic.size() + v.schema_name->size();
        return dv::Status::Ok();
      });
  if (!s.ok() && s.message().rfind("fuzz.mcap", 0) != 0) __builtin_trap();
  return bytes == UINT64_MAX;
}
