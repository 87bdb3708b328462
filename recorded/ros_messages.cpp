// Decoders for the ROS messages dejaview reads, in CDR (XCDR1 as ROS 2's rmw implementations
// write it) and in ROS 1's serialization, and CDR encoders for those it writes; written by hand
// (see ros_messages.h).
#include "dejaview/recorded/ros_messages.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dejaview/base/bytes.h"

namespace dv::recorded {
namespace {

constexpr size_t kEncapsulationBytes = 4;
constexpr size_t kMaxFrameIdBytes = 256;
const std::string kSeparator = "\n" + std::string(80, '=') + "\nMSG: ";

// Reads message fields in order; the first failure is kept (field and offset) and every later
// read fails, so a decoder checks once at the end. CDR: an encapsulation header, primitives
// aligned to their size from its end, strings with their NUL counted and stored. ROS 1: no
// header, no alignment, little-endian, strings without a NUL.
class MessageReader {
 public:
  MessageReader(const uint8_t* data, size_t size, const std::string& what, RosEncoding encoding)
      : data_(data), size_(size), what_(what), ros1_(encoding == RosEncoding::kRos1) {
    if (ros1_) return;
    if (size < kEncapsulationBytes || data[0] != 0 || data[1] > 1) {
      Fail("encapsulation header");
      return;
    }
    big_endian_ = data[1] == 0;
    pos_ = kEncapsulationBytes;
  }
  bool ros1() const { return ros1_; }

  template <typename T>
  bool Get(T* v, const char* field) {
    if (!Align(sizeof(T), field) || size_ - pos_ < sizeof(T)) return Fail(field);
    uint8_t b[sizeof(T)];
    std::memcpy(b, data_ + pos_, sizeof(T));
    if (big_endian_) std::reverse(b, b + sizeof(T));
    std::memcpy(v, b, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool String(std::string* s, const char* field, size_t max_bytes) {
    uint32_t n = 0;
    if (!Get(&n, field)) return false;
    if (ros1_) {
      if (n > max_bytes || n > size_ - pos_) return Fail(field);
      s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
      pos_ += n;
      return true;
    }
    if (n == 0 || n - 1 > max_bytes || n > size_ - pos_ || data_[pos_ + n - 1] != 0)
      return Fail(field);
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n - 1);
    pos_ += n;
    return true;
  }
  // A sequence's count, bounded by the bytes left at min_element_bytes each.
  bool Count(uint32_t* n, size_t min_element_bytes, const char* field) {
    if (!Get(n, field)) return false;
    if (uint64_t(*n) * min_element_bytes > size_ - pos_) return Fail(field);
    return true;
  }
  bool Bytes(const uint8_t** p, size_t n, const char* field) {
    if (!ok() || n > size_ - pos_) return Fail(field);
    *p = data_ + pos_;
    pos_ += n;
    return true;
  }
  bool Skip(size_t n, const char* field) {
    const uint8_t* p = nullptr;
    return Bytes(&p, n, field);
  }
  bool ok() const { return error_.empty(); }
  Status status() const {
    if (ok()) return Status::Ok();
    return Status::Corruption(what_ + ": field '" + error_ + "' at offset " +
                              std::to_string(error_offset_) + ": truncated or invalid");
  }
  Status Error(const std::string& msg) const { return Status::Corruption(what_ + ": " + msg); }

 private:
  bool Align(size_t n, const char* field) {
    if (!ok()) return false;
    if (ros1_) return true;
    const size_t pad = (n - (pos_ - kEncapsulationBytes) % n) % n;
    if (pad > size_ - pos_) return Fail(field);
    pos_ += pad;
    return true;
  }
  bool Fail(const char* field) {
    if (ok()) {
      error_ = field;
      error_offset_ = pos_;
    }
    pos_ = size_;
    return false;
  }
  const uint8_t* data_;
  size_t size_, pos_ = 0;
  const std::string& what_;
  bool ros1_;
  bool big_endian_ = false;
  std::string error_;
  size_t error_offset_ = 0;
};

struct Header {
  int64_t stamp_ns = 0;
  std::string frame_id;
};

// std_msgs/Header: ROS 1's starts with a sequence number and stamps with an unsigned second.
bool GetHeader(MessageReader& r, Header* h) {
  uint32_t seq = 0, ros1_sec = 0, nanosec = 0;
  int32_t sec = 0;
  if (r.ros1() ? !r.Get(&seq, "header.seq") || !r.Get(&ros1_sec, "header.stamp.sec")
               : !r.Get(&sec, "header.stamp.sec"))
    return false;
  if (!r.Get(&nanosec, "header.stamp.nanosec") ||
      !r.String(&h->frame_id, "header.frame_id", kMaxFrameIdBytes))
    return false;
  h->stamp_ns = (r.ros1() ? int64_t(ros1_sec) : int64_t(sec)) * 1000000000 + int64_t(nanosec);
  return true;
}

// geometry_msgs Point/Vector3 then Quaternion (x y z w), as a rigid transform.
bool GetPose(MessageReader& r, Pose* T, std::string* bad) {
  double v[7];
  static const char* const kNames[7] = {"position.x",    "position.y",    "position.z",
                                        "orientation.x", "orientation.y", "orientation.z",
                                        "orientation.w"};
  for (int k = 0; k < 7; ++k) {
    if (!r.Get(&v[k], kNames[k])) return false;
  }
  Eigen::Quaterniond q(v[6], v[3], v[4], v[5]);
  const double norm = q.norm();
  if (!std::isfinite(norm) || norm < 1e-6 || !std::isfinite(v[0] + v[1] + v[2])) {
    *bad = "pose is not finite or its quaternion is zero";
    return false;
  }
  *T = Pose::Identity();
  T->linear() = q.normalized().toRotationMatrix();
  T->translation() = Eigen::Vector3d(v[0], v[1], v[2]);
  return true;
}

// Little-endian CDR writer: alignment counted from the end of the encapsulation header.
class CdrWriter {
 public:
  CdrWriter() { w_.Bytes("\x00\x01\x00\x00", 4); }
  template <typename T>
  void Put(T v) {
    while ((w_.size() - kEncapsulationBytes) % sizeof(T) != 0) w_.U8(0);
    w_.Bytes(&v, sizeof(T));
  }
  void String(const std::string& s) {
    Put(uint32_t(s.size() + 1));
    w_.Bytes(s.c_str(), s.size() + 1);
  }
  void Header(int64_t stamp_ns) {
    // Floor division: a stamp before 1970 keeps nanosec in [0, 1e9).
    int64_t sec = stamp_ns / 1000000000, nsec = stamp_ns % 1000000000;
    if (nsec < 0) {
      --sec;
      nsec += 1000000000;
    }
    Put(int32_t(sec));
    Put(uint32_t(nsec));
  }
  void Bytes(const void* p, size_t n) { w_.Bytes(p, n); }
  std::vector<uint8_t> Take() { return w_.Take(); }

 private:
  ByteWriter w_;
};

StatusOr<std::vector<StampedPose>> DecodeTf(MessageReader& r) {
  // Each TransformStamped holds at least a header (12; ROS 1: 16), a child frame id (4) and 7
  // float64s.
  uint32_t n = 0;
  if (!r.Count(&n, 12 + 4 + 56, "transforms")) return r.status();
  std::vector<StampedPose> out(n);
  for (StampedPose& p : out) {
    Header h;
    std::string bad;
    if (!GetHeader(r, &h) || !r.String(&p.child_frame, "child_frame_id", kMaxFrameIdBytes))
      return r.status();
    if (!GetPose(r, &p.T_parent_child, &bad)) return r.ok() ? r.Error(bad) : r.status();
    p.stamp_ns = h.stamp_ns;
    p.parent_frame = h.frame_id;
  }
  return out;
}

}  // namespace

StatusOr<transport::RawFrame> DecodePointCloud2(const uint8_t* data, size_t size,
                                                const std::string& what, RosEncoding encoding) {
  MessageReader r(data, size, what, encoding);
  Header header;
  uint32_t height = 0, width = 0, n_fields = 0, point_step = 0, row_step = 0, n_data = 0;
  uint8_t big_endian = 0, dense = 0;
  transport::RawFrame frame;
  GetHeader(r, &header);
  r.Get(&height, "height");
  r.Get(&width, "width");
  // Each PointField holds at least a name (4 + 2), offset (4), datatype (1) and count (4).
  if (r.Count(&n_fields, 15, "fields") && n_fields > transport::kMaxFields)
    return r.Error(std::to_string(n_fields) + " fields, limit " +
                   std::to_string(transport::kMaxFields));
  for (uint32_t i = 0; i < n_fields && r.ok(); ++i) {
    transport::Field f;
    uint8_t type = 0;
    r.String(&f.name, "fields.name", transport::kMaxNameBytes);
    r.Get(&f.offset, "fields.offset");
    r.Get(&type, "fields.datatype");
    r.Get(&f.count, "fields.count");
    f.type = transport::DataType(type);
    frame.header.fields.push_back(std::move(f));
  }
  const uint8_t* points = nullptr;
  r.Get(&big_endian, "is_bigendian");
  r.Get(&point_step, "point_step");
  r.Get(&row_step, "row_step");
  r.Count(&n_data, 1, "data");
  r.Bytes(&points, n_data, "data");
  r.Get(&dense, "is_dense");
  if (!r.ok()) return r.status();
  if (big_endian) return r.Error("big-endian point data is not supported");
  const uint64_t count = uint64_t(width) * height, row_bytes = uint64_t(width) * point_step;
  if (count > transport::kMaxPoints)
    return r.Error(std::to_string(count) + " points, limit " +
                   std::to_string(transport::kMaxPoints));
  if (count > 0 && (row_step < row_bytes || (height - 1) * uint64_t(row_step) + row_bytes > n_data))
    return r.Error("data of " + std::to_string(n_data) + " bytes does not hold " +
                   std::to_string(height) + " rows of " + std::to_string(width) + " x " +
                   std::to_string(point_step) + " bytes (row_step " + std::to_string(row_step) +
                   ")");
  transport::FrameHeader& h = frame.header;
  h.sensor_stamp_ns = header.stamp_ns;
  h.frame_id = header.frame_id;
  h.point_count = uint32_t(count);
  h.point_stride = point_step;
  const Status layout = transport::CheckFrameLayout(h);
  if (!layout.ok()) return layout.WithContext(what);
  frame.points.resize(size_t(count) * point_step);
  for (uint32_t row = 0; row < height && count > 0; ++row) {
    std::memcpy(frame.points.data() + row * row_bytes, points + uint64_t(row) * row_step,
                size_t(row_bytes));
  }
  return frame;
}

std::string CanonicalRosType(const std::string& type) {
  // tf's message is tf2's under its ROS 1 name.
  if (type == "tf/tfMessage") return kTfMessageType;
  const size_t slash = type.find('/');
  if (slash == std::string::npos || type.find('/', slash + 1) != std::string::npos) return type;
  return type.substr(0, slash) + "/msg" + type.substr(slash);
}

StatusOr<RosEncoding> RosEncodingOf(const std::string& message_encoding, const std::string& what) {
  if (message_encoding == "cdr") return RosEncoding::kCdr;
  if (message_encoding == "ros1") return RosEncoding::kRos1;
  return Status::InvalidArgument(what + ": encoding '" + message_encoding +
                                 "', expected cdr or ros1");
}

bool IsPoseType(const std::string& type) {
  return type == kTfMessageType || type == kOdometryType || type == kPoseStampedType;
}

StatusOr<std::vector<StampedPose>> DecodePoses(const std::string& type, const uint8_t* data,
                                               size_t size, const std::string& what,
                                               RosEncoding encoding) {
  MessageReader r(data, size, what, encoding);
  if (type == kTfMessageType) return DecodeTf(r);
  if (!IsPoseType(type)) return Status::InvalidArgument(what + ": " + type + " holds no pose");
  StampedPose p;
  Header h;
  std::string bad;
  GetHeader(r, &h);
  if (type == kOdometryType) r.String(&p.child_frame, "child_frame_id", kMaxFrameIdBytes);
  if (!GetPose(r, &p.T_parent_child, &bad)) return r.ok() ? r.Error(bad) : r.status();
  if (type == kOdometryType) r.Skip(36 * 8, "pose.covariance");  // twist not needed
  if (!r.ok()) return r.status();
  p.stamp_ns = h.stamp_ns;
  p.parent_frame = h.frame_id;
  return std::vector<StampedPose>{p};
}

std::vector<uint8_t> EncodePointCloud2(int64_t stamp_ns, const std::string& frame_id,
                                       const std::vector<Eigen::Vector3d>& xyz,
                                       const std::vector<float>& intensity) {
  constexpr uint32_t kStep = 32;  // x y z float64, intensity float32, 4 bytes of padding
  CdrWriter w;
  w.Header(stamp_ns);
  w.String(frame_id);
  w.Put(uint32_t(1));
  w.Put(uint32_t(xyz.size()));
  const struct {
    const char* name;
    uint32_t offset;
    transport::DataType type;
  } fields[] = {{"x", 0, transport::DataType::kFloat64},
                {"y", 8, transport::DataType::kFloat64},
                {"z", 16, transport::DataType::kFloat64},
                {"intensity", 24, transport::DataType::kFloat32}};
  w.Put(uint32_t(4));
  for (const auto& f : fields) {
    w.String(f.name);
    w.Put(f.offset);
    w.Put(uint8_t(f.type));
    w.Put(uint32_t(1));
  }
  w.Put(uint8_t(0));
  w.Put(kStep);
  w.Put(uint32_t(xyz.size() * kStep));
  w.Put(uint32_t(xyz.size() * kStep));
  bool dense = true;
  for (size_t i = 0; i < xyz.size(); ++i) {
    uint8_t p[kStep] = {};
    std::memcpy(p, xyz[i].data(), 24);
    std::memcpy(p + 24, &intensity[i], 4);
    w.Bytes(p, kStep);
    dense = dense && xyz[i].allFinite();
  }
  w.Put(uint8_t(dense));
  return w.Take();
}

std::vector<uint8_t> EncodePoseStamped(const StampedPose& pose) {
  CdrWriter w;
  w.Header(pose.stamp_ns);
  w.String(pose.parent_frame);
  const Eigen::Quaterniond q(pose.T_parent_child.linear());
  const Eigen::Vector3d& t = pose.T_parent_child.translation();
  for (double v : {t.x(), t.y(), t.z(), q.x(), q.y(), q.z(), q.w()}) w.Put(v);
  return w.Take();
}

const std::string& PointCloud2Schema() {
  static const std::string text =
      "std_msgs/Header header\nuint32 height\nuint32 width\nsensor_msgs/PointField[] fields\n"
      "bool is_bigendian\nuint32 point_step\nuint32 row_step\nuint8[] data\nbool is_dense" +
      kSeparator + "std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id" + kSeparator +
      "builtin_interfaces/Time\nint32 sec\nuint32 nanosec" + kSeparator +
      "sensor_msgs/PointField\nuint8 INT8=1\nuint8 UINT8=2\nuint8 INT16=3\nuint8 UINT16=4\n"
      "uint8 INT32=5\nuint8 UINT32=6\nuint8 FLOAT32=7\nuint8 FLOAT64=8\nstring name\n"
      "uint32 offset\nuint8 datatype\nuint32 count\n";
  return text;
}

const std::string& PoseStampedSchema() {
  static const std::string text =
      "std_msgs/Header header\ngeometry_msgs/Pose pose" + kSeparator +
      "std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id" + kSeparator +
      "builtin_interfaces/Time\nint32 sec\nuint32 nanosec" + kSeparator +
      "geometry_msgs/Pose\ngeometry_msgs/Point position\ngeometry_msgs/Quaternion orientation" +
      kSeparator + "geometry_msgs/Point\nfloat64 x\nfloat64 y\nfloat64 z" + kSeparator +
      "geometry_msgs/Quaternion\nfloat64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n";
  return text;
}

}  // namespace dv::recorded
