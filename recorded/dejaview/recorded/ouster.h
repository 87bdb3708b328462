// Ouster lidar captures (spec: docs/recorded.md, "Ouster captures"): the sensor's metadata JSON,
// its lidar UDP packets in the three single-return profiles (LEGACY, RNG19_RFL8_SIG16_NIR16,
// RNG15_RFL8_NIR8), packets batched into scans by frame id, and a scan's ranges turned into
// points. Written by hand from the packet layouts and the range-to-XYZ equations of Ouster's
// sensor documentation: the SDK is not a Debian package, and this is all of it an import needs.
//
// A caller may rely on: parsing never reads past a packet; a packet whose size, measurement id
// or frame does not fit the metadata fails with a Status naming the packet (what) and the byte
// offset of the bad field; metadata that cannot describe a valid packet (sizes, angle counts,
// a non-rigid transform) fails naming the key, so nothing later allocates beyond what the
// metadata's bounded sizes give.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/status.h"

namespace dv::recorded {

enum class OusterProfile {
  kLegacy,               // 12-byte pixels, 16-byte column header, 4-byte column footer
  kRng19Rfl8Sig16Nir16,  // 12-byte pixels, 32-byte packet header and footer
  kRng15Rfl8Nir8,        // 4-byte pixels ("low data rate"), packet header and footer
};
const char* OusterProfileName(OusterProfile profile);

struct OusterSensorInfo {
  std::string product_line;  // "OS-1-128"
  OusterProfile profile = OusterProfile::kLegacy;
  int pixels_per_column = 0, columns_per_packet = 0, columns_per_frame = 0;
  int udp_port_lidar = 7502;
  std::vector<double> beam_altitude_deg, beam_azimuth_deg;
  double lidar_origin_to_beam_origin_mm = 0;
  Eigen::Matrix4d lidar_to_sensor_mm = Eigen::Matrix4d::Identity();  // translation in mm

  // The size of one lidar packet of this profile and layout.
  size_t packet_size() const;
};

// The metadata JSON as sensors of firmware 2.x write it (the keys at top level, data_format an
// object) or as the SDK's later "non-legacy" layout nests them (beam_intrinsics,
// lidar_intrinsics, lidar_data_format, config_params); name is for the error messages.
StatusOr<OusterSensorInfo> ParseOusterMetadata(const std::string& json_text,
                                               const std::string& name);
StatusOr<OusterSensorInfo> ReadOusterMetadata(const std::string& path);

struct OusterColumnHeader {
  uint64_t timestamp_ns = 0;
  uint16_t measurement_id = 0;  // the column's index in the scan, < columns_per_frame
  uint32_t status = 0;          // bit 0: the column is valid (LEGACY: all ones)
  uint32_t encoder_count = 0;   // LEGACY only (0 otherwise)
  uint16_t frame_id = 0;        // LEGACY only (0 otherwise: OusterPacket::frame_id has it)
};
inline bool ColumnValid(uint32_t status) { return (status & 1) != 0; }

// One lidar packet: its column headers and each channel as an image of pixels_per_column rows
// x columns_per_packet columns, row-major, the values as the packet codes them (range in mm,
// RNG15's range already multiplied by 8 and its near-IR by 16). A channel the profile lacks is
// empty (signal in RNG15_RFL8_NIR8).
struct OusterPacket {
  uint16_t frame_id = 0;
  std::vector<OusterColumnHeader> columns;
  std::vector<uint32_t> range_mm, signal, reflectivity, near_ir, flags;
};
Status ParseOusterPacket(const OusterSensorInfo& info, const uint8_t* data, size_t size,
                         const std::string& what, OusterPacket* packet);

// A scan: the packets of one frame id, each column at its measurement id; columns that did not
// arrive stay zero (range 0: no point). Channel images are height x width, row-major, staggered
// (column c holds what the sensor measured at measurement id c).
struct OusterScan {
  int width = 0, height = 0;
  uint16_t frame_id = 0;
  size_t columns_received = 0;
  std::vector<uint64_t> timestamp_ns;
  std::vector<uint16_t> measurement_id;
  std::vector<uint32_t> status, encoder_count;
  std::vector<uint32_t> range_mm, signal, reflectivity, near_ir;
};

// Batches packets into scans as the sensor numbers them: a packet of a new frame id finishes
// the scan before it.
class OusterScanBatcher {
 public:
  explicit OusterScanBatcher(const OusterSensorInfo& info) : info_(info) {}
  // True when the packet finished a scan, moved into *done.
  bool Add(const OusterPacket& packet, OusterScan* done);
  // The scan being batched, if it has any column; true when moved into *done.
  bool Flush(OusterScan* done);

 private:
  void Start(uint16_t frame_id);
  const OusterSensorInfo& info_;
  OusterScan scan_;
  bool open_ = false;
};

// Ranges to points in the sensor frame, with per-pixel directions and offsets computed once.
class OusterXyz {
 public:
  explicit OusterXyz(const OusterSensorInfo& info);
  // The scan's points with range > 0 (in metres, float32, rounded from double), column by
  // column (measurement id) and within a column by row: intensity = reflectivity, ring = row,
  // time_offset_s = the column's timestamp - *stamp_ns, where *stamp_ns is the timestamp of the
  // scan's first column that arrived.
  PointCloud Points(const OusterScan& scan, int64_t* stamp_ns) const;
  // The point of pixel (row, column) at range_mm, before rounding.
  Eigen::Vector3d Point(int row, int column, uint32_t range_mm) const;

 private:
  int width_, height_;
  std::vector<Eigen::Vector3d> direction_, offset_m_;  // per pixel, row-major
};

}  // namespace dv::recorded
