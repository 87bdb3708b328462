// Steering tool for codec development (not a test, not the bench): the pseudo-revisit protocol of
// issue 11 on one sequence and tolerance. Map from the even frames at resolution T, odd frames
// encoded at tolerance T with a noisy prior; prints ratio, CD, Hausdorff and times.
//   codec_eval SEQDIR T [residual_precision] [intensity 0|1] [gap_factor] [select_factor]
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <tuple>

#include "dejaview/base/drive.h"
#include "dejaview/base/kitti.h"
#include "dejaview/base/memory.h"
#include "dejaview/bench/metrics.h"
#include "dejaview/codec/codec.h"

using namespace dv;

// Thread CPU time: the machine is shared, so wall-clock would count other processes' turns.
static double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  RetainFreedMemory();
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: codec_eval SEQDIR T [residual_precision] [intensity] [gap_factor] "
                 "[select_factor] [prior_seed] [prior_noise_scale]\n"
                 "  the map carries codec priors unless DV_NOPRIORS is set\n");
    return 2;
  }
  const double T = std::atof(argv[2]);
  codec::EncoderParams params;
  params.tolerance_m = T;
  if (argc > 3) params.residual_precision_m = std::atof(argv[3]);
  if (argc > 4) params.intensity = std::atoi(argv[4]) != 0;
  if (argc > 5) params.gap_factor = std::atof(argv[5]);
  if (argc > 6) params.select_factor = std::atof(argv[6]);
  // The prior's noise: the protocol's (0.15 m per horizontal axis, 0.05 m vertical, 0.5 degree of
  // yaw) times the scale, from the seed.
  const unsigned seed = argc > 7 ? unsigned(std::atoi(argv[7])) : 42;
  const double noise = argc > 8 ? std::atof(argv[8]) : 1.0;
  auto drive = OpenDrive(argv[1]);
  if (!drive.ok()) return std::fprintf(stderr, "%s\n", drive.status().ToString().c_str()), 1;
  const std::string mapdir = std::filesystem::temp_directory_path() / "codec_eval_map";
  std::filesystem::remove_all(mapdir);
  maps::BuildOptions bo;
  bo.resolution_m = T;
  bo.every = 2;
  auto t0 = std::chrono::steady_clock::now();
  maps::BuildReport br;
  Status st = getenv("DV_NOPRIORS") ? maps::BuildMap({*drive}, bo, mapdir, &br)
                                    : codec::BuildMapWithPriors({*drive}, bo, mapdir, &br);
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  auto map = maps::OpenMap(mapdir, 0);
  if (!map.ok()) return std::fprintf(stderr, "%s\n", map.status().ToString().c_str()), 1;
  std::printf("map: %.1f s, %llu voxels kept, %llu dropped, %llu bytes\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              (unsigned long long)br.voxels_kept, (unsigned long long)br.voxels_dropped,
              (unsigned long long)(*map)->disk_bytes());
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01(0, 1);
  codec::Encoder encoder(map->get());
  codec::Decoder decoder(map->get());
  std::vector<bench::FrameError> errs;
  struct Split {
    double pq2 = 0, qp2 = 0;
    size_t pq_n = 0, qp_n = 0;
  } split[4];
  size_t points = 0, bytes = 0;
  double worst = 0, enc_ms = 0, dec_ms = 0;
  size_t dynamic = 0, dynamic_in_gap = 0;
  double dynamic_worst = 0;
  for (size_t i = 1; i < drive->size(); i += 2) {
    auto cloud = ReadPointCloudFile(drive->frame_paths[i]);
    RemoveNonFinite(&*cloud);
    Pose prior = drive->poses[i];
    prior.translation() +=
        noise * Eigen::Vector3d(0.15 * n01(rng), 0.15 * n01(rng), 0.05 * n01(rng));
    prior.linear() =
        Eigen::AngleAxisd(noise * 0.5 * M_PI / 180 * n01(rng), Eigen::Vector3d::UnitZ()) *
        prior.linear();
    codec::EncodeReport rep;
    const double a = CpuMs();
    auto enc = encoder.Encode(*cloud, prior, {i, 0, 0}, params, &rep);
    const double b = CpuMs();
    if (!enc.ok()) return std::fprintf(stderr, "%s\n", enc.status().ToString().c_str()), 1;
    auto dec = decoder.Decode(enc->data(), enc->size());
    const double c = CpuMs();
    if (!dec.ok()) return std::fprintf(stderr, "%s\n", dec.status().ToString().c_str()), 1;
    // Both ways' nearest points, searched once: the frame's errors (as bench::CompareFrames gives
    // them) and where the squared error comes from, by the source of the decoded point involved:
    // the nearest decoded point for original->decoded, the decoded point itself the other way.
    const std::vector<double> qp = bench::NearestDistances(dec->cloud.xyz, cloud->xyz);
    std::vector<double> pq(cloud->size(), std::numeric_limits<double>::infinity());
    if (!dec->cloud.xyz.empty()) {
      const std::vector<size_t> near = bench::NearestIndices(cloud->xyz, dec->cloud.xyz);
      for (size_t j = 0; j < near.size(); ++j) {
        pq[j] = (cloud->xyz[j].cast<double>() - dec->cloud.xyz[near[j]].cast<double>()).norm();
        split[dec->source[near[j]]].pq2 += pq[j] * pq[j];
        split[dec->source[near[j]]].pq_n += 1;
      }
    }
    for (size_t j = 0; j < qp.size(); ++j) {
      split[dec->source[j]].qp2 += qp[j] * qp[j];
      split[dec->source[j]].qp_n += 1;
    }
    const bench::FrameError e{bench::Summarize(pq), bench::Summarize(qp)};
    errs.push_back(e);
    // Moving points (SemanticKITTI) lying in a gap cell: an upper bound on those the encoder put
    // in the gap class (a cell holds every point falling in it, whatever its class).
    if (!drive->labels_dir.empty()) {
      auto labels = ReadLabels(drive->LabelPath(i), cloud->size());
      if (!labels.ok()) return std::fprintf(stderr, "%s\n", labels.status().ToString().c_str()), 1;
      const double step = 2 * (dec->tolerance_m - 1e-4) / std::sqrt(3.0);
      auto cell = [&](const Eigen::Vector3f& p) {
        return std::make_tuple(std::floor(double(p.x()) / step), std::floor(double(p.y()) / step),
                               std::floor(double(p.z()) / step));
      };
      std::set<std::tuple<double, double, double>> gap_cells;
      for (size_t j = 0; j < dec->cloud.size(); ++j) {
        if (dec->source[j] == 2) gap_cells.insert(cell(dec->cloud.xyz[j]));
      }
      std::vector<Eigen::Vector3f> moving;
      for (size_t j = 0; j < cloud->size(); ++j) {
        if (!IsMovingClass(LabelClass((*labels)[j]))) continue;
        moving.push_back(cloud->xyz[j]);
        dynamic_in_gap += gap_cells.count(cell(cloud->xyz[j]));
      }
      dynamic += moving.size();
      for (double d : bench::NearestDistances(moving, dec->cloud.xyz)) {
        dynamic_worst = std::max(dynamic_worst, d);
      }
    }
    points += cloud->size();
    bytes += enc->size();
    worst = std::max(worst, e.hausdorff_m());
    const double em = b - a, dm = c - b;
    enc_ms += em;
    dec_ms += dm;
    const Pose err = drive->poses[i].inverse() * rep.T_map_sensor;
    std::printf(
        "frame %zu: %zu pts, %zu B (ratio %.1f)%s cand %zu sel %zu expl %zu res %zu gap %zu "
        "(surface %zu), "
        "pose err %.3f m %.4f deg, H %.4f CD %.4f, enc %.1f ms dec %.1f ms [",
        i, cloud->size(), enc->size(), 12.0 * cloud->size() / enc->size(),
        rep.intra_fallback ? " INTRA" : "", rep.candidates, rep.selected_voxels,
        rep.explained_points, rep.residual_points, rep.gap_points, rep.surface_points,
        TranslationNorm(err), RotationAngleRad(err) * 180 / M_PI, e.hausdorff_m(), e.chamfer_m(),
        em, dm);
    for (auto& [name, n] : rep.section_bytes) std::printf(" %s=%zu", name.c_str(), n);
    std::printf(" ]\n");
  }
  const double nf = double(errs.size());
  std::printf(
      "T=%.3f rp=%.3f gap=%.2f: ratio %.1f  CD %.4f  Hausdorff %.4f  enc %.1f ms  dec %.1f ms\n", T,
      params.residual_precision_m, params.gap_factor, 12.0 * points / bytes,
      bench::SetChamfer(errs), worst, enc_ms / nf, dec_ms / nf);
  size_t pq_n = 0, qp_n = 0;
  for (const Split& x : split) pq_n += x.pq_n, qp_n += x.qp_n;
  const char* names[4] = {"map", "residual", "gap", "fill"};
  for (int k = 0; k < 4; ++k) {
    const Split& x = split[k];
    std::printf(
        "  %-8s orig->dec: %5.1f%% of points, %.4f m rms, %5.1f%% of the squared sum; "
        "dec->orig: %5.1f%% of points, %.4f m rms\n",
        names[k], 100.0 * double(x.pq_n) / double(pq_n), std::sqrt(x.pq2 / double(x.pq_n)),
        100.0 * x.pq2 /
            [&] {
              double t = 0;
              for (const Split& y : split) t += y.pq2;
              return t;
            }(),
        100.0 * double(x.qp_n) / double(qp_n), std::sqrt(x.qp2 / double(x.qp_n)));
  }
  std::printf("dynamic: %zu points, %zu in gap cells, max error %.4f m\n", dynamic, dynamic_in_gap,
              dynamic_worst);
  return worst <= T ? 0 : 1;
}
