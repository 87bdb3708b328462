// The CUDA backend against the CPU one, byte for byte, on real KITTI frames (map from the even
// frames, odd frames coded). Where no CUDA device exists (or the build has no CUDA), those tests
// skip with the reason and the one test that runs checks that asking for CUDA is a clean error.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "dejaview/base/drive.h"
#include "dejaview/codec/codec.h"
#include "hot_paths.h"
#include "map_section.h"
#include "testutil.h"
#if DEJAVIEW_CUDA_BUILD
#include "cuda/backend.h"
#endif

namespace dv::codec {
namespace {

class CodecCuda : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    drive_ = new Drive(OpenDrive(test::KittiSeq("00")).value());
    const std::string dir = test::ScratchDir() + "/map";
    maps::BuildOptions opt;
    opt.resolution_m = 0.2;
    opt.every = 2;
    ASSERT_TRUE(maps::BuildMap({*drive_}, opt, dir).ok());
    map_ = maps::OpenMap(dir, 64 << 20).value().release();
  }
  static void TearDownTestSuite() {
    delete map_;
    delete drive_;
  }

  static PointCloud Frame(size_t i) {
    PointCloud c = ReadPointCloudFile(drive_->frame_paths[i]).value();
    RemoveNonFinite(&c);
    return c;
  }
  // A localisation prior off by decimetres and a fraction of a degree, different per frame.
  static Pose Prior(size_t i) {
    Pose T = drive_->poses[i];
    const double s = (i % 3) - 1.0;
    T.translation() += Eigen::Vector3d(0.2 * s, -0.15, 0.05 * s);
    T.linear() = Eigen::AngleAxisd(0.006 * s, Eigen::Vector3d::UnitZ()) * T.linear();
    return T;
  }

  static Drive* drive_;
  static maps::RouteMap* map_;
};
Drive* CodecCuda::drive_ = nullptr;
maps::RouteMap* CodecCuda::map_ = nullptr;

#define SKIP_WITHOUT_CUDA_DEVICE()                    \
  do {                                                \
    const Status cuda = CheckBackend(Backend::kCuda); \
    if (!cuda.ok()) GTEST_SKIP() << cuda.message();   \
  } while (0)

TEST_F(CodecCuda, AskingForCudaWithoutADeviceIsAClearError) {
  const Status cuda = CheckBackend(Backend::kCuda);
  if (cuda.ok()) GTEST_SKIP() << "a CUDA device is present: the byte-for-byte tests run instead";
#if DEJAVIEW_CUDA_BUILD
  EXPECT_EQ(cuda.code(), Status::Code::kUnavailable);
  EXPECT_EQ(cuda.message().rfind("no CUDA device: ", 0), 0u) << cuda.message();
#else
  EXPECT_EQ(cuda.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(cuda.message().find("configure with -DDEJAVIEW_CUDA=ON"), std::string::npos)
      << cuda.message();
#endif
  const PointCloud frame = Frame(3);
  EncoderParams p;
  p.backend = Backend::kCuda;
  for (maps::RouteMap* map : {map_, static_cast<maps::RouteMap*>(nullptr)}) {
    auto bytes = Encoder(map).Encode(frame, Prior(3), {}, p);
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.status().code(), cuda.code());
    EXPECT_EQ(bytes.status().message(), "encode: " + cuda.message());
  }
  // No CUDA backend object is made, so no hot path runs on it: the factory refuses as CheckBackend
  // does.
  const auto refused = MakeHotPaths(Backend::kCuda);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), cuda.code());
  EXPECT_EQ(refused.status().message(), cuda.message());
#if DEJAVIEW_CUDA_BUILD
  // Made past that check, each hot path on its own fails as cleanly, with no device behind it.
  const std::unique_ptr<HotPaths> unchecked = NewCudaHotPaths();
  const std::unique_ptr<HotPaths> cpu = MakeCpuHotPaths();
  Candidates cand;
  ASSERT_TRUE(
      DeriveCandidates(*cpu, map_, Prior(3).linear(), Prior(3).translation(), 30, &cand).ok());
  ASSERT_GT(cand.voxels.size(), 1000u);
  Projection proj;
  EXPECT_FALSE(unchecked
                   ->ProjectCandidates(cand.voxels, 0.2, Prior(3).linear(), Prior(3).translation(),
                                       {1024, 80, -0.45, 0.11}, &proj)
                   .ok());
  std::vector<uint8_t> explained;
  CandidateMarks marks;
  EXPECT_FALSE(unchecked
                   ->ClassifyPoints({&frame.xyz, RigidOf(Prior(3).linear(), Prior(3).translation()),
                                     &cand.sensor, nullptr, &cand.index, 0.2, 1},
                                    {0.01, 0.0036}, {&explained, &marks})
                   .ok());
  std::vector<Eigen::Vector3d> map_pts(cand.voxels.size());
  for (size_t i = 0; i < map_pts.size(); ++i)
    map_pts[i] = maps::Representative(cand.voxels[i], 0.2);
  EXPECT_FALSE(unchecked->CreateSearch(map_pts, cand.voxels, cand.index, 0.2, 0.5, 5).ok());
#endif
  // The CPU backend is unaffected.
  p.backend = Backend::kCpu;
  EXPECT_TRUE(Encoder(map_).Encode(frame, Prior(3), {}, p).ok());
}

TEST(CodecBackend, ParsesItsConfigNames) {
  EXPECT_EQ(ParseBackend("cpu").value(), Backend::kCpu);
  EXPECT_EQ(ParseBackend("cuda").value(), Backend::kCuda);
  const auto bad = ParseBackend("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "backend: 'gpu' is not cpu or cuda");
  EXPECT_TRUE(CheckBackend(Backend::kCpu).ok());
}

TEST_F(CodecCuda, EncodeIsByteIdenticalToTheCpuBackend) {
  SKIP_WITHOUT_CUDA_DEVICE();
  size_t delta_frames = 0;
  Encoder cpu_encoder(map_), cuda_encoder(map_);
  for (double tol : {0.1, 0.2, 0.3}) {
    for (size_t i = 1; i < drive_->size(); i += 2) {
      const PointCloud frame = Frame(i);
      EncoderParams p;
      p.tolerance_m = tol;
      p.intensity = (i / 2) % 2 == 0;
      EncodeReport cpu_rep, cuda_rep;
      const auto cpu = cpu_encoder.Encode(frame, Prior(i), {i, 0, 0}, p, &cpu_rep);
      p.backend = Backend::kCuda;
      const auto cuda = cuda_encoder.Encode(frame, Prior(i), {i, 0, 0}, p, &cuda_rep);
      ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
      ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
      EXPECT_EQ(*cuda, *cpu) << "frame " << i << " tolerance " << tol;
      EXPECT_EQ(cuda_rep.explained_points, cpu_rep.explained_points);
      EXPECT_EQ(cuda_rep.registration_correspondences, cpu_rep.registration_correspondences);
      delta_frames += !cpu_rep.intra_fallback;
    }
  }
  EXPECT_GE(delta_frames, 12u);  // the comparison covers the delta path, not only intra
}

// The candidates' index built on the device answers every look-up as the CPU's: each key its own
// index, and a key next to each one (in or out of the set) the same in both.
void ExpectIndexMatches(const HotPaths& cpu, const HotPaths& cuda, const Candidates& cand) {
  VoxelHash cpu_index(0), cuda_index(0);
  ASSERT_TRUE(cpu.IndexKeys(cand.voxels, &cpu_index).ok());
  ASSERT_TRUE(cuda.IndexKeys(cand.voxels, &cuda_index).ok());
  ASSERT_EQ(cuda_index.slots(), cpu_index.slots());
  EXPECT_EQ(cuda_index.size(), cand.voxels.size());
  size_t absent = 0;
  for (size_t i = 0; i < cand.voxels.size(); ++i) {
    const maps::VoxelKey k = cand.voxels[i].key;
    ASSERT_EQ(cuda_index.Find(PackKey(k)), int32_t(i));
    const uint64_t next = PackKey(maps::VoxelKey(k.x(), k.y() + 1, k.z() + 1));
    ASSERT_EQ(cuda_index.Find(next), cpu_index.Find(next)) << "voxel " << i;
    absent += cpu_index.Find(next) < 0;
  }
  EXPECT_GT(absent, 0u);
}

void ExpectProjectionMatches(const HotPaths& cpu, const HotPaths& cuda, const Candidates& cand,
                             const Pose& T) {
  const kernels::AngularGrid grid{1024, 80, -0.45, 0.11};
  Projection cpu_proj, cuda_proj;
  ASSERT_TRUE(
      cpu.ProjectCandidates(cand.voxels, 0.2, T.linear(), T.translation(), grid, &cpu_proj).ok());
  ASSERT_TRUE(
      cuda.ProjectCandidates(cand.voxels, 0.2, T.linear(), T.translation(), grid, &cuda_proj).ok());
  const size_t n = cand.voxels.size();
  EXPECT_EQ(std::memcmp(cpu_proj.sensor.data(), cuda_proj.sensor.data(), n * 12), 0);
  EXPECT_EQ(std::memcmp(cpu_proj.range.data(), cuda_proj.range.data(), n * 8), 0);
  EXPECT_EQ(cpu_proj.cell, cuda_proj.cell);
  EXPECT_EQ(
      std::memcmp(cpu_proj.nearest.data(), cuda_proj.nearest.data(), cpu_proj.nearest.size() * 8),
      0);
}

// The classification at three selection radii, and the gap test over every point (Encode asks
// only about the unexplained ones), with nb voxels around each point's.
void ExpectClassificationMatches(const HotPaths& cpu, const HotPaths& cuda, const Candidates& cand,
                                 const PointCloud& frame, const kernels::Rigid& Tk, int nb) {
  const double bound = 0.2 * nb - 1e-4;
  const SortedGrid sorted(VoxelKeys(cand.voxels), nb, 0);
  const CandidateSearch on_cpu{&frame.xyz, Tk, &cand.sensor, &sorted, nullptr, 0.2, nb};
  const CandidateSearch on_cuda{&frame.xyz, Tk, &cand.sensor, nullptr, &cand.index, 0.2, nb};
  for (double select : {0.0, 0.6, 1.0}) {
    const double s2 = select * select * bound * bound;
    std::vector<uint8_t> cpu_e, cuda_e;
    CandidateMarks cpu_m, cuda_m;
    ASSERT_TRUE(cpu.ClassifyPoints(on_cpu, {bound * bound, s2}, {&cpu_e, &cpu_m}).ok());
    ASSERT_TRUE(cuda.ClassifyPoints(on_cuda, {bound * bound, s2}, {&cuda_e, &cuda_m}).ok());
    EXPECT_EQ(cpu_e, cuda_e) << "nb " << nb << " select " << select;
    EXPECT_EQ(cpu_m.nearest, cuda_m.nearest) << "nb " << nb << " select " << select;
    EXPECT_EQ(cpu_m.close, cuda_m.close) << "nb " << nb << " select " << select;
    size_t explained = 0;
    for (uint8_t e : cpu_e) explained += e;
    EXPECT_GT(explained, frame.size() / 2) << "nb " << nb;
  }
  std::vector<uint8_t> cpu_near, cuda_near;
  ASSERT_TRUE(cpu.MarkNearCandidates(on_cpu, bound * bound, &cpu_near).ok());
  ASSERT_TRUE(cuda.MarkNearCandidates(on_cuda, bound * bound, &cuda_near).ok());
  EXPECT_EQ(cpu_near, cuda_near) << "nb " << nb;
  size_t near = 0;
  for (uint8_t e : cpu_near) near += e;
  EXPECT_GT(near, frame.size() / 2) << "nb " << nb;
  EXPECT_LT(near, frame.size()) << "nb " << nb;
}

void ExpectCorrespondencesMatch(const HotPaths& cpu, const HotPaths& cuda, const Candidates& cand,
                                const PointCloud& frame, const kernels::Rigid& Tk) {
  const size_t n = cand.voxels.size();
  std::vector<Eigen::Vector3d> map_pts(n), source;
  for (size_t i = 0; i < n; ++i) map_pts[i] = maps::Representative(cand.voxels[i], 0.2);
  // The coarse grid's points follow the fine ones: here the same representatives again.
  const std::vector<Eigen::Vector3d> reps = map_pts;
  map_pts.insert(map_pts.end(), reps.begin(), reps.end());
  for (size_t i = 0; i < frame.size(); i += 7) source.push_back(frame.xyz[i].cast<double>());
  auto cpu_search = cpu.CreateSearch(map_pts, cand.voxels, cand.index, 0.2, 0.5, 5);
  auto cuda_search = cuda.CreateSearch(map_pts, cand.voxels, cand.index, 0.2, 0.5, 5);
  ASSERT_TRUE(cpu_search.ok() && cuda_search.ok()) << cuda_search.status().ToString();
  for (bool fine : {false, true}) {
    std::vector<int32_t> cpu_best, cuda_best;
    const double max_d2 = fine ? 0.04 : 1.0;
    ASSERT_TRUE((*cpu_search)->Find(source, Tk, fine, max_d2, &cpu_best).ok());
    ASSERT_TRUE((*cuda_search)->Find(source, Tk, fine, max_d2, &cuda_best).ok());
    EXPECT_EQ(cpu_best, cuda_best) << (fine ? "fine" : "coarse");
    size_t found = 0;
    for (int32_t b : cpu_best) found += b >= 0;
    EXPECT_GT(found, source.size() / 2) << (fine ? "fine" : "coarse");
  }
}

TEST_F(CodecCuda, EachHotPathMatchesTheCpuBackend) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const std::unique_ptr<HotPaths> cpu = MakeCpuHotPaths();
  auto made = MakeHotPaths(Backend::kCuda);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::unique_ptr<HotPaths> cuda = std::move(made).value();
  EXPECT_EQ(cuda->kind(), Backend::kCuda);
  EXPECT_TRUE(cuda->UsesCandidateIndex());
  const PointCloud frame = Frame(5);
  const Pose T = Prior(5);
  Candidates cand;
  ASSERT_TRUE(DeriveCandidates(*cpu, map_, T.linear(), T.translation(), 90, &cand).ok());
  ASSERT_GT(cand.voxels.size(), 10000u);
  ASSERT_NO_FATAL_FAILURE(ExpectIndexMatches(*cpu, *cuda, cand));
  ASSERT_NO_FATAL_FAILURE(ExpectProjectionMatches(*cpu, *cuda, cand, T));
  const kernels::Rigid Tk = RigidOf(T.linear(), T.translation());
  // nb 2 lists 125 voxels per point: the kernel's chunks of 32 are crossed.
  for (int nb : {1, 2}) {
    ASSERT_NO_FATAL_FAILURE(ExpectClassificationMatches(*cpu, *cuda, cand, frame, Tk, nb));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectCorrespondencesMatch(*cpu, *cuda, cand, frame, Tk));
}

}  // namespace
}  // namespace dv::codec
