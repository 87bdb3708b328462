#include "dejaview/codec/range_coder.h"

namespace dv::codec {
using range_detail::kTop;

void RangeEncoder::ShiftLow() {
  // low_ holds 33 significant bits: bit 32 is a carry into the bytes already delayed in cache_.
  if (uint32_t(low_) < 0xff000000u || (low_ >> 32) != 0) {
    const uint8_t carry = uint8_t(low_ >> 32);
    uint8_t temp = cache_;
    do {
      out_.push_back(uint8_t(temp + carry));
      temp = 0xff;
    } while (--cache_size_ != 0);
    cache_ = uint8_t(low_ >> 24);
  }
  ++cache_size_;
  low_ = (low_ & 0x00ffffffu) << 8;
}

void RangeEncoder::EncodeDirect(uint32_t value, int nbits) {
  for (int i = nbits - 1; i >= 0; --i) {
    range_ >>= 1;
    if ((value >> i) & 1) low_ += range_;
    while (range_ < kTop) {
      range_ <<= 8;
      ShiftLow();
    }
  }
}

std::vector<uint8_t> RangeEncoder::Finish() {
  for (int i = 0; i < 5; ++i) ShiftLow();
  // The first byte is always the initial zero cache: drop it (the decoder assumes it).
  out_.erase(out_.begin());
  return std::move(out_);
}

RangeDecoder::RangeDecoder(const uint8_t* data, size_t size) : p_(data), end_(data + size) {
  for (int i = 0; i < 4; ++i) code_ = (code_ << 8) | NextByte();
}

uint32_t RangeDecoder::DecodeDirect(int nbits) {
  uint32_t v = 0;
  for (int i = 0; i < nbits; ++i) {
    range_ >>= 1;
    uint32_t bit = 0;
    if (code_ >= range_) {
      code_ -= range_;
      bit = 1;
    }
    v = (v << 1) | bit;
    Normalize();
  }
  return v;
}

void UIntModel::Encode(RangeEncoder* rc, uint64_t v) {
  // v + 1 >= 1 has a leading one at position len; len is sent in unary.
  const uint64_t w = v + 1;
  int len = 63 - __builtin_clzll(w);
  for (int i = 0; i < len; ++i) rc->Encode(&length[i], 1);
  if (len < 63) rc->Encode(&length[len], 0);
  for (int i = len - 1; i >= 0; --i) {
    const int bit = int((w >> i) & 1);
    if (len - 1 - i < 4) {
      rc->Encode(&high[len][len - 1 - i], bit);
    } else {
      rc->EncodeDirect(uint32_t(bit), 1);
    }
  }
}

bool UIntModel::Decode(RangeDecoder* rc, uint64_t max, uint64_t* v) {
  int len = 0;
  while (len < 63 && rc->Decode(&length[len])) ++len;
  uint64_t w = 1;
  for (int i = len - 1; i >= 0; --i) {
    const int k = len - 1 - i;
    const uint32_t bit = k < 4 ? uint32_t(rc->Decode(&high[len][k])) : rc->DecodeDirect(1);
    w = (w << 1) | bit;
  }
  if (w - 1 > max) return false;
  *v = w - 1;
  return true;
}

}  // namespace dv::codec
