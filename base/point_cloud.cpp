#include "dejaview/base/point_cloud.h"

#include <cmath>

namespace dv {

size_t RemoveNonFinite(PointCloud* cloud) {
  size_t out = 0;
  const size_t n = cloud->size();
  for (size_t i = 0; i < n; ++i) {
    if (!cloud->xyz[i].allFinite()) continue;
    cloud->xyz[out] = cloud->xyz[i];
    cloud->intensity[out] = cloud->intensity[i];
    if (cloud->has_ring()) cloud->ring[out] = cloud->ring[i];
    if (cloud->has_time()) cloud->time_offset_s[out] = cloud->time_offset_s[i];
    ++out;
  }
  cloud->xyz.resize(out);
  cloud->intensity.resize(out);
  if (cloud->has_ring()) cloud->ring.resize(out);
  if (cloud->has_time()) cloud->time_offset_s.resize(out);
  return n - out;
}

Bounds ComputeBounds(const PointCloud& cloud) {
  Bounds b;
  if (cloud.empty()) return b;
  b.min = b.max = cloud.xyz[0];
  for (const auto& p : cloud.xyz) {
    b.min = b.min.cwiseMin(p);
    b.max = b.max.cwiseMax(p);
  }
  return b;
}

}  // namespace dv
