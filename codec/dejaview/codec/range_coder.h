// Binary adaptive range coder in the manner of LZMA's rc (Igor Pavlov's public-domain design):
// 32-bit range, carry propagation through a cache byte, 12-bit probabilities adapted by a shift.
// Written here because Debian packages no standalone binary arithmetic coder library (liblzma
// keeps its coder internal). Encoder and decoder are mirror images; the decoder never reads past
// its input: bytes beyond the end read as zero and overrun() reports how many were invented, so a
// caller can reject a truncated stream instead of trusting the bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dv::codec {

// A bit's adaptive model: the probability that the next bit is 0, in units of 2^-16, starting at
// one half. Its step towards each coded bit shrinks as the model is used (1/2 at its first bit,
// 1/8 up to its 8th, 1/16 up to its 32nd, then 1/32), so a fresh context learns from a few bits
// and a busy one settles on a finer estimate, as CABAC's and AV1's counters do.
struct BitModel {
  uint16_t p = 1 << 15;
  uint8_t uses = 0;  // bits coded with this model so far, saturating at 32
};

namespace range_detail {

constexpr uint32_t kTop = 1u << 24;

// The share of range that codes a 0.
inline uint32_t Bound(uint32_t range, const BitModel& m) { return (range >> 16) * m.p; }

// p stays within [1, 65535], so Bound is never 0 and never the whole range. Both ways are computed
// and one kept: which bit came is the data's, and a branch on it would be mispredicted often.
inline void Adapt(BitModel* m, int bit) {
  // The step by uses so far: 1/2 for the first bit, 1/8 up to the 8th, 1/16 up to the 32nd, then
  // 1/32 (uses saturates at 32).
  static constexpr uint8_t kShift[33] = {1, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4,
                                         4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5};
  const int shift = kShift[m->uses];
  m->uses = uint8_t(m->uses + (m->uses < 32));
  const uint32_t p = m->p;
  const uint32_t zero = p + ((65536u - p) >> shift), one = p - (p >> shift);
  m->p = uint16_t(bit == 0 ? zero : one);
}

}  // namespace range_detail

class RangeEncoder {
 public:
  void Encode(BitModel* m, int bit);
  // Bits with probability one half (no model): raw fields inside a coded stream.
  void EncodeDirect(uint32_t value, int nbits);
  // Ends the stream and returns its bytes; the encoder must not be used afterwards.
  std::vector<uint8_t> Finish();

 private:
  void ShiftLow();
  uint64_t low_ = 0;
  uint32_t range_ = 0xffffffffu;
  uint8_t cache_ = 0;
  uint64_t cache_size_ = 1;
  std::vector<uint8_t> out_;
};

class RangeDecoder {
 public:
  RangeDecoder(const uint8_t* data, size_t size);
  int Decode(BitModel* m);
  uint32_t DecodeDirect(int nbits);
  // Bytes read past the end of the input (zeros were substituted). A well-formed stream
  // produced by RangeEncoder::Finish never overruns.
  size_t overrun() const { return overrun_; }

 private:
  uint8_t NextByte() {
    if (p_ < end_) return *p_++;
    ++overrun_;
    return 0;
  }
  void Normalize() {
    while (range_ < range_detail::kTop) {
      range_ <<= 8;
      code_ = (code_ << 8) | NextByte();
    }
  }
  const uint8_t* p_;
  const uint8_t* end_;
  uint32_t range_ = 0xffffffffu;
  uint32_t code_ = 0;
  size_t overrun_ = 0;
};

// Inline: the map section codes a bit per candidate (hundreds of thousands a frame), each in a
// context of its own; a call per bit was a tenth of the selection's decoding.
inline void RangeEncoder::Encode(BitModel* m, int bit) {
  const uint32_t bound = range_detail::Bound(range_, *m);
  low_ += bit ? bound : 0;
  range_ = bit ? range_ - bound : bound;
  range_detail::Adapt(m, bit);
  while (range_ < range_detail::kTop) {
    range_ <<= 8;
    ShiftLow();
  }
}

inline int RangeDecoder::Decode(BitModel* m) {
  const uint32_t bound = range_detail::Bound(range_, *m);
  const int bit = code_ >= bound;
  code_ -= bit ? bound : 0;
  range_ = bit ? range_ - bound : bound;
  range_detail::Adapt(m, bit);
  Normalize();
  return bit;
}

// Adaptive models for a value of `Bits` bits coded most-significant bit first, each bit's model
// chosen by the bits above it (LZMA's "bit tree").
template <int Bits>
struct BitTree {
  BitModel m[1 << Bits];
  void Encode(RangeEncoder* rc, uint32_t v) {
    uint32_t node = 1;
    for (int i = Bits - 1; i >= 0; --i) {
      const int bit = (v >> i) & 1;
      rc->Encode(&m[node], bit);
      node = (node << 1) | bit;
    }
  }
  uint32_t Decode(RangeDecoder* rc) {
    uint32_t node = 1;
    for (int i = 0; i < Bits; ++i) node = (node << 1) | rc->Decode(&m[node]);
    return node - (1u << Bits);
  }
};

// Unsigned integers of any size: Elias-gamma style, the bit length in unary with adaptive models,
// then the bits below the leading one (the top few adaptive, the rest direct).
struct UIntModel {
  BitModel length[64];
  BitModel high[64][4];
  void Encode(RangeEncoder* rc, uint64_t v);  // v < 2^62
  // Values above max are rejected (returns false) so a corrupt stream cannot ask for more.
  bool Decode(RangeDecoder* rc, uint64_t max, uint64_t* v);
};

}  // namespace dv::codec
