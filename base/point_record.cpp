#include "point_record.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace dv::internal {
namespace {

bool IsInteger(ScalarType t) { return t.kind != ScalarKind::kFloat; }

std::string TypeName(ScalarType t) {
  const char* kind = t.kind == ScalarKind::kFloat ? "float"
                     : t.kind == ScalarKind::kInt ? "int"
                                                  : "uint";
  return kind + std::to_string(8 * t.size);
}

// A value dejaview reads as float: float32 is copied bit for bit (NaN payloads included), which
// is what makes KITTI -> PCD -> PLY -> KITTI exact.
float ScalarToFloat(const uint8_t* p, ScalarType t) {
  if (t.kind == ScalarKind::kFloat && t.size == 4) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  return static_cast<float>(ScalarToDouble(p, t));
}

}  // namespace

double ScalarToDouble(const uint8_t* p, ScalarType t) {
  switch (t.kind) {
    case ScalarKind::kFloat: {
      if (t.size == 4) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
      }
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case ScalarKind::kInt: {
      int64_t v = 0;
      std::memcpy(&v, p, t.size);
      const int shift = 64 - 8 * t.size;  // sign-extend from t.size bytes
      return double(int64_t(uint64_t(v) << shift) >> shift);
    }
    case ScalarKind::kUint: {
      uint64_t v = 0;
      std::memcpy(&v, p, t.size);
      return double(v);
    }
  }
  return 0;
}

Status ParseAsciiScalar(std::string_view token, ScalarType t, uint8_t* out) {
  const std::string s(token);  // strto* need a terminator
  char* end = nullptr;
  errno = 0;
  const auto bad = [&] { return Status::Corruption("'" + s + "' is not a valid " + TypeName(t)); };
  if (t.kind == ScalarKind::kFloat) {
    // ERANGE on underflow still yields the correctly rounded denormal or zero: keep it.
    if (t.size == 4) {
      const float v = std::strtof(s.c_str(), &end);
      if (end == s.c_str() || *end != '\0') return bad();
      std::memcpy(out, &v, 4);
    } else {
      const double v = std::strtod(s.c_str(), &end);
      if (end == s.c_str() || *end != '\0') return bad();
      std::memcpy(out, &v, 8);
    }
    return Status::Ok();
  }
  const int bits = 8 * t.size;
  if (t.kind == ScalarKind::kInt) {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0' || errno == ERANGE) return bad();
    const long long lo = bits == 64 ? std::numeric_limits<long long>::min() : -(1LL << (bits - 1));
    const long long hi =
        bits == 64 ? std::numeric_limits<long long>::max() : (1LL << (bits - 1)) - 1;
    if (v < lo || v > hi) return bad();
    std::memcpy(out, &v, t.size);  // little-endian: the low bytes hold the value
    return Status::Ok();
  }
  if (!s.empty() && s[0] == '-') return bad();  // strtoull would wrap negatives around
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || errno == ERANGE) return bad();
  if (bits < 64 && v > (1ULL << bits) - 1) return bad();
  std::memcpy(out, &v, t.size);
  return Status::Ok();
}

StatusOr<RecordLayout> RecordLayout::Make(std::vector<RecordField> fields,
                                          const std::string& name) {
  RecordLayout L;
  L.slot_field_.fill(-1);
  static constexpr std::pair<const char*, Slot> kNames[] = {
      {"x", kX},       {"y", kY},       {"z", kZ},   {"intensity", kIntensity},
      {"ring", kRing}, {"time", kTime}, {"t", kTime}};
  for (size_t f = 0; f < fields.size(); ++f) {
    RecordField& field = fields[f];
    field.offset = L.record_bytes_;
    L.first_token_.push_back(L.values_per_record_);
    L.record_bytes_ += size_t(field.type.size) * field.count;
    L.values_per_record_ += field.count;
    for (const auto& [slot_name, slot] : kNames) {
      if (field.name != slot_name) continue;
      if (L.slot_field_[slot] >= 0) {
        return Status::Corruption(name + ": field '" + field.name + "' appears twice" +
                                  (slot == kTime ? " (as 'time' or 't')" : ""));
      }
      if (field.count != 1) {
        return Status::Corruption(name + ": field '" + field.name + "' has count " +
                                  std::to_string(field.count) + ", expected 1");
      }
      if (slot == kRing && !IsInteger(field.type)) {
        return Status::Corruption(name + ": field 'ring' is " + TypeName(field.type) +
                                  ", expected an integer type");
      }
      L.slot_field_[slot] = int(f);
    }
  }
  for (Slot s : {kX, kY, kZ}) {
    if (L.slot_field_[s] < 0) {
      return Status::Corruption(name + ": no field '" + std::string(kNames[s].first) +
                                "' (x, y and z are required)");
    }
  }
  L.fields_ = std::move(fields);
  return L;
}

void RecordLayout::Resize(size_t n, PointCloud* cloud) const {
  cloud->xyz.resize(n);
  cloud->intensity.assign(n, 0.0f);
  cloud->ring.resize(slot_field_[kRing] >= 0 ? n : 0);
  cloud->time_offset_s.resize(slot_field_[kTime] >= 0 ? n : 0);
}

Status RecordLayout::Decode(const uint8_t* rec, size_t i, PointCloud* cloud) const {
  const auto at = [&](Slot s) { return rec + fields_[size_t(slot_field_[s])].offset; };
  const auto type = [&](Slot s) { return fields_[size_t(slot_field_[s])].type; };
  cloud->xyz[i] = Eigen::Vector3f(ScalarToFloat(at(kX), type(kX)), ScalarToFloat(at(kY), type(kY)),
                                  ScalarToFloat(at(kZ), type(kZ)));
  if (slot_field_[kIntensity] >= 0)
    cloud->intensity[i] = ScalarToFloat(at(kIntensity), type(kIntensity));
  if (slot_field_[kRing] >= 0) {
    const double ring = ScalarToDouble(at(kRing), type(kRing));
    if (ring < 0 || ring > 65535) {
      return Status::Corruption("point " + std::to_string(i) + ": ring " +
                                std::to_string(int64_t(ring)) + " does not fit uint16");
    }
    cloud->ring[i] = uint16_t(ring);
  }
  if (slot_field_[kTime] >= 0) {
    // Integer time fields are nanoseconds (Ouster's uint32 't'); float ones are seconds.
    const ScalarType t = type(kTime);
    cloud->time_offset_s[i] = t.kind == ScalarKind::kFloat
                                  ? ScalarToFloat(at(kTime), t)
                                  : float(ScalarToDouble(at(kTime), t) * 1e-9);
  }
  return Status::Ok();
}

Status RecordLayout::ParseAscii(const std::vector<std::string_view>& tokens, uint8_t* rec) const {
  for (int f : slot_field_) {
    if (f < 0) continue;
    const RecordField& field = fields_[size_t(f)];
    Status s = ParseAsciiScalar(tokens[first_token_[size_t(f)]], field.type, rec + field.offset);
    if (!s.ok()) return s.WithContext("field '" + field.name + "'");
  }
  return Status::Ok();
}

bool LineCursor::Next(std::string_view* line) {
  if (pos_ >= size_) return false;
  const auto* begin = reinterpret_cast<const char*>(data_ + pos_);
  const auto* nl = static_cast<const char*>(std::memchr(begin, '\n', size_ - pos_));
  size_t len = nl ? size_t(nl - begin) : size_ - pos_;
  pos_ += nl ? len + 1 : len;
  if (len > 0 && begin[len - 1] == '\r') --len;
  *line = std::string_view(begin, len);
  ++line_no_;
  return true;
}

bool LineCursor::NextNonBlank(std::string_view* line) {
  while (Next(line)) {
    if (line->find_first_not_of(" \t\r") != std::string_view::npos) return true;
  }
  return false;
}

std::vector<std::string_view> SplitTokens(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (true) {
    i = line.find_first_not_of(" \t\r", i);
    if (i == std::string_view::npos) break;
    size_t j = line.find_first_of(" \t\r", i);
    if (j == std::string_view::npos) j = line.size();
    out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string Printable(std::string_view token) {
  std::string out(token.substr(0, 32));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return token.size() > 32 ? out + "..." : out;
}

bool ParseU64(std::string_view token, uint64_t* out) {
  if (token.empty() || token.size() > 20) return false;
  uint64_t v = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = uint64_t(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

StatusOr<PointCloud> ReadRecords(const RecordLayout& layout, size_t points, CloudEncoding encoding,
                                 const uint8_t* data, size_t size, LineCursor* cursor,
                                 const std::string& name) {
  const size_t body = cursor->offset();
  const size_t available = size - body;
  PointCloud cloud;
  if (encoding == CloudEncoding::kBinary) {
    // points <= kMaxPointsPerFrame (2^24) and records < 2^32 bytes: no overflow.
    const uint64_t need = uint64_t(points) * layout.record_bytes();
    if (need > available) {
      return Status::Corruption(name + ": truncated: " + std::to_string(points) + " points of " +
                                std::to_string(layout.record_bytes()) + " bytes need " +
                                std::to_string(need) + " bytes of data, the file has " +
                                std::to_string(available));
    }
    layout.Resize(points, &cloud);
    for (size_t i = 0; i < points; ++i) {
      Status s = layout.Decode(data + body + i * layout.record_bytes(), i, &cloud);
      if (!s.ok()) return s.WithContext(name);
    }
    return cloud;
  }
  // Every value takes at least one character and one separator: a cheap bound that keeps a
  // header claiming millions of points over a short body from allocating them.
  const uint64_t min_bytes = uint64_t(points) * layout.values_per_record() * 2;
  if (points > 0 && min_bytes - 1 > available) {
    return Status::Corruption(name + ": truncated: " + std::to_string(points) +
                              " ascii points cannot fit in the " + std::to_string(available) +
                              " bytes after the header");
  }
  layout.Resize(points, &cloud);
  // Bounded by the check above: a record holds at most 8 bytes per value.
  std::vector<uint8_t> record(points > 0 ? layout.record_bytes() : 0);
  std::string_view line;
  for (size_t i = 0; i < points; ++i) {
    if (!cursor->NextNonBlank(&line)) {
      return Status::Corruption(name + ": truncated: header declares " + std::to_string(points) +
                                " points, the data has " + std::to_string(i));
    }
    const std::string where = name + ":" + std::to_string(cursor->line_no());
    const auto tokens = SplitTokens(line);
    if (tokens.size() != layout.values_per_record()) {
      return Status::Corruption(where + ": point " + std::to_string(i) + " has " +
                                std::to_string(tokens.size()) + " values, expected " +
                                std::to_string(layout.values_per_record()));
    }
    Status s = layout.ParseAscii(tokens, record.data());
    if (s.ok()) s = layout.Decode(record.data(), i, &cloud);
    if (!s.ok()) return s.WithContext(where);
  }
  return cloud;
}

std::vector<RecordField> OutputFields(const PointCloud& cloud) {
  const ScalarType f32{ScalarKind::kFloat, 4};
  std::vector<RecordField> fields = {{"x", f32}, {"y", f32}, {"z", f32}, {"intensity", f32}};
  if (cloud.has_ring()) fields.push_back({"ring", {ScalarKind::kUint, 2}});
  if (cloud.has_time()) fields.push_back({"time", f32});
  return fields;
}

namespace {

void AppendBinaryRecord(const PointCloud& cloud, size_t i, std::vector<uint8_t>* out) {
  uint8_t rec[22];
  std::memcpy(rec, cloud.xyz[i].data(), 12);
  std::memcpy(rec + 12, &cloud.intensity[i], 4);
  size_t n = 16;
  if (cloud.has_ring()) {
    std::memcpy(rec + n, &cloud.ring[i], 2);
    n += 2;
  }
  if (cloud.has_time()) {
    std::memcpy(rec + n, &cloud.time_offset_s[i], 4);
    n += 4;
  }
  out->insert(out->end(), rec, rec + n);
}

void AppendAsciiRecord(const PointCloud& cloud, size_t i, std::string* out) {
  char buf[128];
  const Eigen::Vector3f& p = cloud.xyz[i];
  int n = std::snprintf(buf, sizeof(buf), "%.9g %.9g %.9g %.9g", double(p.x()), double(p.y()),
                        double(p.z()), double(cloud.intensity[i]));
  if (cloud.has_ring()) n += std::snprintf(buf + n, sizeof(buf) - size_t(n), " %u", cloud.ring[i]);
  if (cloud.has_time()) {
    n += std::snprintf(buf + n, sizeof(buf) - size_t(n), " %.9g", double(cloud.time_offset_s[i]));
  }
  out->append(buf, size_t(n));
  out->push_back('\n');
}

}  // namespace

std::vector<uint8_t> EncodeRecords(const std::string& header, const PointCloud& cloud,
                                   CloudEncoding encoding) {
  if (encoding == CloudEncoding::kAscii) {
    std::string text = header;
    for (size_t i = 0; i < cloud.size(); ++i) AppendAsciiRecord(cloud, i, &text);
    return std::vector<uint8_t>(text.begin(), text.end());
  }
  std::vector<uint8_t> out(header.begin(), header.end());
  out.reserve(out.size() + cloud.size() * 22);
  for (size_t i = 0; i < cloud.size(); ++i) AppendBinaryRecord(cloud, i, &out);
  return out;
}

}  // namespace dv::internal
