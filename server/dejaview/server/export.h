// Training export: the frames of a query streamed as batches of reconstructed point clouds, at
// the rate a training job (BOOST's low-rank training, for one) consumes them. Objects come through
// the store's multi-path reader, which prefetches in exactly the order the export will ask, so
// the tiers work ahead of the decoder; the order is the index's (vehicle, time, sensor,
// sequence) or a seeded shuffle of it, the same on every run and every machine.
//
// Layouts: kitti writes OUT/velodyne/NNNNNN.bin (the export position) with poses.txt,
// timestamps.txt and frames.txt as `dejaview decode` does; packed writes one
// OUT/batch-NNNNNN.dvxb per batch (docs/export-format.md) and frames.txt. Every file is written
// atomically, so an export killed midway and run again produces the complete, identical output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/server/batch_format.h"
#include "dejaview/server/reconstruct.h"
#include "dejaview/store/store.h"

namespace dv::server {

struct ExportOptions {
  std::string layout = "kitti";  // kitti | packed
  size_t batch_frames = 32;
  bool shuffle = false;
  uint64_t seed = 0;
  store::ReadOptions read;  // which tiers, how far ahead
  // Threads that read, decode and encode frames side by side, the calling thread (which writes
  // the files in order) one of them; each has its own decoders (MapVersions::Another). The
  // batches, and so every byte written, are the same for any count. In [1, kMaxExportThreads].
  int threads = 1;
};
constexpr int kMaxExportThreads = 256;

// A frame that cannot be reconstructed is skipped and reported, never the end of an export.
constexpr size_t kMaxSkippedReported = 100;

struct ExportStats {
  size_t frames = 0, batches = 0, points = 0;
  size_t frames_skipped = 0;
  std::vector<std::string> skipped;  // why, for the first kMaxSkippedReported skipped frames
  uint64_t stored_bytes = 0;         // objects read from the store
  uint64_t output_bytes = 0;         // reconstructed x, y, z, intensity (16 bytes a point)
  double seconds = 0;
  double frames_per_s() const { return seconds > 0 ? double(frames) / seconds : 0; }
  double output_mb_per_s() const { return seconds > 0 ? double(output_bytes) / seconds / 1e6 : 0; }
  double stored_mb_per_s() const { return seconds > 0 ? double(stored_bytes) / seconds / 1e6 : 0; }
};

// The export order of n rows: 0..n-1, or a Fisher-Yates shuffle drawn from mt19937_64(seed)
// (its output is fixed by the C++ standard; std::shuffle's use of it is not).
std::vector<size_t> ExportOrder(size_t n, bool shuffle, uint64_t seed);

// The frames of rows (in ExportOrder) reconstructed into out_dir in options.layout. A frame that
// cannot be reconstructed is skipped and reported; an object that cannot be read, or a file that
// cannot be written, ends the export with that error.
StatusOr<ExportStats> ExportFrames(store::Store* store, const std::vector<store::FrameRecord>& rows,
                                   MapVersions* maps, const ExportOptions& options,
                                   const std::string& out_dir);

}  // namespace dv::server
