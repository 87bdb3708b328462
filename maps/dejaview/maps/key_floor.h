// The integer part of a voxel key, shared by maps::KeyOf and the codec's CPU and CUDA kernels
// (no Eigen here, so that nvcc compiles it as it is).
#pragma once

#include <cmath>

#include "dejaview/base/host_device.h"

namespace dv::maps {

// floor(v) where the caller bounds |v| well below 2^31: KeyFloor without its clamp, a third of
// its instructions (registration's subsamples, the fill's cells).
DV_HOST_DEVICE inline int BoundedFloor(double v) {
  const int i = int(v);
  return i - int(double(i) > v);
}

// floor(v), clamped to +-2^30 before the conversion (NaN to -2^30): a finite coordinate far
// outside any map -- a spurious return, a garbage pose -- gets a key that every range check
// rejects, never an out-of-range conversion.
// Clamped first (the bounds are integers, so the floor of the clamped value is the clamped floor),
// then truncated and corrected below zero (BoundedFloor): std::floor without SSE4.1 is a dozen
// instructions and branches, and every frame point and subsampled point takes three.
DV_HOST_DEVICE inline int KeyFloor(double v) {
  constexpr double kClamp = double(1 << 30);
  return BoundedFloor(v >= -kClamp ? (v <= kClamp ? v : kClamp) : -kClamp);
}

}  // namespace dv::maps
