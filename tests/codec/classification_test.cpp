// The encoder's classification (hot_paths.h ClassifyPoints): nearest, second and close marks, the
// gap test's near marks.
#include "codec_test_util.h"

namespace dv::codec {
namespace {

// The classification against brute force over every candidate: a point is explained when some
// representative is within the bound; one of its nearest ones is marked nearest, every one within
// the bound of any point within, every one within the selection radius close; nothing else is.
// At the bound of 0.35 m a point's neighbourhood (4 voxels per axis) lists more than 64
// candidates, which the CPU tests 64 at a time.
TEST_F(StreetMap, ClassificationMarksTheNearestAndTheCandidatesWithinTheRadii) {
  const Pose truth = test::StreetPose(2);
  const PointCloud full = test::StreetFrame(truth, {test::CarAt(4, 2)});
  std::vector<Eigen::Vector3f> pts;
  for (size_t i = 0; i < full.size(); i += 17) pts.push_back(full.xyz[i]);
  Candidates cand;
  ASSERT_TRUE(
      DeriveCandidates(Cpu(), map_.get(), truth.linear(), truth.translation(), 60, &cand).ok());
  const double res = map_->resolution_m();
  ASSERT_DOUBLE_EQ(res, 0.1);
  ASSERT_GT(cand.voxels.size(), 1000u);
  for (const double bound : {0.1 - 1e-4, 0.35}) {
    for (double factor : {0.0, 0.6, 1.0}) {
      SCOPED_TRACE("bound " + std::to_string(bound));
      const double select = factor * bound;
      std::vector<uint8_t> explained;
      CandidateMarks marks;
      const int nb = int(std::ceil(bound / res));
      const SortedGrid grid(VoxelKeys(cand.voxels), nb, 0);
      ASSERT_TRUE(Cpu()
                      .ClassifyPoints({&pts, RigidOf(truth.linear(), truth.translation()),
                                       &cand.sensor, &grid, nullptr, res, nb},
                                      {bound * bound, select * select}, {&explained, &marks})
                      .ok());
      const size_t n = cand.voxels.size();
      const XSweep sweep(cand.sensor);
      std::vector<uint8_t> close(n, 0), nearest(n, 0);
      size_t n_explained = 0, n_close = 0, n_second = 0;
      for (size_t i = 0; i < pts.size(); ++i) {
        const Eigen::Vector3d p = pts[i].cast<double>();
        double best = bound * bound;
        std::vector<size_t> at_best;
        sweep.ForNear(p, bound, [&](size_t j) {
          const double d2 = (cand.sensor[j].cast<double>() - p).squaredNorm();
          if (d2 <= select * select) close[j] = 1;
          if (d2 < best) at_best.clear(), best = d2;
          if (d2 <= best) at_best.push_back(j);
        });
        ASSERT_EQ(explained[i], at_best.empty() ? 0 : 1) << "point " << i << " factor " << factor;
        n_explained += explained[i];
        if (at_best.empty()) {
          EXPECT_EQ(marks.point_nearest[i], -1);
          EXPECT_EQ(marks.point_second[i], -1);
          continue;
        }
        // Ties go to the first in the kernel's look-up order; one of the nearest is marked.
        EXPECT_TRUE(
            std::any_of(at_best.begin(), at_best.end(), [&](size_t j) { return marks.nearest[j]; }))
            << "point " << i << " factor " << factor;
        for (size_t j : at_best) nearest[j] = 1;
        // The point's own nearest, and the nearest of the others within the bound.
        const int32_t own = marks.point_nearest[i], second = marks.point_second[i];
        ASSERT_GE(own, 0);
        EXPECT_TRUE(std::count(at_best.begin(), at_best.end(), size_t(own)));
        double second_best = bound * bound;
        bool any_other = false;
        sweep.ForNear(p, bound, [&](size_t j) {
          if (int32_t(j) == own) return;
          const double d2 = (cand.sensor[j].cast<double>() - p).squaredNorm();
          if (d2 <= bound * bound) any_other = true, second_best = std::min(second_best, d2);
        });
        ASSERT_EQ(second >= 0, any_other) << "point " << i;
        if (second >= 0) {
          EXPECT_NE(second, own);
          EXPECT_EQ((cand.sensor[size_t(second)].cast<double>() - p).squaredNorm(), second_best);
        }
        n_second += second >= 0;
      }
      for (size_t j = 0; j < n; ++j) {
        EXPECT_EQ(marks.close[j], close[j]) << "candidate " << j << " factor " << factor;
        if (marks.nearest[j]) {
          EXPECT_TRUE(nearest[j]) << "candidate " << j << " factor " << factor;
        }
        n_close += close[j];
      }
      EXPECT_GT(n_explained, pts.size() * 8 / 10);
      EXPECT_GT(n_second, 0u);
      EXPECT_EQ(n_close > 0, factor > 0) << factor;
    }
  }
}

// Split over threads, the classification and the first gap test mark exactly what one thread
// marks: the candidates runs share are ORed, each point is written by its own run.
TEST_F(StreetMap, ClassificationOnThreadsMarksWhatOneThreadMarks) {
  const Pose truth = test::StreetPose(2);
  const PointCloud frame = test::StreetFrame(truth, {test::CarAt(4, 2)});
  ASSERT_GT(frame.size(), 3 * SortedGrid::kMinRun) << "too few points to split into runs";
  Candidates cand;
  ASSERT_TRUE(
      DeriveCandidates(Cpu(), map_.get(), truth.linear(), truth.translation(), 60, &cand).ok());
  const double res = map_->resolution_m(), bound = 0.1 - 1e-4, select = 0.6 * bound;
  const SortedGrid grid(VoxelKeys(cand.voxels), 2, 0);
  const kernels::Rigid T = RigidOf(truth.linear(), truth.translation());
  std::vector<uint8_t> explained[2], near[2];
  CandidateMarks marks[2];
  const int threads[2] = {1, 3};
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(
        Cpu()
            .ClassifyPoints({&frame.xyz, T, &cand.sensor, &grid, nullptr, res, 1, threads[k]},
                            {bound * bound, select * select}, {&explained[k], &marks[k]})
            .ok());
    // The gap test on every point, at twice the bound: two voxels around.
    ASSERT_TRUE(
        Cpu()
            .MarkNearCandidates({&frame.xyz, T, &cand.sensor, &grid, nullptr, res, 2, threads[k]},
                                4 * bound * bound, &near[k])
            .ok());
  }
  EXPECT_EQ(explained[0], explained[1]);
  EXPECT_EQ(marks[0].nearest, marks[1].nearest);
  EXPECT_EQ(marks[0].close, marks[1].close);
  EXPECT_EQ(marks[0].point_nearest, marks[1].point_nearest);
  EXPECT_EQ(marks[0].point_second, marks[1].point_second);
  EXPECT_EQ(near[0], near[1]);
  const size_t n_explained = size_t(std::count(explained[0].begin(), explained[0].end(), 1));
  EXPECT_GT(n_explained, frame.size() / 2);
  EXPECT_LT(n_explained, frame.size()) << "the car is not explained";
  EXPECT_GT(std::count(near[0].begin(), near[0].end(), 1),
            std::count(near[0].begin(), near[0].end(), 0));
}

// The classification's near marks end the first gap test for the points they mark: every one is
// a point the test's own search marks, and the test given them marks what it marks without them,
// on the unexplained points as the encoder gives them, with one thread and with three.
TEST_F(StreetMap, ClassificationNearMarksEndTheFirstGapTestAsItsSearchWould) {
  const Pose truth = test::StreetPose(2);
  const PointCloud frame = test::StreetFrame(truth, {test::CarAt(4, 2)});
  Candidates cand;
  ASSERT_TRUE(
      DeriveCandidates(Cpu(), map_.get(), truth.linear(), truth.translation(), 60, &cand).ok());
  const double res = map_->resolution_m(), bound = 0.1 - 1e-4, select = 0.6 * bound;
  const double gap2 = 4 * bound * bound;
  const SortedGrid grid(VoxelKeys(cand.voxels), 2, 0);
  const kernels::Rigid T = RigidOf(truth.linear(), truth.translation());
  for (int threads : {1, 3}) {
    std::vector<uint8_t> explained, known;
    CandidateMarks marks;
    ASSERT_TRUE(Cpu()
                    .ClassifyPoints({&frame.xyz, T, &cand.sensor, &grid, nullptr, res, 1, threads},
                                    {bound * bound, select * select, gap2},
                                    {&explained, &marks, &known})
                    .ok());
    ASSERT_EQ(known.size(), frame.size());
    std::vector<Eigen::Vector3f> unexplained;
    std::vector<uint8_t> unexplained_known;
    for (size_t i = 0; i < frame.size(); ++i) {
      if (explained[i]) {
        EXPECT_EQ(known[i], 0) << "an explained point is no gap point: " << i;
        continue;
      }
      unexplained.push_back(frame.xyz[i]);
      unexplained_known.push_back(known[i]);
    }
    std::vector<uint8_t> searched, given;
    const CandidateSearch search{&unexplained, T, &cand.sensor, &grid, nullptr, res, 2, threads};
    ASSERT_TRUE(Cpu().MarkNearCandidates(search, gap2, &searched).ok());
    ASSERT_TRUE(Cpu().MarkNearCandidates(search, gap2, &given, &unexplained_known).ok());
    EXPECT_EQ(given, searched) << threads << " threads";
    size_t n_known = 0, n_searched = 0;
    for (size_t u = 0; u < unexplained.size(); ++u) {
      if (unexplained_known[u]) {
        EXPECT_EQ(searched[u], 1) << "point " << u;
      }
      n_known += unexplained_known[u];
      n_searched += searched[u];
    }
    // The marks end the test for some of its points and leave others to the search.
    EXPECT_GT(n_known, 0u);
    EXPECT_LE(n_known, n_searched);
    EXPECT_GT(unexplained.size(), n_known);
  }
  std::vector<uint8_t> near;
  const std::vector<uint8_t> short_known(3, 1);
  EXPECT_EQ(Cpu()
                .MarkNearCandidates({&frame.xyz, T, &cand.sensor, &grid, nullptr, res, 2}, gap2,
                                    &near, &short_known)
                .message(),
            "near candidates: 3 known marks for " + std::to_string(frame.size()) + " points");
}

// KeepNearestWithin (the CPU classification's masks) keeps the nearest and second that
// KeepNearest keeps, step by step, over sequences of candidates within the bound with many equal
// distances (a third of them the bound itself) and an exact zero.
// The CPU classification's nearest and second of each point, its explained points and its marks
// against kernels::KeepNearest over the point's neighbourhood in (dx, dy, dz) order: on a lattice
// of candidates at voxel centres (1/8 m voxels: exact in binary), probed at centres, face and edge
// midpoints and corners, where distances tie exactly, and at random points; with the bound
// within one voxel (nb 1) and two (nb 2, up to 125 candidates a point); with the AVX2 path (on a
// CPU that has it: up to 64 candidates a voxel) and without (AllowAvx2), and with the scalar
// variant (cpu/scalar.cpp, the only one on arm64).
TEST(Codec, ClassificationKeepsTheNearestAndSecondOfANeighbourLoop) {
  const double res = 0.125;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> coin(0, 9);
  std::vector<maps::MapVoxel> voxels;
  std::vector<Eigen::Vector3f> sensor;
  std::map<std::array<int32_t, 3>, int32_t> at;
  for (int32_t x = 0; x < 12; ++x) {
    for (int32_t y = 0; y < 12; ++y) {
      for (int32_t z = 0; z < 6; ++z) {
        if (coin(rng) < 4) continue;
        maps::MapVoxel v{};
        v.key = maps::VoxelKey(x, y, z);
        at[{x, y, z}] = int32_t(voxels.size());
        voxels.push_back(v);
        sensor.emplace_back(float((x + 0.5) * res), float((y + 0.5) * res), float((z + 0.5) * res));
      }
    }
  }
  std::vector<Eigen::Vector3f> pts;
  std::uniform_int_distribution<int> half_xy(0, 24), half_z(0, 12);
  std::uniform_real_distribution<float> xy(0, 12 * res), zr(0, 6 * res);
  for (int i = 0; i < 3000; ++i) {
    pts.emplace_back(float(half_xy(rng) * res / 2), float(half_xy(rng) * res / 2),
                     float(half_z(rng) * res / 2));
  }
  for (int i = 0; i < 2000; ++i) pts.emplace_back(xy(rng), xy(rng), zr(rng));
  const kernels::Rigid T = RigidOf(Eigen::Matrix3d::Identity(), Eigen::Vector3d::Zero());
  struct Case {
    int nb;
    bool avx2, scalar;
  };
  for (const auto& [nb, avx2, scalar] :
       {Case{1, true, false}, Case{1, false, false}, Case{2, true, false}, Case{1, true, true},
        Case{2, true, true}}) {
    SCOPED_TRACE(scalar ? "scalar" : avx2 ? "best" : "without AVX2");
    const double bound = nb == 1 ? 0.99 * res : 1.5 * res, select = 0.6 * bound;
    const SortedGrid grid(VoxelKeys(voxels), nb, 0);
    std::vector<uint8_t> explained;
    CandidateMarks marks;
    AllowAvx2(avx2);
    const std::unique_ptr<HotPaths> hot =
        scalar ? MakeCpuHotPaths(cpu::Scalar()) : MakeCpuHotPaths();
    AllowAvx2(true);
    const Status classified =
        hot->ClassifyPoints({&pts, T, &sensor, &grid, nullptr, res, nb},
                            {bound * bound, select * select}, {&explained, &marks});
    ASSERT_TRUE(classified.ok());
    std::vector<uint8_t> nearest(voxels.size(), 0), close(voxels.size(), 0);
    size_t ties = 0, seconds = 0;
    for (size_t i = 0; i < pts.size(); ++i) {
      const double p[3] = {double(pts[i].x()), double(pts[i].y()), double(pts[i].z())};
      int32_t k[3];
      kernels::KeyOf(p, res, k);
      int32_t best = -1, second = -1;
      double best_d2 = bound * bound, second_d2 = bound * bound;
      for (int dx = -nb; dx <= nb; ++dx) {
        for (int dy = -nb; dy <= nb; ++dy) {
          for (int dz = -nb; dz <= nb; ++dz) {
            const auto it = at.find({k[0] + dx, k[1] + dy, k[2] + dz});
            if (it == at.end()) continue;
            const int32_t j = it->second;
            const double c[3] = {double(sensor[size_t(j)].x()), double(sensor[size_t(j)].y()),
                                 double(sensor[size_t(j)].z())};
            const double d2 = kernels::Dist2(c, p);
            close[size_t(j)] |= d2 <= select * select;
            kernels::KeepNearest(j, d2, bound * bound, &best, &best_d2, &second, &second_d2);
          }
        }
      }
      if (best >= 0) nearest[size_t(best)] = 1;
      ties += second >= 0 && best_d2 == second_d2;
      seconds += second >= 0;
      ASSERT_EQ(marks.point_nearest[i], best) << "nb " << nb << " avx2 " << avx2 << ", point " << i;
      ASSERT_EQ(marks.point_second[i], second) << "nb " << nb << ", point " << i;
      ASSERT_EQ(explained[i], uint8_t(best >= 0)) << "nb " << nb << ", point " << i;
    }
    EXPECT_EQ(marks.nearest, nearest) << "nb " << nb;
    EXPECT_EQ(marks.close, close) << "nb " << nb;
    // The lattice's points tie: at a corner, up to eight centres at the same distance.
    EXPECT_GT(ties, size_t(500)) << "nb " << nb;
    EXPECT_GT(seconds, pts.size() / 2) << "nb " << nb;
  }
}

// KeyFits' unsigned compares against the bounds they stand for: -lim < k < lim on each axis,
// lim = kPackBias - 2 - margin, at the bounds, beyond them and at the clamped keys of far points.
TEST(Codec, KeyFitsHoldsExactlyWithinTheKeyRange) {
  for (int32_t margin : {0, 1, 3}) {
    const int32_t lim = kernels::kPackBias - 2 - margin;
    const int32_t values[] = {0,        1,    -1,       lim - 1, lim,       lim + 1,
                              -lim + 1, -lim, -lim - 1, 1 << 30, -(1 << 30)};
    for (int32_t v : values) {
      for (int axis = 0; axis < 3; ++axis) {
        int32_t k[3] = {0, 0, 0};
        k[axis] = v;
        EXPECT_EQ(kernels::KeyFits(k, margin), v > -lim && v < lim)
            << "margin " << margin << ", axis " << axis << ", key " << v;
      }
    }
  }
}

#ifdef __SSE2__
// The classification's keys two at a time against kernels::NeighbourhoodKey one at a time, key
// and fit, under rotations and offsets, at voxel boundaries (exact multiples under the identity),
// at -0, far out of the key range, at +-infinity and NaN.
TEST(Codec, NeighbourhoodKeysTwoAtATimeAreNeighbourhoodKeys) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> angle(-3.2, 3.2), offset(-3000, 3000);
  std::uniform_real_distribution<float> coord(-150, 150);
  std::uniform_int_distribution<int> step(-400, 400), pick(0, 9);
  const float special[] = {0.0f,      -0.0f,      1e30f,
                           -1e30f,    4.0e9f,     -4.0e9f,
                           HUGE_VALF, -HUGE_VALF, std::numeric_limits<float>::quiet_NaN(),
                           1e-30f};
  size_t checked = 0, fits = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const bool identity = trial % 4 == 0;
    const Eigen::Matrix3d R = identity
                                  ? Eigen::Matrix3d::Identity()
                                  : (Eigen::AngleAxisd(angle(rng), Eigen::Vector3d::UnitZ()) *
                                     Eigen::AngleAxisd(angle(rng) / 8, Eigen::Vector3d::UnitY()) *
                                     Eigen::AngleAxisd(angle(rng) / 8, Eigen::Vector3d::UnitX()))
                                        .toRotationMatrix();
    const Eigen::Vector3d t =
        identity ? Eigen::Vector3d::Zero() : Eigen::Vector3d(offset(rng), offset(rng), 0);
    const kernels::Rigid T = RigidOf(R, t);
    const double voxel_m = (trial % 3 == 0) ? 0.125 : (trial % 3 == 1) ? 0.12 : 0.3;
    const int32_t nb = 1 + trial % 2;
    auto value = [&]() {
      const int p = pick(rng);
      if (p == 0) return special[size_t(step(rng) & 0x7fff) % 10];
      if (p < 4) return float(step(rng) * voxel_m);  // a voxel boundary under the identity
      return coord(rng);
    };
    for (int i = 0; i < 500; ++i) {
      const Eigen::Vector3f a(value(), value(), value()), b(value(), value(), value());
      int32_t k[6];
      const unsigned got = cpu::sse2::NeighbourhoodKeys2(T, a, b, voxel_m, nb, k);
      for (int side = 0; side < 2; ++side) {
        const Eigen::Vector3f& q = side ? b : a;
        const double p[3] = {double(q.x()), double(q.y()), double(q.z())};
        int32_t want[3];
        const bool fit = kernels::NeighbourhoodKey(T, p, voxel_m, nb, want);
        ASSERT_EQ(((got >> side) & 1) != 0, fit) << trial << " " << i << " " << side;
        for (int ax = 0; ax < 3; ++ax) {
          ASSERT_EQ(k[3 * side + ax], want[ax]) << trial << " " << i << " " << side << " " << ax;
        }
        ++checked;
        fits += fit;
      }
    }
  }
  EXPECT_EQ(checked, size_t(40 * 500 * 2));
  EXPECT_GT(fits, checked / 2);
  EXPECT_LT(fits, checked);
}

#endif

TEST(Codec, KeepNearestWithinMatchesKeepNearest) {
  std::mt19937 rng(11);
  const double bound2 = 0.0081;
  const double values[] = {0.0, 0.001, 0.002, 0.0035, 0.0035, 0.005, bound2, bound2, bound2};
  std::uniform_int_distribution<int> pick(0, 8), length(1, 24);
  for (int trial = 0; trial < 20000; ++trial) {
    int32_t best = -1, second = -1, best_m = -1, second_m = -1;
    double best_d2 = bound2, second_d2 = bound2;
    uint64_t best_bits = 0, second_bits = 0;
    std::memcpy(&best_bits, &bound2, 8);
    second_bits = best_bits;
    const int n = length(rng);
    for (int32_t j = 0; j < n; ++j) {
      const double d2 = values[pick(rng)];
      uint64_t d2_bits = 0;
      std::memcpy(&d2_bits, &d2, 8);
      kernels::KeepNearest(j, d2, bound2, &best, &best_d2, &second, &second_d2);
      kernels::KeepNearestWithin(j, d2_bits, &best_m, &best_bits, &second_m, &second_bits);
      ASSERT_EQ(best_m, best) << trial << " " << j;
      ASSERT_EQ(second_m, second) << trial << " " << j;
      double b = 0, s2 = 0;
      std::memcpy(&b, &best_bits, 8);
      std::memcpy(&s2, &second_bits, 8);
      ASSERT_EQ(b, best_d2) << trial << " " << j;
      ASSERT_EQ(s2, second_d2) << trial << " " << j;
    }
  }
}

}  // namespace
}  // namespace dv::codec
