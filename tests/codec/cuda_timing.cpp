// Timing table of the encoder's hot paths, CPU vs CUDA (scripts/gpu.sh; a program, not a test:
// nothing here asserts a time). As issue 11's protocol: map from the even frames of a KITTI
// sequence at resolution T, the odd frames encoded at tolerance T, here with a decimetre-off
// prior; medians over the frames, wall-clock milliseconds. With a thread count N > 1, a further
// column encodes on the CPU with N threads (EncoderParams::threads), frame by frame alternating
// with the others, so that the columns share the machine's moods. With DEJAVIEW_NO_AVX2 set, the
// CPU takes its SSE2 paths (cpu/kernels.h AllowAvx2), as on a CPU without AVX2.
//   cuda_timing SEQDIR [tolerance_m [N]]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dejaview/base/drive.h"
#include "dejaview/base/memory.h"
#include "dejaview/codec/codec.h"
#include "hot_paths.h"
#include "map_section.h"

using namespace dv;
using namespace dv::codec;

namespace {

double Ms(const std::function<void()>& f) {
  const auto a = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Check(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "cuda_timing: %s\n", s.ToString().c_str());
  std::exit(1);
}

// The work of one frame's hot paths, as Encode runs them, on one backend.
struct Times {
  std::vector<double> project, classify, correspond, encode, decode;
  // Encode's stages (EncodeReport::stage_ms), in the order of the first frame.
  std::vector<std::pair<std::string, std::vector<double>>> stages;
};

// One column of the table: a backend, with the encoder and decoder it keeps from frame to frame
// as the agent keeps them.
struct Column {
  Backend backend;
  int threads;
  std::string name;
  const HotPaths* hot;
  Encoder encoder;
  Decoder decoder;
  Times times;
};

// One odd frame and what its hot paths take: the candidates around a decimetre-off prior, the
// map points of registration's search and a source about the size of its subsample.
struct Frame {
  size_t index = 0;
  PointCloud cloud;
  Pose prior;
  Candidates cand;
  std::vector<Eigen::Vector3d> map_pts, source;
  kernels::Rigid T{};
  int nb = 0;
  double bound2 = 0;
};

Frame ReadFrame(const Drive& drive, size_t i, maps::RouteMap* map, const HotPaths& cpu,
                double tol) {
  Frame f;
  f.index = i;
  auto cloud = ReadPointCloudFile(drive.frame_paths[i]);
  Check(cloud.status());
  f.cloud = std::move(*cloud);
  RemoveNonFinite(&f.cloud);
  f.prior = drive.poses[i];
  f.prior.translation() += Eigen::Vector3d(0.2, -0.15, 0.05);
  Check(DeriveCandidates(cpu, map, f.prior.linear(), f.prior.translation(), 90, &f.cand));
  f.map_pts.resize(f.cand.voxels.size());
  for (size_t k = 0; k < f.map_pts.size(); ++k) {
    f.map_pts[k] = maps::Representative(f.cand.voxels[k], tol);
  }
  // The coarse grid's points follow the fine ones: as RegisterFrame's, the centroids of the
  // representatives in each 0.75 m voxel.
  std::map<std::array<int64_t, 3>, std::pair<Eigen::Vector3d, int>> patches;
  for (const Eigen::Vector3d& q : f.map_pts) {
    const Eigen::Vector3d k = (q / 0.75).array().floor();
    auto& acc = patches[{int64_t(k.x()), int64_t(k.y()), int64_t(k.z())}];
    if (acc.second++ == 0) acc.first.setZero();
    acc.first += q;
  }
  for (const auto& [key, acc] : patches) f.map_pts.push_back(acc.first / acc.second);
  // About the size of RegisterFrame's subsample (1.7-2.4 k points).
  for (size_t k = 0; k < f.cloud.size(); k += 60) f.source.push_back(f.cloud.xyz[k].cast<double>());
  f.T = RigidOf(f.prior.linear(), f.prior.translation());
  f.nb = int(std::ceil((tol - 1e-4) / tol));
  f.bound2 = (tol - 1e-4) * (tol - 1e-4);
  return f;
}

// The standalone hot paths, each single-threaded, on the column's backend.
void TimeHotPaths(const Frame& f, double tol, Column* c) {
  const HotPaths& hot = *c->hot;
  Projection proj;
  c->times.project.push_back(Ms([&] {
    Check(hot.ProjectCandidates(f.cand.voxels, tol, f.prior.linear(), f.prior.translation(),
                                {1024, 80, -0.45, 0.11}, &proj));
  }));
  std::vector<uint8_t> explained;
  CandidateMarks marks;
  // The CPU's time includes sorting the candidates' keys, as the encoder does once a frame.
  c->times.classify.push_back(Ms([&] {
    std::unique_ptr<SortedGrid> grid;
    if (!hot.UsesCandidateIndex()) {
      grid = std::make_unique<SortedGrid>(VoxelKeys(f.cand.voxels), f.nb, 0);
    }
    Check(hot.ClassifyPoints(
        {&f.cloud.xyz, f.T, &f.cand.sensor, grid.get(), &f.cand.index, tol, f.nb},
        {f.bound2, f.bound2 * 0.36}, {&explained, &marks}));
  }));
  // Registration's search: 7 coarse and 3 fine iterations over the source points, as
  // RegisterFrame runs them (coarse cells of 3 m, 64 points a cell).
  c->times.correspond.push_back(Ms([&] {
    auto search = hot.CreateSearch(f.map_pts, f.cand.voxels, f.cand.index, tol, 3.0, 64);
    Check(search.status());
    std::vector<int32_t> best;
    for (int it = 0; it < 10; ++it) Check((*search)->Find(f.source, f.T, it >= 7, 0.25, &best));
  }));
}

// The whole frame encoded and decoded `repeats` times, the fastest of each kept, and each
// stage's fastest: this machine's speed swings between runs, and the slow ones are what else
// ran. *bytes and *decoded: the last run's.
void TimeCodec(const Frame& f, const EncoderParams& p, int repeats, Column* c,
               std::vector<uint8_t>* bytes, std::vector<Eigen::Vector3f>* decoded) {
  EncodeReport rep;
  double fastest = 0;
  for (int run = 0; run < repeats; ++run) {
    EncodeReport r;
    const double ms = Ms([&] {
      auto enc = c->encoder.Encode(f.cloud, f.prior, {f.index, 0, 0}, p, &r);
      Check(enc.status());
      *bytes = std::move(*enc);
    });
    fastest = run == 0 ? ms : std::min(fastest, ms);
    if (run == 0) rep = r;
    for (size_t k = 0; k < r.stage_ms.size() && k < rep.stage_ms.size(); ++k) {
      rep.stage_ms[k].second = std::min(rep.stage_ms[k].second, r.stage_ms[k].second);
    }
  }
  c->times.encode.push_back(fastest);
  // Decoding has no CUDA path: the CUDA column decodes on the CPU, one thread.
  StatusOr<DecodedFrame> dec = Status::Ok();
  for (int run = 0; run < repeats; ++run) {
    const double ms = Ms([&] {
      dec = c->decoder.Decode(bytes->data(), bytes->size(), c->threads);
      Check(dec.status());
    });
    if (run == 0) c->times.decode.push_back(ms);
    c->times.decode.back() = std::min(c->times.decode.back(), ms);
  }
  *decoded = std::move(dec->cloud.xyz);
  for (size_t k = 0; k < rep.stage_ms.size(); ++k) {
    if (k == c->times.stages.size()) c->times.stages.push_back({rep.stage_ms[k].first, {}});
    c->times.stages[k].second.push_back(rep.stage_ms[k].second);
  }
}

// One row: each column's median of v(column), "-" where it has none.
void Row(const std::string& name, const std::vector<Column>& columns,
         const std::function<const std::vector<double>*(const Column&)>& v) {
  std::printf("%-40s", name.c_str());
  for (const Column& c : columns) {
    const std::vector<double>* x = v(c);
    if (x && !x->empty()) {
      std::printf(" %10.2f", Median(*x));
    } else {
      std::printf(" %10s", "-");
    }
  }
  std::printf("\n");
}

void PrintTable(const std::vector<Column>& columns) {
  std::printf("%-40s", "hot path");
  for (const Column& c : columns) std::printf(" %10s", c.name.c_str());
  std::printf("\n");
  // The standalone hot paths run single-threaded in every column.
  const struct {
    const char* name;
    std::vector<double> Times::*v;
  } rows[] = {{"candidate projection (90 m ball)", &Times::project},
              {"classification (all points)", &Times::classify},
              {"correspondences (10 iterations)", &Times::correspond},
              {"Encode, whole frame", &Times::encode},
              {"Decode, whole frame", &Times::decode}};
  for (const auto& r : rows) Row(r.name, columns, [&](const Column& c) { return &(c.times.*r.v); });
  // Encode's own stages: what the backend moved, and what stays on the CPU; with threads, some
  // run side by side and are timed as one.
  std::vector<std::string> names;
  for (const Column& c : columns) {
    for (const auto& st : c.times.stages) {
      if (std::find(names.begin(), names.end(), st.first) == names.end()) names.push_back(st.first);
    }
  }
  for (const std::string& name : names) {
    Row("  " + name, columns, [&](const Column& c) -> const std::vector<double>* {
      for (const auto& st : c.times.stages) {
        if (st.first == name) return &st.second;
      }
      return nullptr;
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  RetainFreedMemory();  // as the agent and the CLI: freed heap stays for the next frame
  if (std::getenv("DEJAVIEW_NO_AVX2")) AllowAvx2(false);
  if (argc < 2) {
    std::fprintf(stderr, "usage: cuda_timing SEQDIR [tolerance_m [encoder threads [repeats]]]\n");
    return 2;
  }
  const double tol = argc > 2 ? std::atof(argv[2]) : 0.2;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const int repeats = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  auto drive = OpenDrive(argv[1]);
  Check(drive.status());
  const std::string mapdir = std::filesystem::temp_directory_path() / "cuda_timing_map";
  std::filesystem::remove_all(mapdir);
  maps::BuildOptions bo;
  bo.resolution_m = tol;
  bo.every = 2;
  Check(maps::BuildMap({*drive}, bo, mapdir));
  auto map = maps::OpenMap(mapdir, 0);
  Check(map.status());
  const Status cuda = CheckBackend(Backend::kCuda);
  // The CPU's hot paths made here, after DEJAVIEW_NO_AVX2 was read, as the encoders make theirs.
  const std::unique_ptr<HotPaths> cpu_hot = MakeCpuHotPaths();
  std::unique_ptr<HotPaths> cuda_hot;
  if (cuda.ok()) cuda_hot = std::move(MakeHotPaths(Backend::kCuda)).value();
  std::vector<Column> columns;
  auto add = [&](Backend backend, int n, std::string name, const HotPaths* hot) {
    columns.push_back(
        {backend, n, std::move(name), hot, Encoder(map->get()), Decoder(map->get()), Times()});
  };
  add(Backend::kCpu, 1, "cpu", cpu_hot.get());
  if (cuda.ok()) add(Backend::kCuda, 1, "cuda", cuda_hot.get());
  if (threads > 1) add(Backend::kCpu, threads, "cpu x" + std::to_string(threads), cpu_hot.get());

  size_t frames = 0, identical = 0;
  bool warm = false;
  for (size_t i = 1; i < drive->size(); i += 2) {
    const Frame f = ReadFrame(*drive, i, map->get(), *cpu_hot, tol);
    std::vector<std::vector<uint8_t>> bytes(columns.size());
    std::vector<std::vector<Eigen::Vector3f>> decoded(columns.size());
    for (size_t b = 0; b < columns.size(); ++b) {
      Column& c = columns[b];
      EncoderParams p;
      p.tolerance_m = tol;
      p.backend = c.backend;
      p.threads = c.threads;
      // The first CUDA call creates the context: not a per-frame cost.
      if (c.backend == Backend::kCuda && !warm) {
        Check(c.encoder.Encode(f.cloud, f.prior, {i, 0, 0}, p).status());
        warm = true;
      }
      TimeHotPaths(f, tol, &c);
      TimeCodec(f, p, repeats, &c, &bytes[b], &decoded[b]);
    }
    ++frames;
    identical +=
        std::all_of(bytes.begin(), bytes.end(), [&](const auto& x) { return x == bytes[0]; }) &&
        std::all_of(decoded.begin(), decoded.end(), [&](const auto& x) { return x == decoded[0]; });
  }

  std::printf(
      "%s: %zu frames, tolerance %.2f m, medians in ms (wall clock; encode and decode: the\n"
      "fastest of %d runs a frame)\n",
      argv[1], frames, tol, repeats);
  PrintTable(columns);
  if (columns.size() > 1) {
    std::printf("bitstreams and decoded points identical (every column): %zu of %zu frames\n",
                identical, frames);
    if (identical != frames) return 1;
  }
  if (cuda.ok()) return 0;
  std::printf("cuda: %s\n", cuda.message().c_str());
  return 0;
}
