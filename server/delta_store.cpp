#include "dejaview/server/delta_store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dejaview/base/file_util.h"

namespace dv::server {

StatusOr<std::unique_ptr<DeltaStore>> DeltaStore::Open(const std::string& root) {
  DV_RETURN_IF_ERROR(MakeDirs(root));
  return std::unique_ptr<DeltaStore>(new DeltaStore(root));
}

StatusOr<std::pair<std::string, uint64_t>> DeltaStore::Append(const transport::SpoolRecord& rec) {
  const std::string file = FileFor(rec.meta);
  auto it = writers_.find(file);
  if (it == writers_.end()) {
    const std::string dir = root_ + "/" + rec.meta.vehicle + "/" + rec.meta.drive;
    DV_RETURN_IF_ERROR(MakeDirs(dir));
    DV_ASSIGN_OR_RETURN(transport::LogWriter w, transport::LogWriter::Open(root_ + "/" + file));
    // The new file's directory entries must survive a power cut before anything is acked.
    DV_RETURN_IF_ERROR(FsyncDir(dir));
    DV_RETURN_IF_ERROR(FsyncDir(root_ + "/" + rec.meta.vehicle));
    it = writers_.emplace(file, std::move(w)).first;
  }
  const std::vector<uint8_t> body = transport::EncodeRecord(rec);
  DV_ASSIGN_OR_RETURN(const uint64_t offset, it->second.Append(body.data(), body.size()));
  touched_[file] = true;
  return std::make_pair(file, offset);
}

StatusOr<std::vector<std::pair<std::string, uint64_t>>> DeltaStore::SyncTouched() {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [file, unused] : touched_) {
    transport::LogWriter& w = writers_.at(file);
    DV_RETURN_IF_ERROR(w.Sync());
    out.emplace_back(file, w.file_size());
  }
  touched_.clear();
  return out;
}

StatusOr<std::vector<std::string>> DeltaStore::Files() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().filename() == "deltas.log") {
      out.push_back(std::filesystem::relative(it->path(), root_).string());
    }
  }
  if (ec) return Status::IoError(root_ + ": list store: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<transport::SpoolRecord> DeltaStore::ReadAt(const std::string& file,
                                                    uint64_t offset) const {
  DV_ASSIGN_OR_RETURN(transport::LogReader reader,
                      transport::LogReader::Open(root_ + "/" + file, offset));
  std::vector<uint8_t> body;
  uint64_t at = 0;
  DV_ASSIGN_OR_RETURN(const bool found, reader.Next(&body, &at));
  if (!found || at != offset) {
    return Status::Corruption(file + ": no intact record at offset " + std::to_string(offset));
  }
  return transport::DecodeRecord(body.data(), body.size());
}

Status DeltaStore::Truncate(const std::string& file, uint64_t size) {
  const std::string path = root_ + "/" + file;
  if (::truncate(path.c_str(), off_t(size)) != 0) {
    return Status::IoError(path + ": truncate: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace dv::server
