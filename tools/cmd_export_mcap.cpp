// dejaview export --format mcap: a drive folder, or the reconstructed frames of a query, as one
// MCAP file that Foxglove opens (docs/recorded.md).
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "dejaview/recorded/drive_mcap.h"
#include "dejaview/server/export.h"
#include "frame_query_args.h"

namespace dv::cli {
namespace {

// The query's frames reconstructed into a drive folder beside the output, then written out.
Status ExportQueryMcap(const Args& args, const std::string& out) {
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
  if (drive.ok()) s = recorded::ExportDriveMcap(*drive, out);
  std::error_code ignored;
  std::filesystem::remove_all(frames_dir, ignored);
  return drive.ok() ? s : drive.status();
}

}  // namespace

int RunExportMcap(const Args& args) {
  const bool query = args.Has("maps") && (args.Has("db") || args.Has("store"));
  if (args.Has("help") || !args.Has("out") || (args.positional().size() == 1) == query) {
    std::printf(
        "usage: dejaview export --format mcap --out OUT.mcap DRIVE\n"
        "       dejaview export --format mcap --out OUT.mcap --db INDEX|--store STORE --maps MAPS"
        " [query options]\n");
    return args.Has("help") ? kOk : kUsage;
  }
  const std::string out = args.Get("out");
  Status s;
  size_t frames = 0;
  if (query) {
    s = ExportQueryMcap(args, out);
  } else {
    auto drive = OpenDrive(args.positional()[0]);
    s = drive.ok() ? recorded::ExportDriveMcap(*drive, out) : drive.status();
    frames = drive.ok() ? drive->size() : 0;
  }
  if (!s.ok()) return Fail("export", s);
  std::printf("wrote %s", out.c_str());
  if (frames > 0) std::printf(" (%zu frames)", frames);
  std::printf("\n");
  return kOk;
}

}  // namespace dv::cli
