#include "dejaview/recorded/ouster.h"

#include <Eigen/Geometry>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "dejaview/base/file_util.h"

namespace dv::recorded {
namespace {

using nlohmann::json;

// Bounds on what a metadata file may declare: the largest Ouster sensors have 128 beams, 2048
// columns a frame and 16 columns a packet; a UDP payload is at most 65507 bytes.
constexpr int kMaxPixelsPerColumn = 256;
constexpr int kMaxColumnsPerFrame = 4096;
constexpr int kMaxColumnsPerPacket = 64;
constexpr size_t kMaxUdpPayload = 65507;
constexpr size_t kMetadataMaxBytes = size_t(16) << 20;

// The packet layout of a profile (Ouster's sensor documentation, "Lidar Data Packet Format").
struct Layout {
  size_t packet_header, column_header, pixel, column_footer, packet_footer;
};
Layout LayoutOf(OusterProfile profile) {
  switch (profile) {
    case OusterProfile::kLegacy:
      return {0, 16, 12, 4, 0};
    case OusterProfile::kRng19Rfl8Sig16Nir16:
      return {32, 12, 12, 0, 32};
    case OusterProfile::kRng15Rfl8Nir8:
      return {32, 12, 4, 0, 32};
  }
  return {};
}

size_t ColumnSize(const Layout& l, int pixels_per_column) {
  return l.column_header + size_t(pixels_per_column) * l.pixel + l.column_footer;
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A key at the top level (firmware 2.x) or in one of the sections the SDK's later layout
// groups them in.
const json* Find(const json& root, const char* key) {
  if (const auto it = root.find(key); it != root.end()) return &*it;
  for (const char* section : {"data_format", "lidar_data_format", "beam_intrinsics",
                              "lidar_intrinsics", "config_params", "sensor_info"}) {
    const auto s = root.find(section);
    if (s == root.end() || !s->is_object()) continue;
    if (const auto it = s->find(key); it != s->end()) return &*it;
  }
  return nullptr;
}

class MetadataReader {
 public:
  MetadataReader(const json& root, const std::string& name) : root_(root), name_(name) {}

  Status Missing(const char* key, const char* what) const {
    return Status::Corruption(name_ + ": " + key + ": " + what);
  }
  StatusOr<int> Int(const char* key, int lo, int hi) const {
    const json* v = Find(root_, key);
    if (v == nullptr) return Missing(key, "missing");
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      return Missing(key, ("expected an integer in " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ", got " + v->dump())
                              .c_str());
    return int(v->get<int64_t>());
  }
  StatusOr<double> Number(const char* key) const {
    const json* v = Find(root_, key);
    if (v == nullptr) return Missing(key, "missing");
    if (!v->is_number() || !std::isfinite(v->get<double>()))
      return Missing(key, "expected a finite number");
    return v->get<double>();
  }
  StatusOr<std::vector<double>> Numbers(const char* key, size_t count) const {
    const json* v = Find(root_, key);
    if (v == nullptr) return Missing(key, "missing");
    if (!v->is_array() || v->size() != count)
      return Missing(key, ("expected an array of " + std::to_string(count) + " numbers").c_str());
    std::vector<double> out;
    for (const json& x : *v) {
      if (!x.is_number() || !std::isfinite(x.get<double>()))
        return Missing(key, "expected finite numbers");
      out.push_back(x.get<double>());
    }
    return out;
  }
  std::string Text(const char* key, const std::string& fallback) const {
    const json* v = Find(root_, key);
    return v != nullptr && v->is_string() ? v->get<std::string>() : fallback;
  }

 private:
  const json& root_;
  const std::string& name_;
};

}  // namespace

const char* OusterProfileName(OusterProfile profile) {
  switch (profile) {
    case OusterProfile::kLegacy:
      return "LEGACY";
    case OusterProfile::kRng19Rfl8Sig16Nir16:
      return "RNG19_RFL8_SIG16_NIR16";
    case OusterProfile::kRng15Rfl8Nir8:
      return "RNG15_RFL8_NIR8";
  }
  return "?";
}

size_t OusterSensorInfo::packet_size() const {
  const Layout l = LayoutOf(profile);
  return l.packet_header + size_t(columns_per_packet) * ColumnSize(l, pixels_per_column) +
         l.packet_footer;
}

StatusOr<OusterSensorInfo> ParseOusterMetadata(const std::string& json_text,
                                               const std::string& name) {
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    return Status::Corruption(name + ": not a JSON object (Ouster sensor metadata expected)");
  const MetadataReader r(root, name);
  OusterSensorInfo info;
  info.product_line = r.Text("prod_line", "Ouster");
  // Firmware before 2.2 has no profile key: its packets are LEGACY.
  const std::string profile = r.Text("udp_profile_lidar", "LEGACY");
  if (profile == "LEGACY") {
    info.profile = OusterProfile::kLegacy;
  } else if (profile == "RNG19_RFL8_SIG16_NIR16") {
    info.profile = OusterProfile::kRng19Rfl8Sig16Nir16;
  } else if (profile == "RNG15_RFL8_NIR8") {
    info.profile = OusterProfile::kRng15Rfl8Nir8;
  } else {
    return Status::InvalidArgument(
        name + ": udp_profile_lidar " + profile +
        " is not supported (LEGACY, RNG19_RFL8_SIG16_NIR16, RNG15_RFL8_NIR8 are)");
  }
  DV_ASSIGN_OR_RETURN(info.pixels_per_column, r.Int("pixels_per_column", 1, kMaxPixelsPerColumn));
  DV_ASSIGN_OR_RETURN(info.columns_per_packet,
                      r.Int("columns_per_packet", 1, kMaxColumnsPerPacket));
  DV_ASSIGN_OR_RETURN(info.columns_per_frame, r.Int("columns_per_frame", 1, kMaxColumnsPerFrame));
  if (info.packet_size() > kMaxUdpPayload)
    return Status::Corruption(name + ": pixels_per_column x columns_per_packet give a " +
                              std::to_string(info.packet_size()) +
                              "-byte packet, more than UDP carries");
  if (Find(root, "udp_port_lidar") != nullptr) {
    DV_ASSIGN_OR_RETURN(info.udp_port_lidar, r.Int("udp_port_lidar", 1, 65535));
  }
  const auto rows = size_t(info.pixels_per_column);
  DV_ASSIGN_OR_RETURN(info.beam_altitude_deg, r.Numbers("beam_altitude_angles", rows));
  DV_ASSIGN_OR_RETURN(info.beam_azimuth_deg, r.Numbers("beam_azimuth_angles", rows));
  DV_ASSIGN_OR_RETURN(info.lidar_origin_to_beam_origin_mm,
                      r.Number("lidar_origin_to_beam_origin_mm"));
  DV_ASSIGN_OR_RETURN(const auto t, r.Numbers("lidar_to_sensor_transform", 16));
  for (int i = 0; i < 16; ++i) info.lidar_to_sensor_mm(i / 4, i % 4) = t[size_t(i)];
  const Eigen::Matrix3d R = info.lidar_to_sensor_mm.topLeftCorner<3, 3>();
  if ((R * R.transpose() - Eigen::Matrix3d::Identity()).cwiseAbs().maxCoeff() > 1e-6 ||
      R.determinant() < 0 || info.lidar_to_sensor_mm.row(3) != Eigen::RowVector4d(0, 0, 0, 1))
    return Status::Corruption(name +
                              ": lidar_to_sensor_transform: not a rotation and a translation");
  return info;
}

StatusOr<OusterSensorInfo> ReadOusterMetadata(const std::string& path) {
  DV_ASSIGN_OR_RETURN(const std::string text, ReadFileText(path, kMetadataMaxBytes));
  return ParseOusterMetadata(text, path);
}

Status ParseOusterPacket(const OusterSensorInfo& info, const uint8_t* data, size_t size,
                         const std::string& what, OusterPacket* packet) {
  if (size != info.packet_size())
    return Status::Corruption(what + ": " + std::to_string(size) + " bytes, a " +
                              OusterProfileName(info.profile) + " lidar packet of " +
                              std::to_string(info.pixels_per_column) + " x " +
                              std::to_string(info.columns_per_packet) + " pixels has " +
                              std::to_string(info.packet_size()));
  const bool legacy = info.profile == OusterProfile::kLegacy;
  const Layout l = LayoutOf(info.profile);
  const size_t column_size = ColumnSize(l, info.pixels_per_column);
  const auto rows = size_t(info.pixels_per_column), cols = size_t(info.columns_per_packet);
  if (!legacy) {
    // The eUDP packet header: packet_type u16 (1: lidar data) at 0, frame_id u16 at 2.
    if (Load<uint16_t>(data) != 1)
      return Status::Corruption(what + ": packet byte offset 0: packet type " +
                                std::to_string(Load<uint16_t>(data)) + ", not lidar data (1)");
    packet->frame_id = Load<uint16_t>(data + 2);
  }
  packet->columns.resize(cols);
  for (auto* channel : {&packet->range_mm, &packet->reflectivity, &packet->near_ir, &packet->flags,
                        &packet->signal})
    channel->assign(rows * cols, 0);
  if (info.profile == OusterProfile::kRng15Rfl8Nir8) packet->signal.clear();
  for (size_t c = 0; c < cols; ++c) {
    const uint8_t* col = data + l.packet_header + c * column_size;
    OusterColumnHeader& h = packet->columns[c];
    h.timestamp_ns = Load<uint64_t>(col);
    h.measurement_id = Load<uint16_t>(col + 8);
    if (legacy) {
      h.frame_id = Load<uint16_t>(col + 10);
      h.encoder_count = Load<uint32_t>(col + 12);
      h.status = Load<uint32_t>(col + column_size - 4);
    } else {
      h.status = Load<uint16_t>(col + 10);
    }
    if (h.measurement_id >= info.columns_per_frame)
      return Status::Corruption(
          what + ": packet byte offset " + std::to_string(size_t(col - data) + 8) +
          ": measurement id " + std::to_string(h.measurement_id) +
          " is not below columns_per_frame " + std::to_string(info.columns_per_frame));
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* px = col + l.column_header + r * l.pixel;
      const size_t i = r * cols + c;
      switch (info.profile) {
        case OusterProfile::kLegacy:
          packet->range_mm[i] = Load<uint32_t>(px) & 0xfffff;
          packet->flags[i] = px[3] >> 4;
          packet->reflectivity[i] = Load<uint16_t>(px + 4);
          packet->signal[i] = Load<uint16_t>(px + 6);
          packet->near_ir[i] = Load<uint16_t>(px + 8);
          break;
        case OusterProfile::kRng19Rfl8Sig16Nir16:
          packet->range_mm[i] = Load<uint32_t>(px) & 0x7ffff;
          packet->flags[i] = (px[2] & 0xf8) >> 3;
          packet->reflectivity[i] = px[4];
          packet->signal[i] = Load<uint16_t>(px + 6);
          packet->near_ir[i] = Load<uint16_t>(px + 8);
          break;
        case OusterProfile::kRng15Rfl8Nir8:
          // 15 bits of range in units of 8 mm; near-IR's 8 bits are its 16-bit value / 16.
          packet->range_mm[i] = (Load<uint16_t>(px) & 0x7fffu) << 3;
          packet->flags[i] = px[1] >> 7;
          packet->reflectivity[i] = px[2];
          packet->near_ir[i] = uint32_t(px[3]) << 4;
          break;
      }
    }
  }
  if (legacy) packet->frame_id = packet->columns[0].frame_id;
  return Status::Ok();
}

void OusterScanBatcher::Start(uint16_t frame_id) {
  const int w = info_.columns_per_frame, h = info_.pixels_per_column;
  const auto pixels = size_t(w) * size_t(h);
  scan_.width = w;
  scan_.height = h;
  scan_.frame_id = frame_id;
  scan_.columns_received = 0;
  scan_.timestamp_ns.assign(size_t(w), 0);
  scan_.measurement_id.assign(size_t(w), 0);
  scan_.status.assign(size_t(w), 0);
  scan_.encoder_count.assign(size_t(w), 0);
  for (auto* image : {&scan_.range_mm, &scan_.signal, &scan_.reflectivity, &scan_.near_ir})
    image->assign(pixels, 0);
  if (info_.profile == OusterProfile::kRng15Rfl8Nir8) scan_.signal.clear();
  open_ = true;
}

bool OusterScanBatcher::Add(const OusterPacket& packet, OusterScan* done) {
  bool finished = false;
  if (open_ && packet.frame_id != scan_.frame_id) finished = Flush(done);
  if (!open_) Start(packet.frame_id);
  const auto cols = packet.columns.size();
  const auto w = size_t(scan_.width);
  for (size_t c = 0; c < cols; ++c) {
    const OusterColumnHeader& h = packet.columns[c];
    // An invalid column carries no measurement: it stays zero, as if it had not arrived.
    if (!ColumnValid(h.status)) continue;
    const size_t m = h.measurement_id;
    if (scan_.status[m] == 0) ++scan_.columns_received;
    scan_.timestamp_ns[m] = h.timestamp_ns;
    scan_.measurement_id[m] = h.measurement_id;
    scan_.status[m] = h.status;
    scan_.encoder_count[m] = h.encoder_count;
    for (size_t r = 0; r < size_t(scan_.height); ++r) {
      const size_t from = r * cols + c, to = r * w + m;
      scan_.range_mm[to] = packet.range_mm[from];
      scan_.reflectivity[to] = packet.reflectivity[from];
      scan_.near_ir[to] = packet.near_ir[from];
      if (!packet.signal.empty()) scan_.signal[to] = packet.signal[from];
    }
  }
  return finished;
}

bool OusterScanBatcher::Flush(OusterScan* done) {
  if (!open_) return false;
  open_ = false;
  if (scan_.columns_received == 0) return false;
  *done = std::move(scan_);
  scan_ = OusterScan();
  return true;
}

OusterXyz::OusterXyz(const OusterSensorInfo& info)
    : width_(info.columns_per_frame), height_(info.pixels_per_column) {
  // Ouster's range-to-XYZ equations: the beam leaves the lidar origin's circle of radius
  // n = lidar_origin_to_beam_origin_mm at the encoder angle; a range r is measured from there.
  //   theta_e = 2 pi (1 - column / width), theta_a = -azimuth[row], phi = altitude[row]
  //   x = (r - n) cos(theta_e + theta_a) cos(phi) + n cos(theta_e)
  //   y = (r - n) sin(theta_e + theta_a) cos(phi) + n sin(theta_e)
  //   z = (r - n) sin(phi)
  // then lidar_to_sensor_transform (millimetres) takes the point into the sensor frame.
  const double n = info.lidar_origin_to_beam_origin_mm;
  const Eigen::Matrix3d R = info.lidar_to_sensor_mm.topLeftCorner<3, 3>();
  const Eigen::Vector3d t_m = info.lidar_to_sensor_mm.topRightCorner<3, 1>() * 1e-3;
  const auto pixels = size_t(width_) * size_t(height_);
  direction_.resize(pixels);
  offset_m_.resize(pixels);
  for (int row = 0; row < height_; ++row) {
    const double azimuth = -info.beam_azimuth_deg[size_t(row)] * M_PI / 180.0;
    const double altitude = info.beam_altitude_deg[size_t(row)] * M_PI / 180.0;
    for (int col = 0; col < width_; ++col) {
      const double encoder = 2.0 * M_PI - col * (2.0 * M_PI / width_);
      const Eigen::Vector3d dir(std::cos(encoder + azimuth) * std::cos(altitude),
                                std::sin(encoder + azimuth) * std::cos(altitude),
                                std::sin(altitude));
      const Eigen::Vector3d offset =
          n * (Eigen::Vector3d(std::cos(encoder), std::sin(encoder), 0.0) - dir);
      const size_t i = size_t(row) * size_t(width_) + size_t(col);
      direction_[i] = R * dir * 1e-3;
      offset_m_[i] = R * offset * 1e-3 + t_m;
    }
  }
}

Eigen::Vector3d OusterXyz::Point(int row, int column, uint32_t range_mm) const {
  const size_t i = size_t(row) * size_t(width_) + size_t(column);
  return direction_[i] * double(range_mm) + offset_m_[i];
}

PointCloud OusterXyz::Points(const OusterScan& scan, int64_t* stamp_ns) const {
  PointCloud cloud;
  *stamp_ns = 0;
  if (scan.width != width_ || scan.height != height_) return cloud;
  for (int col = 0; col < width_; ++col) {
    if (scan.status[size_t(col)] != 0) {
      *stamp_ns = int64_t(scan.timestamp_ns[size_t(col)]);
      break;
    }
  }
  cloud.reserve(size_t(width_) * size_t(height_));
  for (int col = 0; col < width_; ++col) {
    // The difference taken modulo 2^64 (a corrupt stamp must not overflow a signed subtraction):
    // the same as the signed one wherever that one fits.
    const auto t_s = float(
        double(int64_t(uint64_t(scan.timestamp_ns[size_t(col)]) - uint64_t(*stamp_ns))) * 1e-9);
    for (int row = 0; row < height_; ++row) {
      const size_t i = size_t(row) * size_t(width_) + size_t(col);
      if (scan.range_mm[i] == 0) continue;
      cloud.push_back(Point(row, col, scan.range_mm[i]).cast<float>(), float(scan.reflectivity[i]));
      cloud.ring.push_back(uint16_t(row));
      cloud.time_offset_s.push_back(t_s);
    }
  }
  return cloud;
}

}  // namespace dv::recorded
