// Timing table of the encoder's hot paths, CPU vs CUDA (scripts/gpu.sh; a program, not a test:
// nothing here asserts a time). As issue 11's protocol: map from the even frames of a KITTI
// sequence at resolution T, the odd frames encoded at tolerance T, here with a decimetre-off
// prior; medians over the frames, wall-clock milliseconds.
//   cuda_timing SEQDIR [tolerance_m]
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
  std::vector<double> project, classify, correspond, encode;
  // Encode's stages (EncodeReport::stage_ms), in the order of the first frame.
  std::vector<std::pair<std::string, std::vector<double>>> stages;
};

}  // namespace

int main(int argc, char** argv) {
  RetainFreedMemory();  // as the agent and the CLI: freed heap stays for the next frame
  if (argc < 2) {
    std::fprintf(stderr, "usage: cuda_timing SEQDIR [tolerance_m]\n");
    return 2;
  }
  const double tol = argc > 2 ? std::atof(argv[2]) : 0.2;
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
  std::vector<Backend> backends = {Backend::kCpu};
  if (cuda.ok()) backends.push_back(Backend::kCuda);

  Times t[2];
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
    std::vector<uint8_t> bytes[2];
    for (size_t b = 0; b < backends.size(); ++b) {
      const Backend be = backends[b];
      EncoderParams p;
      p.tolerance_m = tol;
      p.backend = be;
      // The first CUDA call creates the context: not a per-frame cost.
      if (be == Backend::kCuda && !warm) {
        Check(Encode(*cloud, prior, {i, 0, 0}, p, map->get()).status());
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
      // Registration's search: 8 coarse and 5 fine iterations over the source points, as
      // RegisterFrame runs them (coarse cells of 3 m, 64 points a cell).
      t[b].correspond.push_back(Ms([&] {
        auto search =
            CorrespondenceSearch::Create(be, map_pts, cand.voxels, cand.index, tol, 3.0, 64);
        Check(search.status());
        std::vector<int32_t> best;
        for (int it = 0; it < 13; ++it) Check((*search)->Find(source, T, it >= 8, 0.25, &best));
      }));
      EncodeReport rep;
      t[b].encode.push_back(Ms([&] {
        auto enc = Encode(*cloud, prior, {i, 0, 0}, p, map->get(), &rep);
        Check(enc.status());
        bytes[b] = std::move(*enc);
      }));
      for (size_t k = 0; k < rep.stage_ms.size(); ++k) {
        if (k == t[b].stages.size()) t[b].stages.push_back({rep.stage_ms[k].first, {}});
        t[b].stages[k].second.push_back(rep.stage_ms[k].second);
      }
    }
    ++frames;
    identical += backends.size() == 2 && bytes[0] == bytes[1];
  }

  std::printf("%s: %zu frames, tolerance %.2f m, medians in ms (wall clock)\n", argv[1], frames,
              tol);
  std::printf("%-34s %10s %10s %9s\n", "hot path", "cpu", "cuda", "speed-up");
  const struct {
    const char* name;
    std::vector<double> Times::*v;
  } rows[] = {{"candidate projection (90 m ball)", &Times::project},
              {"classification (all points)", &Times::classify},
              {"correspondences (13 iterations)", &Times::correspond},
              {"Encode, whole frame", &Times::encode}};
  for (const auto& r : rows) {
    const double c = Median(t[0].*r.v);
    if (cuda.ok()) {
      const double g = Median(t[1].*r.v);
      std::printf("%-34s %10.2f %10.2f %8.1fx\n", r.name, c, g, g > 0 ? c / g : 0.0);
    } else {
      std::printf("%-34s %10.2f %10s %9s\n", r.name, c, "-", "-");
    }
  }
  // Encode's own stages: what the backend moved, and what stays on the CPU.
  for (size_t k = 0; k < t[0].stages.size(); ++k) {
    const std::string name = "  " + t[0].stages[k].first;
    const double c = Median(t[0].stages[k].second);
    if (cuda.ok() && k < t[1].stages.size()) {
      const double g = Median(t[1].stages[k].second);
      std::printf("%-34s %10.2f %10.2f %8.1fx\n", name.c_str(), c, g, g > 0 ? c / g : 0.0);
    } else {
      std::printf("%-34s %10.2f %10s %9s\n", name.c_str(), c, "-", "-");
    }
  }
  if (cuda.ok()) {
    std::printf("bitstreams identical (cpu vs cuda): %zu of %zu frames\n", identical, frames);
    return identical == frames ? 0 : 1;
  }
  std::printf("cuda: %s\n", cuda.message().c_str());
  return 0;
}
