// dejaview map build | info | publish: the route map of docs/map-format.md, published into a
// maps root for the map service (docs/map-sync.md).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/map_root.h"
#include "dejaview/maps/route_map.h"
#include "progress.h"

namespace dv::cli {
namespace {

int Build(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {"out", "every", "resolution", "max-range"},
                          {"json", "help", "quiet"});
  if (!args.ok()) return Fail("map build", args.status());
  if (args->Has("help") || args->positional().empty() || !args->Has("out")) {
    std::printf(
        "usage: dejaview map build DRIVE... --out MAPDIR [--every N] [--resolution R]\n"
        "                          [--max-range M] [--json] [--quiet]\n"
        "  --quiet: no progress; progress is one line per 10%% when stderr is not a terminal\n"
        "  builds a voxel route map (resolution R metres, default 0.2) from every N-th frame of\n"
        "  each drive (frames + poses.txt); transient objects seen in one pass are left out;\n"
        "  the codec's priors are then learnt from up to 24 of those frames "
        "(docs/map-format.md)\n");
    return args->Has("help") ? kOk : kUsage;
  }
  maps::BuildOptions opt;
  auto res = args->GetDouble("resolution", opt.resolution_m);
  auto every = args->GetInt("every", opt.every);
  auto range = args->GetDouble("max-range", opt.max_range_m);
  if (!res.ok()) return Fail("map build", res.status());
  if (!every.ok()) return Fail("map build", every.status());
  if (!range.ok()) return Fail("map build", range.status());
  opt.resolution_m = *res;
  opt.every = int(*every);
  opt.max_range_m = *range;
  std::vector<Drive> drives;
  for (const std::string& path : args->positional()) {
    auto d = OpenDrive(path);
    if (!d.ok()) return Fail("map build", d.status());
    drives.push_back(std::move(d).value());
  }
  const bool json = args->Has("json");
  Progress progress("map build", "passes", args->Has("quiet"));
  opt.progress = [&](size_t done, size_t total) {
    progress.Update(done, total);
    if (done == total) {
      progress.Finish();
      if (!args->Has("quiet")) {
        std::fprintf(stderr, "map build: learning the codec priors (up to %zu frames)\n",
                     codec::kMaxPriorFrames);
      }
    }
  };
  maps::BuildReport rep;
  const std::string out = args->Get("out");
  Status s = codec::BuildMapWithPriors(drives, opt, out, &rep);
  if (!s.ok()) return Fail("map build", s);
  auto map = maps::OpenMap(out, 0);
  if (!map.ok()) return Fail("map build", map.status());
  if (json) {
    nlohmann::json j = {{"map", out},
                        {"version", (*map)->version()},
                        {"frames", rep.frames},
                        {"voxels", rep.voxels_kept},
                        {"voxels_dropped", rep.voxels_dropped},
                        {"tiles", rep.tiles},
                        {"bytes", (*map)->disk_bytes()},
                        {"route_m", rep.route_m}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "map %s: version %s, %zu frames, %llu voxels (%llu transient dropped), %zu tiles, "
        "%llu bytes, route %.1f m",
        out.c_str(), (*map)->version().c_str(), rep.frames, (unsigned long long)rep.voxels_kept,
        (unsigned long long)rep.voxels_dropped, rep.tiles, (unsigned long long)(*map)->disk_bytes(),
        rep.route_m);
    if (rep.route_m > 0) {
      std::printf(" (%.3f MB per metre)", double((*map)->disk_bytes()) / 1e6 / rep.route_m);
    }
    std::printf("\n");
  }
  return kOk;
}

int Info(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {}, {"json", "help"});
  if (!args.ok()) return Fail("map info", args.status());
  if (args->Has("help") || args->positional().size() != 1) {
    std::printf(
        "usage: dejaview map info MAPDIR [--json]\n"
        "  a route map's version, resolution, tiles, voxels, bytes and codec priors\n"
        "  --json      the same as one JSON object\n"
        "  -h, --help  this text\n");
    return args->Has("help") ? kOk : kUsage;
  }
  auto map = maps::OpenMap(args->positional()[0], 0);
  if (!map.ok()) return Fail("map info", map.status());
  const maps::RouteMap& m = **map;
  if (args->Has("json")) {
    nlohmann::json j = {{"map", args->positional()[0]},
                        {"version", m.version()},
                        {"resolution_m", m.resolution_m()},
                        {"tiles", m.tiles().size()},
                        {"voxels", m.voxel_count()},
                        {"bytes", m.disk_bytes()},
                        {"codec_priors_bytes", m.codec_priors().size()}};
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
  }
  std::printf("map:        %s\n", args->positional()[0].c_str());
  std::printf("version:    %s\n", m.version().c_str());
  std::printf("resolution: %.3f m\n", m.resolution_m());
  std::printf("tiles:      %zu (%d voxels per side)\n", m.tiles().size(), maps::kTileVoxels);
  std::printf("voxels:     %llu\n", (unsigned long long)m.voxel_count());
  std::printf("bytes:      %llu\n", (unsigned long long)m.disk_bytes());
  std::printf("priors:     %zu bytes%s\n", m.codec_priors().size(),
              m.codec_priors().empty() ? " (none: frames start from flat models)" : "");
  return kOk;
}

int Publish(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {"maps-root"}, {"help"});
  if (!args.ok()) return Fail("map publish", args.status());
  if (args->Has("help") || args->positional().size() != 1 || !args->Has("maps-root")) {
    std::printf(
        "usage: dejaview map publish MAPDIR --maps-root ROOT\n"
        "  copies the map (every tile checked) to ROOT/<version>/ and makes it ROOT/LATEST, the\n"
        "  version dejaview-server --maps ROOT offers to vehicles (docs/map-sync.md)\n");
    return args->Has("help") ? kOk : kUsage;
  }
  auto version = maps::PublishMap(args->positional()[0], args->Get("maps-root"));
  if (!version.ok()) return Fail("map publish", version.status());
  std::printf("published map version %s in %s\n", version->c_str(), args->Get("maps-root").c_str());
  return kOk;
}

}  // namespace

int RunMap(int argc, char** argv) {
  if (argc >= 1 && std::string(argv[0]) == "build") return Build(argc - 1, argv + 1);
  if (argc >= 1 && std::string(argv[0]) == "info") return Info(argc - 1, argv + 1);
  if (argc >= 1 && std::string(argv[0]) == "publish") return Publish(argc - 1, argv + 1);
  std::printf(
      "usage: dejaview map build|info|publish ...\n"
      "  build    a route map from drives       (dejaview map build --help)\n"
      "  info     describe a map                (dejaview map info --help)\n"
      "  publish  a map version into a maps root (dejaview map publish --help)\n");
  const bool help = argc >= 1 && (std::string(argv[0]) == "--help" || std::string(argv[0]) == "-h");
  return help ? kOk : kUsage;
}

}  // namespace dv::cli
