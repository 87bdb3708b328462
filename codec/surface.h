// The gap class's geometry on the map: the encoder's second gap test (MarkOnMapSurface), the
// map's ground profile both sides derive from the candidates (SurfaceProfile), and the encoder's
// split of the gap class into 3D cells and 2D surface cells whose height the decoder reads off
// that profile (SplitSurface).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "candidates.h"

namespace dv::codec {

// A point lies on a map surface when candidates within gap_m of its height lie both nearer and
// farther than it in its column of the angular grid, each within kSurfaceWindow of its
// horizontal distance: ground between the scan rings of the map's source frames, metres apart at
// 20-50 m, where the first gap test's radius cannot reach. Something standing in front of what
// the map saw behind it (a moving car, a pedestrian) has no map sample at its height on its near
// side and stays residual.
constexpr double kSurfaceWindow = 0.1;  // of the point's horizontal distance
// Marks the points of `pts` (sensor frame) still 0 in *near that lie on a map surface.
// Encoder only: the decoder reads each cell's class from the section it is in.
void MarkOnMapSurface(const std::vector<Eigen::Vector3f>& pts, const Candidates& cand, double gap_m,
                      std::vector<uint8_t>* near);

// The profile's reach (of a point's horizontal distance) and the side of a surface cell (of the
// bound): a centre's horizontal offset leaves the profile's height error at 0.14 of the bound at
// a corner, and less towards the middle.
constexpr double kProfileWindow = 0.2;
constexpr double kSurfaceStepFactor = 1.4;
double SurfaceStep(double bound_m);

// The map's ground profile along each column of the angular grid: per column and bin of
// horizontal distance h (kProfileBinM), the lowest representative below the sensor (a bin with
// ground samples in it has the ground lowest; one with only a wall or a car, their lowest sample,
// often the foot). The height at (x, y) is interpolated in h between the nearest samples below and
// above it in its column, each within kProfileWindow of its h. The encoder keeps a gap point on
// this profile only where the bound holds at the decoded position, so a wrong profile costs bits,
// never error. Float arithmetic in a fixed order: both sides get the same bits.
class SurfaceProfile {
 public:
  static constexpr float kProfileBinM = 0.5f;
  static constexpr int kBins = 160;  // to 80 m

  // Holds what HeightAt needs at the points (x, y) of `at`, the cells to be placed: the bins of
  // each of their columns within the window of any of them (HeightAt finds the same there as in a
  // full profile, and nothing outside its window counts), so only those candidates are binned.
  SurfaceProfile(const Candidates& cand, const std::vector<Eigen::Vector3f>& at);

  // The profile's height at the i-th point (x, y) given to the constructor; false where its
  // column has no sample on either side within the window.
  bool HeightAt(size_t i, float* z) const;

 private:
  std::vector<uint64_t> bins_;  // per column and bin, the lowest sample's key (surface.cpp)
  std::vector<float> lo_, hi_;  // per column, the squared span of horizontal distances kept
  std::vector<int32_t> at_column_;
  std::vector<float> at_h_;
};

// Moves the gap points whose surface cell, at the profile's height, lies within the bound `tol`
// of them to *surface, and their intensities to *surface_i; then leaves out the surface cells
// whose every point another one's decoded point covers (DropCoveredCells), and sets the rest's z
// to 0 (the cells are 2D).
void SplitSurface(const Candidates& cand, double tol, std::vector<Eigen::Vector3f>* gap,
                  std::vector<float>* gap_i, std::vector<Eigen::Vector3f>* surface,
                  std::vector<float>* surface_i);

}  // namespace dv::codec
