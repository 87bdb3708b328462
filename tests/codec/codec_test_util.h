// What the codec's tests share: small oracles, frames cut into sections and joined again, the
// one-frame encode and decode, and the street map fixture.
#pragma once

#include <gtest/gtest.h>

#include "dejaview/codec/codec.h"

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
#include "map_section.h"
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

// The CPU backend the tests' hot paths run on: the best variants of this CPU, as an encoder's.
inline const HotPaths& Cpu() {
  static const std::unique_ptr<HotPaths> cpu = MakeCpuHotPaths();
  return *cpu;
}

// Exact Hausdorff in double, both ways (brute force: small clouds only).
inline double BruteHausdorff(const std::vector<Eigen::Vector3f>& a,
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

inline PointCloud RandomFrame(uint32_t seed, size_t n) {
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

inline Sections Split(const std::vector<uint8_t>& bytes) {
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

inline std::vector<uint8_t> Join(const Sections& s) {
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
inline StatusOr<std::vector<uint8_t>> Encode(const PointCloud& frame, const Pose& prior,
                                             const FrameInfo& info, const EncoderParams& p,
                                             maps::RouteMap* map, EncodeReport* rep = nullptr) {
  return Encoder(map).Encode(frame, prior, info, p, rep);
}
inline StatusOr<DecodedFrame> Decode(const uint8_t* data, size_t size, maps::RouteMap* map,
                                     int threads = 1) {
  return Decoder(map).Decode(data, size, threads);
}

inline StatusOr<DecodedFrame> RoundTrip(const PointCloud& frame, const Pose& prior, EncoderParams p,
                                        maps::RouteMap* map, EncodeReport* rep,
                                        std::vector<uint8_t>* bytes_out = nullptr) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Encode(frame, prior, {7, 123, 1}, p, map, rep));
  if (bytes_out) *bytes_out = bytes;
  return Decode(bytes.data(), bytes.size(), map);
}

// The street scan with every third point pushed off its surface by up to 5 T in a random
// direction: some stay explained, some fall in the gap class, some in the residual.
inline PointCloud PerturbedStreetFrame(uint32_t seed, double tol) {
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

// The pseudo-revisit map of a drive (KITTI or simulated): its even frames, at 0.2 m unless told.
// Into `dir`, or a fresh scratch directory when empty.
// With priors, it carries the codec priors as `dejaview map build` writes them.
inline std::unique_ptr<maps::RouteMap> EvenFramesMap(const Drive& drive, double resolution_m = 0.2,
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

}  // namespace dv::codec
