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

// How a BitModel's probability adapts to the bits it codes. Delta format versions 1 and 2 use
// kShift4: a 12-bit probability moved 1/16 of the way towards each coded bit. Version 3 uses
// kCounted: a 16-bit probability whose step shrinks as the model is used (1/2 at its first bit,
// 1/8 up to its 8th, 1/16 up to its 32nd, then 1/32), so a fresh context learns from a few
// bits and a busy one settles on a finer estimate (as CABAC's and AV1's counters do; 2-4%
// smaller frames on KITTI by themselves, BENCHMARK.md). Encoder and decoder of a stream must
// agree on it.
enum class Adaptation : uint8_t { kShift4, kCounted };

// Probability that the next bit is 0, in units of 2^-16 (kShift4 keeps the low 4 bits zero);
// starts at one half.
struct BitModel {
  uint16_t p = 1 << 15;
  uint8_t uses = 0;  // kCounted: bits coded with this model so far, saturating at 32
};

class RangeEncoder {
 public:
  explicit RangeEncoder(Adaptation adaptation) : adaptation_(adaptation) {}
  void Encode(BitModel* m, int bit);
  // Bits with probability one half (no model): raw fields inside a coded stream.
  void EncodeDirect(uint32_t value, int nbits);
  // Ends the stream and returns its bytes; the encoder must not be used afterwards.
  std::vector<uint8_t> Finish();

 private:
  void ShiftLow();
  Adaptation adaptation_;
  uint64_t low_ = 0;
  uint32_t range_ = 0xffffffffu;
  uint8_t cache_ = 0;
  uint64_t cache_size_ = 1;
  std::vector<uint8_t> out_;
};

class RangeDecoder {
 public:
  RangeDecoder(const uint8_t* data, size_t size, Adaptation adaptation);
  int Decode(BitModel* m);
  uint32_t DecodeDirect(int nbits);
  // Bytes read past the end of the input (zeros were substituted). A well-formed stream
  // produced by RangeEncoder::Finish never overruns.
  size_t overrun() const { return overrun_; }

 private:
  uint8_t NextByte();
  void Normalize();
  Adaptation adaptation_;
  const uint8_t* p_;
  const uint8_t* end_;
  uint32_t range_ = 0xffffffffu;
  uint32_t code_ = 0;
  size_t overrun_ = 0;
};

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
