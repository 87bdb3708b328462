// The map manifest (docs/map-format.md), shared by the builder and OpenMap.
#pragma once

#include <string>
#include <vector>

#include "dejaview/maps/route_map.h"

namespace dv::maps {

constexpr size_t kMaxManifestBytes = size_t(64) << 20;

// A manifest with codec priors (non-empty; at most kMaxCodecPriorsBytes) is version 2, one
// without version 1. *codec_priors (optional) receives the priors, empty for none.
std::string FormatManifest(double resolution_m, const std::vector<TileInfo>& tiles,
                           const std::vector<uint8_t>& codec_priors = {});
Status ParseManifest(const std::string& text, const std::string& name, double* resolution_m,
                     std::vector<TileInfo>* tiles, std::vector<uint8_t>* codec_priors = nullptr);
// FNV-1a 64 of the manifest bytes: the map version.
uint64_t ManifestHash(const std::string& text);

}  // namespace dv::maps
