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

}  // namespace dv
