#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "dejaview/base/pcd.h"

namespace fs = std::filesystem;

namespace dv::cli {
namespace {

constexpr const char* kUsageText =
    "usage: dejaview convert IN OUT [--ascii|--binary]\n"
    "       dejaview convert IN_DRIVE OUT_DRIVE --to bin|pcd|ply [--ascii|--binary]\n"
    "Formats by extension: .bin (KITTI), .pcd (PCD v0.7), .ply (PLY). PCD and PLY are written\n"
    "binary unless --ascii. PCD to PCD keeps WIDTH x HEIGHT, every field and NaN points; other\n"
    "conversions keep x y z intensity ring time. A drive is converted frame by frame into\n"
    "OUT_DRIVE/velodyne, with its poses, timestamps and labels copied.\n"
    "Exit codes: 0 ok, 1 I/O failure, 2 usage, 3 malformed input.\n";

size_t CountNonFinite(const PointCloud& cloud) {
  size_t n = 0;
  for (const auto& p : cloud.xyz) n += p.allFinite() ? 0 : 1;
  return n;
}

bool IsPcd(const std::string& path) { return fs::path(path).extension() == ".pcd"; }

// PCD to PCD keeps the cloud as it is: WIDTH x HEIGHT, every field, non-finite points.
Status ConvertPcd(const std::string& in, const std::string& out, CloudEncoding encoding,
                  bool quiet) {
  DV_ASSIGN_OR_RETURN(const PcdTable table, ReadPcdTable(in));
  DV_RETURN_IF_ERROR(WriteFileAtomic(out, EncodePcdTable(table, encoding)));
  if (!quiet) {
    std::printf("%s -> %s: %u x %u points, %zu fields kept, %ju bytes\n", in.c_str(), out.c_str(),
                table.width, table.height, table.fields.size(), uintmax_t(fs::file_size(out)));
  }
  return Status::Ok();
}

Status ConvertFile(const std::string& in, const std::string& out, CloudEncoding encoding,
                   bool quiet) {
  if (IsPcd(in) && IsPcd(out)) return ConvertPcd(in, out, encoding, quiet);
  DV_ASSIGN_OR_RETURN(PointCloud cloud, ReadPointCloudFile(in));
  DV_RETURN_IF_ERROR(WritePointCloudFile(out, cloud, encoding));
  if (!quiet) {
    std::printf("%s -> %s: %zu points (%zu non-finite kept), %ju bytes\n", in.c_str(), out.c_str(),
                cloud.size(), CountNonFinite(cloud), uintmax_t(fs::file_size(out)));
  }
  return Status::Ok();
}

Status CopyIfPresent(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (!fs::exists(from, ec)) return Status::Ok();
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::IoError(from.string() + ": copy to " + to.string() + ": " + ec.message());
  return Status::Ok();
}

Status ConvertDrive(const std::string& in, const std::string& out, const std::string& ext,
                    CloudEncoding encoding) {
  DV_ASSIGN_OR_RETURN(Drive drive, OpenDrive(in));
  const std::string frames = (fs::path(out) / "velodyne").string();
  DV_RETURN_IF_ERROR(MakeDirs(frames));
  for (size_t i = 0; i < drive.size(); ++i) {
    const std::string dst = frames + "/" + drive.frame_names[i] + "." + ext;
    DV_RETURN_IF_ERROR(ConvertFile(drive.frame_paths[i], dst, encoding, /*quiet=*/true));
  }
  for (const char* name : {"poses.txt", "poses_prior.txt", "timestamps.txt", "labels"}) {
    DV_RETURN_IF_ERROR(CopyIfPresent(fs::path(in) / name, fs::path(out) / name));
  }
  std::printf("%s -> %s: %zu frames as .%s\n", in.c_str(), out.c_str(), drive.size(), ext.c_str());
  return Status::Ok();
}

}  // namespace

int RunConvert(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {"to"}, {"ascii", "binary", "help"});
  if (!args.ok()) return Fail("convert", args.status());
  if (args->Has("help")) {
    std::printf("%s", kUsageText);
    return kOk;
  }
  if (args->positional().size() != 2) {
    std::fprintf(stderr, "%s", kUsageText);
    return kUsage;
  }
  if (args->Has("ascii") && args->Has("binary")) {
    return Fail("convert", Status::InvalidArgument("--ascii and --binary exclude each other"));
  }
  const std::string& in = args->positional()[0];
  const std::string& out = args->positional()[1];
  const CloudEncoding encoding =
      args->Has("ascii") ? CloudEncoding::kAscii : CloudEncoding::kBinary;
  std::error_code ec;
  Status s;
  if (fs::is_directory(in, ec)) {
    const std::string ext = args->Get("to");
    if (ext != "bin" && ext != "pcd" && ext != "ply") {
      return Fail("convert",
                  Status::InvalidArgument("converting a drive needs --to bin, pcd or ply (got '" +
                                          ext + "')"));
    }
    s = ConvertDrive(in, out, ext, encoding);
  } else {
    if (args->Has("to")) {
      return Fail("convert", Status::InvalidArgument("--to is for drives; a file's output format "
                                                     "comes from the OUT extension"));
    }
    s = ConvertFile(in, out, encoding, /*quiet=*/false);
  }
  return s.ok() ? kOk : Fail("convert", s);
}

}  // namespace dv::cli
