#include "dejaview/server/export.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"

namespace dv::server {

namespace {

// A frame of the export as the pipeline's threads leave it for the writer: its index fields and
// pose, its points as a KITTI .bin's rows (x, y, z, intensity float32) and, for the packed
// layout, the rest of its bytes in a batch.
struct ExportedFrame : BatchFrameHeader {
  std::vector<uint8_t> rows;
  EncodedBatchFrame packed;
};

// Reads, decodes and encodes the frames of an export on `threads` threads, the calling thread
// included, and hands the results back by export position, so that the order, and every byte
// written, does not depend on the thread count. The thread that takes the results (and writes
// them) decodes too whenever the next result is not ready, so that no core is left to a thread
// that only reads and writes: with one thread everything runs on the caller, with N the same work
// is spread over N. Each thread decodes with MapVersions of its own (a decoder serves one thread);
// the caller's are the caller's.
class FramePipeline {
 public:
  struct Result {
    StatusOr<size_t> object = size_t(0);  // the object's size, or why it could not be read
    StatusOr<ExportedFrame> frame = Status::Unavailable("not decoded: its object was not read");
  };
  using Prepare = std::function<Result(size_t position, StatusOr<std::vector<uint8_t>> object,
                                       MapVersions* maps)>;

  FramePipeline(store::Reader* reader, size_t frames, MapVersions* maps, int threads,
                Prepare prepare)
      : reader_(reader),
        frames_(frames),
        // Frames started ahead of the one taken: enough that a thread finds work while the
        // caller writes, few enough to bound memory (an object and its encoded points each).
        window_(4 * size_t(threads)),
        maps_(maps),
        prepare_(std::move(prepare)) {
    for (int t = 1; t < threads; ++t) {
      own_maps_.push_back(maps->Another());
      helpers_.emplace_back([this, mine = own_maps_.back().get()] { Help(mine); });
    }
  }
  ~FramePipeline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : helpers_) t.join();
  }

  // The result for position k (each taken once, in order), working on later frames meanwhile.
  Result Take(size_t k) {
    std::unique_lock<std::mutex> lock(mu_);
    while (done_.count(k) == 0) {
      // Not started means this thread can start it; started elsewhere means it will be done.
      if (!RunOne(lock, maps_)) done_cv_.wait(lock);
    }
    Result r = std::move(done_.at(k));
    done_.erase(k);
    taken_ = k + 1;
    lock.unlock();
    work_cv_.notify_all();  // the window moved on
    return r;
  }

 private:
  void Help(MapVersions* maps) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (!RunOne(lock, maps)) work_cv_.wait(lock);
    }
  }

  // Starts the next position and runs it to its result on this thread; false when every position
  // has started or the window is full. Called and returns with mu_ held.
  bool RunOne(std::unique_lock<std::mutex>& lock, MapVersions* maps) {
    if (stop_ || next_ >= frames_ || next_ >= taken_ + window_) return false;
    const size_t k = next_++;
    lock.unlock();
    StatusOr<std::vector<uint8_t>> object = Status::Unavailable("not read");
    {
      // The reader hands objects out in export order: position k's is the k-th.
      std::unique_lock<std::mutex> read_lock(read_mu_);
      read_cv_.wait(read_lock, [&] { return read_next_ == k; });
      object = reader_->Next();
      ++read_next_;
    }
    read_cv_.notify_all();
    Result r = prepare_(k, std::move(object), maps);
    lock.lock();
    done_.emplace(k, std::move(r));
    done_cv_.notify_all();
    return true;
  }

  store::Reader* const reader_;
  const size_t frames_, window_;
  MapVersions* const maps_;
  const Prepare prepare_;

  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::map<size_t, Result> done_;
  size_t next_ = 0;   // positions started
  size_t taken_ = 0;  // positions taken
  bool stop_ = false;

  std::mutex read_mu_;  // never held with mu_
  std::condition_variable read_cv_;
  size_t read_next_ = 0;

  std::vector<std::unique_ptr<MapVersions>> own_maps_;
  std::vector<std::thread> helpers_;  // after what they use: joined before it goes
};

// Writes the frames in export order, on the calling thread, each as it comes: a batch's file
// grows frame by frame (its header's count written last), so the writes are spread over the run
// among the decoding instead of waiting for a whole batch, and no batch is held in memory.
class ExportWriter {
 public:
  ExportWriter(const std::string& out_dir, bool kitti) : dir_(out_dir), kitti_(kitti) {}

  Status Add(size_t batch, size_t index, const ExportedFrame& f) {
    char batch_name[32];
    std::snprintf(batch_name, sizeof(batch_name), "batch-%06zu.dvxb", batch);
    char name[32];
    std::snprintf(name, sizeof(name), "%06zu", position_++);
    if (kitti_) {
      DV_RETURN_IF_ERROR(WriteFileAtomic(dir_ + "/velodyne/" + name + ".bin", f.rows));
    } else {
      if (index == 0) {
        DV_ASSIGN_OR_RETURN(batch_file_, AtomicFileWriter::Create(dir_ + "/" + batch_name));
        const std::vector<uint8_t> header = EncodeBatchHeader(0);  // the count comes at the end
        DV_RETURN_IF_ERROR(batch_file_->Append(header.data(), header.size()));
      }
      DV_RETURN_IF_ERROR(batch_file_->Append(f.packed.head.data(), f.packed.head.size()));
      DV_RETURN_IF_ERROR(batch_file_->Append(f.rows.data(), f.rows.size()));
    }
    poses_.push_back(f.T_map_sensor);
    times_.push_back(f.timestamp_ns);
    list_ += std::string(kitti_ ? name : batch_name) + " " + f.vehicle + " " +
             std::to_string(f.sensor_id) + " " + std::to_string(f.sequence) + " " + f.drive + " " +
             (f.map_version.empty() ? "-" : f.map_version) + "\n";
    return Status::Ok();
  }

  Status EndBatch(size_t frames) {
    if (kitti_) return Status::Ok();
    const std::vector<uint8_t> header = EncodeBatchHeader(uint32_t(frames));
    DV_RETURN_IF_ERROR(batch_file_->WriteAt(0, header.data(), header.size()));
    DV_RETURN_IF_ERROR(batch_file_->Commit());
    batch_file_.reset();
    return Status::Ok();
  }

  Status Finish() {
    if (kitti_) {
      DV_RETURN_IF_ERROR(WriteKittiPoses(dir_ + "/poses.txt", poses_));
      DV_RETURN_IF_ERROR(WriteTimestampsNs(dir_ + "/timestamps.txt", times_));
    }
    return WriteFileAtomic(dir_ + "/frames.txt", list_);
  }

 private:
  const std::string dir_;
  const bool kitti_;
  size_t position_ = 0;
  std::unique_ptr<AtomicFileWriter> batch_file_;
  std::vector<Pose> poses_;
  std::vector<int64_t> times_;
  std::string list_;  // one line per frame: name vehicle sensor sequence drive map_version
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

StatusOr<ExportStats> ExportFrames(store::Store* store, const std::vector<store::FrameRecord>& rows,
                                   MapVersions* maps, const ExportOptions& options,
                                   const std::string& out_dir) {
  const bool kitti = options.layout == "kitti";
  if (!kitti && options.layout != "packed") {
    return Status::InvalidArgument("export: layout '" + options.layout +
                                   "': expected kitti or packed");
  }
  if (options.batch_frames == 0) return Status::InvalidArgument("export: batch of 0 frames");
  if (options.threads < 1 || options.threads > kMaxExportThreads) {
    return Status::InvalidArgument("export: threads must be 1.." +
                                   std::to_string(kMaxExportThreads));
  }
  DV_RETURN_IF_ERROR(MakeDirs(kitti ? out_dir + "/velodyne" : out_dir));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<size_t> order = ExportOrder(rows.size(), options.shuffle, options.seed);
  std::vector<store::ObjectId> ids;
  for (size_t i : order) ids.push_back(rows[i].object);
  std::unique_ptr<store::Reader> reader = store->Read(std::move(ids), options.read);
  // Runs on the pipeline's threads: everything a frame needs but its place in the files.
  auto prepare = [&](size_t k, StatusOr<std::vector<uint8_t>> object,
                     MapVersions* mine) -> FramePipeline::Result {
    FramePipeline::Result r;
    if (!object.ok()) {
      r.object = object.status();
      return r;
    }
    r.object = object->size();
    const store::FrameRecord& row = rows[order[k]];
    auto decoded = DecodeStoredFrame(row, *object, mine);
    if (!decoded.ok()) {
      r.frame = decoded.status();
      return r;
    }
    ExportedFrame f;
    f.vehicle = row.vehicle;
    f.drive = row.drive;
    f.map_version = row.map_version;
    f.sensor_id = row.sensor_id;
    f.sequence = row.sequence;
    f.timestamp_ns = row.timestamp_ns;
    f.T_map_sensor = decoded->T_map_sensor;
    f.rows = EncodeKittiBin(decoded->cloud);
    // Its batch's first frame unless a frame before it was skipped (the writer re-encodes then).
    if (!kitti) f.packed = EncodeBatchFrame(f, f.rows, k % options.batch_frames == 0);
    r.frame = std::move(f);
    return r;
  };
  FramePipeline pipeline(reader.get(), order.size(), maps, options.threads, prepare);
  ExportWriter writer(out_dir, kitti);
  ExportStats st;
  size_t in_batch = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const store::FrameRecord& row = rows[order[k]];
    FramePipeline::Result result = pipeline.Take(k);
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
      ExportedFrame frame = std::move(result.frame).value();
      if (!kitti && frame.packed.first != (in_batch == 0)) {
        frame.packed = EncodeBatchFrame(frame, frame.rows, in_batch == 0);
      }
      DV_RETURN_IF_ERROR(writer.Add(st.batches, in_batch++, frame));
      st.points += frame.rows.size() / 16;
      st.output_bytes += frame.rows.size();
    }
    if (in_batch > 0 && (in_batch == options.batch_frames || k + 1 == order.size())) {
      DV_RETURN_IF_ERROR(writer.EndBatch(in_batch));
      st.frames += in_batch;
      st.batches++;
      in_batch = 0;
    }
  }
  DV_RETURN_IF_ERROR(writer.Finish());
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

}  // namespace dv::server
