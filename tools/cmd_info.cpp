#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/kitti.h"

namespace dv::cli {
namespace {

nlohmann::json CloudJson(const std::string& path, PointCloud cloud) {
  nlohmann::json j;
  j["path"] = path;
  j["points"] = cloud.size();
  std::vector<std::string> fields = {"x", "y", "z", "intensity"};
  if (cloud.has_ring()) fields.push_back("ring");
  if (cloud.has_time()) fields.push_back("time_offset_s");
  j["fields"] = fields;
  j["non_finite_points"] = RemoveNonFinite(&cloud);
  const Bounds b = ComputeBounds(cloud);
  j["bounds_min"] = {b.min.x(), b.min.y(), b.min.z()};
  j["bounds_max"] = {b.max.x(), b.max.y(), b.max.z()};
  return j;
}

void PrintCloud(const nlohmann::json& j) {
  std::printf("file:       %s\n", j["path"].get<std::string>().c_str());
  std::printf("points:     %zu (%zu non-finite)\n", j["points"].get<size_t>(),
              j["non_finite_points"].get<size_t>());
  std::string fields;
  for (const auto& f : j["fields"]) fields += (fields.empty() ? "" : " ") + f.get<std::string>();
  std::printf("fields:     %s\n", fields.c_str());
  const auto& mn = j["bounds_min"];
  const auto& mx = j["bounds_max"];
  std::printf("bounds:     x [%.3f, %.3f]  y [%.3f, %.3f]  z [%.3f, %.3f] m\n", mn[0].get<double>(),
              mx[0].get<double>(), mn[1].get<double>(), mx[1].get<double>(), mn[2].get<double>(),
              mx[2].get<double>());
}

}  // namespace

int RunInfo(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {}, {"json", "help"});
  if (!args.ok()) return Fail("info", args.status());
  if (args->Has("help") || args->positional().size() != 1) {
    std::printf(
        "usage: dejaview info FILE|DRIVE [--json]\n"
        "  FILE (.bin, .pcd, .ply): points, non-finite points, fields, bounds;\n"
        "  DRIVE (a folder, docs/formats.md): frames, poses, timestamps, labels\n"
        "  --json      the same as one JSON object\n"
        "  -h, --help  this text\n");
    return args->Has("help") ? kOk : kUsage;
  }
  const std::string path = args->positional()[0];
  const bool json = args->Has("json");
  if (!std::filesystem::is_directory(path)) {
    auto cloud = ReadPointCloudFile(path);
    if (!cloud.ok()) return Fail("info", cloud.status());
    const nlohmann::json j = CloudJson(path, std::move(cloud).value());
    if (json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      PrintCloud(j);
    }
    return kOk;
  }
  auto drive = OpenDrive(path);
  if (!drive.ok()) return Fail("info", drive.status());
  nlohmann::json j;
  j["path"] = path;
  j["frames"] = drive->size();
  j["poses"] = !drive->poses.empty();
  j["poses_prior"] = !drive->poses_prior.empty();
  j["timestamps"] = !drive->timestamps_s.empty();
  j["labels"] = !drive->labels_dir.empty();
  double travelled_m = 0;
  for (size_t i = 1; i < drive->poses.size(); ++i) {
    travelled_m += (drive->poses[i].translation() - drive->poses[i - 1].translation()).norm();
  }
  j["travelled_m"] = travelled_m;
  if (drive->timestamps_s.size() > 1) {
    j["duration_s"] = drive->timestamps_s.back() - drive->timestamps_s.front();
  }
  auto first = ReadPointCloudFile(drive->frame_paths[0]);
  if (!first.ok()) return Fail("info", first.status());
  j["first_frame"] = CloudJson(drive->frame_paths[0], std::move(first).value());
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
  }
  std::printf("drive:      %s\n", path.c_str());
  std::printf("frames:     %zu (in %s)\n", drive->size(), drive->frames_dir.c_str());
  std::printf("poses:      %s%s\n", drive->poses.empty() ? "absent" : "present",
              drive->poses_prior.empty() ? "" : " (and poses_prior.txt)");
  std::printf("timestamps: %s\n", drive->timestamps_s.empty() ? "absent" : "present");
  std::printf("labels:     %s\n", drive->labels_dir.empty() ? "absent" : "present");
  if (!drive->poses.empty()) std::printf("travelled:  %.2f m\n", travelled_m);
  std::printf("first frame:\n");
  PrintCloud(j["first_frame"]);
  return kOk;
}

}  // namespace dv::cli
