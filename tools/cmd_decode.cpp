// dejaview decode: delta files -> frames (KITTI layout, with intensity) and decoded poses.
#include <cstdio>
#include <filesystem>

#include "codec_io.h"
#include "commands.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/kitti.h"
#include "dejaview/codec/codec.h"
#include "progress.h"

namespace dv::cli {

int RunDecode(int argc, char** argv) {
  auto args =
      Args::Parse(argc, argv, {"map", "out", "map-budget-mb", "threads"}, {"help", "quiet"});
  if (!args.ok()) return Fail("decode", args.status());
  if (args->Has("help") || args->positional().size() != 1 || !args->Has("out")) {
    std::printf(
        "usage: dejaview decode DELTADIR --map MAPDIR --out OUTDRIVE\n"
        "       dejaview decode FILE.dvd [--map MAPDIR] --out FRAME.bin\n"
        "  [--threads N] [--quiet]\n"
        "  writes OUTDRIVE/velodyne/<frame>.bin (x, y, z, intensity) and OUTDRIVE/poses.txt;\n"
        "  N threads share each frame's decoding (default 1), the frames are the same with any "
        "N\n");
    return args->Has("help") ? kOk : kUsage;
  }
  auto threads = ThreadsArg(*args);
  if (!threads.ok()) return Fail("decode", threads.status());
  auto map = OpenMapArg(*args);
  if (!map.ok()) return Fail("decode", map.status());
  const std::string input = args->positional()[0];
  auto files = DeltaFiles(input);
  if (!files.ok()) return Fail("decode", files.status());
  const bool single = !std::filesystem::is_directory(input);
  const std::string out = args->Get("out");
  if (!single) {
    Status s = MakeDirs(out + "/velodyne");
    if (!s.ok()) return Fail("decode", s);
  }
  std::vector<Pose> poses;
  size_t points = 0;
  codec::Decoder decoder(map->get());
  Progress progress("decode", "frames", args->Has("quiet"));
  for (size_t k = 0; k < files->size(); ++k) {
    const std::string& f = (*files)[k];
    auto bytes = ReadFileBytes(f, uint64_t(1) << 28);
    if (!bytes.ok()) return Fail("decode", bytes.status());
    auto frame = decoder.Decode(bytes->data(), bytes->size(), *threads);
    if (!frame.ok()) return Fail("decode", frame.status().WithContext(f));
    const std::string stem = std::filesystem::path(f).stem().string();
    Status s = WriteKittiBin(single ? out : out + "/velodyne/" + stem + ".bin", frame->cloud);
    if (!s.ok()) return Fail("decode", s);
    poses.push_back(frame->T_map_sensor);
    points += frame->cloud.size();
    progress.Update(k + 1, files->size());
  }
  progress.Finish();
  if (!single) {
    Status s = WriteKittiPoses(out + "/poses.txt", poses);
    if (!s.ok()) return Fail("decode", s);
  }
  std::printf("decoded %zu frames, %zu points into %s\n", files->size(), points, out.c_str());
  return kOk;
}

}  // namespace dv::cli
