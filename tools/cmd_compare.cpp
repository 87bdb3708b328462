// dejaview compare: the errors (as BENCHMARK.md defines them) of a reconstructed drive against
// its original, frame by frame (matched by name), and optionally a picture of the first matched
// frame. The main job (scripts/demo.sh) uses it to judge what the server reconstructed.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/kitti.h"
#include "dejaview/bench/metrics.h"
#include "dejaview/bench/report.h"

namespace dv::cli {

int RunCompare(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {"png"}, {"json", "help"});
  if (!args.ok()) return Fail("compare", args.status());
  if (args->Has("help") || args->positional().size() != 2) {
    std::printf(
        "usage: dejaview compare ORIGINAL_DRIVE RECONSTRUCTED_DRIVE [--png FILE] [--json]\n"
        "frames are matched by name; errors as BENCHMARK.md defines them (CD, one-way mean/max, "
        "Hausdorff)\n");
    return args->Has("help") ? kOk : kUsage;
  }
  auto orig = OpenDrive(args->positional()[0]);
  if (!orig.ok()) return Fail("compare", orig.status());
  auto recon = OpenDrive(args->positional()[1]);
  if (!recon.ok()) return Fail("compare", recon.status());
  std::map<std::string, std::string> recon_by_name;
  for (size_t i = 0; i < recon->size(); ++i)
    recon_by_name[recon->frame_names[i]] = recon->frame_paths[i];

  std::vector<bench::FrameError> errors;
  size_t points = 0, decoded = 0, non_finite = 0, dynamic_points = 0;
  double dynamic_max_m = 0;
  std::string png_done;
  for (size_t i = 0; i < orig->size(); ++i) {
    auto it = recon_by_name.find(orig->frame_names[i]);
    if (it == recon_by_name.end()) continue;
    auto p = ReadPointCloudFile(orig->frame_paths[i]);
    if (!p.ok()) return Fail("compare", p.status());
    auto q = ReadPointCloudFile(it->second);
    if (!q.ok()) return Fail("compare", q.status());
    std::vector<uint32_t> labels;
    if (!orig->labels_dir.empty()) {
      auto l = ReadLabels(orig->LabelPath(i), p->size());
      if (l.ok()) labels = std::move(l).value();
    }
    // nn(p, Q) once per original point: it gives both the P->Q summary and the dynamic split.
    const auto dist = bench::NearestDistances(p->xyz, q->xyz);
    std::vector<double> finite_dist;
    finite_dist.reserve(dist.size());
    for (size_t k = 0; k < dist.size(); ++k) {
      if (!p->xyz[k].allFinite()) continue;  // removed before measuring (BENCHMARK.md)
      finite_dist.push_back(dist[k]);
      if (k >= labels.size()) continue;
      if (IsDynamicLabel(labels[k], orig->simulated())) {
        ++dynamic_points;
        dynamic_max_m = std::max(dynamic_max_m, dist[k]);
      }
    }
    non_finite += RemoveNonFinite(&p.value());
    bench::FrameError e;
    e.p_to_q = bench::Summarize(std::move(finite_dist));
    e.q_to_p = bench::Summarize(bench::NearestDistances(q->xyz, p->xyz));
    errors.push_back(e);
    points += p->size();
    decoded += q->size();
    if (args->Has("png") && png_done.empty()) {
      const Status s =
          bench::RenderFramesPng({{"original " + orig->frame_names[i], &p.value()},
                                  {"reconstruction " + orig->frame_names[i], &q.value()}},
                                 args->Get("png"));
      png_done = s.ok() ? args->Get("png") : s.ToString();
    }
  }
  if (errors.empty()) {
    return Fail("compare", Status::NotFound("no frame names in common between the two drives"));
  }
  double hausdorff = 0, pq_max = 0, qp_max = 0, pq_mean = 0, qp_mean = 0;
  for (const auto& e : errors) {
    hausdorff = std::max(hausdorff, e.hausdorff_m());
    pq_max = std::max(pq_max, e.p_to_q.max_m);
    qp_max = std::max(qp_max, e.q_to_p.max_m);
    pq_mean += e.p_to_q.mean_m / double(errors.size());
    qp_mean += e.q_to_p.mean_m / double(errors.size());
  }
  nlohmann::json j = {{"frames", errors.size()},
                      {"original_points", points},
                      {"decoded_points", decoded},
                      {"non_finite_removed", non_finite},
                      {"cd_m", bench::SetChamfer(errors)},
                      {"p_to_q_mean_m", pq_mean},
                      {"p_to_q_max_m", pq_max},
                      {"q_to_p_mean_m", qp_mean},
                      {"q_to_p_max_m", qp_max},
                      {"hausdorff_m", hausdorff},
                      {"dynamic_points", dynamic_points},
                      {"dynamic_max_m", dynamic_max_m}};
  if (!png_done.empty()) j["png"] = png_done;
  if (args->Has("json")) {
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
  }
  std::printf(
      "| frames | original / decoded points | CD m | P->Q mean / max m | Q->P mean / max m "
      "| Hausdorff m | dynamic points: max error m |\n|---|---|---|---|---|---|---|\n");
  std::printf("| %zu | %zu / %zu | %.4f | %.4f / %.4f | %.4f / %.4f | %.4f | %zu: %.4f |\n",
              errors.size(), points, decoded, bench::SetChamfer(errors), pq_mean, pq_max, qp_mean,
              qp_max, hausdorff, dynamic_points, dynamic_max_m);
  if (!png_done.empty()) std::printf("picture: %s\n", png_done.c_str());
  return kOk;
}

}  // namespace dv::cli
