// The fill section (fill.h).
#include "codec_test_util.h"

namespace dv::codec {
namespace {

// FillOrder's midpoints are the spec's list (docs/delta-format.md, "Fill points"), computed here
// one pair at a time as the spec writes it, on the cases the four-pair (SSE2) path must get the
// same: pairs exactly at the distance limit and just past it, squared ranges on a bin's edge, at
// the last bin and far beyond it (and beyond int's range), a count of pairs not a multiple of
// four, and ties in bin kept in pair order.
TEST(Codec, FillOrderIsTheSpecsList) {
  Candidates cand;
  // A limit whose square is a float square: 0.25^2.
  cand.resolution_m = 1.0 / 6;
  const float limit2 = float((1.5 * cand.resolution_m) * (1.5 * cand.resolution_m));
  ASSERT_EQ(limit2, 0.0625f);
  std::mt19937 rng(11);
  // Random pairs' squared ranges stay below the last two bins.
  std::uniform_real_distribution<float> coord(-80.0f, 80.0f), step(-0.2f, 0.2f);
  std::vector<SelectedPair> pairs;
  auto add = [&](const Eigen::Vector3f& a, const Eigen::Vector3f& b) {
    cand.sensor.push_back(b);
    cand.sensor.push_back(a);
    const uint32_t later = uint32_t(cand.sensor.size() - 1);
    pairs.push_back({later, later - 1, 0});
  };
  for (int k = 0; k < 4002; ++k) {
    const Eigen::Vector3f a(coord(rng), coord(rng), coord(rng) / 10);
    add(a, a + Eigen::Vector3f(step(rng), step(rng), step(rng)));
  }
  // At the limit and a float step past it; on a bin's edge (a midpoint at squared range 100);
  // beyond the last bin, and beyond int.
  add({10, 0, 0}, {10.25f, 0, 0});
  add({10, 0, 0}, {std::nextafter(10.25f, 100.0f), 0, 0});
  add({10, 0, 0}, {10, 0, 0});
  add({std::nextafter(10.0f, 0.0f), 0, 0}, {std::nextafter(10.0f, 0.0f), 0, 0});
  add({130, 0, 0}, {130.05f, 0, 0});
  add({3e5f, 0, 0}, {3e5f, 0, 0});
  add({3e19f, 0, 0}, {3e19f, 0, 0});
  add({127.994f, 0, 0}, {127.994f, 0, 0});  // the bin before the last, after those in pair order
  ASSERT_NE(pairs.size() % 4, 0u);
  std::vector<std::pair<int, uint32_t>> spec;  // (bin, pair), midpoints only
  for (uint32_t k = 0; k < pairs.size(); ++k) {
    const Eigen::Vector3f& a = cand.sensor[pairs[k].later];
    const Eigen::Vector3f& b = cand.sensor[pairs[k].earlier];
    const float dx = a.x() - b.x(), dy = a.y() - b.y(), dz = a.z() - b.z();
    if (!(dx * dx + dy * dy + dz * dz <= limit2)) continue;
    const float mx = (a.x() + b.x()) * 0.5f, my = (a.y() + b.y()) * 0.5f,
                mz = (a.z() + b.z()) * 0.5f;
    const float r2 = mx * mx + my * my + mz * mz;
    spec.emplace_back(r2 >= 16383.0f ? 16383 : int(r2), k);
  }
  std::stable_sort(spec.begin(), spec.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  const std::vector<uint32_t> order = FillOrder(cand, pairs, 0);
  ASSERT_EQ(order.size(), spec.size());
  for (size_t e = 0; e < order.size(); ++e) {
    ASSERT_EQ(order[e], spec[e].second << 2) << "entry " << e;
  }
  // The edge cases are in the list where the spec puts them: the pair at the limit in, the one
  // past it out; last the one in bin 16382, then the three beyond 128 m in pair order.
  const uint32_t first_edge = 4002;
  auto listed = [&](uint32_t k) {
    return std::find(order.begin(), order.end(), k << 2) != order.end();
  };
  EXPECT_TRUE(listed(first_edge));
  EXPECT_FALSE(listed(first_edge + 1));
  ASSERT_GE(order.size(), 4u);
  const std::vector<uint32_t> tail(order.end() - 4, order.end());
  EXPECT_EQ(tail, (std::vector<uint32_t>{(first_edge + 7) << 2, (first_edge + 4) << 2,
                                         (first_edge + 5) << 2, (first_edge + 6) << 2}));
}

// The fill decodes exactly the points the encoder let through, in the visiting order (FillOrder),
// each with an original point within the bound: on the whole frame (few vetoes: the decoder's
// order, sorted only a little past its budget, is enough), on a frame thinned to one point in
// 12, where most fill points are vetoed and the decoder must sort the rest of its order, and with
// no pairs at all.
TEST_F(StreetMap, FillDecodesWhatTheEncoderLetThroughPastAPartialOrder) {
  Classified c;
  ASSERT_NO_FATAL_FAILURE(ClassifyStreet(&c));
  std::vector<uint8_t> selected;
  std::vector<SelectedPair> pairs;
  const SelectionModel model = SelectionModel{};
  EncodeSelection(c.cand, c.marks, model, &selected, &pairs);
  ASSERT_GT(pairs.size(), 1000u);
  std::vector<Eigen::Vector3f> thinned;
  std::vector<int32_t> thinned_nearest;
  for (size_t i = 0; i < c.frame.size(); i += 12) {
    thinned.push_back(c.frame.xyz[i]);
    thinned_nearest.push_back(c.marks.point_nearest[i]);
  }
  using Frame = std::pair<const std::vector<Eigen::Vector3f>*, const std::vector<int32_t>*>;
  size_t past_slack = 0;
  for (const auto& [points, nearest] :
       {Frame(&c.frame.xyz, &c.marks.point_nearest), Frame(&thinned, &thinned_nearest)}) {
    FillEncoder fill(c.cand, *points, c.bound);
    const std::vector<Eigen::Vector3f>& frame = *points;  // a binding lambdas can capture
    const XSweep sweep(frame);
    std::vector<int32_t> start, listed;
    ListByNearest(*nearest, c.cand.voxels.size(), &start, &listed);
    fill.Index(start, listed);
    fill.Order(pairs);
    for (size_t decoded : {size_t(0), points->size() / 2}) {
      SCOPED_TRACE(std::to_string(points->size()) + " points, " + std::to_string(decoded) +
                   " decoded");
      const size_t budget = points->size() - decoded;
      // What the encoder must let through: the fill points in order, each with an original point
      // within the bound (brute force over the points in its x band), until the budget is met.
      std::vector<Eigen::Vector3f> expected;
      size_t vetoes = 0;
      for (uint32_t e : FillOrder(c.cand, pairs, budget)) {
        if (expected.size() == budget) break;
        const Eigen::Vector3f m = FillPoint(c.cand, pairs[e >> 2], e & 3);
        bool near = false;
        sweep.ForNear(m.cast<double>(), c.bound, [&](size_t j) {
          near |= (frame[j].cast<double>() - m.cast<double>()).squaredNorm() <= c.bound * c.bound;
        });
        if (near) {
          expected.push_back(m);
        } else {
          ++vetoes;
        }
      }
      if (vetoes > budget / 16 + 256) ++past_slack;
      size_t added = 0;
      const std::vector<uint8_t> bytes = fill.Encode(decoded, &added);
      EXPECT_EQ(added, expected.size());
      PointCloud cloud;
      for (size_t i = 0; i < decoded; ++i) cloud.push_back(Eigen::Vector3f::Zero(), 0);
      size_t decoded_added = 0;
      ASSERT_TRUE(
          DecodeFill(bytes.data(), bytes.size(), c.cand, pairs, false, &cloud, &decoded_added)
              .ok());
      ASSERT_EQ(decoded_added, expected.size());
      const std::vector<Eigen::Vector3f> got(cloud.xyz.begin() + std::ptrdiff_t(decoded),
                                             cloud.xyz.end());
      EXPECT_EQ(got, expected);
    }
  }
  // The thinned frame vetoes more than the order sorted at first holds past the budget.
  EXPECT_GT(past_slack, 0u);
  // Without pairs there is nothing to visit: no bits, and the decoder reads none.
  const std::vector<SelectedPair> none;
  FillEncoder empty(c.cand, c.frame.xyz, c.bound);
  std::vector<int32_t> start, listed;
  ListByNearest(c.marks.point_nearest, c.cand.voxels.size(), &start, &listed);
  empty.Index(start, listed);
  empty.Order(none);
  size_t added = 1;
  const std::vector<uint8_t> bytes = empty.Encode(0, &added);
  EXPECT_EQ(added, 0u);
  PointCloud cloud;
  size_t decoded_added = 1;
  const Status s =
      DecodeFill(bytes.data(), bytes.size(), c.cand, none, false, &cloud, &decoded_added);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(decoded_added, 0u);
}

// The fill section: the decoder adds points between selected map voxels up to the original
// frame's point count, each within the tolerance of an original point.
TEST_F(StreetMap, FillKeepsTheBoundAndThePointCountAndDamageIsRejected) {
  const double tol = 0.1;  // the map's resolution, as in the pseudo-revisit protocol
  const PointCloud frame = test::StreetFrame(test::StreetPose(3), {test::CarAt(5, 3)});
  EncoderParams p;
  p.tolerance_m = tol;
  p.intensity = true;
  EncodeReport rep;
  std::vector<uint8_t> bytes;
  auto dec = RoundTrip(frame, test::StreetPose(3), p, map_.get(), &rep, &bytes);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const size_t fill = size_t(std::count(dec->source.begin(), dec->source.end(), 3));
  EXPECT_GT(fill, 0u);
  EXPECT_EQ(fill, rep.fill_points);
  EXPECT_LE(dec->cloud.size(), frame.size());
  EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), tol);
  // Fill points come last, each between two decoded map voxels: within 0.75 of the farthest pair
  // (1.5 resolutions) of one, and with an intensity between the voxels' (0..1).
  std::vector<Eigen::Vector3f> voxels, filled;
  for (size_t i = 0; i < dec->cloud.size(); ++i) {
    if (dec->source[i] == 0) voxels.push_back(dec->cloud.xyz[i]);
    if (dec->source[i] != 3) continue;
    filled.push_back(dec->cloud.xyz[i]);
    EXPECT_GE(dec->cloud.intensity[i], 0.0f);
    EXPECT_LE(dec->cloud.intensity[i], 1.0f);
  }
  EXPECT_TRUE(std::is_sorted(dec->source.begin(), dec->source.end()));
  for (double d : bench::NearestDistances(filled, voxels)) EXPECT_LE(d, 0.75 * 1.5 * 0.1 + 1e-6);

  const Sections whole = Split(bytes);
  ASSERT_EQ(Join(whole), bytes);
  ASSERT_GT(whole.list.back().second.size(), 4u);
  ASSERT_EQ(whole.list.back().first, kFillId);
  Sections s = whole;
  s.body(kFillId).resize(4);
  ExpectCorrupt(s, "delta: fill: truncated stream");
  s = whole;
  s.erase(kFillId);
  ExpectCorrupt(s, "delta: missing section fill");
  s = whole;
  s.body(kFillId) = {0xff, 0xff, 0xff, 0xff, 0x0f};  // 2^32 - 1 points
  ExpectCorrupt(s, "delta: fill: bad point count");
  s = whole;
  s.body(kFillId) = {0x01, 0x00};  // one point: nothing to fill, and a byte left over
  ExpectCorrupt(s, "delta: fill: trailing bytes");
  ExpectOnlyInDelta(Split(Encode(frame, test::StreetPose(3), {}, p, nullptr).value()), kFillId,
                    "fill", whole.list.back().second);
}

}  // namespace
}  // namespace dv::codec
