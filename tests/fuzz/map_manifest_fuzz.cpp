// Map manifest parser on arbitrary text. A manifest it accepts must survive being written again
// by the builder's formatter and parsed back to the same resolution, tile table and codec priors.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  double res = 0;
  std::vector<dv::maps::TileInfo> tiles;
  std::vector<uint8_t> priors;
  if (!dv::maps::ParseManifest(text, "fuzz", &res, &tiles, &priors).ok()) return 0;
  double res2 = 0;
  std::vector<dv::maps::TileInfo> tiles2;
  std::vector<uint8_t> priors2;
  if (!dv::maps::ParseManifest(dv::maps::FormatManifest(res, tiles, priors), "again", &res2,
                               &tiles2, &priors2)
           .ok())
    __builtin_trap();
  if (res2 != res || tiles2.size() != tiles.size() || priors2 != priors) __builtin_trap();
  for (size_t i = 0; i < tiles.size(); ++i) {
    const auto &a = tiles[i], &b = tiles2[i];
    if (a.tile != b.tile || a.voxels != b.voxels || a.bytes != b.bytes || a.crc32c != b.crc32c)
      __builtin_trap();
  }
  return 0;
}
