// The codec's cross-architecture check (scripts/arm64.sh, a CI stage): on the first four frames
// of a real drive, a map from frames 0 and 2 (with its codec priors), frames 1 and 3 coded as
// deltas against it and frame 1 coded intra. Writes the map's manifest and every payload to
// OUT_DIR and checks that each decodes within the tolerance both ways. The same program built
// for amd64 and for arm64 (run under qemu-user) must write the same bytes: the CI stage compares
// the two folders with cmp.
//   usage: codec_smoke DRIVE OUT_DIR
#include <cstdio>
#include <filesystem>

#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/bench/metrics.h"
#include "dejaview/codec/codec.h"
#include "dejaview/maps/route_map.h"

namespace dv {
namespace {

constexpr double kToleranceM = 0.1;

// The first n frames of a drive.
Drive Head(Drive d, size_t n) {
  d.frame_names.resize(n);
  d.frame_paths.resize(n);
  if (!d.poses.empty()) d.poses.resize(n);
  if (!d.poses_prior.empty()) d.poses_prior.resize(n);
  if (!d.timestamps_s.empty()) d.timestamps_s.resize(n);
  return d;
}

// Codes frame i (against map, or intra when null), writes OUT/name, decodes and checks the bound.
Status CodeFrame(const Drive& drive, size_t i, maps::RouteMap* map, const std::string& path) {
  DV_ASSIGN_OR_RETURN(PointCloud cloud, ReadPointCloudFile(drive.frame_paths[i]));
  RemoveNonFinite(&cloud);
  codec::EncoderParams params;
  params.tolerance_m = kToleranceM;
  codec::Encoder encoder(map);
  DV_ASSIGN_OR_RETURN(
      const std::vector<uint8_t> bytes,
      encoder.Encode(cloud, drive.poses[i], {i, int64_t(i) * 100'000'000, 0}, params));
  DV_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  codec::Decoder decoder(map);
  DV_ASSIGN_OR_RETURN(const codec::DecodedFrame decoded,
                      decoder.Decode(bytes.data(), bytes.size()));
  const double hausdorff_m = bench::CompareFrames(cloud.xyz, decoded.cloud.xyz).hausdorff_m();
  std::printf("%s: %zu points, %zu bytes, Hausdorff %.4f m\n", path.c_str(), cloud.size(),
              bytes.size(), hausdorff_m);
  if (hausdorff_m > kToleranceM) {
    return Status::Corruption(path + ": Hausdorff " + std::to_string(hausdorff_m) +
                              " m over the tolerance");
  }
  return Status::Ok();
}

Status Run(const std::string& drive_dir, const std::string& out) {
  DV_ASSIGN_OR_RETURN(const Drive whole, OpenDrive(drive_dir));
  if (whole.size() < 4 || whole.poses.size() != whole.size()) {
    return Status::InvalidArgument(drive_dir + ": needs 4 frames with poses");
  }
  const Drive drive = Head(whole, 4);
  DV_RETURN_IF_ERROR(MakeDirs(out));
  maps::BuildOptions options;
  options.resolution_m = kToleranceM;
  options.every = 2;
  const std::string map_dir = out + "/map";
  std::filesystem::remove_all(map_dir);
  DV_RETURN_IF_ERROR(codec::BuildMapWithPriors({drive}, options, map_dir));
  DV_ASSIGN_OR_RETURN(auto map, maps::OpenMap(map_dir, 0));
  DV_RETURN_IF_ERROR(CodeFrame(drive, 1, nullptr, out + "/intra_1.dvd"));
  DV_RETURN_IF_ERROR(CodeFrame(drive, 1, map.get(), out + "/delta_1.dvd"));
  return CodeFrame(drive, 3, map.get(), out + "/delta_3.dvd");
}

}  // namespace
}  // namespace dv

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: codec_smoke DRIVE OUT_DIR\n");
    return 2;
  }
  const dv::Status s = dv::Run(argv[1], argv[2]);
  if (!s.ok()) {
    std::fprintf(stderr, "codec_smoke: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
