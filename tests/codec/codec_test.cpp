#include "dejaview/codec/codec.h"

#include <gtest/gtest.h>

#include <Eigen/Geometry>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "cpu/kernels.h"
#include "fill.h"
#include "hot_paths.h"
#include "map_coder.h"
#include "octree_coder.h"
#include "registration.h"
#ifdef __SSE2__
#include "cpu/sse2.h"  // NeighbourhoodKeysTwoAtATimeAreNeighbourhoodKeys
#endif

#include "../maps/scene.h"
#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/fork_join.h"
#include "dejaview/bench/metrics.h"
#include "dejaview/sim/simulate.h"
#include "testutil.h"

namespace dv::codec {
namespace {

// The CPU backend the tests' hot paths run on: the best variants of this CPU, as an encoder's.
const HotPaths& Cpu() {
  static const std::unique_ptr<HotPaths> cpu = MakeCpuHotPaths();
  return *cpu;
}

// Exact Hausdorff in double, both ways (brute force: small clouds only).
double BruteHausdorff(const std::vector<Eigen::Vector3f>& a,
                      const std::vector<Eigen::Vector3f>& b) {
  auto one_way = [](const auto& p, const auto& q) {
    double worst = 0;
    for (const Eigen::Vector3f& x : p) {
      double best = 1e300;
      for (const Eigen::Vector3f& y : q)
        best = std::min(best, (x.cast<double>() - y.cast<double>()).squaredNorm());
      worst = std::max(worst, best);
    }
    return std::sqrt(worst);
  };
  return std::max(one_way(a, b), one_way(b, a));
}

// Brute force over the candidates whose x lies within r of a point's, found by binary search in
// an x-sorted copy: a candidate farther along x cannot be within r, so the oracle stays exact and
// independent of the grids under test, and takes seconds instead of minutes under ASan.
struct XSweep {
  explicit XSweep(const std::vector<Eigen::Vector3f>& points) : pts(points), order(pts.size()) {
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return pts[a].x() < pts[b].x(); });
  }
  // Calls f(j) for every candidate j with |x_j - p.x| <= r (and a few more: the slack keeps
  // rounding of the band's ends from dropping one at the edge).
  template <typename F>
  void ForNear(const Eigen::Vector3d& p, double r, F f) const {
    const double lo = p.x() - r - 1e-6, hi = p.x() + r + 1e-6;
    auto it = std::lower_bound(order.begin(), order.end(), lo,
                               [&](size_t j, double v) { return double(pts[j].x()) < v; });
    for (; it != order.end() && double(pts[*it].x()) <= hi; ++it) f(*it);
  }
  const std::vector<Eigen::Vector3f>& pts;
  std::vector<size_t> order;
};

PointCloud RandomFrame(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-40, 40), i01(0, 1);
  std::normal_distribution<float> cluster(0, 0.3f);
  PointCloud c;
  for (size_t i = 0; i < n; ++i) {
    if (i % 2) {
      c.push_back(Eigen::Vector3f(u(rng), u(rng), u(rng) / 8), i01(rng));
    } else {
      const float cx = float(i % 7) * 3;
      c.push_back(Eigen::Vector3f(cx + cluster(rng), cluster(rng), cluster(rng) - 1), i01(rng));
    }
  }
  return c;
}

// A frame's sections as (id, body), cut out of the container by the lengths DecodeHeader reports
// (bodies follow the section table in its order, then the CRC), and Join, the inverse with a
// fresh CRC: a test can damage one section behind a valid checksum.
struct Sections {
  std::vector<uint8_t> prefix;  // the header before the section count
  std::vector<std::pair<uint8_t, std::vector<uint8_t>>> list;

  std::vector<uint8_t>& body(uint8_t id) {
    return std::find_if(list.begin(), list.end(), [&](const auto& x) { return x.first == id; })
        ->second;
  }
  void erase(uint8_t id) {
    list.erase(
        std::find_if(list.begin(), list.end(), [&](const auto& x) { return x.first == id; }));
  }
};
// Section ids of docs/delta-format.md.
constexpr uint8_t kGapId = 6, kGapIntensityId = 7, kSurfaceId = 8, kSurfaceIntensityId = 9,
                  kFillId = 10;

Sections Split(const std::vector<uint8_t>& bytes) {
  const std::map<std::string, uint8_t> ids = {
      {"map", 1},           {"residual", 2},        {"residual_intensity", 3},
      {"intra", 4},         {"intra_intensity", 5}, {"gap", 6},
      {"gap_intensity", 7}, {"surface", 8},         {"surface_intensity", 9},
      {"fill", 10}};
  const DecodedFrame h = DecodeHeader(bytes.data(), bytes.size()).value();
  ByteWriter table;
  size_t body_bytes = 0;
  for (const auto& [name, n] : h.section_bytes) {
    table.U8(ids.at(name));
    table.Varint(n);
    body_bytes += n;
  }
  size_t at = bytes.size() - 4 - body_bytes;
  const size_t table_at = at - table.size();
  EXPECT_TRUE(
      std::equal(table.buffer().begin(), table.buffer().end(), bytes.begin() + long(table_at)));
  Sections s;
  s.prefix.assign(bytes.begin(), bytes.begin() + long(table_at) - 1);
  for (const auto& [name, n] : h.section_bytes) {
    s.list.emplace_back(
        ids.at(name), std::vector<uint8_t>(bytes.begin() + long(at), bytes.begin() + long(at + n)));
    at += n;
  }
  return s;
}

std::vector<uint8_t> Join(const Sections& s) {
  ByteWriter w;
  w.Bytes(s.prefix.data(), s.prefix.size());
  w.U8(uint8_t(s.list.size()));
  for (const auto& [id, body] : s.list) {
    w.U8(id);
    w.Varint(body.size());
  }
  for (const auto& x : s.list) w.Bytes(x.second.data(), x.second.size());
  w.U32(crc32c::Mask(crc32c::Value(w.buffer().data(), w.size())));
  return w.Take();
}

// One frame with an encoder (decoder) of its own: what a test of one frame needs.
StatusOr<std::vector<uint8_t>> Encode(const PointCloud& frame, const Pose& prior,
                                      const FrameInfo& info, const EncoderParams& p,
                                      maps::RouteMap* map, EncodeReport* rep = nullptr) {
  return Encoder(map).Encode(frame, prior, info, p, rep);
}
StatusOr<DecodedFrame> Decode(const uint8_t* data, size_t size, maps::RouteMap* map,
                              int threads = 1) {
  return Decoder(map).Decode(data, size, threads);
}

StatusOr<DecodedFrame> RoundTrip(const PointCloud& frame, const Pose& prior, EncoderParams p,
                                 maps::RouteMap* map, EncodeReport* rep,
                                 std::vector<uint8_t>* bytes_out = nullptr) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Encode(frame, prior, {7, 123, 1}, p, map, rep));
  if (bytes_out) *bytes_out = bytes;
  return Decode(bytes.data(), bytes.size(), map);
}

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
  for (double f : {-0.1, 1.5, double(NAN)}) {
    p.select_factor = f;
    auto bad = Encode(frame, Pose::Identity(), {}, p, nullptr);
    EXPECT_NE(bad.status().message().find("select_factor"), std::string::npos) << f;
  }
  p.select_factor = 0.6;
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

class StreetMap : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::ScratchDir();
    drive_ = test::WriteStreetDrive(root_ + "/drive", {0, 2, 4, 6});
    maps::BuildOptions opt;
    opt.resolution_m = 0.1;
    ASSERT_TRUE(maps::BuildMap({drive_}, opt, root_ + "/map").ok());
    map_ = maps::OpenMap(root_ + "/map", 0).value();
  }
  // The street map with committed codec priors (golden_priors.bin): learnt afresh, they would
  // follow every change of the encoder's choices, and the map's version with them, and the
  // committed golden frames would no longer decode.
  std::unique_ptr<maps::RouteMap> GoldenPriorsMap() {
    maps::BuildOptions opt;
    opt.resolution_m = 0.1;
    const std::string dir = root_ + "/golden_priors_map";
    const Status built = maps::BuildMap({drive_}, opt, dir);
    EXPECT_TRUE(built.ok()) << built.ToString();
    auto bytes = ReadFileBytes(test::FixturePath("golden_priors.bin"));
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    if (!built.ok() || !bytes.ok()) return nullptr;
    const Status set = maps::SetCodecPriors(dir, *bytes);
    EXPECT_TRUE(set.ok()) << set.ToString();
    auto map = maps::OpenMap(dir, 0);
    EXPECT_TRUE(map.ok()) << map.status().ToString();
    return map.ok() && set.ok() ? std::move(*map) : nullptr;
  }
  // A damaged frame (Sections, Join) that the decoder refuses as corrupt, saying `what`; the
  // container's own checks (a section in the wrong kind of frame) fail for `dejaview inspect` too.
  // The street frame at pose 2 with a car, its candidates in a 60 m ball, and the classification's
  // marks at a 0.1 m bound (selection radius 0.6 of it): the selection and fill tests' set-up.
  struct Classified {
    Pose truth = test::StreetPose(2);
    PointCloud frame;
    Candidates cand;
    CandidateMarks marks;
    double bound = 0.1 - 1e-4;
  };
  void ClassifyStreet(Classified* c) {
    c->frame = test::StreetFrame(c->truth, {test::CarAt(4, 2)});
    const Eigen::Matrix3d R = c->truth.linear();
    const Eigen::Vector3d t = c->truth.translation();
    ASSERT_TRUE(DeriveCandidates(Cpu(), map_.get(), R, t, 60, &c->cand).ok());
    const double res = map_->resolution_m(), select = 0.6 * c->bound;
    const int nb = int(std::ceil(c->bound / res));
    const SortedGrid grid(VoxelKeys(c->cand.voxels), nb, 0);
    std::vector<uint8_t> explained;
    ASSERT_TRUE(Cpu()
                    .ClassifyPoints(
                        {&c->frame.xyz, RigidOf(R, t), &c->cand.sensor, &grid, nullptr, res, nb},
                        {c->bound * c->bound, select * select}, {&explained, &c->marks})
                    .ok());
  }
  void ExpectCorrupt(const Sections& damaged, const std::string& what) {
    const std::vector<uint8_t> b = Join(damaged);
    auto d = Decode(b.data(), b.size(), map_.get());
    ASSERT_FALSE(d.ok()) << what;
    EXPECT_EQ(d.status().code(), Status::Code::kCorruption);
    EXPECT_NE(d.status().message().find(what), std::string::npos) << d.status().message();
    if (what.find("not valid") != std::string::npos) {
      EXPECT_FALSE(DecodeHeader(b.data(), b.size()).ok());
    }
    // Sections decoded side by side report what one thread reports.
    auto threaded = Decode(b.data(), b.size(), map_.get(), 2);
    ASSERT_FALSE(threaded.ok()) << what;
    EXPECT_EQ(threaded.status().message(), d.status().message());
  }
  // Section `name` (id) belongs in delta frames: an intra frame given `body` as that section is
  // refused, by the decoder and by `dejaview inspect`.
  void ExpectOnlyInDelta(Sections intra, uint8_t id, const std::string& name,
                         const std::vector<uint8_t>& body) {
    intra.list.emplace_back(id, body);
    ExpectCorrupt(intra, "section " + name + " is not valid in an intra frame");
  }
  std::string root_;
  Drive drive_;
  std::unique_ptr<maps::RouteMap> map_;
};

// A search that keeps its look-ups between calls (NeighbourhoodCache; fine, and coarse on the finer
// grids) finds what one without finds, over a registration's kind of sequence: millimetre steps
// (most points keep their voxel), a step of decimetres (many change), and a jump of a kilometre
// (every point off the map), then back; and the cache is really used: between the millimetre steps
// it looks up few points again.
TEST_F(StreetMap, CorrespondencesFromTheCacheMatchFreshLookUps) {
  const Pose T = test::StreetPose(3);
  Candidates cand;
  ASSERT_TRUE(DeriveCandidates(Cpu(), map_.get(), T.linear(), T.translation(), 30, &cand).ok());
  std::vector<Eigen::Vector3d> map_pts;
  for (const maps::MapVoxel& v : cand.voxels) map_pts.push_back(maps::Representative(v, 0.1));
  const PointCloud frame = test::StreetFrame(T, {});
  std::vector<Eigen::Vector3d> source;
  for (size_t i = 0; i < frame.size(); i += 37) source.push_back(frame.xyz[i].cast<double>());
  ASSERT_GT(source.size(), 300u);
  // Coarse points after the fine ones, as registration's: every third representative.
  const size_t first = map_pts.size();
  for (size_t i = 0; i < first; i += 3) map_pts.push_back(map_pts[i]);
  auto search = Cpu().CreateSearch(map_pts, cand.voxels, cand.index, 0.1, 3.0, 64, 2);
  ASSERT_TRUE(search.ok());
  NeighbourhoodCache cache;
  // And the coarse searches on the 1.5 and the 0.75 m grid (reaches 1.2 and 0.5 m).
  NeighbourhoodCache coarse_cache[2], both_grids;
  const double coarse_reach[2] = {1.2, 0.5};
  size_t found = 0;
  // x offsets (m), each with a yaw of a tenth of it (rad) below 1 m.
  const double steps[] = {0, 0.002, 0.004, 0.15, 1000, 0.15, 0.151, 0.153};
  for (double dx : steps) {
    SCOPED_TRACE("x offset " + std::to_string(dx));
    Pose moved = T;
    moved.translation().x() += dx;
    moved.linear() = Eigen::AngleAxisd(dx < 1 ? dx / 10 : 0, Eigen::Vector3d::UnitZ()) * T.linear();
    const kernels::Rigid Tk = RigidOf(moved.linear(), moved.translation());
    std::vector<int32_t> fresh, cached;
    const size_t before = cache.LookedUp();
    ASSERT_TRUE((*search)->Find(source, Tk, true, 0.01, &fresh).ok());
    ASSERT_TRUE((*search)->Find(source, Tk, true, 0.01, &cached, &cache).ok());
    EXPECT_EQ(cached, fresh);
    found += size_t(std::count_if(fresh.begin(), fresh.end(), [](int32_t j) { return j >= 0; }));
    for (int c = 0; c < 2; ++c) {
      const double r2 = coarse_reach[c] * coarse_reach[c];
      ASSERT_TRUE((*search)->Find(source, Tk, false, r2, &fresh).ok());
      ASSERT_TRUE((*search)->Find(source, Tk, false, r2, &cached, &coarse_cache[c]).ok());
      EXPECT_EQ(cached, fresh) << "coarse, reach " << coarse_reach[c];
      // One cache for both grids: it starts over at each change of grid.
      ASSERT_TRUE((*search)->Find(source, Tk, false, r2, &cached, &both_grids).ok());
      EXPECT_EQ(cached, fresh) << "coarse, one cache, reach " << coarse_reach[c];
    }
    // After a step of millimetres most points keep their 0.1 m voxel, and their look-up.
    if (dx == 0.002 || dx == 0.004 || dx == 0.151 || dx == 0.153) {
      EXPECT_LT(cache.LookedUp() - before, source.size() / 4);
    }
  }
  EXPECT_GT(found, source.size()) << "too few correspondences for the comparison to mean much";
}

// The coarse correspondence search's finer grids (hot_paths.h, coarse_levels) answer as the coarse
// grid does, and both as a brute-force search: the nearest map point within the reach, the
// lowest index among equals, for reaches up to the coarse voxel.
TEST_F(StreetMap, CoarseCorrespondencesOnFinerGridsMatchTheCoarseGrid) {
  const Pose T = test::StreetPose(3);
  Candidates cand;
  ASSERT_TRUE(DeriveCandidates(Cpu(), map_.get(), T.linear(), T.translation(), 30, &cand).ok());
  // Fine points: the representatives; coarse points: every third of them, then the same
  // points again, so that some distances tie exactly.
  std::vector<Eigen::Vector3d> map_pts;
  for (const maps::MapVoxel& v : cand.voxels) map_pts.push_back(maps::Representative(v, 0.1));
  const size_t first = map_pts.size();
  for (size_t i = 0; i < first; i += 3) map_pts.push_back(map_pts[i]);
  for (size_t i = 0; i < first; i += 3) map_pts.push_back(map_pts[i]);
  const PointCloud frame = test::StreetFrame(T, {});
  std::vector<Eigen::Vector3d> source;
  for (size_t i = 0; i < frame.size(); i += 97) source.push_back(frame.xyz[i].cast<double>());
  ASSERT_GT(source.size(), 100u);
  const kernels::Rigid Tk = RigidOf(T.linear(), T.translation());
  auto one = Cpu().CreateSearch(map_pts, cand.voxels, cand.index, 0.1, 3.0, 1 << 20, 0);
  auto three = Cpu().CreateSearch(map_pts, cand.voxels, cand.index, 0.1, 3.0, 1 << 20, 2);
  ASSERT_TRUE(one.ok() && three.ok());
  for (double reach : {0.3, 0.7, 1.4, 2.9}) {
    SCOPED_TRACE("reach " + std::to_string(reach));
    std::vector<int32_t> a, b;
    ASSERT_TRUE((*one)->Find(source, Tk, false, reach * reach, &a).ok());
    ASSERT_TRUE((*three)->Find(source, Tk, false, reach * reach, &b).ok());
    EXPECT_EQ(a, b);
    size_t found = 0;
    for (size_t s = 0; s < source.size(); ++s) {
      Eigen::Vector3d p;
      kernels::Transform(Tk, source[s].data(), p.data());
      double best = reach * reach;
      int32_t best_i = -1;
      for (size_t j = first; j < map_pts.size(); ++j) {
        const double d2 = kernels::Dist2(map_pts[j].data(), p.data());
        if (d2 < best) {  // in index order: the first among equals is the lowest
          best = d2;
          best_i = int32_t(j);
        }
      }
      ASSERT_EQ(a[s], best_i) << "source point " << s;
      found += best_i >= 0;
    }
    EXPECT_GT(found, source.size() / 2);
  }
}

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

// RegisterFrame with a map keeps what it derived from the map's voxels in a RegistrationBall
// while later frames' balls lie inside its wider ball, and the frames it serves register exactly
// as against a fresh build of that ball: the patch normals it found for one frame serve the next
// unchanged. A prior beyond kRegistrationReuseM, or a larger radius, builds a new one.
TEST_F(StreetMap, RegistrationKeepsItsMapWhileTheBallFits) {
  auto prior_at = [](double x) {
    Pose prior = test::StreetPose(x);
    prior.translation() += Eigen::Vector3d(0.12, -0.1, 0.04);
    prior.linear() = Eigen::AngleAxisd(0.006, Eigen::Vector3d::UnitZ()) * prior.linear();
    return prior;
  };
  const double radius = 30;
  const Pose first = prior_at(3);
  const PointCloud frame3 = test::StreetFrame(test::StreetPose(3), {});
  RegistrationBall kept;
  // The ball kept: its centre key and reach; a new one is another ball.
  auto ball_kept = [&] {
    const Candidates* c = kept.kept().candidates;
    return c ? std::array<int, 4>{c->centre.x(), c->centre.y(), c->centre.z(), c->reach}
             : std::array<int, 4>{0, 0, 0, -2};
  };
  ASSERT_EQ(kept.kept().candidates, nullptr);
  auto reg3 = RegisterFrame(Cpu(), frame3.xyz, map_.get(), &kept, first, radius);
  ASSERT_TRUE(reg3.ok()) << reg3.status().ToString();
  EXPECT_TRUE(reg3->converged);
  const std::array<int, 4> built = ball_kept();
  ASSERT_NE(built[3], -2);

  // 6 m on: the same ball serves, and gives what a fresh build of it gives.
  const Pose second = prior_at(9);
  const PointCloud frame9 = test::StreetFrame(test::StreetPose(9), {});
  auto reg9 = RegisterFrame(Cpu(), frame9.xyz, map_.get(), &kept, second, radius);
  ASSERT_TRUE(reg9.ok()) << reg9.status().ToString();
  EXPECT_EQ(ball_kept(), built);
  Candidates ball;
  ASSERT_TRUE(DeriveCandidates(Cpu(), map_.get(), first.linear(), first.translation(),
                               radius + kRegistrationReuseM, &ball, 0)
                  .ok());
  auto fresh = RegisterFrame(Cpu(), frame9.xyz, ball, second);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_TRUE(reg9->converged);
  EXPECT_EQ(reg9->converged, fresh->converged);
  EXPECT_EQ(reg9->correspondences, fresh->correspondences);
  EXPECT_EQ(reg9->T_map_sensor.matrix(), fresh->T_map_sensor.matrix());
  const Pose err = test::StreetPose(9).inverse() * reg9->T_map_sensor;
  EXPECT_LT(TranslationNorm(err), 0.03);

  // 12 m from where it was built: a new ball.
  auto reg15 = RegisterFrame(Cpu(), test::StreetFrame(test::StreetPose(15), {}).xyz, map_.get(),
                             &kept, prior_at(15), radius);
  ASSERT_TRUE(reg15.ok()) << reg15.status().ToString();
  const std::array<int, 4> rebuilt = ball_kept();
  EXPECT_NE(rebuilt, built);
  // Where it was built, a radius it can hold keeps it, one it cannot makes a new one.
  ASSERT_TRUE(RegisterFrame(Cpu(), frame9.xyz, map_.get(), &kept, prior_at(15), radius + 5).ok());
  EXPECT_EQ(ball_kept(), rebuilt);
  ASSERT_TRUE(RegisterFrame(Cpu(), frame9.xyz, map_.get(), &kept, prior_at(15),
                            radius + kRegistrationReuseM + 1)
                  .ok());
  EXPECT_NE(ball_kept(), rebuilt);
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

TEST_F(StreetMap, CorruptTruncatedAndWrongMapInputsAreRejected) {
  const PointCloud frame = test::StreetFrame(test::StreetPose(5));
  auto bytes = Encode(frame, test::StreetPose(5), {}, {}, map_.get()).value();
  ASSERT_TRUE(Decode(bytes.data(), bytes.size(), map_.get()).ok());

  for (size_t n = 0; n < bytes.size(); n += 1 + n / 3) {
    auto d = Decode(bytes.data(), n, map_.get());
    ASSERT_FALSE(d.ok()) << "truncated to " << n;
    EXPECT_EQ(d.status().code(), Status::Code::kCorruption);
  }
  for (size_t i = 0; i < bytes.size(); i += 7) {
    auto copy = bytes;
    copy[i] ^= 0x10;
    ASSERT_FALSE(Decode(copy.data(), copy.size(), map_.get()).ok()) << "flipped byte " << i;
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_NE(Decode(longer.data(), longer.size(), map_.get()).status().message().find("trailing"),
            std::string::npos);
  auto truncated = Decode(bytes.data(), bytes.size() - 10, map_.get());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status().message();

  auto no_map = Decode(bytes.data(), bytes.size(), nullptr);
  EXPECT_NE(no_map.status().message().find(map_->version()), std::string::npos);
  const Drive other = test::WriteStreetDrive(root_ + "/other", {0, 3});
  maps::BuildOptions opt;
  opt.resolution_m = 0.1;
  ASSERT_TRUE(maps::BuildMap({other}, opt, root_ + "/other_map").ok());
  auto other_map = maps::OpenMap(root_ + "/other_map", 0).value();
  auto wrong = Decode(bytes.data(), bytes.size(), other_map.get());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("coded against map " + map_->version()),
            std::string::npos)
      << wrong.status().message();
}

// The pseudo-revisit map of a drive (KITTI or simulated): its even frames, at 0.2 m unless told.
// Into `dir`, or a fresh scratch directory when empty.
// With priors, it carries the codec priors as `dejaview map build` writes them.
std::unique_ptr<maps::RouteMap> EvenFramesMap(const Drive& drive, double resolution_m = 0.2,
                                              std::string dir = "", bool priors = false) {
  if (dir.empty()) dir = test::ScratchDir() + "/map";
  maps::BuildOptions opt;
  opt.resolution_m = resolution_m;
  opt.every = 2;
  const Status built =
      priors ? BuildMapWithPriors({drive}, opt, dir) : maps::BuildMap({drive}, opt, dir);
  EXPECT_TRUE(built.ok()) << built.ToString();
  auto map = maps::OpenMap(dir, 64 << 20);
  EXPECT_TRUE(map.ok()) << map.status().ToString();
  return map.ok() ? std::move(*map) : nullptr;
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

// NormalSums' H and b, built from sums, against the products they stand for: w Jn^T Jn and
// w Jn^T rn for plane matches, w J^T J and w J^T r for point matches, J = [I, -[p]x].
TEST(Codec, NormalSumsMatchTheJacobianProducts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> coord(-80, 80), unit(-1, 1), weight(0.01, 1);
  for (int trial = 0; trial < 50; ++trial) {
    NormalSums sums, even, odd;  // every match; and split in two, merged by Add
    Eigen::Matrix<double, 6, 6> H = Eigen::Matrix<double, 6, 6>::Zero();
    Eigen::Matrix<double, 6, 1> b = Eigen::Matrix<double, 6, 1>::Zero();
    for (int m = 0; m < 40; ++m) {
      const Eigen::Vector3d p(coord(rng), coord(rng), coord(rng) / 10);
      Eigen::Matrix<double, 3, 6> J;
      J.leftCols<3>().setIdentity();
      J.rightCols<3>() << 0, p.z(), -p.y(), -p.z(), 0, p.x(), p.y(), -p.x(), 0;  // -[p]x
      const double w = weight(rng);
      if (m % 3 == 0) {
        const Eigen::Vector3d n = Eigen::Vector3d(unit(rng), unit(rng), unit(rng)).normalized();
        const double rn = unit(rng) / 4;
        const Eigen::Matrix<double, 1, 6> Jn = n.transpose() * J;
        H += w * Jn.transpose() * Jn;
        b += w * Jn.transpose() * rn;
        sums.AddPlane(p, n, rn, w);
        (m % 2 ? odd : even).AddPlane(p, n, rn, w);
      } else {
        const Eigen::Vector3d r(unit(rng) / 4, unit(rng) / 4, unit(rng) / 4);
        H += w * J.transpose() * J;
        b += w * J.transpose() * r;
        sums.AddPoint(p, r, w);
        (m % 2 ? odd : even).AddPoint(p, r, w);
      }
    }
    even.Add(odd);
    for (const NormalSums* x : {&sums, &even}) {
      ASSERT_EQ(x->count(), 40u);
      Eigen::Matrix<double, 6, 6> H_sums;
      Eigen::Matrix<double, 6, 1> b_sums;
      x->Build(&H_sums, &b_sums);
      EXPECT_LE((H_sums - H).cwiseAbs().maxCoeff(), 1e-12 * H.cwiseAbs().maxCoeff()) << trial;
      EXPECT_LE((b_sums - b).cwiseAbs().maxCoeff(), 1e-12 * b.cwiseAbs().maxCoeff()) << trial;
    }
  }
}

// Registration corrects decimetres and more than a degree: priors off by three times the
// protocol's noise (0.45 m, 0.35 m, 0.1 m and 1.5 degrees of yaw) come back to centimetres of the
// ground-truth pose (itself good to about a centimetre). On the 0.5 m map the coarse stage finds
// too few planar patches among sparse rings and matches points as well (it returned the prior
// when it did not).
TEST(Codec, KittiRegistrationCorrectsDecimetresAndDegrees) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok());
  for (double resolution : {0.1, 0.5}) {
    SCOPED_TRACE("map resolution " + std::to_string(resolution));
    auto map = EvenFramesMap(*drive, resolution);
    ASSERT_TRUE(map);
    for (size_t i : {3, 7}) {
      PointCloud frame = ReadPointCloudFile(drive->frame_paths[i]).value();
      RemoveNonFinite(&frame);
      const Pose& truth = drive->poses[i];
      for (double sign : {1.0, -1.0}) {
        Pose prior = truth;
        prior.translation() += sign * Eigen::Vector3d(0.45, -0.35, 0.1);
        prior.linear() =
            Eigen::AngleAxisd(sign * 1.5 * M_PI / 180, Eigen::Vector3d::UnitZ()) * prior.linear();
        Candidates c;
        ASSERT_TRUE(
            DeriveCandidates(Cpu(), map.get(), prior.linear(), prior.translation(), 85, &c, 0)
                .ok());
        auto reg = RegisterFrame(Cpu(), frame.xyz, c, prior);
        ASSERT_TRUE(reg.ok()) << reg.status().ToString();
        EXPECT_TRUE(reg->converged) << "frame " << i << " sign " << sign;
        const Pose err = truth.inverse() * reg->T_map_sensor;
        EXPECT_LT(TranslationNorm(err), 0.05) << "frame " << i << " sign " << sign;
        EXPECT_LT(RotationAngleRad(err), 0.25 * M_PI / 180) << "frame " << i << " sign " << sign;
        // With a second thread searching half of each source (a KITTI frame's subsamples are
        // large enough to split), the same pose to the last bit.
        if (sign > 0) {
          RegistrationBall one, two;
          auto on_one = RegisterFrame(Cpu(), frame.xyz, map.get(), &one, prior, 85, 1, 1);
          auto on_two = RegisterFrame(Cpu(), frame.xyz, map.get(), &two, prior, 85, 1, 2);
          ASSERT_TRUE(on_one.ok() && on_two.ok());
          EXPECT_TRUE(on_one->T_map_sensor.matrix() == on_two->T_map_sensor.matrix())
              << "frame " << i;
          EXPECT_EQ(on_one->correspondences, on_two->correspondences) << "frame " << i;
        }
      }
    }
  }
}

// A straight simulated street (ground, kerbs, facades, poles), the map from the even frames:
// priors off sideways and in yaw the way a drifting localiser is come back to the truth. Matched
// point to point to the first 16 map points of each 3 m cell, the coarse stage left all 12 cases
// 0.16-0.25 m and 0.52-0.73 degrees off here (the along-road valley of a street); matched to
// planes it does not.
TEST(Codec, SimulatedStreetRegistrationLeavesTheAlongRoadValley) {
  sim::SimOptions o;
  const std::string scratch = test::ScratchDir();
  o.out_dir = scratch + "/street";
  o.frames = 12;
  o.seed = 7;
  o.threads = 1;
  auto lidar = sim::LidarPreset("hdl64");
  ASSERT_TRUE(lidar.ok());
  o.lidar = *lidar;
  ASSERT_TRUE(sim::Simulate(o, nullptr).ok());
  auto drive = OpenDrive(o.out_dir + "/day_00");
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  auto map = EvenFramesMap(*drive, 0.1, scratch + "/map");
  ASSERT_TRUE(map);
  for (size_t i = 1; i < drive->frame_paths.size(); i += 2) {
    PointCloud frame = ReadPointCloudFile(drive->frame_paths[i]).value();
    const Pose& truth = drive->poses[i];
    for (double sign : {1.0, -1.0}) {
      Pose prior = truth;
      prior.translation() += truth.linear() * Eigen::Vector3d(0.1, sign * 0.35, 0.05);
      prior.linear() =
          Eigen::AngleAxisd(sign * 0.8 * M_PI / 180, Eigen::Vector3d::UnitZ()) * prior.linear();
      Candidates c;
      ASSERT_TRUE(
          DeriveCandidates(Cpu(), map.get(), prior.linear(), prior.translation(), 85, &c, 0).ok());
      auto reg = RegisterFrame(Cpu(), frame.xyz, c, prior);
      ASSERT_TRUE(reg.ok()) << reg.status().ToString();
      const Pose err = truth.inverse() * reg->T_map_sensor;
      EXPECT_LT(TranslationNorm(err), 0.03) << "frame " << i << " sign " << sign;
      EXPECT_LT(RotationAngleRad(err), 0.05 * M_PI / 180) << "frame " << i << " sign " << sign;
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

// The bitstream is pinned: the encoder writes the committed files byte for byte (with and without
// the AVX2 paths), and each decodes within its bound. An intra frame, a delta frame against the
// map without codec priors, and one against the map with the committed priors.
// DEJAVIEW_UPDATE_GOLDEN=1 rewrites them; until the format's first release a format change
// replaces the files, it does not add a version.
TEST_F(StreetMap, GoldenFilesPinTheBitstream) {
  const PointCloud frame = test::StreetFrame(test::StreetPose(3), {test::CarAt(5, 3)});
  const std::unique_ptr<maps::RouteMap> priors = GoldenPriorsMap();
  ASSERT_TRUE(priors);
  ASSERT_FALSE(priors->codec_priors().empty());
  ASSERT_TRUE(map_->codec_priors().empty());
  struct Golden {
    const char* name;
    maps::RouteMap* map;
  };
  for (const Golden& g :
       {Golden{"golden_intra.dvd", nullptr}, Golden{"golden_delta_without_priors.dvd", map_.get()},
        Golden{"golden_delta.dvd", priors.get()}}) {
    const std::string path = test::FixturePath(g.name);
    EncoderParams p;
    p.tolerance_m = 0.15;
    auto bytes = Encode(frame, test::StreetPose(3), {42, 1000, 0}, p, g.map).value();
    if (std::getenv("DEJAVIEW_UPDATE_GOLDEN")) {
      ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
    }
    auto golden = ReadFileBytes(path);
    ASSERT_TRUE(golden.ok()) << golden.status().ToString();
    EXPECT_EQ(bytes, *golden) << g.name << " differs from the committed bitstream";
    // Without the AVX2 paths (projection, classification), as on a CPU without AVX2.
    AllowAvx2(false);
    auto sse2 = Encode(frame, test::StreetPose(3), {42, 1000, 0}, p, g.map);
    AllowAvx2(true);
    ASSERT_TRUE(sse2.ok());
    EXPECT_EQ(*sse2, *golden) << g.name << " differs without AVX2";
    auto dec = Decode(golden->data(), golden->size(), g.map);
    ASSERT_TRUE(dec.ok()) << g.name << ": " << dec.status().ToString();
    EXPECT_EQ(dec->info.sequence, 42u);
    EXPECT_EQ((*golden)[4], 1) << g.name;
    // Gap and fill points in the delta frames only, and never more points than the original.
    EXPECT_EQ(std::count(dec->source.begin(), dec->source.end(), 2) > 0, g.map != nullptr)
        << g.name;
    EXPECT_EQ(std::count(dec->source.begin(), dec->source.end(), 3) > 0, g.map != nullptr)
        << g.name;
    EXPECT_LE(dec->cloud.size(), frame.size()) << g.name;
    EXPECT_LE(bench::CompareFrames(frame.xyz, dec->cloud.xyz).hausdorff_m(), 0.15) << g.name;
  }
}

// The street scan with every third point pushed off its surface by up to 5 T in a random
// direction: some stay explained, some fall in the gap class, some in the residual.
PointCloud PerturbedStreetFrame(uint32_t seed, double tol) {
  PointCloud frame = test::StreetFrame(test::StreetPose(1 + seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dir(0, 1);
  std::uniform_real_distribution<float> len(0, float(5 * tol));
  for (size_t i = 0; i < frame.size(); i += 3) {
    const Eigen::Vector3f d(dir(rng), dir(rng), dir(rng));
    frame.xyz[i] += d.normalized() * len(rng);
  }
  return frame;
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
