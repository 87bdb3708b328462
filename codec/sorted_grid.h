// Fixed-radius neighbour look-ups on the CPU without hashing. The items (map voxels, map points)
// and the queries (frame points) are both sorted by voxel key, x then y then z; a pass visits the
// queries in that order and, for each column (dx, dy) around a query's voxel, moves a cursor
// forward to the run of items at (x + dx, y + dy, z - nb .. z + nb). Every step is a read of the
// next sorted key, where a hash probes a random cache line per neighbour (27 a voxel). A pass lists
// a voxel's items in (dx, dy, dz) order, item order within a voxel, as a hash look-up loop would,
// so results that depend on order (the first among equals) are those of the CUDA kernels, which
// hash.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "dejaview/base/fork_join.h"

namespace dv::codec {

// Sorts (packed, index) pairs by packed, stably: an LSD radix sort, 11 bits a pass, over keys of
// key_bits bits (a frame spans a few thousand voxels per axis: two to four passes).
void RadixSort(int key_bits, std::vector<uint64_t>* packed, std::vector<uint32_t>* index);

class SortedGrid {
 public:
  // A voxel's items as a pass gathered them: a view of the pass's own buffer, valid until its
  // next gathering (the visits of ForEachVoxelInRuns and the like).
  class Items {
   public:
    Items(const int32_t* data, size_t size) : data_(data), size_(size) {}
    const int32_t* data() const { return data_; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    int32_t operator[](size_t k) const { return data_[k]; }
    const int32_t* begin() const { return data_; }
    const int32_t* end() const { return data_ + size_; }

   private:
    const int32_t* data_;
    size_t size_;
  };

  // keys: x, y, z per item. Each voxel keeps its first per_cell items in item order (0: all).
  // Queries may look up to max_nb voxels per axis around them (the packing leaves room for it),
  // so one grid serves look-ups of several radii.
  SortedGrid(const std::vector<int32_t>& keys, int max_nb, int per_cell);
  int max_nb() const { return max_nb_; }
  // Renumbers the items: item i becomes to[i], and goes where to[i] < 0. The rest keep their
  // order, so each look-up lists the items a grid of the kept ones alone would list (numbered
  // by to); this grid's box still decides which queries Sort lists, so queries near it but far
  // from every kept item are visited with no items, where that grid would leave them out.
  void Keep(const std::vector<int32_t>& to);

  // Keys packed into integers that order as the keys do (packed), with the query each came from
  // (index), sorted; only queries with valid[i] whose neighbourhood (nb <= max_nb voxels per axis)
  // can hold an item are listed.
  struct Queries {
    std::vector<uint64_t> packed;
    std::vector<uint32_t> index;
  };
  Queries Sort(const std::vector<int32_t>& keys, const std::vector<uint8_t>& valid, int nb) const;
  // The same for n queries whose keys are made as they are listed: key(i, k) writes query i's key
  // to k[0..2] and returns whether it is valid; in `parts` parts of the queries at once
  // (dejaview/base/fork_join.h), with the same result. No array of keys between the two: the
  // keys and their listing are a large share of the classification's instructions.
  // With `pairs`, pairs(i, k) makes the keys of queries i and i + 1 at once (k[0..2], k[3..5]) and
  // returns their validity as bits 0 and 1: keys made two at a time (SIMD) where the caller can.
  struct NoPairs {
    unsigned operator()(size_t, int32_t*) const { return 0; }
  };
  template <typename Key, typename Pairs = NoPairs>
  Queries SortBy(size_t n, int nb, int parts, Key&& key, Pairs&& pairs = Pairs()) const {
    Queries q;
    if (packed_.empty()) return q;
    if (nb > max_nb_) std::abort();       // a caller's bug: the packing has no room for it
    const int margin = 2 * max_nb_ - nb;  // from the grown box in to nb around the items' box
    // Every query written, and the count moved on by whether it is kept: which are is the data's,
    // and a branch on it mispredicted.
    q.packed.resize(n);
    q.index.resize(n);
    parts = int(std::max<size_t>(1, std::min<size_t>(size_t(std::max(parts, 1)), n / kMinRun)));
    std::vector<size_t> kept(static_cast<size_t>(parts));
    // Within [lo_ + margin, hi_ - margin] per axis as one unsigned compare (the box spans at
    // least 4 max_nb >= 2 margin), and packed as Pack does, from locals: the stores below may
    // alias the members (uint32_t and int32_t), which were loaded again for every query.
    uint32_t from[3], span[3];
    int64_t lo[3];
    for (int a = 0; a < 3; ++a) {
      from[a] = uint32_t(lo_[a] + margin);
      span[a] = uint32_t(hi_[a] - lo_[a] - 2 * margin);
      lo[a] = lo_[a];
    }
    const int shift_x = bits_[1] + bits_[2], shift_y = bits_[2];
    ForkJoin(parts, [&](int r) {
      const size_t begin = n * size_t(r) / size_t(parts), end = n * size_t(r + 1) / size_t(parts);
      size_t out = begin;
      auto list = [&](size_t i, const int32_t* k, bool keep) {
        for (int a = 0; a < 3; ++a) keep &= uint32_t(k[a]) - from[a] <= span[a];
        q.packed[out] = uint64_t(k[0] - lo[0]) << shift_x | uint64_t(k[1] - lo[1]) << shift_y |
                        uint64_t(k[2] - lo[2]);
        q.index[out] = uint32_t(i);
        out += keep;
      };
      size_t i = begin;
      if constexpr (!std::is_same_v<std::decay_t<Pairs>, NoPairs>) {
        for (; i + 2 <= end; i += 2) {
          int32_t k[6];
          const unsigned valid = pairs(i, k);
          list(i, k, (valid & 1) != 0);
          list(i + 1, k + 3, (valid & 2) != 0);
        }
      }
      for (; i < end; ++i) {
        int32_t k[3];
        const bool valid = key(i, k);
        list(i, k, valid);
      }
      kept[size_t(r)] = out - begin;
    });
    size_t count = kept[0];
    for (int r = 1; r < parts; ++r) {
      const size_t begin = n * size_t(r) / size_t(parts);
      std::copy_n(q.packed.begin() + ptrdiff_t(begin), kept[size_t(r)],
                  q.packed.begin() + ptrdiff_t(count));
      std::copy_n(q.index.begin() + ptrdiff_t(begin), kept[size_t(r)],
                  q.index.begin() + ptrdiff_t(count));
      count += kept[size_t(r)];
    }
    q.packed.resize(count);
    q.index.resize(count);
    RadixSort(bits_[0] + bits_[1] + bits_[2], &q.packed, &q.index);
    return q;
  }

  // Calls visit(i, items) for each query that Sort lists, in key order, with the items within nb
  // voxels per axis of its voxel (gathered once per distinct voxel; Items).
  template <typename Visit>
  void ForEachQuery(const std::vector<int32_t>& keys, const std::vector<uint8_t>& valid, int nb,
                    Visit&& visit) const {
    ForEachQueryInRuns(keys, valid, nb, 1,
                       [&](int, uint32_t i, const Items& items) { visit(i, items); });
  }

  // The same with the sorted queries cut into `runs` runs of about equal length, each passed on
  // a thread of its own (dejaview/base/fork_join.h): visit(r, i, items) is told its run r, so a
  // caller can keep what runs share apart and merge it after. Which run a query falls in depends
  // on the queries and `runs` alone, never on the threads' timing.
  template <typename Visit>
  void ForEachQueryInRuns(const std::vector<int32_t>& keys, const std::vector<uint8_t>& valid,
                          int nb, int runs, Visit&& visit) const {
    ForEachVoxelInRuns(keys, valid, nb, runs,
                       [&](int r, const uint32_t* queries, size_t count, const Items& items) {
                         for (size_t k = 0; k < count; ++k) visit(r, queries[k], items);
                       });
  }

  // The same, once per distinct voxel of a run: visit(r, queries, count, items) with that voxel's
  // `count` queries of run r (indices, in the order ForEachQueryInRuns visits them), so that a
  // caller can lay out what the items share once for all of them. ahead(i) is told each query i
  // kAhead queries before its visit, for the caller to prefetch what it will read of it: the
  // queries come in key order, which is no order in the caller's arrays.
  template <typename Visit, typename Ahead>
  void ForEachVoxelInRuns(const std::vector<int32_t>& keys, const std::vector<uint8_t>& valid,
                          int nb, int runs, Visit&& visit, Ahead&& ahead) const {
    ForEachVoxelInRuns(Sort(keys, valid, nb), nb, runs, visit, ahead);
  }
  // The same over queries Sort or SortBy listed for this nb.
  template <typename Visit, typename Ahead>
  void ForEachVoxelInRuns(const Queries& q, int nb, int runs, Visit&& visit, Ahead&& ahead) const {
    const size_t n = q.index.size();
    runs = int(std::max<size_t>(1, std::min<size_t>(size_t(std::max(runs, 1)), n / kMinRun)));
    // Queries at least a quarter as many as the items are dense (the classification's: about
    // one a voxel); fewer are sparse (registration's, a subsample), and a pass leaps between
    // them (Pass).
    const bool dense = 4 * n >= packed_.size();
    ForkJoin(runs, [&](int r) {
      Pass pass(*this, nb, dense);
      const size_t begin = n * size_t(r) / size_t(runs), end = n * size_t(r + 1) / size_t(runs);
      for (size_t m = begin, next = begin; m < end; m = next) {
        while (++next < end && q.packed[next] == q.packed[m]) {
        }
        for (size_t k = m + kAhead; k < std::min(next + kAhead, end); ++k) ahead(q.index[k]);
        visit(r, &q.index[m], next - m, pass.Gather(q.packed[m]));
      }
    });
  }
  template <typename Visit>
  void ForEachVoxelInRuns(const std::vector<int32_t>& keys, const std::vector<uint8_t>& valid,
                          int nb, int runs, Visit&& visit) const {
    ForEachVoxelInRuns(keys, valid, nb, runs, visit, [](uint32_t) {});
  }
  static constexpr size_t kAhead = 16;

  // The items of one column (dx, dy) around a query's voxel: its voxels z - nb .. z + nb, in
  // place in the grid (items[0, count)).
  struct Run {
    int dx, dy;
    const uint32_t* items;
    size_t count;
  };
  // ForEachQuery on one thread, with the items around each query as a run per column, (dx, dy)
  // order, nothing copied: for callers that pass over whole columns (registration's coarsest
  // search, dozens of items a voxel, where copying them cost more than the distances).
  template <typename Visit>
  void ForEachQueryRuns(const std::vector<int32_t>& keys, const std::vector<uint8_t>& valid, int nb,
                        Visit&& visit) const {
    const Queries q = Sort(keys, valid, nb);
    Pass pass(*this, nb);
    std::vector<Run> runs;
    for (size_t m = 0, next = 0; m < q.index.size(); m = next) {
      while (++next < q.index.size() && q.packed[next] == q.packed[m]) {
      }
      runs.clear();
      pass.Runs(q.packed[m], &runs);
      for (size_t k = m; k < next; ++k) visit(q.index[k], runs);
    }
  }

  // Runs shorter than this are not worth a thread: starting and joining one costs about what
  // registration's searches (1-2 k queries) take.
  static constexpr size_t kMinRun = 4096;

  // One pass over sorted queries, gathering nb <= max_nb voxels per axis around each.
  class Pass {
   public:
    // dense: the queries lie close together (SortedGrid::ForEachVoxelInRuns); the items are the
    // same either way, only how the cursors move on differs.
    Pass(const SortedGrid& grid, int nb, bool dense = false);
    // The items in the (2 nb + 1)^3 voxels around the query key `packed`, which is not less than
    // the previous one of this pass. Gathered in place, not appended to a caller's list: a copy
    // would be a call a voxel, and the classification visits tens of thousands a frame.
    Items Gather(uint64_t packed);
    // The same, appended to *out.
    void Gather(uint64_t packed, std::vector<int32_t>* out) {
      const Items items = Gather(packed);
      out->insert(out->end(), items.begin(), items.end());
    }
    // The same items as runs, one a column (ForEachQueryRuns).
    void Runs(uint64_t packed, std::vector<Run>* out);

   private:
    // column(dx, dy, begin, end) for each column around the query, in (dx, dy) order, with
    // [begin, end) the positions in the grid's arrays of its voxels z - nb .. z + nb; moves the
    // pass's cursors on. Runs and Gather's general case both walk the columns this way.
    template <typename Column>
    void Columns(uint64_t packed, Column&& column);

    const SortedGrid& g_;
    const int nb_;
    const bool dense_;
    // What one step in x and in y adds to a packed key (no carry: SortedGrid's box has room).
    const int64_t step_x_, step_y_;
    std::vector<size_t> cursor_;    // per column (dx, dy)
    std::vector<int32_t> scratch_;  // Gather's
  };

 private:
  int max_nb_;
  bool distinct_ = true;  // no two items share a voxel (a map's voxels, or per_cell 1)
  int32_t lo_[3] = {0, 0, 0}, hi_[3] = {-1, -1, -1};  // the items' box, grown by 2 max_nb
  int bits_[3] = {0, 0, 0};
  std::vector<uint64_t> packed_;  // sorted
  std::vector<uint32_t> item_;

  uint64_t Pack(const int32_t k[3]) const {
    return uint64_t(int64_t(k[0]) - lo_[0]) << (bits_[1] + bits_[2]) |
           uint64_t(int64_t(k[1]) - lo_[1]) << bits_[2] | uint64_t(int64_t(k[2]) - lo_[2]);
  }
};

}  // namespace dv::codec
