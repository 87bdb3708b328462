// Reconstruction: stored deltas decoded with the exact map version each was encoded against
// (MAPS/<version>/, every version still referenced is kept) into KITTI-style drives for
// training and forensics: OUT/velodyne/NNNNNN.bin, poses.txt (the decoded T_map_sensor),
// timestamps.txt (seconds) and frames.txt (vehicle sensor sequence drive map_version per line).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dejaview/maps/route_map.h"
#include "dejaview/server/delta_store.h"
#include "dejaview/server/frame_index.h"

namespace dv::server {

// Opens each map version once, on first use; a missing version is an error naming it.
class MapVersions {
 public:
  explicit MapVersions(std::string root, size_t memory_budget_bytes = 0)
      : root_(std::move(root)), budget_(memory_budget_bytes) {}
  StatusOr<maps::RouteMap*> Get(const std::string& version);

 private:
  std::string root_;
  size_t budget_;
  std::map<std::string, std::unique_ptr<maps::RouteMap>> open_;
};

struct ReconstructStats {
  size_t frames = 0;
  size_t points = 0;
  uint64_t delta_bytes = 0;
};

// Decodes rows (in their order) into the drive folder out_dir.
StatusOr<ReconstructStats> ReconstructFrames(const DeltaStore& store,
                                             const std::vector<FrameRow>& rows, MapVersions* maps,
                                             const std::string& out_dir);

}  // namespace dv::server
