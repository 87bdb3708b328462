// Open-addressing hash from a voxel key to an int32 index: the neighbour look-ups of the codec's
// hot loops. Iteration order is never used, so determinism rests on the keys alone. The probing
// itself lives in hot_kernels.h, shared with the CUDA kernels, which read a byte copy of the
// table (view()).
#pragma once

#include <cstdint>
#include <vector>

#include "dejaview/maps/voxel.h"
#include "hot_kernels.h"

namespace dv::codec {

// 21 bits per axis (keys within +-2^20); KeyInRange says whether a key fits.
constexpr int kPackBias = kernels::kPackBias;
inline bool KeyInRange(const maps::VoxelKey& k) { return (k.array().abs() < kPackBias - 2).all(); }
inline uint64_t PackKey(const maps::VoxelKey& k) { return kernels::PackKey(k.x(), k.y(), k.z()); }

// Never more than half full: Insert doubles the table first when it would be, so `expected` is a
// sizing hint, not a limit (a full open-addressing table would make Insert and Find loop forever).
class VoxelHash {
 public:
  explicit VoxelHash(size_t expected) {
    size_t n = 16;
    while (n < 2 * expected) n <<= 1;
    Reset(n);
  }
  // Inserts key -> value unless present; returns the stored value.
  int32_t Insert(uint64_t key, int32_t value) {
    if (2 * (size_ + 1) > keys_.size()) Grow();
    size_t i = kernels::HashSlot(key, shift_, mask_);
    while (keys_[i] != kernels::kEmptyKey) {
      if (keys_[i] == key) return values_[i];
      i = (i + 1) & mask_;
    }
    keys_[i] = key;
    values_[i] = value;
    ++size_;
    return value;
  }
  int32_t Find(uint64_t key) const { return kernels::HashFind(view(), key); }

  kernels::HashView view() const { return {keys_.data(), values_.data(), mask_, shift_}; }
  // For a table filled elsewhere (the CUDA backend's IndexKeys, hot_paths.h): its arrays, of
  // slots() entries with view()'s mask and shift, then how many keys it holds.
  uint64_t* keys_data() { return keys_.data(); }
  int32_t* values_data() { return values_.data(); }
  void set_size(size_t n) { size_ = n; }
  size_t slots() const { return keys_.size(); }
  size_t size() const { return size_; }

 private:
  void Reset(size_t n) {
    int bits = 0;
    while ((size_t(1) << bits) < n) ++bits;
    shift_ = 64 - (bits - 3);
    keys_.assign(n, kernels::kEmptyKey);
    values_.assign(n, -1);
    mask_ = n - 1;
    size_ = 0;
  }
  void Grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<int32_t> values = std::move(values_);
    Reset(2 * keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] != kernels::kEmptyKey) Insert(keys[i], values[i]);
    }
  }

  std::vector<uint64_t> keys_;
  std::vector<int32_t> values_;
  uint64_t mask_ = 0;
  int32_t shift_ = 63;
  size_t size_ = 0;
};

}  // namespace dv::codec
