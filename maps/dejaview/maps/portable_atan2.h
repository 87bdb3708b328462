// atan2 from + - * / only, shared by the CPU code and the CUDA kernels (no Eigen here, so that
// nvcc compiles it as it is).
#pragma once

#include <cmath>

#include "dejaview/base/host_device.h"

namespace dv::maps {

// Max error about 1e-5 rad: unlike libm's atan2 it rounds identically on every IEEE-754 machine
// (GPUs included), so it may decide angular bins that the decoder must reproduce. Selects, not
// branches: the signs of successive inputs change unpredictably (the decoder projects every
// candidate voxel), and mispredictions were a good part of that projection's time.
DV_HOST_DEVICE inline double PortableAtan2(double y, double x) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  const double mx = ax > ay ? ax : ay;
  const double a = (ax > ay ? ay : ax) / mx;  // 0 / 0 when mx is 0: replaced below
  const double s = a * a;
  double r = ((((0.0208351 * s - 0.085133) * s + 0.180141) * s - 0.3302995) * s + 0.999866) * a;
  r = ay > ax ? 1.57079632679489662 - r : r;
  r = x < 0 ? 3.14159265358979324 - r : r;
  r = y < 0 ? -r : r;
  return mx == 0 ? 0.0 : r;
}

}  // namespace dv::maps
