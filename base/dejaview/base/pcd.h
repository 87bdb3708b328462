// PCD v0.7 (the Point Cloud Library's format), the subset dejaview reads and writes; spec in
// docs/formats.md. Read: DATA ascii, binary or binary_compressed (PCL's LZF), fields by name
// (x y z required; intensity, ring and time/t optional; any other field, padding '_' included,
// is skipped by its SIZE * COUNT), exactly POINTS records (trailing bytes ignored), POINTS equal
// to WIDTH * HEIGHT, at most kMaxPointsPerFrame points, checked before anything is allocated.
// Write: x y z intensity float32, ring uint16 and time float32 when the cloud has them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/status.h"

namespace dv {

// Parses PCD bytes; name (the file path) prefixes every error message. Non-finite points are
// kept: callers decide (RemoveNonFinite) and count them.
StatusOr<PointCloud> ParsePcd(const uint8_t* data, size_t size, const std::string& name);
StatusOr<PointCloud> ReadPcd(const std::string& path);
std::vector<uint8_t> EncodePcd(const PointCloud& cloud, CloudEncoding encoding);
Status WritePcd(const std::string& path, const PointCloud& cloud, CloudEncoding encoding);

// A PCD's points as they are, for copying one without losing anything: every field (padding
// '_' included) with its TYPE, SIZE, COUNT and byte offset in a record, WIDTH x HEIGHT (an
// organised cloud keeps its rows), and the records packed little-endian as DATA binary holds
// them, whatever the file's DATA (binary_compressed's padding comes back zeroed), non-finite
// points included. The header is checked as ParsePcd checks it.
struct PcdField {
  std::string name;
  char type = 'F';  // 'I', 'U' or 'F'
  uint8_t size = 4;
  uint32_t count = 1;
  size_t offset = 0;
};
struct PcdTable {
  std::vector<PcdField> fields;
  uint32_t width = 0, height = 1;
  size_t record_bytes = 0;
  std::vector<uint8_t> records;  // width x height records, row by row
  size_t points() const { return size_t(width) * height; }
};
StatusOr<PcdTable> ParsePcdTable(const uint8_t* data, size_t size, const std::string& name);
StatusOr<PcdTable> ReadPcdTable(const std::string& path);
// DATA binary (the records as they are) or ascii (floats as %.9g / %.17g: read back exactly).
std::vector<uint8_t> EncodePcdTable(const PcdTable& table, CloudEncoding encoding);

}  // namespace dv
