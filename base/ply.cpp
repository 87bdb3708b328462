#include "dejaview/base/ply.h"

#include "dejaview/base/bytes.h"
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

// Bounds on the header, far above any real file: a header cannot make the reader loop or
// allocate without limit.
constexpr size_t kMaxElements = 64;
constexpr size_t kMaxProperties = 256;
constexpr uint64_t kMaxElementRows = uint64_t(1) << 32;

struct Property {
  std::string name;
  ScalarType type;
  bool is_list = false;
  ScalarType count_type;  // lists only
};

struct Element {
  std::string name;
  uint64_t rows = 0;
  std::vector<Property> properties;
  bool has_list = false;
  size_t row_bytes = 0;  // binary size of a row without lists
};

bool ParseType(std::string_view s, ScalarType* t) {
  static constexpr std::pair<const char*, ScalarType> kTypes[] = {
      {"char", {ScalarKind::kInt, 1}},     {"int8", {ScalarKind::kInt, 1}},
      {"uchar", {ScalarKind::kUint, 1}},   {"uint8", {ScalarKind::kUint, 1}},
      {"short", {ScalarKind::kInt, 2}},    {"int16", {ScalarKind::kInt, 2}},
      {"ushort", {ScalarKind::kUint, 2}},  {"uint16", {ScalarKind::kUint, 2}},
      {"int", {ScalarKind::kInt, 4}},      {"int32", {ScalarKind::kInt, 4}},
      {"uint", {ScalarKind::kUint, 4}},    {"uint32", {ScalarKind::kUint, 4}},
      {"float", {ScalarKind::kFloat, 4}},  {"float32", {ScalarKind::kFloat, 4}},
      {"double", {ScalarKind::kFloat, 8}}, {"float64", {ScalarKind::kFloat, 8}}};
  for (const auto& [n, type] : kTypes) {
    if (s == n) {
      *t = type;
      return true;
    }
  }
  return false;
}

Status LineError(const std::string& name, int line_no, const std::string& what) {
  return Status::Corruption(name + ":" + std::to_string(line_no) + ": " + what);
}

struct Header {
  CloudEncoding encoding = CloudEncoding::kBinary;
  std::vector<Element> elements;
};

Status ParseProperty(const std::string& name, int line_no,
                     const std::vector<std::string_view>& tokens, Element* e) {
  Property p;
  const bool list = tokens.size() >= 2 && tokens[1] == "list";
  if (tokens.size() != (list ? 5u : 3u)) {
    return LineError(name, line_no,
                     "expected 'property TYPE NAME' or 'property list COUNT_TYPE TYPE NAME'");
  }
  const std::string_view type = tokens[list ? 3 : 1];
  if (!ParseType(type, &p.type)) {
    return LineError(name, line_no, "unknown property type '" + internal::Printable(type) + "'");
  }
  if (list) {
    p.is_list = true;
    if (!ParseType(tokens[2], &p.count_type) || p.count_type.kind == ScalarKind::kFloat) {
      return LineError(
          name, line_no,
          "list count type '" + internal::Printable(tokens[2]) + "' is not an integer type");
    }
    e->has_list = true;
  }
  p.name = internal::Printable(tokens.back());
  if (e->properties.size() >= kMaxProperties) {
    return LineError(
        name, line_no,
        "more than " + std::to_string(kMaxProperties) + " properties in element '" + e->name + "'");
  }
  e->row_bytes += p.type.size;
  e->properties.push_back(std::move(p));
  return Status::Ok();
}

StatusOr<Header> ParseHeader(const std::string& name, LineCursor* cursor) {
  std::string_view line;
  if (!cursor->Next(&line) || line != "ply") {
    return Status::Corruption(name + ": not a PLY file (the first line must be 'ply')");
  }
  Header h;
  bool have_format = false;
  while (true) {
    if (!cursor->Next(&line)) return Status::Corruption(name + ": header has no end_header line");
    const int n = cursor->line_no();
    const auto tokens = internal::SplitTokens(line);
    if (tokens.empty()) continue;
    const std::string_view key = tokens[0];
    if (key == "comment" || key == "obj_info") continue;
    if (key == "end_header") break;
    if (key == "format") {
      if (have_format) return LineError(name, n, "format appears twice");
      have_format = true;
      if (tokens.size() != 3 || tokens[2] != "1.0") {
        return LineError(name, n, "expected 'format ascii|binary_little_endian 1.0'");
      }
      if (tokens[1] == "ascii") {
        h.encoding = CloudEncoding::kAscii;
      } else if (tokens[1] == "binary_little_endian") {
        h.encoding = CloudEncoding::kBinary;
      } else if (tokens[1] == "binary_big_endian") {
        return LineError(name, n, "binary_big_endian is not supported (save as little-endian)");
      } else {
        return LineError(name, n, "unknown format '" + internal::Printable(tokens[1]) + "'");
      }
    } else if (key == "element") {
      Element e;
      if (tokens.size() != 3 || !internal::ParseU64(tokens[2], &e.rows)) {
        return LineError(name, n, "expected 'element NAME COUNT'");
      }
      e.name = internal::Printable(tokens[1]);
      if (h.elements.size() >= kMaxElements) {
        return LineError(name, n, "more than " + std::to_string(kMaxElements) + " elements");
      }
      const uint64_t limit = e.name == "vertex" ? kMaxPointsPerFrame : kMaxElementRows;
      if (e.rows > limit) {
        return Status::OutOfRange(name + ":" + std::to_string(n) + ": element '" + e.name +
                                  "' has " + std::to_string(e.rows) +
                                  " rows, exceeds the limit of " + std::to_string(limit));
      }
      for (const Element& other : h.elements) {
        if (other.name == e.name)
          return LineError(name, n, "element '" + e.name + "' appears twice");
      }
      h.elements.push_back(std::move(e));
    } else if (key == "property") {
      if (h.elements.empty()) return LineError(name, n, "property before any element");
      DV_RETURN_IF_ERROR(ParseProperty(name, n, tokens, &h.elements.back()));
    } else {
      return LineError(name, n, "unknown header keyword '" + internal::Printable(key) + "'");
    }
  }
  if (!have_format) return Status::Corruption(name + ": header has no format line");
  return h;
}

// Skips the rows of an element dejaview does not read. Every row with a property consumes at
// least one byte or line, so a huge row count over a short body fails fast instead of looping.
Status SkipBinaryElement(const std::string& name, const Element& e, ByteReader* r) {
  if (!e.has_list) {
    const uint64_t bytes = e.rows * e.row_bytes;  // < 2^32 * 2^11: no overflow
    if (bytes > r->remaining()) {
      return Status::Corruption(name + ": truncated: element '" + e.name + "' needs " +
                                std::to_string(bytes) + " bytes, the file has " +
                                std::to_string(r->remaining()));
    }
    r->Skip(size_t(bytes));
    return Status::Ok();
  }
  for (uint64_t row = 0; row < e.rows; ++row) {
    for (const Property& p : e.properties) {
      const uint8_t* count_bytes = nullptr;
      uint64_t skip = p.type.size;
      if (p.is_list) {
        if (!r->View(&count_bytes, p.count_type.size)) break;
        const double n = internal::ScalarToDouble(count_bytes, p.count_type);
        if (n < 0) {
          return Status::Corruption(name + ": element '" + e.name + "' row " + std::to_string(row) +
                                    ": negative list length");
        }
        skip = uint64_t(n) * p.type.size;  // n < 2^32: no overflow
      }
      if (!r->Skip(size_t(skip))) break;
    }
    if (r->failed()) {
      return Status::Corruption(name + ": truncated: element '" + e.name + "' ends in row " +
                                std::to_string(row) + " of " + std::to_string(e.rows));
    }
  }
  return Status::Ok();
}

Status SkipAsciiElement(const std::string& name, const Element& e, LineCursor* cursor) {
  if (e.properties.empty()) return Status::Ok();
  std::string_view line;
  for (uint64_t row = 0; row < e.rows; ++row) {
    if (!cursor->NextNonBlank(&line)) {
      return Status::Corruption(name + ": truncated: element '" + e.name + "' ends in row " +
                                std::to_string(row) + " of " + std::to_string(e.rows));
    }
    const auto tokens = internal::SplitTokens(line);
    size_t t = 0;
    for (const Property& p : e.properties) {
      uint64_t n = 1;
      if (p.is_list && (t >= tokens.size() || !internal::ParseU64(tokens[t++], &n))) {
        return LineError(name, cursor->line_no(),
                         "element '" + e.name + "': list length is not a non-negative integer");
      }
      if (n > tokens.size() - t) {
        return LineError(name, cursor->line_no(),
                         "element '" + e.name + "' row has too few values");
      }
      t += size_t(n);
    }
    if (t != tokens.size()) {
      return LineError(name, cursor->line_no(),
                       "element '" + e.name + "' row has " + std::to_string(tokens.size() - t) +
                           " extra values");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PointCloud> ParsePly(const uint8_t* data, size_t size, const std::string& name) {
  LineCursor cursor(data, size);
  DV_ASSIGN_OR_RETURN(Header h, ParseHeader(name, &cursor));
  for (const Element& e : h.elements) {
    if (e.name != "vertex") {
      if (h.encoding == CloudEncoding::kAscii) {
        DV_RETURN_IF_ERROR(SkipAsciiElement(name, e, &cursor));
      } else {
        ByteReader r(data + cursor.offset(), size - cursor.offset());
        DV_RETURN_IF_ERROR(SkipBinaryElement(name, e, &r));
        cursor.SkipBytes(size - cursor.offset() - r.remaining());
      }
      continue;
    }
    std::vector<RecordField> fields;
    for (const Property& p : e.properties) {
      if (p.is_list) {
        return Status::Corruption(name + ": vertex property '" + p.name +
                                  "' is a list (not supported)");
      }
      fields.push_back({p.name, p.type});
    }
    DV_ASSIGN_OR_RETURN(RecordLayout layout, RecordLayout::Make(std::move(fields), name));
    return internal::ReadRecords(layout, size_t(e.rows), h.encoding, data, size, &cursor, name);
  }
  return Status::Corruption(name + ": no 'vertex' element");
}

StatusOr<PointCloud> ReadPly(const std::string& path) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path));
  return ParsePly(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> EncodePly(const PointCloud& cloud, CloudEncoding encoding) {
  std::string header = "ply\nformat ";
  header += encoding == CloudEncoding::kBinary ? "binary_little_endian" : "ascii";
  header +=
      " 1.0\ncomment written by dejaview\nelement vertex " + std::to_string(cloud.size()) + "\n";
  for (const RecordField& f : internal::OutputFields(cloud)) {
    header += std::string("property ") + (f.type.kind == ScalarKind::kFloat ? "float" : "ushort") +
              " " + f.name + "\n";
  }
  header += "end_header\n";
  return internal::EncodeRecords(header, cloud, encoding);
}

Status WritePly(const std::string& path, const PointCloud& cloud, CloudEncoding encoding) {
  return WriteFileAtomic(path, EncodePly(cloud, encoding));
}

}  // namespace dv
