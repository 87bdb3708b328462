// dejaview export: the frames of a query streamed as training batches (docs/export-format.md),
// read through the store's multi-path reader, with the throughput a training job would see.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>

#include "commands.h"
#include "dejaview/server/export.h"
#include "frame_query_args.h"

namespace dv::cli {
namespace {

Status ParseTiers(const std::string& text, store::ReadOptions* read) {
  read->use_memory = read->use_disk = read->use_remote = false;
  std::stringstream ss(text);
  std::string tier;
  while (std::getline(ss, tier, ',')) {
    if (tier == "memory") {
      read->use_memory = true;
    } else if (tier == "disk") {
      read->use_disk = true;
    } else if (tier == "remote") {
      read->use_remote = true;
    } else {
      return Status::InvalidArgument("--tiers: '" + tier + "' is not memory, disk or remote");
    }
  }
  return Status::Ok();
}

StatusOr<server::ExportOptions> ParseExportOptions(const Args& args) {
  server::ExportOptions o;
  o.layout = args.Get("layout", o.layout);
  DV_ASSIGN_OR_RETURN(const long batch, args.GetInt("batch", long(o.batch_frames)));
  if (batch < 1 || batch > long(server::kMaxBatchFrames)) {
    return Status::InvalidArgument("--batch: must be 1.." +
                                   std::to_string(server::kMaxBatchFrames));
  }
  o.batch_frames = size_t(batch);
  o.shuffle = args.Has("seed");
  DV_ASSIGN_OR_RETURN(const long seed, args.GetInt("seed", 0));
  o.seed = uint64_t(seed);
  DV_ASSIGN_OR_RETURN(const long prefetch, args.GetInt("prefetch", long(o.read.prefetch_objects)));
  if (prefetch < 0 || prefetch > 4096) return Status::InvalidArgument("--prefetch: 0..4096");
  o.read.prefetch_objects = size_t(prefetch);
  if (args.Has("tiers")) DV_RETURN_IF_ERROR(ParseTiers(args.Get("tiers"), &o.read));
  const long cores = std::max(1L, long(std::thread::hardware_concurrency()));
  DV_ASSIGN_OR_RETURN(const long threads,
                      args.GetInt("threads", std::min(cores, long(server::kMaxExportThreads))));
  if (threads < 1 || threads > server::kMaxExportThreads) {
    return Status::InvalidArgument("--threads: must be 1.." +
                                   std::to_string(server::kMaxExportThreads));
  }
  o.threads = int(threads);
  return o;
}

}  // namespace

int RunExport(int argc, char** argv) {
  auto args = Args::Parse(argc, argv,
                          FrameQueryKeys({"out", "maps", "layout", "batch", "seed", "prefetch",
                                          "tiers", "threads", "format", "voxel"}),
                          {"help", "merge"});
  if (!args.ok()) return Fail("export", args.status());
  const std::string format = args->Get("format", "batches");
  if (format == "mcap" || format == "ply" || format == "pcd") return RunExportDrive(*args, format);
  if (format != "batches") {
    return Fail("export", Status::InvalidArgument("--format: '" + format +
                                                  "' is not batches, mcap, ply or pcd"));
  }
  if (args->Has("help") || !args->Has("out") || !args->Has("maps") ||
      !(args->Has("db") || args->Has("store"))) {
    std::printf(
        "usage: dejaview export --db INDEX|--store STORE --maps MAPS --out DIR [options]\n"
        "%s"
        "  --layout kitti|packed (default kitti)  --batch N frames (default 32)\n"
        "  --seed S: shuffled order from seed S (default: index order)\n"
        "  --tiers memory,disk,remote (default all)  --prefetch N objects ahead (default 8)\n"
        "  --threads N frames decoded side by side (default: all cores); the same bytes for any "
        "N\n"
        "  --format batches|mcap|ply|pcd (default batches; mcap: --out OUT.mcap, a DRIVE or a\n"
        "    query; ply|pcd --merge [--voxel M]: one world-frame cloud)\n",
        kFrameQueryUsage);
    return args->Has("help") ? kOk : kUsage;
  }
  auto q = ParseFrameQuery(*args);
  if (!q.ok()) return Fail("export", q.status());
  auto options = ParseExportOptions(*args);
  if (!options.ok()) return Fail("export", options.status());
  auto storage = OpenQueryStorage(*args);
  if (!storage.ok()) return Fail("export", storage.status());
  auto rows = storage->index->Query(*q);
  if (!rows.ok()) return Fail("export", rows.status());
  server::MapVersions maps(args->Get("maps"));
  auto st = server::ExportFrames(storage->store.get(), *rows, &maps, *options, args->Get("out"));
  if (!st.ok()) return Fail("export", st.status());
  std::printf("exported %zu frames in %zu batches to %s (%s)\n", st->frames, st->batches,
              args->Get("out").c_str(), options->layout.c_str());
  std::printf("%.1f frames/s, %.1f MB/s reconstructed, %.1f MB/s read from the store, %.3f s\n",
              st->frames_per_s(), st->output_mb_per_s(), st->stored_mb_per_s(), st->seconds);
  ReportSkipped(*st);
  return kOk;
}

}  // namespace dv::cli
