// dejaview render: frames side by side, drawn the same way (for judging the simulator's realism
// against real scans, or any two frames).
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/drive.h"
#include "dejaview/bench/report.h"

namespace dv::cli {

int RunRender(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {"out", "title"}, {"help"});
  if (!args.ok()) return Fail("render", args.status());
  if (args->Has("help") || args->positional().empty() || !args->Has("out")) {
    std::printf(
        "usage: dejaview render FRAME... --out PNG [--title T]...\n"
        "  FRAME: a .bin (KITTI), .pcd or .ply file; one row per frame, each titled by its\n"
        "  --title (in order) or its path: top-down by height, sensor view by range and by\n"
        "  intensity, on the same axes and colour scales for every row\n");
    return args->Has("help") ? kOk : kUsage;
  }
  const std::vector<std::string> titles = args->GetAll("title");
  if (titles.size() > args->positional().size()) {
    return Fail("render", Status::InvalidArgument("more --title than frames"));
  }
  std::vector<PointCloud> clouds;
  for (const auto& path : args->positional()) {
    auto cloud = ReadPointCloudFile(path);
    if (!cloud.ok()) return Fail("render", cloud.status());
    clouds.push_back(std::move(cloud).value());
  }
  std::vector<bench::RenderedFrame> frames;
  for (size_t i = 0; i < clouds.size(); ++i) {
    frames.push_back({i < titles.size() ? titles[i] : args->positional()[i], &clouds[i]});
  }
  const Status s = bench::RenderFramesPng(frames, args->Get("out"));
  if (!s.ok()) return Fail("render", s);
  std::printf("wrote %s (%zu frames)\n", args->Get("out").c_str(), frames.size());
  return kOk;
}

}  // namespace dv::cli
