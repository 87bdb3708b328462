#include "dejaview/maps/map_root.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "dejaview/base/crc32c.h"
#include "dejaview/base/file_util.h"
#include "dejaview/maps/route_map.h"
#include "manifest.h"

namespace dv::maps {
namespace {

namespace fs = std::filesystem;

bool IsVersionName(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

StatusOr<std::vector<uint8_t>> ReadTileFile(const std::string& map_dir, const TileInfo& t) {
  const std::string path = map_dir + "/" + TileFileName(t.tile);
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path, t.bytes));
  if (bytes.size() != t.bytes || crc32c::Value(bytes.data(), bytes.size()) != t.crc32c)
    return Status::Corruption(path + ": tile does not match the manifest (size or checksum)");
  return bytes;
}

StatusOr<std::string> ReadLatest(const std::string& root) {
  const std::string path = root + "/LATEST";
  if (!fs::exists(path)) return std::string();
  DV_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, 64));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!IsVersionName(text)) return Status::Corruption(path + ": not a 16-hex-digit map version");
  return text;
}

StatusOr<std::string> VerifyMap(const std::string& dir) {
  DV_ASSIGN_OR_RETURN(auto map, OpenMap(dir, 0));
  for (const TileInfo& t : map->tiles()) DV_RETURN_IF_ERROR(ReadTileFile(dir, t).status());
  return map->version();
}

Status CommitVersion(const std::string& root, const std::string& staging,
                     const std::string& version) {
  DV_ASSIGN_OR_RETURN(const std::string found, VerifyMap(staging));
  if (found != version)
    return Status::Corruption(staging + ": holds map version " + found + ", not " + version);
  const std::string final_dir = root + "/" + version;
  std::error_code ec;
  if (fs::exists(final_dir)) {
    // Already committed before (a crash before LATEST, or a re-publish): that copy was verified.
    fs::remove_all(staging, ec);
  } else {
    fs::rename(staging, final_dir, ec);
    if (ec) return Status::IoError("rename " + staging + " -> " + final_dir + ": " + ec.message());
    DV_RETURN_IF_ERROR(FsyncDir(root));
  }
  return WriteFileAtomic(root + "/LATEST", version + "\n");
}

StatusOr<size_t> PruneVersions(const std::string& root, const std::vector<std::string>& keep) {
  DV_ASSIGN_OR_RETURN(const std::string latest, ReadLatest(root));
  std::vector<fs::path> doomed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !IsVersionName(name) || name == latest) continue;
    if (std::find(keep.begin(), keep.end(), name) != keep.end()) continue;
    doomed.push_back(e.path());
  }
  if (ec) return Status::IoError(root + ": " + ec.message());
  for (const fs::path& d : doomed) {
    fs::remove_all(d, ec);
    if (ec) return Status::IoError("remove " + d.string() + ": " + ec.message());
  }
  if (!doomed.empty()) DV_RETURN_IF_ERROR(FsyncDir(root));
  return doomed.size();
}

StatusOr<std::string> PublishMap(const std::string& map_dir, const std::string& root) {
  DV_ASSIGN_OR_RETURN(auto map, OpenMap(map_dir, 0));
  const std::string staging = root + "/.staging-" + map->version();
  std::error_code ec;
  fs::remove_all(staging, ec);
  const Status st = [&]() -> Status {
    DV_RETURN_IF_ERROR(MakeDirs(staging + "/tiles"));
    for (const TileInfo& t : map->tiles()) {
      DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, ReadTileFile(map_dir, t));
      DV_RETURN_IF_ERROR(WriteFileAtomic(staging + "/" + TileFileName(t.tile), bytes));
    }
    // The manifest is copied byte for byte: its bytes are the version.
    DV_ASSIGN_OR_RETURN(const std::vector<uint8_t> manifest,
                        ReadFileBytes(map_dir + "/MANIFEST", kMaxManifestBytes));
    DV_RETURN_IF_ERROR(WriteFileAtomic(staging + "/MANIFEST", manifest));
    return CommitVersion(root, staging, map->version());
  }();
  if (!st.ok()) {
    fs::remove_all(staging, ec);
    return st;
  }
  return map->version();
}

}  // namespace dv::maps
