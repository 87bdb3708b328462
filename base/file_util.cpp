#include "dejaview/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dejaview/base/bytes.h"
#include "dejaview/base/crc32c.h"

namespace dv {
namespace {

Status Errno(const std::string& path, const char* what) {
  return Status::IoError(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Errno(path, "open");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Errno(path, "stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  if (uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    return Status::OutOfRange(path + ": file is " + std::to_string(st.st_size) +
                              " bytes, limit is " + std::to_string(max_bytes));
  }
  std::vector<uint8_t> buf(size_t(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ::close(fd);
      return Errno(path, "read");
    }
    if (r == 0) break;
    got += size_t(r);
  }
  ::close(fd);
  buf.resize(got);
  return buf;
}

StatusOr<std::string> ReadFileText(const std::string& path, uint64_t max_bytes) {
  DV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path, max_bytes));
  return std::string(bytes.begin(), bytes.end());
}

Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(dir, "open directory");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno(dir, "fsync directory");
  return Status::Ok();
}

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": create directory: " + ec.message());
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const void* data, size_t size, unsigned mode) {
  DV_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Create(path, mode));
  DV_RETURN_IF_ERROR(file->Append(data, size));
  return file->Commit();
}

StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(const std::string& path,
                                                                     unsigned mode) {
  const std::string tmp = path + ".tmp";
  // A stale tmp left by a crash would keep its old mode through O_CREAT: create it afresh.
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode));
  if (fd < 0) return Errno(tmp, "open");
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink((path_ + ".tmp").c_str());
}

Status AtomicFileWriter::Append(const void* data, size_t size) {
  if (fd_ < 0) return Status::InvalidArgument(path_ + ": already committed");
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd_, p + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno(path_ + ".tmp", "write");
    done += size_t(w);
  }
  return Status::Ok();
}

Status AtomicFileWriter::WriteAt(uint64_t offset, const void* data, size_t size) {
  if (fd_ < 0) return Status::InvalidArgument(path_ + ": already committed");
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::pwrite(fd_, p + done, size - done, off_t(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno(path_ + ".tmp", "write");
    done += size_t(w);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return Status::InvalidArgument(path_ + ": already committed");
  const std::string tmp = path_ + ".tmp";
  if (::fsync(fd_) != 0) return Errno(tmp, "fsync");
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const Status st = Errno(path_, "rename");
    ::unlink(tmp.c_str());
    return st;
  }
  return FsyncDir(std::filesystem::path(path_).parent_path().string());
}

Status WriteU64File(const std::string& path, const char (&magic)[8], uint64_t value) {
  ByteWriter w;
  w.Bytes(magic, 8);
  w.U64(value);
  w.U32(crc32c::Mask(crc32c::Value(w.buffer().data(), 16)));
  return WriteFileAtomic(path, w.buffer());
}

StatusOr<uint64_t> ReadU64File(const std::string& path, const char (&magic)[8]) {
  constexpr size_t kBytes = 20;
  auto bytes = ReadFileBytes(path, kBytes);
  if (!bytes.ok()) {
    if (bytes.status().code() != Status::Code::kOutOfRange) return bytes.status();
    return Status::Corruption(path + ": longer than " + std::to_string(kBytes) + " bytes");
  }
  ByteReader r(*bytes);
  char found[8];
  uint64_t value = 0;
  uint32_t crc = 0;
  r.Bytes(found, 8);
  r.U64(&value);
  r.U32(&crc);
  if (r.failed() || r.remaining() != 0)
    return Status::Corruption(path + ": " + std::to_string(bytes->size()) + " bytes, expected " +
                              std::to_string(kBytes));
  if (std::memcmp(found, magic, 8) != 0) return Status::Corruption(path + ": bad magic");
  if (crc32c::Unmask(crc) != crc32c::Value(bytes->data(), 16))
    return Status::Corruption(path + ": CRC mismatch");
  return value;
}

}  // namespace dv
