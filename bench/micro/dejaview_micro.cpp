// Hot paths of the dejaview codec through the functions dejaview_codec and dejaview_maps expose:
// the binary range coder, the occupancy-octree coder (residual and intra points), the map's
// voxel-hash radius search, and a whole frame's delta encode and decode against a map built from
// the neighbouring frame. Built whenever those libraries are (every build configures them).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>

#include "dejaview/codec/codec.h"
#include "dejaview/codec/range_coder.h"
#include "dejaview/maps/route_map.h"
#include "frame.h"
#include "octree_coder.h"

namespace dv::micro {
namespace {

void BM_RangeEncodeBits(benchmark::State& state) {
  std::mt19937 rng(1);
  std::vector<int> bits(1 << 20);
  for (auto& b : bits) b = (rng() % 10) == 0;  // skewed, like occupancy bits
  for (auto _ : state) {
    codec::RangeEncoder enc;
    codec::BitModel m;
    for (int b : bits) enc.Encode(&m, b);
    benchmark::DoNotOptimize(enc.Finish());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(bits.size()));
}
BENCHMARK(BM_RangeEncodeBits)->Unit(benchmark::kMillisecond);

void BM_RangeDecodeBits(benchmark::State& state) {
  std::mt19937 rng(1);
  const size_t n = 1 << 20;
  codec::RangeEncoder enc;
  codec::BitModel em;
  for (size_t i = 0; i < n; ++i) enc.Encode(&em, (rng() % 10) == 0);
  const std::vector<uint8_t> bytes = enc.Finish();
  for (auto _ : state) {
    codec::RangeDecoder dec(bytes.data(), bytes.size());
    codec::BitModel m;
    int ones = 0;
    for (size_t i = 0; i < n; ++i) ones += dec.Decode(&m);
    benchmark::DoNotOptimize(ones);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(BM_RangeDecodeBits)->Unit(benchmark::kMillisecond);

// The octree coder on a whole frame at 2 cm cells (the residual precision).
void BM_OctreeEncodeFrame(benchmark::State& state) {
  const PointCloud& f = KittiFrame(1);
  for (auto _ : state) {
    std::vector<uint8_t> geometry, intensity;
    codec::CellCloud cells;
    const Status s = codec::EncodeCells(f.xyz, f.intensity, 0.02, true, codec::OctreeModel{},
                                        &geometry, &intensity, &cells);
    benchmark::DoNotOptimize(s.ok());
  }
}
BENCHMARK(BM_OctreeEncodeFrame)->Unit(benchmark::kMillisecond);

void BM_OctreeDecodeFrame(benchmark::State& state) {
  const PointCloud& f = KittiFrame(1);
  std::vector<uint8_t> geometry, intensity;
  codec::CellCloud cells;
  if (!codec::EncodeCells(f.xyz, f.intensity, 0.02, true, codec::OctreeModel{}, &geometry,
                          &intensity, &cells)
           .ok()) {
    state.SkipWithError("EncodeCells failed");
    return;
  }
  for (auto _ : state) {
    codec::CellCloud out;
    const Status s =
        codec::DecodeCells(geometry.data(), geometry.size(), intensity.data(), intensity.size(),
                           0.02, true, codec::OctreeModel{}, f.size(), &out);
    benchmark::DoNotOptimize(s.ok());
  }
}
BENCHMARK(BM_OctreeDecodeFrame)->Unit(benchmark::kMillisecond);

// A map at 0.1 m from frame 0 of sequence 00, built once.
maps::RouteMap* Map() {
  static std::unique_ptr<maps::RouteMap> map;
  if (!map) {
    const std::string dir =
        (std::filesystem::temp_directory_path() / "dejaview-micro-map").string();
    std::filesystem::remove_all(dir);
    auto drive = OpenDrive(std::string(DEJAVIEW_DATA_DIR) + "/kitti-odometry-mini/00");
    maps::BuildOptions options;
    options.resolution_m = 0.1;
    options.every = 2;
    if (!drive.ok() || !maps::BuildMap({*drive}, options, dir).ok()) std::exit(1);
    auto m = maps::OpenMap(dir, 0);
    if (!m.ok()) std::exit(1);
    map = std::move(m).value();
  }
  return map.get();
}

// Voxel lookup: a 0.1 m radius search around each of 10k points of frame 1 (map frame).
void BM_MapRadiusSearch(benchmark::State& state) {
  auto drive = OpenDrive(std::string(DEJAVIEW_DATA_DIR) + "/kitti-odometry-mini/00");
  const Pose T = drive.ok() ? drive->poses[1] : Pose::Identity();
  const PointCloud& f = KittiFrame(1);
  maps::RouteMap* map = Map();
  std::vector<Eigen::Vector3d> queries;
  for (size_t i = 0; i < f.size(); i += f.size() / 10000)
    queries.push_back(T * f.xyz[i].cast<double>());
  std::vector<maps::MapVoxel> found;
  for (auto _ : state) {
    size_t hits = 0;
    for (const auto& q : queries) {
      found.clear();
      if (map->RadiusSearch(q, 0.1, &found).ok()) hits += found.size();
    }
    benchmark::DoNotOptimize(hits);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(queries.size()));
}
BENCHMARK(BM_MapRadiusSearch)->Unit(benchmark::kMillisecond);

// A whole frame: delta encode (registration included) and decode at T = 0.1 m.
void BM_DejaviewEncodeFrame(benchmark::State& state) {
  auto drive = OpenDrive(std::string(DEJAVIEW_DATA_DIR) + "/kitti-odometry-mini/00");
  const Pose T = drive.ok() ? drive->poses[1] : Pose::Identity();
  codec::EncoderParams params;
  params.tolerance_m = 0.1;
  codec::Encoder encoder(Map());
  for (auto _ : state) {
    auto bytes = encoder.Encode(KittiFrame(1), T, {}, params);
    benchmark::DoNotOptimize(bytes.ok());
  }
}
BENCHMARK(BM_DejaviewEncodeFrame)->Unit(benchmark::kMillisecond);

void BM_DejaviewDecodeFrame(benchmark::State& state) {
  auto drive = OpenDrive(std::string(DEJAVIEW_DATA_DIR) + "/kitti-odometry-mini/00");
  const Pose T = drive.ok() ? drive->poses[1] : Pose::Identity();
  codec::EncoderParams params;
  params.tolerance_m = 0.1;
  auto bytes = codec::Encoder(Map()).Encode(KittiFrame(1), T, {}, params);
  if (!bytes.ok()) {
    state.SkipWithError(bytes.status().ToString().c_str());
    return;
  }
  codec::Decoder decoder(Map());
  for (auto _ : state) {
    auto frame = decoder.Decode(bytes->data(), bytes->size());
    benchmark::DoNotOptimize(frame.ok());
  }
}
BENCHMARK(BM_DejaviewDecodeFrame)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dv::micro
