#include "dejaview/store/disk_tier.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "dejaview/base/file_util.h"

namespace dv::store {

namespace fs = std::filesystem;

StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(const std::string& dir, uint64_t budget_bytes,
                                                   bool direct_io) {
  DV_RETURN_IF_ERROR(MakeDirs(dir));
  std::unique_ptr<DiskTier> tier(new DiskTier(dir, budget_bytes, direct_io));
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string file = it->path().filename().string();
    if (it->path().extension() == ".tmp") {
      fs::remove(it->path(), ec);  // a write torn by a crash: never acknowledged
      continue;
    }
    auto id = ObjectId::FromHex(file);
    if (!id.ok()) {
      return Status::Corruption(it->path().string() + ": not an object file (" +
                                id.status().message() + ")");
    }
    const uint64_t size = it->file_size();
    tier->sizes_[*id] = size;
    tier->bytes_ += size;
  }
  if (ec) return Status::IoError(dir + ": scan: " + ec.message());
  return tier;
}

std::string DiskTier::PathOf(const ObjectId& id) const {
  const std::string hex = id.Hex();
  return dir_ + "/" + hex.substr(0, 2) + "/" + hex;
}

Status DiskTier::Put(const ObjectId& id, const uint8_t* data, size_t size) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sizes_.count(id)) return Status::Ok();
    if (bytes_ + size > budget_bytes_) {
      return Status::Unavailable("disk tier " + dir_ + ": full (" + std::to_string(bytes_) +
                                 " of " + std::to_string(budget_bytes_) + " bytes used, object " +
                                 id.Hex() + " needs " + std::to_string(size) + ")");
    }
    bytes_ += size;  // reserve, so concurrent Puts cannot overrun the budget together
    reserved_ += size;
  }
  const std::string path = PathOf(id);
  Status st = MakeDirs(path.substr(0, path.rfind('/')));
  if (st.ok()) st = WriteFileAtomic(path, data, size);
  std::lock_guard<std::mutex> lock(mu_);
  reserved_ -= size;
  if (!st.ok() || !sizes_.emplace(id, size).second) bytes_ -= size;
  return st;
}

StatusOr<uint64_t> DiskTier::Size(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(id);
  if (it == sizes_.end()) return Status::NotFound("disk tier: no object " + id.Hex());
  return it->second;
}

Status DiskTier::ReadRange(const ObjectId& id, uint64_t offset, uint64_t length, uint8_t* out) {
  DV_ASSIGN_OR_RETURN(const uint64_t size, Size(id));
  DV_RETURN_IF_ERROR(CheckRange(name(), id, size, offset, length));
  const std::string path = PathOf(id);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct_io_ ? O_DIRECT : 0));
  if (fd < 0) return Status::IoError(path + ": open: " + std::strerror(errno));
  if (direct_io_) {
    const Status st = ReadDirect(fd, path, offset, length, out);
    ::close(fd);
    return st;
  }
  uint64_t got = 0;
  while (got < length) {
    const ssize_t r = ::pread(fd, out + got, length - got, off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const std::string why = r < 0 ? std::strerror(errno) : "file shorter than recorded";
      ::close(fd);
      return Status::IoError(path + ": read: " + why);
    }
    got += uint64_t(r);
  }
  ::close(fd);
  return Status::Ok();
}

// O_DIRECT needs block-aligned offsets, lengths and memory: read the aligned span around the
// range into an aligned buffer and copy the range out (the last block may end at end of file).
Status DiskTier::ReadDirect(int fd, const std::string& path, uint64_t offset, uint64_t length,
                            uint8_t* out) {
  constexpr uint64_t kBlock = 4096;
  const uint64_t start = offset & ~(kBlock - 1);
  const uint64_t span = ((offset + length + kBlock - 1) & ~(kBlock - 1)) - start;
  void* raw = nullptr;
  if (::posix_memalign(&raw, kBlock, span) != 0) return Status::IoError(path + ": out of memory");
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t*>(raw), &std::free);
  const uint64_t need = offset + length - start;
  uint64_t got = 0;
  while (got < need) {
    const ssize_t r = ::pread(fd, buf.get() + got, span - got, off_t(start + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return Status::IoError(
          path + ": direct read: " + (r < 0 ? std::strerror(errno) : "file shorter than recorded"));
    }
    got += uint64_t(r);
  }
  std::memcpy(out, buf.get() + (offset - start), length);
  return Status::Ok();
}

std::vector<ObjectId> DiskTier::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectId> ids;
  ids.reserve(sizes_.size());
  for (const auto& [id, size] : sizes_) ids.push_back(id);
  return ids;
}

Status DiskTier::Delete(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(id);
  if (it == sizes_.end()) return Status::NotFound("disk tier: no object " + id.Hex());
  const std::string path = PathOf(id);
  if (::unlink(path.c_str()) != 0)
    return Status::IoError(path + ": unlink: " + std::strerror(errno));
  bytes_ -= it->second;
  sizes_.erase(it);
  return Status::Ok();
}

uint64_t DiskTier::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_ - reserved_;
}

uint64_t DiskTier::objects() {
  std::lock_guard<std::mutex> lock(mu_);
  return sizes_.size();
}

}  // namespace dv::store
