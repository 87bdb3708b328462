// Open-addressing hash from a voxel key to an int32 index: the neighbour look-ups of the codec's
// hot loops. Iteration order is never used, so determinism rests on the keys alone.
#pragma once

#include <cstdint>
#include <vector>

#include "dejaview/maps/voxel.h"

namespace dv::codec {

// 21 bits per axis (keys within +-2^20); KeyInRange says whether a key fits.
constexpr int kPackBias = 1 << 20;
inline bool KeyInRange(const maps::VoxelKey& k) { return (k.array().abs() < kPackBias - 2).all(); }
inline uint64_t PackKey(const maps::VoxelKey& k) {
  return uint64_t(k.x() + kPackBias) << 42 | uint64_t(k.y() + kPackBias) << 21 |
         uint64_t(k.z() + kPackBias);
}

class VoxelHash {
 public:
  explicit VoxelHash(size_t expected) {
    size_t n = 16;
    int bits = 4;
    while (n < 2 * expected) {
      n <<= 1;
      ++bits;
    }
    shift_ = 64 - (bits - 3);
    keys_.assign(n, kEmpty);
    values_.assign(n, -1);
    mask_ = n - 1;
  }
  // Inserts key -> value unless present; returns the stored value.
  int32_t Insert(uint64_t key, int32_t value) {
    size_t i = Slot(key);
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) return values_[i];
      i = (i + 1) & mask_;
    }
    keys_[i] = key;
    values_[i] = value;
    return value;
  }
  int32_t Find(uint64_t key) const {
    size_t i = Slot(key);
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) return values_[i];
      i = (i + 1) & mask_;
    }
    return -1;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  // Runs of 8 consecutive z share a hashed base and sit in one cache line: the neighbour loops
  // probe (x, y, z-1..z+1) together.
  size_t Slot(uint64_t key) const {
    // Fibonacci hashing keeps the product's top bits, which depend on every bit of the key.
    return (size_t(((key >> 3) * 0x9E3779B97F4A7C15ull) >> shift_) << 3 | size_t(key & 7)) & mask_;
  }
  std::vector<uint64_t> keys_;
  std::vector<int32_t> values_;
  size_t mask_ = 0;
  int shift_ = 63;
};

}  // namespace dv::codec
