// dejaview encode: frames (a drive or one file) -> delta files (docs/delta-format.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "codec_io.h"
#include "commands.h"
#include "dejaview/base/file_util.h"
#include "dejaview/codec/codec.h"
#include "progress.h"

namespace dv::cli {

int RunEncode(int argc, char** argv) {
  auto args =
      Args::Parse(argc, argv,
                  {"map", "out", "tolerance", "residual-precision", "gap-factor", "select-factor",
                   "selection-radius", "map-budget-mb", "pose", "backend", "threads"},
                  {"no-intensity", "json", "help", "quiet"});
  if (!args.ok()) return Fail("encode", args.status());
  if (args->Has("help") || args->positional().size() != 1 || !args->Has("out")) {
    std::printf(
        "usage: dejaview encode DRIVE --map MAPDIR --out DELTADIR --tolerance T\n"
        "       dejaview encode FRAME.bin [--map MAPDIR --pose \"12 numbers\"] --out FILE.dvd\n"
        "  [--residual-precision P] [--gap-factor G] [--select-factor S] [--selection-radius R]\n"
        "  [--no-intensity] [--map-budget-mb MB] [--backend cpu|cuda] [--threads N] [--json]\n"
        "  [--quiet]\n"
        "  Every decoded point lies within T metres of an original point and every original\n"
        "  point within T of a decoded one. Without --map frames are coded intra. The prior pose\n"
        "  of each frame is DRIVE/poses_prior.txt when present, else DRIVE/poses.txt. Points the\n"
        "  map does not explain are coded within P, except those within G*T of a map point\n"
        "  (coded within T; G 0 codes them all within P). Each explained point is stood for by\n"
        "  its nearest map voxel and every map voxel within S*T of it (S in [0, 1]), among the "
        "map\n"
        "  voxels within R metres of the sensor (default 0: the frame's whole range; the points\n"
        "  beyond R near the map are coded within T). N threads\n"
        "  share each frame's work (default 1); the bytes are the same with any N.\n");
    return args->Has("help") ? kOk : kUsage;
  }
  codec::EncoderParams params;
  auto tol = args->GetDouble("tolerance", params.tolerance_m);
  auto rp = args->GetDouble("residual-precision", params.residual_precision_m);
  if (!tol.ok()) return Fail("encode", tol.status());
  auto gap = args->GetDouble("gap-factor", params.gap_factor);
  if (!rp.ok()) return Fail("encode", rp.status());
  if (!gap.ok()) return Fail("encode", gap.status());
  auto sel = args->GetDouble("select-factor", params.select_factor);
  if (!sel.ok()) return Fail("encode", sel.status());
  params.select_factor = *sel;
  auto radius = args->GetDouble("selection-radius", params.selection_radius_m);
  if (!radius.ok()) return Fail("encode", radius.status());
  params.selection_radius_m = *radius;
  params.tolerance_m = *tol;
  params.residual_precision_m = *rp;
  params.gap_factor = *gap;
  params.intensity = !args->Has("no-intensity");
  auto threads = ThreadsArg(*args);
  if (!threads.ok()) return Fail("encode", threads.status());
  params.threads = *threads;
  auto backend = codec::ParseBackend(args->Get("backend", "cpu"));
  if (!backend.ok()) return Fail("encode", backend.status());
  params.backend = *backend;
  if (Status s = codec::CheckBackend(params.backend); !s.ok()) return Fail("encode", s);
  auto map = OpenMapArg(*args);
  if (!map.ok()) return Fail("encode", map.status());
  const std::string input = args->positional()[0];
  const std::string out = args->Get("out");

  struct Job {
    std::string frame_path, out_path;
    Pose prior;
    codec::FrameInfo info;
  };
  std::vector<Job> jobs;
  if (std::filesystem::is_directory(input)) {
    auto drive = OpenDrive(input);
    if (!drive.ok()) return Fail("encode", drive.status());
    const std::vector<Pose>& priors =
        drive->poses_prior.empty() ? drive->poses : drive->poses_prior;
    if (*map && priors.empty()) {
      return Fail("encode", Status::InvalidArgument(input + ": coding against a map needs "
                                                            "poses.txt or poses_prior.txt"));
    }
    Status s = MakeDirs(out);
    if (!s.ok()) return Fail("encode", s);
    for (size_t i = 0; i < drive->size(); ++i) {
      Job j{drive->frame_paths[i],
            out + "/" + drive->frame_names[i] + ".dvd",
            priors.empty() ? Pose::Identity() : priors[i],
            {}};
      j.info.sequence = i;
      if (!drive->timestamps_s.empty()) {
        j.info.timestamp_ns = int64_t(std::llround(drive->timestamps_s[i] * 1e9));
      }
      jobs.push_back(j);
    }
  } else {
    Pose prior = Pose::Identity();
    if (args->Has("pose")) {
      auto p = ParsePose(args->Get("pose"));
      if (!p.ok()) return Fail("encode", p.status());
      prior = *p;
    } else if (*map) {
      return Fail("encode", Status::InvalidArgument("a single frame with --map needs --pose"));
    }
    jobs.push_back({input, out, prior, {}});
  }

  size_t points = 0, bytes = 0, intra = 0;
  double ms = 0;
  // Sums over the frames of what each frame's report says, for --json: where the bytes and the
  // time go.
  std::map<std::string, double> counts, section_bytes, stage_ms;
  codec::Encoder encoder(map->get());
  Progress progress("encode", "frames", args->Has("quiet"));
  for (size_t k = 0; k < jobs.size(); ++k) {
    const Job& j = jobs[k];
    auto cloud = ReadPointCloudFile(j.frame_path);
    if (!cloud.ok()) return Fail("encode", cloud.status());
    codec::EncodeReport rep;
    const auto t0 = std::chrono::steady_clock::now();
    auto delta = encoder.Encode(*cloud, j.prior, j.info, params, &rep);
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!delta.ok()) return Fail("encode", delta.status().WithContext(j.frame_path));
    Status s = WriteFileAtomic(j.out_path, *delta);
    if (!s.ok()) return Fail("encode", s);
    points += rep.points_in;
    bytes += delta->size();
    intra += rep.intra_fallback;
    counts["candidates"] += double(rep.candidates);
    counts["selected_voxels"] += double(rep.selected_voxels);
    counts["explained_points"] += double(rep.explained_points);
    counts["residual_points"] += double(rep.residual_points);
    counts["gap_points"] += double(rep.gap_points);
    counts["still_points"] += double(rep.still_points);
    counts["fill_points"] += double(rep.fill_points);
    for (const auto& [name, b] : rep.section_bytes) section_bytes[name] += double(b);
    for (const auto& [name, t] : rep.stage_ms) stage_ms[name] += t;
    progress.Update(k + 1, jobs.size());
  }
  progress.Finish();
  const double ratio = bytes ? 12.0 * double(points) / double(bytes) : 0;
  if (args->Has("json")) {
    nlohmann::json j = {{"frames", jobs.size()},
                        {"points", points},
                        {"bytes", bytes},
                        {"intra_frames", intra},
                        {"tolerance_m", params.tolerance_m},
                        {"ratio_xyz", ratio},
                        {"encode_ms_mean", ms / double(jobs.size())}};
    const double n = double(jobs.size());
    auto means = [n](const std::map<std::string, double>& sums) {
      nlohmann::json m = nlohmann::json::object();
      for (const auto& [name, sum] : sums) m[name] = sum / n;
      return m;
    };
    j["per_frame_mean"] = means(counts);
    j["section_bytes_mean"] = means(section_bytes);
    j["stage_ms_mean"] = means(stage_ms);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "encoded %zu frames (%zu intra), %zu points into %zu bytes: ratio %.1f "
        "(12 bytes/point), tolerance %.3f m, %.1f ms/frame\n",
        jobs.size(), intra, points, bytes, ratio, params.tolerance_m, ms / double(jobs.size()));
  }
  return kOk;
}

}  // namespace dv::cli
