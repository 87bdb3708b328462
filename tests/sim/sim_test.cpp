#include <gtest/gtest.h>

#include <filesystem>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/sim/simulate.h"
#include "testutil.h"

namespace dv::sim {
namespace {

namespace fs = std::filesystem;

SimOptions Tiny(const std::string& out) {
  SimOptions o;
  o.out_dir = out;
  o.days = 2;
  o.frames = 3;
  o.seed = 7;
  o.lidar = Reduced(LidarPreset("hdl64").value(), 16, 360);
  o.route_length_m = 300;
  return o;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Sim, SameSeedGivesIdenticalBytesWhateverTheThreads) {
  const std::string root = test::ScratchDir();
  SimOptions a = Tiny(root + "/a"), b = Tiny(root + "/b");
  a.threads = 1;
  b.threads = 2;
  ASSERT_TRUE(Simulate(a, nullptr).ok());
  ASSERT_TRUE(Simulate(b, nullptr).ok());
  const auto files = Files(a.out_dir);
  ASSERT_EQ(files, Files(b.out_dir));
  ASSERT_EQ(files.size(), 2u * (3 + 3 + 3));  // per day: 3 bins, 3 labels, 3 text files
  for (const auto& f : files) {
    EXPECT_EQ(ReadFileBytes(a.out_dir + "/" + f).value(),
              ReadFileBytes(b.out_dir + "/" + f).value())
        << f;
  }
  SimOptions c = Tiny(root + "/c");
  c.seed = 8;
  c.days = 1;
  ASSERT_TRUE(Simulate(c, nullptr).ok());
  EXPECT_NE(ReadFileBytes(a.out_dir + "/day_00/velodyne/000000.bin").value(),
            ReadFileBytes(c.out_dir + "/day_00/velodyne/000000.bin").value());
}

bool SamePrimitive(const Primitive& p, const Primitive& q) {
  return p.kind == q.kind && p.center == q.center && p.half == q.half && p.yaw == q.yaw &&
         p.material == q.material && p.object_id == q.object_id && p.label == q.label;
}

size_t CountMatches(const std::vector<Primitive>& a, const std::vector<Primitive>& b) {
  size_t n = 0;
  for (const auto& p : a) {
    for (const auto& q : b) n += SamePrimitive(p, q);
  }
  return n;
}

TEST(Sim, DaysDifferOnlyWhereConfigured) {
  DayRates none;
  none.parked_occupancy = 0.0;  // parked cars also shift within their slot day to day
  none.construction = 0;
  none.leaf_loss = 0;
  none.growth_per_day = 0;
  none.permanent_per_km = 0;
  const World d0(7, 0, 400, none), d3(7, 3, 400, none);
  ASSERT_EQ(d0.statics().size(), d3.statics().size());
  EXPECT_EQ(CountMatches(d0.statics(), d3.statics()), d0.statics().size());
  EXPECT_NE(d0.DynamicAt(0)[0].center, d3.DynamicAt(0)[0].center);  // traffic is per day

  DayRates busy = none;
  busy.parked_occupancy = 0.5;
  busy.leaf_loss = 0.3;
  busy.construction = 0.5;
  busy.growth_per_day = 0.05;
  busy.permanent_per_km = 10;
  const World b0(7, 0, 400, busy), b3(7, 3, 400, busy);
  // Everything labelled static on day 3 is exactly there on day 0; the changed objects are not.
  std::vector<Primitive> static3, changed3;
  for (const auto& p : b3.statics()) (p.label == kStatic ? static3 : changed3).push_back(p);
  EXPECT_EQ(CountMatches(static3, b0.statics()), static3.size());
  ASSERT_GT(changed3.size(), 0u);
  EXPECT_LT(CountMatches(changed3, b0.statics()), changed3.size());
}

TEST(Sim, LabelsMatchGeometry) {
  const std::string root = test::ScratchDir();
  SimOptions o = Tiny(root);
  o.days = 1;
  o.frames = 2;
  o.rates.pedestrians_per_km = 300;
  o.rates.vehicles_per_km = 100;
  o.rates.cyclists_per_km = 50;
  o.rates.growth_per_day = 0.05;
  ASSERT_TRUE(Simulate(o, nullptr).ok());
  const World world(o.seed, 0, 300 > o.route_length_m ? 300 : o.route_length_m, o.rates);
  auto drive = OpenDrive(root + "/day_00");
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  ASSERT_EQ(drive->size(), 2u);
  // A return lies on its primitive up to the range noise (5 sigma).
  const double margin = 5 * o.lidar.range_noise_m;
  size_t dynamic_points = 0, ground_points = 0;
  for (size_t i = 0; i < drive->size(); ++i) {
    const auto cloud = ReadKittiBin(drive->frame_paths[i]).value();
    const auto labels = ReadLabels(drive->LabelPath(i), cloud.size()).value();
    const auto movers = world.DynamicAt(0.1 * double(i));
    EXPECT_TRUE(drive->poses[i].isApprox(EgoPose(world, o, 0, int(i)), 1e-8));
    for (size_t k = 0; k < cloud.size(); ++k) {
      const Eigen::Vector3d q = drive->poses[i] * cloud.xyz[k].cast<double>();
      const uint16_t cls = LabelClass(labels[k]), id = LabelInstance(labels[k]);
      const auto& prims = cls == kDynamic ? movers : world.statics();
      // id 0 is the road surface: the ground plane, or a curb, sidewalk or marking.
      bool on = cls == kStatic && id == 0 && std::abs(q.z()) < margin;
      ground_points += on;
      for (const auto& p : prims)
        on |= p.object_id == id && p.label == cls && p.Contains(q, margin);
      EXPECT_TRUE(on) << "frame " << i << " point " << k << " class " << cls << " id " << id;
      if (!on) return;
      dynamic_points += cls == kDynamic;
    }
  }
  EXPECT_GT(dynamic_points, 0u);
  EXPECT_GT(ground_points, 0u);
}

TEST(Sim, PriorIsOffByDecimetresAndADegree) {
  const std::string root = test::ScratchDir();
  SimOptions o = Tiny(root);
  o.days = 1;
  o.frames = 3;
  o.lidar = Reduced(o.lidar, 4, 8);
  ASSERT_TRUE(Simulate(o, nullptr).ok());
  auto drive = OpenDrive(root + "/day_00");
  ASSERT_TRUE(drive.ok());
  ASSERT_EQ(drive->poses_prior.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Pose err = drive->poses[i].inverse() * drive->poses_prior[i];
    EXPECT_GT(TranslationNorm(err), 0.0);
    EXPECT_LE(TranslationNorm(err), o.prior_sigma_m * std::sqrt(2.09) + 1e-6);
    EXPECT_LE(RotationAngleRad(err), o.prior_yaw_deg * M_PI / 180 + 1e-6);
  }
  EXPECT_EQ(drive->timestamps_s, (std::vector<double>{0.0, 0.1, 0.2}));
}

TEST(Sim, CliWritesADriveAndRejectsBadOptions) {
  const std::string root = test::ScratchDir();
  std::string out;
  ASSERT_EQ(test::RunCli("simulate --out " + root +
                             " --days 2 --frames 2 --beams 8 --azimuth-steps 90 --seed 3 --quiet",
                         &out),
            0)
      << out;
  EXPECT_NE(out.find("simulated 4 frames (2 days)"), std::string::npos) << out;
  auto drive = OpenDrive(root + "/day_01");
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  EXPECT_EQ(drive->size(), 2u);
  EXPECT_FALSE(drive->labels_dir.empty());
  EXPECT_EQ(test::RunCli("simulate --out " + root + " --preset vlp99", &out), 2);
  EXPECT_NE(out.find("unknown LiDAR preset 'vlp99'"), std::string::npos) << out;
  EXPECT_EQ(test::RunCli("simulate --out " + root + " --frames lots", &out), 2);
  EXPECT_NE(out.find("--frames: 'lots' is not a number"), std::string::npos) << out;
}

}  // namespace
}  // namespace dv::sim
