// The fill section: points the decoder adds between neighbouring selected map voxels, up to the
// original frame's point count. A selected voxel decodes to one point, so a frame whose surfaces
// the map explains decodes to fewer points than it had: the decoded surface is sampled more
// sparsely than the original. The decoder fills the difference with the midpoints of pairs of
// selected neighbours, nearest the sensor first, then (where that is not enough) their quarter
// points; the encoder sends one bit per point the decoder visits, set where no original point lies
// within the tolerance of it, so the bound holds for every decoded point. Spec:
// docs/delta-format.md, "Fill section".
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/status.h"
#include "map_section.h"

namespace dv::codec {

namespace cpu {
struct Kernels;  // cpu/kernels.h
}  // namespace cpu

// Bins of squared range for the midpoints' order, 1 m^2 wide (5 cm of range at 10 m, 1 cm at
// 50 m): no square root, and finer than a scan ring's spacing where the budget runs out.
// Midpoints beyond 128 m share the last bin.
constexpr int kFillRangeBins = 1 << 14;

// Pairs of selected voxels whose representatives are farther apart than this many map
// resolutions give no midpoint: nearer pairs leave too few midpoints where the budget is large,
// farther ones more midpoints off every surface, each a vetoed bit.
constexpr double kFillPairFactor = 1.5;

// A fill point of a pair, sensor frame: its midpoint (kind 0), or the quarter point nearer the
// later (1) or the earlier (2) voxel. Both sides compute it with these float operations.
inline Eigen::Vector3f FillPoint(const Candidates& cand, const SelectedPair& pair, uint32_t kind) {
  const Eigen::Vector3f& a = cand.sensor[kind == 2 ? pair.earlier : pair.later];
  const Eigen::Vector3f& b = cand.sensor[kind == 2 ? pair.later : pair.earlier];
  if (kind == 0) {
    return Eigen::Vector3f((a.x() + b.x()) * 0.5f, (a.y() + b.y()) * 0.5f, (a.z() + b.z()) * 0.5f);
  }
  return Eigen::Vector3f((a.x() * 3.0f + b.x()) * 0.25f, (a.y() * 3.0f + b.y()) * 0.25f,
                         (a.z() * 3.0f + b.z()) * 0.25f);
}

// The model of a fill point's veto bit: whether it is a quarter point, whether its pair lies
// farther apart than one resolution, and whether both voxels had returns in 3 or more of the
// map's source frames (persistence, the low 2 bits of cand.context): near, persistent pairs are
// vetoed far less often than far, fleeting ones.
constexpr int kFillModels = 8;
inline int FillContext(const Candidates& cand, const SelectedPair& pair, uint32_t kind) {
  const Eigen::Vector3f& a = cand.sensor[pair.later];
  const Eigen::Vector3f& b = cand.sensor[pair.earlier];
  const float dx = a.x() - b.x(), dy = a.y() - b.y(), dz = a.z() - b.z();
  const float res = float(cand.resolution_m);
  const int far = dx * dx + dy * dy + dz * dz > res * res;
  const int persistent =
      (cand.context[pair.later] & 3) == 3 && (cand.context[pair.earlier] & 3) == 3;
  return (int(kind != 0) * 2 + far) * 2 + persistent;
}

// The fill points both sides visit, in the order they visit them, each as (index into pairs) << 2
// | kind (FillPoint's): the midpoints of the pairs whose representatives lie within
// kFillPairFactor resolutions, by 1 m^2 bin of the midpoint's squared range, then in the coder's
// order; then, when budget exceeds their number, the two quarter points of each, in that order.
std::vector<uint32_t> FillOrder(const Candidates& cand, const std::vector<SelectedPair>& pairs,
                                size_t budget);

// Encoder, in three steps, the first two free of each other. Index needs only the
// classification: the frame's original points (sensor frame) indexed by their nearest candidate
// (ListByNearest's lists, which must outlive the encoder) and by cell, where a fill point looks
// for one within bound_m. Order needs only the selection: the midpoints' order. Encode, once the
// other sections are known to decode to `decoded` points, writes the section's body: every fill
// point it lets through has an original point within bound_m, and *added receives how many the
// decoder will add. With threads, Index runs beside the selection coder and Order after it
// (encoder.cpp).
class FillEncoder {
 public:
  FillEncoder(const Candidates& cand, const std::vector<Eigen::Vector3f>& points, double bound_m);
  void Index(const std::vector<int32_t>& nearest_start, const std::vector<int32_t>& nearest_points);
  void Order(const std::vector<SelectedPair>& pairs);
  std::vector<uint8_t> Encode(size_t decoded, size_t* added) const;

 private:
  bool NearOwn(uint32_t c, const Eigen::Vector3d& m) const;
  bool NearAny(const Eigen::Vector3f& m) const;
  void Cell(const Eigen::Vector3f& p, int32_t* k) const;
  uint32_t Bucket(int32_t x, int32_t y, int32_t z) const;

  const Candidates& cand_;
  const std::vector<Eigen::Vector3f>& points_;
  const cpu::Kernels& cpu_;  // the midpoints' bins' variants, chosen when the encoder is made
  double bound_m_, bound2_, inv_, far_ = 0;
  // Order's
  const std::vector<SelectedPair>* pairs_ = nullptr;
  std::vector<uint32_t> order_;  // FillOrder's midpoints
  // Index's
  const int32_t* own_start_ = nullptr;  // points by nearest candidate (Index's CSR)
  std::vector<Eigen::Vector3f> own_points_;
  uint32_t mask_ = 0;
  std::vector<uint32_t> first_, in_bucket_;  // points by bucket of their cell (CSR)
};

// Decoder: reads the fill section and appends its points to *cloud, which holds the points the
// other sections decoded (intensity: the mean of the two voxels', when coded); *added receives
// how many.
Status DecodeFill(const uint8_t* data, size_t size, const Candidates& cand,
                  const std::vector<SelectedPair>& pairs, bool intensity, PointCloud* cloud,
                  size_t* added);

}  // namespace dv::codec
