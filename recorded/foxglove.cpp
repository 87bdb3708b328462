// foxglove.PointCloud decoded by hand from protobuf's wire format or from JSON (foxglove.h).
#include "dejaview/recorded/foxglove.h"

#include <Eigen/Geometry>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

namespace dv::recorded {
namespace {

// Protobuf wire types (protobuf.dev, "Encoding").
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// One field of a message: its number, wire type, value (scalar, or the bytes of a
// length-delimited one) and the offset of its key in the whole message.
struct ProtoField {
  uint32_t number = 0;
  int wire = 0;
  uint64_t scalar = 0;
  const uint8_t* bytes = nullptr;
  size_t size = 0;
  size_t offset = 0;
};
using FieldVisitor = std::function<Status(const ProtoField&)>;

class ProtoDecoder {
 public:
  explicit ProtoDecoder(const std::string& what) : what_(what) {}

  Status Error(const char* field, size_t offset, const char* why = "truncated or invalid") const {
    return Status::Corruption(what_ + ": field '" + field + "' at offset " +
                              std::to_string(offset) + ": " + why);
  }

  // Every field of the message p[0, n) (at offset base in the whole message), in order.
  Status Fields(const uint8_t* p, size_t n, size_t base, const char* message,
                const FieldVisitor& visit) const {
    size_t pos = 0;
    while (pos < n) {
      ProtoField f;
      f.offset = base + pos;
      uint64_t key = 0;
      if (!Varint(p, n, &pos, &key) || key >> 32 != 0 || (key >> 3) == 0)
        return Error(message, f.offset, "bad field key");
      f.number = uint32_t(key >> 3);
      f.wire = int(key & 7);
      bool ok = true;
      switch (f.wire) {
        case kVarint:
          ok = Varint(p, n, &pos, &f.scalar);
          break;
        case kFixed64:
          ok = n - pos >= 8;
          if (ok) std::memcpy(&f.scalar, p + pos, 8);
          pos += ok ? 8 : 0;
          break;
        case kFixed32: {
          uint32_t v = 0;
          ok = n - pos >= 4;
          if (ok) std::memcpy(&v, p + pos, 4);
          f.scalar = v;
          pos += ok ? 4 : 0;
          break;
        }
        case kLengthDelimited: {
          uint64_t len = 0;
          ok = Varint(p, n, &pos, &len) && len <= n - pos;
          if (ok) {
            f.bytes = p + pos;
            f.size = size_t(len);
            pos += f.size;
          }
          break;
        }
        default:  // groups (3, 4) and the unused wire types
          return Error(message, f.offset, "wire type not used by this message");
      }
      if (!ok) return Error(message, f.offset);
      DV_RETURN_IF_ERROR(visit(f));
    }
    return Status::Ok();
  }

  // A field's wire type must be the one its declaration gives.
  Status Expect(const ProtoField& f, int wire, const char* field) const {
    return f.wire == wire ? Status::Ok() : Error(field, f.offset, "unexpected wire type");
  }

  // Vector3 (x y z) or Quaternion (x y z w): doubles numbered 1..count.
  Status Doubles(const ProtoField& f, const char* field, int count, double* out) const {
    DV_RETURN_IF_ERROR(Expect(f, kLengthDelimited, field));
    return Fields(f.bytes, f.size, f.offset, field, [&](const ProtoField& g) -> Status {
      if (g.number < 1 || g.number > uint32_t(count)) return Status::Ok();
      DV_RETURN_IF_ERROR(Expect(g, kFixed64, field));
      std::memcpy(&out[g.number - 1], &g.scalar, 8);
      return Status::Ok();
    });
  }

 private:
  static bool Varint(const uint8_t* p, size_t n, size_t* pos, uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && *pos < n; shift += 7) {
      const uint8_t b = p[(*pos)++];
      r |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  const std::string& what_;
};

// What both encodings give, before the frame is assembled.
struct Parsed {
  int64_t sec = 0, nsec = 0;
  std::string frame_id;
  double position[3] = {0, 0, 0};
  double orientation[4] = {0, 0, 0, 1};
  uint64_t point_stride = 0;
  std::vector<transport::Field> fields;
  std::vector<uint8_t> data;
};

// foxglove.NumericType to the wire's (PointField's) codes.
bool MapNumericType(uint64_t type, transport::DataType* out) {
  static const transport::DataType kMap[] = {
      transport::DataType::kUint8,   transport::DataType::kInt8,   transport::DataType::kUint16,
      transport::DataType::kInt16,   transport::DataType::kUint32, transport::DataType::kInt32,
      transport::DataType::kFloat32, transport::DataType::kFloat64};
  if (type < 1 || type > 8) return false;
  *out = kMap[type - 1];
  return true;
}

Status ParseProtobuf(const uint8_t* data, size_t size, const std::string& what, Parsed* out) {
  const ProtoDecoder d(what);
  return d.Fields(data, size, 0, "PointCloud", [&](const ProtoField& f) -> Status {
    switch (f.number) {
      case 1:  // timestamp
        DV_RETURN_IF_ERROR(d.Expect(f, kLengthDelimited, "timestamp"));
        return d.Fields(f.bytes, f.size, f.offset, "timestamp", [&](const ProtoField& g) {
          if (g.number == 1 || g.number == 2) {
            DV_RETURN_IF_ERROR(d.Expect(g, kVarint, "timestamp"));
            // int64 seconds; int32 nanos (a negative int32 is sign-extended to 64 bits).
            (g.number == 1 ? out->sec : out->nsec) = int64_t(g.scalar);
          }
          return Status::Ok();
        });
      case 2:
        DV_RETURN_IF_ERROR(d.Expect(f, kLengthDelimited, "frame_id"));
        if (f.size > transport::kMaxNameBytes)
          return d.Error("frame_id", f.offset, "longer than the wire's 64 bytes");
        out->frame_id.assign(reinterpret_cast<const char*>(f.bytes), f.size);
        return Status::Ok();
      case 3:  // pose
        DV_RETURN_IF_ERROR(d.Expect(f, kLengthDelimited, "pose"));
        return d.Fields(f.bytes, f.size, f.offset, "pose", [&](const ProtoField& g) -> Status {
          if (g.number == 1) return d.Doubles(g, "pose.position", 3, out->position);
          if (g.number != 2) return Status::Ok();
          // proto3 leaves out zeros: an orientation present starts from (0, 0, 0, 0).
          for (double& v : out->orientation) v = 0;
          return d.Doubles(g, "pose.orientation", 4, out->orientation);
        });
      case 4:
        DV_RETURN_IF_ERROR(d.Expect(f, kFixed32, "point_stride"));
        out->point_stride = f.scalar;
        return Status::Ok();
      case 5: {
        DV_RETURN_IF_ERROR(d.Expect(f, kLengthDelimited, "fields"));
        if (out->fields.size() == transport::kMaxFields)
          return d.Error("fields", f.offset, "more fields than the wire's 32");
        transport::Field field;
        uint64_t type = 0;
        const Status parsed =
            d.Fields(f.bytes, f.size, f.offset, "fields", [&](const ProtoField& g) -> Status {
              if (g.number == 1) {
                DV_RETURN_IF_ERROR(d.Expect(g, kLengthDelimited, "fields.name"));
                if (g.size > transport::kMaxNameBytes)
                  return d.Error("fields.name", g.offset, "longer than the wire's 64 bytes");
                field.name.assign(reinterpret_cast<const char*>(g.bytes), g.size);
              } else if (g.number == 2) {
                DV_RETURN_IF_ERROR(d.Expect(g, kFixed32, "fields.offset"));
                field.offset = uint32_t(g.scalar);
              } else if (g.number == 3) {
                DV_RETURN_IF_ERROR(d.Expect(g, kVarint, "fields.type"));
                type = g.scalar;
              }
              return Status::Ok();
            });
        if (!parsed.ok()) return parsed;
        if (!MapNumericType(type, &field.type))
          return d.Error("fields.type", f.offset, "not a NumericType 1..8");
        out->fields.push_back(std::move(field));
        return Status::Ok();
      }
      case 6:
        DV_RETURN_IF_ERROR(d.Expect(f, kLengthDelimited, "data"));
        out->data.assign(f.bytes, f.bytes + f.size);
        return Status::Ok();
      default:  // unknown fields are skipped, as protobuf readers do
        return Status::Ok();
    }
  });
}

// RFC 4648 base64 with padding, as JSON encoders of bytes write it.
bool Base64(const std::string& in, std::vector<uint8_t>* out) {
  if (in.size() % 4 != 0) return false;
  out->clear();
  out->reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else if (c == '=' && i + 2 >= in.size()) {
      ++pad;
      continue;
    } else {
      return false;
    }
    if (pad > 0) return false;  // data after padding
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(uint8_t(acc >> bits));
    }
  }
  return pad <= 2;
}

Status ParseJson(const uint8_t* data, size_t size, const std::string& what, Parsed* out) {
  using nlohmann::json;
  const json j = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& key) {
    return Status::Corruption(what + ": JSON key '" + key + "' missing or of the wrong type");
  };
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(what + ": not a JSON object");
  const auto number = [&](const json& o, const char* key, double* v) {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number() || !std::isfinite(it->get<double>())) return false;
    *v = it->get<double>();
    return true;
  };
  const auto integer = [&](const json& o, const char* key, int64_t* v) {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer()) return false;
    *v = it->get<int64_t>();
    return true;
  };
  if (!j.contains("timestamp") || !j["timestamp"].is_object() ||
      !integer(j["timestamp"], "sec", &out->sec) || !integer(j["timestamp"], "nsec", &out->nsec))
    return bad("timestamp");
  if (!j.contains("frame_id") || !j["frame_id"].is_string() ||
      j["frame_id"].get_ref<const std::string&>().size() > transport::kMaxNameBytes)
    return bad("frame_id");
  out->frame_id = j["frame_id"].get<std::string>();
  if (j.contains("pose")) {
    const json& pose = j["pose"];
    if (!pose.is_object() || !pose.contains("position") || !pose.contains("orientation") ||
        !pose["position"].is_object() || !pose["orientation"].is_object())
      return bad("pose");
    static const char* const kAxes[] = {"x", "y", "z", "w"};
    for (int k = 0; k < 3; ++k)
      if (!number(pose["position"], kAxes[k], &out->position[k])) return bad("pose.position");
    for (int k = 0; k < 4; ++k)
      if (!number(pose["orientation"], kAxes[k], &out->orientation[k]))
        return bad("pose.orientation");
  }
  int64_t stride = 0;
  if (!integer(j, "point_stride", &stride) || stride < 0 || stride > UINT32_MAX)
    return bad("point_stride");
  out->point_stride = uint64_t(stride);
  if (!j.contains("fields") || !j["fields"].is_array() ||
      j["fields"].size() > transport::kMaxFields)
    return bad("fields");
  for (const json& f : j["fields"]) {
    transport::Field field;
    int64_t offset = 0, type = 0;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        f["name"].get_ref<const std::string&>().size() > transport::kMaxNameBytes ||
        !integer(f, "offset", &offset) || offset < 0 || offset > UINT32_MAX ||
        !integer(f, "type", &type) || !MapNumericType(uint64_t(type), &field.type))
      return bad("fields");
    field.name = f["name"].get<std::string>();
    field.offset = uint32_t(offset);
    out->fields.push_back(std::move(field));
  }
  if (!j.contains("data") || !j["data"].is_string() ||
      !Base64(j["data"].get_ref<const std::string&>(), &out->data))
    return bad("data");
  return Status::Ok();
}

}  // namespace

StatusOr<FoxglovePointCloud> DecodeFoxglovePointCloud(const uint8_t* data, size_t size,
                                                      const std::string& message_encoding,
                                                      const std::string& what) {
  Parsed p;
  if (message_encoding == "protobuf") {
    DV_RETURN_IF_ERROR(ParseProtobuf(data, size, what, &p));
  } else if (message_encoding == "json") {
    DV_RETURN_IF_ERROR(ParseJson(data, size, what, &p));
  } else {
    return Status::InvalidArgument(what + ": encoding '" + message_encoding + "' of " +
                                   kFoxglovePointCloudType + ", expected protobuf or json");
  }
  // A stamp the wire's int64 nanoseconds hold (about 292 years either side of 1970).
  if (p.sec < -9000000000LL || p.sec > 9000000000LL || p.nsec < 0 || p.nsec >= 1000000000)
    return Status::Corruption(what + ": timestamp " + std::to_string(p.sec) + " s " +
                              std::to_string(p.nsec) + " ns is out of range");
  if (p.point_stride == 0 || p.data.size() % p.point_stride != 0)
    return Status::Corruption(what + ": data of " + std::to_string(p.data.size()) +
                              " bytes is not a whole number of points of point_stride " +
                              std::to_string(p.point_stride));
  const uint64_t count = p.data.size() / p.point_stride;
  if (count > transport::kMaxPoints)
    return Status::Corruption(what + ": " + std::to_string(count) + " points, limit " +
                              std::to_string(transport::kMaxPoints));
  const Eigen::Quaterniond q(p.orientation[3], p.orientation[0], p.orientation[1],
                             p.orientation[2]);
  const double norm = q.norm();
  if (!std::isfinite(norm) || norm < 1e-6 ||
      !std::isfinite(p.position[0] + p.position[1] + p.position[2]))
    return Status::Corruption(what + ": pose is not finite or its quaternion is zero");
  FoxglovePointCloud out;
  out.T_frame_cloud.linear() = q.normalized().toRotationMatrix();
  out.T_frame_cloud.translation() = Eigen::Vector3d(p.position[0], p.position[1], p.position[2]);
  transport::FrameHeader& h = out.frame.header;
  h.sensor_stamp_ns = p.sec * 1000000000 + p.nsec;
  h.frame_id = std::move(p.frame_id);
  h.fields = std::move(p.fields);
  h.point_count = uint32_t(count);
  h.point_stride = uint32_t(p.point_stride);
  const Status layout = transport::CheckFrameLayout(h);
  if (!layout.ok()) return layout.WithContext(what);
  out.frame.points = std::move(p.data);
  return out;
}

}  // namespace dv::recorded
