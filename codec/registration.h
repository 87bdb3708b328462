// Refines a pose prior against the candidate map voxels: ICP with a Geman-McClure kernel and a
// coarse-to-fine correspondence distance, in the manner of KISS-ICP's Registration; the coarse
// stage matches points to the map's planar patches, the fine stage to its representatives.
// Only the encoder registers; the refined pose travels in the payload, so this need not be
// deterministic across machines.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "dejaview/base/pose.h"
#include "map_coder.h"

namespace dv::codec {

struct RegistrationResult {
  Pose T_map_sensor = Pose::Identity();
  size_t correspondences = 0;
  bool converged = false;
};

// frame: sensor-frame points; candidates: derived around the prior (their map-frame
// representatives are used). Returns the prior unchanged when too few correspondences exist.
// An error only when the backend fails.
StatusOr<RegistrationResult> RegisterFrame(const std::vector<Eigen::Vector3f>& frame,
                                           const Candidates& candidates,
                                           const Pose& T_map_sensor_prior,
                                           Backend backend = Backend::kCpu);

}  // namespace dv::codec
