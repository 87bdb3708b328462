#include "codec_io.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>

#include "dejaview/codec/codec.h"

namespace dv::cli {

StatusOr<std::unique_ptr<maps::RouteMap>> OpenMapArg(const Args& args) {
  if (!args.Has("map")) return std::unique_ptr<maps::RouteMap>();
  DV_ASSIGN_OR_RETURN(long budget_mb, args.GetInt("map-budget-mb", 512));
  if (budget_mb < 0) return Status::InvalidArgument("--map-budget-mb must be >= 0");
  return maps::OpenMap(args.Get("map"), size_t(budget_mb) << 20);
}

StatusOr<std::vector<std::string>> DeltaFiles(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    if (!std::filesystem::exists(path, ec)) return Status::NotFound(path + ": no such file");
    return std::vector<std::string>{path};
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    if (e.path().extension() == ".dvd") files.push_back(e.path().string());
  }
  if (ec) return Status::IoError(path + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) return Status::NotFound(path + ": no .dvd files");
  return files;
}

StatusOr<Pose> ParsePose(const std::string& text) {
  std::string t = text;
  std::replace(t.begin(), t.end(), ',', ' ');
  std::istringstream in(t);
  std::array<double, 12> v{};
  for (double& x : v) {
    if (!(in >> x)) return Status::InvalidArgument("--pose: expected 12 numbers (3x4 row-major)");
  }
  return PoseFromKitti12(v);
}

StatusOr<int> ThreadsArg(const Args& args) {
  DV_ASSIGN_OR_RETURN(const long threads, args.GetInt("threads", 1));
  if (threads < 1 || threads > codec::kMaxEncoderThreads) {
    return Status::InvalidArgument("--threads must be in [1, " +
                                   std::to_string(codec::kMaxEncoderThreads) + "]");
  }
  return int(threads);
}

}  // namespace dv::cli
