// The route map: a voxel map of earlier drives stored as fixed-size tiles plus a manifest
// (format: docs/map-format.md). A RouteMap keeps only some tiles in memory (those asked for
// most recently, within a byte budget) and loads the others from disk on demand.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dejaview/base/drive.h"
#include "dejaview/base/status.h"
#include "dejaview/maps/voxel.h"

namespace dv::maps {

struct TileInfo {
  VoxelKey tile;
  uint32_t voxels = 0;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole tile file
};

class RouteMap {
 public:
  // version(): 16 hex digits, a hash of the manifest bytes (so of every tile's checksum).
  const std::string& version() const { return version_; }
  uint64_t version_id() const { return version_id_; }
  double resolution_m() const { return resolution_m_; }
  const std::vector<TileInfo>& tiles() const { return tiles_; }
  // The codec's starting model states learnt from the map's own drives (codec/, TrainPriors;
  // opaque here), empty when the map has none. Part of the manifest, so of the version.
  const std::vector<uint8_t>& codec_priors() const { return codec_priors_; }
  uint64_t voxel_count() const { return voxel_count_; }
  // The manifest (with the codec priors) and every tile.
  uint64_t disk_bytes() const;
  size_t memory_bytes() const { return memory_bytes_; }
  size_t loaded_tiles() const { return loaded_.size(); }

  // Loads every tile within radius_m of p_map (and evicts others beyond the budget).
  Status LoadAround(const Eigen::Vector3d& p_map, double radius_m);
  // Appends every voxel whose key lies in the box [lo, hi] in canonical order: tiles by key,
  // then voxels by key inside a tile. Loads tiles as needed.
  Status CollectBox(const VoxelKey& lo, const VoxelKey& hi, std::vector<MapVoxel>* out);
  // The same for the ball of keys k with integer |k - centre|^2 <= reach^2: what CollectBox of its
  // box keeps after that test, without copying the box's corners first.
  Status CollectBall(const VoxelKey& centre, int reach, std::vector<MapVoxel>* out);
  // Every representative within radius_m of p (voxel-hash search over the neighbouring voxels).
  Status RadiusSearch(const Eigen::Vector3d& p, double radius_m, std::vector<MapVoxel>* out);

 private:
  friend StatusOr<std::unique_ptr<RouteMap>> OpenMap(const std::string&, size_t);
  struct Loaded {
    std::vector<MapVoxel> voxels;  // sorted by key
    uint64_t last_use = 0;
  };
  StatusOr<Loaded*> Tile(const VoxelKey& tile);
  void Evict(const VoxelKey& keep_lo, const VoxelKey& keep_hi);

  std::string dir_;
  std::string version_;
  uint64_t version_id_ = 0;
  uint64_t manifest_bytes_ = 0;
  double resolution_m_ = 0;
  uint64_t voxel_count_ = 0;
  size_t budget_bytes_ = 0;
  size_t memory_bytes_ = 0;
  uint64_t clock_ = 0;
  std::vector<TileInfo> tiles_;
  std::vector<uint8_t> codec_priors_;
  std::map<std::array<int, 3>, size_t> tile_index_;  // tile key -> tiles_ index
  std::map<std::array<int, 3>, Loaded> loaded_;
};

// Opens MAPDIR (reads and checks the manifest; tiles load lazily). A budget of 0 is unlimited;
// tiles needed by a single call are always loaded, older ones are evicted beyond the budget.
StatusOr<std::unique_ptr<RouteMap>> OpenMap(const std::string& dir, size_t memory_budget_bytes);

struct BuildOptions {
  double resolution_m = 0.2;
  int every = 1;             // use frames 0, every, 2*every, ... of each drive
  double max_range_m = 100;  // returns beyond this range are ignored
  double min_range_m = 1.0;  // returns nearer than this (the vehicle itself) are ignored
  // Drop a voxel seen through (free space beyond it) in as many source frames as it was hit in:
  // cars, pedestrians and other things present in one pass only.
  bool drop_transient = true;
  std::function<void(size_t done, size_t total)> progress;
};

struct BuildReport {
  size_t frames = 0;
  uint64_t voxels_seen = 0;
  uint64_t voxels_dropped = 0;
  uint64_t voxels_kept = 0;
  size_t tiles = 0;
  // Path length through the source frames' positions of the longest drive, metres: a map is
  // built from passes over one route, so this is the route's length (bytes per metre of route).
  double route_m = 0;
};

Status BuildMap(const std::vector<Drive>& drives, const BuildOptions&, const std::string& out_dir,
                BuildReport* report = nullptr);

// Rewrites dir's manifest (atomically) with these codec priors (1..kMaxCodecPriorsBytes bytes):
// a new map version, the tiles unchanged.
constexpr size_t kMaxCodecPriorsBytes = size_t(1) << 20;
Status SetCodecPriors(const std::string& dir, const std::vector<uint8_t>& codec_priors);

// A tile's file inside a map directory: "tiles/TX_TY_TZ.dvt".
std::string TileFileName(const VoxelKey& tile);

// Tile files (exposed for the fuzz target and tests).
std::vector<uint8_t> EncodeTile(const VoxelKey& tile, double resolution_m,
                                const std::vector<MapVoxel>& sorted_voxels);
StatusOr<std::vector<MapVoxel>> DecodeTile(const uint8_t* data, size_t size,
                                           const std::string& name, double resolution_m,
                                           const VoxelKey& tile);

}  // namespace dv::maps
