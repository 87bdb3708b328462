// Helpers shared by the encode, decode and inspect subcommands.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dejaview/base/args.h"
#include "dejaview/maps/route_map.h"

namespace dv::cli {

// Opens --map when given (null otherwise), within --map-budget-mb (default 512).
StatusOr<std::unique_ptr<maps::RouteMap>> OpenMapArg(const Args& args);

// The .dvd files of a directory, sorted by name (or the single file given).
StatusOr<std::vector<std::string>> DeltaFiles(const std::string& path);

// --threads (default 1): the threads one frame's coding may use, in [1, codec::kMaxEncoderThreads].
StatusOr<int> ThreadsArg(const Args& args);

// "12 numbers" (commas or spaces) as a KITTI 3x4 pose.
StatusOr<Pose> ParsePose(const std::string& text);

}  // namespace dv::cli
