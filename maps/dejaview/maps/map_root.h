// A maps root (docs/map-sync.md): ROOT/<version>/ holds each map version (docs/map-format.md),
// ROOT/LATEST names the newest published one ("<16 hex digits>\n", written atomically). The
// server serves from one and reconstructs with every version in it; the agent keeps the
// versions it synced in one. A version directory appears by one rename of a complete, verified
// staging directory, so a crash leaves either the whole version or none of it.
#pragma once

#include <string>
#include <vector>

#include "dejaview/base/status.h"
#include "dejaview/maps/route_map.h"

namespace dv::maps {

// The version LATEST names; "" when ROOT has no LATEST. A malformed LATEST is Corruption.
StatusOr<std::string> ReadLatest(const std::string& root);
// map_dir's file of tile t, checked against t's size and CRC32C.
StatusOr<std::vector<uint8_t>> ReadTileFile(const std::string& map_dir, const TileInfo& t);
// Every tile of the map in dir read back and checked against its manifest (size and CRC32C);
// the map's version is returned.
StatusOr<std::string> VerifyMap(const std::string& dir);
// staging (tiles and MANIFEST written and fsync'd) must hold version: it is verified, renamed
// to ROOT/<version> (or dropped when that exists already) and LATEST then names it.
Status CommitVersion(const std::string& root, const std::string& staging,
                     const std::string& version);
// Removes every version directory of ROOT (16 hex digits) but LATEST's and those in keep, so
// that a vehicle's disk holds the maps it may still use, not every one it ever synced. Returns
// how many were removed; other entries (staging directories of a sync under way) are left.
StatusOr<size_t> PruneVersions(const std::string& root, const std::vector<std::string>& keep);
// Copies the map in map_dir into ROOT as a new version and makes it LATEST; returns the version.
StatusOr<std::string> PublishMap(const std::string& map_dir, const std::string& root);

}  // namespace dv::maps
