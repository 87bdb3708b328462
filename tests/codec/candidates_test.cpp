// The candidates both sides derive (candidates.h): the ball, the projection, the causal neighbours.
#include "codec_test_util.h"

namespace dv::codec {
namespace {

// Candidates taken from a wider ball that holds theirs are those read from the map, and kept maps
// each of the wider ball's voxels to its place among them; a ball it does not hold is read.
TEST_F(StreetMap, CandidatesWithinAWiderBallAreThoseReadFromTheMap) {
  const Pose wide_at = test::StreetPose(3);
  Candidates wide;
  ASSERT_TRUE(
      DeriveCandidates(Cpu(), map_.get(), wide_at.linear(), wide_at.translation(), 25, &wide, 0)
          .ok());
  for (double x : {4.0, 9.0}) {
    SCOPED_TRACE("x " + std::to_string(x));
    const Pose T = test::StreetPose(x);
    Candidates read, within;
    std::vector<int32_t> kept;
    ASSERT_TRUE(DeriveCandidates(Cpu(), map_.get(), T.linear(), T.translation(), 20, &read).ok());
    ASSERT_TRUE(DeriveCandidatesWithin(Cpu(), map_.get(), &wide, T.linear(), T.translation(), 20,
                                       &within, &kept)
                    .ok());
    ASSERT_GT(read.voxels.size(), 1000u);
    ASSERT_EQ(read.voxels.size(), within.voxels.size());
    for (size_t i = 0; i < read.voxels.size(); ++i) {
      ASSERT_EQ(read.voxels[i].key, within.voxels[i].key) << i;
      ASSERT_EQ(std::memcmp(&read.voxels[i], &within.voxels[i], sizeof(maps::MapVoxel)), 0) << i;
    }
    EXPECT_EQ(read.sensor, within.sensor);
    EXPECT_EQ(read.context, within.context);
    EXPECT_EQ(read.cell, within.cell);
    // 1 m on, the wide ball (25 m) holds the 20 m one; 6 m on it does not.
    if (x == 4.0) {
      ASSERT_EQ(kept.size(), wide.voxels.size());
      size_t in = 0;
      for (size_t i = 0; i < kept.size(); ++i) {
        if (kept[i] < 0) continue;
        ASSERT_EQ(wide.voxels[i].key, within.voxels[size_t(kept[i])].key);
        ++in;
      }
      EXPECT_EQ(in, within.voxels.size());
    } else {
      EXPECT_TRUE(kept.empty());
    }
  }
}

// The projection (kernels::Project, PortableAtan2) is written with selects and truncation, not
// branches and floor; the decoder's contexts depend on every bit of it, so it must agree exactly
// with the definition in docs/delta-format.md, written here the plain way, voxel by voxel.
double ReferenceAtan2(double y, double x) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  const double mx = ax > ay ? ax : ay;
  if (mx == 0) return 0;
  const double a = (ax > ay ? ay : ax) / mx;
  const double s = a * a;
  double r = ((((0.0208351 * s - 0.085133) * s + 0.180141) * s - 0.3302995) * s + 0.999866) * a;
  if (ay > ax) r = 1.57079632679489662 - r;
  if (x < 0) r = 3.14159265358979324 - r;
  return y < 0 ? -r : r;
}

TEST_F(StreetMap, ProjectionMatchesTheBranchyDefinitionBitForBit) {
  EXPECT_EQ(maps::PortableAtan2(0, 0), 0.0);
  EXPECT_EQ(maps::PortableAtan2(-0.0, -0.0), ReferenceAtan2(-0.0, -0.0));
  const Pose T = test::StreetPose(2);
  Candidates cand;
  ASSERT_TRUE(
      DeriveCandidates(Cpu(), map_.get(), T.linear(), T.translation(), 60, &cand, kCandidateIndex)
          .ok());
  // Voxels on every side of the sensor (each quadrant of atan2), one in the sensor's own voxel
  // and two far above and below the grid.
  std::vector<maps::MapVoxel> voxels = cand.voxels;
  maps::MapVoxel at = voxels.front();
  at.key = maps::KeyOf(T.translation(), map_->resolution_m());
  voxels.push_back(at);
  for (int dz : {-400, 300}) {
    at.key.z() += dz;
    voxels.push_back(at);
  }
  const kernels::AngularGrid g{1024, 80, -0.45, 0.11};
  Projection proj;
  ASSERT_TRUE(
      Cpu()
          .ProjectCandidates(voxels, map_->resolution_m(), T.linear(), T.translation(), g, &proj)
          .ok());
  const kernels::Rigid Tk = RigidOf(T.linear(), T.translation());
  std::set<int> quadrants;
  size_t outside = 0;
  for (size_t i = 0; i < voxels.size(); ++i) {
    const maps::MapVoxel& v = voxels[i];
    const Eigen::Vector3d d = Eigen::Vector3d(
        (double(v.key.x()) + (v.q[0] + 0.5) / 256.0) * map_->resolution_m() - T.translation().x(),
        (double(v.key.y()) + (v.q[1] + 0.5) / 256.0) * map_->resolution_m() - T.translation().y(),
        (double(v.key.z()) + (v.q[2] + 0.5) / 256.0) * map_->resolution_m() - T.translation().z());
    const double* R = Tk.R;
    const double sx = R[0] * d[0] + R[3] * d[1] + R[6] * d[2];
    const double sy = R[1] * d[0] + R[4] * d[1] + R[7] * d[2];
    const double sz = R[2] * d[0] + R[5] * d[1] + R[8] * d[2];
    const double rxy = std::sqrt(sx * sx + sy * sy);
    const int row = int(
        std::floor((ReferenceAtan2(sz, rxy) - g.elev_min) / (g.elev_max - g.elev_min) * g.rows));
    const int col_raw = int(std::floor((ReferenceAtan2(sy, sx) + M_PI) / (2 * M_PI) * g.cols));
    const int col = col_raw < g.cols - 1 ? col_raw : g.cols - 1;
    const int32_t cell = (row >= 0 && row < g.rows && col >= 0) ? row * g.cols + col : -1;
    ASSERT_EQ(Eigen::Vector3f(float(sx), float(sy), float(sz)), proj.sensor[i]) << "voxel " << i;
    ASSERT_EQ(std::sqrt(rxy * rxy + sz * sz), proj.range[i]) << "voxel " << i;
    ASSERT_EQ(cell, proj.cell[i]) << "voxel " << i;
    quadrants.insert(int(sx < 0) * 2 + int(sy < 0));
    outside += cell < 0;
  }
  EXPECT_EQ(quadrants.size(), 4u);
  EXPECT_GE(outside, 2u);
  // On threads, runs of voxels: the same bits (the street's voxels repeated until there are
  // enough to split three ways).
  const size_t street = voxels.size();
  while (voxels.size() < 3 * kMinProjectRun) voxels.push_back(voxels[voxels.size() % street]);
  ASSERT_TRUE(
      Cpu()
          .ProjectCandidates(voxels, map_->resolution_m(), T.linear(), T.translation(), g, &proj)
          .ok());
  Projection threaded;
  ASSERT_TRUE(Cpu()
                  .ProjectCandidates(voxels, map_->resolution_m(), T.linear(), T.translation(), g,
                                     &threaded, 3)
                  .ok());
  EXPECT_EQ(threaded.sensor, proj.sensor);
  EXPECT_EQ(threaded.range, proj.range);
  EXPECT_EQ(threaded.cell, proj.cell);
  EXPECT_EQ(threaded.nearest, proj.nearest);
}

// The selection coder's neighbour context comes from planes inside tiles; it must name exactly
// the candidates a hash look-up finds, at all 13 causal offsets and across tile borders too (0.2 m
// tiles are 51.2 m wide, so the 80 m ball around a KITTI pose spans several).
TEST(Codec, CausalNeighboursMatchHashLookups) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok());
  auto map = EvenFramesMap(*drive);
  ASSERT_TRUE(map);
  Candidates c;
  const Pose& T = drive->poses[5];
  ASSERT_TRUE(DeriveCandidates(Cpu(), map.get(), T.linear(), T.translation(), 80, &c).ok());
  std::set<maps::VoxelKey, bool (*)(const maps::VoxelKey&, const maps::VoxelKey&)> tiles(
      maps::KeyLess);
  for (const maps::MapVoxel& v : c.voxels) tiles.insert(maps::TileOf(v.key));
  ASSERT_GE(tiles.size(), 4u);
  CausalNeighbours around(c);
  int32_t nb[kCausalOffsets];
  size_t found[kCausalOffsets] = {}, across_xy = 0, across_z = 0;
  for (size_t i = 0; i < c.voxels.size(); ++i) {
    around.Next(i, nb);
    for (int k = 0; k < kCausalOffsets; ++k) {
      const maps::VoxelKey n =
          c.voxels[i].key +
          maps::VoxelKey(kCausalOffset[k][0], kCausalOffset[k][1], kCausalOffset[k][2]);
      int32_t j = c.index.Find(PackKey(n));
      if (j >= 0 && size_t(j) >= i) j = -1;
      ASSERT_EQ(nb[k], j) << "candidate " << i << " offset " << k;
      found[k] += j >= 0;
      // Found in another tile: one beside (searched) or the one below (its top layer kept).
      const maps::VoxelKey from = maps::TileOf(c.voxels[i].key), to = maps::TileOf(n);
      across_xy += j >= 0 && (to.x() != from.x() || to.y() != from.y());
      across_z += j >= 0 && to.x() == from.x() && to.y() == from.y() && to.z() != from.z();
    }
  }
  // Every offset finds neighbours, and most voxels have one on their surface.
  for (int k = 0; k < kCausalOffsets; ++k) EXPECT_GT(found[k], c.voxels.size() / 50) << k;
  EXPECT_GT(found[kFaceX] + found[kFaceY] + found[kFaceZ], c.voxels.size());
  EXPECT_GT(across_xy, 0u);
  EXPECT_GT(across_z, 0u);
}

// Candidates on a tile's bottom and top layers (ground at z = 0 lies on both: keys -1 and 0) take
// their causal neighbours and ring states from the border planes: the same neighbours a hash
// look-up finds (those at z - 1 of the bottom layer in the tile below) and, from every CPU
// variant's ring_state_planes, the state ring_state gives for them, selected neighbours included.
TEST(Codec, CandidatesOnATilesBottomAndTopLayersTakeTheirStatesFromTheBorderPlanes) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> keep(0, 9);
  std::uniform_real_distribution<float> range(1.0f, 80.0f);
  Candidates c;
  for (int x = 250; x <= 258; ++x) {   // across a tile border in x too
    for (int y = -3; y <= 3; ++y) {    // and in y
      for (int z = -3; z <= 2; ++z) {  // and in z: local z 253..255, then 0..2
        if (keep(rng) < 7) {
          maps::MapVoxel v{};
          v.key = maps::VoxelKey(x, y, z);
          c.voxels.push_back(v);
        }
      }
    }
  }
  std::sort(c.voxels.begin(), c.voxels.end(), [](const maps::MapVoxel& a, const maps::MapVoxel& b) {
    const maps::VoxelKey ta = maps::TileOf(a.key), tb = maps::TileOf(b.key);
    return ta != tb ? maps::KeyLess(ta, tb) : maps::KeyLess(a.key, b.key);
  });
  VoxelHash index(c.voxels.size());
  for (size_t i = 0; i < c.voxels.size(); ++i) index.Insert(PackKey(c.voxels[i].key), int32_t(i));
  std::vector<float> storage(c.voxels.size() + 1);
  storage[0] = HUGE_VALF;
  float* h = storage.data() + 1;
  for (size_t i = 0; i < c.voxels.size(); ++i) h[i] = range(rng);
  for (const cpu::Kernels* variant : cpu::Variants()) {
    SCOPED_TRACE(variant->name);
    for (size_t i = 0; i < c.voxels.size(); ++i) h[i] = std::fabs(h[i]);
    CausalNeighbours around(c, 0, h);
    size_t bottom = 0, top = 0;
    for (size_t i = 0; i < c.voxels.size(); ++i) {
      int32_t want[cpu::kPaddedOffsets];
      std::fill(std::begin(want), std::end(want), -1);
      for (int k = 0; k < kCausalOffsets; ++k) {
        const int8_t* o = kCausalOffset[k];
        const int32_t j = index.Find(PackKey(c.voxels[i].key + maps::VoxelKey(o[0], o[1], o[2])));
        want[k] = j >= 0 && size_t(j) < i ? j : -1;
      }
      int32_t nb[cpu::kPaddedOffsets];
      std::fill(std::begin(nb), std::end(nb), -1);
      const ptrdiff_t at = around.Locate(i, nb);
      int state;
      if (at >= 0) {
        around.Neighbours(size_t(at), nb);
        unsigned selected = 0;
        state = variant->ring_state_planes(around.PrevRanges(size_t(at)),
                                           around.CurRanges(size_t(at)), h[i], &selected);
        unsigned signs = 0;
        for (int k = 0; k < kCausalOffsets; ++k) {
          signs |= unsigned(want[k] >= 0 && std::signbit(h[want[k]])) << cpu::RingLane(k);
        }
        ASSERT_EQ(selected, signs) << "candidate " << i;
        const int lz = c.voxels[i].key.z() & (maps::kTileVoxels - 1);
        bottom += lz == 0;
        top += lz == maps::kTileVoxels - 1;
      } else {
        state = cpu::Scalar().ring_state(h, want, i);
      }
      for (int k = 0; k < kCausalOffsets; ++k) ASSERT_EQ(nb[k], want[k]) << i << " offset " << k;
      ASSERT_EQ(state, cpu::Scalar().ring_state(h, want, i)) << "candidate " << i;
      const int bit = keep(rng) < 4;
      if (bit) h[i] = -h[i];
      around.Mark(bit);
    }
    EXPECT_GT(bottom, 10u);
    EXPECT_GT(top, 10u);
  }
}

}  // namespace
}  // namespace dv::codec
