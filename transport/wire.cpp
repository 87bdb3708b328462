#include "dejaview/transport/wire.h"

#include <lz4.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "dejaview/base/bytes.h"

namespace dv::transport {
namespace {

constexpr uint16_t kFlagPose = 1u << 0;
constexpr uint16_t kFlagLz4 = 1u << 1;
constexpr uint16_t kKnownFlags = kFlagPose | kFlagLz4;
constexpr size_t kPoseBodyBytes = 4 + 1 + 1 + 2 + 8 + 12 * 8 + 36 * 8;

Status Rejected(WireCounters* counters, Reject why, const std::string& what,
                const std::string& msg) {
  if (counters) ++counters->rejected[size_t(why)];
  const std::string text = what + ": " + msg;
  return why == Reject::kTooLarge ? Status::OutOfRange(text) : Status::Corruption(text);
}

void PutPose(ByteWriter* w, const Pose& T, const Covariance6& cov) {
  for (double v : PoseToKitti12(T)) w->F64(v);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 6; ++c) w->F64(cov(r, c));
}

// The largest |element| of R^T R - I a rotation may have (the max-abs norm). It accepts rotations
// stored as float32 (~1e-7) or printed with 6 or more significant digits (~2e-6; KITTI's
// poses.txt ~1e-6); R then stretches by at most 1.5e-5 (1.5 mm at 100 m).
constexpr double kMaxRotationError = 1e-5;

// Reads T (3x4) and covariance; the rotation must be orthonormal (kMaxRotationError) so that
// every consumer can treat it as a rigid transform.
bool GetPose(ByteReader* r, Pose* T, Covariance6* cov, std::string* why) {
  std::array<double, 12> v{};
  for (double& x : v) r->F64(&x);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) r->F64(&(*cov)(i, j));
  if (r->failed()) return true;  // the caller reports truncation
  for (double x : v) {
    if (!std::isfinite(x)) return (*why = "T_map_sensor has a non-finite element", false);
  }
  if (!cov->allFinite()) return (*why = "covariance has a non-finite element", false);
  // Taken verbatim (no re-orthonormalisation) so that a pose crosses the wire bit-exactly.
  Eigen::Matrix3d R;
  R << v[0], v[1], v[2], v[4], v[5], v[6], v[8], v[9], v[10];
  *T = Pose::Identity();
  T->linear() = R;
  T->translation() = Eigen::Vector3d(v[3], v[7], v[11]);
  const double error = (R.transpose() * R - Eigen::Matrix3d::Identity()).cwiseAbs().maxCoeff();
  if (!(error <= kMaxRotationError) || !(R.determinant() > 0)) {
    return (*why = "T_map_sensor rotation is not orthonormal", false);
  }
  return true;
}

bool GetName(ByteReader* r, std::string* out) {
  uint8_t n = 0;
  const uint8_t* p = nullptr;
  if (!r->U8(&n) || !r->View(&p, n)) return false;
  out->assign(reinterpret_cast<const char*>(p), n);
  return true;
}

// The field-table rules shared by encoder and decoder (so that neither can drift).
Status CheckLayout(const FrameHeader& h, WireCounters* counters) {
  const std::string what = "wire frame";
  if (h.frame_id.size() > kMaxNameBytes) {
    return Rejected(counters, Reject::kBadName, what,
                    "frame_id is " + std::to_string(h.frame_id.size()) + " bytes, limit " +
                        std::to_string(kMaxNameBytes));
  }
  if (h.point_count > kMaxPoints) {
    return Rejected(counters, Reject::kTooLarge, what,
                    "point_count " + std::to_string(h.point_count) + " exceeds the limit " +
                        std::to_string(kMaxPoints));
  }
  if (h.point_stride > kMaxStride) {
    return Rejected(counters, Reject::kTooLarge, what,
                    "point_stride " + std::to_string(h.point_stride) + " exceeds the limit " +
                        std::to_string(kMaxStride));
  }
  if (uint64_t(h.point_count) * h.point_stride > kMaxPointBytes) {
    return Rejected(
        counters, Reject::kTooLarge, what,
        "point_count * point_stride exceeds " + std::to_string(kMaxPointBytes) + " bytes");
  }
  if (h.fields.size() > kMaxFields) {
    return Rejected(counters, Reject::kTooLarge, what,
                    "field_count " + std::to_string(h.fields.size()) + " exceeds the limit " +
                        std::to_string(kMaxFields));
  }
  if (h.point_count > 0 && h.point_stride == 0) {
    return Rejected(counters, Reject::kBadFieldTable, what, "point_stride is 0 with points");
  }
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // [begin, end) of each field
  for (const Field& f : h.fields) {
    const std::string name = "field '" + f.name + "'";
    if (f.name.empty() || f.name.size() > kMaxNameBytes) {
      return Rejected(counters, Reject::kBadName, what,
                      "field name of " + std::to_string(f.name.size()) + " bytes");
    }
    const size_t elem = DataTypeSize(f.type);
    if (elem == 0) {
      return Rejected(counters, Reject::kBadFieldTable, what,
                      name + " datatype " + std::to_string(int(f.type)) + " is not 1..8");
    }
    if (f.count == 0) return Rejected(counters, Reject::kBadFieldTable, what, name + " count 0");
    const uint64_t end = uint64_t(f.offset) + uint64_t(elem) * f.count;
    if (end > h.point_stride) {
      return Rejected(counters, Reject::kBadFieldTable, what,
                      name + " (offset " + std::to_string(f.offset) + ", " +
                          std::to_string(end - f.offset) + " bytes) ends past point_stride " +
                          std::to_string(h.point_stride));
    }
    for (const Field& g : h.fields) {
      if (&g != &f && g.name == f.name) {
        return Rejected(counters, Reject::kBadFieldTable, what, name + " appears twice");
      }
    }
    spans.emplace_back(f.offset, end);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return Rejected(counters, Reject::kBadFieldTable, what,
                      "fields overlap at offset " + std::to_string(spans[i].first));
    }
  }
  return Status::Ok();
}

double ReadElement(const uint8_t* p, DataType t) {
  switch (t) {
    case DataType::kInt8:
      return double(int8_t(*p));
    case DataType::kUint8:
      return double(*p);
    case DataType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DataType::kUint16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
  return 0;
}

bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }

// An integer intensity is divided by the largest value of its type, so that every type's range
// lands on the codec's [0, 1] (a UINT16 65535 is 1); a float is taken as it is.
double IntensityDivisor(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return std::numeric_limits<int8_t>::max();
    case DataType::kUint8:
      return std::numeric_limits<uint8_t>::max();
    case DataType::kInt16:
      return std::numeric_limits<int16_t>::max();
    case DataType::kUint16:
      return std::numeric_limits<uint16_t>::max();
    case DataType::kInt32:
      return std::numeric_limits<int32_t>::max();
    case DataType::kUint32:
      return std::numeric_limits<uint32_t>::max();
    case DataType::kFloat32:
    case DataType::kFloat64:
      break;
  }
  return 1;
}

const Field* FindField(const FrameHeader& h, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    for (const Field& f : h.fields) {
      if (f.name == n) return &f;
    }
  }
  return nullptr;
}

}  // namespace

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kInt16:
    case DataType::kUint16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

const char* RejectName(Reject r) {
  switch (r) {
    case Reject::kTruncated:
      return "truncated";
    case Reject::kBadMagic:
      return "bad_magic";
    case Reject::kBadVersion:
      return "bad_version";
    case Reject::kBadFlags:
      return "bad_flags";
    case Reject::kBadName:
      return "bad_name";
    case Reject::kTooLarge:
      return "too_large";
    case Reject::kBadFieldTable:
      return "bad_field_table";
    case Reject::kBadLz4:
      return "bad_lz4";
    case Reject::kTrailingBytes:
      return "trailing_bytes";
    case Reject::kBadPose:
      return "bad_pose";
    case Reject::kNotMappable:
      return "not_mappable";
    case Reject::kWrongShape:
      return "wrong_shape";
    case Reject::kUnknownTopic:
      return "unknown_topic";
    case Reject::kCount:
      break;
  }
  return "unknown";
}

uint64_t WireCounters::Total() const {
  uint64_t n = 0;
  for (uint64_t c : rejected) n += c;
  return n;
}

Status CheckFrameLayout(const FrameHeader& header) { return CheckLayout(header, nullptr); }

StatusOr<std::vector<uint8_t>> EncodeFrame(const FrameHeader& h, const uint8_t* points,
                                           size_t size) {
  DV_RETURN_IF_ERROR(CheckLayout(h, nullptr));
  if (size != uint64_t(h.point_count) * h.point_stride) {
    return Status::InvalidArgument("wire frame: " + std::to_string(size) +
                                   " point bytes for point_count * point_stride = " +
                                   std::to_string(uint64_t(h.point_count) * h.point_stride));
  }
  ByteWriter w;
  w.U32(kFrameMagic);
  w.U8(h.major);
  w.U8(h.minor);
  w.U16((h.has_pose ? kFlagPose : 0) | (h.lz4 ? kFlagLz4 : 0));
  w.U64(h.sequence);
  w.I64(h.sensor_stamp_ns);
  w.I64(h.publish_stamp_ns);
  w.U8(uint8_t(h.frame_id.size()));
  w.Bytes(h.frame_id.data(), h.frame_id.size());
  if (h.has_pose) PutPose(&w, h.T_map_sensor, h.covariance);
  w.U32(h.point_count);
  w.U32(h.point_stride);
  w.U8(uint8_t(h.fields.size()));
  for (const Field& f : h.fields) {
    w.U8(uint8_t(f.name.size()));
    w.Bytes(f.name.data(), f.name.size());
    w.U32(f.offset);
    w.U8(uint8_t(f.type));
    w.U32(f.count);
  }
  if (!h.lz4) {
    w.Bytes(points, size);
    return w.Take();
  }
  // LZ4's default (fast) mode: on the wire, speed matters more than ratio.
  std::vector<uint8_t> packed(static_cast<size_t>(LZ4_compressBound(int(size))));
  const int n =
      LZ4_compress_default(reinterpret_cast<const char*>(points),
                           reinterpret_cast<char*>(packed.data()), int(size), int(packed.size()));
  if (n <= 0 && size > 0) return Status::InvalidArgument("wire frame: LZ4 compression failed");
  w.U32(uint32_t(n));
  w.Bytes(packed.data(), size_t(n));
  return w.Take();
}

StatusOr<RawFrame> DecodeFrame(const uint8_t* data, size_t size, WireCounters* counters) {
  const std::string what = "wire frame";
  const auto truncated = [&](const char* at) {
    return Rejected(counters, Reject::kTruncated, what,
                    std::string("truncated at ") + at + " (" + std::to_string(size) + " bytes)");
  };
  ByteReader r(data, size);
  RawFrame out;
  FrameHeader& h = out.header;
  uint32_t magic = 0;
  uint16_t flags = 0;
  if (!r.U32(&magic)) return truncated("magic");
  if (magic != kFrameMagic) {
    return Rejected(counters, Reject::kBadMagic, what,
                    magic == kPoseMagic ? "magic is a pose message's (DVPS), not DVLF"
                                        : "bad magic (not DVLF)");
  }
  if (!r.U8(&h.major) || !r.U8(&h.minor)) return truncated("version");
  if (h.major != kWireMajor) {
    return Rejected(counters, Reject::kBadVersion, what,
                    "major version " + std::to_string(h.major) + " (this reader knows " +
                        std::to_string(kWireMajor) + ")");
  }
  if (!r.U16(&flags)) return truncated("flags");
  if (flags & ~kKnownFlags) {
    return Rejected(counters, Reject::kBadFlags, what,
                    "unknown flag bits " + std::to_string(flags));
  }
  h.has_pose = flags & kFlagPose;
  h.lz4 = flags & kFlagLz4;
  if (!r.U64(&h.sequence) || !r.I64(&h.sensor_stamp_ns) || !r.I64(&h.publish_stamp_ns)) {
    return truncated("stamps");
  }
  if (!GetName(&r, &h.frame_id)) return truncated("frame_id");
  if (h.has_pose) {
    std::string why;
    if (!GetPose(&r, &h.T_map_sensor, &h.covariance, &why)) {
      return Rejected(counters, Reject::kBadPose, what, why);
    }
    if (r.failed()) return truncated("pose");
  }
  uint8_t field_count = 0;
  if (!r.U32(&h.point_count) || !r.U32(&h.point_stride) || !r.U8(&field_count)) {
    return truncated("point_count");
  }
  // At most 255 small entries: bounded by the u8 count before any validation.
  h.fields.resize(field_count);
  for (Field& f : h.fields) {
    uint8_t type = 0;
    if (!GetName(&r, &f.name) || !r.U32(&f.offset) || !r.U8(&type) || !r.U32(&f.count)) {
      return truncated("field table");
    }
    f.type = DataType(type);
  }
  DV_RETURN_IF_ERROR(CheckLayout(h, counters));
  const size_t raw_bytes = size_t(h.point_count) * h.point_stride;  // <= kMaxPointBytes
  const uint8_t* src = nullptr;
  if (!h.lz4) {
    if (!r.View(&src, raw_bytes)) return truncated("points");
    out.points.assign(src, src + raw_bytes);
  } else {
    uint32_t packed = 0;
    if (!r.U32(&packed)) return truncated("lz4 size");
    if (packed > uint64_t(LZ4_compressBound(int(raw_bytes)))) {
      return Rejected(counters, Reject::kBadLz4, what,
                      "lz4 size " + std::to_string(packed) + " exceeds the bound for " +
                          std::to_string(raw_bytes) + " point bytes");
    }
    if (!r.View(&src, packed)) return truncated("lz4 points");
    out.points.resize(raw_bytes);
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src),
                                      reinterpret_cast<char*>(out.points.data()), int(packed),
                                      int(raw_bytes));
    if (n != int(raw_bytes)) {
      return Rejected(
          counters, Reject::kBadLz4, what,
          "lz4 points decode to " + (n < 0 ? std::string("garbage") : std::to_string(n)) +
              ", header says point_count * point_stride = " + std::to_string(raw_bytes));
    }
  }
  // A newer minor may append sections after the points; this reader skips them.
  if (r.remaining() > 0 && h.minor <= kWireMinor) {
    return Rejected(counters, Reject::kTrailingBytes, what,
                    std::to_string(r.remaining()) + " bytes after the points");
  }
  if (counters) ++counters->accepted;
  return out;
}

std::vector<uint8_t> EncodePose(const PoseMessage& pose) {
  ByteWriter w;
  w.U32(kPoseMagic);
  w.U8(kWireMajor);
  w.U8(kWireMinor);
  w.U16(0);
  w.I64(pose.stamp_ns);
  PutPose(&w, pose.T_map_sensor, pose.covariance);
  return w.Take();
}

StatusOr<PoseMessage> DecodePose(const uint8_t* data, size_t size, WireCounters* counters) {
  const std::string what = "wire pose";
  ByteReader r(data, size);
  uint32_t magic = 0;
  uint8_t major = 0, minor = 0;
  uint16_t flags = 0;
  PoseMessage p;
  if (!r.U32(&magic) || !r.U8(&major) || !r.U8(&minor) || !r.U16(&flags) || !r.I64(&p.stamp_ns)) {
    return Rejected(counters, Reject::kTruncated, what,
                    "truncated header (" + std::to_string(size) + " bytes)");
  }
  if (magic != kPoseMagic)
    return Rejected(counters, Reject::kBadMagic, what, "bad magic (not DVPS)");
  if (major != kWireMajor) {
    return Rejected(counters, Reject::kBadVersion, what,
                    "major version " + std::to_string(major) + " (this reader knows " +
                        std::to_string(kWireMajor) + ")");
  }
  if (flags != 0) {
    return Rejected(counters, Reject::kBadFlags, what,
                    "unknown flag bits " + std::to_string(flags));
  }
  std::string why;
  if (!GetPose(&r, &p.T_map_sensor, &p.covariance, &why)) {
    return Rejected(counters, Reject::kBadPose, what, why);
  }
  if (r.failed()) {
    return Rejected(counters, Reject::kTruncated, what,
                    "truncated pose (" + std::to_string(size) + " of " +
                        std::to_string(kPoseBodyBytes) + " bytes)");
  }
  if (r.remaining() > 0 && minor <= kWireMinor) {
    return Rejected(counters, Reject::kTrailingBytes, what,
                    std::to_string(r.remaining()) + " bytes after the covariance");
  }
  if (counters) ++counters->accepted;
  return p;
}

StatusOr<PointCloud> ToPointCloud(const RawFrame& frame, WireCounters* counters) {
  const FrameHeader& h = frame.header;
  const auto unmappable = [&](const std::string& msg) {
    return Rejected(counters, Reject::kNotMappable, "wire frame", msg);
  };
  const Field* xyz[3] = {FindField(h, {"x"}), FindField(h, {"y"}), FindField(h, {"z"})};
  for (int k = 0; k < 3; ++k) {
    const char* axis = k == 0 ? "x" : k == 1 ? "y" : "z";
    if (!xyz[k]) return unmappable(std::string("no field '") + axis + "'");
    if (!IsFloat(xyz[k]->type)) {
      return unmappable(std::string("field '") + axis + "' must be float32 or float64");
    }
  }
  const Field* intensity = FindField(h, {"intensity", "reflectivity"});
  const Field* ring = FindField(h, {"ring"});
  const Field* time = FindField(h, {"time", "t", "time_offset"});
  if (ring && IsFloat(ring->type)) {
    return unmappable("field 'ring' must be an integer type");
  }
  const size_t n = h.point_count;
  PointCloud cloud;
  cloud.xyz.resize(n);
  cloud.intensity.assign(n, 0.0f);
  if (ring) cloud.ring.resize(n);
  if (time) cloud.time_offset_s.resize(n);
  // Integer times are nanoseconds (Ouster's "t"), float times seconds (Velodyne's "time").
  const double time_scale = time && !IsFloat(time->type) ? 1e-9 : 1.0;
  const double intensity_divisor = intensity ? IntensityDivisor(intensity->type) : 1.0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = frame.points.data() + i * h.point_stride;
    for (int k = 0; k < 3; ++k)
      cloud.xyz[i][k] = float(ReadElement(p + xyz[k]->offset, xyz[k]->type));
    if (intensity) {
      cloud.intensity[i] =
          float(ReadElement(p + intensity->offset, intensity->type) / intensity_divisor);
    }
    if (ring) {
      // A ring is a beam index; a signed or 32-bit field may hold any value (found by
      // fuzz_wire_frame: converting -98 to uint16_t is undefined).
      const double r = ReadElement(p + ring->offset, ring->type);
      if (!(r >= 0 && r <= 65535)) {
        char v[32];
        std::snprintf(v, sizeof(v), "%.17g", r);
        return unmappable("point " + std::to_string(i) + ": ring " + v + " outside [0, 65535]");
      }
      cloud.ring[i] = uint16_t(r);
    }
    if (time) {
      cloud.time_offset_s[i] = float(ReadElement(p + time->offset, time->type) * time_scale);
    }
  }
  return cloud;
}

std::vector<uint8_t> PackPointCloud(const PointCloud& cloud, FrameHeader* h) {
  h->fields = {{"x", 0, DataType::kFloat32, 1},
               {"y", 4, DataType::kFloat32, 1},
               {"z", 8, DataType::kFloat32, 1},
               {"intensity", 12, DataType::kFloat32, 1}};
  uint32_t stride = 16;
  if (cloud.has_ring()) {
    h->fields.push_back({"ring", stride, DataType::kUint16, 1});
    stride += 4;  // 2 bytes of padding keep the next field 4-byte aligned
  }
  const uint32_t time_offset = stride;
  if (cloud.has_time()) {
    h->fields.push_back({"time", time_offset, DataType::kFloat32, 1});
    stride += 4;
  }
  h->point_count = uint32_t(cloud.size());
  h->point_stride = stride;
  std::vector<uint8_t> out(cloud.size() * stride, 0);
  for (size_t i = 0; i < cloud.size(); ++i) {
    uint8_t* p = out.data() + i * stride;
    const float v[4] = {cloud.xyz[i].x(), cloud.xyz[i].y(), cloud.xyz[i].z(), cloud.intensity[i]};
    std::memcpy(p, v, 16);
    if (cloud.has_ring()) std::memcpy(p + 16, &cloud.ring[i], 2);
    if (cloud.has_time()) std::memcpy(p + time_offset, &cloud.time_offset_s[i], 4);
  }
  return out;
}

}  // namespace dv::transport
