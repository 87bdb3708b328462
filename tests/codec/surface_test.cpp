// The gap class (surface.h): its sections, the surface profile, damage.
#include "codec_test_util.h"

namespace dv::codec {
namespace {

TEST_F(StreetMap, DamagedOrMisplacedGapSectionsAreRejected) {
  const PointCloud frame = PerturbedStreetFrame(1, 0.1);
  EncodeReport rep;
  const auto bytes = Encode(frame, test::StreetPose(2), {}, {}, map_.get(), &rep).value();
  ASSERT_GT(rep.gap_points, 0u);
  const Sections whole = Split(bytes);
  ASSERT_EQ(Join(whole), bytes);
  Sections s = whole;
  const std::vector<uint8_t> gap_body = s.body(kGapId);
  s.body(kGapId).resize(s.body(kGapId).size() / 2);
  ExpectCorrupt(s, "delta: section gap: octree: truncated occupancy stream");
  s = whole;
  s.body(kGapIntensityId).resize(s.body(kGapIntensityId).size() / 2);
  ExpectCorrupt(s, "delta: section gap: octree: truncated intensity stream");
  s = whole;
  s.body(kGapId)[0] = 30;
  ExpectCorrupt(s, "delta: section gap: octree: depth 30");
  s = whole;
  s.erase(kGapId);
  ExpectCorrupt(s, "missing section gap");
  s = whole;
  s.erase(kGapIntensityId);
  ExpectCorrupt(s, "missing section gap_intensity");
  ExpectOnlyInDelta(Split(Encode(frame, test::StreetPose(2), {}, {}, nullptr).value()), kGapId,
                    "gap", gap_body);
  // Nor does a delta frame take an intra section, or any section of an unknown id (in the last
  // section's place: a delta frame has the most sections a frame may have).
  s = whole;
  s.list.back().first = 4;
  ExpectCorrupt(s, "section intra is not valid in a delta frame");
  s = whole;
  s.list.back().first = 11;
  ExpectCorrupt(s, "unknown section id 11");
}

// The surface sections: gap points on the map's ground profile, coded as 2D cells whose
// height the decoder reads off the map. The bound holds for them as for every point, and a
// damaged, misplaced or impossible surface section is refused.
TEST_F(StreetMap, SurfaceSectionsHoldTheBoundAndDamageIsRejected) {
  const double tol = 0.1;
  // The perturbed street with every third ground point also slid along the road by 1.5 to 4 T:
  // off the map's samples, still on its ground (between the rings, as on KITTI at 20-50 m).
  PointCloud frame = PerturbedStreetFrame(1, tol);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> slide(float(1.5 * tol), float(4 * tol));
  for (size_t i = 1; i < frame.size(); i += 3) {
    if (frame.xyz[i].z() < -1.75f) frame.xyz[i].x() += slide(rng);
  }
  EncoderParams p;
  p.tolerance_m = tol;
  EncodeReport rep;
  std::vector<uint8_t> bytes;
  auto dec = RoundTrip(frame, test::StreetPose(2), p, map_.get(), &rep, &bytes);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_GT(rep.surface_points, 0u);
  EXPECT_LT(rep.surface_points, rep.gap_points);
  EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), tol);
  const Sections whole = Split(bytes);
  ASSERT_EQ(Join(whole), bytes);
  Sections s = whole;
  ASSERT_GT(s.body(kSurfaceId).size(), 1u);

  // Without the gap class the surface sections are there and empty: one byte, depth 0.
  p.gap_factor = 0;
  EncodeReport plain_rep;
  std::vector<uint8_t> plain;
  auto plain_dec = RoundTrip(frame, test::StreetPose(2), p, map_.get(), &plain_rep, &plain);
  ASSERT_TRUE(plain_dec.ok()) << plain_dec.status().ToString();
  EXPECT_EQ(plain_rep.surface_points, 0u);
  EXPECT_EQ(Split(plain).body(kSurfaceId), std::vector<uint8_t>{0});

  s.body(kSurfaceId).resize(s.body(kSurfaceId).size() / 2);
  ExpectCorrupt(s, "delta: section surface: octree: truncated occupancy stream");
  s = whole;
  s.erase(kSurfaceIntensityId);
  ExpectCorrupt(s, "missing section surface_intensity");
  s = whole;
  s.erase(kSurfaceId);
  ExpectCorrupt(s, "missing section surface");
  ExpectOnlyInDelta(Split(Encode(frame, test::StreetPose(2), {}, p, nullptr).value()), kSurfaceId,
                    "surface", whole.list.front().second);
  // A cell 200 m out, beyond the profile's reach: no height to give it.
  s = whole;
  std::vector<uint8_t> far_cell, far_intensity;
  ASSERT_TRUE(EncodeCells({Eigen::Vector3f(150, 150, 0)}, {0.5f}, 1.4 * (tol - 1e-4), true,
                          OctreeModel{}, &far_cell, &far_intensity, nullptr)
                  .ok());
  s.body(kSurfaceId) = far_cell;
  s.body(kSurfaceIntensityId) = far_intensity;
  ExpectCorrupt(s, "delta: section surface: a cell off the map's profile");
}

}  // namespace
}  // namespace dv::codec
