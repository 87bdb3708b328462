// The CPU variants (cpu/kernels.h): each agrees with the scalar one bit for bit.
#include "codec_test_util.h"

namespace dv::codec {
namespace {

// The CPU projects four voxels at a time with AVX2 where it can; a frame must decode alike where
// it cannot, so the two loops must agree on every bit: voxels around the sensor in every
// direction, at its own position and on the axes (atan2's 0 / 0 and its ties |x| = |y|), and far
// above and below the grid; counts that leave every tail length.
TEST(Codec, ProjectionAvx2MatchesScalar) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2: only the scalar loop runs here";
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> key(-2000, 2000), edge(-3, 3), q(0, 255);
  const double res = 0.1;
  const kernels::AngularGrid g{1024, 80, -0.45, 0.11};
  for (int trial = 0; trial < 40; ++trial) {
    const Eigen::Vector3d axis = Eigen::Vector3d::Random().normalized();
    const Eigen::Matrix3d R = trial % 4 == 0
                                  ? Eigen::Matrix3d::Identity()
                                  : Eigen::AngleAxisd(0.3 * trial, axis).toRotationMatrix();
    // Every fourth trial the sensor sits on the representative of key 0 at q = 127.
    const double at = (0 + (127 + 0.5) / 256.0) * res;
    const Eigen::Vector3d t =
        trial % 4 == 0 ? Eigen::Vector3d(at, at, at) : Eigen::Vector3d(12.3 * trial, -4.1, 1.7);
    const kernels::Rigid T = RigidOf(R, t);
    std::vector<maps::MapVoxel> v(1000 + size_t(trial % 4));
    for (size_t i = 0; i < v.size(); ++i) {
      const bool near = i % 3 == 0;  // on or next to the sensor's axes
      for (int a = 0; a < 3; ++a) {
        v[i].key[a] = near ? edge(rng) : key(rng);
        v[i].q[a] = uint8_t(near ? 127 : q(rng));
      }
    }
    std::vector<float> sensor[2];
    std::vector<double> range[2];
    std::vector<int32_t> cell[2];
    for (int simd = 0; simd < 2; ++simd) {
      sensor[simd].assign(3 * v.size(), 0);
      range[simd].assign(v.size(), 0);
      cell[simd].assign(v.size(), 0);
      const cpu::Kernels& variant = simd == 1 ? *cpu::Avx2() : cpu::Scalar();
      variant.project(v.data(), v.size(), res, T, g, sensor[simd].data(), range[simd].data(),
                      cell[simd].data());
    }
    for (size_t i = 0; i < v.size(); ++i) {
      for (int a = 0; a < 3; ++a) {
        ASSERT_EQ(std::memcmp(&sensor[0][3 * i + a], &sensor[1][3 * i + a], sizeof(float)), 0)
            << "trial " << trial << " voxel " << i << " axis " << a;
      }
      ASSERT_EQ(std::memcmp(&range[0][i], &range[1][i], sizeof(double)), 0)
          << "trial " << trial << " voxel " << i;
      ASSERT_EQ(cell[0][i], cell[1][i]) << "trial " << trial << " voxel " << i;
    }
  }
}

// The CPU variants' loops that no other test compares one by one (cpu/kernels.h): the ring
// states' horizontal ranges, the fill's bins, registration's cell keys and the classification's
// key sort give the scalar variant's bits with every variant this CPU runs (x86-64 builds
// compile the scalar one too, the only one on arm64).
TEST(Codec, CpuVariantsMatchTheScalarOne) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> coord(-90, 90), step(-0.2f, 0.2f);
  Candidates cand;
  cand.resolution_m = 0.1;
  std::vector<SelectedPair> pairs;
  // Pairs of candidates a step apart, some within kFillPairFactor resolutions, some beyond.
  for (uint32_t i = 0; i < 3001; ++i) {
    const Eigen::Vector3f p(coord(rng), coord(rng), coord(rng) / 10);
    cand.sensor.push_back(p);
    cand.sensor.push_back(p + Eigen::Vector3f(step(rng), step(rng), step(rng)));
    pairs.emplace_back(2 * i + 1, 2 * i, uint8_t(i % kCausalOffsets));
  }
  const std::vector<Eigen::Vector3f>& pts = cand.sensor;
  std::vector<int32_t> keys;
  for (size_t i = 0; i < pts.size(); i += 3) {
    for (int a = 0; a < 3; ++a) keys.push_back(int32_t(std::floor(pts[i][a] / 0.3)));
  }
  const SortedGrid grid(keys, 2, 0);
  const kernels::Rigid T = RigidOf(
      Eigen::AngleAxisd(0.3, Eigen::Vector3d::UnitZ()).toRotationMatrix(), {1.5, -2.5, 0.25});
  const cpu::Kernels& scalar = cpu::Scalar();
  std::vector<float> want_h(pts.size());
  scalar.horizontal_ranges(pts.data(), pts.size(), want_h.data());
  std::vector<uint16_t> want_bins(pairs.size());
  scalar.fill_bins(cand, pairs.data(), pairs.size(), 0.0225f, want_bins.data());
  std::vector<uint64_t> want_keys(pts.size());
  scalar.cell_keys(pts.data(), pts.size(), 1 / 1.5, want_keys.data());
  for (const cpu::Kernels* variant : cpu::Variants()) {
    SCOPED_TRACE(variant->name);
    std::vector<float> h(pts.size());
    variant->horizontal_ranges(pts.data(), pts.size(), h.data());
    EXPECT_EQ(std::memcmp(h.data(), want_h.data(), h.size() * sizeof(float)), 0);
    std::vector<uint16_t> bins(pairs.size());
    variant->fill_bins(cand, pairs.data(), pairs.size(), 0.0225f, bins.data());
    EXPECT_EQ(bins, want_bins);
    std::vector<uint64_t> cell_keys(pts.size());
    variant->cell_keys(pts.data(), pts.size(), 1 / 1.5, cell_keys.data());
    EXPECT_EQ(cell_keys, want_keys);
    for (int parts : {1, 3}) {
      const SortedGrid::Queries want = scalar.sort_points(grid, pts, T, 0.3, 1, parts);
      const SortedGrid::Queries got = variant->sort_points(grid, pts, T, 0.3, 1, parts);
      EXPECT_EQ(got.packed, want.packed) << parts << " parts";
      EXPECT_EQ(got.index, want.index) << parts << " parts";
      EXPECT_GT(got.index.size(), pts.size() / 4);
    }
  }
  // Both sides of the pairs' limit occur, so the bins' comparison can fail either way.
  const auto apart = std::count(want_bins.begin(), want_bins.end(), uint16_t(kFillRangeBins));
  EXPECT_GT(apart, 0);
  EXPECT_LT(size_t(apart), pairs.size());
}

// The ring neighbours' state has an SSE2 variant on x86-64 and a portable one everywhere
// (cpu/kernels.h ring_state); a frame coded on one machine must decode on the other, so they must
// agree on every input: ranges that tie exactly or within float steps, absent neighbours,
// selected ones.
TEST(Codec, RingStateSse2MatchesScalar) {
  const cpu::Kernels* sse2 = cpu::Sse2();
  if (!sse2) GTEST_SKIP() << "no SSE2 on this target: only the portable version exists";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> range(0.5f, 120.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  constexpr int kCandidates = 4096;
  std::vector<float> storage(kCandidates + 1);
  storage[0] = HUGE_VALF;  // index -1: no neighbour
  float* h = storage.data() + 1;
  for (int i = 0; i < kCandidates; ++i) {
    const int kind = pick(rng);
    h[i] = kind == 0 && i > 0   ? std::fabs(h[i - 1])                          // an exact tie
           : kind == 1 && i > 0 ? std::nextafter(std::fabs(h[i - 1]), 200.0f)  // a near tie
                                : range(rng);
    if (pick(rng) < 4) h[i] = -h[i];  // selected
  }
  std::uniform_int_distribution<int> index(-1, kCandidates - 1);
  std::set<int> states;
  for (int trial = 0; trial < 200000; ++trial) {
    int32_t nb[cpu::kPaddedOffsets];
    const bool none = trial % 97 == 0;
    for (int k = 0; k < cpu::kPaddedOffsets; ++k) {
      nb[k] = k >= kCausalOffsets || none || pick(rng) < 3 ? -1 : index(rng);
    }
    const size_t i = size_t(index(rng) + 1) % kCandidates;
    const float hi = h[i];
    h[i] = std::fabs(hi);  // not coded yet
    const int scalar = cpu::Scalar().ring_state(h, nb, i);
    ASSERT_EQ(sse2->ring_state(h, nb, i), scalar) << "trial " << trial;
    h[i] = hi;
    states.insert(scalar);
  }
  // Every state that can occur did: 1 with no neighbour; with one, (nearest, nearest at the same
  // height, below) x selected among the 13 (0..3), which is 1..3 when any of the three is
  // selected and 2..3 when the two last are (they are two neighbours): 4 x 4 + 5 x 3 - 1 with the
  // nearest unselected, 9 x 3 - 1 with it selected.
  EXPECT_EQ(states.size(), 57u);
}

// Away from a tile's borders the selection coder takes the ring state from CausalNeighbours'
// planes of ranges (ring_state_planes), elsewhere from looked-up neighbours (ring_state): every
// variant's planes must give the portable state for the same neighbours, whatever the cells
// around them that are no causal neighbour hold (the SSE2 variant's loads read some).
TEST(Codec, RingStatePlanesMatchesScalar) {
  constexpr size_t kRow = maps::kTileVoxels, kCells = kRow * kRow + 1;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_real_distribution<float> range(0.5f, 120.0f);
  std::uniform_int_distribution<int> inside(1, int(kRow) - 2);
  std::vector<float> prev(kCells), cur(kCells);
  std::set<int> states;
  for (int trial = 0; trial < 200000; ++trial) {
    const float hi = range(rng);
    // Every cell some value, selected or not, absent (+infinity) or at the candidate's own range
    // (an exact tie) or a float step from it, so that what is read and not used would show.
    auto value = [&]() {
      const int kind = pick(rng);
      float v = kind < 3    ? HUGE_VALF
                : kind == 3 ? hi
                : kind == 4 ? std::nextafter(hi, 200.0f)
                            : range(rng);
      if (v != HUGE_VALF && pick(rng) < 4) v = -v;
      return v;
    };
    const size_t at = size_t(inside(rng)) * kRow + size_t(inside(rng));
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dz = -1; dz <= 2; ++dz) {  // z + 2: read with the others, not used
        const size_t cell = size_t(ptrdiff_t(at) + dy * ptrdiff_t(kRow) + dz);
        prev[cell] = value();
        cur[cell] = value();
      }
    }
    // The same neighbours as candidates 0..12 of an array of ranges, candidate 13 the one coded.
    std::vector<float> storage(kCausalOffsets + 2);
    storage[0] = HUGE_VALF;
    float* h = storage.data() + 1;
    int32_t nb[cpu::kPaddedOffsets];
    for (int k = 0; k < cpu::kPaddedOffsets; ++k) nb[k] = -1;
    const bool none = trial % 97 == 0;  // now and then no neighbour at all
    for (int k = 0; k < kCausalOffsets; ++k) {
      const int8_t* o = kCausalOffset[k];
      float& v = (o[0] < 0 ? prev : cur)[size_t(ptrdiff_t(at) + o[1] * ptrdiff_t(kRow) + o[2])];
      if (none) v = HUGE_VALF;
      h[k] = v;
      if (v != HUGE_VALF) nb[k] = k;
    }
    h[kCausalOffsets] = hi;
    const int scalar = cpu::Scalar().ring_state(h, nb, kCausalOffsets);
    unsigned want = 0;
    for (int k = 0; k < kCausalOffsets; ++k) {
      ASSERT_EQ(cpu::RingOffset(cpu::RingLane(k)), k);
      want |= unsigned(std::signbit(h[k])) << cpu::RingLane(k);
    }
    for (const cpu::Kernels* variant : cpu::Variants()) {
      unsigned selected = 0;
      ASSERT_EQ(variant->ring_state_planes(prev.data() + at, cur.data() + at, hi, &selected),
                scalar)
          << variant->name << ", trial " << trial;
      ASSERT_EQ(selected, want) << variant->name << ", trial " << trial;
    }
    states.insert(scalar);
  }
  EXPECT_EQ(states.size(), 57u);  // every state that can occur (RingStateSse2MatchesScalar)
}

}  // namespace
}  // namespace dv::codec
