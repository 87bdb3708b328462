#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/drive.h"
#include "dejaview/bench/scan_stats.h"

namespace dv::cli {

int RunStats(int argc, char** argv) {
  auto args =
      Args::Parse(argc, argv, {"frames", "beams", "azimuth-steps", "other"}, {"json", "help"});
  if (!args.ok()) return Fail("stats", args.status());
  if (args->Has("help") || args->positional().size() != 1) {
    std::printf(
        "usage: dejaview stats DRIVE [--frames N] [--beams B] [--azimuth-steps A] [--other DRIVE]\n"
        "                      [--json]\n"
        "  statistics of a drive's frames, to compare simulated with real ones\n"
        "  (docs/simulator.md): points, height bands, ground heights and roughness, beams and\n"
        "  their spacing, missing returns, ranges, intensities, change to the next frame\n"
        "  --frames N         frames measured, evenly spaced (default 10)\n"
        "  --beams B, --azimuth-steps A   the sensor's rays, for the missing fraction\n"
        "                     (default: as found in the data)\n"
        "  --other DRIVE      another day of the same route: change to its nearest frame\n"
        "  --json             one JSON object\n"
        "  -h, --help         this text\n");
    return args->Has("help") ? kOk : kUsage;
  }
  bench::ScanStatsOptions o;
  Status bad;
  const auto num = [&](const char* key, double def) {
    auto v = args->GetDouble(key, def);
    if (!v.ok() && bad.ok()) bad = v.status();
    return v.ok() ? *v : def;
  };
  o.max_frames = size_t(std::max(1.0, num("frames", 10)));
  o.beams = int(num("beams", 0));
  o.azimuth_steps = int(num("azimuth-steps", 0));
  o.other_drive = args->Get("other", "");
  if (!bad.ok()) return Fail("stats", bad);
  auto drive = OpenDrive(args->positional()[0]);
  if (!drive.ok()) return Fail("stats", drive.status());
  auto st = bench::DriveStats(*drive, o);
  if (!st.ok()) return Fail("stats", st.status());
  const bench::ScanStats& s = *st;
  nlohmann::json j;
  j["drive"] = args->positional()[0];
  j["frames"] = s.frames;
  j["points"] = {{"mean", s.points_mean}, {"min", s.points_min}, {"max", s.points_max}};
  j["top_band_1cm"] = s.top_band_1cm;
  j["top_band_10cm"] = s.top_band_10cm;
  j["below_hist"] = {{"lo_m", s.below_lo_m}, {"band_m", 0.1}, {"fractions", s.below_hist}};
  j["ground"] = {{"points", s.ground_points},
                 {"z_p5", s.ground_z_p5},
                 {"z_p50", s.ground_z_p50},
                 {"z_p95", s.ground_z_p95},
                 {"roughness_m", s.ground_roughness_m},
                 {"intensity_p50_5_15m", s.ground_intensity_p50}};
  j["beams"] = {{"found", s.beams},
                {"top_deg", s.elevation_top_deg},
                {"bottom_deg", s.elevation_bottom_deg},
                {"from_order", s.rings_from_order},
                {"spacing_p5_deg", s.spacing_p5_deg},
                {"spacing_median_deg", s.spacing_median_deg},
                {"spacing_p95_deg", s.spacing_p95_deg},
                {"azimuth_steps", s.azimuth_steps}};
  j["missing"] = s.missing;
  j["range_m"] = {{"p5", s.range_p5},   {"p25", s.range_p25}, {"p50", s.range_p50},
                  {"p75", s.range_p75}, {"p95", s.range_p95}, {"max", s.range_max}};
  j["intensity"] = {{"mean", s.intensity_mean},
                    {"p10", s.intensity_p10},
                    {"p50", s.intensity_p50},
                    {"p90", s.intensity_p90},
                    {"zero", s.intensity_zero}};
  j["next_frame"] = {{"changed", s.next_frame_changed}, {"step_m", s.next_frame_step_m}};
  if (s.other_day_changed >= 0)
    j["other_day"] = {{"changed", s.other_day_changed}, {"offset_m", s.other_day_offset_m}};
  if (args->Has("json")) {
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
  }
  std::printf("drive:        %s (%zu frames measured)\n", args->positional()[0].c_str(), s.frames);
  std::printf("points:       mean %.0f, min %.0f, max %.0f; missing %.1f%% of %d x %d rays\n",
              s.points_mean, s.points_min, s.points_max, 100 * s.missing,
              o.beams > 0 ? o.beams : s.beams,
              o.azimuth_steps > 0 ? o.azimuth_steps : s.azimuth_steps);
  std::printf("height bands: top 1 cm band %.1f%%, top 10 cm band %.1f%% of the points\n",
              100 * s.top_band_1cm, 100 * s.top_band_10cm);
  std::printf("below:        %% of points per 10 cm band from %.1f m:", s.below_lo_m);
  for (double f : s.below_hist) std::printf(" %.1f", 100 * f);
  std::printf("\n");
  std::printf("ground:       %zu points, z p5/p50/p95 %.3f / %.3f / %.3f m, roughness %.4f m\n",
              s.ground_points, s.ground_z_p5, s.ground_z_p50, s.ground_z_p95, s.ground_roughness_m);
  std::printf(
      "beams:        %d found, %.2f..%.2f deg, spacing p5/p50/p95 %.3f / %.3f / %.3f "
      "deg, %d azimuth steps\n",
      s.beams, s.elevation_bottom_deg, s.elevation_top_deg, s.spacing_p5_deg, s.spacing_median_deg,
      s.spacing_p95_deg, s.azimuth_steps);
  std::printf("range:        p5/p25/p50/p75/p95/max %.1f / %.1f / %.1f / %.1f / %.1f / %.1f m\n",
              s.range_p5, s.range_p25, s.range_p50, s.range_p75, s.range_p95, s.range_max);
  std::printf(
      "intensity:    mean %.3f, p10/p50/p90 %.3f / %.3f / %.3f, zero %.1f%%, ground "
      "5-15 m median %.3f\n",
      s.intensity_mean, s.intensity_p10, s.intensity_p50, s.intensity_p90, 100 * s.intensity_zero,
      s.ground_intensity_p50);
  if (s.next_frame_changed >= 0)
    std::printf("next frame:   %.1f%% of points > 0.1 m from it (%.2f m apart)\n",
                100 * s.next_frame_changed, s.next_frame_step_m);
  if (s.other_day_changed >= 0)
    std::printf("other day:    %.1f%% of points > 0.1 m from its nearest frame (%.2f m apart)\n",
                100 * s.other_day_changed, s.other_day_offset_m);
  return kOk;
}

}  // namespace dv::cli
