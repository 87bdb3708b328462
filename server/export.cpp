#include "dejaview/server/export.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"

namespace dv::server {

std::vector<size_t> ExportOrder(size_t n, bool shuffle, uint64_t seed) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  if (!shuffle) return order;
  std::mt19937_64 rng(seed);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  return order;
}

StatusOr<ExportStats> StreamFrames(store::Store* store, const std::vector<store::FrameRecord>& rows,
                                   MapVersions* maps, const ExportOptions& options,
                                   const BatchSink& sink) {
  if (options.batch_frames == 0) return Status::InvalidArgument("export: batch of 0 frames");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<size_t> order = ExportOrder(rows.size(), options.shuffle, options.seed);
  std::vector<store::ObjectId> ids;
  for (size_t i : order) ids.push_back(rows[i].object);
  std::unique_ptr<store::Reader> reader = store->Read(std::move(ids), options.read);
  ExportStats st;
  std::vector<BatchFrame> batch;
  for (size_t k = 0; k < order.size(); ++k) {
    const store::FrameRecord& row = rows[order[k]];
    auto object = reader->Next();
    if (!object.ok()) {
      return object.status().WithContext("export: frame " + row.vehicle + "/" +
                                         std::to_string(row.sensor_id) + "/" +
                                         std::to_string(row.sequence));
    }
    auto decoded = DecodeStoredFrame(row, *object, maps);
    st.stored_bytes += object->size();
    if (!decoded.ok()) {
      // One frame that cannot be reconstructed (damaged, or its map version missing) is
      // reported and skipped; the rest of the drive is still exported.
      if (st.skipped.size() < kMaxSkippedReported)
        st.skipped.push_back(decoded.status().ToString());
      ++st.frames_skipped;
    } else {
      codec::DecodedFrame frame = std::move(decoded).value();
      st.points += frame.cloud.size();
      st.output_bytes += 16 * frame.cloud.size();
      BatchFrame f;
      f.vehicle = row.vehicle;
      f.drive = row.drive;
      f.map_version = row.map_version;
      f.sensor_id = row.sensor_id;
      f.sequence = row.sequence;
      f.timestamp_ns = row.timestamp_ns;
      f.T_map_sensor = frame.T_map_sensor;
      f.cloud = std::move(frame.cloud);
      batch.push_back(std::move(f));
    }
    if (!batch.empty() && (batch.size() == options.batch_frames || k + 1 == order.size())) {
      DV_RETURN_IF_ERROR(sink(st.batches, batch));
      st.frames += batch.size();
      st.batches++;
      batch.clear();
    }
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

StatusOr<ExportStats> ExportFrames(store::Store* store, const std::vector<store::FrameRecord>& rows,
                                   MapVersions* maps, const ExportOptions& options,
                                   const std::string& out_dir) {
  const bool kitti = options.layout == "kitti";
  if (!kitti && options.layout != "packed") {
    return Status::InvalidArgument("export: layout '" + options.layout +
                                   "': expected kitti or packed");
  }
  DV_RETURN_IF_ERROR(MakeDirs(kitti ? out_dir + "/velodyne" : out_dir));
  std::vector<Pose> poses;
  std::vector<int64_t> times;
  std::string list;  // one line per frame: name vehicle sensor sequence drive map_version
  size_t position = 0;
  auto sink = [&](size_t batch_index, const std::vector<BatchFrame>& batch) -> Status {
    char batch_name[32];
    std::snprintf(batch_name, sizeof(batch_name), "batch-%06zu.dvxb", batch_index);
    if (!kitti) DV_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/" + batch_name, EncodeBatch(batch)));
    for (const BatchFrame& f : batch) {
      char name[32];
      std::snprintf(name, sizeof(name), "%06zu", position++);
      if (kitti) DV_RETURN_IF_ERROR(WriteKittiBin(out_dir + "/velodyne/" + name + ".bin", f.cloud));
      poses.push_back(f.T_map_sensor);
      times.push_back(f.timestamp_ns);
      list += std::string(kitti ? name : batch_name) + " " + f.vehicle + " " +
              std::to_string(f.sensor_id) + " " + std::to_string(f.sequence) + " " + f.drive + " " +
              (f.map_version.empty() ? "-" : f.map_version) + "\n";
    }
    return Status::Ok();
  };
  DV_ASSIGN_OR_RETURN(ExportStats st, StreamFrames(store, rows, maps, options, sink));
  if (kitti) {
    DV_RETURN_IF_ERROR(WriteKittiPoses(out_dir + "/poses.txt", poses));
    DV_RETURN_IF_ERROR(WriteTimestampsNs(out_dir + "/timestamps.txt", times));
  }
  DV_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/frames.txt", list));
  return st;
}

}  // namespace dv::server
