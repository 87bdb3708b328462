// Whole-file I/O with the two properties every dejaview file format relies on: reads are bounded
// (a file larger than max_bytes is an error, not an allocation) and writes are durable (written
// to a temporary name, fsync'd, renamed, and the directory fsync'd).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dejaview/base/status.h"

namespace dv {

constexpr uint64_t kDefaultMaxFileBytes = uint64_t(1) << 30;  // 1 GiB

StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path,
                                             uint64_t max_bytes = kDefaultMaxFileBytes);
StatusOr<std::string> ReadFileText(const std::string& path,
                                   uint64_t max_bytes = kDefaultMaxFileBytes);
// mode is the file's permission bits from its creation on (0600 for a secret key: never
// readable by others, not even between create and a later chmod).
Status WriteFileAtomic(const std::string& path, const void* data, size_t size,
                       unsigned mode = 0644);
inline Status WriteFileAtomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  return WriteFileAtomic(path, bytes.data(), bytes.size());
}
inline Status WriteFileAtomic(const std::string& path, const std::string& text,
                              unsigned mode = 0644) {
  return WriteFileAtomic(path, text.data(), text.size(), mode);
}
// WriteFileAtomic for a file written piece by piece, for a writer that has the pieces one after
// another (an export's frames as they are decoded) and should neither wait for the last to write
// the first nor hold them all: they go to path.tmp as they come, Commit fsyncs it, renames it to
// path and fsyncs the directory. Destroyed before Commit, it removes path.tmp.
class AtomicFileWriter {
 public:
  static StatusOr<std::unique_ptr<AtomicFileWriter>> Create(const std::string& path,
                                                            unsigned mode = 0644);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status Append(const void* data, size_t size);
  // Overwrites bytes already appended (a header whose fields are known at the end).
  Status WriteAt(uint64_t offset, const void* data, size_t size);
  Status Commit();

 private:
  AtomicFileWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};
// A file holding one number that must survive a crash intact (the spool's cursor, the agent's
// source epoch): magic[8] | value:u64 | Mask(CRC32C(the 16 bytes before)):u32, little-endian,
// replaced with WriteFileAtomic. ReadU64File: NotFound when missing, Corruption when the file is
// not exactly that (wrong size, magic or CRC), the read's own error otherwise.
Status WriteU64File(const std::string& path, const char (&magic)[8], uint64_t value);
StatusOr<uint64_t> ReadU64File(const std::string& path, const char (&magic)[8]);
// fsyncs a directory so that a rename or create inside it survives power loss.
Status FsyncDir(const std::string& dir);
// Creates dir and its parents; ok when it exists.
Status MakeDirs(const std::string& dir);

}  // namespace dv
