// Whole frames through the encoder and the decoder: the bound, the report, bad parameters, KITTI.
#include "codec_test_util.h"
#include "still.h"

namespace dv::codec {
namespace {

TEST(Codec, IntraRandomFramesHoldTheBoundExactly) {
  for (double tol : {0.02, 0.1, 0.35}) {
    for (bool intensity : {true, false}) {
      const PointCloud frame = RandomFrame(uint32_t(tol * 1000) + intensity, 1500);
      EncoderParams p;
      p.tolerance_m = tol;
      p.intensity = intensity;
      EncodeReport rep;
      auto dec = RoundTrip(frame, Pose::Identity(), p, nullptr, &rep);
      ASSERT_TRUE(dec.ok()) << dec.status().ToString();
      EXPECT_TRUE(rep.intra_fallback);
      EXPECT_TRUE(dec->intra);
      EXPECT_LE(BruteHausdorff(frame.xyz, dec->cloud.xyz), tol) << "tolerance " << tol;
      EXPECT_EQ(dec->tolerance_m, tol);
      EXPECT_EQ(dec->info.sequence, 7u);
      EXPECT_EQ(dec->info.timestamp_ns, 123);
      EXPECT_EQ(dec->info.sensor_id, 1u);
      EXPECT_EQ(dec->cloud.size(), dec->source.size());
      for (float v : dec->cloud.intensity) {
        EXPECT_TRUE(intensity ? (v >= 0 && v <= 1) : v == 0);
      }
    }
  }
}

TEST(Codec, NonFinitePointsAreDroppedAndCounted) {
  PointCloud frame = RandomFrame(3, 200);
  frame.push_back(Eigen::Vector3f(NAN, 0, 0), 0.5f);
  frame.push_back(Eigen::Vector3f(1, INFINITY, 0), 0.5f);
  EncodeReport rep;
  auto dec = RoundTrip(frame, Pose::Identity(), {}, nullptr, &rep);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(rep.non_finite_points, 2u);
  EXPECT_EQ(rep.points_in, 200u);
  frame.xyz.resize(200);
  EXPECT_LE(BruteHausdorff(frame.xyz, dec->cloud.xyz), 0.1);
  // An empty frame is a valid (empty) intra frame.
  auto empty = RoundTrip(PointCloud(), Pose::Identity(), {}, nullptr, &rep);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->cloud.empty());
}

TEST(Codec, RejectsBadParameters) {
  const PointCloud frame = RandomFrame(4, 10);
  EncoderParams p;
  p.tolerance_m = 0;
  EXPECT_EQ(Encode(frame, Pose::Identity(), {}, p, nullptr).status().code(),
            Status::Code::kInvalidArgument);
  p.tolerance_m = 0.1;
  p.residual_precision_m = -1;
  EXPECT_FALSE(Encode(frame, Pose::Identity(), {}, p, nullptr).ok());
  p.residual_precision_m = 0.02;
  for (double g : {-1.0, 4.5, double(NAN)}) {
    p.gap_factor = g;
    auto bad = Encode(frame, Pose::Identity(), {}, p, nullptr);
    EXPECT_NE(bad.status().message().find("gap_factor"), std::string::npos) << g;
  }
  p.gap_factor = 2;
  for (double m : {-0.1, 1.5, double(NAN)}) {
    p.still_m = m;
    auto bad = Encode(frame, Pose::Identity(), {}, p, nullptr);
    EXPECT_NE(bad.status().message().find("still_m"), std::string::npos) << m;
  }
  p.still_m = 0.1;
  for (double f : {-0.1, 1.5, double(NAN)}) {
    p.select_factor = f;
    auto bad = Encode(frame, Pose::Identity(), {}, p, nullptr);
    EXPECT_NE(bad.status().message().find("select_factor"), std::string::npos) << f;
  }
  p.select_factor = 0.6;
  for (double r : {-1.0, 1001.0, double(NAN)}) {
    p.selection_radius_m = r;
    auto bad = Encode(frame, Pose::Identity(), {}, p, nullptr);
    EXPECT_NE(bad.status().message().find("selection_radius_m"), std::string::npos) << r;
  }
  p.selection_radius_m = 0;
  for (int threads : {0, -2, kMaxEncoderThreads + 1}) {
    p.threads = threads;
    auto bad = Encode(frame, Pose::Identity(), {}, p, nullptr);
    EXPECT_NE(bad.status().message().find("threads"), std::string::npos) << threads;
  }
  p.threads = 1;
  for (int parts : {0, kMaxSelectionParts + 1}) {
    p.selection_parts = parts;
    auto bad = Encode(frame, Pose::Identity(), {}, p, nullptr);
    EXPECT_NE(bad.status().message().find("selection_parts"), std::string::npos) << parts;
  }
  p.selection_parts = 2;
  PointCloud far;
  far.push_back(Eigen::Vector3f(0, 0, 0), 0);
  far.push_back(Eigen::Vector3f(1e6f, 0, 0), 0);
  EXPECT_EQ(Encode(far, Pose::Identity(), {}, {}, nullptr).status().code(),
            Status::Code::kInvalidArgument);
}

// A frame 500 m from every map voxel: no candidates, so registration keeps the prior (and an
// empty ball), and the frame falls back to intra coding within the bound; back on the street the
// next frame is a delta frame again.
TEST_F(StreetMap, AFrameOffTheMapIsCodedIntraAndTheNextOnItIsNot) {
  EncoderParams p;
  p.tolerance_m = 0.1;
  Pose away = test::StreetPose(3);
  away.translation() += Eigen::Vector3d(0, 500, 0);
  const PointCloud frame = test::StreetFrame(test::StreetPose(3), {});
  EncodeReport rep;
  auto off = Encode(frame, away, {}, p, map_.get(), &rep);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_TRUE(rep.intra_fallback);
  EXPECT_EQ(rep.candidates, 0u);
  EXPECT_LT((rep.T_map_sensor.translation() - away.translation()).norm(), 1e-3);
  auto decoded = Decode(off->data(), off->size(), map_.get());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_LE(bench::CompareFrames(frame.xyz, decoded->cloud.xyz).hausdorff_m(), 0.1);
  auto on = Encode(frame, test::StreetPose(3), {}, p, map_.get(), &rep);
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_FALSE(rep.intra_fallback);
  EXPECT_GT(rep.candidates, 1000u);
}

TEST_F(StreetMap, DeltaExplainsTheStreetAndCodesTheCarAsResidual) {
  const Pose truth = test::StreetPose(3);
  const PointCloud frame = test::StreetFrame(truth, {test::CarAt(5, 3)});
  Pose prior = truth;
  prior.translation() += Eigen::Vector3d(0.12, -0.1, 0.04);
  prior.linear() = Eigen::AngleAxisd(0.006, Eigen::Vector3d::UnitZ()) * prior.linear();
  for (bool intensity : {true, false}) {
    EncoderParams p;
    p.tolerance_m = 0.1;
    p.intensity = intensity;
    EncodeReport rep;
    auto dec = RoundTrip(frame, prior, p, map_.get(), &rep);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_FALSE(dec->intra);
    EXPECT_EQ(dec->map_version, map_->version());
    // Registration moved the pose towards the truth (the street is a corridor with few
    // features along it, so the along-street error shrinks slowly).
    EXPECT_LT(TranslationNorm(truth.inverse() * rep.T_map_sensor),
              0.6 * TranslationNorm(truth.inverse() * prior));
    EXPECT_GT(rep.explained_points, frame.size() * 8 / 10);
    EXPECT_GT(rep.residual_points + rep.gap_points, 100u);  // the car
    EXPECT_EQ(rep.explained_points + rep.residual_points + rep.gap_points, frame.size());
    const bench::FrameError e = bench::CompareFrames(frame.xyz, dec->cloud.xyz);
    EXPECT_LE(e.hausdorff_m(), 0.1);
    size_t from_map = 0;
    for (uint8_t s : dec->source) from_map += s == 0;
    EXPECT_EQ(from_map, rep.selected_voxels);
    for (float v : dec->cloud.intensity) EXPECT_TRUE(intensity ? v >= 0 && v <= 1 : v == 0);
  }
}

// With a selection radius the candidates are the map voxels near the sensor; the points beyond it
// are tested against the map all the same, so the street's far facades and ground are coded at
// the tolerance (gap) and only what the map does not hold (the car) keeps the residual's
// precision. The bound holds either way.
TEST_F(StreetMap, BeyondTheSelectionRadiusTheStreetIsGapAndTheCarResidual) {
  const Pose pose = test::StreetPose(3);
  const PointCloud frame = test::StreetFrame(pose, {test::CarAt(5, 3)});
  EncoderParams p;
  p.tolerance_m = 0.1;
  p.intensity = false;
  EncodeReport full, near;
  auto full_dec = RoundTrip(frame, pose, p, map_.get(), &full);
  ASSERT_TRUE(full_dec.ok()) << full_dec.status().ToString();
  constexpr double kRadius = 8;
  p.selection_radius_m = kRadius;
  p.min_explained_fraction = 0;  // most of the street lies beyond 8 m: a delta frame all the same
  auto near_dec = RoundTrip(frame, pose, p, map_.get(), &near);
  ASSERT_TRUE(near_dec.ok()) << near_dec.status().ToString();
  EXPECT_FALSE(near_dec->intra);
  EXPECT_LE(bench::CompareFrames(frame.xyz, near_dec->cloud.xyz).hausdorff_m(), p.tolerance_m);
  EXPECT_LT(near.candidates, full.candidates / 2);
  // A candidate's key lies within the ball's reach (ceil(R / res) + 1 voxels) of the sensor's, its
  // representative in its voxel, and it explains only points within T of that.
  const double res = map_->resolution_m();
  const double reach_m = (std::ceil(kRadius / res) + 1 + std::sqrt(3.0)) * res + p.tolerance_m;
  size_t within = 0, beyond = 0;
  for (const Eigen::Vector3f& q : frame.xyz) {
    within += q.norm() <= reach_m;
    beyond += q.norm() > reach_m;
  }
  ASSERT_GT(beyond, frame.size() / 4);
  EXPECT_LE(near.explained_points, within);
  EXPECT_EQ(near.explained_points + near.residual_points + near.gap_points, frame.size());
  // The car, within the radius, is classified as without it; of the far points at most a few
  // (ground between the map's rings) are residual.
  EXPECT_GE(near.residual_points, full.residual_points);
  EXPECT_GT(near.gap_points, full.gap_points + beyond * 8 / 10);
  EXPECT_LT(near.residual_points, full.residual_points + beyond / 20);
}

// The gap class beyond gap_factor * T: ground between the map's scan rings, metres apart far down
// the street, lies on the map's surface (map samples at its height nearer and farther along its
// azimuth) and is coded at T; the car's body stands in front of the facade and pillars the map
// saw behind it, with nothing of the map at its height on its near side, and stays residual.
TEST_F(StreetMap, GroundBetweenTheMapsRingsIsGapAndTheCarStaysResidual) {
  const double tol = 0.1;
  const Pose truth = test::StreetPose(3);
  const test::Box car = test::CarAt(5, 3);
  const PointCloud frame = test::StreetFrame(truth, {car});
  EncoderParams p;
  p.tolerance_m = tol;
  EncodeReport rep;
  auto dec = RoundTrip(frame, truth, p, map_.get(), &rep);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  ASSERT_FALSE(dec->intra);
  EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), tol);
  std::vector<maps::MapVoxel> voxels;
  ASSERT_TRUE(
      map_->CollectBox(maps::VoxelKey(-1000, -1000, -100), maps::VoxelKey(1000, 1000, 100), &voxels)
          .ok());
  std::vector<Eigen::Vector3d> reps;
  for (const maps::MapVoxel& v : voxels) reps.push_back(maps::Representative(v, 0.1));
  size_t car_residual = 0, car_body_gap = 0, far_gap = 0;
  for (size_t i = 0; i < dec->cloud.size(); ++i) {
    const Eigen::Vector3d w = dec->T_map_sensor * dec->cloud.xyz[i].cast<double>();
    const bool in_car =
        (w.array() >= car.lo.array() - tol).all() && (w.array() <= car.hi.array() + tol).all();
    if (in_car && dec->source[i] == 1) ++car_residual;
    // Above the band of the first test, which reaches 2 T from the road's samples.
    if (in_car && dec->source[i] == 2 && w.z() > car.lo.z() + 3 * tol) ++car_body_gap;
    if (dec->source[i] != 2) continue;
    double nearest2 = 1e30;
    for (const Eigen::Vector3d& r : reps) nearest2 = std::min(nearest2, (r - w).squaredNorm());
    // The cell's centre is within T of its points: these points were more than 2 T from every
    // map representative, out of the first test's reach.
    if (std::sqrt(nearest2) > 3 * tol + 1e-3) ++far_gap;
  }
  EXPECT_GT(car_residual, 100u);
  EXPECT_EQ(car_body_gap, 0u);
  EXPECT_GT(far_gap, 50u);
  // Without the split, neither test runs: the same points are residual.
  p.gap_factor = 0;
  EncodeReport off;
  ASSERT_TRUE(RoundTrip(frame, truth, p, map_.get(), &off).ok());
  EXPECT_EQ(off.gap_points, 0u);
  EXPECT_EQ(off.residual_points, rep.residual_points + rep.gap_points);
}

// A car standing still since the sensor's frame before (parked since the map's day): its points,
// far from the map, are within still_m of that frame's, so they are coded at the tolerance with
// the gap class instead of the residual's precision. The test only moves points from the
// residual to the gap class; the bound holds. A car that moved, a frame too long after, another
// sensor's frame or a fresh encoder compares nothing.
TEST_F(StreetMap, ACarStandingStillSinceTheFrameBeforeIsCodedAtTheTolerance) {
  const double tol = 0.1;
  EncoderParams p;
  p.tolerance_m = tol;
  p.intensity = false;
  const test::Box car = test::CarAt(5, 3);
  const PointCloud before = test::StreetFrame(test::StreetPose(3), {car});
  const PointCloud now = test::StreetFrame(test::StreetPose(3.8), {car});
  constexpr int64_t kSecond = 1'000'000'000;
  // The frame `now` coded alone: what the residual holds without the test.
  EncodeReport alone;
  auto alone_bytes =
      Encode(now, test::StreetPose(3.8), {2, kSecond + kSecond / 10, 0}, p, map_.get(), &alone);
  ASSERT_TRUE(alone_bytes.ok()) << alone_bytes.status().ToString();
  ASSERT_GT(alone.residual_points, 100u);
  EXPECT_EQ(alone.still_points, 0u);

  auto code_pair = [&](const PointCloud& first, const FrameInfo& first_info,
                       const FrameInfo& second_info, EncodeReport* second,
                       std::vector<uint8_t>* second_bytes) {
    Encoder encoder(map_.get());
    EncodeReport rep;
    auto a = encoder.Encode(first, test::StreetPose(3), first_info, p, &rep);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(rep.still_points, 0u);
    auto b = encoder.Encode(now, test::StreetPose(3.8), second_info, p, second);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    *second_bytes = *b;
  };
  const FrameInfo first{1, kSecond, 0}, next{2, kSecond + kSecond / 10, 0};
  EncodeReport still;
  std::vector<uint8_t> still_bytes;
  code_pair(before, first, next, &still, &still_bytes);
  EXPECT_GT(still.still_points, alone.residual_points * 8 / 10);
  EXPECT_EQ(still.residual_points + still.still_points, alone.residual_points);
  EXPECT_EQ(still.gap_points, alone.gap_points + still.still_points);
  EXPECT_EQ(still.explained_points, alone.explained_points);
  EXPECT_LT(still_bytes.size(), alone_bytes->size());
  auto decoded = Decode(still_bytes.data(), still_bytes.size(), map_.get());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_LE(bench::CompareFrames(now.xyz, decoded->cloud.xyz).hausdorff_m(), tol);

  EncodeReport other;
  std::vector<uint8_t> other_bytes;
  // The car 1 m away in x and y and 0.5 m higher in the frame before: every face the sensor sees
  // moved at least 0.5 m along its normal.
  const PointCloud moved =
      test::StreetFrame(test::StreetPose(3), {test::Box{{4, 2, -1.2}, {8, 3.8, 0.3}}});
  code_pair(moved, first, next, &other, &other_bytes);
  EXPECT_EQ(other.still_points, 0u);
  EXPECT_EQ(other_bytes, *alone_bytes);
  // Too long before (0.3 s), another sensor, another tolerance's match radius: nothing compared.
  code_pair(before, {1, kSecond - kSecond / 5, 0}, next, &other, &other_bytes);
  EXPECT_EQ(other_bytes, *alone_bytes);
  code_pair(before, {1, kSecond, 1}, next, &other, &other_bytes);
  EXPECT_EQ(other_bytes, *alone_bytes);
  // Off: the residual as without a frame before.
  p.still_m = 0;
  code_pair(before, first, next, &other, &other_bytes);
  EXPECT_EQ(other_bytes, *alone_bytes);
}

// Each sensor's latest frame is kept, whichever order the encoder threads finish them in, and one
// from a clock that went back (a restarted replay) replaces it; a frame is compared only with a
// frame before it, within the window, against the same map and match radius; Near is exact.
TEST(Codec, StillMemoryKeepsEachSensorsLatestFrame) {
  constexpr int64_t kMs = 1'000'000;
  auto frame = [](int64_t t_ms, uint64_t map = 7) {
    return std::make_shared<StillFrame>(map, t_ms * kMs, 0.1,
                                        std::vector<Eigen::Vector3d>{{1, 2, 3}, {-40, 5, 0.5}});
  };
  StillMemory memory;
  EXPECT_EQ(memory.Before(0, 7, 100 * kMs, 0.1), nullptr);
  memory.Keep(0, frame(1000));
  memory.Keep(0, frame(900));  // finished after the later one: not kept
  ASSERT_NE(memory.Before(0, 7, 1100 * kMs, 0.1), nullptr);
  EXPECT_EQ(memory.Before(0, 7, 1100 * kMs, 0.1)->timestamp_ns(), 1000 * kMs);
  EXPECT_NE(memory.Before(0, 7, 1250 * kMs, 0.1), nullptr);
  EXPECT_EQ(memory.Before(0, 7, 1251 * kMs, 0.1), nullptr);  // beyond kStillWindowNs
  EXPECT_EQ(memory.Before(0, 7, 1000 * kMs, 0.1), nullptr);  // not before it
  EXPECT_EQ(memory.Before(0, 8, 1100 * kMs, 0.1), nullptr);  // another map
  EXPECT_EQ(memory.Before(0, 7, 1100 * kMs, 0.2), nullptr);  // another match radius
  EXPECT_EQ(memory.Before(1, 7, 1100 * kMs, 0.1), nullptr);  // another sensor
  memory.Keep(0, frame(10));  // the clock went back by more than the window
  EXPECT_NE(memory.Before(0, 7, 100 * kMs, 0.1), nullptr);

  const std::shared_ptr<const StillFrame> f = frame(0);
  EXPECT_TRUE(f->Near({1, 2, 3}));
  EXPECT_TRUE(f->Near({1.0999, 2, 3}));
  EXPECT_FALSE(f->Near({1.1001, 2, 3}));
  EXPECT_TRUE(f->Near({-40, 5.05, 0.55}));
  EXPECT_FALSE(f->Near({-40, 5.08, 0.58}));
  EXPECT_FALSE(f->Near({1e300, 0, 0}));
}

// Spurious returns far away (a retro-reflector's ghost, a corrupt packet's finite garbage) cost
// neither the frame nor the map's memory: up to the octrees' span (2^21 cells of the residual
// precision, 42 km at 2 cm) the frame is coded against the map, its candidate ball capped at
// 300 m, and decodes within the bound; beyond it the encoder says so (the agent counts the frame
// as failed). Before the cap, a return at 20 km made a delta frame the decoder refused.
TEST_F(StreetMap, FarOutlierPointsAreCodedWithinTheBoundOrRefusedByName) {
  const Pose truth = test::StreetPose(3);
  for (float far : {400.0f, 2.0e4f, 1.0e7f, 1.0e30f}) {
    PointCloud frame = test::StreetFrame(truth);
    frame.push_back(Eigen::Vector3f(far, 1, 0), 0.5f);
    frame.push_back(Eigen::Vector3f(-1, -far / 2, far / 2), 0.5f);
    EncoderParams p;
    p.tolerance_m = 0.1;
    EncodeReport rep;
    auto dec = RoundTrip(frame, truth, p, map_.get(), &rep);
    if (far > 4.2e4f) {
      ASSERT_FALSE(dec.ok()) << far;
      EXPECT_EQ(dec.status().code(), Status::Code::kInvalidArgument) << far;
      EXPECT_NE(dec.status().message().find("span"), std::string::npos) << dec.status().ToString();
      continue;
    }
    ASSERT_TRUE(dec.ok()) << far << ": " << dec.status().ToString();
    EXPECT_FALSE(dec->intra) << far;
    EXPECT_GT(rep.explained_points, frame.size() / 2) << far;
    EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), 0.1) << far;
  }
}

TEST_F(StreetMap, EncodingIsDeterministicAndDecodingBitExact) {
  const PointCloud frame = test::StreetFrame(test::StreetPose(1));
  EncodeReport rep;
  std::vector<uint8_t> a, b;
  auto da = RoundTrip(frame, test::StreetPose(1), {}, map_.get(), &rep, &a);
  auto db = RoundTrip(frame, test::StreetPose(1), {}, map_.get(), &rep, &b);
  ASSERT_TRUE(da.ok() && db.ok());
  EXPECT_EQ(a, b);
  // Threads share the frame's work, not its bytes.
  for (int threads : {2, 5}) {
    EncoderParams p;
    p.threads = threads;
    auto threaded = Encode(frame, test::StreetPose(1), {7, 123, 1}, p, map_.get());
    ASSERT_TRUE(threaded.ok()) << threaded.status().ToString();
    EXPECT_EQ(*threaded, a) << threads << " threads";
    auto decoded = Decode(a.data(), a.size(), map_.get(), threads);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->cloud.xyz, da->cloud.xyz) << threads << " threads";
    EXPECT_EQ(decoded->cloud.intensity, da->cloud.intensity) << threads << " threads";
    EXPECT_EQ(decoded->source, da->source) << threads << " threads";
  }
  ASSERT_EQ(da->cloud.size(), db->cloud.size());
  EXPECT_EQ(0, std::memcmp(da->cloud.xyz.data(), db->cloud.xyz.data(),
                           da->cloud.size() * sizeof(Eigen::Vector3f)));
}

TEST(Codec, KittiIntraAndDeltaHoldTheBound) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok());
  auto map = EvenFramesMap(*drive, 0.2, "", true);
  ASSERT_TRUE(map);
  ASSERT_FALSE(map->codec_priors().empty());
  PointCloud frame = ReadPointCloudFile(drive->frame_paths[3]).value();
  RemoveNonFinite(&frame);
  Pose prior = drive->poses[3];
  prior.translation() += Eigen::Vector3d(0.2, -0.15, 0.05);
  prior.linear() = Eigen::AngleAxisd(0.009, Eigen::Vector3d::UnitZ()) * prior.linear();
  struct Case {
    double tol;
    bool intensity;
    bool with_map;
    double gap_factor;
  };
  size_t residual_without_split = 0;
  for (const Case& c :
       {Case{0.2, true, true, 2}, Case{0.3, false, true, 2}, Case{0.1, true, true, 0},
        Case{0.1, true, true, 2}, Case{0.1, true, false, 2}}) {
    EncoderParams p;
    p.tolerance_m = c.tol;
    p.intensity = c.intensity;
    p.gap_factor = c.gap_factor;
    EncodeReport rep;
    std::vector<uint8_t> bytes;
    auto dec = RoundTrip(frame, prior, p, c.with_map ? map.get() : nullptr, &rep, &bytes);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_EQ(dec->intra, !c.with_map);
    // Threads share the frame's work, not its bytes.
    p.threads = 3;
    auto threaded = Encode(frame, prior, {7, 123, 1}, p, c.with_map ? map.get() : nullptr);
    ASSERT_TRUE(threaded.ok()) << threaded.status().ToString();
    EXPECT_EQ(*threaded, bytes) << "3 threads, tolerance " << c.tol;
    auto decoded = Decode(bytes.data(), bytes.size(), c.with_map ? map.get() : nullptr, 3);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->cloud.xyz, dec->cloud.xyz) << "3 threads, tolerance " << c.tol;
    EXPECT_EQ(decoded->source, dec->source) << "3 threads, tolerance " << c.tol;
    const bench::FrameError e = bench::CompareFrames(frame.xyz, dec->cloud.xyz);
    EXPECT_LE(e.hausdorff_m(), c.tol) << "tolerance " << c.tol;
    if (c.with_map && c.tol >= 0.2) {
      EXPECT_GT(12.0 * double(frame.size()) / double(bytes.size()), 100.0);
    }
    // The split moves unexplained points between the two octrees only.
    const size_t gap_cells = size_t(std::count(dec->source.begin(), dec->source.end(), 2));
    EXPECT_EQ(bytes[4], 1) << "the encoder writes format version 1";
    if (!c.with_map || c.gap_factor == 0) {
      EXPECT_EQ(rep.gap_points, 0u);
      EXPECT_EQ(gap_cells, 0u);
    } else {
      EXPECT_GT(rep.gap_points, 1000u) << "KITTI road between the map's rings";
      EXPECT_GT(gap_cells, 0u);
      EXPECT_LE(gap_cells, rep.gap_points);
    }
    // KITTI's road between the map's rings lies on its ground profile: at T = 0.1 on the 0.2 m
    // map a large part of the gap class is coded in the surface sections (13782 of 31388 points
    // on this frame when the sections were introduced).
    if (c.with_map && c.tol == 0.1 && c.gap_factor > 0) {
      EXPECT_GT(rep.surface_points, rep.gap_points / 3);
    }
    EXPECT_LE(rep.surface_points, rep.gap_points);
    if (c.with_map && c.tol == 0.1) {
      if (c.gap_factor == 0) residual_without_split = rep.residual_points;
      EXPECT_EQ(rep.residual_points + rep.gap_points, residual_without_split);
    }
  }
}

// The codec priors (codec.h TrainPriors): learnt twice from the same drive they are the same bytes
// (so the map version is reproducible); the odd frames coded against the map that carries them
// decode within the bound and are smaller than against the same tiles without them; damaged
// priors are refused, by name.
TEST(Codec, KittiMapPriorsShrinkFramesAndAreChecked) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok());
  const std::string dir = test::ScratchDir() + "/map";
  auto flat = EvenFramesMap(*drive, 0.2, dir);
  ASSERT_TRUE(flat);
  ASSERT_TRUE(flat->codec_priors().empty());
  auto priors = TrainPriors({*drive}, 2, flat.get());
  ASSERT_TRUE(priors.ok()) << priors.status().ToString();
  EXPECT_EQ(TrainPriors({*drive}, 2, flat.get()).value(), *priors);
  // Header, then four streams: the map section's models and the residual, gap and surface octrees'.
  EXPECT_EQ(priors->size(), 6 + 4 * 5 + 3 * (kSelectionModels + 3 * kOctreeModels));
  ASSERT_TRUE(maps::SetCodecPriors(dir, *priors).ok());
  auto learnt = maps::OpenMap(dir, 0).value();
  EXPECT_EQ(learnt->codec_priors(), *priors);
  EXPECT_NE(learnt->version(), flat->version());
  EXPECT_EQ(learnt->voxel_count(), flat->voxel_count());
  EncoderParams p;
  p.tolerance_m = 0.2;
  size_t flat_bytes = 0, learnt_bytes = 0;
  for (size_t i = 1; i < drive->size(); i += 2) {
    PointCloud frame = ReadPointCloudFile(drive->frame_paths[i]).value();
    RemoveNonFinite(&frame);
    for (maps::RouteMap* m : {flat.get(), learnt.get()}) {
      std::vector<uint8_t> bytes;
      EncodeReport rep;
      auto dec = RoundTrip(frame, drive->poses[i], p, m, &rep, &bytes);
      ASSERT_TRUE(dec.ok()) << dec.status().ToString();
      EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), p.tolerance_m);
      (m == flat.get() ? flat_bytes : learnt_bytes) += bytes.size();
    }
  }
  EXPECT_LT(learnt_bytes, flat_bytes);

  PointCloud frame = ReadPointCloudFile(drive->frame_paths[3]).value();
  std::vector<uint8_t> short_by_one = *priors, one_more = *priors, zero_p = *priors;
  short_by_one.pop_back();
  one_more.push_back(0);
  zero_p[11] = zero_p[12] = 0;  // the first map model's probability
  std::vector<uint8_t> zero_uses = *priors;
  zero_uses[size_t(11 + 3 * kSelectionModels + 5 + 2)] = 33;  // the first residual model's uses
  for (const auto& [bytes, what] :
       {std::make_pair(std::vector<uint8_t>{'D', 'V', 'C', 'X', 1}, "bad magic"),
        std::make_pair(std::vector<uint8_t>{'D', 'V', 'C', 'P', 2}, "unsupported version"),
        std::make_pair(std::vector<uint8_t>{'D', 'V', 'C', 'P', 1, 3}, "expected 4 streams"),
        std::make_pair(short_by_one, "expected 11424 surface models"),
        std::make_pair(one_more, "trailing bytes"),
        std::make_pair(zero_p, "a map model state out of range"),
        std::make_pair(zero_uses, "a residual model state out of range")}) {
    ASSERT_TRUE(maps::SetCodecPriors(dir, bytes).ok());
    auto damaged = maps::OpenMap(dir, 0).value();
    auto enc = Encode(frame, drive->poses[3], {}, p, damaged.get());
    ASSERT_FALSE(enc.ok()) << what;
    EXPECT_EQ(enc.status().code(), Status::Code::kCorruption);
    EXPECT_NE(enc.status().message().find(std::string("codec priors: ") + what), std::string::npos)
        << enc.status().message();
  }
}

// A coarse tolerance puts every map voxel in a cell of its own in registration's 0.5 m grid, more
// cells than that grid's sizing hint: the encoder once looped forever here (its hash filled up).
TEST(Codec, KittiCoarseToleranceTerminatesWithinTheBound) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok());
  auto map = EvenFramesMap(*drive, 0.7);
  ASSERT_TRUE(map);
  PointCloud frame = ReadPointCloudFile(drive->frame_paths[3]).value();
  RemoveNonFinite(&frame);
  EncoderParams p;
  p.tolerance_m = 0.7;
  EncodeReport rep;
  std::vector<uint8_t> bytes;
  auto dec = RoundTrip(frame, drive->poses[3], p, map.get(), &rep, &bytes);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_FALSE(rep.intra_fallback);
  EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), 0.7);
}

TEST_F(StreetMap, GapSplitHoldsTheBoundOnPerturbedFrames) {
  const double tol = 0.1;
  const uint32_t seed = 1;
  const PointCloud frame = PerturbedStreetFrame(seed, tol);
  size_t unexplained = 0, last_gap = 0;
  for (double gap_factor : {0.0, 2.0, 3.0}) {
    EncoderParams p;
    p.tolerance_m = tol;
    p.gap_factor = gap_factor;
    EncodeReport rep;
    std::vector<uint8_t> bytes;
    auto dec = RoundTrip(frame, test::StreetPose(1 + seed), p, map_.get(), &rep, &bytes);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    ASSERT_FALSE(dec->intra);
    EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), tol)
        << "gap_factor " << gap_factor;
    EXPECT_EQ(rep.explained_points + rep.residual_points + rep.gap_points, frame.size());
    const auto gap_cells = std::count(dec->source.begin(), dec->source.end(), 2);
    bool has_gap_section = false;
    for (const auto& [name, n] : dec->section_bytes) has_gap_section |= name == "gap";
    // Delta frames always carry the gap sections, empty when the split is off.
    EXPECT_TRUE(has_gap_section);
    if (gap_factor == 0) {
      unexplained = rep.residual_points;
      EXPECT_EQ(rep.gap_points, 0u);
      EXPECT_EQ(gap_cells, 0);
    } else {
      EXPECT_EQ(rep.residual_points + rep.gap_points, unexplained);
      EXPECT_GE(rep.gap_points, last_gap);
      EXPECT_GT(rep.gap_points, frame.size() / 50);
      EXPECT_GT(rep.residual_points, frame.size() / 50);
      EXPECT_GT(gap_cells, 0);
    }
    last_gap = rep.gap_points;
    // Decoded order: map voxels, residual cells, gap cells.
    EXPECT_TRUE(std::is_sorted(dec->source.begin(), dec->source.end()));
  }
}

}  // namespace
}  // namespace dv::codec
