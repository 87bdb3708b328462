#include "dejaview/server/export.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"

namespace dv::server {

namespace {

// Decodes stored frames on threads of its own and hands the results back by submission number,
// so that the export's order, and every byte it writes, does not depend on the thread count.
// Each thread has its own MapVersions (a decoder serves one thread); the first uses the caller's.
class OrderedDecoder {
 public:
  struct Result {
    StatusOr<size_t> object = size_t(0);  // the object's size, or why it could not be read
    StatusOr<codec::DecodedFrame> frame =
        Status::Unavailable("not decoded: its object was not read");
  };

  OrderedDecoder(MapVersions* maps, int threads) {
    for (int t = 0; t < threads; ++t) {
      if (t > 0) own_maps_.push_back(maps->Another());
      MapVersions* mine = t == 0 ? maps : own_maps_.back().get();
      threads_.emplace_back([this, mine] { Work(mine); });
    }
  }
  ~OrderedDecoder() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // The next frame in order: its index row and its object (or the read's error).
  void Submit(const store::FrameRecord* row, StatusOr<std::vector<uint8_t>> object) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      todo_.push_back(Task{submitted_++, row, std::move(object)});
    }
    work_cv_.notify_one();
  }

  // Waits for the result of submission k (each taken once).
  Result Take(size_t k) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return done_.count(k) > 0; });
    Result r = std::move(done_.at(k));
    done_.erase(k);
    return r;
  }

 private:
  struct Task {
    size_t k;
    const store::FrameRecord* row;
    StatusOr<std::vector<uint8_t>> object;
  };

  void Work(MapVersions* maps) {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_cv_.wait(lock, [&] { return stop_ || !todo_.empty(); });
      if (stop_) return;
      Task task = std::move(todo_.front());
      todo_.pop_front();
      lock.unlock();
      Result r;
      if (!task.object.ok()) {
        r.object = task.object.status();
      } else {
        r.object = task.object->size();
        r.frame = DecodeStoredFrame(*task.row, *task.object, maps);
      }
      lock.lock();
      done_.emplace(task.k, std::move(r));
      done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Task> todo_;
  std::map<size_t, Result> done_;
  size_t submitted_ = 0;
  bool stop_ = false;
  std::vector<std::unique_ptr<MapVersions>> own_maps_;
  std::vector<std::thread> threads_;
};

}  // namespace

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
  if (options.threads < 1 || options.threads > kMaxExportThreads) {
    return Status::InvalidArgument("export: threads must be 1.." +
                                   std::to_string(kMaxExportThreads));
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<size_t> order = ExportOrder(rows.size(), options.shuffle, options.seed);
  std::vector<store::ObjectId> ids;
  for (size_t i : order) ids.push_back(rows[i].object);
  std::unique_ptr<store::Reader> reader = store->Read(std::move(ids), options.read);
  OrderedDecoder decoder(maps, options.threads);
  // Frames read ahead of the one the sink waits for: enough to keep every thread busy, few
  // enough to bound memory (a frame's object and its decoded cloud).
  const size_t window = 2 * size_t(options.threads);
  size_t submitted = 0;
  ExportStats st;
  std::vector<BatchFrame> batch;
  for (size_t k = 0; k < order.size(); ++k) {
    for (; submitted < order.size() && submitted < k + window; ++submitted) {
      decoder.Submit(&rows[order[submitted]], reader->Next());
    }
    const store::FrameRecord& row = rows[order[k]];
    OrderedDecoder::Result result = decoder.Take(k);
    if (!result.object.ok()) {
      return result.object.status().WithContext("export: frame " + row.vehicle + "/" +
                                                std::to_string(row.sensor_id) + "/" +
                                                std::to_string(row.sequence));
    }
    st.stored_bytes += *result.object;
    if (!result.frame.ok()) {
      // One frame that cannot be reconstructed (damaged, or its map version missing) is
      // reported and skipped; the rest of the drive is still exported.
      if (st.skipped.size() < kMaxSkippedReported)
        st.skipped.push_back(result.frame.status().ToString());
      ++st.frames_skipped;
    } else {
      codec::DecodedFrame frame = std::move(result.frame).value();
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
