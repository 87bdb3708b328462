// The frame every micro-benchmark runs on: a real KITTI frame (HDL-64E, ~125k points) from the
// shared extract, so that tree depths and cache behaviour are those of the product's input.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "dejaview/base/kitti.h"

namespace dv::micro {

inline const PointCloud& KittiFrame(int index) {
  static PointCloud frames[2];
  PointCloud& f = frames[index & 1];
  if (f.empty()) {
    char path[512];
    std::snprintf(path, sizeof(path), "%s/kitti-odometry-mini/00/velodyne/%06d.bin",
                  DEJAVIEW_DATA_DIR, index & 1);
    auto c = ReadKittiBin(path);
    if (!c.ok()) {
      std::fprintf(stderr, "dv_micro: %s\n", c.status().ToString().c_str());
      std::exit(1);
    }
    f = std::move(c).value();
    RemoveNonFinite(&f);
  }
  return f;
}

}  // namespace dv::micro
