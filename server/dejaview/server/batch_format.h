// The packed training batch of `dejaview export --layout packed` (spec: docs/export-format.md):
// one file per batch holding its reconstructed frames with their metadata, each frame framed by
// length and masked CRC32C so that a reader detects a torn or altered file. Each frame's points
// (x, y, z, intensity float32, 16 bytes a point) start at a file offset that is a multiple of 16,
// so that a reader that loads the file at an aligned address (mmap, an aligned buffer) maps them
// in place as an N x 4 float32 array. A caller may rely on: ParseBatch and DecodeBatch never
// allocate more than the input's size allows and report any defect as kCorruption naming the
// frame and field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv::server {

constexpr uint32_t kBatchMagic = 0x42585644;  // "DVXB" little-endian
constexpr uint32_t kBatchVersion = 2;         // 2: point arrays 16-byte aligned in the file
constexpr size_t kBatchPointAlignment = 16;
constexpr uint32_t kMaxBatchFrames = 1u << 16;
constexpr uint32_t kMaxBatchFrameBytes = 64u << 20;

struct BatchFrameHeader {
  std::string vehicle, drive, map_version;
  uint32_t sensor_id = 0;
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  Pose T_map_sensor = Pose::Identity();
};

struct BatchFrame : BatchFrameHeader {
  PointCloud cloud;  // sensor frame; x, y, z, intensity
};

// A frame of a batch parsed in place: its points are `points` rows of x, y, z, intensity
// (little-endian float32) at data + points_offset, and points_offset % 16 == 0.
struct BatchFrameView : BatchFrameHeader {
  size_t points_offset = 0;
  uint32_t points = 0;
};

std::vector<uint8_t> EncodeBatch(const std::vector<BatchFrame>& frames);

// One frame of a batch encoded apart from the others, so that the threads that decode an
// export's frames also encode them and the thread writing the file in order only writes. A frame's
// bytes depend on its place in the file only through the padding before its points, and that only
// on whether it is its batch's first frame: every later frame starts 8 bytes past a multiple of 16
// (the frame before ends with its aligned points). The file is the batch header (EncodeBatchHeader)
// then, for each frame, its head and its rows.
struct EncodedBatchFrame {
  std::vector<uint8_t> head;  // length, masked CRC and the frame's bytes up to its points
  bool first = false;         // encoded as its batch's first frame
};
// rows: the frame's points as EncodeKittiBin lays them out (16 bytes a point).
EncodedBatchFrame EncodeBatchFrame(const BatchFrameHeader& header, const std::vector<uint8_t>& rows,
                                   bool first);
std::vector<uint8_t> EncodeBatchHeader(uint32_t frames);
// Checks the whole file (every CRC included) without copying the points.
StatusOr<std::vector<BatchFrameView>> ParseBatch(const uint8_t* data, size_t size);
StatusOr<std::vector<BatchFrame>> DecodeBatch(const uint8_t* data, size_t size);

}  // namespace dv::server
