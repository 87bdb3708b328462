// Map sync (docs/map-sync.md) over real sockets: the message parser, a sync from version A to
// B against a real server (in-process, CURVE on) that fetches exactly the changed tiles,
// corrupted tiles, manifests and chunks rejected with A kept, and the agent and server as
// processes switching maps mid-drive with every frame decoding against its own version.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "../maps/scene.h"
#include "dejaview/agent/map_sync.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/base/testing/process_util.h"
#include "dejaview/maps/map_root.h"
#include "dejaview/maps/route_map.h"
#include "dejaview/server/reconstruct.h"
#include "dejaview/server/storage.h"
#include "dejaview/server/testing/running_server.h"
#include "dejaview/transport/map_sync.h"
#include "testutil.h"

namespace dv {
namespace {

namespace fs = std::filesystem;
using transport::DecodeMapSync;
using transport::EncodeMapSync;
using transport::MapFile;
using transport::MapSyncMessage;
using transport::MapSyncType;

MapSyncMessage Chunk() {
  MapSyncMessage m;
  m.type = MapSyncType::kChunk;
  m.map_version = "0123456789abcdef";
  m.file = MapFile::kTile;
  m.tile = {-2, 0, 1};
  m.offset = 4;
  m.total = 10;
  m.data = {1, 2, 3, 4, 5, 6};
  return m;
}

TEST(MapSyncMessage, RoundTripsAndRejectsEveryTruncationAndAlteration) {
  MapSyncMessage latest_req;
  latest_req.map_version = "";
  MapSyncMessage latest;
  latest.type = MapSyncType::kLatest;
  latest.map_version = "fedcba9876543210";
  latest.manifest_bytes = 321;
  MapSyncMessage req = Chunk();
  req.type = MapSyncType::kChunkRequest;
  req.max_len = 4096;
  MapSyncMessage err;
  err.type = MapSyncType::kError;
  err.error = transport::MapSyncError::kNotFound;
  err.detail = "no such tile";
  for (const MapSyncMessage& m : {latest_req, latest, req, Chunk(), err}) {
    const std::vector<uint8_t> bytes = EncodeMapSync(m);
    auto back = DecodeMapSync(bytes.data(), bytes.size());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(EncodeMapSync(*back), bytes);
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_FALSE(DecodeMapSync(bytes.data(), n).ok()) << MapSyncTypeName(m.type) << " " << n;
    }
    std::vector<uint8_t> longer = bytes;
    longer.push_back(0);
    auto trailing = DecodeMapSync(longer.data(), longer.size());
    ASSERT_FALSE(trailing.ok());
  }
  // Any single flipped bit of a CHUNK (header, key, offset, data or CRC) is caught.
  const std::vector<uint8_t> chunk = EncodeMapSync(Chunk());
  for (size_t i = 0; i < chunk.size(); ++i) {
    std::vector<uint8_t> bad = chunk;
    bad[i] ^= 0x10;
    EXPECT_FALSE(DecodeMapSync(bad.data(), bad.size()).ok()) << "byte " << i;
  }
  std::vector<uint8_t> bad = chunk;
  bad[bad.size() - 6] ^= 1;  // a data byte
  EXPECT_EQ(DecodeMapSync(bad.data(), bad.size()).status().message(),
            "map-sync message: CHUNK crc: mismatch (altered in transit)");
  // Bounds, each named.
  MapSyncMessage big = req;
  big.max_len = transport::kMaxMapChunkBytes + 1;
  auto b = EncodeMapSync(big);
  EXPECT_EQ(DecodeMapSync(b.data(), b.size()).status().message(),
            "map-sync message: CHUNK_REQUEST max_len: not 1 .. 1 MiB");
  MapSyncMessage past = Chunk();
  past.total = 8;  // offset 4 + 6 bytes
  b = EncodeMapSync(past);
  EXPECT_EQ(DecodeMapSync(b.data(), b.size()).status().message(),
            "map-sync message: CHUNK length: above 1 MiB or past the file's end");
  MapSyncMessage path = req;
  path.map_version = "../../etc/passw";
  path.map_version += "d";
  b = EncodeMapSync(path);
  EXPECT_EQ(DecodeMapSync(b.data(), b.size()).status().message(),
            "map-sync message: CHUNK_REQUEST map version: truncated or not 16 hex digits");
  MapSyncMessage v2 = latest_req;
  v2.version = 2;
  b = EncodeMapSync(v2);
  EXPECT_EQ(DecodeMapSync(b.data(), b.size()).status().code(), Status::Code::kInvalidArgument);
}

// The seed written by hand from docs/map-sync.md is what the encoder writes and parses back.
TEST(MapSyncMessage, MatchesTheSpecSeed) {
  auto seed =
      ReadFileBytes(std::string(DEJAVIEW_FIXTURE_DIR) + "/../fuzz/corpus/fuzz_map_sync/chunk");
  ASSERT_TRUE(seed.ok()) << seed.status().ToString();
  EXPECT_EQ(EncodeMapSync(Chunk()), *seed);
  auto m = DecodeMapSync(seed->data(), seed->size());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->tile, (std::array<int32_t, 3>{-2, 0, 1}));
  EXPECT_EQ(m->data, Chunk().data);
}

TEST(MapSyncConfig, KeysHaveDefaultsAndBadValuesAreNamed) {
  const std::string base = "vehicle: v\nspool: {dir: /tmp/s}\n";
  auto c = agent::ParseAgentConfig(base, "a.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->map_sync.enabled);
  EXPECT_EQ(c->map_sync.interval_ms, 60000);
  EXPECT_EQ(c->map_sync.chunk_bytes, 256 << 10);
  c = agent::ParseAgentConfig(base + "map_sync: {enabled: true, root: /r, chunk_kb: 64}\n",
                              "a.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->map_sync.chunk_bytes, 64 << 10);
  const std::pair<std::string, std::string> bad[] = {
      {"map_sync: {enabled: true}", "a.yaml:3:1: map_sync.root: required when map_sync.enabled"},
      {"map_sync: {chunk_kb: 2048}",
       "a.yaml:3:22: map_sync.chunk_kb: 2048 is out of range [1, 1024]"},
      {"map_sync: {interval_ms: 0}",
       "a.yaml:3:25: map_sync.interval_ms: 0 is out of range [1, 86400000]"},
      {"map_sync: {intervl_ms: 5}",
       "a.yaml:3:12: map_sync.intervl_ms: unknown key (did you mean 'interval_ms'?)"},
      {"map_sync: {enabled: maybe}",
       "a.yaml:3:21: map_sync.enabled: expected true or false, got 'maybe'"},
  };
  for (const auto& [yaml, message] : bad) {
    auto r = agent::ParseAgentConfig(base + yaml + "\n", "a.yaml");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_EQ(r.status().message(), message);
  }
}

TEST(MapRoot, PublishChecksEveryTileAndLatestIsValidated) {
  const std::string dir = test::ScratchDir();
  const Drive d = test::WriteStreetDrive(dir + "/d", {0});
  ASSERT_TRUE(maps::BuildMap({d}, {}, dir + "/m").ok());
  auto map = maps::OpenMap(dir + "/m", 0);
  ASSERT_TRUE(map.ok());
  const std::string tile = dir + "/m/" + maps::TileFileName((*map)->tiles().front().tile);
  std::vector<uint8_t> bytes = ReadFileBytes(tile).value();
  bytes[7] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(tile, bytes).ok());
  auto published = maps::PublishMap(dir + "/m", dir + "/root");
  ASSERT_FALSE(published.ok());
  EXPECT_EQ(published.status().message(),
            tile + ": tile does not match the manifest (size or checksum)");
  EXPECT_EQ(*maps::ReadLatest(dir + "/root"), "");
  EXPECT_TRUE(fs::is_empty(dir + "/root"));  // no staging folder left behind
  ASSERT_TRUE(WriteFileAtomic(dir + "/root/LATEST", "../../etc\n").ok());
  EXPECT_EQ(maps::ReadLatest(dir + "/root").status().message(),
            dir + "/root/LATEST: not a 16-hex-digit map version");
}

TEST(MapRoot, PruneKeepsLatestAndTheNamedVersionsOnly) {
  const std::string dir = test::ScratchDir();
  const std::string root = dir + "/root";
  std::vector<std::string> v;
  for (double s : {0.0, 10.0, 20.0}) {
    const std::string name = std::to_string(v.size());
    ASSERT_TRUE(
        maps::BuildMap({test::WriteStreetDrive(dir + "/d" + name, {s})}, {}, dir + "/m" + name)
            .ok());
    v.push_back(*maps::PublishMap(dir + "/m" + name, root));
  }
  ASSERT_EQ(*maps::ReadLatest(root), v[2]);
  fs::create_directories(root + "/.staging-" + v[0]);  // a sync under way
  EXPECT_EQ(*maps::PruneVersions(root, {v[1]}), 1u);
  EXPECT_FALSE(fs::exists(root + "/" + v[0]));
  EXPECT_TRUE(fs::exists(root + "/" + v[1]));
  EXPECT_TRUE(fs::exists(root + "/.staging-" + v[0]));
  EXPECT_TRUE(maps::VerifyMap(root + "/" + v[2]).ok());
  EXPECT_EQ(*maps::PruneVersions(root, {}), 1u);  // LATEST is kept whatever keep says
  EXPECT_FALSE(fs::exists(root + "/" + v[1]));
  EXPECT_EQ(*maps::PruneVersions(root, {}), 0u);
  EXPECT_EQ(*maps::ReadLatest(root), v[2]);
}

// Street maps: A from the drive's first passes, B with passes further down the street, which
// change the tiles both see and add new ones; the tiles behind stay byte-identical.
struct Maps {
  std::string a, b;
};
Maps BuildMaps(const std::string& dir) {
  maps::BuildOptions o;
  o.resolution_m = 0.1;  // 25.6 m tiles: several along the street
  const Drive first = test::WriteStreetDrive(dir + "/da", {0, 2});
  const Drive more = test::WriteStreetDrive(dir + "/db", {45});
  EXPECT_TRUE(maps::BuildMap({first}, o, dir + "/A").ok());
  EXPECT_TRUE(maps::BuildMap({first, more}, o, dir + "/B").ok());
  return {dir + "/A", dir + "/B"};
}

std::map<std::string, std::vector<uint8_t>> Files(const std::string& dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    out[fs::relative(e.path(), dir).string()] = ReadFileBytes(e.path().string()).value();
  }
  return out;
}

class MapSync : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::ScratchDir();
    maps_ = BuildMaps(dir_);
    a_ = maps::OpenMap(maps_.a, 0).value()->version();
    b_ = maps::OpenMap(maps_.b, 0).value()->version();
    // The server has published A, then B; the vehicle holds A.
    ASSERT_EQ(*maps::PublishMap(maps_.a, dir_ + "/server-maps"), a_);
    ASSERT_EQ(*maps::PublishMap(maps_.b, dir_ + "/server-maps"), b_);
    ASSERT_EQ(*maps::PublishMap(maps_.a, dir_ + "/agent-maps"), a_);
    // The tiles B changed or added: exactly what a sync may fetch.
    auto ma = maps::OpenMap(maps_.a, 0).value();
    auto mb = maps::OpenMap(maps_.b, 0).value();
    std::set<std::tuple<int, int, int, uint64_t, uint32_t>> in_a;
    for (const auto& t : ma->tiles())
      in_a.insert({t.tile.x(), t.tile.y(), t.tile.z(), t.bytes, t.crc32c});
    for (const auto& t : mb->tiles()) {
      if (in_a.count({t.tile.x(), t.tile.y(), t.tile.z(), t.bytes, t.crc32c})) {
        ++unchanged_;
      } else {
        changed_.push_back(t);
      }
    }
    ASSERT_GT(changed_.size(), 0u);
    ASSERT_GT(unchanged_, 0u);
    // CURVE on, the vehicle enrolled: map sync rides the upload's socket and its ZAP check.
    auto server_keys = transport::GenerateCurveKeys();
    agent_keys_ = transport::GenerateCurveKeys().value();
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/server.secret", server_keys->secret_z85 + "\n").ok());
    ASSERT_TRUE(MakeDirs(dir_ + "/keys").ok());
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/keys/veh-1.public", agent_keys_.public_z85 + "\n").ok());
    server::ServerOptions o;
    o.curve_key_file = dir_ + "/server.secret";
    o.keys_dir = dir_ + "/keys";
    o.reload = &reload_;
    o.maps_root = dir_ + "/server-maps";
    server_ = std::make_unique<server::RunningServer>(dir_ + "/store", o);
    ASSERT_FALSE(server_->endpoint().empty());
    config_.upload.endpoint = server_->endpoint();
    config_.upload.curve_server_key = server_keys->public_z85;
    config_.map_sync.timeout_ms = 5000;
  }
  // One sync of the agent root from A, counting the exchanges; alter may change a reply.
  StatusOr<agent::MapSyncResult> Sync(
      uint32_t chunk_bytes, size_t* exchanges,
      const std::function<void(size_t, std::vector<uint8_t>*)>& alter = {}) {
    auto socket = agent::MapSyncSocket::Connect(config_, agent_keys_, &stop_);
    if (!socket.ok()) return socket.status();
    *exchanges = 0;
    return agent::SyncMap(
        [&](const std::vector<uint8_t>& req) -> StatusOr<std::vector<uint8_t>> {
          DV_ASSIGN_OR_RETURN(std::vector<uint8_t> reply, (*socket)->Exchange(req));
          if (alter) alter(*exchanges, &reply);
          ++*exchanges;
          return reply;
        },
        dir_ + "/agent-maps/" + a_, dir_ + "/agent-maps", chunk_bytes);
  }
  // After a failed sync the vehicle is exactly as before: A in use and LATEST, nothing else.
  void ExpectStillOnA() {
    EXPECT_EQ(*maps::ReadLatest(dir_ + "/agent-maps"), a_);
    std::set<std::string> entries;
    for (const auto& e : fs::directory_iterator(dir_ + "/agent-maps"))
      entries.insert(e.path().filename().string());
    EXPECT_EQ(entries, (std::set<std::string>{"LATEST", a_}));
    EXPECT_EQ(Files(dir_ + "/agent-maps/" + a_), Files(maps_.a));
  }

  std::string dir_, a_, b_;
  Maps maps_;
  std::vector<maps::TileInfo> changed_;
  size_t unchanged_ = 0;
  transport::CurveKeys agent_keys_;
  agent::AgentConfig config_;
  std::unique_ptr<server::RunningServer> server_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reload_{false};
};

TEST_F(MapSync, FetchesExactlyTheChangedTilesAndEndsByteIdentical) {
  const uint32_t chunk = 4096;
  size_t exchanges = 0;
  auto r = Sync(chunk, &exchanges);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(r->version, b_);
  EXPECT_EQ(r->tiles_fetched, changed_.size());
  EXPECT_EQ(r->tiles_reused, unchanged_);
  const uint64_t manifest = fs::file_size(maps_.b + "/MANIFEST");
  uint64_t bytes = manifest;
  size_t chunks = (manifest + chunk - 1) / chunk;
  for (const auto& t : changed_) {
    bytes += t.bytes;
    chunks += (t.bytes + chunk - 1) / chunk;
  }
  EXPECT_EQ(r->bytes_fetched, bytes);
  EXPECT_EQ(exchanges, 1 + chunks);  // LATEST, then every chunk once
  EXPECT_EQ(*maps::ReadLatest(dir_ + "/agent-maps"), b_);
  EXPECT_EQ(Files(dir_ + "/agent-maps/" + b_), Files(dir_ + "/server-maps/" + b_));
  EXPECT_EQ(Files(dir_ + "/agent-maps/" + b_), Files(maps_.b));
  // Up to date now: one LATEST exchange, nothing fetched.
  auto again = agent::SyncMap(
      [&](const std::vector<uint8_t>& req) {
        ++exchanges;
        return agent::MapSyncSocket::Connect(config_, agent_keys_, &stop_).value()->Exchange(req);
      },
      dir_ + "/agent-maps/" + b_, dir_ + "/agent-maps", chunk);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->bytes_fetched, 0u);
}

TEST_F(MapSync, AKeyThatIsNotEnrolledGetsNoMap) {
  agent_keys_ = transport::GenerateCurveKeys().value();
  config_.map_sync.timeout_ms = 300;
  size_t exchanges = 0;
  auto r = Sync(1 << 20, &exchanges);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "map sync: not connected to the server");
  ExpectStillOnA();
}

TEST_F(MapSync, AKeyRevokedMidSyncGetsUnauthorized) {
  auto socket = agent::MapSyncSocket::Connect(config_, agent_keys_, &stop_);
  ASSERT_TRUE(socket.ok());
  MapSyncMessage req;
  auto reply = (*socket)->Exchange(EncodeMapSync(req));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(DecodeMapSync(reply->data(), reply->size())->type, MapSyncType::kLatest);
  fs::remove(dir_ + "/keys/veh-1.public");
  reload_ = true;  // SIGHUP in dejaview-server
  ASSERT_TRUE(test::WaitUntil([&] { return !reload_; }));
  reply = (*socket)->Exchange(EncodeMapSync(req));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  auto m = DecodeMapSync(reply->data(), reply->size());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->type, MapSyncType::kError);
  EXPECT_EQ(m->error, transport::MapSyncError::kUnauthorized);
  EXPECT_EQ(m->detail, "this key is no longer enrolled");
}

TEST_F(MapSync, CorruptTileOnTheServerIsRejectedAndAIsKept) {
  const std::string tile =
      dir_ + "/server-maps/" + b_ + "/" + maps::TileFileName(changed_.front().tile);
  std::vector<uint8_t> bytes = ReadFileBytes(tile).value();
  bytes[bytes.size() / 2] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomic(tile, bytes).ok());
  size_t exchanges = 0;
  auto r = Sync(1 << 20, &exchanges);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find(maps::TileFileName(changed_.front().tile) + ": checksum"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the manifest says"), std::string::npos) << msg;
  ExpectStillOnA();
}

TEST_F(MapSync, AlteredManifestOnTheServerIsRejectedAndAIsKept) {
  const std::string manifest = dir_ + "/server-maps/" + b_ + "/MANIFEST";
  std::string text = ReadFileText(manifest).value();
  text.replace(text.find("tiles "), 6, "tiles  ");  // still parses up to its own CRC
  ASSERT_TRUE(WriteFileAtomic(manifest, text).ok());
  size_t exchanges = 0;
  auto r = Sync(1 << 20, &exchanges);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r.status().message().find("manifest checksum mismatch"), std::string::npos)
      << r.status().message();
  ExpectStillOnA();
  // A well-formed manifest that is not B's (A's, under B's name) fails the version hash.
  ASSERT_TRUE(fs::copy_file(maps_.a + "/MANIFEST", manifest, fs::copy_options::overwrite_existing));
  r = Sync(1 << 20, &exchanges);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "map sync: the manifest served as version " + b_ + " hashes to " + a_);
  ExpectStillOnA();
}

TEST_F(MapSync, ChunkAlteredInTransitIsRejectedAndAIsKept) {
  size_t exchanges = 0;
  // Reply 0 is LATEST, 1 the manifest, 2 the first tile chunk: one data byte flipped.
  auto r = Sync(1 << 20, &exchanges, [](size_t i, std::vector<uint8_t>* reply) {
    if (i == 2) (*reply)[reply->size() - 5] ^= 0x80;
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r.status().message().find("CHUNK crc: mismatch (altered in transit)"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(exchanges, 3u);
  ExpectStillOnA();
  // The link heals: the next sync succeeds.
  auto ok = Sync(1 << 20, &exchanges);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->tiles_fetched, changed_.size());
}

// The running system: the agent starts on A, the server publishes B mid-drive, the agent
// switches, and every frame is stored with the version it was encoded against and decodes with
// exactly that version on the server side.
TEST(MapSyncSystem, AgentSwitchesMidDriveAndEveryFrameDecodesWithItsOwnVersion) {
  const std::string dir = test::ScratchDir();
  const Maps m = BuildMaps(dir);
  const std::string a = maps::OpenMap(m.a, 0).value()->version();
  const std::string b = maps::OpenMap(m.b, 0).value()->version();
  const std::string server_maps = dir + "/server-maps";
  ASSERT_EQ(*maps::PublishMap(m.a, server_maps), a);
  // n frames cycling through four ray-cast scans (ray casting is the slow part under ASan).
  const size_t n = 10;
  const Drive four = test::WriteStreetDrive(dir + "/four", {0.5, 0.8, 1.1, 1.4});
  fs::create_directories(dir + "/drive/velodyne");
  std::vector<Pose> poses;
  for (size_t i = 0; i < n; ++i) {
    char name[48];
    std::snprintf(name, sizeof(name), "/drive/velodyne/%06zu.bin", i);
    fs::copy_file(four.frame_paths[i % 4], dir + name);
    poses.push_back(four.poses[i % 4]);
  }
  ASSERT_TRUE(WriteKittiPoses(dir + "/drive/poses.txt", poses).ok());

  test::Process server(
      {DEJAVIEW_SERVER_BIN, "--store", dir + "/store", "--listen", "tcp://127.0.0.1:0",
       "--port-file", dir + "/server.port", "--maps", server_maps, "--metrics", "127.0.0.1:0",
       "--metrics-port-file", dir + "/server.metrics"},
      dir + "/server.log");
  ASSERT_TRUE(test::WaitUntil([&] { return !test::ReadTrimmed(dir + "/server.port").empty(); }));
  {
    std::ofstream out(dir + "/agent.yaml");
    out << "vehicle: veh-1\nsensors: [{id: 0, topic: lidar}]\nsource_drive: \"" << dir
        << "/drive\"\nsource_rate_hz: 8\nlidar_endpoint: \"\"\nmap_dir: \"" << m.a
        << "\"\nspool: {dir: " << dir << "/spool, sync: every_record}\nupload: {endpoint: \""
        << test::ReadTrimmed(dir + "/server.port")
        << "\", timeout_ms: 2000}\nmap_sync: {enabled: true, root: " << dir
        << "/agent-maps, interval_ms: 50, chunk_kb: 64}\nmetrics_listen: 127.0.0.1:0\n"
        // Each frame encoded on two threads: what the server decodes must be the same frames.
        << "frame_threads: 2\n";
  }
  test::Process agent({DEJAVIEW_AGENT_BIN, "--config", dir + "/agent.yaml", "--exit-when-drained",
                       "--metrics-port-file", dir + "/agent.port"},
                      dir + "/agent.log");
  ASSERT_TRUE(test::WaitUntil([&] { return !test::ReadTrimmed(dir + "/agent.port").empty(); }));
  const int port = std::atoi(test::ReadTrimmed(dir + "/agent.port").c_str());
  auto metric = [&](const std::string& name) {
    return test::ScrapeMetrics(port)["dejaview_agent_" + name];
  };
  // A few frames on A (and the first sync, which finds A current), then B is published.
  ASSERT_TRUE(test::WaitUntil([&] {
    return metric("frames_encoded_total") >= 2 && metric("map_sync_attempts_total") >= 1;
  }));
  std::string out;
  ASSERT_EQ(test::RunCli("map publish " + m.b + " --maps-root " + server_maps, &out), 0) << out;
  ASSERT_TRUE(test::WaitUntil([&] { return metric("map_versions_switched_total") == 1; }));
  EXPECT_EQ(metric("map_sync_errors_total"), 0);
  EXPECT_GT(metric("map_tiles_reused_total"), 0);
  const double fetched = metric("map_bytes_fetched_total");
  EXPECT_EQ(agent.Wait(60), 0);
  // The server served exactly the bytes the agent fetched (its counters publish twice a second).
  const int server_port = std::atoi(test::ReadTrimmed(dir + "/server.metrics").c_str());
  EXPECT_TRUE(test::WaitUntil([&] {
    return test::ScrapeMetrics(server_port)["dejaview_server_map_bytes_total"] == fetched;
  }));
  EXPECT_EQ(test::ScrapeMetrics(server_port)["dejaview_server_map_errors_total"], 0);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0);
  EXPECT_EQ(*maps::ReadLatest(dir + "/agent-maps"), b);
  EXPECT_EQ(Files(dir + "/agent-maps/" + b), Files(server_maps + "/" + b));

  auto storage = server::OpenStorage(dir + "/store", "", "");
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  auto rows = storage->index->Query({});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), n);
  std::sort(rows->begin(), rows->end(),
            [](const auto& x, const auto& y) { return x.sequence < y.sequence; });
  // One encoder: the frames before the switch are A's, every one after it B's.
  size_t on_a = 0;
  while (on_a < n && (*rows)[on_a].map_version == a) ++on_a;
  EXPECT_GE(on_a, 2u);
  EXPECT_LT(on_a, n);
  server::MapVersions versions(server_maps);
  for (size_t i = 0; i < n; ++i) {
    const store::FrameRecord& row = (*rows)[i];
    EXPECT_EQ(row.sequence, i);
    EXPECT_EQ(row.map_version, i < on_a ? a : b) << "frame " << i;
    auto object = storage->store->Get(row.object);
    ASSERT_TRUE(object.ok()) << object.status().ToString();
    auto frame = server::DecodeStoredFrame(row, *object, &versions);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ(frame->map_version, row.map_version);
  }
}

}  // namespace
}  // namespace dv
