// The container of docs/delta-format.md: header, section table, checksum.
#include "container.h"

#include <Eigen/Geometry>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "candidates.h"
#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"

namespace dv::codec {
namespace {

uint64_t ZigZag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t UnZigZag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

}  // namespace

const char* SectionName(uint8_t id) {
  switch (id) {
    case kMapSelection:
      return "map";
    case kResidualGeometry:
      return "residual";
    case kResidualIntensity:
      return "residual_intensity";
    case kIntraGeometry:
      return "intra";
    case kIntraIntensity:
      return "intra_intensity";
    case kGapGeometry:
      return "gap";
    case kGapIntensity:
      return "gap_intensity";
    case kSurfaceGeometry:
      return "surface";
    case kSurfaceIntensity:
      return "surface_intensity";
    case kFill:
      return "fill";
    default:
      return "unknown";
  }
}

double CellStep(double bound_m) { return 2 * (bound_m - kMarginM) / std::sqrt(3.0); }

Eigen::Matrix3d QuantPose::R() const {
  return RotationOf(Eigen::Vector4d(double(q[0]), double(q[1]), double(q[2]), double(q[3])));
}

Eigen::Vector3d QuantPose::translation() const {
  return Eigen::Vector3d(double(t[0]), double(t[1]), double(t[2])) * kTranslationStepM;
}

Pose QuantPose::pose() const {
  Pose T = Pose::Identity();
  T.linear() = R();
  T.translation() = translation();
  return T;
}

QuantPose Quantize(const Pose& T) {
  QuantPose qp;
  for (int a = 0; a < 3; ++a) qp.t[a] = std::llround(T.translation()[a] / kTranslationStepM);
  Eigen::Quaterniond q(T.linear());
  q.normalize();
  if (q.w() < 0) q.coeffs() = -q.coeffs();
  const double c[4] = {q.w(), q.x(), q.y(), q.z()};
  for (int a = 0; a < 4; ++a) qp.q[a] = std::llround(c[a] * kQuaternionScale);
  return qp;
}

std::vector<uint8_t> WriteContainer(
    const Header& h, const std::vector<std::pair<uint8_t, std::vector<uint8_t>>>& sections) {
  ByteWriter w;
  w.Bytes(kMagic, 4);
  w.U8(h.version);
  w.U8(h.mode);
  w.U8(h.flags);
  w.Varint(h.tolerance_um);
  w.Varint(h.residual_um);
  w.Varint(h.info.sequence);
  w.Varint(ZigZag(h.info.timestamp_ns));
  w.Varint(h.info.sensor_id);
  if (h.mode == kModeDelta) w.U64(h.map_id);
  for (int64_t v : h.pose.t) w.Varint(ZigZag(v));
  for (int64_t v : h.pose.q) w.Varint(ZigZag(v));
  w.U8(uint8_t(sections.size()));
  for (const auto& [id, body] : sections) {
    w.U8(id);
    w.Varint(body.size());
  }
  for (const auto& s : sections) w.Bytes(s.second.data(), s.second.size());
  w.U32(crc32c::Mask(crc32c::Value(w.buffer().data(), w.size())));
  return w.Take();
}

namespace {

Status Bad(const std::string& what) { return Status::Corruption("delta: " + what); }

// The header's fields after the magic, up to the section count; then their ranges.
Status ReadHeader(ByteReader* r, size_t size, Header* h, uint8_t* section_count) {
  uint64_t ts = 0, sensor = 0;
  r->U8(&h->version);
  if (!r->failed() && h->version != kFormatVersion) {
    return Bad("unsupported format version " + std::to_string(h->version));
  }
  r->U8(&h->mode);
  r->U8(&h->flags);
  r->Varint(&h->tolerance_um);
  r->Varint(&h->residual_um);
  r->Varint(&h->info.sequence);
  r->Varint(&ts);
  r->Varint(&sensor);
  h->info.timestamp_ns = UnZigZag(ts);
  h->info.sensor_id = uint32_t(sensor);
  if (h->mode == kModeDelta) r->U64(&h->map_id);
  for (int64_t& v : h->pose.t) {
    uint64_t z = 0;
    r->Varint(&z);
    v = UnZigZag(z);
  }
  for (int64_t& v : h->pose.q) {
    uint64_t z = 0;
    r->Varint(&z);
    v = UnZigZag(z);
  }
  r->U8(section_count);
  if (r->failed()) return Bad("truncated header (" + std::to_string(size) + " bytes)");
  if (h->mode != kModeIntra && h->mode != kModeDelta) {
    return Bad("unknown mode " + std::to_string(h->mode));
  }
  if (sensor > UINT32_MAX) return Bad("sensor_id out of range");
  if (h->tolerance_um < 1000 || h->tolerance_um > 10000000) return Bad("tolerance out of range");
  if (h->residual_um <= uint64_t(2 * kMarginM * 1e6) || h->residual_um > h->tolerance_um) {
    return Bad("residual precision out of range");
  }
  for (int64_t v : h->pose.t) {
    if (std::llabs(v) > (int64_t(1) << 50)) return Bad("pose translation out of range");
  }
  int64_t qn = 0;
  for (int64_t v : h->pose.q) {
    if (std::llabs(v) > (int64_t(1) << 31)) return Bad("pose rotation out of range");
    qn = std::max<int64_t>(qn, std::llabs(v));
  }
  if (qn < (int64_t(1) << 29)) return Bad("pose rotation is not a unit quaternion");
  if (*section_count > kMaxSections) {
    return Bad("too many sections (" + std::to_string(*section_count) + ")");
  }
  return Status::Ok();
}

// The section table, its lengths against the input, the checksum, then each section's id.
Status ReadSections(ByteReader* r, const uint8_t* data, size_t size, uint8_t count, uint8_t mode,
                    std::vector<ParsedSection>* sections) {
  std::vector<std::pair<uint8_t, uint64_t>> table(count);
  uint64_t total = 0;
  for (auto& [id, len] : table) {
    r->U8(&id);
    r->Varint(&len);
    if (len > size) {
      return Bad("truncated: section of " + std::to_string(len) + " bytes in a " +
                 std::to_string(size) + "-byte input");
    }
    total += len;
  }
  if (r->failed()) return Bad("truncated section table");
  if (total + 4 > r->remaining()) {
    return Bad("truncated: sections need " + std::to_string(total + 4) + " bytes, " +
               std::to_string(r->remaining()) + " present");
  }
  if (total + 4 < r->remaining()) return Bad("trailing bytes after the last section");
  uint32_t stored = 0;
  std::memcpy(&stored, data + size - 4, 4);
  if (crc32c::Unmask(stored) != crc32c::Value(data, size - 4)) return Bad("checksum mismatch");
  sections->clear();
  const uint8_t* p = r->position();
  for (const auto& [id, len] : table) {
    for (const ParsedSection& s : *sections) {
      if (s.id == id) return Bad(std::string("duplicate section ") + SectionName(id));
    }
    if (id < kMapSelection || id > kFill) return Bad("unknown section id " + std::to_string(id));
    const bool intra_section = id == kIntraGeometry || id == kIntraIntensity;
    if (intra_section != (mode == kModeIntra)) {
      return Bad(std::string("section ") + SectionName(id) + " is not valid in " +
                 (mode == kModeIntra ? "an intra" : "a delta") + " frame");
    }
    sections->push_back({id, p, size_t(len)});
    p += len;
  }
  return Status::Ok();
}

}  // namespace

Status ParseContainer(const uint8_t* data, size_t size, Header* h,
                      std::vector<ParsedSection>* sections) {
  if (size < 4 || std::memcmp(data, kMagic, 4) != 0) {
    return Bad("not a dejaview delta frame (bad magic)");
  }
  ByteReader r(data, size);
  r.Skip(4);
  uint8_t count = 0;
  DV_RETURN_IF_ERROR(ReadHeader(&r, size, h, &count));
  return ReadSections(&r, data, size, count, h->mode, sections);
}

const ParsedSection* FindSection(const std::vector<ParsedSection>& s, uint8_t id) {
  for (const ParsedSection& x : s) {
    if (x.id == id) return &x;
  }
  return nullptr;
}

StatusOr<DecodedFrame> DecodeHeader(const uint8_t* data, size_t size) {
  Header h;
  std::vector<ParsedSection> sections;
  DV_RETURN_IF_ERROR(ParseContainer(data, size, &h, &sections));
  return HeaderFields(h, sections);
}

DecodedFrame HeaderFields(const Header& h, const std::vector<ParsedSection>& sections) {
  DecodedFrame out;
  out.T_map_sensor = h.pose.pose();
  out.info = h.info;
  out.tolerance_m = double(h.tolerance_um) / 1e6;
  out.residual_precision_m = double(h.residual_um) / 1e6;
  out.intra = h.mode == kModeIntra;
  out.intensity = (h.flags & kFlagIntensity) != 0;
  if (!out.intra) {
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016" PRIx64, h.map_id);
    out.map_version = hex;
  }
  for (const ParsedSection& s : sections) out.section_bytes.emplace_back(SectionName(s.id), s.size);
  return out;
}

}  // namespace dv::codec
