// The packed training batch of `dejaview export --layout packed` (spec: docs/export-format.md):
// one file per batch holding its reconstructed frames with their metadata, each frame framed by
// length and masked CRC32C so that a reader detects a torn or altered file. A caller may rely
// on: DecodeBatch never allocates more than the input's size allows and reports any defect as
// kCorruption naming the frame and field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/pose.h"
#include "dejaview/base/status.h"

namespace dv::server {

constexpr uint32_t kBatchMagic = 0x42585644;  // "DVXB" little-endian
constexpr uint32_t kBatchVersion = 1;
constexpr uint32_t kMaxBatchFrames = 1u << 16;
constexpr uint32_t kMaxBatchFrameBytes = 64u << 20;

struct BatchFrame {
  std::string vehicle, drive, map_version;
  uint32_t sensor_id = 0;
  uint64_t sequence = 0;
  int64_t timestamp_ns = 0;
  Pose T_map_sensor = Pose::Identity();
  PointCloud cloud;  // sensor frame; x, y, z, intensity
};

std::vector<uint8_t> EncodeBatch(const std::vector<BatchFrame>& frames);
StatusOr<std::vector<BatchFrame>> DecodeBatch(const uint8_t* data, size_t size);

}  // namespace dv::server
