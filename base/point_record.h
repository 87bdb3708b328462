// Internal to base: the typed-record machinery that PCD and PLY share. Both formats describe a
// point as a list of named scalar fields (kind, size, count). RecordLayout maps the names dejaview
// knows (x y z intensity ring time/t) onto PointCloud arrays and decodes one record from its
// little-endian bytes; ASCII bodies are parsed token by token into the same bytes, so both
// encodings share one conversion path and cannot drift apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dejaview/base/point_cloud.h"
#include "dejaview/base/status.h"

namespace dv::internal {

enum class ScalarKind : uint8_t { kInt, kUint, kFloat };
struct ScalarType {
  ScalarKind kind = ScalarKind::kFloat;
  uint8_t size = 4;  // bytes: 1, 2, 4 or 8 (a float is 4 or 8)
};

struct RecordField {
  std::string name;
  ScalarType type;
  uint32_t count = 1;
  size_t offset = 0;  // bytes from the start of the record; assigned by RecordLayout::Make
};

class RecordLayout {
 public:
  // Assigns offsets in declaration order. Fails, naming `name`, when x, y or z is missing, a
  // field dejaview reads appears twice or has a count other than 1, or ring is not an integer.
  // Every other field (PCD padding '_' included) is carried over as bytes to skip.
  static StatusOr<RecordLayout> Make(std::vector<RecordField> fields, const std::string& name);

  size_t record_bytes() const { return record_bytes_; }
  size_t values_per_record() const { return values_per_record_; }
  // Sizes the cloud for n points (ring and time only when the record has them).
  void Resize(size_t n, PointCloud* cloud) const;
  // Decodes point i from record_bytes() bytes at rec. Fails only for a ring value that does not
  // fit uint16. The message has no file context; the caller adds it.
  Status Decode(const uint8_t* rec, size_t i, PointCloud* cloud) const;
  // Parses one ASCII record (exactly values_per_record() tokens) into record_bytes() at rec.
  // Only the fields dejaview reads are parsed; the others are skipped unread.
  Status ParseAscii(const std::vector<std::string_view>& tokens, uint8_t* rec) const;

 private:
  enum Slot { kX, kY, kZ, kIntensity, kRing, kTime, kSlots };
  std::vector<RecordField> fields_;
  std::array<int, kSlots> slot_field_{};  // index into fields_, -1 when absent
  std::vector<size_t> first_token_;       // per field: index of its first ASCII token
  size_t record_bytes_ = 0;
  size_t values_per_record_ = 0;
};

// Parses one ASCII number into its little-endian bytes of type t (range-checked for integers;
// nan and inf are accepted for floats). The message has no context.
Status ParseAsciiScalar(std::string_view token, ScalarType t, uint8_t* out);
// Reads a scalar of type t at p as a double (exact for all but 64-bit integers above 2^53).
double ScalarToDouble(const uint8_t* p, ScalarType t);

// Lines of a text header or ASCII body: "\n" or "\r\n" terminated, line numbers 1-based.
class LineCursor {
 public:
  LineCursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  // The next line without its terminator; false at the end of the input.
  bool Next(std::string_view* line);
  // The next line that is not blank (only spaces, tabs, "\r").
  bool NextNonBlank(std::string_view* line);
  int line_no() const { return line_no_; }
  size_t offset() const { return pos_; }  // bytes consumed: where the next line starts
  // Moves past n bytes of a binary body (line numbers stop meaning anything after this).
  void SkipBytes(size_t n) { pos_ += n; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  int line_no_ = 0;
};

// Splits on spaces, tabs and "\r"; empty tokens are dropped.
std::vector<std::string_view> SplitTokens(std::string_view line);
// A token from untrusted input made safe to echo in a message: at most 32 characters, bytes
// outside printable ASCII shown as '?'.
std::string Printable(std::string_view token);
// A decimal unsigned integer with nothing around it; false on overflow or stray characters.
bool ParseU64(std::string_view token, uint64_t* out);

// Reads `points` records of layout from the body that starts at cursor->offset(): binary records
// back to back, or ASCII records one per non-blank line (cursor advances past them). Anything
// after the last record is ignored. The body's size is checked against `points` before the cloud
// is allocated. Errors name `name` (and the line, for ASCII).
StatusOr<PointCloud> ReadRecords(const RecordLayout& layout, size_t points, CloudEncoding encoding,
                                 const uint8_t* data, size_t size, LineCursor* cursor,
                                 const std::string& name);

// The fields every dejaview writer emits for a cloud: x y z intensity as float32, ring as uint16
// and time as float32 when the cloud has them.
std::vector<RecordField> OutputFields(const PointCloud& cloud);
// header followed by one record per point in OutputFields order: packed little-endian binary, or
// one ASCII line per point with floats as %.9g (nine significant digits read back by strtof to
// the same float, so an ASCII round trip is exact).
std::vector<uint8_t> EncodeRecords(const std::string& header, const PointCloud& cloud,
                                   CloudEncoding encoding);

}  // namespace dv::internal
