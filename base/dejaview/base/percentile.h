// Percentiles of a sample, for the benchmark programs' latency and throughput tables.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace dv {

// Nearest-rank percentile: the smallest sample with at least p of the samples at or below it
// (p in (0, 1]; the median of an even count is the lower middle value). Empty input gives 0.
inline double NearestRank(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p * double(v.size()));
  return v[size_t(std::clamp(rank, 1.0, double(v.size()))) - 1];
}

}  // namespace dv
