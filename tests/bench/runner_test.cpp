#include "dejaview/bench/runner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "testutil.h"

namespace dv::bench {
namespace {

// A codec with hand-computable output: 1000 bytes per frame of which it names 900, and a
// reconstruction that moves every 4th point (labelled moving) by 0.3 m and the others by 0.1 m.
class ShiftCodec : public Codec {
 public:
  std::string name() const override { return "shift"; }
  std::string knob_name() const override { return "k"; }
  std::vector<double> DefaultKnobs() const override { return {1}; }
  StatusOr<EncodedFrame> Encode(const PointCloud& frame, const Pose&, const FrameContext& ctx,
                                double) override {
    last_ = frame;
    EncodedFrame e;
    e.bytes.resize(ctx.intensity ? 1200 : 1000);
    e.sections = {{"xyz", 900}};
    e.fallback = frame.size() > 10;
    return e;
  }
  StatusOr<DecodedCloud> Decode(const std::vector<uint8_t>&) override {
    DecodedCloud d{last_, {}};
    for (size_t i = 0; i < d.cloud.size(); ++i) d.cloud.xyz[i].x() += i % 4 == 0 ? 0.3f : 0.1f;
    return d;
  }

 private:
  PointCloud last_;
};

// Points 1 m apart on a line, so every point's nearest neighbour is its own shifted copy.
BenchFrame LineFrame(size_t n, const std::string& name) {
  BenchFrame f;
  f.name = name;
  for (size_t i = 0; i < n; ++i) {
    f.cloud.push_back({0, float(i), 0}, 0.5f);
    f.labels.push_back(i % 4 == 0 ? 252u : 40u);  // moving car / road
  }
  return f;
}

TEST(RunSetting, RatioCountsEveryByteAndErrorsMatchHandComputation) {
  Workload w;
  w.name = "line";
  w.frames.push_back(LineFrame(8, "a"));
  w.frames.push_back(LineFrame(20, "b"));
  ShiftCodec codec;
  auto r = RunSetting(codec, 1, w, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->original_points, 28u);
  EXPECT_EQ(r->decoded_points, 28u);
  EXPECT_EQ(r->bytes_geometry, 2000u);
  EXPECT_DOUBLE_EQ(r->ratio_geometry, 12.0 * 28 / 2000);
  EXPECT_DOUBLE_EQ(r->ratio_intensity, 16.0 * 28 / 2400);
  // The 100 bytes per frame the codec did not name are counted as header.
  ASSERT_EQ(r->sections.size(), 2u);
  EXPECT_EQ(r->sections[0], (std::pair<std::string, uint64_t>{"header", 200}));
  EXPECT_EQ(r->sections[1], (std::pair<std::string, uint64_t>{"xyz", 1800}));
  EXPECT_EQ(r->fallback_frames, 1u);
  // Frame a: 2 of 8 points at 0.3 m, 6 at 0.1 m; frame b: 5 of 20 at 0.3 m. Shifts are float32,
  // so compare with a float tolerance.
  const double rmse_a = std::sqrt((2 * 0.09 + 6 * 0.01) / 8);
  const double rmse_b = std::sqrt((5 * 0.09 + 15 * 0.01) / 20);
  EXPECT_NEAR(r->cd_m, (rmse_a + rmse_b) / 2, 1e-6);  // the same both ways here
  EXPECT_NEAR(r->hausdorff_m, 0.3, 1e-6);
  EXPECT_NEAR(r->p_to_q.mean_m, (7 * 0.3 + 21 * 0.1) / 28, 1e-6);
  ASSERT_TRUE(r->has_labels);
  EXPECT_EQ(r->dynamic_p_to_q.points, 7u);
  EXPECT_EQ(r->static_p_to_q.points, 21u);
  EXPECT_NEAR(r->dynamic_p_to_q.max_m, 0.3, 1e-6);
  EXPECT_NEAR(r->dynamic_p_to_q.mean_m, 0.3, 1e-6);
  EXPECT_NEAR(r->static_p_to_q.max_m, 0.1, 1e-6);
  ASSERT_EQ(r->per_frame.size(), 2u);
  EXPECT_EQ(r->per_frame[1].name, "b");
  EXPECT_GT(r->peak_rss_kb, 0);
}

TEST(RunSetting, SimulatedLabelsSplitByTheSimulatorsDynamicClass) {
  Workload w;
  w.name = "line";
  for (const char* name : {"a", "b"}) {
    BenchFrame f = LineFrame(name[0] == 'a' ? 8 : 20, name);
    f.simulated = true;
    for (size_t i = 0; i < f.labels.size(); ++i) f.labels[i] = i % 4 == 0 ? 1u : 0u;  // dynamic
    w.frames.push_back(std::move(f));
  }
  w.frames[1].labels[1] = 2u | (7u << 16);  // "changed" with an object id is static here
  ShiftCodec codec;
  auto r = RunSetting(codec, 1, w, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dynamic_p_to_q.points, 7u);
  EXPECT_EQ(r->static_p_to_q.points, 21u);
  EXPECT_NEAR(r->dynamic_p_to_q.max_m, 0.3, 1e-6);
  EXPECT_NEAR(r->static_p_to_q.max_m, 0.1, 1e-6);
  // The same labels read as SemanticKITTI classes hold no moving point.
  for (auto& f : w.frames) f.simulated = false;
  r = RunSetting(codec, 1, w, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dynamic_p_to_q.points, 0u);
}

TEST(RunSetting, RealFrameLosslessPeerCountsItsHeader) {
  auto w = PseudoRevisit(test::KittiSeq("00"), 2, 1, PoseNoise{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->frames.size(), 1u);
  auto codec = MakeZstdCodec();
  auto r = RunSetting(*codec, 1, *w, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const size_t n = w->frames[0].cloud.size();
  EXPECT_EQ(r->decoded_points, n);
  EXPECT_EQ(r->cd_m, 0.0);
  EXPECT_EQ(r->hausdorff_m, 0.0);
  // Header: kind byte, flags byte, the point count as a 3-byte varint (16384 <= N < 2^21).
  ASSERT_GE(r->sections.size(), 1u);
  EXPECT_EQ(r->sections[0], (std::pair<std::string, uint64_t>{"header", 5}));
  uint64_t total = 0;
  for (const auto& s : r->sections) total += s.second;
  EXPECT_EQ(total, r->bytes_geometry);
  EXPECT_DOUBLE_EQ(r->ratio_geometry, 12.0 * double(n) / double(r->bytes_geometry));
  EXPECT_TRUE(r->has_labels);
  EXPECT_EQ(r->dynamic_p_to_q.max_m, 0.0);
}

TEST(RunSetting, DejaviewAdapterHoldsItsBoundAndCountsEveryByte) {
  auto codec = MakeDejaviewCodec();
  if (!codec) GTEST_SKIP() << "built without dejaview_codec";
  auto w = PseudoRevisit(test::KittiSeq("07"), 2, 1, PoseNoise{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  RunOptions options;
  options.scratch_dir = test::ScratchDir();
  options.keep_picture = true;
  PictureSample picture;
  auto r = RunSetting(*codec, 0.2, *w, options, &picture);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LE(r->hausdorff_m, 0.2);  // the codec's guarantee, measured by the bench's metric
  EXPECT_GT(r->map_bytes, 0u);
  uint64_t total = 0;
  for (const auto& s : r->sections) total += s.second;
  EXPECT_EQ(total, r->bytes_geometry);
  EXPECT_DOUBLE_EQ(r->ratio_geometry, 12.0 * double(r->original_points) / double(total));
  ASSERT_EQ(picture.decoded.source.size(), picture.decoded.cloud.size());
  EXPECT_FALSE(picture.map_only.empty());
}

TEST(Protocol, PseudoRevisitSplitsEvenAndOddFrames) {
  auto w = PseudoRevisit(test::KittiSeq("00"), 2, 0, PoseNoise{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->name, "00");
  ASSERT_EQ(w->map_drives.size(), 1u);
  EXPECT_EQ(w->map_drives[0].frame_names,
            (std::vector<std::string>{"000000", "000002", "000004", "000006", "000008"}));
  EXPECT_EQ(w->map_drives[0].poses.size(), 5u);
  ASSERT_EQ(w->frames.size(), 5u);
  EXPECT_EQ(w->frames[0].name, "00/000001");
  EXPECT_EQ(w->frames[4].name, "00/000009");
  for (const auto& f : w->frames) {
    EXPECT_EQ(f.labels.size(), f.cloud.size());
    EXPECT_GT(f.timestamp_ns, 0);
  }
  auto three = PseudoRevisit(test::KittiSeq("07"), 3, 2, PoseNoise{});
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->map_drives[0].frame_names,
            (std::vector<std::string>{"000000", "000003", "000006", "000009"}));
  ASSERT_EQ(three->frames.size(), 2u);
  EXPECT_EQ(three->frames[1].name, "07/000002");
  EXPECT_EQ(PseudoRevisit(test::KittiSeq("00"), 1, 0, PoseNoise{}).status().code(),
            Status::Code::kInvalidArgument);
}

TEST(Protocol, NonFinitePointsAreRemovedAndCountedWithLabelsAligned) {
  const std::string dir = test::ScratchDir();
  PointCloud c;
  c.push_back({1, 2, 3}, 0.1f);
  c.push_back({NAN, 0, 0}, 0.2f);
  c.push_back({4, 5, 6}, 0.3f);
  ASSERT_TRUE(MakeDirs(dir + "/velodyne").ok());
  ASSERT_TRUE(MakeDirs(dir + "/labels").ok());
  ASSERT_TRUE(WriteKittiBin(dir + "/velodyne/000000.bin", c).ok());
  ASSERT_TRUE(WriteLabels(dir + "/labels/000000.label", {40, 252, 253}).ok());
  auto drive = OpenDrive(dir);
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  auto f = LoadFrame(*drive, 0, "x/");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->non_finite, 1u);
  ASSERT_EQ(f->cloud.size(), 2u);
  EXPECT_EQ(f->labels, (std::vector<uint32_t>{40, 253}));
  EXPECT_EQ(f->cloud.xyz[1], Eigen::Vector3f(4, 5, 6));
}

TEST(Protocol, PoseNoiseIsSeededAndOnlyYawRotates) {
  Pose T = Pose::Identity();
  T.translation() = Eigen::Vector3d(10, 20, 1);
  T.linear() = Eigen::AngleAxisd(0.7, Eigen::Vector3d::UnitZ()).toRotationMatrix();
  const PoseNoise noise;
  const Pose a = PerturbPose(T, noise, 3), b = PerturbPose(T, noise, 3);
  EXPECT_TRUE(a.isApprox(b, 0));
  EXPECT_FALSE(a.isApprox(PerturbPose(T, noise, 4)));
  PoseNoise other = noise;
  other.seed = 2;
  EXPECT_FALSE(a.isApprox(PerturbPose(T, other, 3)));
  // The rotation error is about the vertical axis only.
  const Eigen::AngleAxisd d(T.linear().transpose() * a.linear());
  EXPECT_NEAR(std::fabs(d.axis().z()), 1.0, 1e-9);
  PoseNoise none;
  none.sigma_xy_m = none.sigma_z_m = none.sigma_yaw_deg = 0;
  EXPECT_TRUE(PerturbPose(T, none, 3).isApprox(T, 1e-15));
}

// Writes a two-frame drive DIR/day from KITTI 07's first frames, with or without a prior file.
void WriteDay(const std::string& dir, bool with_prior) {
  auto src = OpenDrive(test::KittiSeq("07"));
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE(MakeDirs(dir + "/velodyne").ok());
  for (size_t i = 0; i < 2; ++i) {
    std::filesystem::copy_file(src->frame_paths[i],
                               dir + "/velodyne/" + src->frame_names[i] + ".bin");
  }
  const std::vector<Pose> poses(src->poses.begin(), src->poses.begin() + 2);
  ASSERT_TRUE(WriteKittiPoses(dir + "/poses.txt", poses).ok());
  if (with_prior) {
    std::vector<Pose> prior = poses;
    prior[1].translation().x() += 1.0;
    ASSERT_TRUE(WriteKittiPoses(dir + "/poses_prior.txt", prior).ok());
  }
}

TEST(Protocol, MultiDayMapsEarlierDaysAndCodesTheNext) {
  const std::string dir = test::ScratchDir();
  WriteDay(dir + "/day_01", false);
  WriteDay(dir + "/day_02", false);
  WriteDay(dir + "/day_03", true);
  ASSERT_TRUE(MakeDirs(dir + "/notes").ok());  // not a day: ignored
  auto w = MultiDay(dir, 0, 0, 0, PoseNoise{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->map_drives.size(), 2u);
  ASSERT_EQ(w->frames.size(), 2u);
  EXPECT_EQ(w->frames[0].name, "day_03/000000");
  // day_03 has its own localisation prior: used as is, no noise added.
  auto day3 = OpenDrive(dir + "/day_03");
  ASSERT_TRUE(day3.ok());
  EXPECT_TRUE(w->frames[1].T_world_sensor_prior.isApprox(day3->poses_prior[1], 0));
  auto one = MultiDay(dir, 1, 0, 1, PoseNoise{});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->map_drives.size(), 1u);
  ASSERT_EQ(one->frames.size(), 1u);
  EXPECT_EQ(one->frames[0].name, "day_02/000000");
  EXPECT_FALSE(one->frames[0].T_world_sensor_prior.isApprox(day3->poses[0], 1e-6));  // noisy
  // The day-1 map against day 3: an older map.
  auto aged = MultiDay(dir, 1, 3, 1, PoseNoise{});
  ASSERT_TRUE(aged.ok()) << aged.status().ToString();
  EXPECT_EQ(aged->map_drives.size(), 1u);
  EXPECT_EQ(aged->frames[0].name, "day_03/000000");
  EXPECT_EQ(aged->name, "day_03 (map: day_01)");
  EXPECT_EQ(MultiDay(dir, 2, 0, 1, PoseNoise{})->name, "day_03 (map: day_01..day_02)");
  EXPECT_EQ(CountDays(dir).value(), 3);
  EXPECT_EQ(MultiDay(dir, 3, 0, 0, PoseNoise{}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(MultiDay(dir, 2, 2, 0, PoseNoise{}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(MultiDay(dir + "/day_01", 0, 0, 0, PoseNoise{}).status().code(),
            Status::Code::kInvalidArgument);
}

// Recorded passes of the same place: every folder holding velodyne/, in name order, whatever its
// name; the map from all but the last (or the first --map-passes), the next coded with its own
// prior where it has one.
TEST(Protocol, PassesMapEarlierPassesAndCodeTheNext) {
  const std::string dir = test::ScratchDir();
  WriteDay(dir + "/2026-12-03_loop", true);
  WriteDay(dir + "/2026-12-01_loop", false);
  WriteDay(dir + "/2026-12-02_loop", false);
  ASSERT_TRUE(MakeDirs(dir + "/notes").ok());  // no velodyne/: not a pass
  auto w = Passes(dir, 0, 0, PoseNoise{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->name, "2026-12-03_loop (map: 2026-12-01_loop..2026-12-02_loop)");
  EXPECT_EQ(w->map_drives.size(), 2u);
  ASSERT_EQ(w->frames.size(), 2u);
  EXPECT_EQ(w->frames[0].name, "2026-12-03_loop/000000");
  auto last = OpenDrive(dir + "/2026-12-03_loop");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(w->frames[1].T_world_sensor_prior.isApprox(last->poses_prior[1], 0));
  auto one = Passes(dir, 1, 1, PoseNoise{});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->name, "2026-12-02_loop (map: 2026-12-01_loop)");
  EXPECT_EQ(one->map_drives.size(), 1u);
  EXPECT_EQ(one->frames.size(), 1u);
  EXPECT_EQ(Passes(dir, 3, 0, PoseNoise{}).status().code(), Status::Code::kInvalidArgument);
  // A single drive holds no passes.
  const Status none = Passes(dir + "/2026-12-01_loop", 0, 0, PoseNoise{}).status();
  EXPECT_EQ(none.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(none.message().find("needs at least two drives"), std::string::npos) << none.message();
}

}  // namespace
}  // namespace dv::bench
