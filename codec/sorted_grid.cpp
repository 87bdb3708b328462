#include "sorted_grid.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace dv::codec {
namespace {

// The first position at or after c whose value is >= target, in a sorted array that ends with a
// value no target reaches: a galloping search, so a cursor that jumps costs a logarithm.
size_t Gallop(const uint64_t* a, size_t n, size_t c, uint64_t target) {
  size_t step = 1;
  while (c + step < n && a[c + step] < target) {
    c += step;
    step <<= 1;
  }
  return size_t(std::lower_bound(a + c, a + std::min(c + step, n), target) - a);
}
// The same, the next 8 keys first. Most moves are short (most cursors move under 8 keys), but how
// far is data: the keys below target among the next 8 are counted without a branch, where
// stepping one at a time would mispredict its exit.
inline size_t Advance(const uint64_t* a, size_t n, size_t c, uint64_t target) {
  if (c + 8 <= n) {
    size_t k = 0;
    for (size_t j = 0; j < 8; ++j) k += size_t(a[c + j] < target);
    if (k < 8) return c + k;
    c += 8;
  }
  return Gallop(a, n, c, target);
}

// Pass::Gather's case of distinct keys, with the span 2 nb + 1 a constant where it is 3 (nb = 1,
// the classification's): one item a voxel, so a column's run is the next at most span keys up to
// the first beyond it, counted without a branch (the loop's exit, a different count each column,
// mispredicted often), each one written whether or not it counts; a run near the sentinel takes
// the loop. Returns the end of what it wrote at `to`, which has room for span^3 items.
// Column y + 1 starts at or after the end of column y: with kHint its cursor moves on from the
// later of the two, so a query far from the last one gallops once per dx, not once per column.
// Where the queries are dense the cursors seldom fall far behind, and each moves on from where it
// stood for the last query: its target only grows, so it is behind it either way, and the
// columns' steps are free of each other, where the hint would chain each column's loads to the
// last's. Sparse queries (registration's subsamples) keep the hint: their cursors fall far behind.
template <int kSpan, bool kHint>
int32_t* GatherDistinct(const uint64_t* keys, const uint32_t* item, size_t n, int span_arg,
                        uint64_t packed, int64_t step_x, int64_t step_y, size_t* c, int32_t* to) {
  const int span = kSpan > 0 ? kSpan : span_arg;
  const int nb = (span - 1) / 2;
  uint64_t row = uint64_t(int64_t(packed) - nb * step_x - nb * step_y - nb);
  for (int dx = 0; dx < span; ++dx, row += uint64_t(step_x)) {
    uint64_t first = row;
    size_t e = 0;
    for (int dy = 0; dy < span; ++dy, ++c, first += uint64_t(step_y)) {
      const uint64_t last = first + uint64_t(span - 1);
      e = *c = Advance(keys, n, kHint ? std::max(*c, e) : *c, first);
      if (e + size_t(span) <= n) {
        size_t count = 0;
        for (int k = 0; k < span; ++k) {
          to[k] = int32_t(item[e + size_t(k)]);
          count += keys[e + size_t(k)] <= last;
        }
        to += count;
        e += count;
      } else {
        for (; keys[e] <= last; ++e) *to++ = int32_t(item[e]);
      }
    }
  }
  return to;
}

}  // namespace

// Written here because neither the standard library nor the Debian packages we use offer a
// radix sort; std::sort of the same pairs measured several times slower.
void RadixSort(int key_bits, std::vector<uint64_t>* packed, std::vector<uint32_t>* index) {
  constexpr int kDigit = 11;
  constexpr uint64_t kMask = (1u << kDigit) - 1;
  constexpr size_t kDigits = size_t(1) << kDigit;
  const size_t n = packed->size();
  std::vector<uint64_t> packed_tmp(n);
  std::vector<uint32_t> index_tmp(n);
  // The keys in four quarters, each counted and placed by counts of its own: neighbouring keys (a
  // scan's points in order) often share a digit, and with one count each increment waited on the
  // one before. Quarter q's keys of a digit go after those of the quarters before it, so the sort
  // stays stable.
  constexpr size_t kWays = 4;
  size_t from[kWays + 1];
  for (size_t q = 0; q <= kWays; ++q) from[q] = n * q / kWays;
  std::vector<uint32_t> counts(kWays * kDigits);
  for (int shift = 0; shift < key_bits; shift += kDigit) {
    std::fill(counts.begin(), counts.end(), 0);
    const uint64_t* k = packed->data();
    const uint32_t* ix = index->data();
    auto digit = [&](size_t m) { return size_t((k[m] >> shift) & kMask); };
    const size_t len = from[1];  // the shortest quarter's length (the first)
    for (size_t m = 0; m < len; ++m) {
      for (size_t q = 0; q < kWays; ++q) ++counts[q * kDigits + digit(from[q] + m)];
    }
    for (size_t q = 0; q < kWays; ++q) {
      for (size_t m = from[q] + len; m < from[q + 1]; ++m) ++counts[q * kDigits + digit(m)];
    }
    uint32_t sum = 0;
    for (size_t d = 0; d < kDigits; ++d) {
      for (size_t q = 0; q < kWays; ++q) sum += std::exchange(counts[q * kDigits + d], sum);
    }
    auto place = [&](size_t q, size_t m) {
      const uint32_t to = counts[q * kDigits + digit(m)]++;
      packed_tmp[to] = k[m];
      index_tmp[to] = ix[m];
    };
    for (size_t m = 0; m < len; ++m) {
      for (size_t q = 0; q < kWays; ++q) place(q, from[q] + m);
    }
    for (size_t q = 0; q < kWays; ++q) {
      for (size_t m = from[q] + len; m < from[q + 1]; ++m) place(q, m);
    }
    packed->swap(packed_tmp);
    index->swap(index_tmp);
  }
}

SortedGrid::SortedGrid(const std::vector<int32_t>& keys, int max_nb, int per_cell)
    : max_nb_(max_nb) {
  const size_t n = keys.size() / 3;
  for (size_t i = 0; i < n; ++i) {
    for (int a = 0; a < 3; ++a) {
      lo_[a] = i == 0 ? keys[a] : std::min(lo_[a], keys[3 * i + a]);
      hi_[a] = i == 0 ? keys[a] : std::max(hi_[a], keys[3 * i + a]);
    }
  }
  if (n == 0) return;
  // Queries within nb <= max_nb of the items' box are kept, so their neighbours stay within
  // 2 max_nb of it and adding a column's offset to a packed key never carries into the next axis.
  for (int a = 0; a < 3; ++a) {
    lo_[a] -= 2 * max_nb;
    hi_[a] += 2 * max_nb;
    while ((int64_t(hi_[a]) - lo_[a]) >> bits_[a]) ++bits_[a];
  }
  packed_.resize(n);
  item_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    packed_[i] = Pack(&keys[3 * i]);
    item_[i] = uint32_t(i);
  }
  RadixSort(bits_[0] + bits_[1] + bits_[2], &packed_, &item_);
  // A sentinel above every packed key (they have at most 63 bits) ends every scan.
  packed_.push_back(UINT64_MAX);
  item_.push_back(0);
  if (per_cell > 0) {
    size_t out = 0;
    for (size_t i = 0, run = 0; i <= n; ++i) {
      run = i > 0 && packed_[i] == packed_[i - 1] ? run + 1 : 0;
      if (run >= size_t(per_cell)) continue;
      packed_[out] = packed_[i];
      item_[out++] = item_[i];
    }
    packed_.resize(out);
    item_.resize(out);
  }
  distinct_ = std::adjacent_find(packed_.begin(), packed_.end()) == packed_.end();
}

void SortedGrid::Keep(const std::vector<int32_t>& to) {
  if (packed_.empty()) return;
  size_t out = 0;
  for (size_t i = 0; i + 1 < packed_.size(); ++i) {  // the sentinel (last) stays
    const int32_t j = to[item_[i]];
    if (j < 0) continue;
    packed_[out] = packed_[i];
    item_[out++] = uint32_t(j);
  }
  packed_[out] = packed_.back();
  item_[out++] = 0;
  packed_.resize(out);
  item_.resize(out);
}

SortedGrid::Queries SortedGrid::Sort(const std::vector<int32_t>& keys,
                                     const std::vector<uint8_t>& valid, int nb) const {
  return SortBy(valid.size(), nb, 1, [&](size_t i, int32_t k[3]) {
    std::copy_n(&keys[3 * i], 3, k);
    return valid[i] != 0;
  });
}

SortedGrid::Pass::Pass(const SortedGrid& grid, int nb, bool dense)
    : g_(grid),
      nb_(nb),
      dense_(dense),
      step_x_(int64_t(1) << (grid.bits_[1] + grid.bits_[2])),
      step_y_(int64_t(1) << grid.bits_[2]),
      cursor_(size_t(2 * nb + 1) * size_t(2 * nb + 1), 0) {
  if (nb > grid.max_nb_) std::abort();  // as in Sort
}

template <typename Column>
void SortedGrid::Pass::Columns(uint64_t packed, Column&& column) {
  const int nb = nb_;
  const uint64_t* keys = g_.packed_.data();
  const size_t n = g_.packed_.size();
  size_t* c = cursor_.data();
  for (int dx = -nb; dx <= nb; ++dx) {
    // Column y + 1 starts at or after the end of column y: its cursor starts from the later of
    // the two, so a query far from the last one gallops once per dx, not once per column.
    size_t e = 0;
    for (int dy = -nb; dy <= nb; ++dy, ++c) {
      const uint64_t first = uint64_t(int64_t(packed) + dx * step_x_ + dy * step_y_ - nb);
      *c = Advance(keys, n, std::max(*c, e), first);
      for (e = *c; keys[e] <= first + 2 * uint64_t(nb);) ++e;
      column(dx, dy, *c, e);
    }
  }
}

SortedGrid::Items SortedGrid::Pass::Gather(uint64_t packed) {
  if (g_.distinct_) {
    // Into the pass's own span^3 slots: resizing a list to the most it could take and back would
    // zero the slots first, once a voxel.
    const int span = 2 * nb_ + 1;
    const size_t most = size_t(span) * size_t(span) * size_t(span);
    if (scratch_.size() < most) scratch_.resize(most);
    int32_t* const to = scratch_.data();
    const uint64_t* keys = g_.packed_.data();
    const uint32_t* item = g_.item_.data();
    const size_t n = g_.packed_.size();
    size_t* c = cursor_.data();
    int32_t* end = nullptr;
    if (dense_) {
      end = span == 3
                ? GatherDistinct<3, false>(keys, item, n, span, packed, step_x_, step_y_, c, to)
                : GatherDistinct<0, false>(keys, item, n, span, packed, step_x_, step_y_, c, to);
    } else {
      end = span == 3
                ? GatherDistinct<3, true>(keys, item, n, span, packed, step_x_, step_y_, c, to)
                : GatherDistinct<0, true>(keys, item, n, span, packed, step_x_, step_y_, c, to);
    }
    return Items(to, size_t(end - to));
  }
  scratch_.clear();
  Columns(packed, [&](int, int, size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) scratch_.push_back(int32_t(g_.item_[k]));
  });
  return Items(scratch_.data(), scratch_.size());
}

void SortedGrid::Pass::Runs(uint64_t packed, std::vector<Run>* out) {
  Columns(packed, [&](int dx, int dy, size_t begin, size_t end) {
    out->push_back({dx, dy, g_.item_.data() + begin, end - begin});
  });
}

}  // namespace dv::codec
