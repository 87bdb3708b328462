// The map manifest (docs/map-format.md), shared by the builder and OpenMap.
#pragma once

#include <string>
#include <vector>

#include "dejaview/maps/route_map.h"

namespace dv::maps {

constexpr size_t kMaxManifestBytes = size_t(64) << 20;

std::string FormatManifest(double resolution_m, const std::vector<TileInfo>& tiles);
Status ParseManifest(const std::string& text, const std::string& name, double* resolution_m,
                     std::vector<TileInfo>* tiles);
// FNV-1a 64 of the manifest bytes: the map version.
uint64_t ManifestHash(const std::string& text);

}  // namespace dv::maps
