#include "dejaview/base/pcd.h"

#include <lzf.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "point_record.h"

namespace dv {
namespace {

using internal::LineCursor;
using internal::RecordField;
using internal::RecordLayout;
using internal::ScalarKind;
using internal::ScalarType;

// Far more than any real sensor's record (PCL's own types have < 40 fields); bounds the header.
constexpr size_t kMaxFields = 256;
constexpr uint64_t kMaxCount = 1u << 16;

struct HeaderLine {
  int line_no = 0;
  std::vector<std::string_view> values;  // the tokens after the keyword
};

Status HeaderError(const std::string& name, int line_no, const std::string& what) {
  return Status::Corruption(name + ":" + std::to_string(line_no) + ": " + what);
}

// One numeric header value (WIDTH, HEIGHT, POINTS).
Status HeaderNumber(const std::string& name, const std::map<std::string, HeaderLine>& lines,
                    const char* key, uint64_t* out) {
  const HeaderLine& h = lines.at(key);
  if (h.values.size() != 1 || !internal::ParseU64(h.values[0], out)) {
    return HeaderError(name, h.line_no, std::string(key) + " must be one non-negative integer");
  }
  return Status::Ok();
}

// SIZE/TYPE/COUNT have one entry per FIELDS entry.
Status CheckListLength(const std::string& name, const HeaderLine& h, const char* key,
                       size_t fields) {
  if (h.values.size() != fields) {
    return HeaderError(name, h.line_no,
                       std::string(key) + " has " + std::to_string(h.values.size()) +
                           " entries, FIELDS has " + std::to_string(fields));
  }
  return Status::Ok();
}

StatusOr<std::vector<RecordField>> ParseFields(const std::string& name,
                                               const std::map<std::string, HeaderLine>& lines) {
  for (const char* key : {"FIELDS", "SIZE", "TYPE"}) {
    if (!lines.count(key)) return Status::Corruption(name + ": header has no " + key + " line");
  }
  const HeaderLine& names = lines.at("FIELDS");
  const HeaderLine& sizes = lines.at("SIZE");
  const HeaderLine& types = lines.at("TYPE");
  const size_t n = names.values.size();
  if (n == 0) return HeaderError(name, names.line_no, "FIELDS is empty");
  if (n > kMaxFields) {
    return HeaderError(
        name, names.line_no,
        std::to_string(n) + " fields exceeds the limit of " + std::to_string(kMaxFields));
  }
  DV_RETURN_IF_ERROR(CheckListLength(name, sizes, "SIZE", n));
  DV_RETURN_IF_ERROR(CheckListLength(name, types, "TYPE", n));
  const HeaderLine* counts = lines.count("COUNT") ? &lines.at("COUNT") : nullptr;
  if (counts) DV_RETURN_IF_ERROR(CheckListLength(name, *counts, "COUNT", n));

  std::vector<RecordField> fields(n);
  for (size_t f = 0; f < n; ++f) {
    RecordField& field = fields[f];
    field.name = internal::Printable(names.values[f]);
    const std::string what = "field '" + field.name + "': ";
    uint64_t size = 0;
    if (!internal::ParseU64(sizes.values[f], &size) ||
        (size != 1 && size != 2 && size != 4 && size != 8)) {
      return HeaderError(
          name, sizes.line_no,
          what + "SIZE '" + internal::Printable(sizes.values[f]) + "' is not 1, 2, 4 or 8");
    }
    const std::string_view type = types.values[f];
    if (type == "F") {
      field.type.kind = ScalarKind::kFloat;
      if (size != 4 && size != 8) {
        return HeaderError(name, sizes.line_no,
                           what + "TYPE F with SIZE " + std::to_string(size) +
                               " is not supported (float is 4 or 8 bytes)");
      }
    } else if (type == "U") {
      field.type.kind = ScalarKind::kUint;
    } else if (type == "I") {
      field.type.kind = ScalarKind::kInt;
    } else {
      return HeaderError(
          name, types.line_no,
          what + "unknown TYPE '" + internal::Printable(type) + "' (expected I, U or F)");
    }
    field.type.size = uint8_t(size);
    uint64_t count = 1;
    if (counts &&
        (!internal::ParseU64(counts->values[f], &count) || count == 0 || count > kMaxCount)) {
      return HeaderError(name, counts->line_no,
                         what + "COUNT '" + internal::Printable(counts->values[f]) +
                             "' is not an integer in [1, " + std::to_string(kMaxCount) + "]");
    }
    field.count = uint32_t(count);
  }
  return fields;
}

// LZF emits at most 264 bytes per 3-byte back reference, so n compressed bytes hold at most 88 n.
constexpr uint64_t kLzfMaxRatio = 88;

// DATA binary_compressed as PCL writes it: u32 compressed size, u32 decompressed size, then one
// LZF block holding the fields one after another (every point's value of the first field, then
// of the second, ...), padding fields "_" left out. Rebuilt here into the packed records that
// DATA binary holds (padding zeroed), checked against the header before anything is allocated.
StatusOr<std::vector<uint8_t>> DecompressRecords(const std::vector<RecordField>& fields,
                                                 size_t record_bytes, uint64_t points,
                                                 const uint8_t* data, size_t size, size_t at,
                                                 const std::string& name) {
  const auto error = [&](size_t offset, const std::string& what) {
    return Status::Corruption(name + ": offset " + std::to_string(offset) + ": " + what);
  };
  uint32_t packed = 0, unpacked = 0;
  if (size - at < 8) return error(at, "binary_compressed body ends before its two sizes");
  std::memcpy(&packed, data + at, 4);
  std::memcpy(&unpacked, data + at + 4, 4);
  uint64_t soa_bytes = 0;
  for (const RecordField& f : fields) {
    if (f.name != "_") soa_bytes += uint64_t(f.type.size) * f.count * points;
  }
  if (unpacked != soa_bytes) {
    return error(at + 4, "decompressed size " + std::to_string(unpacked) + " is not the " +
                             std::to_string(soa_bytes) + " bytes the fields and POINTS make");
  }
  if (packed > size - at - 8) {
    return error(at,
                 "compressed size " + std::to_string(packed) + " runs past the end of the file");
  }
  if (unpacked > uint64_t(packed) * kLzfMaxRatio) {
    return error(at, "decompressed size " + std::to_string(unpacked) + " is more than " +
                         std::to_string(packed) + " LZF bytes can hold");
  }
  std::vector<uint8_t> soa(unpacked);
  if (unpacked > 0 && lzf_decompress(data + at + 8, packed, soa.data(), unpacked) != unpacked) {
    return error(at + 8, "LZF data does not decompress to " + std::to_string(unpacked) + " bytes");
  }
  std::vector<uint8_t> records(size_t(points) * record_bytes, 0);
  size_t offset = 0;  // the field's offset in a record, in declaration order
  const uint8_t* column = soa.data();
  for (const RecordField& f : fields) {
    const size_t bytes = size_t(f.type.size) * f.count;
    if (f.name != "_") {
      for (size_t i = 0; i < points; ++i)
        std::memcpy(&records[i * record_bytes + offset], column + i * bytes, bytes);
      column += bytes * points;
    }
    offset += bytes;
  }
  return records;
}

// A PCD's header, checked, and where its body starts (cursor).
struct PcdHeader {
  explicit PcdHeader(const uint8_t* data, size_t size) : cursor(data, size) {}
  LineCursor cursor;
  std::string encoding;  // ascii, binary or binary_compressed
  std::vector<RecordField> fields;
  RecordLayout layout;
  uint64_t width = 0, height = 1, points = 0;
};

Status ParseHeader(const std::string& name, PcdHeader* h) {
  std::map<std::string, HeaderLine> lines;
  std::string_view line;
  while (true) {
    if (!h->cursor.Next(&line)) {
      return Status::Corruption(name + ": header ends without a DATA line (not a PCD file?)");
    }
    const auto tokens = internal::SplitTokens(line);
    if (tokens.empty() || tokens[0][0] == '#') continue;
    const std::string key(tokens[0]);
    static const char* const kKeys[] = {"VERSION", "FIELDS", "SIZE",      "TYPE",   "COUNT",
                                        "WIDTH",   "HEIGHT", "VIEWPOINT", "POINTS", "DATA"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      return HeaderError(
          name, h->cursor.line_no(),
          "unknown header keyword '" + internal::Printable(key) + "' (not a PCD v0.7 file?)");
    }
    if (lines.count(key)) return HeaderError(name, h->cursor.line_no(), key + " appears twice");
    lines[key] = {h->cursor.line_no(), {tokens.begin() + 1, tokens.end()}};
    if (key == "DATA") break;
  }

  if (lines.count("VERSION")) {
    const HeaderLine& v = lines["VERSION"];
    if (v.values.size() != 1 || (v.values[0] != "0.7" && v.values[0] != ".7")) {
      return HeaderError(name, v.line_no,
                         "unsupported VERSION '" +
                             internal::Printable(v.values.empty() ? "" : v.values[0]) +
                             "' (dejaview reads PCD v0.7)");
    }
  }
  const HeaderLine& data_line = lines["DATA"];
  h->encoding = data_line.values.size() == 1 ? std::string(data_line.values[0]) : "";
  const std::string& encoding = h->encoding;
  if (encoding != "binary" && encoding != "ascii" && encoding != "binary_compressed") {
    return HeaderError(
        name, data_line.line_no,
        "DATA '" + internal::Printable(encoding) + "' is not ascii, binary or binary_compressed");
  }
  DV_ASSIGN_OR_RETURN(h->fields, ParseFields(name, lines));
  DV_ASSIGN_OR_RETURN(h->layout, RecordLayout::Make(h->fields, name));

  if (!lines.count("WIDTH")) return Status::Corruption(name + ": header has no WIDTH line");
  uint64_t& width = h->width;
  uint64_t& height = h->height;
  uint64_t& points = h->points;
  DV_RETURN_IF_ERROR(HeaderNumber(name, lines, "WIDTH", &width));
  if (lines.count("HEIGHT")) DV_RETURN_IF_ERROR(HeaderNumber(name, lines, "HEIGHT", &height));
  // Both below 2^32, so the product cannot overflow.
  if (width > UINT32_MAX || height > UINT32_MAX || width * height > kMaxPointsPerFrame) {
    return Status::OutOfRange(name + ": WIDTH " + std::to_string(width) + " x HEIGHT " +
                              std::to_string(height) + " exceeds the limit of " +
                              std::to_string(kMaxPointsPerFrame) + " points");
  }
  points = width * height;
  if (lines.count("POINTS")) {
    uint64_t declared = 0;
    DV_RETURN_IF_ERROR(HeaderNumber(name, lines, "POINTS", &declared));
    if (declared != points) {
      return HeaderError(name, lines["POINTS"].line_no,
                         "POINTS " + std::to_string(declared) +
                             " differs from WIDTH x HEIGHT = " + std::to_string(points));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PointCloud> ParsePcd(const uint8_t* data, size_t size, const std::string& name) {
  PcdHeader h(data, size);
  DV_RETURN_IF_ERROR(ParseHeader(name, &h));
  const RecordLayout& layout = h.layout;
  const uint64_t points = h.points;
  LineCursor& cursor = h.cursor;
  const std::string& encoding = h.encoding;
  if (encoding == "binary_compressed") {
    DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> records,
                        DecompressRecords(h.fields, layout.record_bytes(), points, data, size,
                                          cursor.offset(), name));
    LineCursor body(records.data(), records.size());
    return internal::ReadRecords(layout, points, CloudEncoding::kBinary, records.data(),
                                 records.size(), &body, name);
  }
  return internal::ReadRecords(
      layout, points, encoding == "binary" ? CloudEncoding::kBinary : CloudEncoding::kAscii, data,
      size, &cursor, name);
}

StatusOr<PcdTable> ParsePcdTable(const uint8_t* data, size_t size, const std::string& name) {
  PcdHeader h(data, size);
  DV_RETURN_IF_ERROR(ParseHeader(name, &h));
  PcdTable t;
  t.width = uint32_t(h.width);
  t.height = uint32_t(h.height);
  for (const RecordField& f : h.fields) {
    const char type = f.type.kind == ScalarKind::kFloat  ? 'F'
                      : f.type.kind == ScalarKind::kUint ? 'U'
                                                         : 'I';
    t.fields.push_back({f.name, type, f.type.size, f.count, t.record_bytes});
    t.record_bytes += size_t(f.type.size) * f.count;
  }
  const uint64_t bytes = h.points * t.record_bytes;
  const size_t body = h.cursor.offset();
  if (h.encoding == "binary_compressed") {
    DV_ASSIGN_OR_RETURN(
        t.records, DecompressRecords(h.fields, t.record_bytes, h.points, data, size, body, name));
    return t;
  }
  if (h.encoding == "binary") {
    if (bytes > size - body)
      return Status::Corruption(name + ": truncated: " + std::to_string(h.points) + " points of " +
                                std::to_string(t.record_bytes) + " bytes need " +
                                std::to_string(bytes) + " bytes of data, the file has " +
                                std::to_string(size - body));
    t.records.assign(data + body, data + body + bytes);
    return t;
  }
  // ASCII: every value of every field, each at least a character and a separator, so a header
  // claiming more points than the body can hold is refused before allocating.
  const size_t values = h.layout.values_per_record();
  if (h.points > 0 && h.points * values * 2 - 1 > size - body)
    return Status::Corruption(name + ": truncated: " + std::to_string(h.points) +
                              " ascii points cannot fit in the " + std::to_string(size - body) +
                              " bytes after the header");
  t.records.resize(bytes);
  std::string_view line;
  for (uint64_t i = 0; i < h.points; ++i) {
    if (!h.cursor.NextNonBlank(&line))
      return Status::Corruption(name + ": truncated: header declares " + std::to_string(h.points) +
                                " points, the data has " + std::to_string(i));
    const std::string where = name + ":" + std::to_string(h.cursor.line_no());
    const auto tokens = internal::SplitTokens(line);
    if (tokens.size() != values)
      return Status::Corruption(where + ": point " + std::to_string(i) + " has " +
                                std::to_string(tokens.size()) + " values, expected " +
                                std::to_string(values));
    uint8_t* rec = t.records.data() + i * t.record_bytes;
    size_t token = 0;
    for (size_t f = 0; f < t.fields.size(); ++f) {
      for (uint32_t c = 0; c < t.fields[f].count; ++c, ++token) {
        const Status s = internal::ParseAsciiScalar(
            tokens[token], h.fields[f].type, rec + t.fields[f].offset + c * t.fields[f].size);
        if (!s.ok()) return s.WithContext(where + ": field '" + t.fields[f].name + "'");
      }
    }
  }
  return t;
}

StatusOr<PcdTable> ReadPcdTable(const std::string& path) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path));
  return ParsePcdTable(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> EncodePcdTable(const PcdTable& t, CloudEncoding encoding) {
  std::string names, sizes, types, counts;
  for (const PcdField& f : t.fields) {
    names += " " + f.name;
    sizes += " " + std::to_string(f.size);
    types += std::string(" ") + f.type;
    counts += " " + std::to_string(f.count);
  }
  const std::string n = std::to_string(t.points());
  std::string text = "# .PCD v0.7 - Point Cloud Data file format (written by dejaview)\n";
  text += "VERSION 0.7\nFIELDS" + names + "\nSIZE" + sizes + "\nTYPE" + types + "\nCOUNT" + counts +
          "\nWIDTH " + std::to_string(t.width) + "\nHEIGHT " + std::to_string(t.height) +
          "\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS " + n + "\nDATA " +
          (encoding == CloudEncoding::kBinary ? "binary" : "ascii") + "\n";
  std::vector<uint8_t> out(text.begin(), text.end());
  if (encoding == CloudEncoding::kBinary) {
    out.insert(out.end(), t.records.begin(), t.records.end());
    return out;
  }
  char value[40];
  for (size_t i = 0; i < t.points(); ++i) {
    const uint8_t* rec = t.records.data() + i * t.record_bytes;
    std::string line;
    for (const PcdField& f : t.fields) {
      for (uint32_t c = 0; c < f.count; ++c) {
        const uint8_t* p = rec + f.offset + c * f.size;
        // float32 with %.9g and float64 with %.17g read back to the same value.
        if (f.type == 'F' && f.size == 4) {
          float v;
          std::memcpy(&v, p, 4);
          std::snprintf(value, sizeof(value), "%.9g", double(v));
        } else if (f.type == 'F') {
          double v;
          std::memcpy(&v, p, 8);
          std::snprintf(value, sizeof(value), "%.17g", v);
        } else if (f.size == 8) {  // beyond a double's integers
          uint64_t v;
          std::memcpy(&v, p, 8);
          if (f.type == 'U') {
            std::snprintf(value, sizeof(value), "%llu", static_cast<unsigned long long>(v));
          } else {
            std::snprintf(value, sizeof(value), "%lld", static_cast<long long>(int64_t(v)));
          }
        } else {
          const internal::ScalarType type{f.type == 'U' ? ScalarKind::kUint : ScalarKind::kInt,
                                          f.size};
          std::snprintf(value, sizeof(value), "%.0f", internal::ScalarToDouble(p, type));
        }
        line += (line.empty() ? "" : " ") + std::string(value);
      }
    }
    line += "\n";
    out.insert(out.end(), line.begin(), line.end());
  }
  return out;
}

StatusOr<PointCloud> ReadPcd(const std::string& path) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path));
  return ParsePcd(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> EncodePcd(const PointCloud& cloud, CloudEncoding encoding) {
  const auto fields = internal::OutputFields(cloud);
  std::string names, sizes, types, counts;
  for (const RecordField& f : fields) {
    names += " " + f.name;
    sizes += " " + std::to_string(f.type.size);
    types += f.type.kind == ScalarKind::kFloat ? " F" : " U";
    counts += " 1";
  }
  const std::string n = std::to_string(cloud.size());
  std::string header = "# .PCD v0.7 - Point Cloud Data file format (written by dejaview)\n";
  header += "VERSION 0.7\nFIELDS" + names + "\nSIZE" + sizes + "\nTYPE" + types + "\nCOUNT" +
            counts + "\nWIDTH " + n + "\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS " + n +
            "\nDATA " + (encoding == CloudEncoding::kBinary ? "binary" : "ascii") + "\n";
  return internal::EncodeRecords(header, cloud, encoding);
}

Status WritePcd(const std::string& path, const PointCloud& cloud, CloudEncoding encoding) {
  return WriteFileAtomic(path, EncodePcd(cloud, encoding));
}

}  // namespace dv
