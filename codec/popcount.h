// Bits set in a 16-bit value, by table. The portable x86-64 target has no popcnt instruction, and
// __builtin_popcount there is a libgcc call, in the decoder's inner loop.
#pragma once

#include <array>
#include <cstdint>

namespace dv::codec {

inline int Popcount16(unsigned v) {
  static constexpr auto kTable = [] {
    std::array<uint8_t, 256> t{};
    for (unsigned i = 1; i < 256; ++i) t[i] = uint8_t((i & 1) + t[i >> 1]);
    return t;
  }();
  return kTable[v & 255] + kTable[(v >> 8) & 255];
}

}  // namespace dv::codec
