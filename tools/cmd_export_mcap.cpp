// dejaview export --format mcap|ply|pcd: a drive folder, or the reconstructed frames of a query,
// as one MCAP file that Foxglove opens, or (--merge) as one world-frame cloud that CloudCompare
// opens (docs/recorded.md).
#include <cstdio>
#include <filesystem>
#include <functional>

#include "commands.h"
#include "dejaview/recorded/drive_mcap.h"
#include "dejaview/server/export.h"
#include "frame_query_args.h"

namespace dv::cli {
namespace {

// The query's frames reconstructed into a drive folder beside the output, handed to write, then
// removed.
Status WithQueryDrive(const Args& args, const std::string& out,
                      const std::function<Status(const Drive&)>& write) {
  DV_ASSIGN_OR_RETURN(const auto query, ParseFrameQuery(args));
  DV_ASSIGN_OR_RETURN(auto storage, OpenQueryStorage(args));
  DV_ASSIGN_OR_RETURN(const auto rows, storage.index->Query(query));
  server::MapVersions maps(args.Get("maps"));
  const std::string frames_dir = out + ".frames.tmp";
  std::filesystem::remove_all(frames_dir);
  auto st = server::ExportFrames(storage.store.get(), rows, &maps, {}, frames_dir);
  Status s = st.status();
  if (s.ok()) ReportSkipped(*st);
  auto drive = s.ok() ? OpenDrive(frames_dir) : StatusOr<Drive>(s);
  if (drive.ok()) s = write(*drive);
  std::error_code ignored;
  std::filesystem::remove_all(frames_dir, ignored);
  return drive.ok() ? s : drive.status();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int RunExportDrive(const Args& args, const std::string& format) {
  const bool query = args.Has("maps") && (args.Has("db") || args.Has("store"));
  const bool cloud = format != "mcap";
  if (args.Has("help") || !args.Has("out") || (args.positional().size() == 1) == query ||
      cloud != args.Has("merge") || (args.Has("voxel") && !cloud)) {
    std::printf(
        "usage: dejaview export --format mcap --out OUT.mcap DRIVE\n"
        "       dejaview export --format ply|pcd --merge [--voxel M] --out OUT.ply|OUT.pcd DRIVE\n"
        "       (either, instead of DRIVE: --db INDEX|--store STORE --maps MAPS [query options])\n"
        "--merge: every frame moved into the world frame by its pose, as one cloud; --voxel M: "
        "one\n"
        "point (the first) kept per M-metre voxel\n");
    return args.Has("help") ? kOk : kUsage;
  }
  const std::string out = args.Get("out");
  if (cloud && !EndsWith(out, "." + format))
    return Fail("export", Status::InvalidArgument("--out " + out + ": --format " + format +
                                                  " writes a ." + format + " file"));
  auto voxel_m = args.GetDouble("voxel", 0.0);
  if (!voxel_m.ok()) return Fail("export", voxel_m.status());
  recorded::MergeStats merged;
  const auto write = [&](const Drive& drive) -> Status {
    if (!cloud) return recorded::ExportDriveMcap(drive, out);
    DV_ASSIGN_OR_RETURN(const PointCloud points, recorded::MergeDrive(drive, *voxel_m, &merged));
    return WritePointCloudFile(out, points);
  };
  Status s;
  size_t frames = 0;
  if (query) {
    s = WithQueryDrive(args, out, write);
  } else {
    auto drive = OpenDrive(args.positional()[0]);
    s = drive.ok() ? write(*drive) : drive.status();
    frames = drive.ok() ? drive->size() : 0;
  }
  if (!s.ok()) return Fail("export", s);
  std::printf("wrote %s", out.c_str());
  if (cloud) {
    std::printf(" (%zu frames, %zu of %zu points kept, %zu non-finite dropped)", merged.frames,
                merged.points_out, merged.points_in, merged.non_finite);
  } else if (frames > 0) {
    std::printf(" (%zu frames)", frames);
  }
  std::printf("\n");
  return kOk;
}

}  // namespace dv::cli
