#include "dejaview/maps/route_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>

#include "dejaview/base/kitti.h"

#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"
#include "scene.h"
#include "testutil.h"

namespace dv::maps {
namespace {

std::vector<MapVoxel> AllVoxels(RouteMap* map) {
  std::vector<MapVoxel> all;
  const VoxelKey big = VoxelKey::Constant(1 << 28);
  EXPECT_TRUE(map->CollectBox(-big, big, &all).ok());
  return all;
}

// KeyFloor truncates and corrects instead of calling std::floor: the same integer for every
// double, at the clamp, at integers and either side of them, for NaN, infinities and -0.
TEST(RouteMap, KeyFloorIsTheClampedFloor) {
  constexpr double kClamp = double(1 << 30);
  auto reference = [&](double v) {
    const double f = std::floor(v);
    return f >= -kClamp ? (f <= kClamp ? int(f) : int(kClamp)) : -int(kClamp);
  };
  std::vector<double> values = {0.0,
                                -0.0,
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::lowest(),
                                std::numeric_limits<double>::denorm_min(),
                                -std::numeric_limits<double>::denorm_min()};
  for (double base : {0.0, 1.0, 2.0, 1e3, 1e6, kClamp - 1, kClamp, kClamp + 1, 2 * kClamp, 1e300}) {
    for (double sign : {1.0, -1.0}) {
      const double v = sign * base;
      values.insert(values.end(), {v, std::nextafter(v, -INFINITY), std::nextafter(v, INFINITY),
                                   v + 0.5, v - 0.5});
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-3 * kClamp, 3 * kClamp), small(-300, 300);
  for (int k = 0; k < 100000; ++k) values.push_back(k % 2 ? u(rng) : small(rng));
  for (double v : values) EXPECT_EQ(KeyFloor(v), reference(v)) << v;
}

TEST(RouteMap, KittiBuildOpenAndRadiusSearchMatchesBruteForce) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  const std::string dir = test::ScratchDir() + "/map";
  BuildOptions opt;
  opt.resolution_m = 0.5;
  opt.every = 4;
  size_t progress_calls = 0;
  opt.progress = [&](size_t, size_t) { ++progress_calls; };
  BuildReport report;
  ASSERT_TRUE(BuildMap({*drive}, opt, dir, &report).ok());
  EXPECT_EQ(report.frames, 3u);
  EXPECT_EQ(progress_calls, 6u);
  // Frames 0, 4 and 8 of the drive: the route is the path through their positions.
  const double route = (drive->poses[4].translation() - drive->poses[0].translation()).norm() +
                       (drive->poses[8].translation() - drive->poses[4].translation()).norm();
  EXPECT_DOUBLE_EQ(report.route_m, route);
  auto map = OpenMap(dir, 0);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ((*map)->version().size(), 16u);
  EXPECT_EQ((*map)->voxel_count(), report.voxels_kept);
  EXPECT_EQ((*map)->loaded_tiles(), 0u);  // lazily loaded

  const std::vector<MapVoxel> all = AllVoxels(map->get());
  ASSERT_EQ(all.size(), report.voxels_kept);
  for (size_t i = 1; i < all.size(); ++i) {
    const VoxelKey ta = TileOf(all[i - 1].key), tb = TileOf(all[i].key);
    ASSERT_TRUE(ta == tb ? KeyLess(all[i - 1].key, all[i].key) : KeyLess(ta, tb)) << i;
  }
  const Eigen::Vector3d origin = drive->poses[4].translation();
  for (int q = 0; q < 20; ++q) {
    const Eigen::Vector3d p = origin + Eigen::Vector3d(q * 1.7 - 15, q * 0.9 - 8, -1.5 + q * 0.1);
    for (double radius : {0.3, 1.0, 2.5}) {
      std::vector<MapVoxel> got;
      ASSERT_TRUE((*map)->RadiusSearch(p, radius, &got).ok());
      size_t expected = 0;
      for (const MapVoxel& v : all) expected += (Representative(v, 0.5) - p).norm() <= radius;
      ASSERT_EQ(got.size(), expected) << "query " << q << " radius " << radius;
      for (const MapVoxel& v : got) ASSERT_LE((Representative(v, 0.5) - p).norm(), radius);
    }
  }
}

// CollectBall keeps exactly the voxels of the whole map within the ball, in canonical order:
// tiles wholly inside (copied whole), cut by the sphere (tested voxel by voxel) and wholly
// outside (skipped) alike. At 0.1 m a tile is 25.6 m wide, so the 60 m ball holds whole ones.
TEST(RouteMap, KittiCollectBallIsTheBallOfTheWholeMap) {
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  const std::string dir = test::ScratchDir() + "/map";
  BuildOptions opt;
  opt.resolution_m = 0.1;
  opt.every = 4;
  ASSERT_TRUE(BuildMap({*drive}, opt, dir).ok());
  auto map = OpenMap(dir, 0);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  const std::vector<MapVoxel> all = AllVoxels(map->get());
  const VoxelKey origin = KeyOf(drive->poses[4].translation(), 0.1);
  size_t largest = 0;
  for (int q = 0; q < 6; ++q) {
    const VoxelKey centre = origin + VoxelKey(q * 37 - 90, q * 23 - 50, q * 3 - 8);
    for (int reach : {0, 3, 130, 600}) {
      std::vector<MapVoxel> got;
      ASSERT_TRUE((*map)->CollectBall(centre, reach, &got).ok());
      std::vector<MapVoxel> expected;
      for (const MapVoxel& v : all) {
        if ((v.key - centre).cast<int64_t>().squaredNorm() <= int64_t(reach) * reach) {
          expected.push_back(v);
        }
      }
      ASSERT_EQ(got.size(), expected.size()) << "centre " << q << " reach " << reach;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].key, expected[i].key) << "centre " << q << " reach " << reach;
        ASSERT_EQ(std::memcmp(&got[i], &expected[i], sizeof(MapVoxel)), 0) << i;
      }
      largest = std::max(largest, got.size());
    }
  }
  EXPECT_GT(largest, all.size() / 2);
}

TEST(RouteMap, TransientObjectsAreDroppedStaticKept) {
  const std::string root = test::ScratchDir();
  const Drive drive = test::WriteStreetDrive(root + "/drive", {0, 2, 4, 6}, /*car_frame=*/1);
  BuildOptions opt;
  opt.resolution_m = 0.2;
  BuildReport report;
  ASSERT_TRUE(BuildMap({drive}, opt, root + "/map", &report).ok());
  EXPECT_GT(report.voxels_dropped, 0u);
  // Poses at x = 0, 2, 4, 6 along a straight street.
  EXPECT_DOUBLE_EQ(report.route_m, 6.0);
  auto map = OpenMap(root + "/map", 0);
  ASSERT_TRUE(map.ok());
  // The car's side facing the sensor is the plane y = -2.2 (x 3..7, z -1.7..-0.2); the facade
  // behind it (y = -8) was seen in every other frame.
  std::vector<MapVoxel> car, wall;
  for (double x = 3.5; x < 7; x += 0.5) {
    ASSERT_TRUE((*map)->RadiusSearch(Eigen::Vector3d(x, -2.2, -0.8), 0.4, &car).ok());
    ASSERT_TRUE((*map)->RadiusSearch(Eigen::Vector3d(x, -8, -0.8), 0.4, &wall).ok());
  }
  EXPECT_TRUE(car.empty()) << car.size() << " car voxels kept";
  EXPECT_GT(wall.size(), 20u);
}

TEST(RouteMap, MemoryBudgetEvictsOldTiles) {
  const std::string root = test::ScratchDir();
  const Drive drive = test::WriteStreetDrive(root + "/drive", {0, 10, 20, 30});
  BuildOptions opt;
  opt.resolution_m = 0.05;  // 12.8 m tiles: the street spans several
  ASSERT_TRUE(BuildMap({drive}, opt, root + "/map").ok());
  auto full = OpenMap(root + "/map", 0);
  ASSERT_TRUE(full.ok());
  ASSERT_GT((*full)->tiles().size(), 6u);
  const size_t budget = 200 * 1024;
  auto map = OpenMap(root + "/map", budget);
  ASSERT_TRUE(map.ok());
  for (double x = -20; x <= 50; x += 5) {
    ASSERT_TRUE((*map)->LoadAround(Eigen::Vector3d(x, 0, 0), 3).ok());
    size_t needed = 0;
    for (const TileInfo& t : (*map)->tiles()) {
      const VoxelKey lo = TileOf(KeyOf(Eigen::Vector3d(x - 3, -3, -3), 0.05));
      const VoxelKey hi = TileOf(KeyOf(Eigen::Vector3d(x + 3, 3, 3), 0.05));
      if ((t.tile.array() >= lo.array()).all() && (t.tile.array() <= hi.array()).all()) {
        needed += t.voxels * sizeof(MapVoxel);
      }
    }
    EXPECT_LE((*map)->memory_bytes(), std::max(budget, needed)) << "at x " << x;
  }
  EXPECT_LT((*map)->loaded_tiles(), (*full)->tiles().size());
}

TEST(RouteMap, CorruptFilesGiveClearErrors) {
  const std::string root = test::ScratchDir();
  const Drive drive = test::WriteStreetDrive(root + "/drive", {0, 2});
  BuildOptions opt;
  opt.resolution_m = 0.5;
  ASSERT_TRUE(BuildMap({drive}, opt, root + "/map").ok());
  auto map = OpenMap(root + "/map", 0);
  ASSERT_TRUE(map.ok());
  const std::string tile = root + "/map/" + "tiles/" + std::to_string((*map)->tiles()[0].tile.x()) +
                           "_" + std::to_string((*map)->tiles()[0].tile.y()) + "_" +
                           std::to_string((*map)->tiles()[0].tile.z()) + ".dvt";
  auto bytes = ReadFileBytes(tile).value();
  // A tile that is valid by itself but not the one the manifest names.
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomic(tile, bytes).ok());
  auto reopened = OpenMap(root + "/map", 0);
  ASSERT_TRUE(reopened.ok());
  std::vector<MapVoxel> out;
  const Status s =
      (*reopened)->CollectBox(VoxelKey::Constant(-1000), VoxelKey::Constant(1000), &out);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find(".dvt"), std::string::npos) << s.message();
  // And DecodeTile by itself names the checksum.
  auto decoded = DecodeTile(bytes.data(), bytes.size(), "t.dvt", 0.5, (*map)->tiles()[0].tile);
  EXPECT_NE(decoded.status().message().find("checksum"), std::string::npos);
  for (size_t n : {size_t(0), size_t(10), bytes.size() - 1}) {
    EXPECT_FALSE(DecodeTile(bytes.data(), n, "t.dvt", 0.5, (*map)->tiles()[0].tile).ok());
  }

  auto manifest = ReadFileText(root + "/map/MANIFEST").value();
  manifest[20] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(root + "/map/MANIFEST", manifest).ok());
  auto bad = OpenMap(root + "/map", 0);
  EXPECT_EQ(bad.status().code(), Status::Code::kCorruption);
  EXPECT_NE(bad.status().message().find("MANIFEST"), std::string::npos);
  EXPECT_EQ(OpenMap(root + "/nothing", 0).status().code(), Status::Code::kNotFound);
}

TEST(RouteMap, TileRoundTripAndDeterministicVersion) {
  std::vector<MapVoxel> vs;
  for (int i = 0; i < 500; ++i) {
    MapVoxel v{VoxelKey(256 + i % 7, -256 + i / 7 % 11, i / 77),
               {uint8_t(i), uint8_t(3 * i), 7},
               uint8_t(i / 2),
               uint16_t(i % 5 + 1),
               uint16_t(i % 3)};
    vs.push_back(v);
  }
  std::sort(vs.begin(), vs.end(), [](auto& a, auto& b) { return KeyLess(a.key, b.key); });
  vs.erase(std::unique(vs.begin(), vs.end(), [](auto& a, auto& b) { return a.key == b.key; }),
           vs.end());
  const auto bytes = EncodeTile(VoxelKey(1, -1, 0), 0.2, vs);
  auto back = DecodeTile(bytes.data(), bytes.size(), "x", 0.2, VoxelKey(1, -1, 0));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), vs.size());
  for (size_t i = 0; i < vs.size(); ++i) {
    EXPECT_EQ((*back)[i].key, vs[i].key);
    EXPECT_EQ(std::memcmp((*back)[i].q, vs[i].q, 3), 0);
    EXPECT_EQ((*back)[i].hits, vs[i].hits);
    EXPECT_EQ((*back)[i].seen_through, vs[i].seen_through);
    EXPECT_EQ((*back)[i].intensity, vs[i].intensity);
  }
  EXPECT_FALSE(DecodeTile(bytes.data(), bytes.size(), "x", 0.2, VoxelKey(0, 0, 0)).ok());

  const std::string root = test::ScratchDir();
  const Drive drive = test::WriteStreetDrive(root + "/drive", {0, 3});
  BuildOptions opt;
  opt.resolution_m = 0.3;
  ASSERT_TRUE(BuildMap({drive}, opt, root + "/a").ok());
  ASSERT_TRUE(BuildMap({drive}, opt, root + "/b").ok());
  EXPECT_EQ(OpenMap(root + "/a", 0).value()->version(), OpenMap(root + "/b", 0).value()->version());
}

// Codec priors ride in the manifest (version 2): opaque bytes that come back as they went in, a new
// map version over the same tiles, and a damaged priors line is refused by name (the manifest's
// own checksum recomputed, so that the line's own checks are the ones that fire).
TEST(RouteMap, CodecPriorsRideInTheManifest) {
  const std::string root = test::ScratchDir();
  const Drive drive = test::WriteStreetDrive(root + "/drive", {0, 2});
  BuildOptions opt;
  opt.resolution_m = 0.5;
  ASSERT_TRUE(BuildMap({drive}, opt, root + "/map").ok());
  const auto before = OpenMap(root + "/map", 0).value();
  EXPECT_TRUE(before->codec_priors().empty());
  std::vector<uint8_t> priors(5000, 7);
  for (size_t i = 0; i < priors.size(); i += 3) priors[i] = uint8_t(i * 31);
  ASSERT_TRUE(SetCodecPriors(root + "/map", priors).ok());
  const auto after = OpenMap(root + "/map", 0).value();
  EXPECT_EQ(after->codec_priors(), priors);
  EXPECT_NE(after->version(), before->version());
  EXPECT_EQ(after->tiles().size(), before->tiles().size());
  EXPECT_EQ(after->voxel_count(), before->voxel_count());
  const std::string text = ReadFileText(root + "/map/MANIFEST").value();
  EXPECT_EQ(text.rfind("dejaview-map 2\n", 0), 0u);
  EXPECT_EQ(SetCodecPriors(root + "/map", {}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SetCodecPriors(root + "/map", std::vector<uint8_t>(kMaxCodecPriorsBytes + 1)).code(),
            Status::Code::kInvalidArgument);

  // The text before the end line, edited, with a fresh end line.
  const size_t end = text.rfind("end ");
  auto resealed = [&](std::string body) {
    char line[32];
    std::snprintf(line, sizeof(line), "end %08x\n", crc32c::Value(body.data(), body.size()));
    return body + line;
  };
  const size_t at = text.find("codec_priors ");
  ASSERT_NE(at, std::string::npos);
  const std::string head = text.substr(0, at);
  const std::string line = text.substr(at, end - at);
  const std::string hex = line.substr(line.rfind(' ') + 1, line.size() - line.rfind(' ') - 2);
  ASSERT_TRUE(WriteFileAtomic(root + "/map/MANIFEST", resealed(head + line)).ok());
  EXPECT_EQ(OpenMap(root + "/map", 0).value()->codec_priors(), priors);
  struct Damage {
    std::string body;
    const char* what;
  };
  for (const Damage& d :
       {Damage{head, "bad codec_priors line"},
        Damage{head + "codec_priors 0 " + hex + "\n", "codec_priors: bad size"},
        Damage{head + "codec_priors 5000 " + hex.substr(1) + "\n", "codec_priors: bad length"},
        Damage{head + "codec_priors 5000 " + std::string(hex.size(), 'g') + "\n",
               "codec_priors: not hex"},
        Damage{head + "codec_priors 4999 " + hex + "\n", "codec_priors: does not decompress"},
        Damage{text.substr(0, end) + "tile 9 9 9 1 1 00000000\n", "unexpected 'tile'"}}) {
    ASSERT_TRUE(WriteFileAtomic(root + "/map/MANIFEST", resealed(d.body)).ok());
    auto bad = OpenMap(root + "/map", 0);
    ASSERT_FALSE(bad.ok()) << d.what;
    EXPECT_EQ(bad.status().code(), Status::Code::kCorruption);
    EXPECT_NE(bad.status().message().find(d.what), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace dv::maps
