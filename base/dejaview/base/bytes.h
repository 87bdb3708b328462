// Little-endian byte writer and bounds-checked reader for every binary format in dejaview.
// The reader never reads past its span: each Get* returns false once the input is exhausted,
// so a parser can check once at the end ("truncated") instead of after every field.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace dv {

class ByteWriter {
 public:
  void U8(uint8_t v) { buf_.push_back(v); }
  void U16(uint16_t v) { Raw(&v, 2); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F32(float v) { Raw(&v, 4); }
  void F64(double v) { Raw(&v, 8); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(uint8_t(v) | 0x80);
      v >>= 7;
    }
    buf_.push_back(uint8_t(v));
  }
  void Bytes(const void* p, size_t n) { Raw(p, n); }
  void Str(const std::string& s) {
    Varint(s.size());
    Raw(s.data(), s.size());
  }
  // Overwrites 4 bytes at offset (for lengths and CRCs written after the body).
  void PatchU32(size_t offset, uint32_t v) { std::memcpy(buf_.data() + offset, &v, 4); }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& buffer() { return buf_; }
  std::vector<uint8_t> Take() { return std::move(buf_); }

 private:
  // dejaview targets little-endian hosts only (x86-64, arm64); memcpy is the portable load/store.
  void Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  explicit ByteReader(const std::vector<uint8_t>& v) : ByteReader(v.data(), v.size()) {}

  bool U8(uint8_t* v) { return Raw(v, 1); }
  bool U16(uint16_t* v) { return Raw(v, 2); }
  bool U32(uint32_t* v) { return Raw(v, 4); }
  bool U64(uint64_t* v) { return Raw(v, 8); }
  bool I64(int64_t* v) { return Raw(v, 8); }
  bool F32(float* v) { return Raw(v, 4); }
  bool F64(double* v) { return Raw(v, 8); }
  bool Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return Fail();
      const uint8_t b = *p_++;
      r |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return Fail();
  }
  // A string of at most max_len bytes: a bounded allocation whatever the input says.
  bool Str(std::string* s, size_t max_len) {
    uint64_t n;
    if (!Varint(&n) || n > max_len || n > remaining()) return Fail();
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool Bytes(void* out, size_t n) { return Raw(out, n); }
  // Points at the next n bytes and skips them, without copying.
  bool View(const uint8_t** out, size_t n) {
    if (n > remaining()) return Fail();
    *out = p_;
    p_ += n;
    return true;
  }
  bool Skip(size_t n) {
    if (n > remaining()) return Fail();
    p_ += n;
    return true;
  }
  size_t remaining() const { return size_t(end_ - p_); }
  const uint8_t* position() const { return p_; }
  bool failed() const { return failed_; }

 private:
  bool Raw(void* out, size_t n) {
    if (n > remaining()) return Fail();
    std::memcpy(out, p_, n);
    p_ += n;
    return true;
  }
  bool Fail() {
    failed_ = true;
    p_ = end_;
    return false;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool failed_ = false;
};

}  // namespace dv
