// The export's threads (server/export.cpp): the same bytes for any thread count. Its own binary so
// that CI's thread-sanitizer stage (scripts/test.sh) builds and runs it without the rest of the
// server's suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/map_root.h"
#include "dejaview/maps/route_map.h"
#include "dejaview/server/export.h"
#include "dejaview/server/storage.h"
#include "dejaview/transport/spool.h"
#include "testutil.h"

namespace dv::server {
namespace {

transport::SpoolRecord Rec(uint64_t seq) {
  transport::SpoolRecord r;
  r.id = seq;
  r.meta.vehicle = "veh-1";
  r.meta.drive = "d1";
  r.meta.sequence = seq;
  r.meta.timestamp_ns = int64_t(seq) * 100'000'000;
  return r;
}

std::map<std::string, std::vector<uint8_t>> FolderBytes(const std::string& dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file())
      out[e.path().lexically_relative(dir).string()] = *ReadFileBytes(e.path().string());
  }
  return out;
}

// Delta frames of real KITTI scans (the map from the even frames of sequence 00, the odd ones
// coded against it), intra frames between them, a frame whose map version is missing (skipped, so
// later frames open their batches in other places than the decoding threads assumed): exported by
// 1, 2 and 3 threads in both layouts, every file has the same bytes, in the same order.
TEST(Export, WritesTheSameBytesWithAnyNumberOfThreads) {
  const std::string dir = test::ScratchDir();
  auto drive = OpenDrive(test::KittiSeq("00"));
  ASSERT_TRUE(drive.ok()) << drive.status().ToString();
  maps::BuildOptions build;
  build.every = 2;
  ASSERT_TRUE(maps::BuildMap({*drive}, build, dir + "/built").ok());
  auto version = maps::PublishMap(dir + "/built", dir + "/maps");  // maps/<version>/
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  auto map = maps::OpenMap(dir + "/maps/" + *version, 0);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  auto storage = OpenStorage(dir + "/store", "", "");
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  codec::Encoder delta_encoder(map->get());
  for (uint64_t i = 1; i < drive->size(); i += 2) {
    auto cloud = ReadKittiBin(drive->frame_paths[i]);
    ASSERT_TRUE(cloud.ok());
    for (int kind = 0; kind < 3; ++kind) {  // delta, intra, delta with a missing map version
      transport::SpoolRecord rec = Rec(i * 3 + uint64_t(kind));
      rec.meta.T_map_sensor = drive->poses[i];
      auto payload = kind == 1 ? codec::Encoder(nullptr).Encode(*cloud, drive->poses[i], {}, {})
                               : delta_encoder.Encode(*cloud, drive->poses[i], {}, {});
      ASSERT_TRUE(payload.ok()) << payload.status().ToString();
      rec.payload = *payload;
      auto header = codec::DecodeHeader(payload->data(), payload->size());
      ASSERT_TRUE(header.ok());
      EXPECT_EQ(header->intra, kind == 1) << "frame " << i << " kind " << kind;
      rec.meta.map_version = kind == 2 ? "00ff00ff00ff00ff" : header->map_version;
      const auto body = transport::EncodeRecord(rec);
      store::FrameRecord row;
      row.vehicle = rec.meta.vehicle;
      row.sequence = rec.meta.sequence;
      row.timestamp_ns = rec.meta.timestamp_ns;
      row.map_version = rec.meta.map_version;
      row.object = *storage->store->Put(body.data(), body.size());
      ASSERT_TRUE(*storage->index->Insert(row));
    }
  }
  const auto rows = *storage->index->Query({});
  ASSERT_EQ(rows.size(), 15u);
  for (const char* layout : {"kitti", "packed"}) {
    std::map<std::string, std::vector<uint8_t>> first;
    for (int threads : {1, 2, 3}) {
      ExportOptions o;
      o.layout = layout;
      o.batch_frames = 4;
      o.shuffle = true;
      o.seed = 11;
      o.threads = threads;
      MapVersions maps(dir + "/maps");
      const std::string out = dir + "/" + layout + std::to_string(threads);
      auto st = ExportFrames(storage->store.get(), rows, &maps, o, out);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      EXPECT_EQ(st->frames, 10u) << layout << threads;
      EXPECT_EQ(st->frames_skipped, 5u);
      for (const std::string& why : st->skipped) {
        EXPECT_NE(why.find("00ff00ff00ff00ff"), std::string::npos) << why;
      }
      const auto files = FolderBytes(out);
      EXPECT_EQ(files.size(), std::string(layout) == "kitti" ? 13u : 4u);
      if (threads == 1) {
        first = files;
      } else {
        EXPECT_TRUE(files == first)
            << layout << ": " << threads << " threads wrote other bytes than 1";
      }
    }
  }
  ExportOptions zero;
  zero.threads = 0;
  MapVersions maps(dir + "/maps");
  EXPECT_EQ(ExportFrames(storage->store.get(), rows, &maps, zero, dir + "/x").status().code(),
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace dv::server
