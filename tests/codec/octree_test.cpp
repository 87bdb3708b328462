// The octree sections (octree_coder.h) and the voxel hash.
#include "codec_test_util.h"

namespace dv::codec {
namespace {

TEST(VoxelHash, GrowsPastItsSizingHint) {
  VoxelHash h(4);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(h.Insert(PackKey(maps::VoxelKey(i % 97, i / 97, -i)), i), i);
    ASSERT_LE(2 * h.size(), h.slots());
  }
  EXPECT_EQ(h.size(), size_t(n));
  for (int i = 0; i < n; ++i) {
    const uint64_t key = PackKey(maps::VoxelKey(i % 97, i / 97, -i));
    ASSERT_EQ(h.Find(key), i);
    ASSERT_EQ(h.Insert(key, -7), i) << "an existing key keeps its value";
    ASSERT_EQ(h.Find(PackKey(maps::VoxelKey(i % 97, i / 97, i + 1))), -1);
  }
  EXPECT_EQ(h.size(), size_t(n));
}

// The octree round-trips the same cells with fresh models and with models that start from learnt
// states (as from a map's priors: the causal contexts on every level), the learnt start is
// smaller, and a stream decodes only with the model it was coded with.
TEST(Octree, FreshAndLearntModelsRoundTripAndDiffer) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-10, 10);
  std::vector<Eigen::Vector3f> pts;
  for (int i = 0; i < 30000; ++i) {
    const float x = u(rng), y = u(rng);
    pts.emplace_back(x, y, i % 3 == 0 ? u(rng) / 4 : 0.02f * x - 1.5f);
  }
  const std::vector<float> inten(pts.size(), 0.5f);
  std::vector<uint8_t> bytes[2];
  CellCloud encoded;
  std::vector<BitModel> learnt(kOctreeModels);
  for (int start = 0; start < 2; ++start) {
    OctreeModel model;
    if (start == 0) model.end = learnt.data();  // the fresh models' end states
    if (start == 1) model.start = learnt.data();
    CellCloud decoded;
    std::vector<uint8_t> in;
    ASSERT_TRUE(EncodeCells(pts, inten, 0.05, false, model, &bytes[start], &in, &encoded).ok());
    model.end = nullptr;
    ASSERT_TRUE(DecodeCells(bytes[start].data(), bytes[start].size(), nullptr, 0, 0.05, false,
                            model, pts.size(), &decoded)
                    .ok());
    EXPECT_EQ(decoded.centres, encoded.centres) << "start " << start;
    EXPECT_GT(encoded.centres.size(), 20000u);
  }
  EXPECT_LT(bytes[1].size(), bytes[0].size());
  CellCloud wrong;
  const Status s = DecodeCells(bytes[1].data(), bytes[1].size(), nullptr, 0, 0.05, false,
                               OctreeModel{}, pts.size(), &wrong);
  EXPECT_TRUE(!s.ok() || wrong.centres != encoded.centres) << "the other model decoded it";
}

// The encoder drops gap cells whose points a neighbouring cell's centre covers: every point must
// still have a decoded centre within the bound, the kept points are the input's in order with
// their intensities, and on scan-line-like chains some cells do go.
TEST(Octree, DropCoveredCellsKeepsEveryPointWithinTheBound) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1), along(0, 6);
  for (double T : {0.05, 0.1, 0.3}) {
    const double bound = T - 1e-4, step = 2 * bound / std::sqrt(3.0);
    std::vector<Eigen::Vector3f> pts;
    std::vector<float> inten;
    // Lines through the box at 1.5 cm spacing (scan rings) and scattered points.
    for (int line = 0; line < 20; ++line) {
      const Eigen::Vector3f o(u(rng), u(rng), u(rng) / 4),
          d = Eigen::Vector3f::Random().normalized();
      for (float t = 0; t < 2; t += 0.015f) pts.push_back(o + t * d);
    }
    for (int i = 0; i < 500; ++i) pts.emplace_back(along(rng) - 3, u(rng), u(rng));
    for (size_t i = 0; i < pts.size(); ++i) inten.push_back(float(i % 64) / 63);
    std::vector<Eigen::Vector3f> kept = pts;
    std::vector<float> kept_i = inten;
    DropCoveredCells(step, bound, &kept, &kept_i);
    ASSERT_EQ(kept.size(), kept_i.size());
    // A subsequence of the input, intensities alongside.
    size_t j = 0;
    for (size_t i = 0; i < pts.size() && j < kept.size(); ++i) {
      if (pts[i] == kept[j] && inten[i] == kept_i[j]) ++j;
    }
    EXPECT_EQ(j, kept.size()) << "T " << T;
    CellCloud all, left;
    std::vector<uint8_t> g, in;
    ASSERT_TRUE(EncodeCells(pts, inten, step, false, OctreeModel{}, &g, &in, &all).ok());
    ASSERT_TRUE(EncodeCells(kept, kept_i, step, false, OctreeModel{}, &g, &in, &left).ok());
    EXPECT_LT(left.centres.size(), all.centres.size() * 95 / 100) << "T " << T;
    EXPECT_GT(left.centres.size(), all.centres.size() / 3) << "T " << T;
    for (const Eigen::Vector3f& p : pts) {
      double best = 1e9;
      for (const Eigen::Vector3f& c : left.centres) {
        best = std::min(best, (c.cast<double>() - p.cast<double>()).squaredNorm());
      }
      ASSERT_LE(std::sqrt(best), bound) << "T " << T;
    }
  }
}

}  // namespace
}  // namespace dv::codec
