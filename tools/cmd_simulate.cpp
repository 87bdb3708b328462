#include <cstdio>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/sim/simulate.h"
#include "progress.h"

namespace dv::cli {

int RunSimulate(int argc, char** argv) {
  auto args = Args::Parse(
      argc, argv,
      {"out", "days", "frames", "seed", "preset", "beams", "azimuth-steps", "threads", "parked",
       "construction", "leaf-loss", "growth", "permanent-per-km", "vehicles-per-km",
       "cyclists-per-km", "pedestrians-per-km", "prior-sigma", "prior-yaw-deg", "speed"},
      {"help", "quiet"});
  if (!args.ok()) return Fail("simulate", args.status());
  if (args->Has("help") || !args->Has("out")) {
    std::printf(
        "usage: dejaview simulate --out DIR [--days N] [--frames F] [--seed S] [--preset "
        "hdl64|os128]\n"
        "         [--beams B] [--azimuth-steps A] [--threads T] [--speed M/S] [--quiet]\n"
        "         [--parked P] [--construction P] [--leaf-loss P] [--growth PER_DAY]\n"
        "         [--permanent-per-km N] [--vehicles-per-km N] [--cyclists-per-km N]\n"
        "         [--pedestrians-per-km N] [--prior-sigma M] [--prior-yaw-deg D]\n"
        "writes DIR/day_NN/{velodyne,labels,poses.txt,poses_prior.txt,timestamps.txt}\n");
    return args->Has("help") ? kOk : kUsage;
  }
  sim::SimOptions o;
  o.out_dir = args->Get("out");
  auto preset = sim::LidarPreset(args->Get("preset", "hdl64"));
  if (!preset.ok()) return Fail("simulate", preset.status());
  // Every numeric option, read in one place so that a bad value names its flag.
  Status bad;
  const auto num = [&](const char* key, double def) {
    auto v = args->GetDouble(key, def);
    if (!v.ok() && bad.ok()) bad = v.status();
    return v.ok() ? *v : def;
  };
  o.days = int(num("days", 1));
  o.frames = int(num("frames", 100));
  o.seed = uint64_t(num("seed", 1));
  o.threads = int(num("threads", 2));
  o.speed_mps = num("speed", o.speed_mps);
  o.lidar = sim::Reduced(*preset, int(num("beams", 0)), int(num("azimuth-steps", 0)));
  o.rates.parked_occupancy = num("parked", o.rates.parked_occupancy);
  o.rates.construction = num("construction", o.rates.construction);
  o.rates.leaf_loss = num("leaf-loss", o.rates.leaf_loss);
  o.rates.growth_per_day = num("growth", o.rates.growth_per_day);
  o.rates.permanent_per_km = int(num("permanent-per-km", o.rates.permanent_per_km));
  o.rates.vehicles_per_km = num("vehicles-per-km", o.rates.vehicles_per_km);
  o.rates.cyclists_per_km = num("cyclists-per-km", o.rates.cyclists_per_km);
  o.rates.pedestrians_per_km = num("pedestrians-per-km", o.rates.pedestrians_per_km);
  o.prior_sigma_m = num("prior-sigma", o.prior_sigma_m);
  o.prior_yaw_deg = num("prior-yaw-deg", o.prior_yaw_deg);
  if (!bad.ok()) return Fail("simulate", bad);
  const bool quiet = args->Has("quiet");
  sim::SimReport report;
  Progress progress("simulate", "frames", quiet);
  const Status s = sim::Simulate(o, &report, [&](int day, int done) {
    progress.Update(size_t(day) * size_t(o.frames) + size_t(done),
                    size_t(o.days) * size_t(o.frames));
  });
  progress.Finish();
  if (!s.ok()) return Fail("simulate", s);
  std::printf("simulated %zu frames (%d days), %zu points, %.1f s, %.2f frames/s, %d threads\n",
              report.frames, o.days, report.points, report.seconds,
              double(report.frames) / report.seconds, o.threads);
  return kOk;
}

}  // namespace dv::cli
