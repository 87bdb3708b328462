// Map tile decoder on arbitrary bytes. The expected resolution and tile key are taken from the
// input's own header fields (as if the manifest agreed), so real tiles make useful seeds.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dejaview/maps/route_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  double res = 0.1;
  int32_t key[3] = {0, 0, 0};
  if (size >= 26) {
    std::memcpy(&res, data + 6, 8);
    std::memcpy(key, data + 14, 12);
  }
  if (!(res > 0.001 && res < 100)) res = 0.1;
  for (int32_t& k : key) k = k % (1 << 20);
  const dv::maps::VoxelKey tile(key[0], key[1], key[2]);
  auto voxels = dv::maps::DecodeTile(data, size, "fuzz", res, tile);
  if (voxels.ok()) {
    for (const auto& v : *voxels) {
      if (dv::maps::TileOf(v.key) != tile) __builtin_trap();
    }
  }
  return 0;
}
