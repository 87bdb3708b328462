// Occupancy-octree coding of a set of cells (one decoded point per occupied cell, at its
// centre), with an adaptive context model shared by encoder and decoder, plus per-cell
// intensities. Used for residual points and for intra frames.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/codec/range_coder.h"

namespace dv::codec {

// Cells of side step_m in the sensor frame, keyed floor(p / step_m).
struct CellCloud {
  double step_m = 0;
  std::vector<Eigen::Vector3f> centres;  // decoded positions, morton order
  std::vector<uint8_t> intensity;        // 6-bit quantised, one per centre (when coded)
};

// Where the occupancy models start and end (docs/delta-format.md, "Octree sections"): start,
// where the map carries codec priors, holds kOctreeModels model states (in OccupancyContexts
// order) to start from instead of one half, and then every level takes the causal contexts (not
// only those of 1024 nodes or more); end (training, codec.h TrainPriors) receives the states after
// the last bit (those of start, or fresh ones, when the section is empty). Intensity models always
// start fresh.
constexpr size_t kOctreeModels = 3 * 8 * 4 * 7 * 17;
struct OctreeModel {
  const BitModel* start = nullptr;
  BitModel* end = nullptr;
};

// Quantises points into cells (mean intensity per cell) and codes them. Every point must lie
// within the octree span (2^21 cells per axis) -- checked, InvalidArgument otherwise. `cells`
// (optional) receives the decoded cloud exactly as the decoder will produce it.
// The decoder must be given the encoder's model.
Status EncodeCells(const std::vector<Eigen::Vector3f>& points, const std::vector<float>& intensity,
                   double step_m, bool with_intensity, OctreeModel model,
                   std::vector<uint8_t>* geometry, std::vector<uint8_t>* intensity_bytes,
                   CellCloud* cells);
Status DecodeCells(const uint8_t* geometry, size_t geometry_size, const uint8_t* intensity_bytes,
                   size_t intensity_size, double step_m, bool with_intensity, OctreeModel model,
                   size_t max_cells, CellCloud* cells);

// Encoder only: drops the cells (of side step_m, keyed as EncodeCells keys them) whose every point
// lies within bound_m of the decoded centre of a neighbouring cell that stays, and returns the
// points of the cells that stay (with their intensities, in their order). Fewer cells to code,
// and every point still has a decoded point within bound_m. A cell whose centre covers a point of
// a dropped cell stays for good; cells are visited in the order of their first points. Keys
// outside the voxel hash's range leave the points as they are. With `heights`, cells are columns
// (x, y) and a cell decodes to (centre x, centre y, height), its height given at each of its
// points (heights[i] for point i: the same for every point of a cell; the delta format's surface
// sections, where the profile's height at the centre).
void DropCoveredCells(double step_m, double bound_m, std::vector<Eigen::Vector3f>* points,
                      std::vector<float>* intensity, const std::vector<float>* heights = nullptr);

// Intensity quantisation shared by every section: 6 bits over KITTI's [0, 1] reflectance.
inline uint8_t QuantizeIntensity6(float v) {
  const float c = v < 0 ? 0 : (v > 1 ? 1 : v);
  return uint8_t(c * 63 + 0.5f);
}
inline float DequantizeIntensity6(uint8_t q) { return float(q) / 63.0f; }

}  // namespace dv::codec
