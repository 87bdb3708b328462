// Drives through MCAP: export then import gives the same frames (bytes) and poses; CDR messages
// decode to exactly what was encoded, and corrupt ones fail naming field and offset. Drives
// merged into one world-frame cloud (PLY, PCD), whole or voxel-thinned.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <tuple>

#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/codec/codec.h"
#include "dejaview/recorded/drive_mcap.h"
#include "dejaview/recorded/ros_messages.h"
#include "dejaview/server/storage.h"
#include "dejaview/transport/spool.h"
#include "testutil.h"

namespace dv::recorded {
namespace {

// The same points: intensities equal, coordinates within 1e-12 m. A world-frame cloud moved back
// by the inverse pose in double precision returns every float32 coordinate exactly except an
// exact 0, which comes back as a residue of the rotation's rounding (about 1e-16 m).
void ExpectSameDrive(const Drive& a, const Drive& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.poses.size(), b.poses.size());
  if (!a.timestamps_s.empty()) {
    ASSERT_EQ(a.timestamps_s.size(), b.timestamps_s.size());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    auto pa = ReadPointCloudFile(a.frame_paths[i]);
    auto pb = ReadPointCloudFile(b.frame_paths[i]);
    ASSERT_TRUE(pa.ok() && pb.ok());
    ASSERT_EQ(pa->size(), pb->size()) << "frame " << i;
    EXPECT_EQ(pa->intensity, pb->intensity) << "frame " << i;
    for (size_t k = 0; k < pa->size(); ++k) {
      const Eigen::Vector3f& p = pa->xyz[k];
      const float d = (p - pb->xyz[k]).cwiseAbs().maxCoeff();
      ASSERT_LE(d, 1e-12f) << "frame " << i << " point " << k;
      if (d != 0.0f) {
        ASSERT_TRUE(p.x() == 0 || p.y() == 0 || p.z() == 0) << "frame " << i << " point " << k;
      }
    }
    // poses.txt carries 10 significant digits (%.9e); these poses' elements are under 10.
    if (!a.poses.empty()) {
      EXPECT_LT((a.poses[i].matrix() - b.poses[i].matrix()).cwiseAbs().maxCoeff(), 1e-9) << i;
    }
    if (!a.timestamps_s.empty()) {
      EXPECT_NEAR(a.timestamps_s[i], b.timestamps_s[i], 1e-9) << i;
    }
  }
}

TEST(DriveMcap, KittiDriveExportedAndImportedIsTheSameDrive) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  ASSERT_FALSE(drive->poses.empty());
  const std::string dir = test::ScratchDir();
  ASSERT_TRUE(ExportDriveMcap(*drive, dir + "/drive.mcap").ok());
  auto stats = ImportRecording(dir + "/drive.mcap", dir + "/back", {});
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->frames, drive->size());
  EXPECT_EQ(stats->posed, drive->size());
  EXPECT_EQ(stats->cloud_topic, "/dejaview/points");
  EXPECT_EQ(stats->pose_topic, "/dejaview/pose");
  auto back = OpenDrive(dir + "/back");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameDrive(*drive, *back);
}

TEST(DriveMcap, CliExportThenImportGivesTheDrive) {
  const std::string drive_dir = test::KittiSeq("07");
  const std::string dir = test::ScratchDir();
  std::string out;
  ASSERT_EQ(test::RunCli("export --format mcap --out " + dir + "/d.mcap " + drive_dir, &out), 0)
      << out;
  EXPECT_EQ(out, "wrote " + dir + "/d.mcap (10 frames)\n");
  ASSERT_EQ(test::RunCli("import " + dir + "/d.mcap --out " + dir + "/back", &out), 0) << out;
  EXPECT_NE(out.find("imported 10 frames from /dejaview/points, poses from /dejaview/pose (10 "
                     "samples, 10 frames posed)"),
            std::string::npos)
      << out;
  auto a = OpenDrive(drive_dir), b = OpenDrive(dir + "/back");
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectSameDrive(*a, *b);
  EXPECT_EQ(test::RunCli("export --format mcap " + drive_dir, &out), 2);  // no --out
  EXPECT_EQ(test::RunCli("export --format las --out x " + drive_dir, &out), 2);
  EXPECT_NE(out.find("--format: 'las' is not batches, mcap, ply or pcd"), std::string::npos) << out;
}

// Three stored frames of one KITTI scan (intra-coded) at three poses, as the server stores them.
void StoreThreeFrames(const std::string& store_dir) {
  auto storage = server::OpenStorage(store_dir, "", "");
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  auto cloud = ReadKittiBin(test::KittiSeq("00") + "/velodyne/000000.bin");
  ASSERT_TRUE(cloud.ok());
  auto delta = codec::Encoder(nullptr).Encode(*cloud, Pose::Identity(), {}, {});
  ASSERT_TRUE(delta.ok()) << delta.status().ToString();
  for (uint64_t seq = 0; seq < 3; ++seq) {
    transport::SpoolRecord rec;
    rec.meta.vehicle = "veh-1";
    rec.meta.drive = "d1";
    rec.meta.sequence = seq;
    rec.meta.timestamp_ns = 1700000000000000000 + int64_t(seq) * 100000000;
    rec.meta.T_map_sensor.linear() =
        Eigen::AngleAxisd(0.2 * double(seq), Eigen::Vector3d::UnitZ()).toRotationMatrix();
    rec.meta.T_map_sensor.translation() = Eigen::Vector3d(3.0 * double(seq), 1, 0);
    rec.payload = *delta;
    const auto body = transport::EncodeRecord(rec);
    store::FrameRecord row;
    row.vehicle = rec.meta.vehicle;
    row.drive = rec.meta.drive;
    row.sequence = rec.meta.sequence;
    row.timestamp_ns = rec.meta.timestamp_ns;
    row.T_map_sensor = rec.meta.T_map_sensor;
    row.object = *storage->store->Put(body.data(), body.size());
    ASSERT_TRUE(*storage->index->Insert(row));
  }
}

TEST(DriveMcap, QueryExportImportsAsTheKittiExportOfTheSameQuery) {
  const std::string dir = test::ScratchDir();
  StoreThreeFrames(dir + "/store");
  ASSERT_TRUE(MakeDirs(dir + "/maps").ok());
  const std::string query = " --store " + dir + "/store --maps " + dir + "/maps --out " + dir;
  std::string out;
  ASSERT_EQ(test::RunCli("export" + query + "/kitti", &out), 0) << out;
  ASSERT_EQ(test::RunCli("export --format mcap" + query + "/q.mcap", &out), 0) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/q.mcap.frames.tmp"));
  ASSERT_EQ(test::RunCli("import " + dir + "/q.mcap --out " + dir + "/back", &out), 0) << out;
  auto kitti = OpenDrive(dir + "/kitti"), back = OpenDrive(dir + "/back");
  ASSERT_TRUE(kitti.ok() && back.ok());
  ASSERT_EQ(back->size(), 3u);
  ExpectSameDrive(*kitti, *back);
}

// Every point of every frame, moved by its frame's pose, in frame then point order.
std::vector<Eigen::Vector3f> WorldPoints(const Drive& drive, std::vector<float>* intensity) {
  std::vector<Eigen::Vector3f> all;
  for (size_t i = 0; i < drive.size(); ++i) {
    auto cloud = ReadPointCloudFile(drive.frame_paths[i]);
    EXPECT_TRUE(cloud.ok());
    for (size_t k = 0; k < cloud->size(); ++k) {
      all.push_back((drive.poses[i] * cloud->xyz[k].cast<double>()).cast<float>());
      intensity->push_back(cloud->intensity[k]);
    }
  }
  return all;
}

TEST(MergedCloud, KittiDriveMergesIntoOneWorldFrameCloud) {
  const std::string dir = test::ScratchDir();
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok());
  std::vector<float> intensity;
  const auto world = WorldPoints(*drive, &intensity);
  std::string out;
  ASSERT_EQ(
      test::RunCli("export --format ply --merge --out " + dir + "/all.ply " + test::KittiSeq("00"),
                   &out),
      0)
      << out;
  EXPECT_NE(out.find("(10 frames, " + std::to_string(world.size()) + " of " +
                     std::to_string(world.size()) + " points kept, 0 non-finite dropped)"),
            std::string::npos)
      << out;
  auto merged = ReadPointCloudFile(dir + "/all.ply");
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_TRUE(merged->xyz == world);
  EXPECT_EQ(merged->intensity, intensity);
}

// Voxel-thinned: the kept points are input points, one per voxel, and every input point's voxel
// holds a kept point.
TEST(MergedCloud, VoxelThinningKeepsTheFirstPointOfEveryVoxel) {
  const std::string dir = test::ScratchDir();
  auto drive = OpenDrive(test::KittiSeq("07"));
  ASSERT_TRUE(drive.ok());
  const double voxel_m = 0.25;
  MergeStats stats;
  auto merged = MergeDrive(*drive, voxel_m, &stats);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  std::vector<float> intensity;
  const auto world = WorldPoints(*drive, &intensity);
  const auto voxel = [&](const Eigen::Vector3f& p) {
    const Eigen::Vector3d c = (p.cast<double>() / voxel_m).array().floor();
    return std::make_tuple(int64_t(c.x()), int64_t(c.y()), int64_t(c.z()));
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, size_t> first;  // voxel -> first input point
  for (size_t i = 0; i < world.size(); ++i) first.emplace(voxel(world[i]), i);
  ASSERT_EQ(merged->size(), first.size());
  EXPECT_EQ(stats.points_in, world.size());
  EXPECT_EQ(stats.points_out, first.size());
  EXPECT_LT(merged->size(), world.size() / 2);
  for (size_t k = 0; k < merged->size(); ++k) {
    const auto it = first.find(voxel(merged->xyz[k]));
    ASSERT_NE(it, first.end()) << k;
    EXPECT_EQ(merged->xyz[k], world[it->second]) << k;
    EXPECT_EQ(merged->intensity[k], intensity[it->second]) << k;
  }
  std::string out;
  ASSERT_EQ(test::RunCli("export --format pcd --merge --voxel 0.25 --out " + dir + "/v.pcd " +
                             test::KittiSeq("07"),
                         &out),
            0)
      << out;
  auto pcd = ReadPointCloudFile(dir + "/v.pcd");
  ASSERT_TRUE(pcd.ok());
  EXPECT_TRUE(pcd->xyz == merged->xyz);
}

TEST(MergedCloud, DriveWithoutPosesOrAMismatchedNameIsAClearError) {
  const std::string dir = test::ScratchDir();
  PointCloud cloud;
  cloud.push_back({1.5f, -2.25f, 0.125f}, 0.5f);
  ASSERT_TRUE(MakeDirs(dir + "/in/velodyne").ok());
  ASSERT_TRUE(WriteKittiBin(dir + "/in/velodyne/000000.bin", cloud).ok());
  std::string out;
  EXPECT_EQ(
      test::RunCli("export --format ply --merge --out " + dir + "/m.ply " + dir + "/in", &out), 2);
  EXPECT_NE(out.find("a merged cloud needs frames and a pose for each (poses.txt)"),
            std::string::npos)
      << out;
  EXPECT_EQ(
      test::RunCli("export --format ply --merge --out " + dir + "/m.pcd " + dir + "/in", &out), 2);
  EXPECT_NE(out.find("--format ply writes a .ply file"), std::string::npos) << out;
  EXPECT_EQ(test::RunCli("export --format ply --out " + dir + "/m.ply " + dir + "/in", &out), 2);
}

TEST(DriveMcap, DriveWithoutPosesStaysInTheSensorFrame) {
  const std::string dir = test::ScratchDir();
  PointCloud cloud;
  cloud.push_back({1.5f, -2.25f, 0.125f}, 0.5f);
  cloud.push_back({-0.0f, 3e-8f, 100.0f}, 1.0f);
  ASSERT_TRUE(MakeDirs(dir + "/in/velodyne").ok());
  ASSERT_TRUE(WriteKittiBin(dir + "/in/velodyne/000000.bin", cloud).ok());
  auto drive = OpenDrive(dir + "/in");
  ASSERT_TRUE(drive.ok());
  ASSERT_TRUE(ExportDriveMcap(*drive, dir + "/d.mcap").ok());
  auto stats = ImportRecording(dir + "/d.mcap", dir + "/out", {});
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->posed, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/poses.txt"));
  auto back = OpenDrive(dir + "/out");
  ASSERT_TRUE(back.ok());
  ExpectSameDrive(*drive, *back);
}

TEST(RosMessages, PointCloud2DecodesToTheWireFieldTableAndPoints) {
  const std::vector<Eigen::Vector3d> xyz = {{1, 2, 3}, {-4.5, 0.25, 1e3}};
  const auto msg = EncodePointCloud2(1700000000123456789, "map", xyz, {0.5f, 0.75f});
  auto frame = DecodePointCloud2(msg.data(), msg.size(), "m");
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->header.sensor_stamp_ns, 1700000000123456789);
  EXPECT_EQ(frame->header.frame_id, "map");
  EXPECT_EQ(frame->header.point_count, 2u);
  EXPECT_EQ(frame->header.point_stride, 32u);
  ASSERT_EQ(frame->header.fields.size(), 4u);
  EXPECT_EQ(frame->header.fields[3].name, "intensity");
  EXPECT_EQ(frame->header.fields[3].offset, 24u);
  EXPECT_EQ(frame->header.fields[3].type, transport::DataType::kFloat32);
  auto cloud = transport::ToPointCloud(*frame, nullptr);
  ASSERT_TRUE(cloud.ok());
  EXPECT_EQ(cloud->xyz[1], Eigen::Vector3f(-4.5f, 0.25f, 1e3f));
  EXPECT_EQ(cloud->intensity[1], 0.75f);
}

TEST(RosMessages, EveryTruncatedPointCloud2FailsNamingAFieldAndOffset) {
  const auto msg = EncodePointCloud2(5, "velodyne", {{1, 2, 3}}, {0.5f});
  for (size_t n = 0; n < msg.size(); ++n) {
    auto frame = DecodePointCloud2(msg.data(), n, "cut");
    ASSERT_FALSE(frame.ok()) << n;
    EXPECT_NE(frame.status().message().find("cut: field '"), std::string::npos)
        << frame.status().message();
  }
}

TEST(RosMessages, PoseStampedRoundTrips) {
  StampedPose p;
  p.stamp_ns = -1500000000;  // before the epoch: sec -2, nanosec 500000000
  p.parent_frame = "map";
  p.T_parent_child.linear() =
      Eigen::AngleAxisd(0.3, Eigen::Vector3d(1, 2, 3).normalized()).toRotationMatrix();
  p.T_parent_child.translation() = Eigen::Vector3d(10, -20, 0.5);
  const auto msg = EncodePoseStamped(p);
  auto back = DecodePoses(kPoseStampedType, msg.data(), msg.size(), "p");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].stamp_ns, p.stamp_ns);
  EXPECT_EQ((*back)[0].parent_frame, "map");
  EXPECT_LT(((*back)[0].T_parent_child.matrix() - p.T_parent_child.matrix()).cwiseAbs().maxCoeff(),
            1e-15);
  auto wrong = DecodePoses(kOdometryType, msg.data(), msg.size(), "p");
  EXPECT_FALSE(wrong.ok());
}

}  // namespace
}  // namespace dv::recorded
