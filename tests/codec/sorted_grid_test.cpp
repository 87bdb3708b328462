// SortedGrid against the loop it replaces: for each query voxel, the items of the voxels around
// it in (dx, dy, dz) order, item order within a voxel, at most per_cell per voxel.
#include "sorted_grid.h"

#include "hot_paths.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

namespace dv::codec {
namespace {

using Key = std::tuple<int32_t, int32_t, int32_t>;

TEST(SortedGrid, GathersWhatANeighbourLookUpLoopLists) {
  std::mt19937 rng(7);
  // A grid serves every radius up to its max_nb: nb 1 is checked on a grid of max_nb 2 too.
  for (const auto& [max_nb, nb] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{2, 2}}) {
    // per_cell 1 leaves one item a voxel, which Gather counts without branches.
    for (int per_cell : {0, 1, 2}) {
      // A small box, so that voxels hold several items and neighbourhoods overlap; negative keys
      // and an axis with a single value exercise the packing's edges.
      std::uniform_int_distribution<int32_t> x(-40, -20), y(5, 30), z(3, 3), qx(-45, -15),
          qy(0, 35), qz(-2, 8);
      std::vector<int32_t> items;
      std::map<Key, std::vector<int32_t>> cells;  // in item order
      for (int32_t i = 0; i < 3000; ++i) {
        const Key k{x(rng), y(rng), i % 7 == 0 ? z(rng) + 1 : z(rng)};
        items.insert(items.end(), {std::get<0>(k), std::get<1>(k), std::get<2>(k)});
        std::vector<int32_t>& c = cells[k];
        if (per_cell == 0 || c.size() < size_t(per_cell)) c.push_back(i);
      }
      const SortedGrid grid(items, max_nb, per_cell);
      std::vector<int32_t> queries;
      std::vector<uint8_t> valid;
      for (int i = 0; i < 4000; ++i) {
        queries.insert(queries.end(), {qx(rng), qy(rng), qz(rng)});
        valid.push_back(i % 5 != 0);
      }
      const SortedGrid::Queries sorted = grid.Sort(queries, valid, nb);
      // A pass for dense queries moves its cursors on otherwise, to the same items.
      SortedGrid::Pass pass(grid, nb), dense(grid, nb, true);
      std::vector<uint8_t> listed(valid.size(), 0);
      size_t nonempty = 0;
      for (size_t m = 0; m < sorted.index.size(); ++m) {
        const uint32_t i = sorted.index[m];
        ASSERT_TRUE(valid[i]);
        if (m > 0) {
          ASSERT_LE(sorted.packed[m - 1], sorted.packed[m]);
        }
        listed[i] = 1;
        std::vector<int32_t> got, want;
        pass.Gather(sorted.packed[m], &got);
        for (int dx = -nb; dx <= nb; ++dx) {
          for (int dy = -nb; dy <= nb; ++dy) {
            for (int dz = -nb; dz <= nb; ++dz) {
              const auto it = cells.find(
                  {queries[3 * i] + dx, queries[3 * i + 1] + dy, queries[3 * i + 2] + dz});
              if (it != cells.end()) want.insert(want.end(), it->second.begin(), it->second.end());
            }
          }
        }
        ASSERT_EQ(got, want) << "query " << i << " nb " << nb << " of " << max_nb << " per_cell "
                             << per_cell;
        std::vector<int32_t> got_dense;
        dense.Gather(sorted.packed[m], &got_dense);
        ASSERT_EQ(got_dense, want) << "dense, query " << i;
        nonempty += !want.empty();
      }
      EXPECT_GT(nonempty, 400u);
      // A query left out is invalid or has no item within nb voxels per axis.
      for (size_t i = 0; i < valid.size(); ++i) {
        if (listed[i] || !valid[i]) continue;
        for (const auto& [k, c] : cells) {
          const bool near = std::abs(std::get<0>(k) - queries[3 * i]) <= nb &&
                            std::abs(std::get<1>(k) - queries[3 * i + 1]) <= nb &&
                            std::abs(std::get<2>(k) - queries[3 * i + 2]) <= nb;
          ASSERT_FALSE(near) << "query " << i << " was left out";
        }
      }
    }
  }
}

// A grid thinned by Keep lists, for every query it visits, what a grid of the kept items alone
// lists (renumbered), and visits every query that one does; the others it visits get no items.
TEST(SortedGrid, KeepListsWhatAGridOfTheKeptItemsLists) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> k(-30, 30), q(-36, 36);
  std::vector<int32_t> items, kept_items;
  std::vector<int32_t> to;
  for (int32_t i = 0; i < 4000; ++i) {
    const int32_t x = k(rng), y = k(rng), z = k(rng) / 4;
    items.insert(items.end(), {x, y, z});
    // Keep a slab (x >= 0), less one item in three: the kept box is smaller than the grid's.
    const bool keep = x >= 0 && i % 3 != 0;
    to.push_back(keep ? int32_t(kept_items.size() / 3) : -1);
    if (keep) kept_items.insert(kept_items.end(), {x, y, z});
  }
  for (int max_nb : {1, 2}) {
    SortedGrid thinned(items, max_nb, 0);
    thinned.Keep(to);
    const SortedGrid alone(kept_items, max_nb, 0);
    std::vector<int32_t> queries;
    for (int i = 0; i < 3000; ++i) queries.insert(queries.end(), {q(rng), q(rng), q(rng) / 4});
    const std::vector<uint8_t> valid(queries.size() / 3, 1);
    for (int nb = 1; nb <= max_nb; ++nb) {
      std::map<uint32_t, std::vector<int32_t>> a, b;
      thinned.ForEachQuery(queries, valid, nb, [&](uint32_t i, const SortedGrid::Items& got) {
        a[i].assign(got.begin(), got.end());
      });
      alone.ForEachQuery(queries, valid, nb, [&](uint32_t i, const SortedGrid::Items& got) {
        b[i].assign(got.begin(), got.end());
      });
      size_t nonempty = 0;
      for (const auto& [i, got] : b) {
        ASSERT_TRUE(a.count(i)) << "query " << i;
        ASSERT_EQ(a[i], got) << "query " << i << " nb " << nb << " of " << max_nb;
        nonempty += !got.empty();
      }
      for (const auto& [i, got] : a) {
        if (!b.count(i)) {
          ASSERT_TRUE(got.empty()) << "query " << i;
        }
      }
      EXPECT_GT(nonempty, 300u);
      EXPECT_GT(a.size(), b.size());  // the grid's larger box visits more, with nothing
    }
  }
}

TEST(SortedGrid, NoItemsListsNoQueries) {
  const SortedGrid grid({}, 1, 0);
  EXPECT_TRUE(grid.Sort({1, 2, 3}, {1}, 1).index.empty());
}

// Encode's first gap test (hot_paths.h) on the CPU, with each variant of its key sort
// (cpu/kernels.h): a point is marked exactly when some candidate lies within the bound, however
// the grid lists them.
TEST(MarkNearCandidates, MarksAPointExactlyWhenACandidateIsWithinTheBound) {
  std::mt19937 rng(11);
  const double voxel = 0.2;
  std::uniform_real_distribution<float> u(-3, 3);
  std::vector<Eigen::Vector3f> cand, pts;
  std::vector<int32_t> keys;
  for (int i = 0; i < 400; ++i) {
    cand.emplace_back(u(rng), u(rng), u(rng) / 4);
    for (int a = 0; a < 3; ++a) keys.push_back(int32_t(std::floor(cand.back()[a] / voxel)));
  }
  for (int i = 0; i < 3000; ++i) pts.emplace_back(u(rng), u(rng), u(rng) / 4);
  const kernels::Rigid identity{{1, 0, 0, 0, 1, 0, 0, 0, 1}, {0, 0, 0}};
  for (const cpu::Kernels* variant : cpu::Variants()) {
    SCOPED_TRACE(variant->name);
    const std::unique_ptr<HotPaths> hot = MakeCpuHotPaths(*variant);
    for (int nb : {1, 2}) {
      const double bound = nb * voxel - 1e-4;
      const SortedGrid grid(keys, nb, 0);
      std::vector<uint8_t> near;
      ASSERT_TRUE(hot->MarkNearCandidates({&pts, identity, &cand, &grid, nullptr, voxel, nb},
                                          bound * bound, &near)
                      .ok());
      ASSERT_EQ(near.size(), pts.size());
      size_t marked = 0;
      for (size_t i = 0; i < pts.size(); ++i) {
        bool want = false;
        for (const Eigen::Vector3f& c : cand) {
          want |= (c.cast<double>() - pts[i].cast<double>()).squaredNorm() <= bound * bound;
        }
        ASSERT_EQ(near[i], uint8_t(want)) << "nb " << nb << " point " << i;
        marked += want;
      }
      // Both outcomes occur, so the comparison can fail either way.
      EXPECT_GT(marked, pts.size() / 20) << "nb " << nb;
      EXPECT_LT(marked, pts.size() - pts.size() / 20) << "nb " << nb;
    }
  }
  std::vector<uint8_t> near;
  const SortedGrid small(keys, 1, 0);
  EXPECT_EQ(MakeCpuHotPaths()
                ->MarkNearCandidates({&pts, identity, &cand, &small, nullptr, voxel, 2}, 0.1, &near)
                .message(),
            "near candidates: the CPU needs a sorted grid of max_nb >= 2");
}

// Cut into runs on threads of their own, a pass visits every query once, with the items one pass
// lists for it, each run a contiguous stretch of the key order.
TEST(SortedGrid, RunsOnThreadsListWhatOnePassLists) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> k(-60, 60);
  std::vector<int32_t> items, queries;
  for (int i = 0; i < 20000; ++i) items.insert(items.end(), {k(rng), k(rng), k(rng) / 4});
  const size_t n = 5 * SortedGrid::kMinRun;
  for (size_t i = 0; i < n; ++i) queries.insert(queries.end(), {k(rng), k(rng), k(rng) / 4});
  std::vector<uint8_t> valid(n, 1);
  for (size_t i = 0; i < n; i += 7) valid[i] = 0;
  const SortedGrid grid(items, 1, 0);
  std::vector<std::vector<int32_t>> one(n);
  std::vector<int> once(n, 0);
  grid.ForEachQuery(queries, valid, 1, [&](uint32_t i, const SortedGrid::Items& got) {
    one[i].assign(got.begin(), got.end());
    ++once[i];
  });
  for (int runs : {2, 3, 64}) {
    std::vector<std::vector<int32_t>> split(n);
    std::vector<int> visits(n, 0), run_of(n, -1);
    grid.ForEachQueryInRuns(queries, valid, 1, runs,
                            [&](int r, uint32_t i, const SortedGrid::Items& got) {
                              split[i].assign(got.begin(), got.end());
                              ++visits[i];
                              run_of[i] = r;
                            });
    EXPECT_EQ(visits, once) << runs << " runs";
    EXPECT_EQ(split, one) << runs << " runs";
    // Runs follow the key order: no query of a later run sorts before one of an earlier run.
    const SortedGrid::Queries sorted = grid.Sort(queries, valid, 1);
    int last = 0;
    for (uint32_t i : sorted.index) {
      ASSERT_GE(run_of[i], last) << "query " << i;
      last = run_of[i];
    }
    // At most one run per kMinRun queries: 64 asked for, 4 or 5 given.
    EXPECT_EQ(last + 1, std::min<int>(runs, int(sorted.index.size() / SortedGrid::kMinRun)));
  }
}

// RadixSort sorts (key, index) pairs by key, stably: as std::stable_sort does, for short and long
// inputs (the four quarters it counts apart, some empty), keys of one to several digits, and keys
// that repeat (runs of equal digits, as a scan's neighbouring points give).
TEST(SortedGrid, RadixSortIsAStableSortByKey) {
  std::mt19937_64 rng(17);
  for (int bits : {5, 11, 12, 33, 40}) {
    for (size_t n :
         {size_t(0), size_t(1), size_t(3), size_t(4), size_t(5), size_t(1000), size_t(100003)}) {
      std::uniform_int_distribution<uint64_t> key(0, (uint64_t(1) << bits) - 1);
      std::vector<uint64_t> packed(n);
      std::vector<uint32_t> index(n);
      for (size_t i = 0; i < n; ++i) {
        // Runs of a repeated key now and then, and few distinct keys where bits are few.
        packed[i] = i > 0 && rng() % 3 == 0 ? packed[i - 1] : key(rng);
        index[i] = uint32_t(i);
      }
      std::vector<std::pair<uint64_t, uint32_t>> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = {packed[i], index[i]};
      std::stable_sort(want.begin(), want.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      RadixSort(bits, &packed, &index);
      ASSERT_EQ(packed.size(), n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(packed[i], want[i].first) << bits << " bits, n " << n << ", at " << i;
        ASSERT_EQ(index[i], want[i].second) << bits << " bits, n " << n << ", at " << i;
      }
    }
  }
}

// SortBy lists what Sort lists for the same keys, in parts on threads or not: the keys made as
// listed, the valid ones within nb of the items' box kept, in the same order (queries far out on
// every side, and invalid ones, left out).
TEST(SortedGrid, SortByListsWhatSortLists) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<int32_t> k(-70, 70), coin(0, 5);
  std::vector<int32_t> items, queries;
  for (int i = 0; i < 5000; ++i) items.insert(items.end(), {k(rng) / 2, k(rng) / 2, k(rng) / 8});
  const size_t n = 4 * SortedGrid::kMinRun + 17;
  std::vector<uint8_t> valid(n);
  for (size_t i = 0; i < n; ++i) {
    queries.insert(queries.end(), {k(rng), k(rng), k(rng) / 4});
    valid[i] = coin(rng) != 0;
  }
  for (int nb : {1, 2}) {
    const SortedGrid grid(items, 2, 0);
    const SortedGrid::Queries want = grid.Sort(queries, valid, nb);
    ASSERT_GT(want.index.size(), n / 20);  // some queries in, and
    ASSERT_LT(want.index.size(), n / 2);   // many out
    for (int parts : {1, 2, 3}) {
      const SortedGrid::Queries got = grid.SortBy(n, nb, parts, [&](size_t i, int32_t key[3]) {
        std::copy_n(&queries[3 * i], 3, key);
        return valid[i] != 0;
      });
      EXPECT_EQ(got.packed, want.packed) << "nb " << nb << ", " << parts << " parts";
      EXPECT_EQ(got.index, want.index) << "nb " << nb << ", " << parts << " parts";
      // With keys made two at a time: each query's key made once, by one way or the other, the
      // pairs for most (a part's odd last one alone), and the same list.
      std::vector<std::atomic<int>> made(n);
      std::atomic<size_t> by_pairs{0};
      const SortedGrid::Queries paired = grid.SortBy(
          n, nb, parts,
          [&](size_t i, int32_t key[3]) {
            ++made[i];
            std::copy_n(&queries[3 * i], 3, key);
            return valid[i] != 0;
          },
          [&](size_t i, int32_t key[6]) {
            ++made[i];
            ++made[i + 1];
            by_pairs += 2;
            std::copy_n(&queries[3 * i], 6, key);
            return unsigned(valid[i] != 0) | unsigned(valid[i + 1] != 0) << 1;
          });
      EXPECT_EQ(paired.packed, want.packed) << "nb " << nb << ", " << parts << " parts";
      EXPECT_EQ(paired.index, want.index) << "nb " << nb << ", " << parts << " parts";
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(made[i], 1) << i;
      EXPECT_GE(by_pairs, n - size_t(parts));
    }
  }
}

// Once a voxel: each visit holds the queries of one key, every query comes once and in the order
// ForEachQuery visits them, with its items; each is announced to `ahead` kAhead queries before its
// visit, and the last kAhead queries, announced or not, are visited all the same.
TEST(SortedGrid, VoxelPassesHoldTheQueriesOfOneKeyAndAnnounceThemAhead) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int32_t> k(-12, 12);
  std::vector<int32_t> items, queries;
  for (int i = 0; i < 3000; ++i) items.insert(items.end(), {k(rng), k(rng), k(rng) / 4});
  const size_t n = 20000;
  for (size_t i = 0; i < n; ++i) queries.insert(queries.end(), {k(rng), k(rng), k(rng) / 4});
  const std::vector<uint8_t> valid(n, 1);
  const SortedGrid grid(items, 1, 0);
  std::vector<uint32_t> order;
  std::vector<std::vector<int32_t>> one(n);
  grid.ForEachQuery(queries, valid, 1, [&](uint32_t i, const SortedGrid::Items& got) {
    order.push_back(i);
    one[i].assign(got.begin(), got.end());
  });
  ASSERT_EQ(order.size(), n);
  std::vector<uint32_t> visited, announced;
  std::vector<size_t> visited_when_announced;
  size_t voxels = 0;
  grid.ForEachVoxelInRuns(
      queries, valid, 1, 1,
      [&](int r, const uint32_t* q, size_t count, const SortedGrid::Items& got) {
        ASSERT_EQ(r, 0);
        ASSERT_GT(count, 0u);
        ++voxels;
        for (size_t c = 0; c < count; ++c) {
          EXPECT_TRUE(std::equal(&queries[3 * q[c]], &queries[3 * q[c]] + 3, &queries[3 * q[0]]))
              << "query " << q[c];
          EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), one[q[c]]) << "query " << q[c];
          visited.push_back(q[c]);
        }
      },
      [&](uint32_t i) {
        announced.push_back(i);
        visited_when_announced.push_back(visited.size());
      });
  EXPECT_EQ(visited, order);
  EXPECT_LT(voxels, n / 2) << "too few queries share a voxel to tell visits from queries";
  ASSERT_EQ(announced.size(), n - SortedGrid::kAhead);
  for (size_t a = 0; a < announced.size(); ++a) {
    ASSERT_EQ(announced[a], order[a + SortedGrid::kAhead]) << a;
    EXPECT_LE(visited_when_announced[a], a) << "announced after fewer than kAhead queries " << a;
  }
}

}  // namespace
}  // namespace dv::codec
