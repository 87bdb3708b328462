#include "still.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace dv::codec {
namespace {

// Cube coordinates within +-kCubeLimit pack into 21 bits each; points beyond (a spurious return
// hundreds of kilometres away) are neither kept nor matched.
constexpr int64_t kCubeLimit = int64_t(1) << 20;

bool CubeOf(const Eigen::Vector3d& p, double cube_m, int64_t c[3]) {
  for (int a = 0; a < 3; ++a) {
    const double f = std::floor(p[a] / cube_m);
    if (!(std::fabs(f) < double(kCubeLimit))) return false;
    c[a] = int64_t(f);
  }
  return true;
}

}  // namespace

uint64_t StillFrame::CubeKey(int64_t x, int64_t y, int64_t z) const {
  return uint64_t(x + kCubeLimit) << 42 | uint64_t(y + kCubeLimit) << 21 | uint64_t(z + kCubeLimit);
}

StillFrame::StillFrame(uint64_t map_id, int64_t timestamp_ns, double match_m,
                       std::vector<Eigen::Vector3d> points_map)
    : map_id_(map_id), timestamp_ns_(timestamp_ns), match_m_(match_m), cube_m_(2 * match_m) {
  std::vector<std::pair<uint64_t, uint32_t>> keyed;
  keyed.reserve(points_map.size());
  for (size_t i = 0; i < points_map.size(); ++i) {
    int64_t c[3];
    if (CubeOf(points_map[i], cube_m_, c)) keyed.emplace_back(CubeKey(c[0], c[1], c[2]), i);
  }
  std::sort(keyed.begin(), keyed.end());
  points_.reserve(keyed.size());
  for (size_t k = 0; k < keyed.size(); ++k) {
    auto [it, fresh] = cubes_.try_emplace(keyed[k].first, uint32_t(k), uint32_t(k + 1));
    if (!fresh) it->second.second = uint32_t(k + 1);
    points_.push_back(points_map[keyed[k].second]);
  }
}

bool StillFrame::Near(const Eigen::Vector3d& p) const {
  int64_t lo[3], hi[3];
  if (!CubeOf(p - Eigen::Vector3d::Constant(match_m_), cube_m_, lo) ||
      !CubeOf(p + Eigen::Vector3d::Constant(match_m_), cube_m_, hi)) {
    return false;
  }
  const double r2 = match_m_ * match_m_;
  for (int64_t x = lo[0]; x <= hi[0]; ++x) {
    for (int64_t y = lo[1]; y <= hi[1]; ++y) {
      for (int64_t z = lo[2]; z <= hi[2]; ++z) {
        const auto it = cubes_.find(CubeKey(x, y, z));
        if (it == cubes_.end()) continue;
        for (uint32_t i = it->second.first; i < it->second.second; ++i) {
          if ((points_[i] - p).squaredNorm() <= r2) return true;
        }
      }
    }
  }
  return false;
}

std::shared_ptr<const StillFrame> StillMemory::Before(uint32_t sensor, uint64_t map_id,
                                                      int64_t timestamp_ns, double match_m) const {
  std::shared_ptr<const StillFrame> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = last_.find(sensor);
    if (it == last_.end()) return nullptr;
    f = it->second;
  }
  const int64_t dt = timestamp_ns - f->timestamp_ns();
  if (dt <= 0 || dt > kStillWindowNs || f->map_id() != map_id || f->match_m() != match_m) {
    return nullptr;
  }
  return f;
}

void StillMemory::Keep(uint32_t sensor, std::shared_ptr<const StillFrame> frame) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const StillFrame>& kept = last_[sensor];
  if (!kept || frame->timestamp_ns() > kept->timestamp_ns() ||
      kept->timestamp_ns() - frame->timestamp_ns() > kStillWindowNs) {
    kept = std::move(frame);
  }
}

}  // namespace dv::codec
