#include <cstddef>
#include <cstdint>

#include "dejaview/base/pcd.h"

// Any input either parses to a consistent cloud or fails with a Status; never a crash, a leak or
// an allocation the input size does not justify. As a table, it parses or fails likewise, and a
// table re-encoded (binary) parses back to the same records.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cloud = dv::ParsePcd(data, size, "fuzz.pcd");
  if (cloud.ok() && !cloud->consistent()) __builtin_trap();
  auto table = dv::ParsePcdTable(data, size, "fuzz.pcd");
  if (!table.ok()) return 0;
  if (table->records.size() != table->points() * table->record_bytes) __builtin_trap();
  const auto bytes = dv::EncodePcdTable(*table, dv::CloudEncoding::kBinary);
  auto again = dv::ParsePcdTable(bytes.data(), bytes.size(), "again.pcd");
  if (!again.ok() || again->records != table->records || again->width != table->width ||
      again->height != table->height)
    __builtin_trap();
  (void)dv::EncodePcdTable(*table, dv::CloudEncoding::kAscii);
  return 0;
}
