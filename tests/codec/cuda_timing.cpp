// Timing table of the encoder's hot paths, CPU vs CUDA (scripts/gpu.sh; a program, not a test:
// nothing here asserts a time). As issue 11's protocol: map from the even frames of a KITTI
// sequence at resolution T, the odd frames encoded at tolerance T, here with a decimetre-off
// prior; medians over the frames, wall-clock milliseconds. With a thread count N > 1, a further
// column encodes on the CPU with N threads (EncoderParams::threads), frame by frame alternating
// with the others, so that the columns share the machine's moods. With DEJAVIEW_NO_AVX2 set, the
// CPU takes its SSE2 paths (hot_paths.h AllowAvx2), as on a CPU without AVX2.
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
#include "map_coder.h"

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
  struct Column {
    Backend backend;
    int threads;
    std::string name;
  };
  std::vector<Column> columns = {{Backend::kCpu, 1, "cpu"}};
  if (cuda.ok()) columns.push_back({Backend::kCuda, 1, "cuda"});
  if (threads > 1) columns.push_back({Backend::kCpu, threads, "cpu x" + std::to_string(threads)});

  std::vector<Times> t(columns.size());
  // One encoder and decoder per column, kept from frame to frame as the agent keeps them.
  std::vector<Encoder> encoders;
  std::vector<Decoder> decoders;
  for (size_t b = 0; b < columns.size(); ++b) {
    encoders.emplace_back(map->get());
    decoders.emplace_back(map->get());
  }
  size_t frames = 0, identical = 0;
  bool warm = false;
  for (size_t i = 1; i < drive->size(); i += 2) {
    auto cloud = ReadPointCloudFile(drive->frame_paths[i]);
    Check(cloud.status());
    RemoveNonFinite(&*cloud);
    Pose prior = drive->poses[i];
    prior.translation() += Eigen::Vector3d(0.2, -0.15, 0.05);
    const Eigen::Matrix3d R = prior.linear();
    const Eigen::Vector3d tr = prior.translation();
    Candidates cand;
    Check(DeriveCandidates(map->get(), R, tr, 90, &cand));
    std::vector<Eigen::Vector3d> map_pts(cand.voxels.size()), source;
    for (size_t k = 0; k < map_pts.size(); ++k)
      map_pts[k] = maps::Representative(cand.voxels[k], tol);
    // The coarse grid's points follow the fine ones: as RegisterFrame's, the centroids of the
    // representatives in each 0.75 m voxel.
    std::map<std::array<int64_t, 3>, std::pair<Eigen::Vector3d, int>> patches;
    for (const Eigen::Vector3d& q : map_pts) {
      const Eigen::Vector3d k = (q / 0.75).array().floor();
      auto& acc = patches[{int64_t(k.x()), int64_t(k.y()), int64_t(k.z())}];
      if (acc.second++ == 0) acc.first.setZero();
      acc.first += q;
    }
    for (const auto& [key, acc] : patches) map_pts.push_back(acc.first / acc.second);
    // About the size of RegisterFrame's subsample (1.7-2.4 k points).
    for (size_t k = 0; k < cloud->size(); k += 60) source.push_back(cloud->xyz[k].cast<double>());
    const kernels::Rigid T = RigidOf(R, tr);
    const int nb = int(std::ceil((tol - 1e-4) / tol));
    const double bound2 = (tol - 1e-4) * (tol - 1e-4);
    std::vector<std::vector<uint8_t>> bytes(columns.size());
    std::vector<std::vector<Eigen::Vector3f>> decoded(columns.size());
    for (size_t b = 0; b < columns.size(); ++b) {
      const Backend be = columns[b].backend;
      EncoderParams p;
      p.tolerance_m = tol;
      p.backend = be;
      p.threads = columns[b].threads;
      // The first CUDA call creates the context: not a per-frame cost.
      if (be == Backend::kCuda && !warm) {
        Check(encoders[b].Encode(*cloud, prior, {i, 0, 0}, p).status());
        warm = true;
      }
      Projection proj;
      t[b].project.push_back(Ms([&] {
        Check(ProjectCandidates(be, cand.voxels, tol, R, tr, {1024, 80, -0.45, 0.11}, &proj));
      }));
      std::vector<uint8_t> explained;
      CandidateMarks marks;
      // The CPU's time includes sorting the candidates' keys, as the encoder does once a frame.
      t[b].classify.push_back(Ms([&] {
        std::unique_ptr<SortedGrid> grid;
        if (be == Backend::kCpu) grid = std::make_unique<SortedGrid>(VoxelKeys(cand.voxels), nb, 0);
        Check(ClassifyPoints(be, cloud->xyz, T, grid.get(), &cand.index, cand.sensor, tol, nb,
                             bound2, bound2 * 0.36, &explained, &marks));
      }));
      // Registration's search: 7 coarse and 3 fine iterations over the source points, as
      // RegisterFrame runs them (coarse cells of 3 m, 64 points a cell).
      t[b].correspond.push_back(Ms([&] {
        auto search =
            CorrespondenceSearch::Create(be, map_pts, cand.voxels, cand.index, tol, 3.0, 64);
        Check(search.status());
        std::vector<int32_t> best;
        for (int it = 0; it < 10; ++it) Check((*search)->Find(source, T, it >= 7, 0.25, &best));
      }));
      EncodeReport rep;
      // The fastest of `repeats` runs, and each stage's fastest: this machine's speed swings by
      // a third between runs, and the slow ones are what else ran.
      double fastest = 0;
      for (int run = 0; run < repeats; ++run) {
        EncodeReport r;
        const double ms = Ms([&] {
          auto enc = encoders[b].Encode(*cloud, prior, {i, 0, 0}, p, &r);
          Check(enc.status());
          bytes[b] = std::move(*enc);
        });
        fastest = run == 0 ? ms : std::min(fastest, ms);
        if (run == 0) rep = r;
        for (size_t k = 0; k < r.stage_ms.size() && k < rep.stage_ms.size(); ++k) {
          rep.stage_ms[k].second = std::min(rep.stage_ms[k].second, r.stage_ms[k].second);
        }
      }
      t[b].encode.push_back(fastest);
      // Decoding has no CUDA path: the CUDA column decodes on the CPU, one thread.
      StatusOr<DecodedFrame> dec = Status::Ok();
      for (int run = 0; run < repeats; ++run) {
        const double ms = Ms([&] {
          dec = decoders[b].Decode(bytes[b].data(), bytes[b].size(), columns[b].threads);
          Check(dec.status());
        });
        if (run == 0) t[b].decode.push_back(ms);
        t[b].decode.back() = std::min(t[b].decode.back(), ms);
      }
      decoded[b] = std::move(dec->cloud.xyz);
      for (size_t k = 0; k < rep.stage_ms.size(); ++k) {
        if (k == t[b].stages.size()) t[b].stages.push_back({rep.stage_ms[k].first, {}});
        t[b].stages[k].second.push_back(rep.stage_ms[k].second);
      }
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
  std::printf("%-40s", "hot path");
  for (const Column& c : columns) std::printf(" %10s", c.name.c_str());
  std::printf("\n");
  auto row = [&](const std::string& name,
                 const std::function<const std::vector<double>*(size_t)>& v) {
    std::printf("%-40s", name.c_str());
    for (size_t b = 0; b < columns.size(); ++b) {
      const std::vector<double>* x = v(b);
      if (x && !x->empty()) {
        std::printf(" %10.2f", Median(*x));
      } else {
        std::printf(" %10s", "-");
      }
    }
    std::printf("\n");
  };
  // The standalone hot paths run single-threaded in every column.
  const struct {
    const char* name;
    std::vector<double> Times::*v;
  } rows[] = {{"candidate projection (90 m ball)", &Times::project},
              {"classification (all points)", &Times::classify},
              {"correspondences (10 iterations)", &Times::correspond},
              {"Encode, whole frame", &Times::encode},
              {"Decode, whole frame", &Times::decode}};
  for (const auto& r : rows) row(r.name, [&](size_t b) { return &(t[b].*r.v); });
  // Encode's own stages: what the backend moved, and what stays on the CPU; with threads, some
  // run side by side and are timed as one.
  std::vector<std::string> names;
  for (const Times& x : t) {
    for (const auto& st : x.stages) {
      if (std::find(names.begin(), names.end(), st.first) == names.end()) names.push_back(st.first);
    }
  }
  for (const std::string& name : names) {
    row("  " + name, [&](size_t b) -> const std::vector<double>* {
      for (const auto& st : t[b].stages) {
        if (st.first == name) return &st.second;
      }
      return nullptr;
    });
  }
  if (columns.size() > 1) {
    std::printf("bitstreams and decoded points identical (every column): %zu of %zu frames\n",
                identical, frames);
    if (identical != frames) return 1;
  }
  if (cuda.ok()) return 0;
  std::printf("cuda: %s\n", cuda.message().c_str());
  return 0;
}
