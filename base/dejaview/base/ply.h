// PLY (Stanford polygon format), the subset dejaview reads and writes; spec in docs/formats.md.
// Read: format ascii 1.0 or binary_little_endian 1.0 (big-endian is rejected); the 'vertex'
// element gives the points: x y z required, intensity, ring and time/t optional, any other
// scalar property skipped by its declared type, list properties rejected. Elements before
// 'vertex' (list properties included) are skipped row by row; elements after it are not read.
// At most kMaxPointsPerFrame vertices, checked before anything is allocated.
// Write: x y z intensity float, ring ushort and time float when the cloud has them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/status.h"

namespace dv {

// Parses PLY bytes; name (the file path) prefixes every error message. Non-finite points are
// kept: callers decide (RemoveNonFinite) and count them.
StatusOr<PointCloud> ParsePly(const uint8_t* data, size_t size, const std::string& name);
StatusOr<PointCloud> ReadPly(const std::string& path);
std::vector<uint8_t> EncodePly(const PointCloud& cloud, CloudEncoding encoding);
Status WritePly(const std::string& path, const PointCloud& cloud, CloudEncoding encoding);

}  // namespace dv
