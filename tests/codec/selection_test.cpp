// The map section (map_section.h SelectionCoder): what it selects, its parts, the pairs it lists.
#include "codec_test_util.h"

namespace dv::codec {
namespace {

// The encoder leaves close free bits (within the selection radius of a point, no point's nearest)
// out where their models favour 0 and selects no other free bit; whatever it chooses, the decoder
// reads the same bits, every nearest is selected and nothing outside every point's bound is.
TEST_F(StreetMap, SelectionKeepsEveryNearestAndNothingOutsideTheBound) {
  const Pose truth = test::StreetPose(2);
  Candidates cand;
  ASSERT_TRUE(
      DeriveCandidates(Cpu(), map_.get(), truth.linear(), truth.translation(), 60, &cand).ok());
  const size_t n = cand.voxels.size();
  std::mt19937 rng(5);
  // Marks as a classification leaves them: a fifth nearest, a fifth close, the rest neither (within
  // the bound of a point or not: the encoder selects none of them).
  CandidateMarks marks{std::vector<uint8_t>(n), std::vector<uint8_t>(n), {}, {}, {}, {}, {}};
  for (size_t j = 0; j < n; ++j) {
    const int kind = int(rng() % 10);
    marks.nearest[j] = kind < 2;
    marks.close[j] = kind >= 2 && kind < 4;
  }
  std::vector<uint8_t> chosen, decoded;
  const SelectionModel model = SelectionModel{};
  const std::vector<uint8_t> bits = EncodeSelection(cand, marks, model, &chosen);
  ASSERT_TRUE(DecodeSelection(cand, bits.data(), bits.size(), model, &decoded).ok());
  EXPECT_EQ(decoded, chosen);
  size_t added = 0, dropped = 0;
  for (size_t j = 0; j < n; ++j) {
    if (marks.nearest[j]) {
      EXPECT_EQ(chosen[j], 1) << j;
    }
    added += chosen[j] && !marks.nearest[j] && !marks.close[j];
    dropped += !chosen[j] && marks.close[j];
  }
  // Close free bits did follow their models; a free bit neither close nor nearest never is set.
  EXPECT_EQ(added, 0u);
  EXPECT_GT(dropped, 0u);
}

// With each point's nearest and second from a real classification, the encoder leaves a nearest
// out only where each of its points keeps its second; every explained point still has a selected
// candidate within the bound, and nothing outside every point's bound is selected.
TEST_F(StreetMap, SelectionLeavesANearestOutOnlyWhereItsPointsKeepTheirSecond) {
  Classified c;
  ASSERT_NO_FATAL_FAILURE(ClassifyStreet(&c));
  const PointCloud& frame = c.frame;
  const Candidates& cand = c.cand;
  const CandidateMarks& marks = c.marks;
  const double bound = c.bound;
  std::vector<uint8_t> chosen, decoded;
  const SelectionModel model = SelectionModel{};
  const std::vector<uint8_t> bits = EncodeSelection(cand, marks, model, &chosen);
  ASSERT_TRUE(DecodeSelection(cand, bits.data(), bits.size(), model, &decoded).ok());
  EXPECT_EQ(decoded, chosen);
  // Each selected candidate, by brute force: an original point within the bound.
  const XSweep originals(frame.xyz);
  size_t left_out = 0;
  for (size_t j = 0; j < chosen.size(); ++j) {
    left_out += marks.nearest[j] && !chosen[j];
    if (!chosen[j]) continue;
    const Eigen::Vector3d s = cand.sensor[j].cast<double>();
    bool near = false;
    originals.ForNear(s, bound, [&](size_t i) {
      near |= (frame.xyz[i].cast<double>() - s).squaredNorm() <= bound * bound;
    });
    EXPECT_TRUE(near) << "candidate " << j;
  }
  EXPECT_GT(left_out, 0u) << "no nearest was left out: the rule was not exercised";
  const XSweep sweep(cand.sensor);
  for (size_t i = 0; i < frame.size(); ++i) {
    const int32_t own = marks.point_nearest[i], second = marks.point_second[i];
    if (own < 0) continue;
    if (!chosen[size_t(own)]) {
      ASSERT_GE(second, 0) << "point " << i;
      EXPECT_EQ(chosen[size_t(second)], 1) << "point " << i;
    }
    // The bound, by brute force: a selected candidate within it.
    const Eigen::Vector3d p = frame.xyz[i].cast<double>();
    bool kept = false;
    sweep.ForNear(p, bound, [&](size_t j) {
      kept |= chosen[j] && (cand.sensor[j].cast<double>() - p).squaredNorm() <= bound * bound;
    });
    EXPECT_TRUE(kept) << "point " << i;
  }
}

// The selection's parts depend on nothing outside them: decoded one by one in
// reverse order, or all at once on threads, they give the bits the encoder chose and the pairs it
// listed, and no listed pair crosses a part.
TEST_F(StreetMap, SelectionPartsDecodeOnTheirOwnInAnyOrder) {
  Classified c;
  ASSERT_NO_FATAL_FAILURE(ClassifyStreet(&c));
  const PointCloud& frame = c.frame;
  const Candidates& cand = c.cand;
  const CandidateMarks& marks = c.marks;
  const size_t n = cand.voxels.size();
  const SelectionModel model = SelectionModel{};
  for (int parts : {2, 5}) {
    // Part p holds [n p / parts, n (p + 1) / parts).
    auto part_of = [&](size_t i) {
      int p = 0;
      while (n * size_t(p + 1) / size_t(parts) <= i) ++p;
      return p;
    };
    std::vector<uint8_t> chosen;
    std::vector<SelectedPair> listed;
    SelectionCoder encoder(cand, model, parts, &chosen, true);
    encoder.SetMarks(marks);
    std::vector<std::vector<uint8_t>> streams;
    for (int p = 0; p < parts; ++p) streams.push_back(encoder.EncodePart(p));
    encoder.TakePairs(&listed);
    ASSERT_EQ(chosen.size(), n);
    ASSERT_GT(listed.size(), 0u);
    for (const SelectedPair& pair : listed) {
      EXPECT_EQ(part_of(pair.later), part_of(pair.earlier))
          << "pair " << pair.later << ", " << pair.earlier << " crosses a part";
      EXPECT_TRUE(chosen[pair.later] && chosen[pair.earlier]);
    }
    for (int threads : {1, parts}) {
      std::vector<uint8_t> decoded;
      std::vector<SelectedPair> pairs;
      SelectionCoder decoder(cand, model, parts, &decoded, true);
      std::vector<Status> read(size_t(parts), Status::Ok());
      RunTasks(threads, parts, [&](int t) {
        const int p = threads == 1 ? parts - 1 - t : t;  // one thread: the last part first
        read[size_t(p)] =
            decoder.DecodePart(p, streams[size_t(p)].data(), streams[size_t(p)].size());
      });
      for (const Status& r : read) ASSERT_TRUE(r.ok()) << r.ToString();
      decoder.TakePairs(&pairs);
      EXPECT_EQ(decoded, chosen) << parts << " parts, " << threads << " threads";
      ASSERT_EQ(pairs.size(), listed.size());
      for (size_t k = 0; k < pairs.size(); ++k) {
        EXPECT_EQ(pairs[k].later, listed[k].later);
        EXPECT_EQ(pairs[k].earlier, listed[k].earlier);
        EXPECT_EQ(pairs[k].offset, listed[k].offset);
      }
    }
    // Every explained point keeps a selected candidate within the bound: the nearest left out
    // only for a second in its own part.
    for (size_t i = 0; i < frame.size(); ++i) {
      const int32_t own = marks.point_nearest[size_t(i)];
      if (own < 0 || chosen[size_t(own)]) continue;
      const int32_t second = marks.point_second[i];
      ASSERT_GE(second, 0) << "point " << i;
      EXPECT_EQ(chosen[size_t(second)], 1) << "point " << i;
      EXPECT_EQ(part_of(size_t(own)), part_of(size_t(second))) << "point " << i;
    }
  }
}

// The points listed by nearest candidate (ListByNearest, made once a frame for the selection
// coder and the fill): each point in its nearest's list, in point order, with its second, every
// explained point once; and the selection coder codes the same bits from marks listed beforehand
// as from marks it lists itself.
TEST_F(StreetMap, PointsListedByNearestServeTheSelectionAsItsOwnLists) {
  Classified c;
  ASSERT_NO_FATAL_FAILURE(ClassifyStreet(&c));
  const size_t n = c.cand.voxels.size();
  CandidateMarks listed = c.marks;
  ListByNearest(listed.point_nearest, n, &listed.nearest_start, &listed.nearest_points,
                &listed.point_second, &listed.nearest_seconds);
  ASSERT_EQ(listed.nearest_start.size(), n + 1);
  const size_t explained = size_t(std::count_if(
      listed.point_nearest.begin(), listed.point_nearest.end(), [](int32_t b) { return b >= 0; }));
  ASSERT_GT(explained, 1000u);
  ASSERT_EQ(listed.nearest_points.size(), explained);
  ASSERT_EQ(listed.nearest_seconds.size(), explained);
  EXPECT_EQ(listed.nearest_start[0], 0);
  for (size_t j = 0; j < n; ++j) {
    for (int32_t k = listed.nearest_start[j]; k < listed.nearest_start[j + 1]; ++k) {
      const int32_t p = listed.nearest_points[size_t(k)];
      EXPECT_EQ(listed.point_nearest[size_t(p)], int32_t(j));
      EXPECT_EQ(listed.nearest_seconds[size_t(k)], listed.point_second[size_t(p)]);
      if (k > listed.nearest_start[j]) {
        EXPECT_LT(listed.nearest_points[size_t(k - 1)], p);
      }
    }
  }
  const SelectionModel model = SelectionModel{};
  std::vector<uint8_t> own_selected, listed_selected;
  const std::vector<uint8_t> own = EncodeSelection(c.cand, c.marks, model, &own_selected);
  const std::vector<uint8_t> from_lists = EncodeSelection(c.cand, listed, model, &listed_selected);
  EXPECT_EQ(from_lists, own);
  EXPECT_EQ(listed_selected, own_selected);
}

// Any number of parts keeps the bound and decodes the same on any number of threads; the part
// count and lengths at the map section's start are checked.
TEST_F(StreetMap, SelectionPartsRoundTripAndDamageIsRejected) {
  const double tol = 0.1;
  const PointCloud frame = test::StreetFrame(test::StreetPose(3), {test::CarAt(5, 3)});
  EncoderParams p;
  p.tolerance_m = tol;
  std::vector<uint8_t> two_parts;
  for (int parts : {1, 2, 3, kMaxSelectionParts}) {
    p.selection_parts = parts;
    EncodeReport rep;
    std::vector<uint8_t> bytes;
    auto dec = RoundTrip(frame, test::StreetPose(3), p, map_.get(), &rep, &bytes);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), tol) << parts;
    for (int threads : {2, 5}) {
      auto threaded = Decode(bytes.data(), bytes.size(), map_.get(), threads);
      ASSERT_TRUE(threaded.ok()) << threaded.status().ToString();
      EXPECT_EQ(threaded->cloud.xyz, dec->cloud.xyz) << parts << " parts, " << threads;
      EXPECT_EQ(threaded->source, dec->source) << parts << " parts, " << threads;
    }
    // radius varint (two bytes for the street's tens of metres), then the part count.
    const std::vector<uint8_t> map_body = Split(bytes).body(1);
    ASSERT_GT(map_body.size(), 3u);
    EXPECT_EQ(map_body[2], parts);
    if (parts == 2) two_parts = bytes;
  }
  const Sections whole = Split(two_parts);
  ASSERT_EQ(Join(whole), two_parts);
  Sections s = whole;
  s.body(1)[2] = 0;
  ExpectCorrupt(s, "delta: bad part count in the map section");
  s = whole;
  s.body(1)[2] = kMaxSelectionParts + 1;
  ExpectCorrupt(s, "delta: bad part count in the map section");
  s = whole;
  s.body(1).resize(5);  // the first part's length now runs past the section's end
  ExpectCorrupt(s, "delta: bad part length in the map section");
  s = whole;
  s.body(1).resize(s.body(1).size() - 40);  // the last part cut short
  ExpectCorrupt(s, "map section truncated");
}

}  // namespace
}  // namespace dv::codec
