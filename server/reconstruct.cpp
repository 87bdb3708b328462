#include "dejaview/server/reconstruct.h"

#include <cstdio>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/codec/codec.h"

namespace dv::server {

StatusOr<maps::RouteMap*> MapVersions::Get(const std::string& version) {
  if (version.empty()) return static_cast<maps::RouteMap*>(nullptr);  // intra frame
  auto it = open_.find(version);
  if (it == open_.end()) {
    auto map = maps::OpenMap(root_ + "/" + version, budget_);
    if (!map.ok()) {
      return map.status().WithContext("map version " + version + " (needed to decode)");
    }
    if ((*map)->version() != version) {
      return Status::Corruption(root_ + "/" + version + ": holds map version " + (*map)->version());
    }
    it = open_.emplace(version, std::move(map).value()).first;
  }
  return it->second.get();
}

StatusOr<ReconstructStats> ReconstructFrames(const DeltaStore& store,
                                             const std::vector<FrameRow>& rows, MapVersions* maps,
                                             const std::string& out_dir) {
  DV_RETURN_IF_ERROR(MakeDirs(out_dir + "/velodyne"));
  ReconstructStats st;
  std::vector<Pose> poses;
  std::vector<double> times;
  std::string list;
  for (size_t i = 0; i < rows.size(); ++i) {
    DV_ASSIGN_OR_RETURN(transport::SpoolRecord rec, store.ReadAt(rows[i].file, rows[i].offset));
    DV_ASSIGN_OR_RETURN(maps::RouteMap * map, maps->Get(rec.meta.map_version));
    auto frame = codec::Decode(rec.payload.data(), rec.payload.size(), map);
    if (!frame.ok()) {
      return frame.status().WithContext(rec.meta.vehicle + "/" +
                                        std::to_string(rec.meta.sensor_id) + "/" +
                                        std::to_string(rec.meta.sequence));
    }
    char name[32];
    std::snprintf(name, sizeof(name), "%06zu", i);
    DV_RETURN_IF_ERROR(WriteKittiBin(out_dir + "/velodyne/" + name + ".bin", frame->cloud));
    poses.push_back(frame->T_map_sensor);
    times.push_back(double(rec.meta.timestamp_ns) * 1e-9);
    list += std::string(name) + " " + rec.meta.vehicle + " " + std::to_string(rec.meta.sensor_id) +
            " " + std::to_string(rec.meta.sequence) + " " + rec.meta.drive + " " +
            (rec.meta.map_version.empty() ? "-" : rec.meta.map_version) + "\n";
    ++st.frames;
    st.points += frame->cloud.size();
    st.delta_bytes += rec.payload.size();
  }
  DV_RETURN_IF_ERROR(WriteKittiPoses(out_dir + "/poses.txt", poses));
  DV_RETURN_IF_ERROR(WriteTimestamps(out_dir + "/timestamps.txt", times));
  DV_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/frames.txt", list));
  return st;
}

}  // namespace dv::server
