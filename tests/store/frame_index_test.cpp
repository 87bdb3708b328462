// The frame index contract on both back ends (SQLite file, real PostgreSQL server). Two server
// processes on one PostgreSQL and one bucket: tests/server/tiered_server_test.cpp.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <algorithm>

#include "dejaview/store/frame_index.h"
#include "dejaview/store/testing/postgres_process.h"
#include "testutil.h"

namespace dv::store {
namespace {

FrameRecord Frame(const std::string& vehicle, uint32_t sensor, uint64_t seq) {
  FrameRecord r;
  r.vehicle = vehicle;
  r.sensor_id = sensor;
  r.sequence = seq;
  r.timestamp_ns = int64_t(seq) * 100000000 + sensor;  // 10 Hz
  r.drive = "d" + std::to_string(seq / 5);
  r.map_version = seq % 3 ? "0123456789abcdef" : "";
  r.T_map_sensor.translation() = Eigen::Vector3d(double(seq) / 3, -0.1 * double(sensor), 1e-9);
  r.T_map_sensor.linear() = Eigen::AngleAxisd(0.1 * double(seq), Eigen::Vector3d::UnitZ()).matrix();
  r.bytes = 1000 + seq;
  const std::string bytes = vehicle + "/" + std::to_string(sensor) + "/" + std::to_string(seq);
  r.object = ComputeId(bytes.data(), bytes.size());
  return r;
}

void CheckContract(FrameIndex* index) {
  for (uint64_t seq = 0; seq < 10; ++seq) {
    for (uint32_t sensor = 0; sensor < 2; ++sensor) {
      auto fresh = index->Insert(Frame("car-1", sensor, seq));
      ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
      EXPECT_TRUE(*fresh);
    }
  }
  ASSERT_TRUE(*index->Insert(Frame("car-2", 0, 3)));
  auto again = index->Insert(Frame("car-1", 1, 4));  // a resent frame
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(*index->Count(), 21u);
  // Frames 2..4 of car-1 (timestamps in [0.2 s, 0.5 s)), in time order.
  FrameQuery q;
  q.vehicle = "car-1";
  q.from_ns = 200000000;
  q.to_ns = 500000000;
  auto rows = index->Query(q);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 6u);
  for (size_t i = 0; i < rows->size(); ++i) {
    const FrameRecord want = Frame("car-1", uint32_t(i % 2), 2 + i / 2);
    EXPECT_EQ((*rows)[i].sequence, want.sequence);
    EXPECT_EQ((*rows)[i].sensor_id, want.sensor_id);
    EXPECT_EQ((*rows)[i].timestamp_ns, want.timestamp_ns);
    EXPECT_EQ((*rows)[i].object, want.object);
    EXPECT_EQ((*rows)[i].drive, want.drive);
    EXPECT_EQ((*rows)[i].map_version, want.map_version);
    EXPECT_EQ((*rows)[i].bytes, want.bytes);
    EXPECT_EQ((*rows)[i].T_map_sensor.translation(), want.T_map_sensor.translation());
    EXPECT_TRUE((*rows)[i].T_map_sensor.linear().isApprox(want.T_map_sensor.linear(), 1e-12));
  }
  // A batch is one transaction that reports each record: new, resent, new.
  auto batch = index->Insert(
      std::vector<FrameRecord>{Frame("car-2", 0, 4), Frame("car-2", 0, 3), Frame("car-2", 1, 4)});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(*batch, (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(*index->Has("car-2", 1, 0, 4));
  EXPECT_FALSE(*index->Has("car-2", 1, 0, 5));
  // A restarted source numbers its frames from 0 again in a new epoch: new frames, not resends.
  // Epochs use all 64 bits (offline drives' have the top bit set).
  FrameRecord restarted = Frame("car-2", 1, 4);
  restarted.source_epoch = (uint64_t(1) << 63) | 12345;
  EXPECT_TRUE(*index->Insert(restarted));
  EXPECT_FALSE(*index->Insert(restarted));
  EXPECT_TRUE(*index->Has("car-2", 1, restarted.source_epoch, 4));
  EXPECT_FALSE(*index->Has("car-2", 1, restarted.source_epoch + 1, 4));
  FrameQuery by_car2;
  by_car2.vehicle = "car-2";
  auto car2 = index->Query(by_car2);
  ASSERT_TRUE(car2.ok());
  ASSERT_EQ(car2->size(), 4u);
  EXPECT_EQ(std::count_if(car2->begin(), car2->end(),
                          [&](const FrameRecord& r) {
                            return r.source_epoch == restarted.source_epoch && r.sequence == 4;
                          }),
            1);
  // Near a point: x = seq / 3 within 0.5 m of (2, 0, 0) -> sequences 5..7, sensor 0 and 1
  // (y = -0.1 for sensor 1 keeps it inside), over every vehicle and time.
  q = FrameQuery{};
  q.near = Eigen::Vector3d(2, 0, 0);
  q.radius_m = 0.5;
  rows = index->Query(q);
  ASSERT_TRUE(rows.ok());
  std::vector<uint64_t> seqs;
  for (const auto& r : *rows) seqs.push_back(r.sequence);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{5, 5, 6, 6, 7, 7}));
  q.vehicle = "car-3";
  auto none = index->Query(q);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(FrameIndex, SqliteContract) {
  auto index = OpenFrameIndex("sqlite:" + test::ScratchDir() + "/frames.db");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  CheckContract(index->get());
  EXPECT_EQ(OpenFrameIndex("sqlite:/nonexistent-dir/x.db").status().code(), Status::Code::kIoError);
  EXPECT_EQ(OpenFrameIndex("mysql:x").status().code(), Status::Code::kInvalidArgument);
}

// Place look-ups go through the R*Tree (the plan says so), and an index file made before the
// R*Tree existed gets its rows into it when opened.
TEST(FrameIndex, SqlitePlaceLookUpsUseTheRTree) {
  const std::string path = test::ScratchDir() + "/frames.db";
  {
    auto index = OpenFrameIndex("sqlite:" + path);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(*(*index)->Insert(Frame("car-1", 0, seq)));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TRIGGER frames_place_insert; DROP TABLE frames_place", nullptr,
                         nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto index = OpenFrameIndex("sqlite:" + path);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  FrameQuery q;
  q.near = Eigen::Vector3d(2, 0, 0);  // x = seq / 3: sequences 5, 6, 7 lie within 0.5 m
  q.radius_m = 0.5;
  auto rows = (*index)->Query(q);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  std::vector<uint64_t> seqs;
  for (const FrameRecord& r : *rows) seqs.push_back(r.sequence);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{5, 6, 7}));
  auto plan = (*index)->Explain(q);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->find("SCAN frames_place VIRTUAL TABLE INDEX"), std::string::npos) << *plan;
  auto by_time = (*index)->Explain(FrameQuery{});
  ASSERT_TRUE(by_time.ok());
  EXPECT_EQ(by_time->find("frames_place"), std::string::npos) << *by_time;
}

TEST(FrameIndex, PostgresContract) {
  auto pg = PostgresProcess::Start(test::ScratchDir() + "/pg");
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  auto index = OpenFrameIndex("postgresql:" + (*pg)->conninfo());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  CheckContract(index->get());
  const auto refused = OpenFrameIndex("postgresql:host=/nonexistent port=1 user=x");
  EXPECT_EQ(refused.status().code(), Status::Code::kUnavailable);
}

// With a fleet's worth of rows the planner takes the GiST index for a place look-up.
TEST(FrameIndex, PostgresPlaceLookUpsUseTheGistIndex) {
  auto pg = PostgresProcess::Start(test::ScratchDir() + "/pg");
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  auto index = OpenFrameIndex("postgresql:" + (*pg)->conninfo());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  std::vector<FrameRecord> frames;
  for (uint64_t seq = 0; seq < 5000; ++seq) frames.push_back(Frame("car-1", 0, seq));
  ASSERT_TRUE((*index)->Insert(frames).ok());
  FrameQuery q;
  q.near = Eigen::Vector3d(2, 0, 0);  // x = seq / 3: sequences 5, 6, 7 lie within 0.5 m
  q.radius_m = 0.5;
  auto rows = (*index)->Query(q);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].sequence, 5u);
  auto plan = (*index)->Explain(q);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->find("frames_by_place"), std::string::npos) << *plan;
}

}  // namespace
}  // namespace dv::store
