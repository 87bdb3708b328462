// atan2 from + - * / only, shared by the CPU code and the CUDA kernels (no Eigen here, so that
// nvcc compiles it as it is).
#pragma once

#include <cmath>

#include "dejaview/base/host_device.h"

namespace dv::maps {

// Max error about 1e-5 rad: unlike libm's atan2 it rounds identically on every IEEE-754 machine
// (GPUs included), so it may decide angular bins that the decoder must reproduce.
DV_HOST_DEVICE inline double PortableAtan2(double y, double x) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  const double mx = ax > ay ? ax : ay;
  if (mx == 0) return 0;
  const double a = (ax > ay ? ay : ax) / mx;
  const double s = a * a;
  double r = ((((0.0208351 * s - 0.085133) * s + 0.180141) * s - 0.3302995) * s + 0.999866) * a;
  if (ay > ax) r = 1.57079632679489662 - r;
  if (x < 0) r = 3.14159265358979324 - r;
  return y < 0 ? -r : r;
}

}  // namespace dv::maps
