#include "dejaview/base/drive.h"

#include <algorithm>
#include <filesystem>

#include "dejaview/base/kitti.h"
#include "dejaview/base/pcd.h"
#include "dejaview/base/ply.h"

namespace fs = std::filesystem;

namespace dv {
namespace {

bool IsFrameFile(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".bin" || ext == ".pcd" || ext == ".ply";
}

std::string Extension(const std::string& path) { return fs::path(path).extension().string(); }
Status UnknownExtension(const std::string& path) {
  return Status::InvalidArgument(path + ": unknown point-cloud extension '" + Extension(path) +
                                 "' (expected .bin, .pcd or .ply)");
}

}  // namespace

StatusOr<Drive> OpenDrive(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(dir + ": not a directory");
  Drive d;
  d.root = dir;
  d.frames_dir = fs::is_directory(fs::path(dir) / "velodyne", ec)
                     ? (fs::path(dir) / "velodyne").string()
                     : dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(d.frames_dir, ec)) {
    if (e.is_regular_file() && IsFrameFile(e.path())) files.push_back(e.path());
  }
  if (ec) return Status::IoError(d.frames_dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    d.frame_names.push_back(f.stem().string());
    d.frame_paths.push_back(f.string());
  }
  if (d.frame_paths.empty())
    return Status::NotFound(d.frames_dir + ": no frame files (.bin, .pcd, .ply)");

  const auto load_poses = [&](const char* name, std::vector<Pose>* out) -> Status {
    const std::string path = (fs::path(dir) / name).string();
    if (!fs::exists(path, ec)) return Status::Ok();
    DV_ASSIGN_OR_RETURN(*out, ReadKittiPoses(path));
    if (out->size() != d.size()) {
      return Status::Corruption(path + ": " + std::to_string(out->size()) + " poses for " +
                                std::to_string(d.size()) + " frames");
    }
    return Status::Ok();
  };
  DV_RETURN_IF_ERROR(load_poses("poses.txt", &d.poses));
  DV_RETURN_IF_ERROR(load_poses("poses_prior.txt", &d.poses_prior));
  const std::string ts_path = (fs::path(dir) / "timestamps.txt").string();
  if (fs::exists(ts_path, ec)) {
    DV_ASSIGN_OR_RETURN(d.timestamps_s, ReadTimestamps(ts_path));
    if (d.timestamps_s.size() != d.size()) {
      return Status::Corruption(ts_path + ": " + std::to_string(d.timestamps_s.size()) +
                                " timestamps for " + std::to_string(d.size()) + " frames");
    }
  }
  if (fs::is_directory(fs::path(dir) / "labels", ec))
    d.labels_dir = (fs::path(dir) / "labels").string();
  return d;
}

StatusOr<PointCloud> ReadPointCloudFile(const std::string& path) {
  const std::string ext = Extension(path);
  if (ext == ".bin") return ReadKittiBin(path);
  if (ext == ".pcd") return ReadPcd(path);
  if (ext == ".ply") return ReadPly(path);
  return UnknownExtension(path);
}

Status WritePointCloudFile(const std::string& path, const PointCloud& cloud) {
  return WritePointCloudFile(path, cloud, CloudEncoding::kBinary);
}

Status WritePointCloudFile(const std::string& path, const PointCloud& cloud,
                           CloudEncoding encoding) {
  if (!cloud.consistent()) {
    return Status::InvalidArgument(path + ": point cloud arrays have inconsistent lengths");
  }
  const std::string ext = Extension(path);
  if (ext == ".bin") {
    if (encoding == CloudEncoding::kAscii) {
      return Status::InvalidArgument(path + ": KITTI .bin has no ascii form");
    }
    return WriteKittiBin(path, cloud);
  }
  if (ext == ".pcd") return WritePcd(path, cloud, encoding);
  if (ext == ".ply") return WritePly(path, cloud, encoding);
  return UnknownExtension(path);
}

}  // namespace dv
